"""The search index in SQLite: sync from a KB, FTS over jieba-segmented text, vectors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.search_index import (
    EntryFilter,
    content_hash,
    embedding_text,
    remove_kb,
    sync_kb,
)
from storyloom.knowledge.text_index import fts_query, keyword_search, segment
from storyloom.knowledge.vector_index import (
    NumpyVectorIndex,
    StoredVector,
    delete_vectors,
    missing_vectors,
    store_vectors,
)
from storyloom.store.database import Database, open_connection
from storyloom.store.migrations import MIGRATIONS, migrate

MODEL = "test/axes"


def entry(entry_id: str, text: str, **fields: Any) -> CAIU:
    return CAIU.model_validate({"id": entry_id, "content": {"value": text}, **fields})


def kb_of(*entries: CAIU, kb_id: str = "kb_test") -> KnowledgeBase:
    return KnowledgeBase(kb_id=kb_id, kb_displayName=kb_id, entries=list(entries))


def keyword_ids(db: Database, query: str, kb_ids: list[str] | None = None) -> list[str]:
    where, args = EntryFilter(kb_ids or ["kb_test"]).sql()
    hits = keyword_search(db.connection(), query, where_sql=where, where_args=args, limit=10)
    return [hit.entry_id for hit in hits]


def current_vector(kb: KnowledgeBase, entry_id: str, values: list[float]) -> StoredVector:
    found = kb.entry(entry_id)
    assert found is not None
    return StoredVector(entry_id, content_hash(embedding_text(found)), values)


def test_migration_creates_the_knowledge_index_tables(db: Database) -> None:
    names = {
        str(row[0])
        for row in db.connection().execute("SELECT name FROM sqlite_master WHERE type='table'")
    }
    assert {"kb_entry_index", "kb_entry_fts", "kb_embedding", "kb_vector_generation"} <= names
    assert db.schema_version() >= 2


def test_embedding_text_joins_name_content_media_text_and_keywords() -> None:
    item = entry(
        "e1",
        "The red dragon sleeps.",
        displayName="Ignis",
        activation_criteria={"keywords": ["dragon", "Ignis"]},
    )
    item.content.caption = "A sleeping dragon"
    assert embedding_text(item) == "Ignis\nThe red dragon sleeps.\nA sleeping dragon\ndragon, Ignis"


def test_content_hash_ignores_tags_but_not_keywords() -> None:
    base = entry("e1", "text", activation_criteria={"keywords": ["a"]})
    tagged = entry(
        "e1", "text", activation_criteria={"keywords": ["a"]}, management_metadata={"tags": ["x"]}
    )
    rekeyed = entry("e1", "text", activation_criteria={"keywords": ["b"]})
    assert content_hash(embedding_text(base)) == content_hash(embedding_text(tagged))
    assert content_hash(embedding_text(base)) != content_hash(embedding_text(rekeyed))


def test_sync_reports_added_changed_removed_unchanged_and_metadata(db: Database) -> None:
    kb = kb_of(entry("a", "alpha"), entry("b", "beta"), entry("c", "gamma"))
    first = sync_kb(db, kb)
    assert sorted(first.added) == ["a", "b", "c"]
    assert first.changed == first.removed == first.unchanged == ()

    edited = kb_of(
        entry("a", "alpha"),
        entry("b", "beta, rewritten"),
        entry("c", "gamma", management_metadata={"tags": ["new-tag"]}),
        entry("d", "delta"),
    )
    second = sync_kb(db, edited)
    assert second.added == ("d",)
    assert second.changed == ("b",)
    assert second.metadata_updated == ("c",)
    assert second.unchanged == ("a",)
    assert second.removed == ()

    third = sync_kb(db, kb_of(entry("a", "alpha")))
    assert sorted(third.removed) == ["b", "c", "d"]
    assert third.unchanged == ("a",)
    assert keyword_ids(db, "beta") == []


def test_sync_drops_vectors_of_changed_and_removed_entries_only(db: Database) -> None:
    kb = kb_of(entry("a", "alpha"), entry("b", "beta"), entry("c", "gamma"))
    sync_kb(db, kb)
    conn = db.connection()
    store_vectors(
        conn,
        kb.kb_id,
        MODEL,
        [current_vector(kb, e, [1.0, 0.0]) for e in ("a", "b", "c")],
    )
    assert missing_vectors(conn, kb.kb_id, MODEL) == []

    sync_kb(db, kb_of(entry("a", "alpha"), entry("b", "beta two")))
    stored = {str(r[0]) for r in conn.execute("SELECT entry_id FROM kb_embedding")}
    assert stored == {"a"}
    assert [p.entry_id for p in missing_vectors(conn, kb.kb_id, MODEL)] == ["b"]


def test_store_vectors_only_current_skips_vectors_of_outdated_text(db: Database) -> None:
    kb = kb_of(entry("a", "alpha"))
    sync_kb(db, kb)
    outdated = StoredVector("a", content_hash("an older text"), [1.0, 0.0])
    assert store_vectors(db.connection(), kb.kb_id, MODEL, [outdated], only_current=True) == 0
    assert (
        store_vectors(
            db.connection(), kb.kb_id, MODEL, [current_vector(kb, "a", [0, 1])], only_current=True
        )
        == 1
    )


def test_segment_cuts_chinese_into_words_and_drops_punctuation() -> None:
    words = segment("远古红龙沉睡在灰烬山的洞穴深处。")
    assert "红龙" in words and "洞穴" in words
    assert "。" not in words


def test_fts_query_drops_stopwords_and_returns_none_without_words() -> None:
    assert fts_query("红龙在哪里？") == '"红龙"'
    assert fts_query("Where is the dragon?") == '"dragon"'
    assert fts_query("？！...") is None
    assert fts_query('say "hi"') == '"say" OR "hi"'
    assert fts_query("山") == '"山"'


def test_keyword_search_finds_a_chinese_word_inside_a_sentence(db: Database) -> None:
    sync_kb(
        db,
        kb_of(
            entry("dragon", "远古红龙伊格尼斯沉睡在灰烬山的洞穴深处，守护着宝藏。"),
            entry("village", "山脚下的村庄里住着一位铁匠。"),
        ),
    )
    assert keyword_ids(db, "红龙住在哪里") == ["dragon"]
    assert keyword_ids(db, "铁匠") == ["village"]


def test_keyword_search_stems_english_words(db: Database) -> None:
    sync_kb(db, kb_of(entry("d", "A dragon guards the cave."), entry("k", "Knights ride.")))
    assert keyword_ids(db, "dragons") == ["d"]
    assert keyword_ids(db, "knight riding") == ["k"]


def test_keyword_search_ranks_entries_with_rarer_and_more_words_first(db: Database) -> None:
    sync_kb(
        db,
        kb_of(
            entry("one", "castle"),
            entry("both", "castle silver"),
            entry("other", "silver"),
            *(entry(f"f{i}", f"filler number {i}") for i in range(20)),
        ),
    )
    found = keyword_ids(db, "silver castle")
    assert found[0] == "both"
    assert sorted(found[1:]) == ["one", "other"]


def test_keyword_search_respects_kb_filter(db: Database) -> None:
    sync_kb(db, kb_of(entry("a", "the dragon"), kb_id="kb_one"))
    sync_kb(db, kb_of(entry("a", "the dragon"), kb_id="kb_two"))
    where, args = EntryFilter(["kb_two"]).sql()
    hits = keyword_search(db.connection(), "dragon", where_sql=where, where_args=args, limit=5)
    assert [(h.kb_id, h.entry_id) for h in hits] == [("kb_two", "a")]


def _random_kb(db: Database, count: int, dim: int) -> tuple[KnowledgeBase, np.ndarray[Any, Any]]:
    kb = kb_of(*(entry(f"e{i}", f"text {i}") for i in range(count)))
    sync_kb(db, kb)
    matrix = np.random.default_rng(1).standard_normal((count, dim)).astype(np.float32)
    store_vectors(
        db.connection(),
        kb.kb_id,
        MODEL,
        [current_vector(kb, f"e{i}", list(map(float, matrix[i]))) for i in range(count)],
    )
    return kb, matrix


def test_numpy_index_gives_the_exact_top_k_by_cosine(db: Database) -> None:
    _, matrix = _random_kb(db, 200, 24)
    conn = db.connection()
    query = np.random.default_rng(9).standard_normal(24).astype(np.float32)
    query /= np.linalg.norm(query)
    found = NumpyVectorIndex().nearest(conn, model_id=MODEL, kb_id="kb_test", query=query, k=10)
    entry_of = {int(r[0]): str(r[1]) for r in conn.execute("SELECT id, entry_id FROM kb_embedding")}
    cosine = (matrix @ query) / np.linalg.norm(matrix, axis=1)
    expected = [f"e{i}" for i in np.argsort(-cosine)[:10]]
    assert [entry_of[row_id] for row_id, _ in found] == expected
    for (_, similarity), i in zip(found, np.argsort(-cosine)[:10], strict=True):
        assert similarity == pytest.approx(float(cosine[i]), abs=1e-5)


def test_storing_a_vector_again_replaces_the_old_one(db: Database) -> None:
    kb = kb_of(entry("a", "alpha"))
    sync_kb(db, kb)
    conn = db.connection()
    store_vectors(conn, kb.kb_id, MODEL, [current_vector(kb, "a", [1.0, 0.0])])
    store_vectors(conn, kb.kb_id, MODEL, [current_vector(kb, "a", [0.0, 2.0])])
    query = np.array([0.0, 1.0], dtype=np.float32)
    found = NumpyVectorIndex().nearest(conn, model_id=MODEL, kb_id=kb.kb_id, query=query, k=5)
    assert len(found) == 1
    assert found[0][1] == pytest.approx(1.0)


def test_numpy_index_sees_vectors_stored_after_its_first_search(db: Database) -> None:
    kb = kb_of(entry("a", "alpha"), entry("b", "beta"))
    sync_kb(db, kb)
    conn = db.connection()
    store_vectors(conn, kb.kb_id, MODEL, [current_vector(kb, "a", [1.0, 0.0])])
    index = NumpyVectorIndex()
    query = np.array([0.0, 1.0], dtype=np.float32)
    assert len(index.nearest(conn, model_id=MODEL, kb_id=kb.kb_id, query=query, k=5)) == 1
    store_vectors(conn, kb.kb_id, MODEL, [current_vector(kb, "b", [0.0, 1.0])])
    nearest = index.nearest(conn, model_id=MODEL, kb_id=kb.kb_id, query=query, k=5)
    assert len(nearest) == 2
    assert nearest[0][1] == pytest.approx(1.0)
    delete_vectors(conn, kb.kb_id, ["b"])
    assert len(index.nearest(conn, model_id=MODEL, kb_id=kb.kb_id, query=query, k=5)) == 1


def test_migration_drops_the_sqlite_vec_mirrors_and_keeps_the_vectors(tmp_path: Path) -> None:
    conn = open_connection(tmp_path / "old.sqlite3")
    migrate(conn, tuple(m for m in MIGRATIONS if m.version <= 6))
    # What storyloom up to schema 6 left: a vec0 mirror per (model, dim), listed by name.
    vector = np.array([0.6, 0.8], dtype=np.float32).tobytes()
    conn.execute(
        "INSERT INTO kb_embedding(kb_id, entry_id, model_id, content_hash, dim, vector)"
        " VALUES ('kb_test', 'a', ?, 'h', 2, ?)",
        (MODEL, vector),
    )
    conn.execute(
        "CREATE VIRTUAL TABLE vec_0123456789abcdef_2 USING vec0("
        "kb_id text partition key, embedding float[2] distance_metric=cosine)"
    )
    conn.execute(
        "INSERT INTO vec_0123456789abcdef_2(rowid, kb_id, embedding) SELECT id, kb_id, vector"
        " FROM kb_embedding"
    )
    conn.execute(
        "INSERT INTO kb_vec_table(model_id, dim, table_name) VALUES (?, 2, ?)",
        (MODEL, "vec_0123456789abcdef_2"),
    )
    assert migrate(conn) == [m.version for m in MIGRATIONS if m.version > 6]
    left = conn.execute(
        "SELECT name FROM sqlite_master WHERE name LIKE 'vec%' OR name = 'kb_vec_table'"
    ).fetchall()
    assert left == []
    query = np.array([0.6, 0.8], dtype=np.float32)
    found = NumpyVectorIndex().nearest(conn, model_id=MODEL, kb_id="kb_test", query=query, k=5)
    assert [similarity for _, similarity in found] == [pytest.approx(1.0)]
    conn.close()


def test_numpy_index_searches_only_vectors_of_the_query_length(db: Database) -> None:
    kb = kb_of(entry("a", "alpha"), entry("b", "beta"))
    sync_kb(db, kb)
    conn = db.connection()
    store_vectors(conn, kb.kb_id, MODEL, [current_vector(kb, "a", [1.0, 0.0])])
    store_vectors(conn, kb.kb_id, MODEL, [current_vector(kb, "b", [1.0, 0.0, 0.0])])
    index = NumpyVectorIndex()
    for query in (np.array([1.0, 0.0], dtype=np.float32), np.array([1.0, 0, 0], dtype=np.float32)):
        found = index.nearest(conn, model_id=MODEL, kb_id=kb.kb_id, query=query, k=5)
        assert len(found) == 1


def test_remove_kb_forgets_index_fts_and_vectors(db: Database) -> None:
    kb = kb_of(entry("a", "the dragon"), entry("b", "the knight"))
    sync_kb(db, kb)
    store_vectors(db.connection(), kb.kb_id, MODEL, [current_vector(kb, "a", [1.0, 0.0])])
    assert remove_kb(db, kb.kb_id) == 2
    conn = db.connection()
    assert conn.execute("SELECT COUNT(*) FROM kb_entry_index").fetchall() == [(0,)]
    assert conn.execute("SELECT COUNT(*) FROM kb_embedding").fetchall() == [(0,)]
    assert keyword_ids(db, "dragon") == []
