"""Role C end to end, the way the Writing page sees it: a kept chapter that contradicts
the book (a dead brother speaking, the old home) becomes warnings on
``/api/writing/books/{id}/warnings`` naming the fact, its chapter and both sentences; a
chapter with the legal progression stays quiet."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from storyloom.store.database import Database
from storyloom.writing.book_store import BookStore, Fact
from tests.server.test_writing_api import api, home, ok

__all__ = ["api", "home"]  # fixtures shared with the writing API tests
CURATION_DEADLINE_S = 60
ANNA = "/entities/characters/anna"
TOMAS = "/entities/characters/tomas"


def curated(api: httpx.Client, book_id: str, count: int) -> None:
    deadline = time.monotonic() + CURATION_DEADLINE_S
    while True:
        outputs: list[dict[str, Any]] = ok(api.get(f"/books/{book_id}/outputs"))
        states = [set(o["steps"].values()) for o in outputs]
        assert not any("failed" in s for s in states), outputs
        if len(outputs) >= count and all(s <= {"done", "skipped"} for s in states):
            return
        assert time.monotonic() < deadline, f"curation did not finish: {outputs}"
        time.sleep(0.05)


def test_kept_chapter_contradictions_are_warnings_naming_the_fact_and_its_sentence(
    api: httpx.Client, home: Path
) -> None:
    book_id = str(ok(api.post("/books", json={"title": "The Salt Ledger"}), 201)["id"])
    for path, title in ((ANNA, "Anna"), (TOMAS, "Tomas")):
        body = {"path": path, "kind": "character", "title": title, "aliases": [title]}
        ok(api.put(f"/books/{book_id}/resource", json=body))
    ok(api.put(f"/books/{book_id}/resource", json={
        "path": "/entities/locations/porto", "kind": "location", "title": "Porto"
    }))  # fmt: skip
    for n in range(1, 4):
        ok(api.post(f"/books/{book_id}/chapters", json={"title": f"Chapter {n}"}), 201)
    store = BookStore(Database.in_home(home))
    uri = {n: store.chapter(book_id, n).uri for n in (1, 2, 3)}
    store.add_facts(
        book_id,
        [
            Fact(ANNA, "brother", "Tomas", 1, "factual", uri[1], "Anna's brother Tomas rowed."),
            Fact(ANNA, "home", "Lisbon", 1, "factual", uri[1], "Anna lived in Lisbon."),
            Fact(ANNA, "home", "Porto", 2, "factual", uri[2], "Anna moved to Porto."),
            Fact(TOMAS, "status", "dead", 3, "timeline", uri[3], "Tomas drowned at sea."),
        ],
    )
    contradicting = (
        "Anna climbed the stairs to her rooms in Lisbon. “Sit,” said Tomas from the dark."
    )
    ok(api.post(f"/books/{book_id}/chapters", json={"title": "Four", "text": contradicting}), 201)
    quiet = "Anna climbed the stairs to her rooms in Porto. She remembered Tomas laughing."
    ok(api.post(f"/books/{book_id}/chapters", json={"title": "Five", "text": quiet}), 201)
    curated(api, book_id, 2)

    assert ok(api.get(f"/books/{book_id}/warnings", params={"chapter": 5})) == []
    warnings = ok(api.get(f"/books/{book_id}/warnings", params={"chapter": 4}))
    by_attribute = {w["attribute"]: w for w in warnings}
    assert set(by_attribute) == {"home", "status"}
    home_warning = by_attribute["home"]
    assert (home_warning["expected"], home_warning["found"], home_warning["sinceChapter"]) == (
        "Porto",
        "Lisbon",
        2,
    )
    assert home_warning["factEvidence"] == "Anna moved to Porto."
    assert home_warning["evidence"] == "Anna climbed the stairs to her rooms in Lisbon."
    assert home_warning["evidenceUri"] == uri[2]
    dead = by_attribute["status"]
    assert (dead["dimension"], dead["expected"], dead["sinceChapter"]) == ("timeline", "dead", 3)
    assert dead["factEvidence"] == "Tomas drowned at sea."
    assert "said Tomas" in dead["evidence"]
    assert "Tomas drowned at sea." in dead["detail"]
