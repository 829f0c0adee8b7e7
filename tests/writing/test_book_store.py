"""The book's resources in SQLite: versions, the as-of-chapter rule, facts, relations, search."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storyloom.core.errors import InvalidInput, NotFound
from storyloom.knowledge.vector_index import StoredVector, missing_vectors, store_vectors
from storyloom.store.database import Database
from storyloom.writing.book_store import (
    BookStore,
    Fact,
    LevelWrite,
    Relation,
    Resource,
    index_id,
)
from storyloom.writing.profiles import profile_path, render_profile
from storyloom.writing.uris import normalize_path, parse_uri, resource_uri, slug

LIN = "/entities/characters/lin-feng"


@pytest.fixture
def store(tmp_path: Path) -> BookStore:
    return BookStore(Database(tmp_path / "storyloom.sqlite"))


def test_new_book_has_the_seed_directories(store: BookStore) -> None:
    book = store.create_book("The Long Road")
    paths = {r.path for r in store.resources(book.id)}
    assert {"/meta/outline", "/meta/style-guide", "/meta/world-rules"} <= paths
    assert "/summaries/full-work" in paths
    assert store.resource(book.id, "/profiles/style/narrative-voice").attrs == {
        "profileType": "style"
    }


def test_chapters_are_numbered_across_arcs(store: BookStore) -> None:
    book = store.create_book("B")
    one = store.add_chapter(book.id, "One", text="First.")
    two = store.add_chapter(book.id, "Two", arc="/manuscript/arc-02", text="Second.")
    assert (one.path, one.ordinal) == ("/manuscript/arc-01/chapter-001", 1)
    assert (two.path, two.ordinal) == ("/manuscript/arc-02/chapter-002", 2)
    assert [c.ordinal for c in store.chapters(book.id)] == [1, 2]
    with pytest.raises(InvalidInput, match="exists already"):
        store.add_chapter(book.id, "Again", ordinal=2)


def test_writing_the_same_text_again_keeps_the_version(store: BookStore) -> None:
    book = store.create_book("B")
    first = store.write_level(book.id, "/meta/outline", "L2", "A plan.")
    state = store.state_version(book.id)
    again = store.write_level(book.id, "/meta/outline", "L2", "A plan.")
    assert again.version == first.version
    assert store.state_version(book.id) == state
    changed = store.write_level(book.id, "/meta/outline", "L2", "A better plan.")
    assert changed.version == first.version + 1
    exact = store.level(book.id, "/meta/outline", "L2", version=first.version)
    assert exact is not None and exact.text == "A plan."


def test_a_chapter_sees_only_what_came_before_it(store: BookStore) -> None:
    book = store.create_book("B")
    for n in range(1, 5):
        store.add_chapter(book.id, f"Ch {n}", text=f"Text of chapter {n}.")
    visible = store.latest_levels(book.id, "L2", under="/manuscript", before_chapter=3)
    assert sorted(t.text for t in visible.values()) == [
        "Text of chapter 1.",
        "Text of chapter 2.",
    ]


def test_profile_as_of_a_chapter_keeps_later_facts_out(store: BookStore) -> None:
    book = store.create_book("B")
    lin = store.put_resource(
        book.id, LIN, kind="character", title="Lin Feng", aliases=["Lin Feng", "林枫"]
    )
    facts = [Fact(LIN, "hair", "black", 1), Fact(LIN, "hair", "silver", 120, evidence="dyed")]
    store.add_facts(book.id, facts)
    path = profile_path(lin)
    store.put_resource(book.id, path, kind="profile", title="Lin Feng", attrs={"subject": LIN})
    for chapter in (1, 120):
        texts = render_profile(lin, store.facts(book.id, subject=LIN), chapter)
        store.write_levels(book.id, texts.writes(chapter))
    early = store.level(book.id, path, "L1", before_chapter=40)
    late = store.level(book.id, path, "L1", before_chapter=130)
    assert early is not None and "hair: black" in early.text and "silver" not in early.text
    assert late is not None and "hair: silver (since ch. 120)" in late.text
    assert store.facts_as_of(book.id, 40)[LIN]["hair"].value == "black"
    assert store.facts_as_of(book.id, 121)[LIN]["hair"].value == "silver"


def test_rendering_a_profile_twice_writes_no_new_version(store: BookStore) -> None:
    book = store.create_book("B")
    lin = store.put_resource(book.id, LIN, kind="character", title="Lin Feng")
    store.add_facts(book.id, [Fact(LIN, "hair", "black", 1)])
    store.put_resource(book.id, profile_path(lin), kind="profile", title="Lin Feng")
    texts = render_profile(lin, store.facts(book.id, subject=LIN), 1)
    first = store.write_levels(book.id, texts.writes(1))
    state = store.state_version(book.id)
    second = store.write_levels(
        book.id, render_profile(lin, store.facts(book.id, subject=LIN), 1).writes(1)
    )
    assert [t.version for t in second] == [t.version for t in first]
    assert store.state_version(book.id) == state


def test_a_failed_chapter_commit_writes_nothing(store: BookStore) -> None:
    book = store.create_book("B")
    store.put_resource(book.id, LIN, kind="character", title="Lin Feng")
    before = store.state_version(book.id)
    with pytest.raises(NotFound, match="nobody"):
        store.commit_chapter_memory(
            book.id,
            facts=[Fact(LIN, "hair", "black", 1)],
            relations=[Relation("/manuscript/arc-01/chapter-001", LIN, "引入", "", 1)],
            levels=[LevelWrite("/profiles/characters/nobody", "L1", "x", 1)],
        )
    assert store.state_version(book.id) == before
    assert store.facts(book.id) == []
    assert store.relations(book.id) == []


def test_the_state_version_pins_what_a_reader_sees(store: BookStore) -> None:
    book = store.create_book("B")
    store.write_level(book.id, "/meta/outline", "L2", "Old plan.")
    pinned = store.state_version(book.id)
    store.write_level(book.id, "/meta/outline", "L2", "New plan.")
    old = store.level(book.id, "/meta/outline", "L2", state_version=pinned)
    assert old is not None and old.text == "Old plan."


def test_relations_carry_the_chapter_they_come_from(store: BookStore) -> None:
    book = store.create_book("B")
    store.link(book.id, LIN, "/entities/characters/wei", "冲突", "rivals", chapter=5)
    assert store.relations(book.id, path=LIN, before_chapter=5) == []
    (relation,) = store.relations(book.id, path=LIN, before_chapter=6)
    assert (relation.kind, relation.reason) == ("冲突", "rivals")


def test_search_is_scoped_to_a_directory_and_to_earlier_chapters(store: BookStore) -> None:
    book = store.create_book("B")
    store.add_chapter(book.id, "One", text="The heron flew over the river.")
    store.add_chapter(book.id, "Two", text="A heron again, later.")
    store.write_level(book.id, "/meta/outline", "L2", "The heron is a symbol.")
    store.index_levels(book.id)
    everywhere = {hit.path for hit in store.search(book.id, "heron")}
    assert "/meta/outline" in everywhere
    manuscript = [hit.path for hit in store.search(book.id, "heron", under="/manuscript")]
    assert set(manuscript) == {
        "/manuscript/arc-01/chapter-001",
        "/manuscript/arc-01/chapter-002",
    }
    early = [hit.path for hit in store.search(book.id, "heron", before_chapter=2)]
    assert "/manuscript/arc-01/chapter-002" not in early


def test_deleting_a_resource_removes_its_texts_and_links(store: BookStore) -> None:
    book = store.create_book("B")
    store.put_resource(book.id, LIN, kind="character", title="Lin Feng")
    store.write_level(book.id, LIN, "L1", "A swordsman.")
    store.link(book.id, LIN, "/entities/locations/castle", "关联")
    store.index_levels(book.id)
    store.delete_resource(book.id, LIN)
    with pytest.raises(NotFound):
        store.resource(book.id, LIN)
    assert store.level_history(book.id, LIN) == []
    assert store.relations(book.id) == []
    assert store.search(book.id, "swordsman") == []


def test_paths_outside_the_book_are_refused() -> None:
    with pytest.raises(InvalidInput):
        normalize_path("/etc/passwd")
    with pytest.raises(InvalidInput):
        normalize_path("/meta/../../x")
    assert slug("Lin Feng") == "lin-feng"
    assert slug("林枫") == "林枫"


@settings(max_examples=60, deadline=None)
@given(
    book_id=st.from_regex(r"bk_[a-z0-9]{4,10}", fullmatch=True),
    parts=st.lists(st.from_regex(r"[a-z0-9][a-z0-9\-]{0,8}", fullmatch=True), max_size=4),
    top=st.sampled_from(["meta", "entities", "manuscript", "summaries", "profiles"]),
)
def test_uri_round_trip(book_id: str, parts: list[str], top: str) -> None:
    path = "/" + "/".join([top, *parts])
    assert parse_uri(resource_uri(book_id, path)) == (book_id, path)


def test_resource_uri_is_the_seed_form(store: BookStore) -> None:
    book = store.create_book("B")
    resource: Resource = store.resource(book.id, "/meta/outline")
    assert resource.uri == f"viking://resources/{book.id}/meta/outline"


def test_resources_and_relations_made_after_a_version_are_not_seen_at_it(
    store: BookStore,
) -> None:
    book = store.create_book("B")
    store.put_resource(book.id, LIN, kind="character", title="Lin Feng")
    pinned = store.state_version(book.id)
    store.put_resource(book.id, "/entities/characters/wei", kind="character", title="Wei")
    store.link(book.id, LIN, "/entities/characters/wei", "冲突")
    at_pin = {r.path for r in store.resources(book.id, "/entities", state_version=pinned)}
    assert at_pin == {LIN}
    assert store.relations(book.id, state_version=pinned) == []
    assert len(store.relations(book.id)) == 1
    # Changing a resource later keeps the version it was made at.
    store.put_resource(book.id, LIN, kind="character", title="Lin Feng", aliases=["Feng"])
    assert LIN in {r.path for r in store.resources(book.id, state_version=pinned)}


def test_search_finds_a_paraphrase_by_its_vector(store: BookStore) -> None:
    book = store.create_book("B")
    store.add_chapter(book.id, "One", text="The heron flew over the river.")
    store.add_chapter(book.id, "Two", text="Rain on the tiles all night.")
    store.index_levels(book.id)
    conn = store.database.connection()
    pending = missing_vectors(conn, index_id(book.id), "test/model")
    # A toy embedding: the bird chapter points one way, the rain chapter another.
    vectors = [
        StoredVector(p.entry_id, p.content_hash, [1.0, 0.0] if "heron" in p.text else [0.0, 1.0])
        for p in pending
    ]
    store_vectors(conn, index_id(book.id), "test/model", vectors)
    assert store.has_vectors(book.id, "test/model")
    hits = store.search(
        book.id, "a grey bird", query_vector=[0.9, 0.1], model_id="test/model", top_k=1
    )
    assert [h.path for h in hits] == ["/manuscript/arc-01/chapter-001"]
