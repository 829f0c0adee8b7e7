"""Entry vectors in SQLite, and exact nearest-neighbour search over them in memory.

``kb_embedding`` holds every vector as a float32 blob, keyed by (KB, entry, model) and
stamped with the content hash of the text it was made from. Vectors are stored
unit-length, so cosine similarity is a dot product wherever it is computed.

Search goes through a :class:`VectorIndex`; the one storyloom uses is
:class:`NumpyVectorIndex`, which keeps each KB's vectors in memory as one matrix and
ranks them by brute force (exact top-k). Every store and delete bumps the KB's vector
generation, and the index reloads a matrix whose generation has moved on. Measured here
(``bench/vector_index.py``), numpy's search is two to three times faster than sqlite-vec's
``vec0`` (partitioned by KB, also exact) at 100k vectors of one KB and as fast or faster at
10k, while keeping ``vec0`` mirror tables in step doubled the cost of storing vectors; so
there are none (migration 7 drops those of older databases).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, cast

import apsw
import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]


def as_unit_vector(values: Sequence[float] | npt.NDArray[np.floating]) -> Vector:
    """float32, length 1 (a zero vector stays zero: it is similar to nothing)."""
    vector = np.asarray(values, dtype=np.float32).reshape(-1)
    # The norm in float64: squaring a tiny float32 value underflows, and the "unit"
    # vector would come out longer than 1 (and change again when normalised again).
    wide = vector.astype(np.float64)
    norm = float(np.linalg.norm(wide))
    if norm > 0:
        vector = (wide / norm).astype(np.float32)
    return np.ascontiguousarray(vector, dtype=np.float32)


def vector_from_blob(blob: bytes) -> Vector:
    return np.frombuffer(blob, dtype=np.float32)


@dataclass(frozen=True)
class StoredVector:
    """A vector to store for one entry, with the hash of the text it was made from."""

    entry_id: str
    content_hash: str
    vector: Sequence[float] | npt.NDArray[np.floating]


def store_vectors(
    conn: apsw.Connection,
    kb_id: str,
    model_id: str,
    vectors: Iterable[StoredVector],
    *,
    only_current: bool = False,
) -> int:
    """Insert or replace vectors; returns how many were stored.

    ``only_current``: skip vectors whose hash is not the entry's indexed hash (its text
    changed while it was being embedded), so a late answer cannot store a stale vector.
    """
    stored = 0
    with conn:
        for item in vectors:
            if only_current:
                row = conn.execute(
                    "SELECT content_hash FROM kb_entry_index WHERE kb_id = ? AND entry_id = ?",
                    (kb_id, item.entry_id),
                ).fetchone()
                if row is None or row[0] != item.content_hash:
                    continue
            vector = as_unit_vector(item.vector)
            dim = int(vector.shape[0])
            if dim == 0:
                raise ValueError(f"empty vector for entry {item.entry_id!r}")
            conn.execute(
                "INSERT INTO kb_embedding(kb_id, entry_id, model_id, content_hash, dim, vector)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (kb_id, entry_id, model_id) DO UPDATE"
                " SET content_hash = excluded.content_hash, dim = excluded.dim,"
                " vector = excluded.vector",
                (kb_id, item.entry_id, model_id, item.content_hash, dim, vector.tobytes()),
            )
            stored += 1
        if stored:
            _bump_generation(conn, kb_id)
    return stored


def _bump_generation(conn: apsw.Connection, kb_id: str) -> None:
    conn.execute(
        "INSERT INTO kb_vector_generation(kb_id, generation) VALUES (?, 1)"
        " ON CONFLICT (kb_id) DO UPDATE SET generation = generation + 1",
        (kb_id,),
    )


def vector_generation(conn: apsw.Connection, kb_id: str) -> int:
    """A number that changes whenever a vector of ``kb_id`` is stored or deleted."""
    row = conn.execute(
        "SELECT generation FROM kb_vector_generation WHERE kb_id = ?", (kb_id,)
    ).fetchone()
    return cast(int, row[0]) if row else 0


def delete_vectors(
    conn: apsw.Connection,
    kb_id: str,
    entry_ids: Sequence[str] | None,
    *,
    model_id: str | None = None,
    keep_hash: str | None = None,
) -> int:
    """Delete vectors of a KB (``entry_ids`` None: all entries), of one model or all,
    except those made from text with ``keep_hash``."""
    where = ["kb_id = ?"]
    args: list[object] = [kb_id]
    if entry_ids is not None:
        if not entry_ids:
            return 0
        where.append("entry_id IN (SELECT value FROM json_each(?))")
        args.append(json.dumps(list(entry_ids)))
    if model_id is not None:
        where.append("model_id = ?")
        args.append(model_id)
    if keep_hash is not None:
        where.append("content_hash != ?")
        args.append(keep_hash)
    with conn:
        conn.execute(f"DELETE FROM kb_embedding WHERE {' AND '.join(where)}", args)
        deleted = conn.changes()
        if deleted:
            _bump_generation(conn, kb_id)
    return deleted


@dataclass(frozen=True)
class PendingEntry:
    """An indexed entry that has no current vector for some model."""

    entry_id: str
    content_hash: str
    text: str


def missing_vectors(conn: apsw.Connection, kb_id: str, model_id: str) -> list[PendingEntry]:
    """Entries of ``kb_id`` without a vector of ``model_id`` for their current text."""
    rows = conn.execute(
        "SELECT i.entry_id, i.content_hash, i.text FROM kb_entry_index AS i"
        " WHERE i.kb_id = ? AND NOT EXISTS (SELECT 1 FROM kb_embedding AS e"
        "  WHERE e.kb_id = i.kb_id AND e.entry_id = i.entry_id AND e.model_id = ?"
        "  AND e.content_hash = i.content_hash)"
        " ORDER BY i.id",
        (kb_id, model_id),
    )
    return [PendingEntry(str(r[0]), str(r[1]), str(r[2])) for r in rows]


def load_vectors(conn: apsw.Connection, kb_id: str, model_id: str) -> list[tuple[str, str, Vector]]:
    """(entry id, content hash, vector) of every stored vector of a KB and model."""
    rows = conn.execute(
        "SELECT entry_id, content_hash, vector FROM kb_embedding"
        " WHERE kb_id = ? AND model_id = ? ORDER BY id",
        (kb_id, model_id),
    )
    return [(str(r[0]), str(r[1]), vector_from_blob(r[2])) for r in rows]


def vector_dims(conn: apsw.Connection, kb_ids: Sequence[str], model_id: str) -> list[int]:
    """The vector lengths stored for ``model_id`` in these KBs (normally one)."""
    rows = conn.execute(
        "SELECT DISTINCT dim FROM kb_embedding WHERE model_id = ?"
        " AND kb_id IN (SELECT value FROM json_each(?))",
        (model_id, json.dumps(list(kb_ids))),
    )
    return sorted(int(r[0]) for r in rows)


def current_vector_stats(
    conn: apsw.Connection, kb_id: str, model_id: str
) -> tuple[int, int] | None:
    """(dimension, count) of the vectors of ``model_id`` made from the entries' current
    text; None when there are none. With several lengths (a model that changed its output
    size) the most common one."""
    rows = conn.execute(
        "SELECT e.dim, COUNT(*) FROM kb_embedding AS e JOIN kb_entry_index AS i"
        " ON i.kb_id = e.kb_id AND i.entry_id = e.entry_id AND i.content_hash = e.content_hash"
        " WHERE e.kb_id = ? AND e.model_id = ? GROUP BY e.dim ORDER BY COUNT(*) DESC, e.dim",
        (kb_id, model_id),
    ).fetchall()
    if not rows:
        return None
    counts = [(cast(int, r[0]), cast(int, r[1])) for r in rows]
    return counts[0][0], sum(n for _, n in counts)


class VectorIndex(Protocol):
    """Exact nearest neighbours of a unit query vector among one KB's vectors."""

    @property
    def name(self) -> str: ...

    def nearest(
        self, conn: apsw.Connection, *, model_id: str, kb_id: str, query: Vector, k: int
    ) -> list[tuple[int, float]]:
        """Up to ``k`` (``kb_embedding.id``, cosine similarity), most similar first."""
        ...


@dataclass
class _Matrix:
    signature: int
    ids: npt.NDArray[np.int64]
    vectors: Vector


class NumpyVectorIndex:
    """Brute force over each KB's vectors held in memory as one matrix.

    The matrix is reloaded when the KB's vector generation has moved on (every store
    and delete changes it), which costs one indexed lookup per search.
    """

    name = "numpy"

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str, int, str], _Matrix] = {}
        self._lock = threading.Lock()

    def _matrix(self, conn: apsw.Connection, model_id: str, dim: int, kb_id: str) -> _Matrix:
        where = "model_id = ? AND kb_id = ? AND dim = ?"
        args = (model_id, kb_id, dim)
        signature = vector_generation(conn, kb_id)
        key = (conn.filename, model_id, dim, kb_id)
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and cached.signature == signature:
            return cached
        rows = conn.execute(f"SELECT id, vector FROM kb_embedding WHERE {where}", args).fetchall()
        ids = np.fromiter((cast(int, r[0]) for r in rows), dtype=np.int64, count=len(rows))
        blob = b"".join(cast(bytes, r[1]) for r in rows)
        vectors = np.frombuffer(blob, dtype=np.float32)
        matrix = _Matrix(signature, ids, vectors.reshape(len(rows), dim))
        with self._lock:
            self._cache[key] = matrix
        return matrix

    def nearest(
        self, conn: apsw.Connection, *, model_id: str, kb_id: str, query: Vector, k: int
    ) -> list[tuple[int, float]]:
        matrix = self._matrix(conn, model_id, int(query.shape[0]), kb_id)
        total = len(matrix.ids)
        if total == 0 or k <= 0:
            return []
        scores = matrix.vectors @ query
        # argpartition needs k < total.
        top = np.argpartition(-scores, k - 1)[:k] if k < total else np.arange(total)
        order = top[np.argsort(-scores[top], kind="stable")]
        return [(int(matrix.ids[i]), float(scores[i])) for i in order]


_NUMPY_INDEX = NumpyVectorIndex()


def default_vector_index(conn: apsw.Connection) -> VectorIndex:
    """The index search uses when none is given: the in-memory numpy index, shared by
    every connection (its matrices are keyed by database file)."""
    del conn
    return _NUMPY_INDEX
