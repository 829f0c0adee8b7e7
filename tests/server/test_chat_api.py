"""The chat API of a real server: conversations, turns streamed over the WebSocket, the
tree operations, versioned writes, the inspector, import/export and presets."""

from __future__ import annotations

import asyncio
import io
import json
import zipfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from jsonschema import Draft202012Validator
from websockets.asyncio.client import ClientConnection

from storyloom.plugins import node_registry
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.workflow.node_registry import NodeRegistry
from tests.server.conftest import chat_home

TIMEOUT_S = 30
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sillytavern"
OPENAPI = Path(__file__).resolve().parents[2] / "web" / "src" / "api" / "openapi.json"
Json = dict[str, Any]

CARD: Json = {
    "name": "Maren",
    "description": "The keeper of the Lanternfall lighthouse.",
    "first_mes": "Welcome, {{user}}.",
    "alternate_greetings": ["You woke up, {{user}}."],
}


def chat_registry() -> NodeRegistry:
    return node_registry(entry_points=False)


@pytest.fixture
def server(tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]) -> Any:
    home = chat_home(tmp_path / "home", llm, {"maren": CARD})
    return start_server(home, node_registry=chat_registry())


@pytest.fixture
async def api(server: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT_S) as client:
        yield client


@asynccontextmanager
async def subscribed(server: Any, conversation_id: str) -> AsyncIterator[ClientConnection]:
    async with websockets.connect(server.ws_url) as ws:
        hello = json.loads(await ws.recv())
        assert hello["type"] == "status"
        await ws.send(json.dumps({"type": "chat:subscribe", "conversationId": conversation_id}))
        yield ws


async def receive_until(ws: ClientConnection, done: Callable[[Json], bool]) -> list[Json]:
    seen: list[Json] = []
    while True:
        message = json.loads(await asyncio.wait_for(ws.recv(), timeout=TIMEOUT_S))
        seen.append(message)
        if done(message):
            return seen


def chat_done(message: Json) -> bool:
    return bool(message["type"] == "chat:done")


async def new_chat(api: httpx.AsyncClient, **body: Any) -> Json:
    response = await api.post("/api/chats", json={"character_id": "maren", **body})
    assert response.status_code == 201, response.text
    created: Json = response.json()
    return created


async def get_chat(api: httpx.AsyncClient, conversation_id: str) -> Json:
    response = await api.get(f"/api/chats/{conversation_id}")
    assert response.status_code == 200, response.text
    view: Json = response.json()
    return view


async def turn(
    api: httpx.AsyncClient, server: Any, conversation_id: str, text: str
) -> tuple[Json, list[Json]]:
    """Send ``text`` and follow the reply over the WebSocket to its end."""
    async with subscribed(server, conversation_id) as ws:
        version = (await get_chat(api, conversation_id))["conversation"]["version"]
        response = await api.post(
            f"/api/chats/{conversation_id}/messages",
            json={"text": text, "expected_version": version},
        )
        assert response.status_code == 202, response.text
        events = await receive_until(ws, chat_done)
    accepted: Json = response.json()
    return accepted, events


async def test_the_chat_messages_sent_over_the_websocket_match_the_page_s_types(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    """The page's ``chat:*`` types are generated from the committed openapi.json: what the
    server sends must be what that document says."""
    created = await new_chat(api)
    llm.script(Reply(text="<thought>hm</thought>The forest is quiet tonight.", chunks=3))
    _, events = await turn(api, server, created["id"], "Where am I?")
    async with subscribed(server, created["id"]) as ws:
        version = (await get_chat(api, created["id"]))["conversation"]["version"]
        renamed = await api.patch(
            f"/api/chats/{created['id']}", json={"title": "Glade", "expected_version": version}
        )
        assert renamed.status_code == 200, renamed.text
        events += await receive_until(ws, lambda m: m["type"] == "chat:changed")
    document = json.loads(OPENAPI.read_text(encoding="utf-8"))
    schema = {"$ref": "#/components/schemas/ChatServerMessage", **document}
    validator = Draft202012Validator(schema)
    assert {e["type"] for e in events} == {
        "chat:message",
        "chat:stream",
        "chat:done",
        "chat:changed",
    }
    for event in events:
        assert [e.message for e in validator.iter_errors(event)] == [], event


# -- conversations ---------------------------------------------------------------------------


async def test_a_new_chat_from_a_character_opens_on_its_greeting(api: httpx.AsyncClient) -> None:
    created = await new_chat(api, user_name="Ann", title="Forest")
    assert created["title"] == "Forest" and created["version"] >= 1
    listed = (await api.get("/api/chats")).json()["conversations"]
    assert [c["id"] for c in listed] == [created["id"]]
    assert listed[0]["character_name"] == "Maren"
    view = await get_chat(api, created["id"])
    assert view["running"] is False and view["continuation"] == []
    [greeting] = view["messages"]
    assert greeting["content"] == "Welcome, Ann."
    assert greeting["sibling_count"] == 2 and greeting["parent_id"] is None
    assert view["conversation"]["character"]["card"]["name"] == "Maren"


async def test_a_turn_streams_to_the_subscribed_tab_and_lands_in_the_chat(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    created = await new_chat(api)
    llm.script(Reply(text="<thought>hm</thought>The forest is quiet tonight.", chunks=5))
    accepted, events = await turn(api, server, created["id"], "Where am I?")
    assert accepted["user_message"]["content"] == "Where am I?"
    assert accepted["assistant_message"]["status"] == "streaming"
    reply_id = accepted["assistant_message"]["id"]
    streamed = "".join(e["text"] for e in events if e["type"] == "chat:stream")
    assert streamed == "The forest is quiet tonight."
    assert any(e.get("thought") == "hm" for e in events if e["type"] == "chat:stream")
    finals = [e for e in events if e["type"] == "chat:message" and e["message"]["id"] == reply_id]
    assert finals[-1]["message"]["status"] == "complete"
    assert events[-1] == {
        "type": "chat:done",
        "conversationId": created["id"],
        "messageId": reply_id,
        "status": "complete",
        "version": events[-1]["version"],
    }
    view = await get_chat(api, created["id"])
    assert view["conversation"]["version"] == events[-1]["version"]
    user, reply = view["messages"][-2:]
    assert (user["role"], user["content"]) == ("user", "Where am I?")
    assert (reply["content"], reply["thought"], reply["status"]) == (
        "The forest is quiet tonight.",
        "hm",
        "complete",
    )
    assert "prompt" not in reply["extra"] and "raw" not in reply["extra"]
    # The inspector puts the history's text back into the blocks and messages.
    prompt = (await api.get(f"/api/chats/{created['id']}/messages/{reply_id}/prompt")).json()
    history = [b for b in prompt["blocks"] if b.get("message_id") == user["id"]]
    assert history and history[0]["content"] == "Where am I?"
    assert all(isinstance(b["tokens"], int) for b in prompt["blocks"])
    assert any(m["content"] == "Where am I?" for m in prompt["messages"])
    assert "budget" in prompt and "cut" in prompt and "lore" in prompt
    state = (await api.get(f"/api/chats/{created['id']}/messages/{reply_id}/state")).json()
    assert state["state"]["variables"] == {} and state["delta"] == []
    # The model's key never leaves the server.
    assert "sk-x" not in json.dumps(view) and "sk-x" not in json.dumps(prompt)


async def test_a_stale_version_is_refused_with_the_current_one(api: httpx.AsyncClient) -> None:
    created = await new_chat(api)
    view = await get_chat(api, created["id"])
    version = view["conversation"]["version"]
    greeting = view["messages"][0]["id"]
    moved = await api.post(
        f"/api/chats/{created['id']}/swipe",
        json={"message_id": greeting, "to_index": 1, "expected_version": version},
    )
    assert moved.status_code == 200, moved.text
    stale = await api.post(
        f"/api/chats/{created['id']}/messages", json={"text": "Hi", "expected_version": version}
    )
    assert stale.status_code == 409
    assert stale.json()["version"] == moved.json()["version"]
    assert "reload" in stale.json()["error"]["message"]
    after = await get_chat(api, created["id"])
    assert [m["role"] for m in after["messages"]] == ["assistant"]


async def test_unknown_chats_and_messages_are_404(api: httpx.AsyncClient) -> None:
    assert (await api.get("/api/chats/nope")).status_code == 404
    created = await new_chat(api)
    missing = await api.get(f"/api/chats/{created['id']}/messages/nope/state")
    assert missing.status_code == 404
    assert "nope" in missing.json()["error"]["message"]
    bad = await api.post(f"/api/chats/{created['id']}/generate", json={"kind": "sideways"})
    assert bad.status_code == 422


async def test_a_tail_of_the_chat_says_how_many_messages_come_before_it(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    cid = (await new_chat(api))["id"]
    llm.script(Reply(text="First reply."), Reply(text="Second reply."))
    await turn(api, server, cid, "One")
    await turn(api, server, cid, "Two")
    whole = await get_chat(api, cid)
    assert whole["earlier"] == 0 and len(whole["messages"]) == 5
    response = await api.get(f"/api/chats/{cid}", params={"tail": 2})
    tail = response.json()
    assert [m["content"] for m in tail["messages"]] == ["Two", "Second reply."]
    assert tail["earlier"] == 3
    assert tail["messages"][0]["sibling_count"] == 1
    everything = (await api.get(f"/api/chats/{cid}", params={"tail": 50})).json()
    assert everything["messages"] == whole["messages"] and everything["earlier"] == 0
    assert (await api.get(f"/api/chats/{cid}", params={"tail": 0})).status_code == 422


async def test_time_travel_branch_swipe_edit_and_delete_through_the_api(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    created = await new_chat(api)
    cid = created["id"]
    llm.script(Reply(text="First reply."), Reply(text="Second reply."))
    first, _ = await turn(api, server, cid, "One")
    second, _ = await turn(api, server, cid, "Two")
    view = await get_chat(api, cid)
    assert [m["content"] for m in view["messages"]] == [
        "Welcome, User.", "One", "First reply.", "Two", "Second reply.",
    ]  # fmt: skip
    # Time travel back to the first reply: the rest waits as the continuation.
    async with subscribed(server, cid) as ws:
        moved = await api.post(
            f"/api/chats/{cid}/pointer",
            json={"message_id": first["assistant_message"]["id"],
                  "expected_version": view["conversation"]["version"]},
        )  # fmt: skip
        assert moved.status_code == 200, moved.text
        changed = await receive_until(ws, lambda m: m["type"] == "chat:changed")
        assert changed[-1]["version"] == moved.json()["version"]
    back = await get_chat(api, cid)
    assert [m["content"] for m in back["messages"]][-1] == "First reply."
    assert [m["content"] for m in back["continuation"]] == ["Two", "Second reply."]
    # Edit an old message: a sibling, the old one kept.
    user_one = first["user_message"]["id"]
    edited = await api.post(
        f"/api/chats/{cid}/messages/{user_one}/edit",
        json={"content": "One, again", "expected_version": back["conversation"]["version"]},
    )
    assert edited.status_code == 200, edited.text
    now = await get_chat(api, cid)
    assert [m["content"] for m in now["messages"]][-1] == "One, again"
    assert now["messages"][-1]["sibling_count"] == 2
    # Swipe back to the original: its branch comes back whole.
    restored = await api.post(
        f"/api/chats/{cid}/swipe",
        json={"message_id": user_one, "to_index": 0,
              "expected_version": now["conversation"]["version"]},
    )  # fmt: skip
    assert restored.status_code == 200
    whole = await get_chat(api, cid)
    assert [m["content"] for m in whole["messages"]][-1] == "Second reply."
    nodes = (await api.get(f"/api/chats/{cid}/tree")).json()["nodes"]
    assert len(nodes) == 7 and sum(n["on_path"] for n in nodes) == 5
    # Delete the second turn.
    deleted = await api.delete(
        f"/api/chats/{cid}/messages/{second['user_message']['id']}",
        params={"expected_version": whole["conversation"]["version"]},
    )
    assert deleted.status_code == 200, deleted.text
    short = await get_chat(api, cid)
    assert [m["content"] for m in short["messages"]][-1] == "First reply."
    gone = await api.delete(f"/api/chats/{cid}")
    assert gone.status_code == 204
    assert (await api.get(f"/api/chats/{cid}")).status_code == 404


async def test_settings_change_merges_and_a_bad_value_names_its_field(
    api: httpx.AsyncClient,
) -> None:
    created = await new_chat(api)
    changed = await api.patch(
        f"/api/chats/{created['id']}",
        json={"expected_version": created["version"], "settings": {"authors_note": "Be brief."},
              "title": "Renamed"},
    )  # fmt: skip
    assert changed.status_code == 200, changed.text
    assert changed.json()["settings"]["authors_note"] == "Be brief."
    assert changed.json()["settings"]["user_name"] == "User"
    assert changed.json()["title"] == "Renamed"
    bad = await api.patch(
        f"/api/chats/{created['id']}", json={"settings": {"authors_note_depth": -1}}
    )
    assert bad.status_code == 422
    assert "authors_note_depth" in bad.json()["error"]["problems"][0]["field"]


async def test_generate_stop_and_retry_through_the_api(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    created = await new_chat(api)
    cid = created["id"]
    llm.script(Reply(text="a b c d e f", hold_after_chunks=2), Reply(text="Fresh."))
    async with subscribed(server, cid) as ws:
        sent = await api.post(f"/api/chats/{cid}/messages", json={"text": "Go"})
        assert sent.status_code == 202
        await receive_until(ws, lambda m: m["type"] == "chat:stream")
        busy = await api.post(f"/api/chats/{cid}/messages", json={"text": "Again"})
        assert busy.status_code == 400 and "being written" in busy.json()["error"]["message"]
        assert (await get_chat(api, cid))["running"] is True
        stopped = await api.post(f"/api/chats/{cid}/stop")
        assert stopped.status_code == 200, stopped.text
        kept = stopped.json()["message"]
        assert kept["status"] == "partial" and kept["error"] == "stopped"
        assert kept["content"].startswith("a")
        await receive_until(ws, chat_done)
        retried = await api.post(
            f"/api/chats/{cid}/generate",
            json={"kind": "swipe", "message_id": kept["id"],
                  "expected_version": stopped.json()["version"]},
        )  # fmt: skip
        assert retried.status_code == 202, retried.text
        done = await receive_until(ws, chat_done)
    assert done[-1]["status"] == "complete"
    view = await get_chat(api, cid)
    last = view["messages"][-1]
    assert last["content"] == "Fresh." and last["sibling_count"] == 2


async def test_sillytavern_chats_import_and_export_again(api: httpx.AsyncClient) -> None:
    for sample in sorted(FIXTURES.glob("chat_*.jsonl")):
        with sample.open("rb") as handle:
            response = await api.post("/api/chats/import", files={"file": (sample.name, handle)})
        assert response.status_code == 201, response.text
        imported = response.json()
        assert imported["kind"] == "chat" and imported["messages"] > 0
        cid = imported["conversation"]["id"]
        view = await get_chat(api, cid)
        assert len(view["messages"]) == imported["messages"]
        # The project's "Maren" preset is the chat's character: its card comes along.
        card = view["conversation"]["character"]["card"]
        assert card["name"] == "Maren" and card["description"] == CARD["description"]
        exported = await api.get(f"/api/chats/{cid}/export", params={"format": "sillytavern"})
        assert exported.status_code == 200
        lines = exported.text.splitlines()
        assert len(lines) == imported["messages"] + 1  # the header, then one per message
        archive = await api.get(f"/api/chats/{cid}/export", params={"format": "personalab"})
        names = zipfile.ZipFile(io.BytesIO(archive.content)).namelist()
        assert {"conversation.jsonl", "metadata.json", "character_snapshot.json"} <= set(names)


async def test_a_card_imports_as_a_character_and_a_new_chat(api: httpx.AsyncClient) -> None:
    sample = FIXTURES / "card_maren_v2_v3.png"
    # The project has a "Maren" already: a second one is the user's explicit choice.
    with sample.open("rb") as handle:
        response = await api.post(
            "/api/chats/import",
            files={"file": (sample.name, handle)},
            data={"on_conflict": "keep_both"},
        )
    assert response.status_code == 201, response.text
    imported = response.json()
    assert imported["kind"] == "character" and imported["character_id"]
    view = await get_chat(api, imported["conversation"]["id"])
    assert view["messages"][0]["role"] == "assistant" and view["messages"][0]["content"]
    characters = (await api.get("/api/presets/characters")).json()["characters"]
    assert imported["character_id"] in {c["id"] for c in characters}
    junk = await api.post("/api/chats/import", files={"file": ("notes.txt", b"hello")})
    assert junk.status_code == 422 and "notes.txt" in junk.json()["error"]["message"]


async def test_a_world_info_book_sent_as_a_chat_is_refused_and_nothing_is_written(
    api: httpx.AsyncClient, server: Any
) -> None:
    bases = (await api.get("/api/knowledge/bases")).json()
    sample = FIXTURES / "world_info_lanternfall_v1.18.json"
    with sample.open("rb") as handle:
        response = await api.post("/api/chats/import", files={"file": (sample.name, handle)})
    assert response.status_code == 422
    assert sample.name in response.json()["error"]["message"]
    assert (await api.get("/api/knowledge/bases")).json() == bases
    folder = server.home / "projects" / "default" / "knowledgebases"
    assert not folder.exists() or not any(folder.iterdir())


async def test_presets_list_and_save(api: httpx.AsyncClient) -> None:
    saved = await api.post(
        "/api/presets/backgrounds",
        json={"name": "Quest", "story_outline": [{"index": 1, "content": "Meet"}]},
    )
    assert saved.status_code == 201, saved.text
    background_id = saved.json()["background_id"]
    listed = (await api.get("/api/presets/backgrounds")).json()
    assert [b["background_id"] for b in listed["backgrounds"]] == [background_id]
    bad = await api.post("/api/presets/backgrounds", json={"story_outline": []})
    assert bad.status_code == 422 and bad.json()["error"]["problems"][0]["field"] == (
        "background.name"
    )
    created = await new_chat(api, background_id=background_id)
    assert created["background"]["name"] == "Quest"
    character = await api.post("/api/presets/characters", json={"name": "Ash", "first_mes": "Yo"})
    assert character.status_code == 201
    names = {c["name"] for c in (await api.get("/api/presets/characters")).json()["characters"]}
    assert names == {"Maren", "Ash"}
    summaries = (await api.get("/api/presets/summaries")).json()
    assert summaries["summaries"] == []


async def test_memory_summary_and_continuing_from_it(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    created = await new_chat(api)
    cid = created["id"]
    llm.script(Reply(text="The wolves are gone."))
    await turn(api, server, cid, "Where are the wolves?")
    llm.script(Reply(text="She now trusts the traveller."))
    proposal = await api.post(f"/api/chats/{cid}/memory")
    assert proposal.status_code == 200, proposal.text
    assert proposal.json()["evolved_persona"] == "She now trusts the traveller."
    assert any(line.startswith("+She now trusts") for line in proposal.json()["diff"])
    assert (await get_chat(api, cid))["conversation"]["character"]["evolved_persona"] == ""
    version = (await get_chat(api, cid))["conversation"]["version"]
    accepted = await api.post(
        f"/api/chats/{cid}/memory/accept",
        json={"evolved_persona": proposal.json()["evolved_persona"], "expected_version": version},
    )
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["character"]["evolved_persona"] == "She now trusts the traveller."
    llm.script(Reply(text='["The traveller woke in the forest.", "The wolves left."]'))
    summary = await api.post(f"/api/chats/{cid}/summarise")
    assert summary.status_code == 200, summary.text
    points = [p["content"] for p in summary.json()["summaries"]]
    assert points == ["The traveller woke in the forest.", "The wolves left."]
    listed = (await api.get("/api/presets/summaries")).json()["summaries"]
    assert [s["summary_id"] for s in listed] == [summary.json()["summary_id"]]
    continued = await api.post(f"/api/chats/{cid}/continue-from-summary", json={"last_n_turns": 1})
    assert continued.status_code == 201, continued.text
    new_id = continued.json()["id"]
    assert continued.json()["character"]["evolved_persona"] == "She now trusts the traveller."
    opened = await get_chat(api, new_id)
    assert [m["content"] for m in opened["messages"]] == [
        *points, "Where are the wolves?", "The wolves are gone.",
    ]  # fmt: skip
    assert [m["role"] for m in opened["messages"]][:2] == ["system", "system"]


async def test_display_only_scripts_change_what_is_shown_not_what_is_stored(
    api: httpx.AsyncClient,
) -> None:
    card = {
        **CARD,
        "name": "Ash",
        "first_mes": "Status: *calm*",
        "extensions": {
            "regex_scripts": [
                {"scriptName": "bold", "findRegex": "/\\*(\\w+)\\*/g",
                 "replaceString": "<b>$1</b>", "placement": [2], "markdownOnly": True},
            ]
        },
    }  # fmt: skip
    saved = await api.post("/api/presets/characters", json=card)
    created = await new_chat(api, character_id=saved.json()["id"])
    shown = (await get_chat(api, created["id"]))["messages"][0]
    assert shown["content"] == "Status: *calm*" and shown.get("display") is None
    allowed = await api.patch(
        f"/api/chats/{created['id']}", json={"settings": {"allow_regex_scripts": True}}
    )
    assert allowed.status_code == 200
    shown = (await get_chat(api, created["id"]))["messages"][0]
    assert shown["content"] == "Status: *calm*"
    assert shown["display"] == "Status: <b>calm</b>"


async def test_a_reply_stopped_before_its_first_word_is_retried_through_the_api(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    cid = (await new_chat(api))["id"]
    llm.script(Reply(text="Never sent", hold_after_chunks=0), Reply(text="Second try."))
    async with subscribed(server, cid) as ws:
        sent = await api.post(f"/api/chats/{cid}/messages", json={"text": "Go"})
        assert sent.status_code == 202
        for _ in range(200):
            if llm.chat_requests:
                break
            await asyncio.sleep(0.02)
        stopped = await api.post(f"/api/chats/{cid}/stop")
        kept = stopped.json()["message"]
        assert kept["status"] == "error" and kept["error"] == "stopped"
        await receive_until(ws, chat_done)
        retried = await api.post(
            f"/api/chats/{cid}/generate",
            json={"kind": "swipe", "message_id": kept["id"],
                  "expected_version": stopped.json()["version"]},
        )  # fmt: skip
        assert retried.status_code == 202, retried.text
        done = await receive_until(ws, chat_done)
    assert done[-1]["status"] == "complete"
    assert (await get_chat(api, cid))["messages"][-1]["content"] == "Second try."
