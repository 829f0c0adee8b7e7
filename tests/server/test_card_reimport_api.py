"""Importing a card that is a character here already, through ``POST
/api/characters/import``: the very same card or a changed one answers a conflict and
writes nothing until the user picks update (a new version of the character) or keep
both; and the clutter a card used to bring: no knowledge base for a card without lore,
a card's book that is an imported world linked to it, every "Bind a book…" list showing
each book once. The other doors (the Knowledge page's ``POST /api/knowledge/import``, a
chat's and a group's import) answer the same conflict; a world book imported twice keeps
its own ``on_duplicate``."""

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
    card_png,
    chat_message,
    group_chat_jsonl,
    group_document,
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


def knowledge_import(
    api: httpx.Client, document: Json, name: str = "Seraphina.json", **form: str
) -> httpx.Response:
    data = json.dumps(document).encode("utf-8")
    return api.post("/api/knowledge/import", files={"file": (name, data)}, data=form)


def conversations(api: httpx.Client) -> list[str]:
    return [c["id"] for c in api.get("/api/chats").json()["conversations"]]


def seraphina(description: str = "A forest guardian.") -> Json:
    book = [card_book_entry(0, ["glade"], "The glade is Seraphina's home.")]
    return card_document("Seraphina", description=description, book=book)


def test_the_same_card_twice_on_the_knowledge_page_asks_and_writes_nothing(
    api: httpx.Client,
) -> None:
    first = knowledge_import(api, seraphina())
    assert first.status_code == 201, first.text
    assert first.json()["character"] == "Seraphina"
    assert first.json()["character_updated"] is False
    (made,) = characters(api)
    books = bases(api)
    assert len(books) == 1
    again = knowledge_import(api, seraphina())
    assert again.status_code == 409, again.text
    assert again.json()["conflict"] == {
        "sameness": "identical",
        "character_id": made["id"],
        "name": "Seraphina",
    }
    assert characters(api) == [made]
    assert bases(api) == books


def test_keep_both_on_the_knowledge_page_makes_a_second_character(api: httpx.Client) -> None:
    knowledge_import(api, seraphina()).raise_for_status()
    (first,) = characters(api)
    second = knowledge_import(api, seraphina(), on_conflict="keep_both")
    assert second.status_code == 201, second.text
    ids = {c["id"] for c in characters(api)}
    assert len(ids) == 2 and first["id"] in ids
    assert Path(second.json()["character_file"]).stem in ids
    # The second character's book is the first one's: the same book is not stored again.
    assert len(bases(api)) == 1
    assert [d["kept"] for d in second.json()["duplicates"]] == ["existing"]


def test_update_on_the_knowledge_page_makes_a_new_version(api: httpx.Client) -> None:
    knowledge_import(api, seraphina()).raise_for_status()
    (first,) = characters(api)
    version = api.get(f"/api/characters/{first['id']}").json()["version"]
    changed = seraphina("A guardian who left the forest.")
    asked = knowledge_import(api, changed)
    assert asked.status_code == 409
    assert asked.json()["conflict"]["sameness"] == "changed"
    assert characters(api)[0]["description"] == "A forest guardian."
    updated = knowledge_import(api, changed, on_conflict="update")
    assert updated.status_code == 201, updated.text
    report = updated.json()
    assert report["character_updated"] is True
    assert Path(report["character_file"]).stem == first["id"]
    (now,) = characters(api)
    assert now["id"] == first["id"]
    assert now["description"] == "A guardian who left the forest."
    assert api.get(f"/api/characters/{first['id']}").json()["version"] != version


def test_a_world_book_twice_keeps_its_on_duplicate_choice(api: httpx.Client) -> None:
    world = world_info_document([world_info_entry(0, ["glade"], "A glade.")], name="Eldoria")
    first = knowledge_import(api, world, name="Eldoria.json")
    assert first.status_code == 201, first.text
    again = knowledge_import(api, world, name="Eldoria.json")
    assert again.status_code == 201, again.text
    assert again.json()["created"] == []
    assert [d["kept"] for d in again.json()["duplicates"]] == ["existing"]
    both = knowledge_import(api, world, name="Eldoria.json", on_duplicate="keep_both")
    assert both.status_code == 201, both.text
    assert [d["kept"] for d in both.json()["duplicates"]] == ["both"]
    assert len(bases(api)) == 2
    assert characters(api) == []


def chat_import(api: httpx.Client, card: Json, **form: str) -> httpx.Response:
    data = card_png(card)
    return api.post("/api/chats/import", files={"file": ("Seraphina.png", data)}, data=form)


def test_a_chats_import_asks_about_a_card_here_and_update_chats_with_it(
    api: httpx.Client,
) -> None:
    first = chat_import(api, seraphina())
    assert first.status_code == 201, first.text
    character_id = first.json()["character_id"]
    chats = conversations(api)
    again = chat_import(api, seraphina())
    assert again.status_code == 409, again.text
    assert again.json()["conflict"]["character_id"] == character_id
    assert conversations(api) == chats
    assert [c["id"] for c in characters(api)] == [character_id]
    updated = chat_import(api, seraphina("Changed."), on_conflict="update")
    assert updated.status_code == 201, updated.text
    assert updated.json()["character_id"] == character_id
    assert [c["description"] for c in characters(api)] == ["Changed."]
    assert len(conversations(api)) == len(chats) + 1


def group_files() -> tuple[bytes, bytes]:
    group = group_document(["Seraphina.png"])
    lines = [chat_message("Seraphina", "Welcome to the glade.", original_avatar="Seraphina.png")]
    return json.dumps(group).encode(), group_chat_jsonl(lines).encode()


def group_import(api: httpx.Client, **form: str) -> httpx.Response:
    group, chat = group_files()
    return api.post(
        "/api/groups/import",
        files=[
            ("group", ("1.json", group, "application/json")),
            ("chat", ("1.jsonl", chat, "application/jsonl")),
            ("cards", ("Seraphina.png", card_png(seraphina()), "image/png")),
        ],
        data=form,
    )


def test_a_groups_import_asks_about_a_member_card_here_before_writing(
    api: httpx.Client,
) -> None:
    knowledge_import(api, seraphina()).raise_for_status()
    (here,) = characters(api)
    books = bases(api)
    asked = group_import(api)
    assert asked.status_code == 409, asked.text
    assert asked.json()["conflict"]["character_id"] == here["id"]
    assert conversations(api) == [] and characters(api) == [here] and bases(api) == books
    # The very same card "used as it is": the member is the character here.
    same = group_import(api, on_conflict="update")
    assert same.status_code == 201, same.text
    assert same.json()["members"]["Seraphina.png"] == here["id"]
    assert [c["id"] for c in characters(api)] == [here["id"]] and bases(api) == books
    both = group_import(api, on_conflict="keep_both")
    assert both.status_code == 201, both.text
    assert len(characters(api)) == 2
    assert both.json()["members"]["Seraphina.png"] != here["id"]
