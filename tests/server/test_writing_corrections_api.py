"""The author corrects a book's memory through ``/api/writing``: facts added, edited (a
new version), rejected (and still rejected after the chapter is curated again),
un-rejected; entities added, renamed and merged; relations added and rejected.

Curation here is the offline one: the lexical extractor takes a change ("dyed her hair
silver") from the chapter as a fact, which is what the rejection must outlast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from storyloom.store.database import Database
from storyloom.writing.book_store import BookStore, Fact, Relation
from tests.server.test_writing_api import api, home, ok

__all__ = ["api", "home"]  # fixtures shared with the writing API tests
MARA = "/entities/characters/mara"
CAPTAIN = "/entities/characters/the-captain"
OREN = "/entities/characters/oren"


def store_of(home: Path) -> BookStore:
    return BookStore(Database.in_home(home))


def book_with(api: httpx.Client, *entities: tuple[str, str]) -> str:
    book_id = str(ok(api.post("/books", json={"title": "The Salt Road"}), 201)["id"])
    for kind, title in entities:
        ok(api.post(f"/books/{book_id}/entities", json={"kind": kind, "title": title}), 201)
    return book_id


def state_of(api: httpx.Client, book_id: str) -> int:
    books = ok(api.get("/books"))
    return int(next(b for b in books if b["id"] == book_id)["stateVersion"])


def facts_of(api: httpx.Client, book_id: str, subject: str) -> dict[str, Any]:
    result: dict[str, Any] = ok(api.get(f"/books/{book_id}/facts", params={"subject": subject}))
    return result


def values(facts: list[dict[str, Any]]) -> list[tuple[str, str, int, str]]:
    return [(f["attribute"], f["value"], f["chapter"], f["source"]) for f in facts]


def curated(api: httpx.Client, book_id: str, output_id: str) -> None:
    """Wait for one output's curation to finish (each step done or skipped)."""
    import time

    deadline = time.monotonic() + 60
    while True:
        outputs = ok(api.get(f"/books/{book_id}/outputs"))
        mine = [o for o in outputs if o["outputId"] == output_id]
        states = set(mine[0]["steps"].values()) if mine else {"pending"}
        assert "failed" not in states, mine
        if states <= {"done", "skipped"}:
            return
        assert time.monotonic() < deadline, f"curation did not finish: {mine}"
        time.sleep(0.05)


def keep(api: httpx.Client, book_id: str, chapter: int, text: str) -> None:
    saved = ok(api.put(f"/books/{book_id}/chapters/{chapter}", json={"text": text}))
    curated(api, book_id, saved["outputId"])


def test_an_author_fact_is_listed_with_its_sentence_and_wins_over_an_extracted_one(
    api: httpx.Client, home: Path
) -> None:
    book_id = book_with(api, ("character", "Mara"))
    store_of(home).add_facts(
        book_id, [Fact(MARA, "eyes", "brown", 1, "characterization", source="agent")]
    )
    before = state_of(api, book_id)
    body = {
        "subject": MARA,
        "attribute": "eyes",
        "value": "green",
        "chapter": 1,
        "category": "characterization",
        "evidence": "Mara's green eyes narrowed.",
    }
    answer = ok(api.post(f"/books/{book_id}/facts", json=body), 201)
    assert answer["stateVersion"] > before
    assert values(answer["facts"]) == [("eyes", "green", 1, "author")]
    assert answer["facts"][0]["evidence"] == "Mara's green eyes narrowed."
    # Curation extracting the old value again does not replace the author's.
    store_of(home).add_facts(
        book_id, [Fact(MARA, "eyes", "brown", 1, "characterization", source="agent")]
    )
    assert values(facts_of(api, book_id, MARA)["facts"]) == [("eyes", "green", 1, "author")]
    # The entity's view shows it too, with the state version it is at.
    view = ok(api.get(f"/books/{book_id}/resource", params={"path": MARA}))
    assert [(f["value"], f["source"]) for f in view["facts"]] == [("green", "author")]
    assert view["stateVersion"] == state_of(api, book_id)


def test_an_edit_is_a_new_version_and_the_old_one_stays_in_the_history(
    api: httpx.Client, home: Path
) -> None:
    book_id = book_with(api, ("character", "Mara"))
    store_of(home).add_facts(
        book_id, [Fact(MARA, "home", "Lisbon", 2, evidence="She lived in Lisbon.", source="prose")]
    )
    before = state_of(api, book_id)
    edit = {"subject": MARA, "attribute": "home", "chapter": 2, "value": "Porto"}
    answer = ok(api.put(f"/books/{book_id}/facts", json=edit))
    assert answer["stateVersion"] > before
    assert values(answer["facts"]) == [("home", "Porto", 2, "author")]
    assert answer["facts"][0]["evidence"] == "She lived in Lisbon."
    history = ok(api.get(f"/books/{book_id}/facts/history", params={"subject": MARA}))
    assert [(h["version"], h["action"], h["value"], h["source"]) for h in history] == [
        (1, "set", "Lisbon", "prose"),
        (2, "edit", "Porto", "author"),
    ]
    assert history[0]["stateVersion"] < history[1]["stateVersion"]
    # The profile Role A reads is rendered from the corrected fact.
    profile = ok(
        api.get(f"/books/{book_id}/resource", params={"path": "/profiles/characters/mara"})
    )
    assert "home: Porto" in profile["levels"]["L1"]["text"]
    assert "Lisbon" not in profile["levels"]["L1"]["text"]


def test_an_edit_that_moves_a_fact_to_another_chapter_rejects_the_old_one(
    api: httpx.Client, home: Path
) -> None:
    book_id = book_with(api, ("character", "Mara"))
    store_of(home).add_facts(book_id, [Fact(MARA, "rank", "captain", 2, source="prose")])
    edit = {"subject": MARA, "attribute": "rank", "chapter": 2, "value": "captain", "newChapter": 4}
    answer = ok(api.put(f"/books/{book_id}/facts", json=edit))
    assert values(answer["facts"]) == [("rank", "captain", 4, "author")]
    assert values(answer["rejected"]) == [("rank", "captain", 2, "prose")]
    store_of(home).add_facts(book_id, [Fact(MARA, "rank", "captain", 2, source="prose")])
    assert values(facts_of(api, book_id, MARA)["facts"]) == [("rank", "captain", 4, "author")]


def test_a_rejected_fact_stays_rejected_when_its_chapter_is_curated_again_until_unrejected(
    api: httpx.Client,
) -> None:
    book_id = book_with(api, ("character", "Mara"))
    black = {"subject": MARA, "attribute": "hair", "value": "black", "chapter": 1}
    ok(api.post(f"/books/{book_id}/facts", json={**black, "category": "characterization"}), 201)
    ok(api.post(f"/books/{book_id}/chapters", json={"title": "One"}), 201)
    ok(api.post(f"/books/{book_id}/chapters", json={"title": "Two"}), 201)
    text = "Mara stood at the rail. Mara had dyed it, and now Mara's silver hair caught the wind."
    keep(api, book_id, 2, text)
    learned = facts_of(api, book_id, MARA)["facts"]
    silver = next(f for f in learned if f["value"] == "silver")
    assert (silver["chapter"], silver["source"]) == (2, "prose")
    assert "Mara's silver hair caught the wind" in silver["evidence"]

    ref = {"subject": MARA, "attribute": "hair", "value": "silver", "chapter": 2}
    answer = ok(api.post(f"/books/{book_id}/facts/reject", json=ref))
    assert values(answer["facts"]) == [("hair", "black", 1, "author")]
    assert values(answer["rejected"]) == [("hair", "silver", 2, "prose")]

    # The chapter kept again (a new text: curated again from the start).
    keep(api, book_id, 2, text + " The wind was cold.")
    again = facts_of(api, book_id, MARA)
    assert values(again["facts"]) == [("hair", "black", 1, "author")]
    assert values(again["rejected"]) == [("hair", "silver", 2, "prose")]
    view = ok(api.get(f"/books/{book_id}/resource", params={"path": MARA}))
    assert [f["value"] for f in view["rejectedFacts"]] == ["silver"]

    back = ok(api.post(f"/books/{book_id}/facts/unreject", json=ref))
    assert values(back["facts"]) == [("hair", "black", 1, "author"), ("hair", "silver", 2, "prose")]
    assert back["rejected"] == []
    gone = ok(api.post(f"/books/{book_id}/facts/unreject", json=ref), 404)
    assert "has not rejected" in gone["error"]["message"]


def test_a_merge_moves_facts_relations_and_names_and_later_extractions_follow_it(
    api: httpx.Client, home: Path
) -> None:
    book_id = book_with(api, ("character", "Mara"), ("character", "The Captain"))
    ok(api.post(f"/books/{book_id}/entities", json={"kind": "character", "title": "Oren"}), 201)
    renamed = ok(
        api.put(f"/books/{book_id}/entities", json={"path": CAPTAIN, "aliases": ["Captain Varga"]})
    )
    assert renamed["aliases"] == ["Captain Varga"]
    store = store_of(home)
    store.add_facts(
        book_id,
        [
            Fact(MARA, "eyes", "green", 1, "characterization", source="prose"),
            Fact(
                CAPTAIN, "rank", "captain", 3, evidence="The Captain gave orders.", source="agent"
            ),
        ],
    )
    ok(
        api.post(f"/books/{book_id}/relations", json={"from": CAPTAIN, "to": OREN, "kind": "冲突"}),
        201,
    )

    merged = ok(api.post(f"/books/{book_id}/entities/merge", json={"from": CAPTAIN, "into": MARA}))
    assert merged["path"] == MARA
    assert merged["aliases"] == ["The Captain", "Captain Varga"]
    assert sorted((f["attribute"], f["value"]) for f in merged["facts"]) == [
        ("eyes", "green"),
        ("rank", "captain"),
    ]
    assert [(r["from"], r["to"], r["kind"]) for r in merged["relations"]] == [(MARA, OREN, "冲突")]
    ok(api.get(f"/books/{book_id}/resource", params={"path": CAPTAIN}), 404)
    tree = ok(api.get(f"/books/{book_id}/tree"))
    assert CAPTAIN not in [e["path"] for e in tree["entities"]]

    # A later curation naming the merged-away path lands on the kept entity.
    store.commit_chapter_memory(
        book_id,
        facts=[Fact(CAPTAIN, "owes", "ten crowns to Oren", 5, source="agent")],
        relations=[Relation(CAPTAIN, OREN, "关联", "debt", 5)],
    )
    facts = facts_of(api, book_id, MARA)["facts"]
    assert ("owes", "ten crowns to Oren") in [(f["attribute"], f["value"]) for f in facts]
    assert facts_of(api, book_id, CAPTAIN)["facts"] == []
    relations = ok(api.get(f"/books/{book_id}/resource", params={"path": MARA}))["relations"]
    assert (MARA, OREN, "关联") in [(r["from"], r["to"], r["kind"]) for r in relations]


def test_a_rejected_relation_is_not_brought_back_by_curation(api: httpx.Client, home: Path) -> None:
    book_id = book_with(api, ("character", "Mara"), ("character", "Oren"))
    store = store_of(home)
    store.commit_chapter_memory(book_id, relations=[Relation(MARA, OREN, "冲突", "a quarrel", 2)])
    before = state_of(api, book_id)
    view = ok(
        api.delete(f"/books/{book_id}/relations", params={"from": MARA, "to": OREN, "kind": "冲突"})
    )
    assert view["relations"] == []
    assert view["stateVersion"] > before
    store.commit_chapter_memory(book_id, relations=[Relation(MARA, OREN, "冲突", "a quarrel", 2)])
    assert ok(api.get(f"/books/{book_id}/resource", params={"path": MARA}))["relations"] == []
    # The author adding it back is the author's relation.
    added = ok(
        api.post(
            f"/books/{book_id}/relations",
            json={"from": MARA, "to": OREN, "kind": "冲突", "reason": "they made up, then not"},
        ),
        201,
    )
    assert [(r["kind"], r["source"]) for r in added["relations"]] == [("冲突", "author")]


@pytest.mark.parametrize(
    ("method", "url", "body", "status", "field"),
    [
        (
            "POST",
            "/books/{book}/facts",
            {
                "subject": "/entities/characters/nobody",
                "attribute": "eyes",
                "value": "g",
                "chapter": 1,
            },
            422,
            "subject",
        ),
        (
            "POST",
            "/books/{book}/facts",
            {"subject": MARA, "attribute": "eyes", "value": "g", "chapter": 1, "category": "x"},
            422,
            "category",
        ),
        (
            "POST",
            "/books/{book}/facts",
            {"subject": MARA, "attribute": "eyes", "chapter": 1},
            422,
            "value",
        ),
        (
            "PUT",
            "/books/{book}/facts",
            {"subject": MARA, "attribute": "eyes", "chapter": 7, "value": "blue"},
            422,
            "attribute",
        ),
        (
            "POST",
            "/books/{book}/facts/reject",
            {"subject": MARA, "attribute": "eyes", "value": "blue", "chapter": 7},
            404,
            None,
        ),
        ("POST", "/books/{book}/entities/merge", {"from": MARA, "into": MARA}, 422, "into"),
        ("POST", "/books/{book}/entities/merge", {"from": OREN, "into": MARA}, 422, "from"),
        (
            "POST",
            "/books/{book}/entities/merge",
            {"from": MARA, "into": "/meta/outline"},
            422,
            "into",
        ),
        ("POST", "/books/{book}/entities", {"kind": "character", "title": "Mara"}, 422, "path"),
        (
            "POST",
            "/books/{book}/entities",
            {"kind": "location", "title": "Port", "path": "/entities/characters/port"},
            422,
            "path",
        ),
        ("POST", "/books/{book}/relations", {"from": MARA, "to": OREN, "kind": "冲突"}, 422, "to"),
        (
            "POST",
            "/books/nobook/facts",
            {"subject": MARA, "attribute": "a", "value": "b", "chapter": 1},
            404,
            None,
        ),
    ],
)
def test_bad_corrections_are_refused_naming_the_field(
    api: httpx.Client,
    method: str,
    url: str,
    body: Any,
    status: int,
    field: str | None,
) -> None:
    book_id = book_with(api, ("character", "Mara"))
    response = api.request(method, url.format(book=book_id), json=body)
    assert response.status_code == status, response.text
    error = json.loads(response.text)["error"]
    assert error["message"]
    if field is not None:
        assert field in json.dumps(error), error
