"""What a card may run is the user's answer, per character, kept outside the card: the
character page lists every script with its status, a card cannot allow itself, and new
chats start from the answer."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from storyloom.plugins import node_registry
from storyloom.testing.replay_server import ReplayLLMServer
from tests.fixtures.script_cards import scripted_card
from tests.server.conftest import chat_home


def _card(**extensions: Any) -> bytes:
    off = {"id": "r2", "scriptName": "off", "findRegex": "x", "placement": [2], "disabled": True}
    card = scripted_card(more_regex=[off], **extensions)
    return json.dumps(card, ensure_ascii=False).encode()


@pytest.fixture
def api(
    tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]
) -> Iterator[httpx.Client]:
    home = chat_home(tmp_path / "home", llm)
    server = start_server(home, node_registry=node_registry(entry_points=False))
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def _import(api: httpx.Client, data: bytes) -> str:
    answer = api.post("/api/characters/import", files={"file": ("card.json", data)})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def _statuses(document: dict[str, Any]) -> dict[str, str]:
    scripts = document["scripts"]
    return {s["id"]: s["status"] for s in scripts["regex"] + scripts["helper"]}


def test_an_imported_cards_scripts_are_listed_and_wait_for_an_answer(api: httpx.Client) -> None:
    character_id = _import(api, _card())
    document = api.get(f"/api/characters/{character_id}").json()
    scripts = document["scripts"]
    assert scripts["needs_answer"] is True
    assert _statuses(document) == {
        "r1": "not_allowed",
        "r2": "off_in_card",
        "mvu": "native",
        "daily": "not_allowed",
    }
    bar = scripts["regex"][0]
    assert (bar["scope"], bar["frame"], bar["frame_scripts"]) == ("display", True, True)
    assert [h["kind"] for h in scripts["helper"]] == ["mvu_bundle", "other"]
    chat = api.post("/api/chats", json={"character_id": character_id}).json()
    assert chat["settings"]["allow_regex_scripts"] is False
    assert chat["settings"]["allow_html_scripts"] is False


def test_allowing_a_card_reaches_its_new_chats_and_stops_the_question(api: httpx.Client) -> None:
    character_id = _import(api, _card())
    answer = api.put(
        f"/api/characters/{character_id}/permissions",
        json={"regex_scripts": True, "frame_scripts": True, "helper_scripts": ["daily"]},
    )
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert document["scripts"]["needs_answer"] is False
    assert document["scripts"]["permissions"]["asked"] is True
    assert _statuses(document)["r1"] == "runs"
    assert _statuses(document)["daily"] == "runs"
    chat = api.post("/api/chats", json={"character_id": character_id}).json()
    assert chat["settings"]["allow_regex_scripts"] is True
    assert chat["settings"]["allow_html_scripts"] is True


def test_a_card_cannot_allow_itself(api: httpx.Client) -> None:
    forged = {"asked": True, "regex_scripts": True, "helper_scripts": ["daily"]}
    character_id = _import(api, _card(storyloom={"permissions": forged}, card_permissions=forged))
    document = api.get(f"/api/characters/{character_id}").json()
    assert document["scripts"]["needs_answer"] is True
    assert set(_statuses(document).values()) <= {"not_allowed", "off_in_card", "native"}


def test_a_bad_answer_is_refused_and_changes_nothing(api: httpx.Client) -> None:
    character_id = _import(api, _card())
    answer = api.put(
        f"/api/characters/{character_id}/permissions", json={"regex_scripts": "sure", "x": 1}
    )
    assert answer.status_code == 422
    document = api.get(f"/api/characters/{character_id}").json()
    assert document["scripts"]["needs_answer"] is True
    assert api.put("/api/characters/nobody/permissions", json={}).status_code == 404


def test_a_deleted_characters_answers_go_with_it(api: httpx.Client) -> None:
    character_id = _import(api, _card())
    api.put(f"/api/characters/{character_id}/permissions", json={"regex_scripts": True})
    assert api.delete(f"/api/characters/{character_id}").status_code == 204
    again = _import(api, _card())
    assert api.get(f"/api/characters/{again}").json()["scripts"]["needs_answer"] is True
