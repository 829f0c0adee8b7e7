"""The long-form writing studio at a million words: storage, retrieval, budget, checking.

Generates a seeded book (``bench/longform_book.py``: ~350 chapters, ~300 entities, facts
planted at known chapters, legal progressions) through ``BookStore`` in a fresh
database, then measures:

(a) build time; context assembly p50/p95 at a 25K budget; re-indexing after curating one
    chapter (its memory committed + ``index_levels`` of the chapter and the profile);
(b) many assemblies (10,000 by default) at budgets drawn uniformly from 1K to 30K over
    random chapters and prompts: how many exceed their budget (target 0), the share of
    the budget used when the candidates exceed it (target ≥ 90%), identical output for an
    identical request, and the share of injected tokens rebuildable from the sources;
(c) recall at 25K of the facts a chapter depends on (planted 1, 10, 100 and 300 chapters
    earlier) for Role A and two baselines in the same run: a NovelCrafter-style prompt
    (the last three chapters in full, then every earlier chapter's summary newest first,
    cut at the budget) and flat top-k RAG (FTS over ~500-token chunks of the chapters,
    best first until the budget is full); facts from later chapters that leak (target 0);
(d) Role C: seeded contradictions in the five ConStory-Bench categories at those
    distances (recall overall and for structured attributes) and the legal progressions
    as traps (false alarms), through ``monitor.check_claims``.

The LLM is scripted and extraction is given (the generator writes the facts and levels
curation would have produced), so the figures are those of storage, retrieval, budget
and checking. Prints figures, asserts nothing; ends with ``ratio:`` = Role A's
dependency-fact recall / the better baseline's.

    .venv/bin/python bench/longform.py [--words 1000000] [--chapters 350] [--entities 300]
                                       [--seed 7] [--assemblies 10000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.longform_book import (
        DISTANCES,
        GeneratedBook,
        PlantedFact,
        altered_value,
        generate_book,
    )
    from bench.longform_path import run as path_run
else:  # run as a script: the book generator lies beside this file
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from longform_book import (
        DISTANCES,
        GeneratedBook,
        PlantedFact,
        altered_value,
        generate_book,
    )
    from longform_path import run as path_run

from storyloom.knowledge.hybrid_search import search_with_vector
from storyloom.knowledge.search_index import IndexedEntry, content_hash, sync_entries
from storyloom.store.database import Database
from storyloom.writing.book_store import BookStore, Fact, LevelWrite
from storyloom.writing.context_assembly import (
    SCENE_TYPES,
    ContextRequest,
    assemble_context,
    rebuild_context,
)
from storyloom.writing.profiles import render_profile
from storyloom.writing.tokens import count_tokens

BUDGET = 25_000
RAG_KB = "bench-rag"


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def cut_to_budget(pieces: Sequence[str], budget: int) -> str:
    """Whole pieces while they fit, then as much of the next as fits (the baselines cut)."""
    out: list[str] = []
    used = 0
    for piece in pieces:
        cost = count_tokens(piece)
        if used + cost <= budget:
            out.append(piece)
            used += cost
            continue
        lo, hi = 0, len(piece)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if count_tokens(piece[:mid]) <= budget - used:
                lo = mid
            else:
                hi = mid - 1
        out.append(piece[:lo])
        break
    return "".join(out)


class Baselines:
    def __init__(self, store: BookStore, book: GeneratedBook) -> None:
        self.store = store
        self.book = book
        chapters = store.chapters(book.book_id)
        self.path_of = {c.ordinal: c.path for c in chapters}
        l2 = store.latest_levels(book.book_id, "L2", under="/manuscript")
        l1 = store.latest_levels(book.book_id, "L1", under="/manuscript")
        self.l2 = {c.ordinal: l2[c.path].text for c in chapters if c.path in l2}
        self.l1 = {c.ordinal: l1[c.path].text for c in chapters if c.path in l1}

    def novelcrafter(self, chapter: int, budget: int) -> str:
        recent = [self.l2[k] + "\n\n" for k in range(chapter - 1, max(0, chapter - 4), -1)]
        summaries = [self.l1[k] + "\n" for k in range(chapter - 4, 0, -1) if k in self.l1]
        return cut_to_budget(recent + summaries, budget)

    def index_chunks(self) -> float:
        entries: list[IndexedEntry] = []
        for ordinal, text in sorted(self.l2.items()):
            words = text.split()
            for i in range(0, len(words), 375):  # ~500 tokens of this prose
                chunk = " ".join(words[i : i + 375])
                entries.append(
                    IndexedEntry(
                        RAG_KB,
                        f"{ordinal:05d}-{i // 375:03d}",
                        chunk,
                        content_hash(chunk),
                        "chunk",
                        (),
                        True,
                        False,
                        None,
                    )
                )
        self.chunks = {e.entry_id: e.text for e in entries}
        return timed(lambda: sync_entries(self.store.database, RAG_KB, entries))

    def flat_rag(self, chapter: int, query: str, budget: int) -> str:
        hits = search_with_vector(
            self.store.database, query, None, kb_ids=[RAG_KB], model_id=None, top_k=600
        )
        pieces = [
            self.chunks[h.entry_id] + "\n\n"
            for h in hits
            if int(h.entry_id.split("-")[0]) < chapter
        ]
        return cut_to_budget(pieces, budget)


def random_prompt(rng: random.Random, book: GeneratedBook, chapter: int) -> str:
    present = [p for p, k in sorted(book.introduced.items()) if k < chapter]
    names = [
        rng.choice((book.names[p], *book.aliases[p]))
        for p in rng.sample(present, min(3, len(present)))
    ]
    thing = rng.choice(("bridge", "debt", "letter", "storm"))
    return f"Write chapter {chapter}: {', '.join(names)} and the {thing}."


def leaks(text: str, markers: dict[str, int]) -> int:
    return sum(1 for word in markers if word in text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--words", type=int, default=1_000_000)
    parser.add_argument("--chapters", type=int, default=350)
    parser.add_argument("--entities", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--assemblies", type=int, default=10_000)
    parser.add_argument(
        "--part",
        choices=("all", "storage", "whole-path"),
        default="all",
        help="storage: the million-word figures (a)-(d); whole-path: (e) only",
    )
    parser.add_argument("--path-chapters", type=int, default=80, help="(e) English chapters")
    parser.add_argument("--quick", action="store_true", help="(e) at a small size")
    args = parser.parse_args()
    if args.part != "whole-path":
        storage(args)
    if args.part != "storage":
        quick = args.quick
        budget = 3_000 if quick else BUDGET  # quick: a budget the small book exceeds
        # Full size is the manuscript: 80 chapters of about 1,500 words (120,000),
        # and a 20-chapter Chinese book of about 2,900 characters a chapter (a web novel's
        # chapter runs 2,000-4,000).
        path_run(
            "en",
            12 if quick else args.path_chapters,
            8 if quick else 12,
            10 if quick else 22,
            4 if quick else 12,
            budget,
            4 if quick else 6,
        )
        path_run(
            "zh",
            6 if quick else 20,
            6,
            8 if quick else 28,
            3 if quick else 6,
            budget,
            4 if quick else 6,
        )


def storage(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed + 1)
    print(
        "The LLM is scripted and extraction is given: the generator writes the levels, facts,"
        " relations and profiles curation would have produced, so these figures measure"
        " storage, retrieval, budget and checking, not the quality of a model."
    )
    with tempfile.TemporaryDirectory() as tmp:
        store = BookStore(Database(Path(tmp) / "longform.sqlite3"))
        start = time.perf_counter()
        book = generate_book(
            store,
            words=args.words,
            chapters=args.chapters,
            entities=args.entities,
            seed=args.seed,
        )
        build_s = time.perf_counter() - start
        book_id = book.book_id
        print(
            f"\n(a) book: {args.words:,} words, {args.chapters} chapters,"
            f" {len(book.names)} entities,"
            f" {len(book.facts)} facts, {len(book.progressions)} legal progressions,"
            f" {book.levels_written:,} level texts written in {build_s:.1f} s"
        )
        index_s = timed(lambda: store.index_levels(book_id))
        print(f"    search index of every level (FTS/jieba): {index_s:.1f} s")
        baselines = Baselines(store, book)
        print(
            f"    flat-RAG chunk index: {baselines.index_chunks():.1f} s,"
            f" {len(baselines.chunks):,} chunks"
        )

        # (a) assembly latency at 25K
        state = store.state_version(book_id)
        cold = timed(
            lambda: assemble_context(
                store, ContextRequest(book_id, args.chapters, budget_tokens=BUDGET)
            )
        )
        times: list[float] = []
        for _ in range(300):
            chapter = rng.randint(2, args.chapters + 1)
            req = ContextRequest(
                book_id,
                chapter,
                prompt=random_prompt(rng, book, chapter),
                scene_type=rng.choice(SCENE_TYPES),
                budget_tokens=BUDGET,
            )
            start = time.perf_counter()
            assemble_context(store, req)
            times.append((time.perf_counter() - start) * 1000)
        print(
            f"    context assembly at 25K: p50 {pct(times, 0.5):.1f} ms,"
            f" p95 {pct(times, 0.95):.1f} ms (target p95 ≤ 250 ms; first call at this state,"
            f" loading the snapshot: {cold * 1000:.0f} ms)"
        )

        # (b) many assemblies over 1K–30K budgets
        over = 0
        usage: list[float] = []
        requests: list[ContextRequest] = []
        start = time.perf_counter()
        for _ in range(args.assemblies):
            chapter = rng.randint(1, args.chapters + 1)
            req = ContextRequest(
                book_id,
                chapter,
                prompt=random_prompt(rng, book, chapter),
                scene_type=rng.choice(SCENE_TYPES),
                budget_tokens=rng.randint(1_000, 30_000),
                state_version=state,
            )
            ctx = assemble_context(store, req)
            if ctx.tokens > req.budget_tokens:
                over += 1
            if ctx.candidate_tokens > req.budget_tokens:
                usage.append(ctx.tokens / req.budget_tokens)
            if len(requests) < 200:
                requests.append(req)
        many_s = time.perf_counter() - start
        print(f"\n(b) {args.assemblies:,} assemblies at budgets 1K–30K in {many_s:.1f} s")
        print(f"    over budget: {over} (target 0)")
        if usage:
            print(
                f"    budget used when candidates exceed it ({len(usage):,} contexts):"
                f" min {min(usage):.1%}, p5 {pct(usage, 0.05):.1%},"
                f" mean {statistics.fmean(usage):.1%}"
                " (target ≥ 90%)"
            )
        same = 0
        rebuilt_tokens = 0
        total_tokens = 0
        for req in requests:
            first = assemble_context(store, req)
            again = assemble_context(store, req)
            same += first == again
            rebuilt = rebuild_context(store, first.sources())
            total_tokens += first.tokens
            if rebuilt == first.text:
                rebuilt_tokens += first.tokens
            else:  # count what does rebuild, piece by piece
                rebuilt_tokens += sum(
                    p.tokens
                    for p, s in zip(first.pieces, first.sources(), strict=True)
                    if rebuild_context(store, [s]) == p.text
                )
        print(f"    identical output for identical input: {same}/{len(requests)} re-run requests")
        print(
            "    tokens rebuildable from contextSources:"
            f" {rebuilt_tokens / max(total_tokens, 1):.2%}"
            f" of {total_tokens:,} (target 100%)"
        )

        # (c) dependency-fact recall at 25K
        names = ("storyloom", "novelcrafter", "flat-rag")
        found = {n: {d: 0 for d in DISTANCES} for n in names}
        wanted = {d: 0 for d in DISTANCES}
        leaked = {n: 0 for n in names}
        for test in book.tests:
            query = f"{test.prompt}\n{test.outline}"
            texts = {
                "storyloom": assemble_context(
                    store,
                    ContextRequest(
                        book_id,
                        test.chapter,
                        prompt=test.prompt,
                        outline=test.outline,
                        budget_tokens=BUDGET,
                    ),
                ).text,
                "novelcrafter": baselines.novelcrafter(test.chapter, BUDGET),
                "flat-rag": baselines.flat_rag(test.chapter, query, BUDGET),
            }
            markers = book.future_markers(test.chapter)
            for dep in test.dependencies:
                wanted[dep.distance] += 1
                for n in names:
                    found[n][dep.distance] += dep.fact.value in texts[n]
            for n in names:
                leaked[n] += leaks(texts[n], markers)
        print(f"\n(c) dependency-fact recall at a 25K budget over {len(book.tests)} test chapters")
        recall: dict[str, float] = {}
        for n in names:
            total = sum(found[n].values())
            recall[n] = total / max(sum(wanted.values()), 1)
            per = ", ".join(f"{d} back {found[n][d]}/{wanted[d]}" for d in DISTANCES if wanted[d])
            print(f"    {n:13s} {recall[n]:.1%}  ({per}); facts from later chapters: {leaked[n]}")

        # (d) Role C
        print("\n(d) Role C: seeded contradictions and legal progressions")
        try:
            from storyloom.writing.monitor import Claim, check_claims
        except ImportError as exc:
            print(f"    skipped: storyloom.writing.monitor is not importable ({exc})")
            Claim = None  # type: ignore[assignment,misc]
        if Claim is not None:
            seeded = 0
            caught = 0
            seeded_s = 0
            caught_s = 0
            evidence_hits = 0
            by_cat: dict[str, list[int]] = {}
            by_dist: dict[int, list[int]] = {}
            for test in book.tests:
                claims = []
                facts: list[tuple[PlantedFact, int]] = []
                for dep in test.checks:
                    value = altered_value(dep.fact, rng)
                    claims.append(
                        Claim(
                            dep.fact.subject,
                            dep.fact.attribute,
                            value,
                            dep.fact.category,  # type: ignore[arg-type]
                            f"{book.names[dep.fact.subject]}'s {dep.fact.attribute} was {value}.",
                        )
                    )
                    facts.append((dep.fact, dep.distance))
                findings = check_claims(store, book_id, claims, test.chapter)
                hit = {(f.subject, f.attribute): f for f in findings}
                for fact, distance in facts:
                    finding = hit.get((fact.subject, fact.attribute))
                    ok = finding is not None
                    seeded += 1
                    caught += ok
                    if fact.structured:
                        seeded_s += 1
                        caught_s += ok
                    cat = by_cat.setdefault(fact.category, [0, 0])
                    cat[0] += ok
                    cat[1] += 1
                    dist = by_dist.setdefault(distance, [0, 0])
                    dist[0] += ok
                    dist[1] += 1
                    if finding is not None and finding.evidence_uri.endswith(
                        f"chapter-{fact.chapter:03d}"
                    ):
                        evidence_hits += 1
            traps = 0
            alarms = 0
            for prog in book.progressions:
                for chapter, change in (
                    (prog.changed, True),
                    (prog.changed + 1, False),
                    (min(prog.changed + 50, args.chapters + 1), False),
                ):
                    if chapter > args.chapters + 1:
                        continue
                    claim = Claim(
                        prog.subject,
                        prog.attribute,
                        prog.after,
                        prog.category,  # type: ignore[arg-type]
                        f"{book.names[prog.subject]}'s {prog.attribute} turned {prog.after}.",
                        change,
                    )
                    traps += 1
                    alarms += bool(check_claims(store, book_id, [claim], chapter))
            print(
                f"    recall {caught}/{seeded} = {caught / max(seeded, 1):.1%} (target ≥ 90%);"
                f" structured attributes {caught_s}/{seeded_s} = {caught_s / max(seeded_s, 1):.1%}"
                " (target ≥ 98%)"
            )
            print(
                "    by category: "
                + ", ".join(f"{c} {v[0]}/{v[1]}" for c, v in sorted(by_cat.items()))
            )
            print(
                "    by distance: "
                + ", ".join(f"{d} back {v[0]}/{v[1]}" for d, v in sorted(by_dist.items()))
            )
            print(f"    evidence points at the planting chapter: {evidence_hits}/{caught}")
            print(
                f"    false alarms on legal progressions: {alarms}/{traps}"
                f" = {alarms / max(traps, 1):.1%}"
                " (target ≤ 5%)"
            )

        # (a, last: it changes the book) re-index after curating one chapter
        reindex: list[float] = []
        for k in rng.sample(range(1, args.chapters + 1), min(5, args.chapters)):
            path = baselines.path_of[k]
            subject = sorted(book.names)[k % len(book.names)]
            entity = store.resource(book_id, subject)
            curated = Fact(subject, "nickname", f"the {k}th rider", k, "characterization")
            levels = [
                LevelWrite(
                    path, "L2", baselines.l2[k] + " And then it rained.", k, "curation:bench"
                ),
                LevelWrite(path, "L1", baselines.l1[k] + " It rained.", k, "curation:bench"),
                LevelWrite(path, "L0", f"Chapter {k}, curated again.", k, "curation:bench"),
            ]
            start = time.perf_counter()
            profile = render_profile(
                entity, [*store.facts(book_id, subject=subject, before_chapter=k), curated], k
            )
            store.commit_chapter_memory(
                book_id, levels=[*levels, *profile.writes(k)], facts=[curated]
            )
            store.index_levels(book_id, paths=[path, profile.path])
            reindex.append(time.perf_counter() - start)
        print(
            f"\n    re-index after curating one chapter (memory commit + index of the chapter and"
            f" profile): p50 {pct(reindex, 0.5) * 1000:.0f} ms, max {max(reindex) * 1000:.0f} ms"
            " (target ≤ 1 s)"
        )
        best = max(recall["novelcrafter"], recall["flat-rag"])
        print(f"\nratio: {recall['storyloom'] / best if best else float('inf'):.2f}")


if __name__ == "__main__":
    main()
