"""The group chat API of a real server: make a group, change its members, ask a member to
speak (the reply streams over the WebSocket), and import SillyTavern group chats."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets

from storyloom.plugins import node_registry
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.testing.st_documents import (
    card_document,
    card_png,
    chat_message,
    group_chat_jsonl,
    group_document,
)
from tests.server.conftest import chat_home

TIMEOUT_S = 30
Json = dict[str, Any]

CARDS: dict[str, Json] = {
    "ann": {"name": "Ann", "description": "ANN-CARD", "first_mes": "Ann waves."},
    "bo": {"name": "Bo", "description": "BO-CARD", "first_mes": "Bo grunts."},
    "cy": {"name": "Cy", "description": "CY-CARD", "first_mes": "Cy bows."},
}


@pytest.fixture
def server(tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]) -> Any:
    home = chat_home(tmp_path / "home", llm, CARDS)
    return start_server(home, node_registry=node_registry(entry_points=False))


@pytest.fixture
async def api(server: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT_S) as client:
        yield client


async def new_group(api: httpx.AsyncClient, members: list[str], **body: Any) -> Json:
    response = await api.post("/api/groups", json={"members": members, **body})
    assert response.status_code == 201, response.text
    created: Json = response.json()
    return created


async def test_a_group_is_made_shown_and_changed_over_http(api: httpx.AsyncClient) -> None:
    chat = await new_group(api, ["ann", "bo", "cy"], group={"activation_strategy": "list"})
    assert chat["settings"]["group"]["activation_strategy"] == "list"
    view = (await api.get(f"/api/chats/{chat['id']}/group")).json()
    assert [(m["character_id"], m["name"], m["muted"]) for m in view["members"]] == [
        ("ann", "Ann", False),
        ("bo", "Bo", False),
        ("cy", "Cy", False),
    ]
    group = view["group"]
    group["members"][1]["muted"] = True
    group["activation_strategy"] = "manual"
    changed = await api.put(
        f"/api/chats/{chat['id']}/group", json={"group": group, "expected_version": view["version"]}
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["members"][1]["muted"] is True
    stale = await api.put(
        f"/api/chats/{chat['id']}/group", json={"group": group, "expected_version": view["version"]}
    )
    assert stale.status_code == 409


async def test_who_speaks_next_streams_that_members_reply(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    chat = await new_group(api, ["ann", "bo", "cy"])
    async with websockets.connect(server.ws_url) as ws:
        await ws.recv()
        await ws.send(json.dumps({"type": "chat:subscribe", "conversationId": chat["id"]}))
        llm.script(Reply(text="Bo speaks now."))
        response = await api.post(f"/api/chats/{chat['id']}/group/generate", json={"speaker": "bo"})
        assert response.status_code == 202, response.text
        assert response.json()["message"]["name"] == "Bo"
        while True:
            event = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT_S))
            if event["type"] == "chat:done":
                break
    view = (await api.get(f"/api/chats/{chat['id']}")).json()
    last = view["messages"][-1]
    assert (last["name"], last["content"]) == ("Bo", "Bo speaks now.")
    # The preset is recorded even without a picture: the page shows its generated face.
    assert last["extra"]["speaker"] == {"id": "bo", "name": "Bo", "preset": "bo"}
    system = [m["content"] for m in llm.chat_requests[-1]["messages"] if m["role"] == "system"]
    assert any("BO-CARD" in text for text in system)


async def test_manual_order_answers_the_users_message_with_nobody(api: httpx.AsyncClient) -> None:
    chat = await new_group(api, ["ann", "bo"], group={"activation_strategy": "manual"})
    sent = await api.post(f"/api/chats/{chat['id']}/messages", json={"text": "Hi both"})
    assert sent.status_code == 202, sent.text
    assert sent.json()["assistant_message"] is None
    assert (await api.get(f"/api/chats/{chat['id']}")).json()["running"] is False


async def test_bad_group_requests_say_what_is_wrong(api: httpx.AsyncClient) -> None:
    one = await api.post("/api/groups", json={"members": ["ann"]})
    assert one.status_code == 422
    missing = await api.post("/api/groups", json={"members": ["ann", "nobody"]})
    assert missing.status_code == 404
    chat = await new_group(api, ["ann", "bo"])
    outsider = await api.post(f"/api/chats/{chat['id']}/group/generate", json={"speaker": "zed"})
    assert outsider.status_code == 422
    assert "zed" in outsider.json()["error"]["message"]


def st_group_files(*, with_header: bool = False) -> tuple[bytes, bytes]:
    group = group_document(
        ["Ann.png", "Dora.png"],
        disabled_members=["Dora.png"],
        activation_strategy=1,
        generation_mode=1,
        generation_mode_join_prefix="<FIELDNAME>:",
    )
    lines = [
        chat_message("Ann", "Hello from Ann.", original_avatar="Ann.png"),
        chat_message("User", "Hi Dora!", is_user=True, force_avatar="User.png"),
        chat_message(
            "Dora",
            "Dora here.",
            original_avatar="Dora.png",
            swipes=["Dora here.", "Dora again."],
            swipe_id=0,
        ),
    ]
    header = {"chat_metadata": {"integrity": "abc"}, "user_name": "unused"} if with_header else None
    return json.dumps(group).encode(), group_chat_jsonl(lines, header=header).encode()


async def test_a_sillytavern_group_chat_imports_with_its_members_and_speakers(
    api: httpx.AsyncClient, llm: ReplayLLMServer
) -> None:
    group, chat = st_group_files()
    dora = card_png(card_document("Dora", description="DORA-CARD"))
    response = await api.post(
        "/api/groups/import",
        files=[
            ("group", ("1726776209123.json", group, "application/json")),
            ("chat", ("1726776209123.jsonl", chat, "application/jsonl")),
            ("cards", ("Dora.png", dora, "image/png")),
        ],
    )
    assert response.status_code == 201, response.text
    imported = response.json()
    assert imported["messages"] == 3 and imported["siblings"] == 1
    # Ann's card came with no file, but the project has a character of that name.
    assert imported["members"]["Ann.png"] == "ann"
    assert imported["members"]["Dora.png"]
    settings = imported["conversation"]["settings"]["group"]
    assert settings["activation_strategy"] == "list"
    assert settings["generation_mode"] == "append"
    assert [(m["character_id"], m["muted"]) for m in settings["members"]] == [
        ("Ann.png", False),
        ("Dora.png", True),
    ]
    assert imported["conversation"]["title"] == "The Party"
    cid = imported["conversation"]["id"]
    view = (await api.get(f"/api/chats/{cid}/group")).json()
    assert [m["name"] for m in view["members"]] == ["Ann", "Dora"]
    # The imported chat continues: a swipe of Dora's reply is written as Dora.
    messages = (await api.get(f"/api/chats/{cid}")).json()["messages"]
    llm.script(Reply(text="Dora, once more."))
    swiped = await api.post(
        f"/api/chats/{cid}/generate", json={"kind": "swipe", "message_id": messages[-1]["id"]}
    )
    assert swiped.status_code == 202, swiped.text
    assert swiped.json()["message"]["extra"]["speaker"]["id"] == "Dora.png"


async def test_a_group_file_that_does_not_parse_is_refused_naming_file_and_field(
    api: httpx.AsyncClient,
) -> None:
    before = (await api.get("/api/chats")).json()["conversations"]
    _, chat = st_group_files(with_header=True)
    bad = json.dumps({"id": "7", "members": "Ann.png", "activation_strategy": 9}).encode()
    response = await api.post(
        "/api/groups/import",
        files=[
            ("group", ("7.json", bad, "application/json")),
            ("chat", ("7.jsonl", chat, "application/jsonl")),
        ],
    )
    assert response.status_code == 422
    message = response.json()["error"]["message"]
    assert "7.json" in message and "members" in message and "activation_strategy" in message
    stranger = card_png(card_document("Zed"))
    group, _ = st_group_files()
    refused = await api.post(
        "/api/groups/import",
        files=[
            ("group", ("g.json", group, "application/json")),
            ("chat", ("g.jsonl", chat, "application/jsonl")),
            ("cards", ("Zed.png", stranger, "image/png")),
        ],
    )
    assert refused.status_code == 422
    assert "Zed.png" in refused.json()["error"]["message"]
    assert (await api.get("/api/chats")).json()["conversations"] == before
