"""Lore scopes over real HTTP: a chat's books and why, the project's global list, and
the knowledge bases' own operations (on/off, rename, duplicate, delete with what uses it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from storyloom.testing.st_documents import (
    card_book_entry,
    card_document,
    world_info_document,
    world_info_entry,
)

BOOK = world_info_document(
    [world_info_entry(0, ["Qin"], "The Qin unified the warring states.")], name="Qin History"
)
CARD = card_document(
    "Seraphina",
    book=[card_book_entry(0, ["glade"], "The glade is Seraphina's home.")],
    book_name="Seraphina's Forest",
)


def upload(client: httpx.Client, name: str, document: Any, **form: str) -> httpx.Response:
    files = {"file": (name, json.dumps(document).encode())}
    return client.post("/api/knowledge/import", files=files, data={"scope": "local", **form})


def setup(client: httpx.Client) -> tuple[str, str, str]:
    """Import the card and the book; start a chat with the card. (chat, card book, book)"""
    card = upload(client, "seraphina.json", CARD)
    assert card.status_code == 201, card.text
    card_book = card.json()["created"][0]["kb_id"]
    book = upload(client, "qin.json", BOOK)
    assert book.status_code == 201, book.text
    character_id = Path(card.json()["character_file"]).stem
    chat = client.post("/api/chats", json={"character_id": character_id})
    assert chat.status_code == 201, chat.text
    return chat.json()["id"], card_book, book.json()["created"][0]["kb_id"]


def test_a_chat_with_a_card_has_its_book_and_binding_another_adds_it(client: httpx.Client) -> None:
    chat, card_book, book = setup(client)
    lore = client.get(f"/api/chats/{chat}/lore").json()
    assert [(a["kb_id"], a["scope"], a["name"]) for a in lore["active"]] == [
        (card_book, "character", "Seraphina's Forest")
    ]
    assert lore["active"][0]["reason"] == "bound to the character Seraphina"
    # The card's own book is shown under its character, not offered to bind again.
    assert {b["kb_id"] for b in lore["available"]} == {book}
    put = client.put(f"/api/chats/{chat}/lore", json={"knowledge_bases": [book]})
    assert put.status_code == 200, put.text
    assert [(a["kb_id"], a["scope"]) for a in put.json()["active"]] == [
        (book, "chat"),
        (card_book, "character"),
    ]
    settings = client.get(f"/api/chats/{chat}").json()["conversation"]["settings"]
    assert settings["knowledge_bases"] == [book]
    refused = client.put(f"/api/chats/{chat}/lore", json={"knowledge_bases": ["kb_nowhere"]})
    assert refused.status_code == 422
    assert "kb_nowhere" in refused.json()["error"]["message"]
    assert client.get(f"/api/chats/{chat}").json()["conversation"]["settings"][
        "knowledge_bases"
    ] == [book]


def test_the_global_list_puts_a_book_in_every_chat_and_off_takes_it_out(
    client: httpx.Client,
) -> None:
    chat, card_book, book = setup(client)
    put = client.put(
        "/api/lore/project",
        json={"global_knowledge_bases": [book], "insertion_strategy": "character_first"},
    )
    assert put.status_code == 200, put.text
    assert client.get("/api/lore/project").json() == {
        "global_knowledge_bases": [book],
        "insertion_strategy": "character_first",
        # a request without the budget keeps it
        "budget_percent": 25,
        "budget_cap": 0,
    }
    listed = {b["kb_id"]: b for b in client.get("/api/knowledge/bases").json()["bases"]}
    assert listed[book]["global_lore"] and not listed[card_book]["global_lore"]
    lore = client.get(f"/api/chats/{chat}/lore").json()
    assert [(a["kb_id"], a["scope"]) for a in lore["active"]] == [
        (book, "global"),
        (card_book, "character"),
    ]
    off = client.patch(f"/api/knowledge/bases/{book}", json={"enabled": False})
    assert off.status_code == 200 and off.json()["enabled"] is False
    lore = client.get(f"/api/chats/{chat}/lore").json()
    assert [a["kb_id"] for a in lore["active"]] == [card_book]
    assert [(d["kb_id"], d["scope"]) for d in lore["disabled"]] == [(book, "global")]
    bad = client.put(
        "/api/lore/project", json={"global_knowledge_bases": ["nope"], "insertion_strategy": "x"}
    )
    assert bad.status_code == 422


def test_rename_and_duplicate(client: httpx.Client) -> None:
    _chat, _card_book, book = setup(client)
    renamed = client.patch(f"/api/knowledge/bases/{book}", json={"displayName": "Qin, revised"})
    assert renamed.json()["displayName"] == "Qin, revised"
    copy = client.post(f"/api/knowledge/bases/{book}/duplicate")
    assert copy.status_code == 201, copy.text
    assert copy.json()["displayName"] == "Qin, revised (copy)"
    assert copy.json()["kb_id"] != book and copy.json()["entry_count"] == 1
    assert copy.json()["global_lore"] is False


def test_deleting_a_book_a_chat_uses_says_which_and_needs_a_confirm(client: httpx.Client) -> None:
    chat, card_book, book = setup(client)
    client.put(f"/api/chats/{chat}/lore", json={"knowledge_bases": [book]})
    client.put(
        "/api/lore/project", json={"global_knowledge_bases": [book], "insertion_strategy": "evenly"}
    )
    who = client.get(f"/api/knowledge/bases/{book}/referrers").json()["referrers"]
    assert [(r["kind"], r["id"]) for r in who] == [("global", ""), ("chat", chat)]
    refused = client.delete(f"/api/knowledge/bases/{book}")
    assert refused.status_code == 409
    message = refused.json()["error"]["message"]
    assert "Qin History" in message and "chat" in message and "confirm" in message
    assert client.get(f"/api/knowledge/bases/{book}").status_code == 200
    deleted = client.delete(f"/api/knowledge/bases/{book}", params={"confirm": "true"})
    assert deleted.status_code == 200, deleted.text
    assert client.get(f"/api/knowledge/bases/{book}").status_code == 404
    assert (
        client.get(f"/api/chats/{chat}").json()["conversation"]["settings"]["knowledge_bases"] == []
    )
    assert client.get("/api/lore/project").json()["global_knowledge_bases"] == []
    # The card's book is its character's: deleting it asks too.
    who = client.get(f"/api/knowledge/bases/{card_book}/referrers").json()["referrers"]
    assert [(r["kind"], r["name"]) for r in who] == [("character", "Seraphina")]
    assert client.delete(f"/api/knowledge/bases/{card_book}").status_code == 409


def test_a_book_nothing_uses_is_deleted_at_once(client: httpx.Client) -> None:
    _chat, _card_book, book = setup(client)
    deleted = client.delete(f"/api/knowledge/bases/{book}")
    assert deleted.status_code == 200 and deleted.json()["referrers"] == []
    assert book not in {b["kb_id"] for b in client.get("/api/knowledge/bases").json()["bases"]}


def test_importing_a_book_already_here_offers_to_keep_both(client: httpx.Client) -> None:
    _chat, _card_book, book = setup(client)
    again = upload(client, "qin (1).json", BOOK)
    assert again.status_code == 201, again.text
    report = again.json()
    assert report["created"] == []
    assert report["duplicates"] == [
        {
            "displayName": "Qin History",
            "existing_kb_id": book,
            "existing_name": "Qin History",
            "kept": "existing",
            "new_kb_id": None,
        }
    ]
    both = upload(client, "qin (1).json", BOOK, on_duplicate="keep_both").json()
    assert len(both["created"]) == 1 and both["duplicates"][0]["kept"] == "both"
