"""Role A reads passages of the earlier chapters: a prose book with facts said in passing."""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

from storyloom.knowledge.hybrid_search import search_with_vector
from storyloom.knowledge.search_index import IndexedEntry, content_hash, sync_entries
from storyloom.store.database import Database
from storyloom.writing.book_store import BookStore
from storyloom.writing.context_assembly import ContextRequest, assemble_context, rebuild_context
from storyloom.writing.passages import split_passage_uri, split_passages
from storyloom.writing.tokens import count_tokens

if TYPE_CHECKING:
    from bench.longform_prose import ProseBook

BENCH = Path(__file__).resolve().parents[2] / "bench"
CHAPTERS = 24
BUDGET = 6_000


def _load(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


prose = _load("longform_prose")


@pytest.fixture(scope="module")
def book(tmp_path_factory: pytest.TempPathFactory) -> tuple[BookStore, str, ProseBook]:
    store = BookStore(Database(tmp_path_factory.mktemp("passages") / "db.sqlite3"))
    generated: ProseBook = prose.generate_prose_book(
        chapters=CHAPTERS, characters=8, paragraphs=12, seed=3
    )
    book_id = store.create_book(generated.title, book_id="bk_salt").id
    for title, text in generated.chapters:
        store.add_chapter(book_id, title, text=text)
    for c in generated.characters:
        store.put_resource(
            book_id,
            f"/entities/characters/{c.slug}",
            kind="character",
            title=c.name,
            aliases=(c.first, c.alias),
        )
        store.write_level(book_id, f"/entities/characters/{c.slug}", "L0", f"{c.name}.")
    return store, book_id, generated


def _context(
    store: BookStore, book_id: str, chapter: int, prompt: str, budget: int = BUDGET
) -> str:
    return assemble_context(
        store, ContextRequest(book_id, chapter, prompt=prompt, budget_tokens=budget)
    ).text


def test_passages_are_whole_paragraphs_of_the_text() -> None:
    text = "First paragraph, short.\n\n" + "A long one. " * 200 + "\n\n  Last bit here.  \n"
    spans = split_passages(text)
    assert spans[0][0] == 0
    assert all(text[s:e] == text[s:e].strip() for s, e in spans)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    assert max(e - s for s, e in spans) < 1_500  # the long paragraph was cut at sentences


def test_no_passage_from_the_chapter_being_written_or_later(
    book: tuple[BookStore, str, ProseBook],
) -> None:
    store, book_id, generated = book
    for chapter in (2, 9, 17, CHAPTERS):
        names = " and ".join(c.name for c in generated.characters)
        ctx = assemble_context(
            store, ContextRequest(book_id, chapter, prompt=names, budget_tokens=4_000)
        )
        passages = [p for p in ctx.pieces if "#p=" in p.uri]
        assert passages or chapter == 2
        for piece in ctx.pieces:
            if "/chapter-" in piece.path:
                assert int(piece.path.rsplit("-", 1)[1]) < chapter
        for fact in generated.future(chapter):
            assert fact.sentence not in ctx.text


def test_the_same_request_gives_the_same_context_and_it_rebuilds(
    book: tuple[BookStore, str, ProseBook],
) -> None:
    store, book_id, generated = book
    probe = prose.probes(generated, 1)[0]
    request = ContextRequest(book_id, probe.chapter, prompt=probe.prompt, budget_tokens=BUDGET)
    first = assemble_context(store, request)
    assert assemble_context(store, request) == first
    assert any(split_passage_uri(s.uri)[1] for s in first.sources())
    assert rebuild_context(store, first.sources()) == first.text


def test_the_budget_is_filled(book: tuple[BookStore, str, ProseBook]) -> None:
    store, book_id, generated = book
    for budget in (1_500, 6_000, 12_000):
        ctx = assemble_context(
            store,
            ContextRequest(
                book_id, CHAPTERS, prompt=generated.characters[0].name, budget_tokens=budget
            ),
        )
        assert ctx.candidate_tokens > budget
        assert budget * 0.95 <= ctx.tokens <= budget


def test_an_alias_of_the_scene_character_pulls_its_passages(
    book: tuple[BookStore, str, ProseBook],
) -> None:
    store, book_id, generated = book
    who = generated.characters[1]
    ctx = assemble_context(
        store,
        ContextRequest(
            book_id, CHAPTERS, prompt=f"{who.alias.capitalize()} waits.", budget_tokens=3_000
        ),
    )
    passages = [p for p in ctx.pieces if "#p=" in p.uri]
    assert passages
    # every passage is there because it names the character (by any of its names)
    assert all(who.name in p.reason for p in passages)
    assert any(who.name not in p.text and who.first not in p.text for p in passages) or all(
        who.alias in p.text.casefold() or who.first in p.text for p in passages
    )


def _bm25_chunks(store: BookStore, book_id: str, generated: ProseBook) -> dict[str, str]:
    """Flat RAG: the chapters in chunks of about 500 tokens of whole paragraphs."""
    kb = "bm25-chunks"
    entries: list[IndexedEntry] = []
    for number, (_, text) in enumerate(generated.chapters, start=1):
        chunk: list[str] = []
        for paragraph in text.split("\n\n"):
            chunk.append(paragraph)
            if count_tokens("\n\n".join(chunk)) >= 500:
                body = "\n\n".join(chunk)
                entries.append(
                    IndexedEntry(
                        kb,
                        f"{number:04d}-{len(entries):05d}",
                        body,
                        content_hash(body),
                        "chunk",
                        (),
                        True,
                        False,
                        None,
                    )
                )
                chunk = []
        if chunk:
            body = "\n\n".join(chunk)
            entries.append(
                IndexedEntry(
                    kb,
                    f"{number:04d}-{len(entries):05d}",
                    body,
                    content_hash(body),
                    "chunk",
                    (),
                    True,
                    False,
                    None,
                )
            )
    sync_entries(store.database, kb, entries)
    return {e.entry_id: e.text for e in entries}


def test_storyloom_holds_at_least_as_many_needed_facts_as_bm25_chunks(
    book: tuple[BookStore, str, ProseBook],
) -> None:
    store, book_id, generated = book
    chunks = _bm25_chunks(store, book_id, generated)
    ours = theirs = wanted = 0
    for probe in prose.probes(generated, 4):
        ctx = assemble_context(
            store, ContextRequest(book_id, probe.chapter, prompt=probe.prompt, budget_tokens=3_000)
        )
        hits = search_with_vector(
            store.database, probe.prompt, None, kb_ids=["bm25-chunks"], model_id=None, top_k=200
        )
        baseline: list[str] = []
        used = 0
        for hit in hits:
            if int(hit.entry_id.split("-")[0]) >= probe.chapter:
                continue
            cost = count_tokens(chunks[hit.entry_id])
            if used + cost > ctx.tokens:
                break
            baseline.append(chunks[hit.entry_id])
            used += cost
        flat = "\n\n".join(baseline)
        for fact in generated.needed(probe):
            wanted += 1
            ours += fact.sentence in ctx.text
            theirs += fact.sentence in flat
    assert wanted > 0
    assert ours >= theirs
    assert ours > 0
