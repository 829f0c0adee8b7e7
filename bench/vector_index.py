"""Which exact vector search should storyloom use: numpy in memory or sqlite-vec's vec0?

For each size (default 10,000 and 100,000 random unit vectors of dimension 384 in one KB,
in a fresh database) it times:

- writes: storing every vector with ``store_vectors`` (``kb_embedding`` only, as storyloom
  does), then what a ``vec0`` mirror costs on top: the same rows inserted into a ``vec0``
  table with ``kb_id`` as partition key, as the mirror that storyloom kept up to schema 6
  did; and replacing 100 vectors in each;
- searches: top-20 (the candidate depth of a hybrid top-10) for 200 query vectors with
  :class:`NumpyVectorIndex` (matrix already in memory), the first numpy search after a
  write (the matrix is reloaded), and the ``vec0`` KNN query, plus whether both return
  the same neighbours.

Prints figures, asserts nothing; ends with ``ratio: <vec0 p50 / numpy p50>`` at the largest size.

    .venv/bin/python bench/vector_index.py [--sizes 10000 100000] [--queries 200]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import apsw
import numpy as np
import numpy.typing as npt

from storyloom.knowledge.vector_index import NumpyVectorIndex, StoredVector, store_vectors
from storyloom.store.database import Database

DIM = 384
MODEL_ID = "bench/random-384"
KB_ID = "kb_bench"
DEPTH = 20
REPLACED = 100


def random_unit(rng: np.random.Generator, count: int) -> npt.NDArray[np.float32]:
    matrix = rng.standard_normal((count, DIM)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix


def seconds(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def latencies(run: Callable[[int], object], count: int) -> list[float]:
    run(0)
    times = []
    for i in range(count):
        start = time.perf_counter()
        run(i)
        times.append((time.perf_counter() - start) * 1000)
    return times


def line(label: str, times: list[float]) -> None:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    print(f"  {label:<44} p50 {statistics.median(times):8.2f} ms   p95 {p95:8.2f} ms")


def figure(label: str, value: float, unit: str) -> None:
    print(f"  {label:<44} {value:8.2f} {unit}")


def vec0_insert(conn: apsw.Connection, rows: list[tuple[int, bytes]]) -> None:
    with conn:
        conn.executemany(
            "INSERT INTO mirror(rowid, kb_id, embedding) VALUES (?, ?, ?)",
            ((row_id, KB_ID, blob) for row_id, blob in rows),
        )


def vec0_replace(conn: apsw.Connection, rows: list[tuple[int, bytes]]) -> None:
    with conn:
        conn.executemany("DELETE FROM mirror WHERE rowid = ?", ((row_id,) for row_id, _ in rows))
        conn.executemany(
            "INSERT INTO mirror(rowid, kb_id, embedding) VALUES (?, ?, ?)",
            ((row_id, KB_ID, blob) for row_id, blob in rows),
        )


def measure(size: int, query_count: int) -> float:
    rng = np.random.default_rng(size)
    matrix = random_unit(rng, size)
    queries = random_unit(rng, query_count)
    replacement = random_unit(rng, REPLACED)
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(Path(tmp) / "bench.sqlite3")
        conn = db.connection()
        try:
            print(f"{size:,} vectors of dimension {DIM} in one KB:")
            items = [StoredVector(f"e{i}", "h", matrix[i]) for i in range(size)]
            stored = seconds(lambda: store_vectors(conn, KB_ID, MODEL_ID, items))
            conn.execute(
                "CREATE VIRTUAL TABLE mirror USING vec0("
                f"kb_id text partition key, embedding float[{DIM}] distance_metric=cosine)"
            )
            rows = [
                (int(r[0]), bytes(r[1]))
                for r in conn.execute("SELECT id, vector FROM kb_embedding ORDER BY id")
            ]
            mirrored = seconds(lambda: vec0_insert(conn, rows))
            figure("store all (kb_embedding, as storyloom does)", stored, "s")
            figure("+ the same rows into a vec0 mirror", mirrored, "s")
            changed = [
                StoredVector(f"e{i}", "h2", replacement[i % REPLACED]) for i in range(REPLACED)
            ]
            replaced = seconds(lambda: store_vectors(conn, KB_ID, MODEL_ID, changed))
            changed_rows = [(rows[i][0], replacement[i].tobytes()) for i in range(REPLACED)]
            replaced_mirror = seconds(lambda: vec0_replace(conn, changed_rows))
            figure(f"replace {REPLACED} vectors (kb_embedding)", replaced * 1000, "ms")
            figure(f"+ the same {REPLACED} in the vec0 mirror", replaced_mirror * 1000, "ms")

            index = NumpyVectorIndex()
            reload = seconds(
                lambda: index.nearest(
                    conn, model_id=MODEL_ID, kb_id=KB_ID, query=queries[0], k=DEPTH
                )
            )
            figure("first numpy search after a write (reload)", reload * 1000, "ms")
            by_numpy = latencies(
                lambda i: index.nearest(
                    conn, model_id=MODEL_ID, kb_id=KB_ID, query=queries[i], k=DEPTH
                ),
                query_count,
            )

            def knn(i: int) -> list[int]:
                found = conn.execute(
                    "SELECT rowid FROM mirror WHERE embedding MATCH ? AND k = ? AND kb_id = ?"
                    " ORDER BY distance",
                    (queries[i].tobytes(), DEPTH, KB_ID),
                )
                return [int(r[0]) for r in found]

            by_vec0 = latencies(knn, query_count)
            line(f"numpy top-{DEPTH} (matrix in memory)", by_numpy)
            line(f"sqlite-vec vec0 top-{DEPTH} (partition key)", by_vec0)
            same = sum(
                knn(i)
                == [
                    row_id
                    for row_id, _ in index.nearest(
                        conn, model_id=MODEL_ID, kb_id=KB_ID, query=queries[i], k=DEPTH
                    )
                ]
                for i in range(query_count)
            )
            print(f"  same neighbours in the same order: {same}/{query_count} queries")
            return statistics.median(by_vec0) / statistics.median(by_numpy)
        finally:
            db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    ratios = [measure(size, args.queries) for size in args.sizes]
    # The baseline is the index storyloom no longer uses: sqlite-vec's p50 over numpy's,
    # at the largest size measured.
    print(f"ratio: {ratios[-1]:.2f}")


if __name__ == "__main__":
    main()
