"""Named connections on a real server: stored with their keys kept from the browser, and
picked per chat, per character, per group member and per agent profile; each chat turn
reaches the server of the connection chosen (two scripted model servers tell them apart)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from storyloom.testing.replay_server import ReplayLLMServer
from tests.server.conftest import chat_home
from tests.server.test_chat_api import chat_done, get_chat, receive_until, subscribed, turn

Json = dict[str, Any]
CARDS: dict[str, Json] = {
    "maren": {"name": "Maren", "description": "The keeper of the lighthouse."},
    "ivo": {"name": "Ivo", "description": "A ferryman."},
}


@pytest.fixture
def other() -> Iterator[ReplayLLMServer]:
    """A second model server, serving "other-model" with its own key."""
    with ReplayLLMServer(models=["other-model"], api_key="sk-other") as server:
        yield server


@pytest.fixture
def server(tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]) -> Any:
    return start_server(chat_home(tmp_path / "home", llm, CARDS))


@pytest.fixture
async def api(server: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        yield client


async def put_connection(
    api: httpx.AsyncClient, name: str, llm: ReplayLLMServer, model: str, **more: Any
) -> Json:
    body = {"base_url": llm.url, "model": model, "max_retries": 0, **more}
    response = await api.put(f"/api/connections/{name}", json=body)
    assert response.status_code == 200, response.text
    views: Json = response.json()
    return views


async def patch_settings(api: httpx.AsyncClient, conversation_id: str, **settings: Any) -> None:
    version = (await get_chat(api, conversation_id))["conversation"]["version"]
    response = await api.patch(
        f"/api/chats/{conversation_id}",
        json={"settings": settings, "expected_version": version},
    )
    assert response.status_code == 200, response.text


async def set_card_connection(api: httpx.AsyncClient, character_id: str, name: str) -> None:
    document = (await api.get(f"/api/characters/{character_id}")).json()
    card = dict(document["character"])
    extensions = dict(card.get("extensions") or {})
    extensions["storyloom"] = {**(extensions.get("storyloom") or {}), "connection": name}
    card["extensions"] = extensions
    response = await api.put(
        f"/api/characters/{character_id}",
        json={"character": card, "version": document["version"]},
    )
    assert response.status_code == 200, response.text


async def new_chat(api: httpx.AsyncClient, character_id: str = "maren") -> str:
    response = await api.post("/api/chats", json={"character_id": character_id})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def last_reply(events: list[Json]) -> Json:
    done = [e for e in events if e["type"] == "chat:done"]
    assert done, events
    return done[-1]


async def test_a_connection_s_key_is_stored_private_and_never_sent_back(
    api: httpx.AsyncClient, server: Any, other: ReplayLLMServer
) -> None:
    views = await put_connection(api, "Other", other, "other-model", api_key="sk-other")
    assert views["connections"]["Other"]["api_key_set"] is True
    for path in ("/api/connections", "/api/settings"):
        text = (await api.get(path)).text
        assert "sk-other" not in text, path
    assert "api_key" not in (await api.get("/api/connections")).json()["connections"]["Other"]
    settings_file = server.home / "settings.json"
    assert json.loads(settings_file.read_text())["connections"]["Other"]["api_key"] == "sk-other"
    assert stat.S_IMODE(os.stat(settings_file).st_mode) == 0o600

    # Saved again without a key: the stored one stays, and still opens the server.
    await put_connection(api, "Other", other, "other-model", context_window=4096)
    stored = json.loads(settings_file.read_text())["connections"]["Other"]
    assert stored["api_key"] == "sk-other"
    assert stored["context_window"] == 4096
    check = (await api.post("/api/connections/Other/test")).json()
    assert check["ok"] is True, check
    assert other.chat_requests[-1].headers["authorization"] == "Bearer sk-other"

    # "" clears it; delete removes the connection.
    await put_connection(api, "Other", other, "other-model", api_key="")
    assert json.loads(settings_file.read_text())["connections"]["Other"]["api_key"] is None
    gone = await api.delete("/api/connections/Other")
    assert gone.status_code == 200
    assert gone.json() == {"connections": {}}
    missing = await api.delete("/api/connections/Other")
    assert missing.status_code == 404
    assert "'Other'" in missing.json()["error"]["message"]


async def test_a_connection_name_that_does_not_fit_is_refused_with_the_reason(
    api: httpx.AsyncClient,
) -> None:
    response = await api.put("/api/connections/%20padded", json={"base_url": "", "model": ""})
    assert response.status_code == 422
    problems = response.json()["error"]["problems"]
    assert problems[0]["field"] == "name"
    assert "space" in problems[0]["reason"]
    bad_url = await api.put("/api/connections/x", json={"base_url": "ftp://x", "model": "m"})
    assert bad_url.status_code == 422
    assert bad_url.json()["error"]["problems"][0]["field"] == "base_url"


async def test_the_chat_s_connection_wins_over_the_character_s_which_wins_over_the_user_model(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer, other: ReplayLLMServer
) -> None:
    await put_connection(api, "Other", other, "other-model", api_key="sk-other")
    await put_connection(api, "Home", llm, "test-model")
    chat = await new_chat(api)

    llm.script("From the user model.")
    _, events = await turn(api, server, chat, "Hello?")
    assert last_reply(events)["status"] == "complete", events
    assert len(llm.chat_requests) == 1 and not other.chat_requests

    # The character picks Other on its page: the next turn of the same chat goes there.
    await set_card_connection(api, "maren", "Other")
    other.script("From the character's connection.")
    _, events = await turn(api, server, chat, "And now?")
    assert last_reply(events)["status"] == "complete", events
    assert len(other.chat_requests) == 1
    assert other.chat_requests[0]["model"] == "other-model"

    # The chat's own pick wins over the character's.
    await patch_settings(api, chat, connection="Home")
    llm.script("From the chat's connection.")
    _, events = await turn(api, server, chat, "Once more?")
    assert last_reply(events)["status"] == "complete", events
    assert len(llm.chat_requests) == 2 and len(other.chat_requests) == 1
    view = await get_chat(api, chat)
    texts = [m["content"] for m in view["messages"] if m["role"] == "assistant"]
    assert texts[-3:] == [
        "From the user model.",
        "From the character's connection.",
        "From the chat's connection.",
    ]


async def test_a_downloaded_card_cannot_pick_the_user_s_connection(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer, other: ReplayLLMServer
) -> None:
    """A card naming one of the user's connections (a paid cloud one, say) is imported
    without that choice: its chats go where the user says, and the import says why."""
    await put_connection(api, "Cloud", other, "other-model", api_key="sk-other")
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Sly",
            "description": "A card that wants the user's cloud model.",
            "first_mes": "Hello.",
            "extensions": {"storyloom": {"connection": "Cloud"}},
        },
    }
    upload = {"file": ("sly.json", json.dumps(card).encode())}
    imported = await api.post("/api/chats/import", files=upload)
    assert imported.status_code == 201, imported.text
    assert any("connection" in w for w in imported.json()["warnings"])
    chat = imported.json()["conversation"]["id"]
    llm.script("From the user model.")
    _, events = await turn(api, server, chat, "Hi.")
    assert last_reply(events)["status"] == "complete", events
    assert len(llm.chat_requests) == 1 and not other.chat_requests


async def test_a_missing_connection_fails_the_turn_naming_it_and_where_it_was_chosen(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    chat = await new_chat(api)
    await patch_settings(api, chat, connection="Gone")
    _, events = await turn(api, server, chat, "Hello?")
    done = last_reply(events)
    assert done["status"] == "error"
    assert "'Gone'" in done["error"]
    assert "chat's settings" in done["error"]
    assert not llm.chat_requests


async def test_a_group_member_s_connection_writes_that_member_s_replies(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer, other: ReplayLLMServer
) -> None:
    await put_connection(api, "Other", other, "other-model", api_key="sk-other")
    created = await api.post("/api/groups", json={"members": ["maren", "ivo"]})
    assert created.status_code == 201, created.text
    chat = created.json()["id"]
    group = (await api.get(f"/api/chats/{chat}/group")).json()
    settings = group["group"]
    settings["members"] = [
        {**m, "connection": "Other" if m["character_id"] == "ivo" else None}
        for m in settings["members"]
    ]
    changed = await api.put(
        f"/api/chats/{chat}/group", json={"group": settings, "expected_version": group["version"]}
    )
    assert changed.status_code == 200, changed.text

    for speaker, server_of in (("ivo", other), ("maren", llm)):
        before = len(server_of.chat_requests)
        async with subscribed(server, chat) as ws:
            version = (await get_chat(api, chat))["conversation"]["version"]
            response = await api.post(
                f"/api/chats/{chat}/group/generate",
                json={"speaker": speaker, "expected_version": version},
            )
            assert response.status_code == 202, response.text
            events = await receive_until(ws, chat_done)
        assert last_reply(events)["status"] == "complete", events
        assert len(server_of.chat_requests) == before + 1, speaker


async def test_an_agent_profile_s_connection_answers_its_turns(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer, other: ReplayLLMServer
) -> None:
    await put_connection(api, "Other", other, "other-model", api_key="sk-other")
    profile = {"id": "dm", "name": "DM", "protocol": "tam", "connection": "Other"}
    created = await api.post("/api/agents", json=profile)
    assert created.status_code == 201, created.text
    assert created.json()["connection"] == "Other"
    chat = await new_chat(api)
    await patch_settings(api, chat, agent_profile="dm")

    other.script("The agent speaks.")
    _, events = await turn(api, server, chat, "Roll for me.")
    assert last_reply(events)["status"] == "complete", events
    assert len(other.chat_requests) == 1
    assert not llm.chat_requests


SILLYTAVERN_SETTINGS: Json = {
    "main_api": "textgenerationwebui",
    "power_user": {"instruct": {"preset": "ChatML"}},
    "extension_settings": {
        "connectionManager": {
            "selectedProfile": "b1",
            "profiles": [
                {
                    "id": "a1",
                    "mode": "cc",
                    "exclude": [],
                    "api": "openai",
                    "preset": "Default",
                    "model": "gpt-4o-mini",
                    "proxy": "None",
                    "secret-id": "0f1e",
                    "name": "OpenAI gpt-4o-mini - Default",
                },
                {
                    "id": "b1",
                    "mode": "tc",
                    "exclude": [],
                    "api": "koboldcpp",
                    "preset": "Universal-Light",
                    "api-url": "http://127.0.0.1:5001/",
                    "model": "koboldcpp/Mistral-Nemo-12B.Q4_K_M",
                    "sysprompt": "Roleplay - Immersive",
                    "sysprompt-state": "true",
                    "instruct": "Mistral V3-Tekken",
                    "context": "Mistral V3-Tekken",
                    "instruct-state": "true",
                    "tokenizer": "api_kobold",
                    "stop-strings": '["\\nUser:"]',
                    "name": "Kobold Nemo",
                },
                {
                    "id": "c1",
                    "mode": "tc",
                    "api": "ooba",
                    "api-url": "http://192.168.1.20:5000",
                    "model": "",
                    "instruct": "Alpaca",
                    "context": "Alpaca",
                    "name": "Ooba on the desktop",
                },
                {
                    "id": "d1",
                    "mode": "cc",
                    "api": "claude",
                    "model": "claude-3-5",
                    "name": "Claude",
                },
            ],
        }
    },
}


async def test_sillytavern_connection_profiles_import_with_unknown_apis_reported(
    api: httpx.AsyncClient, server: Any
) -> None:
    upload = {
        "file": ("settings.json", json.dumps(SILLYTAVERN_SETTINGS).encode(), "application/json")
    }
    response = await api.post("/api/connections/import", files=upload)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["imported"] == [
        "OpenAI gpt-4o-mini - Default",
        "Kobold Nemo",
        "Ooba on the desktop",
    ]
    assert "secrets.json" in result["keys_note"]
    by_name = {p["source_name"]: p for p in result["profiles"]}
    assert by_name["Claude"]["name"] is None
    assert "'claude'" in by_name["Claude"]["notes"][0]
    assert any("Universal-Light" in n for n in by_name["Kobold Nemo"]["notes"])

    connections = (await api.get("/api/connections")).json()["connections"]
    openai = connections["OpenAI gpt-4o-mini - Default"]
    assert (openai["api"], openai["base_url"], openai["model"]) == (
        "chat",
        "https://api.openai.com/v1",
        "gpt-4o-mini",
    )
    assert openai["api_key_set"] is False
    kobold = connections["Kobold Nemo"]
    assert (kobold["api"], kobold["base_url"]) == ("koboldcpp", "http://127.0.0.1:5001")
    assert kobold["instruct_template"] == "Mistral V3-Tekken"
    assert kobold["context_template"] == "Mistral V3-Tekken"
    assert kobold["tokenizer"] == "endpoint"
    assert kobold["parameters"]["stop"] == ["\nUser:"]
    ooba = connections["Ooba on the desktop"]
    assert (ooba["api"], ooba["base_url"]) == ("text", "http://192.168.1.20:5000/v1")

    # Again: the names are taken, so nothing changes unless asked to replace.
    again = await api.post("/api/connections/import", files=upload)
    assert again.json()["imported"] == []
    replaced = await api.post("/api/connections/import", files=upload, data={"replace": "true"})
    assert len(replaced.json()["imported"]) == 3


async def test_a_file_without_profiles_is_refused_naming_it(api: httpx.AsyncClient) -> None:
    upload = {"file": ("settings.json", b'{"main_api": "openai"}', "application/json")}
    response = await api.post("/api/connections/import", files=upload)
    assert response.status_code == 422
    assert "settings.json" in response.json()["error"]["message"]
    broken = {"file": ("settings.json", b"{not json", "application/json")}
    response = await api.post("/api/connections/import", files=broken)
    assert response.status_code == 422
    assert "settings.json" in response.json()["error"]["message"]
