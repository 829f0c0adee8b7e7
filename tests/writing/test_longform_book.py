"""The long-form benchmark's seeded book and the benchmark itself, at a tiny size."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

from storyloom.store.database import Database
from storyloom.writing.book_store import BookStore
from storyloom.writing.context_assembly import ContextRequest, assemble_context, rebuild_context

if TYPE_CHECKING:
    from bench.longform_book import GeneratedBook

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[BookStore, GeneratedBook]:
    store = BookStore(Database(tmp_path_factory.mktemp("longform") / "db.sqlite3"))
    book: GeneratedBook = _load("longform_book").generate_book(
        store, words=12_000, chapters=12, entities=20, seed=3
    )
    return store, book


def test_the_generated_book_is_the_same_for_the_same_seed(
    generated: tuple[BookStore, GeneratedBook], tmp_path: Path
) -> None:
    _, book = generated
    other = _load("longform_book").generate_book(
        BookStore(Database(tmp_path / "db.sqlite3")), words=12_000, chapters=12, entities=20, seed=3
    )
    assert other.facts == book.facts and other.tests == book.tests
    assert other.seals == book.seals and other.names == book.names


def test_the_generated_book_has_what_the_benchmark_scores(
    generated: tuple[BookStore, GeneratedBook],
) -> None:
    store, book = generated
    assert len(store.chapters(book.book_id)) == 12
    assert book.tests and all(t.dependencies for t in book.tests)
    assert any(p.attribute == "hair" and p.after == "silver" for p in book.progressions)
    assert {d.distance for t in book.tests for d in t.dependencies} == {1, 10}
    for test in book.tests:
        for dep in test.dependencies:
            assert dep.fact.chapter == test.chapter - dep.distance
            # nothing replaces a dependency before the chapter that needs it
            current = book.current_value(dep.fact.subject, dep.fact.attribute, test.chapter)
            assert current == dep.fact
    stored = store.facts(book.book_id)
    assert len(stored) == len(book.facts)
    assert any(any("\u4e00" <= ch <= "\u9fff" for ch in "".join(a)) for a in book.aliases.values())


def test_role_a_recalls_dependencies_without_future_facts_and_rebuilds(
    generated: tuple[BookStore, GeneratedBook],
) -> None:
    store, book = generated
    for test in book.tests:
        for budget in (1_000, 8_000, 25_000):
            ctx = assemble_context(
                store,
                ContextRequest(
                    book.book_id,
                    test.chapter,
                    prompt=test.prompt,
                    outline=test.outline,
                    budget_tokens=budget,
                ),
            )
            assert ctx.tokens <= budget
            assert rebuild_context(store, ctx.sources()) == ctx.text
            assert not [w for w in book.future_markers(test.chapter) if w in ctx.text]
            if budget == 25_000:
                assert all(d.fact.value in ctx.text for d in test.dependencies)


def test_the_benchmark_runs_at_a_tiny_size(capsys: pytest.CaptureFixture[str]) -> None:
    _load("longform_book")
    bench = _load("longform")
    argv = sys.argv
    sys.argv = [
        "longform.py",
        "--words",
        "12000",
        "--chapters",
        "12",
        "--entities",
        "20",
        "--assemblies",
        "60",
        "--part",
        "storage",
    ]
    try:
        bench.main()
    finally:
        sys.argv = argv
    out = capsys.readouterr().out
    assert "extraction is given" in out
    assert "over budget: 0 (target 0)" in out
    assert "tokens rebuildable from contextSources: 100.00%" in out
    storyloom_line = next(line for line in out.splitlines() if "storyloom " in line)
    assert storyloom_line.rstrip().endswith("facts from later chapters: 0")
    assert "\nratio: " in out
