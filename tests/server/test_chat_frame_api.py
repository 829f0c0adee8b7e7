"""What a chat's sandboxed frames may do comes from the character's answers: the frame
route sends only the allowed Tavern Helper scripts, and the variables route is the write
a frame's bridge makes when writes are allowed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from storyloom.plugins import node_registry
from storyloom.testing.replay_server import ReplayLLMServer
from tests.server.conftest import chat_home
from tests.server.test_card_permissions import _card, _import


@pytest.fixture
def api(
    tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]
) -> Iterator[httpx.Client]:
    home = chat_home(tmp_path / "home", llm)
    server = start_server(home, node_registry=node_registry(entry_points=False))
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def test_a_chat_whose_character_allowed_nothing_gets_no_scripts_and_no_writes(
    api: httpx.Client,
) -> None:
    character_id = _import(api, _card())
    chat = api.post("/api/chats", json={"character_id": character_id}).json()
    access = api.get(f"/api/chats/{chat['id']}/frame").json()
    assert access["writes"] is False
    assert access["network"] is False
    assert access["helper_scripts"] == []


def test_only_the_allowed_helper_script_is_sent_with_its_code(api: httpx.Client) -> None:
    character_id = _import(api, _card())
    answer = api.put(
        f"/api/characters/{character_id}/permissions",
        json={"frame_scripts": True, "frame_writes": True, "helper_scripts": ["daily", "mvu"]},
    )
    assert answer.status_code == 200, answer.text
    chat = api.post("/api/chats", json={"character_id": character_id}).json()
    access = api.get(f"/api/chats/{chat['id']}/frame").json()
    assert access["writes"] is True
    assert access["network"] is False
    # MVU's bundle is served natively: never sent to run, even when listed.
    assert access["helper_scripts"] == [
        {"id": "daily", "name": "日替", "content": "eventOn('x', () => {})"}
    ]


def test_a_message_variables_write_changes_its_state_only(api: httpx.Client) -> None:
    character_id = _import(api, _card())
    chat = api.post("/api/chats", json={"character_id": character_id}).json()
    view = api.get(f"/api/chats/{chat['id']}").json()
    first = view["messages"][0]["id"]
    url = f"/api/chats/{chat['id']}/messages/{first}/variables"
    answer = api.put(url, json={"variables": {"stat_data": {"好感度": 7}}})
    assert answer.status_code == 200, answer.text
    state = api.get(f"/api/chats/{chat['id']}/messages/{first}/state").json()
    assert state["state"]["variables"] == {"stat_data": {"好感度": 7}}
    read = api.get(url).json()
    assert read["variables"] == {"stat_data": {"好感度": 7}}
    assert read["before"] == {}
    assert {"op": "add", "path": "/variables/stat_data", "value": {"好感度": 7}} in read["delta"]
    other = api.put(f"/api/chats/{chat['id']}/messages/nope/variables", json={"variables": {}})
    assert other.status_code == 404
