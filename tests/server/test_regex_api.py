"""The user's global regex scripts through the REST API of a real server: they change what
the model is sent, what the chat stores and what it shows, in every chat and before the
card's own scripts; a bad list is refused whole; a SillyTavern regex export imports."""

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
from tests.server.conftest import chat_home

TIMEOUT_S = 30
Json = dict[str, Any]

CARD: Json = {"name": "Maren", "description": "The lighthouse keeper.", "first_mes": "Welcome."}
CARD_WITH_SCRIPT: Json = {
    "name": "Ash",
    "description": "A cartographer.",
    "first_mes": "Hello.",
    "extensions": {
        "regex_scripts": [
            {"scriptName": "card: alpha to beta", "findRegex": "/alpha/g",
             "replaceString": "beta", "placement": [1], "promptOnly": True},
        ]
    },
}  # fmt: skip


def st_script(name: str, find: str, replace: str, placement: list[int], **flags: Any) -> Json:
    """A script as SillyTavern's regex panel writes it (every field it saves)."""
    return {
        "id": f"st-{name}",
        "scriptName": name,
        "findRegex": find,
        "replaceString": replace,
        "trimStrings": [],
        "placement": placement,
        "disabled": False,
        "markdownOnly": False,
        "promptOnly": False,
        "runOnEdit": True,
        "substituteRegex": 0,
        "minDepth": None,
        "maxDepth": None,
        **flags,
    }


@pytest.fixture
def server(tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]) -> Any:
    home = chat_home(tmp_path / "home", llm, {"maren": CARD, "ash": CARD_WITH_SCRIPT})
    return start_server(home, node_registry=node_registry(entry_points=False))


@pytest.fixture
async def api(server: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT_S) as client:
        yield client


async def new_chat(api: httpx.AsyncClient, character_id: str = "maren") -> str:
    response = await api.post("/api/chats", json={"character_id": character_id})
    assert response.status_code == 201, response.text
    chat_id: str = response.json()["id"]
    return chat_id


async def messages(api: httpx.AsyncClient, chat_id: str) -> list[Json]:
    response = await api.get(f"/api/chats/{chat_id}")
    assert response.status_code == 200, response.text
    shown: list[Json] = response.json()["messages"]
    return shown


async def send(api: httpx.AsyncClient, server: Any, chat_id: str, text: str) -> None:
    """Send ``text`` and wait (over the WebSocket) for the reply to finish."""
    async with websockets.connect(server.ws_url) as ws:
        await ws.recv()  # status
        await ws.send(json.dumps({"type": "chat:subscribe", "conversationId": chat_id}))
        sent = await api.post(f"/api/chats/{chat_id}/messages", json={"text": text})
        assert sent.status_code == 202, sent.text
        while True:
            event = json.loads(await asyncio.wait_for(ws.recv(), timeout=TIMEOUT_S))
            if event["type"] == "chat:done":
                assert event["status"] == "complete", event
                return


async def put_scripts(api: httpx.AsyncClient, scripts: list[Json]) -> httpx.Response:
    return await api.put("/api/regex-scripts", json=scripts)


def last_user_text(llm: ReplayLLMServer) -> str:
    sent = llm.chat_requests[-1]["messages"]
    text: str = next(m["content"] for m in reversed(sent) if m["role"] == "user")
    return text


async def test_global_scripts_change_what_the_model_receives_stores_and_shows(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    saved = await put_scripts(
        api,
        [
            st_script("hide secrets", "/secret/g", "[redacted]", [1], promptOnly=True),
            st_script("lamp", "/lantern/gi", "lamp", [1]),
            st_script("shout calm", "/calm/g", "CALM", [2], markdownOnly=True),
            st_script("off", "/Where/g", "Whither", [1], disabled=True, promptOnly=True),
        ],
    )
    assert saved.status_code == 200, saved.text
    assert [s["scriptName"] for s in saved.json()["scripts"]][:2] == ["hide secrets", "lamp"]
    chat_id = await new_chat(api)  # no card script allowed: globals run all the same
    llm.script(Reply(text="The sea is calm."))
    await send(api, server, chat_id, "Where is the secret Lantern?")
    # promptOnly: only the model sees it; the plain script rewrote the stored text first;
    # the disabled one did nothing
    assert last_user_text(llm) == "Where is the [redacted] lamp?"
    user, reply = (await messages(api, chat_id))[-2:]
    assert user["content"] == "Where is the secret lamp?"
    assert user["original"] == "Where is the secret Lantern?"
    # markdownOnly: shown, never stored
    assert reply["content"] == "The sea is calm."
    assert reply["display"] == "The sea is CALM."
    prompt = await api.get(f"/api/chats/{chat_id}/messages/{reply['id']}/prompt")
    assert prompt.status_code == 200, prompt.text
    assert prompt.json()["warnings"] == []


async def test_a_disabled_global_script_does_nothing(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    script = st_script("hide secrets", "/secret/g", "[redacted]", [1, 2], promptOnly=True)
    assert (await put_scripts(api, [{**script, "disabled": True}])).status_code == 200
    chat_id = await new_chat(api)
    llm.script(Reply(text="A secret kept."))
    await send(api, server, chat_id, "Tell me a secret.")
    assert last_user_text(llm) == "Tell me a secret."
    user, reply = (await messages(api, chat_id))[-2:]
    assert user["content"] == "Tell me a secret." and user["original"] is None
    assert reply.get("display") is None


async def test_global_scripts_run_before_the_card_s_own(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    """global: beta → gamma, card: alpha → beta. Global first leaves "beta"; the card
    first would have let the global script turn it into "gamma"."""
    scripts = [st_script("global: beta to gamma", "/beta/g", "gamma", [1], promptOnly=True)]
    assert (await put_scripts(api, scripts)).status_code == 200
    chat_id = await new_chat(api, "ash")
    allowed = await api.patch(
        f"/api/chats/{chat_id}", json={"settings": {"allow_regex_scripts": True}}
    )
    assert allowed.status_code == 200, allowed.text
    llm.script(Reply(text="Noted."))
    await send(api, server, chat_id, "alpha")
    assert last_user_text(llm) == "beta"


async def test_a_bad_put_is_refused_naming_index_and_field_and_changes_nothing(
    api: httpx.AsyncClient,
) -> None:
    good = [st_script("lamp", "/lantern/gi", "lamp", [1])]
    assert (await put_scripts(api, good)).status_code == 200
    wrong_type = await put_scripts(api, [*good, {**good[0], "placement": "everywhere"}])
    assert wrong_type.status_code == 422, wrong_type.text
    fields = [p["field"] for p in wrong_type.json()["error"]["problems"]]
    assert fields == ["[1].placement"]
    no_pattern = await put_scripts(api, [*good, {"scriptName": "nothing to find"}])
    assert no_pattern.status_code == 422
    assert [p["field"] for p in no_pattern.json()["error"]["problems"]] == ["[1].findRegex"]
    not_compiling = await put_scripts(api, [{**good[0], "findRegex": "/(unclosed/g"}])
    assert not_compiling.status_code == 422
    problem = not_compiling.json()["error"]["problems"][0]
    assert (
        problem["field"] == "[0].findRegex"
        and "not a valid regular expression" in problem["reason"]
    )
    kept = (await api.get("/api/regex-scripts")).json()
    assert kept == {"scripts": good, "problem": None}


async def test_the_import_route_reads_a_sillytavern_regex_export(api: httpx.AsyncClient) -> None:
    first = [st_script("lamp", "/lantern/gi", "lamp", [1])]
    assert (await put_scripts(api, first)).status_code == 200
    # SillyTavern's export of one script is the script object itself; older versions
    # wrote null for unset fields and a boolean substituteRegex
    single = {
        **st_script("trim ooc", "/\\(OOC:.*?\\)/g", "", [1, 2]),
        "substituteRegex": False,
        "trimStrings": None,
        "minDepth": None,
        "someExtensionField": {"kept": True},
    }
    imported = await api.post(
        "/api/regex-scripts/import",
        files={"file": ("regex-trim_ooc.json", json.dumps(single), "application/json")},
    )
    assert imported.status_code == 201, imported.text
    body = imported.json()
    assert body["imported"] == 1
    names = [s["scriptName"] for s in body["scripts"]]
    assert names == ["lamp", "trim ooc"]
    added = body["scripts"][1]
    assert added["id"] != "st-trim ooc"  # a new id, as SillyTavern's import gives
    assert added["trimStrings"] == [] and added["someExtensionField"] == {"kept": True}
    # a bulk export is a list of scripts
    bulk = [st_script("a", "/a/g", "b", [2]), st_script("c", "/c/g", "d", [2], disabled=True)]
    more = await api.post(
        "/api/regex-scripts/import",
        files={"file": ("regexes.json", json.dumps(bulk), "application/json")},
    )
    assert more.status_code == 201, more.text
    listed = (await api.get("/api/regex-scripts")).json()["scripts"]
    assert [s["scriptName"] for s in listed] == ["lamp", "trim ooc", "a", "c"]
    assert listed[3]["disabled"] is True


async def test_an_import_that_does_not_read_names_file_and_field_and_adds_nothing(
    api: httpx.AsyncClient,
) -> None:
    bad = [st_script("ok", "/a/g", "b", [2]), {"scriptName": "broken", "findRegex": 3}]
    refused = await api.post(
        "/api/regex-scripts/import",
        files={"file": ("mine.json", json.dumps(bad), "application/json")},
    )
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["message"].startswith("mine.json")
    assert [p["field"] for p in error["problems"]] == ["[1].findRegex"]
    assert (await api.get("/api/regex-scripts")).json()["scripts"] == []


async def test_a_broken_global_scripts_file_is_a_prompt_problem_and_the_chat_goes_on(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    (server.home / "regex_scripts.json").write_text('[{"findRegex": 5}]', encoding="utf-8")
    listed = (await api.get("/api/regex-scripts")).json()
    assert listed["scripts"] == [] and "[0].findRegex" in listed["problem"]
    assert "regex_scripts.json" in listed["problem"]
    chat_id = await new_chat(api)
    llm.script(Reply(text="Still here."))
    await send(api, server, chat_id, "Hello?")
    reply = (await messages(api, chat_id))[-1]
    assert reply["content"] == "Still here."
    prompt = (await api.get(f"/api/chats/{chat_id}/messages/{reply['id']}/prompt")).json()
    assert any(
        "global regex scripts are not used" in w and "[0].findRegex" in w
        for w in prompt["warnings"]
    )
