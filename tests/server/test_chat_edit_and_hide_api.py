"""Editing in place, message versions, hiding from the prompt, token counts and the model
list, through a real server and the scripted OpenAI-compatible endpoint."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from storyloom.plugins import node_registry
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.server.conftest import chat_home

TIMEOUT_S = 30
Json = dict[str, Any]
CARD: Json = {"name": "Maren", "description": "The lighthouse keeper.", "first_mes": "Welcome."}


@pytest.fixture
def llm() -> Iterator[ReplayLLMServer]:
    with ReplayLLMServer(models=["test-model", "unlisted"], listed_models=["test-model"]) as server:
        yield server


@pytest.fixture
def server(tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]) -> Any:
    home = chat_home(tmp_path / "home", llm, {"maren": CARD}, agent=False)
    return start_server(home, node_registry=node_registry(entry_points=False))


@pytest.fixture
async def api(server: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT_S) as client:
        yield client


async def view_of(api: httpx.AsyncClient, cid: str) -> Json:
    response = await api.get(f"/api/chats/{cid}")
    assert response.status_code == 200, response.text
    view: Json = response.json()
    return view


async def reply_to(api: httpx.AsyncClient, cid: str, text: str) -> Json:
    """Send ``text`` and wait (by polling the chat) until the reply is finished."""
    version = (await view_of(api, cid))["conversation"]["version"]
    sent = await api.post(
        f"/api/chats/{cid}/messages", json={"text": text, "expected_version": version}
    )
    assert sent.status_code == 202, sent.text
    for _ in range(300):
        view = await view_of(api, cid)
        if not view["running"]:
            return view
        await asyncio.sleep(0.05)
    raise AssertionError("the reply did not finish")


async def chat_with_three_turns(api: httpx.AsyncClient, llm: ReplayLLMServer) -> str:
    created = await api.post("/api/chats", json={"character_id": "maren"})
    assert created.status_code == 201, created.text
    cid: str = created.json()["id"]
    llm.script(Reply(text="Reply one."), Reply(text="Reply two."), Reply(text="Reply three."))
    for text in ("One", "Two", "Three"):
        await reply_to(api, cid, text)
    return cid


async def test_editing_a_middle_message_in_place_keeps_what_follows_and_its_old_text(
    api: httpx.AsyncClient, llm: ReplayLLMServer
) -> None:
    cid = await chat_with_three_turns(api, llm)
    before = await view_of(api, cid)
    middle = before["messages"][3]
    assert middle["content"] == "Two"
    edited = await api.post(
        f"/api/chats/{cid}/messages/{middle['id']}/edit",
        json={
            "content": "Two, rewritten",
            "mode": "in_place",
            "expected_version": before["conversation"]["version"],
        },
    )
    assert edited.status_code == 200, edited.text
    after = await view_of(api, cid)
    assert [m["content"] for m in after["messages"]] == [
        "Welcome.", "One", "Reply one.", "Two, rewritten", "Reply two.", "Three", "Reply three.",
    ]  # fmt: skip
    assert [m["id"] for m in after["messages"]] == [m["id"] for m in before["messages"]]
    assert after["messages"][3]["sibling_count"] == 1
    versions = after["messages"][3]["extra"]["versions"]
    assert [v["content"] for v in versions] == ["Two"]
    # Restoring the old version keeps the rewritten text as a version in turn.
    restored = await api.post(
        f"/api/chats/{cid}/messages/{middle['id']}/restore",
        json={"index": 0, "expected_version": after["conversation"]["version"]},
    )
    assert restored.status_code == 200, restored.text
    again = await view_of(api, cid)
    assert again["messages"][3]["content"] == "Two"
    assert [v["content"] for v in again["messages"][3]["extra"]["versions"]] == ["Two, rewritten"]
    assert len(again["messages"]) == 7
    missing = await api.post(
        f"/api/chats/{cid}/messages/{middle['id']}/restore",
        json={"index": 5, "expected_version": again["conversation"]["version"]},
    )
    assert missing.status_code == 400, missing.text
    assert "no version 5" in missing.text


async def test_editing_as_a_new_branch_still_adds_a_sibling(
    api: httpx.AsyncClient, llm: ReplayLLMServer
) -> None:
    cid = await chat_with_three_turns(api, llm)
    before = await view_of(api, cid)
    middle = before["messages"][3]
    edited = await api.post(
        f"/api/chats/{cid}/messages/{middle['id']}/edit",
        json={"content": "Two, branched", "mode": "branch",
              "expected_version": before["conversation"]["version"]},
    )  # fmt: skip
    assert edited.status_code == 200, edited.text
    after = await view_of(api, cid)
    assert [m["content"] for m in after["messages"]][-1] == "Two, branched"
    assert after["messages"][-1]["sibling_count"] == 2


async def test_a_hidden_message_stays_in_the_chat_and_leaves_the_prompt(
    api: httpx.AsyncClient, llm: ReplayLLMServer
) -> None:
    cid = await chat_with_three_turns(api, llm)
    view = await view_of(api, cid)
    two = view["messages"][3]
    hidden = await api.post(
        f"/api/chats/{cid}/messages/{two['id']}/hidden",
        json={"hidden": True, "expected_version": view["conversation"]["version"]},
    )
    assert hidden.status_code == 200, hidden.text
    assert hidden.json()["message"]["extra"]["hidden"] is True
    llm.script(Reply(text="Reply four."))
    after = await reply_to(api, cid, "Four")
    assert "Two" in [m["content"] for m in after["messages"]]
    sent = [m["content"] for m in llm.chat_requests[-1]["messages"]]
    assert not any(text == "Two" for text in sent)
    assert any(text == "Three" for text in sent)
    reply_id = after["messages"][-1]["id"]
    prompt = (await api.get(f"/api/chats/{cid}/messages/{reply_id}/prompt")).json()
    assert "Two" not in [m["content"] for m in prompt["messages"]]
    # Shown to the model again.
    shown = await api.post(
        f"/api/chats/{cid}/messages/{two['id']}/hidden",
        json={"hidden": False, "expected_version": after["conversation"]["version"]},
    )
    assert shown.status_code == 200, shown.text
    assert "hidden" not in shown.json()["message"]["extra"]


async def test_token_counts_are_given_for_the_conversation_s_messages_only(
    api: httpx.AsyncClient, llm: ReplayLLMServer
) -> None:
    cid = await chat_with_three_turns(api, llm)
    ids = [m["id"] for m in (await view_of(api, cid))["messages"]]
    counted = await api.post(
        f"/api/chats/{cid}/token-counts", json={"message_ids": [*ids, "no-such-message"]}
    )
    assert counted.status_code == 200, counted.text
    body = counted.json()
    assert set(body["counts"]) == set(ids)
    assert body["counts"][ids[0]] > 0
    assert body["tokenizer"]


async def test_the_model_list_comes_from_the_endpoint_and_an_unlisted_model_passes_the_test(
    api: httpx.AsyncClient,
) -> None:
    listed = await api.post("/api/settings/models", json={"role": "user_llm"})
    assert listed.status_code == 200, listed.text
    assert listed.json()["models"] == ["test-model"]
    assert "sk-x" not in listed.text
    tested = await api.post(
        "/api/settings/test", json={"role": "user_llm", "endpoint": {"model": "unlisted"}}
    )
    assert tested.status_code == 200, tested.text
    report = tested.json()
    assert report["ok"] is True
    assert "'unlisted'" in report["warning"]


async def test_update_memory_without_an_agent_model_runs_on_the_chat_model(
    api: httpx.AsyncClient, llm: ReplayLLMServer
) -> None:
    cid = await chat_with_three_turns(api, llm)
    llm.script(Reply(text="Maren now trusts the traveller."))
    answer = await api.post(f"/api/chats/{cid}/memory")
    assert answer.status_code == 200, answer.text
    assert "Maren now trusts the traveller." in answer.text
    assert llm.chat_requests[-1]["model"] == "test-model"
