"""Importing a card that is a character here already, through ``POST
/api/characters/import``: the very same card or a changed one answers a conflict and
writes nothing until the user picks update (a new version of the character) or keep
both; and the clutter a card used to bring: no knowledge base for a card without lore,
a card's book that is an imported world linked to it, every "Bind a book…" list showing
each book once."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from storyloom.plugins import node_registry
from storyloom.testing.replay_server import ReplayLLMServer
from storyloom.testing.st_documents import (
    card_book_entry,
    card_document,
    world_info_document,
    world_info_entry,
)
from tests.server.conftest import chat_home

Json = dict[str, Any]


@pytest.fixture
def api(
    tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]
) -> Iterator[httpx.Client]:
    home = chat_home(tmp_path / "home", llm)
    server = start_server(home, node_registry=node_registry(entry_points=False))
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def import_card(
    api: httpx.Client, card: Json, on_conflict: str | None = None, name: str = "aria.json"
) -> httpx.Response:
    form = {"on_conflict": on_conflict} if on_conflict is not None else {}
    data = json.dumps(card).encode("utf-8")
    return api.post("/api/characters/import", files={"file": (name, data)}, data=form)


def characters(api: httpx.Client) -> list[Json]:
    answer = api.get("/api/characters")
    answer.raise_for_status()
    found: list[Json] = answer.json()["characters"]
    return found


def bases(api: httpx.Client) -> list[Json]:
    found: list[Json] = api.get("/api/knowledge/bases").json()["bases"]
    return found


def book_names(api: httpx.Client) -> list[str]:
    answer = api.get("/api/lore/books")
    answer.raise_for_status()
    return [b["name"] for b in answer.json()["books"]]


ELDORIA = [
    ("glade", "The glade is Seraphina's home."),
    ("shadow", "Shadowcreatures haunt the forest."),
]


def test_the_same_card_twice_answers_a_conflict_and_writes_nothing(api: httpx.Client) -> None:
    first = import_card(api, card_document("Aria"))
    assert first.status_code == 201, first.text
    made = first.json()
    assert made["outcome"] == "added" and made["name"] == "Aria"
    # A card without lore makes no knowledge base.
    assert bases(api) == [] and made["books"] == []
    again = import_card(api, card_document("Aria"))
    assert again.status_code == 409
    body = again.json()
    assert body["conflict"] == {
        "sameness": "identical",
        "character_id": made["id"],
        "name": "Aria",
    }
    assert body["error"]["message"]
    assert [c["id"] for c in characters(api)] == [made["id"]]
    assert bases(api) == []


def test_keep_both_makes_a_second_character(api: httpx.Client) -> None:
    first = import_card(api, card_document("Aria")).json()
    second = import_card(api, card_document("Aria"), "keep_both")
    assert second.status_code == 201, second.text
    assert second.json()["outcome"] == "added"
    ids = sorted(c["id"] for c in characters(api))
    assert len(ids) == 2 and first["id"] in ids and second.json()["id"] in ids


def test_a_changed_card_offers_update_and_becomes_a_new_version(api: httpx.Client) -> None:
    first = import_card(api, card_document("Aria")).json()
    changed = card_document("Aria", description="Aria now charts the sky.")
    asked = import_card(api, changed)
    assert asked.status_code == 409
    assert asked.json()["conflict"]["sameness"] == "changed"
    assert asked.json()["conflict"]["character_id"] == first["id"]
    assert characters(api)[0]["description"] != "Aria now charts the sky."
    updated = import_card(api, changed, "update")
    assert updated.status_code == 201, updated.text
    answer = updated.json()
    assert answer["outcome"] == "updated" and answer["id"] == first["id"]
    assert answer["version"] != first["version"]
    listed = characters(api)
    assert [c["id"] for c in listed] == [first["id"]]
    assert listed[0]["description"] == "Aria now charts the sky."
    # The card is the character's card now: the same card again is "identical".
    again = import_card(api, changed)
    assert again.status_code == 409 and again.json()["conflict"]["sameness"] == "identical"


def test_updating_with_a_changed_book_replaces_the_cards_old_book(api: httpx.Client) -> None:
    old_book = [card_book_entry(0, ["glade"], "The glade is quiet.")]
    first = import_card(api, card_document("Seraphina", book=old_book)).json()
    assert len(first["books"]) == 1
    new_book = [card_book_entry(0, ["glade"], "The glade burns.")]
    updated = import_card(api, card_document("Seraphina", book=new_book), "update").json()
    assert updated["outcome"] == "updated"
    (bound,) = updated["books"]
    assert bound != first["books"][0]
    document = api.get(f"/api/knowledge/bases/{bound}").json()
    assert [e["content"]["value"] for e in document["knowledge_base"]["entries"]] == [
        "The glade burns."
    ]


def test_an_upload_that_is_no_card_is_refused_naming_the_file(api: httpx.Client) -> None:
    world = world_info_document([world_info_entry(0, ["glade"], "A glade.")])
    answer = import_card(api, world, name="Eldoria.json")
    assert answer.status_code == 422
    assert answer.json()["error"]["problems"][0]["field"] == "file"
    assert "Eldoria.json" in answer.json()["error"]["message"]
    assert characters(api) == [] and bases(api) == []


def _import_world(api: httpx.Client) -> str:
    world = world_info_document(
        [world_info_entry(i, [k], text) for i, (k, text) in enumerate(ELDORIA)], name="Eldoria"
    )
    data = json.dumps(world).encode("utf-8")
    answer = api.post("/api/knowledge/import", files={"file": ("Eldoria.json", data)})
    assert answer.status_code == 201, answer.text
    kb_id: str = answer.json()["created"][0]["kb_id"]
    return kb_id


def _seraphina(world: str | None) -> Json:
    book = [card_book_entry(i, [k], text) for i, (k, text) in enumerate(ELDORIA)]
    card = card_document("Seraphina", book=book, book_name="Eldoria")
    if world is not None:
        card["data"]["extensions"]["world"] = world
    return card


def test_a_cards_book_that_is_an_imported_world_is_linked_not_copied(api: httpx.Client) -> None:
    world_id = _import_world(api)
    made = import_card(api, _seraphina("Eldoria"), name="Seraphina.json")
    assert made.status_code == 201, made.text
    assert made.json()["books"] == [world_id]
    assert [b["kb_id"] for b in bases(api)] == [world_id]
    assert book_names(api) == ["Eldoria"]


def test_a_project_with_a_cards_copy_of_a_world_lists_the_book_once(
    api: httpx.Client,
) -> None:
    # Imported before the world came (and without extensions.world): the card's copy is
    # stored, then the world file beside it.
    made = import_card(api, _seraphina(None), name="Seraphina.json")
    card_book = made.json()["books"][0]
    world_id = _import_world(api)
    assert {b["kb_id"] for b in bases(api)} == {card_book, world_id}
    assert book_names(api) == ["Eldoria"]
    listed = api.get("/api/lore/books").json()["books"]
    assert [b["kb_id"] for b in listed] == [world_id]
    # A chat's "Bind a book…" list is the same list.
    chat = api.post("/api/chats", json={"character_id": made.json()["id"]})
    chat.raise_for_status()
    lore = api.get(f"/api/chats/{chat.json()['id']}/lore").json()
    assert [b["kb_id"] for b in lore["available"]] == [world_id]
    # The card's own book still reaches its chats, through its character.
    assert card_book in [b["kb_id"] for b in lore["active"]]
