"""When the lore budget cuts entries from a reply's prompt, the reply says so in a
structured summary (how many, which constant ones by name, the budget) that the chat's
notice words; the budget is set through the project's lore settings."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from storyloom.plugins import node_registry
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.fixtures.script_cards import budget_book_entries
from tests.server.conftest import chat_home
from tests.server.test_chat_api import get_chat, turn


def _card() -> bytes:
    # The corpus card's shape: its world and rules are constant but of the lowest order,
    # so they are the first the budget cuts (as SillyTavern cuts them).
    entries = budget_book_entries()
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Maren",
            "description": "A keeper.",
            "first_mes": "Welcome.",
            "character_book": {"name": "Lanternfall", "entries": entries},
        },
    }
    return json.dumps(card, ensure_ascii=False).encode()


@pytest.fixture
def server(tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]) -> Any:
    home = chat_home(tmp_path / "home", llm)
    return start_server(home, node_registry=node_registry(entry_points=False))


@pytest.fixture
async def api(server: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        yield client


async def _chat(api: httpx.AsyncClient) -> str:
    imported = await api.post("/api/characters/import", files={"file": ("card.json", _card())})
    assert imported.status_code == 201, imported.text
    created = await api.post("/api/chats", json={"character_id": imported.json()["id"]})
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


async def _newest_reply(api: httpx.AsyncClient, conversation_id: str) -> dict[str, Any]:
    view = await get_chat(api, conversation_id)
    replies = [m for m in view["messages"] if m["role"] == "assistant"]
    reply: dict[str, Any] = replies[-1]
    return reply


async def test_a_cut_names_how_many_and_the_constant_entries(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    settings = (await api.get("/api/lore/project")).json()
    assert settings["budget_percent"] == 25 and settings["budget_cap"] == 0
    saved = await api.put("/api/lore/project", json={**settings, "budget_cap": 150})
    assert saved.status_code == 200, saved.text
    assert saved.json()["budget_cap"] == 150
    conversation_id = await _chat(api)
    llm.script(Reply(text="The harbour is calm."))
    await turn(api, server, conversation_id, "Tell me about the harbour.")
    reply = await _newest_reply(api, conversation_id)
    cut = reply["extra"]["lore_cut"]
    assert cut["budget"] == 150
    assert cut["constant"] == ["扮演准则", "世界设定"]
    assert cut["count"] >= 2
    prompt = (await api.get(f"/api/chats/{conversation_id}/messages/{reply['id']}/prompt")).json()
    left_out = [r["title"] for r in prompt["lore"] if not r["activated"]]
    assert set(cut["constant"]) <= set(left_out) and len(left_out) == cut["count"]
    # SillyTavern's order: the budget goes to the entries of highest order first, constant
    # or not, so the keyword entries above the constant ones are in the prompt.
    kept = [r["title"] for r in prompt["lore"] if r["activated"]]
    assert kept and all(title.startswith("港口") for title in kept)


async def test_a_reply_whose_lore_fits_says_nothing_and_a_bad_budget_is_refused(
    api: httpx.AsyncClient, server: Any, llm: ReplayLLMServer
) -> None:
    settings = (await api.get("/api/lore/project")).json()
    refused = await api.put("/api/lore/project", json={**settings, "budget_percent": 0})
    assert refused.status_code == 422
    assert "budget_percent" in refused.text
    conversation_id = await _chat(api)
    llm.script(Reply(text="The harbour is calm."))
    await turn(api, server, conversation_id, "Tell me about the harbour.")
    reply = await _newest_reply(api, conversation_id)
    assert "lore_cut" not in reply["extra"]


async def test_the_budget_is_a_share_of_the_context_the_server_reports(
    tmp_path: Path, start_server: Callable[..., Any]
) -> None:
    # A llama.cpp server holding 4,000 tokens: 25 % of it, not of the 8,192 assumed for a
    # server that says nothing (which would fit every entry here).
    with ReplayLLMServer(models=["test-model"], context_length=4000) as small:
        server = start_server(
            chat_home(tmp_path / "home", small), node_registry=node_registry(entry_points=False)
        )
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as api:
            settings = (await api.get("/api/lore/project")).json()
            await api.put("/api/lore/project", json={**settings, "budget_percent": 3})
            conversation_id = await _chat(api)
            small.script(Reply(text="The harbour is calm."))
            await turn(api, server, conversation_id, "Tell me about the harbour.")
            reply = await _newest_reply(api, conversation_id)
    assert reply["extra"]["lore_cut"]["budget"] == 120
