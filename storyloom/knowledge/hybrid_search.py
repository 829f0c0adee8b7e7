"""Hybrid search over knowledge entries: vectors and BM25 keywords, fused by rank.

Embeddings alone rank same-language noise above cross-language answers, and keywords
alone miss paraphrases, so both run and their rankings are fused by reciprocal rank
(score = sum of ``1 / (60 + rank)`` over the lists an entry is in). Vector candidates come
per KB (exact top-k among the KB's vectors), then merge by similarity; keyword
candidates come from one FTS5 query over all requested KBs. Filters (KB, tags, entry type,
disabled entries) apply to both sides. An entry's ``semantic_threshold`` applies to the
vector side: a vector match below it is not a vector hit.

:func:`semantic_scores` gives the similarity of a query vector to given entries, raw or
calibrated against each entry's floor, for the activation engine's semantic activation.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal, TypedDict, TypeVar, Unpack, cast

import numpy as np
import numpy.typing as npt

from storyloom.knowledge.activation_calibration import calibrated, entry_floors
from storyloom.knowledge.search_index import EntryFilter
from storyloom.knowledge.text_index import keyword_search
from storyloom.knowledge.vector_index import (
    VectorIndex,
    as_unit_vector,
    default_vector_index,
    vector_dims,
)
from storyloom.llm.embeddings import EmbeddingProvider
from storyloom.store.database import Database

RRF_K = 60

MatchKind = Literal["vector", "keyword"]
EntryKey = tuple[str, str]
_Key = TypeVar("_Key", bound=Hashable)


class SearchOptions(TypedDict, total=False):
    """:func:`search_with_vector`'s options that :func:`search` passes on (same defaults)."""

    top_k: int
    tags: Sequence[str] | None
    entry_types: Sequence[str] | None
    include_disabled: bool
    vector_index: VectorIndex | None
    min_similarity: float | None


@dataclass(frozen=True)
class SearchHit:
    """One entry found. ``score`` is the fused RRF score; ranks are 1-based."""

    kb_id: str
    entry_id: str
    score: float
    vector_similarity: float | None
    keyword_rank: int | None
    vector_rank: int | None
    matched_by: frozenset[MatchKind]


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[_Key]], *, k: int = RRF_K
) -> dict[_Key, float]:
    """RRF scores of every item in any ranking (each ranking best first)."""
    scores: dict[_Key, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return scores


def candidate_depth(top_k: int) -> int:
    """How many candidates each side contributes to the fusion."""
    return max(2 * top_k, 20)


def _vector_candidates(
    db: Database,
    query: npt.NDArray[np.float32],
    *,
    model_id: str,
    entry_filter: EntryFilter,
    depth: int,
    index: VectorIndex,
    min_similarity: float | None,
) -> list[tuple[float, str, str]]:
    conn = db.connection()
    where_sql, where_args = entry_filter.sql()
    found: list[tuple[float, str, str]] = []
    for kb_id in dict.fromkeys(entry_filter.kb_ids):
        k = depth
        while True:
            nearest = index.nearest(conn, model_id=model_id, kb_id=kb_id, query=query, k=k)
            if not nearest:
                break
            # Join back to the index: filters, thresholds, and only vectors of current text.
            # CROSS JOIN fixes the order: from the few candidate ids to their rows, never
            # a scan of the KB's index rows.
            rows = conn.execute(
                "SELECT e.id, i.entry_id, i.semantic_threshold FROM json_each(?) AS c"
                " CROSS JOIN kb_embedding AS e ON e.id = c.value"
                " CROSS JOIN kb_entry_index AS i ON i.kb_id = e.kb_id"
                "  AND i.entry_id = e.entry_id AND i.content_hash = e.content_hash"
                f" WHERE {where_sql}",
                (json.dumps([row_id for row_id, _ in nearest]), *where_args),
            ).fetchall()
            allowed = {cast(int, r[0]): (str(r[1]), cast(float | None, r[2])) for r in rows}
            kept: list[tuple[float, str, str]] = []
            for row_id, similarity in nearest:
                if row_id not in allowed:
                    continue
                entry_id, threshold = allowed[row_id]
                floor = max(threshold or 0.0, min_similarity or 0.0)
                if (threshold is not None or min_similarity is not None) and similarity < floor:
                    continue
                kept.append((similarity, kb_id, entry_id))
            # Widen only when filters (not thresholds) removed candidates.
            if len(allowed) >= depth or len(nearest) < k:
                found.extend(kept[:depth])
                break
            k *= 4
    found.sort(key=lambda hit: (-hit[0], hit[1], hit[2]))
    return found[:depth]


def search_with_vector(
    db: Database,
    query: str,
    query_vector: Sequence[float] | npt.NDArray[np.floating] | None,
    *,
    kb_ids: Sequence[str],
    model_id: str | None,
    top_k: int = 10,
    tags: Sequence[str] | None = None,
    entry_types: Sequence[str] | None = None,
    include_disabled: bool = False,
    vector_index: VectorIndex | None = None,
    min_similarity: float | None = None,
) -> list[SearchHit]:
    """Hybrid search with the query already embedded (``query_vector`` None: keywords only).

    Blocking: call it from a worker thread in async code (:func:`search` does).
    """
    if top_k <= 0 or not kb_ids:
        return []
    entry_filter = EntryFilter(kb_ids, tags, entry_types, include_disabled)
    depth = candidate_depth(top_k)
    vector_hits: list[tuple[float, str, str]] = []
    if query_vector is not None and model_id is not None:
        index = vector_index or default_vector_index(db.connection())
        vector_hits = _vector_candidates(
            db,
            as_unit_vector(query_vector),
            model_id=model_id,
            entry_filter=entry_filter,
            depth=depth,
            index=index,
            min_similarity=min_similarity,
        )
    where_sql, where_args = entry_filter.sql()
    keyword_hits = keyword_search(
        db.connection(), query, where_sql=where_sql, where_args=where_args, limit=depth
    )
    vector_ranking: list[EntryKey] = [(kb, entry) for _, kb, entry in vector_hits]
    keyword_ranking: list[EntryKey] = [(h.kb_id, h.entry_id) for h in keyword_hits]
    scores = reciprocal_rank_fusion([vector_ranking, keyword_ranking])
    similarity = {(kb, entry): sim for sim, kb, entry in vector_hits}
    vector_rank = {key: rank for rank, key in enumerate(vector_ranking, start=1)}
    keyword_rank = {key: rank for rank, key in enumerate(keyword_ranking, start=1)}
    hits = []
    for key, score in scores.items():
        matched: set[MatchKind] = set()
        if key in vector_rank:
            matched.add("vector")
        if key in keyword_rank:
            matched.add("keyword")
        hits.append(
            SearchHit(
                kb_id=key[0],
                entry_id=key[1],
                score=score,
                vector_similarity=similarity.get(key),
                keyword_rank=keyword_rank.get(key),
                vector_rank=vector_rank.get(key),
                matched_by=frozenset(matched),
            )
        )
    hits.sort(
        key=lambda h: (
            -h.score,
            -(h.vector_similarity if h.vector_similarity is not None else -2.0),
            h.keyword_rank or depth + 1,
            h.kb_id,
            h.entry_id,
        )
    )
    return hits[:top_k]


async def search(
    db: Database,
    query: str,
    *,
    kb_ids: Sequence[str],
    model: EmbeddingProvider | None,
    **options: Unpack[SearchOptions],
) -> list[SearchHit]:
    """Hybrid top-k for ``query`` in ``kb_ids``; ``model`` None searches keywords only.

    The query is embedded only when those KBs have vectors of ``model``; the database work
    runs in a worker thread. ``options`` are :func:`search_with_vector`'s.
    """
    query_vector: list[float] | None = None
    model_id = model.model_id if model is not None else None
    if model is not None and query.strip() and kb_ids:
        dims = await asyncio.to_thread(
            lambda: vector_dims(db.connection(), list(kb_ids), model.model_id)
        )
        if dims:
            query_vector = await model.embed_query(query)
    return await asyncio.to_thread(
        search_with_vector,
        db,
        query,
        query_vector,
        kb_ids=kb_ids,
        model_id=model_id,
        **options,
    )


def semantic_scores(
    db: Database,
    query_vector: Sequence[float] | npt.NDArray[np.floating],
    entries: Sequence[EntryKey],
    model_id: str,
    neutral_vectors: Sequence[Sequence[float]] | npt.NDArray[np.floating] | None = None,
) -> dict[EntryKey, float]:
    """Cosine similarity of ``query_vector`` to each entry's current vector of ``model_id``.

    With ``neutral_vectors`` (the model's vectors of
    :data:`~storyloom.knowledge.activation_calibration.NEUTRAL_TEXTS`), the score is
    calibrated against each entry's floor instead (:func:`activation_calibration.calibrated`).
    Entries without a vector (not embedded yet, text changed since, other dimension) are
    absent.
    """
    if not entries:
        return {}
    query = as_unit_vector(query_vector)
    wanted = json.dumps([list(key) for key in dict.fromkeys(entries)])
    rows = (
        db.connection()
        .execute(
            "SELECT e.kb_id, e.entry_id, e.vector FROM json_each(?) AS w"
            " CROSS JOIN kb_embedding AS e ON e.kb_id = json_extract(w.value, '$[0]')"
            "  AND e.entry_id = json_extract(w.value, '$[1]') AND e.model_id = ?"
            " CROSS JOIN kb_entry_index AS i ON i.kb_id = e.kb_id"
            "  AND i.entry_id = e.entry_id AND i.content_hash = e.content_hash"
            " WHERE e.dim = ?",
            (wanted, model_id, int(query.shape[0])),
        )
        .fetchall()
    )
    if not rows:
        return {}
    matrix = np.frombuffer(b"".join(cast(bytes, r[2]) for r in rows), dtype=np.float32)
    vectors = matrix.reshape(len(rows), -1)
    scores = vectors @ query
    if neutral_vectors is not None:
        neutral = np.asarray(neutral_vectors, dtype=np.float32).reshape(-1, vectors.shape[1])
        scores = calibrated(scores, entry_floors(vectors, neutral))
    return {(str(r[0]), str(r[1])): float(s) for r, s in zip(rows, scores, strict=True)}
