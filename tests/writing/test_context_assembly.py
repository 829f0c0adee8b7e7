"""Role A: the context assembled for a chapter, under a hard token budget."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storyloom.core.errors import InvalidInput
from storyloom.store.database import Database
from storyloom.writing.book_store import BookStore, Fact, LevelWrite, Resource
from storyloom.writing.context_assembly import (
    AssemblySettings,
    ContextRequest,
    assemble_context,
    rebuild_context,
)
from storyloom.writing.profiles import profile_path, render_profile
from storyloom.writing.tokens import count_tokens
from storyloom.writing.uris import arc_path

LIN = "/entities/characters/lin-feng"
MEI = "/entities/characters/mei"
KEEP = "/entities/locations/cloud-keep"
LATE = "/entities/characters/late-comer"
FUTURE_WORD = "zanthorium"
FUTURE_FACT = "a scar shaped like a heron"
CHAPTERS = 12

FILLER = (
    "The lanterns swung over the bridge while the river muttered below and the market "
    "closed its shutters one by one. "
)


def _entity(store: BookStore, book_id: str, path: str) -> Resource:
    return store.resource(book_id, path)


def build_book(store: BookStore) -> str:
    # a fixed id: its URI's token count is then the same in every run
    book_id = store.create_book("The Jade Bridge", book_id="bk_jade").id
    store.write_levels(
        book_id,
        [
            LevelWrite("/meta/world-rules", "L0", "Oaths bind; bridges close at the ninth bell."),
            LevelWrite(
                "/meta/world-rules",
                "L1",
                "World rules: oaths bind whoever swears them; the bridges close at the ninth "
                "bell; magic is paid for in memory.",
            ),
            LevelWrite("/meta/world-rules", "L2", "World rules in full. " + FILLER * 120),
            LevelWrite("/meta/outline", "L0", "A courier and a judge against a river court."),
            LevelWrite("/meta/outline", "L1", "Outline: twelve chapters on the Jade Bridge."),
            LevelWrite("/profiles/style/narrative-voice", "L0", "Close third, past tense."),
        ],
    )
    for path, kind, title, aliases in (
        (LIN, "character", "Lin Feng", ("林枫", "Feng")),
        (MEI, "character", "Mei Lan", ("Mei", "梅兰")),
        (KEEP, "location", "Cloud Keep", ()),
        (LATE, "character", "Oskar Vell", ("Oskar",)),
    ):
        store.put_resource(
            book_id,
            path,
            kind=kind,  # type: ignore[arg-type]
            title=title,
            aliases=aliases,
            chapter_from=9 if path == LATE else 0,
        )
        store.write_levels(
            book_id,
            [
                LevelWrite(path, "L0", f"{title}: a {kind}."),
                LevelWrite(path, "L1", f"{title} ({kind}). " + FILLER * 2),
                LevelWrite(path, "L2", f"{title} in full. " + FILLER * 20),
            ],
        )
        entity = store.resource(book_id, path)
        folder = profile_path(entity).split("/")[2]
        store.put_resource(
            book_id,
            profile_path(entity),
            kind="profile",
            title=f"{title} (profile)",
            chapter_from=entity.chapter_from,
            attrs={"profileType": folder, "subject": path},
        )
    store.link(book_id, LIN, KEEP, "关联", "grew up there")
    store.link(book_id, MEI, LATE, "冲突", "an old debt", chapter=9)
    facts = {
        2: [Fact(LIN, "hair", "black", 2, "factual")],
        6: [Fact(LIN, "hair", "silver", 6, "factual")],
        10: [Fact(LIN, "scar", FUTURE_FACT, 10, "factual")],
    }
    for number in range(1, CHAPTERS + 1):
        arc = arc_path((number - 1) // 4 + 1)
        marker = f" A sigil read {FUTURE_WORD}." if number == 10 else ""
        names = "Lin Feng and Mei" if number % 3 else "Mei alone"
        chapter = store.add_chapter(
            book_id,
            f"Chapter {number}",
            arc=arc,
            text=f"Chapter {number}. {names} on the bridge.{marker} " + FILLER * 30,
        )
        rows = [
            LevelWrite(chapter.path, "L0", f"Chapter {number}: {names}.{marker}", number),
            LevelWrite(
                chapter.path,
                "L1",
                f"Chapter {number} overview: {names} cross the bridge.{marker} " + FILLER,
                number,
            ),
        ]
        if number % 4 == 0:
            summary = f"/summaries/arc-{number // 4:02d}"
            store.put_resource(book_id, summary, kind="summary", title=f"Arc {number // 4}")
            rows += [
                LevelWrite(summary, "L0", f"Arc {number // 4} in a line.", number),
                LevelWrite(summary, "L1", f"Arc {number // 4} summary. " + FILLER, number),
            ]
        if number in facts:
            store.add_facts(book_id, facts[number])
            lin = _entity(store, book_id, LIN)
            rows += render_profile(lin, store.facts(book_id, subject=LIN), number).writes(number)
        store.write_levels(book_id, rows)
    return book_id


@pytest.fixture(scope="module")
def book(tmp_path_factory: pytest.TempPathFactory) -> tuple[BookStore, str]:
    path: Path = tmp_path_factory.mktemp("assembly") / "db.sqlite3"
    store = BookStore(Database(path))
    return store, build_book(store)


def request(book_id: str, chapter: int = 8, **kw: object) -> ContextRequest:
    base: dict[str, object] = {
        "prompt": "Lin Feng waits for Mei at the bridge.",
        "budget_tokens": 4_000,
    }
    base.update(kw)
    return ContextRequest(book_id, chapter, **base)  # type: ignore[arg-type]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(budget=st.integers(1, 30_000), chapter=st.integers(1, CHAPTERS + 1))
def test_context_never_exceeds_its_budget(
    book: tuple[BookStore, str], budget: int, chapter: int
) -> None:
    store, book_id = book
    ctx = assemble_context(store, request(book_id, chapter, budget_tokens=budget))
    assert ctx.tokens == count_tokens(ctx.text) <= budget
    assert ctx.text == "".join(p.text for p in ctx.pieces)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(budget=st.integers(200, 30_000), chapter=st.integers(1, 10))
def test_nothing_from_the_chapter_being_written_or_later_is_seen(
    book: tuple[BookStore, str], budget: int, chapter: int
) -> None:
    store, book_id = book
    ctx = assemble_context(
        store,
        request(book_id, chapter, budget_tokens=budget, prompt="Lin Feng, Mei and Oskar."),
    )
    assert FUTURE_WORD not in ctx.text
    assert FUTURE_FACT not in ctx.text
    ordinals = [int(p.path.rsplit("-", 1)[1]) for p in ctx.pieces if "/chapter-" in p.path]
    assert all(n < chapter for n in ordinals)
    if chapter <= 9:
        assert "Oskar Vell" not in ctx.text  # enters the story in chapter 9


def test_the_same_request_gives_the_same_context(book: tuple[BookStore, str]) -> None:
    store, book_id = book
    first = assemble_context(store, request(book_id, 9, budget_tokens=7_777))
    second = assemble_context(store, request(book_id, 9, budget_tokens=7_777))
    assert first == second
    assert [s.model_dump() for s in first.sources()] == [s.model_dump() for s in second.sources()]


def test_rebuilding_from_the_sources_gives_the_text_byte_for_byte(
    book: tuple[BookStore, str],
) -> None:
    store, book_id = book
    for budget in (300, 3_000, 30_000):
        ctx = assemble_context(store, request(book_id, 12, budget_tokens=budget))
        sources = ctx.sources()
        assert all(s.version is not None and s.reason for s in sources)
        assert rebuild_context(store, sources) == ctx.text


def test_a_big_level_falls_back_to_a_cheaper_one_instead_of_being_cut(
    book: tuple[BookStore, str],
) -> None:
    store, book_id = book
    full = store.level(book_id, "/meta/world-rules", "L2")
    overview = store.level(book_id, "/meta/world-rules", "L1")
    assert full is not None and overview is not None and full.tokens > 2_000
    ctx = assemble_context(store, request(book_id, 8, budget_tokens=1_500))
    (rules,) = [p for p in ctx.pieces if p.path == "/meta/world-rules"]
    assert rules.level == "L1"
    assert overview.text.rstrip() in rules.text
    roomy = assemble_context(store, request(book_id, 8, budget_tokens=20_000))
    (rules,) = [p for p in roomy.pieces if p.path == "/meta/world-rules"]
    assert rules.level == "L2" and full.text.rstrip() in rules.text


def test_leftover_budget_upgrades_the_best_pieces(book: tuple[BookStore, str]) -> None:
    store, book_id = book
    tight = assemble_context(store, request(book_id, 12, budget_tokens=2_500))
    roomy = assemble_context(store, request(book_id, 12, budget_tokens=30_000))
    levels_tight = {p.path: p.level for p in tight.pieces}
    levels_roomy = {p.path: p.level for p in roomy.pieces}
    assert levels_tight[LIN] in ("L0", "L1")
    assert levels_roomy[LIN] == "L2"
    chapters_roomy = [p for p in roomy.pieces if "/chapter-" in p.path]
    assert any(p.level == "L2" for p in chapters_roomy)  # the best chapter read in full
    assert all(p.level != "L0" for p in chapters_roomy)  # the brief ones upgraded


def test_the_budget_is_nearly_filled_when_the_candidates_exceed_it(
    book: tuple[BookStore, str],
) -> None:
    store, book_id = book
    for budget in (400, 600, 1_000, 2_000, 4_000):
        ctx = assemble_context(store, request(book_id, 12, budget_tokens=budget))
        assert ctx.candidate_tokens > budget
        assert ctx.tokens >= 0.9 * budget


def test_an_entity_is_matched_by_its_alias_chinese_names_included(
    book: tuple[BookStore, str],
) -> None:
    store, book_id = book
    ctx = assemble_context(store, request(book_id, 8, prompt="林枫站在桥上，等梅兰。"))
    reasons = {p.path: p.reason for p in ctx.pieces}
    assert reasons[LIN] == "Lin Feng appears in the scene"
    assert reasons[MEI] == "Mei Lan appears in the scene"
    assert reasons["/profiles/characters/lin-feng"] == "profile of Lin Feng as of chapter 7"
    plain = assemble_context(store, request(book_id, 8, prompt="Feng crossed alone."))
    assert {p.path: p.reason for p in plain.pieces}[LIN] == "Lin Feng appears in the scene"
    # a name inside a longer word is not a mention
    none = assemble_context(store, request(book_id, 8, prompt="Fengshui and Meiji."))
    assert "appears in the scene" not in " ".join(p.reason for p in none.pieces)


def test_intent_analysis_entities_replace_name_matching(book: tuple[BookStore, str]) -> None:
    store, book_id = book
    ctx = assemble_context(
        store, request(book_id, 8, prompt="Lin Feng everywhere.", entities=(MEI,))
    )
    reasons = {p.path: p.reason for p in ctx.pieces}
    assert "in the scene" in reasons[MEI]
    assert "in the scene" not in reasons.get(LIN, "")


def test_relations_are_followed_one_hop(book: tuple[BookStore, str]) -> None:
    store, book_id = book
    ctx = assemble_context(store, request(book_id, 8, prompt="Lin Feng alone."))
    reasons = {p.path: p.reason for p in ctx.pieces}
    assert reasons[KEEP] == "linked to Lin Feng: 关联 (grew up there)"
    # Mei's conflict with Oskar dates from chapter 9: not yet when writing chapter 8
    mei = assemble_context(store, request(book_id, 8, prompt="Mei alone.", budget_tokens=30_000))
    assert LATE not in {p.path for p in mei.pieces}
    later = assemble_context(store, request(book_id, 11, prompt="Mei alone."))
    assert {p.path: p.reason for p in later.pieces}[LATE] == "linked to Mei Lan: 冲突 (an old debt)"


def test_the_profile_is_read_as_of_the_chapter_before(book: tuple[BookStore, str]) -> None:
    store, book_id = book
    before = assemble_context(store, request(book_id, 6))
    after = assemble_context(store, request(book_id, 7))
    profile = "/profiles/characters/lin-feng"
    (old,) = [p for p in before.pieces if p.path == profile]
    (new,) = [p for p in after.pieces if p.path == profile]
    assert "hair: black" in old.text and "silver" not in old.text
    assert "hair: silver" in new.text


def test_past_the_scan_limit_arc_summaries_come_first(book: tuple[BookStore, str]) -> None:
    store, book_id = book
    short = AssemblySettings(chapter_scan_limit=5, best_arcs=1, recent_chapters=1)
    ctx = assemble_context(store, request(book_id, 12, budget_tokens=2_500), short)
    arcs = [p for p in ctx.pieces if p.path.startswith("/summaries/arc-")]
    assert [p.path for p in arcs] == ["/summaries/arc-01", "/summaries/arc-02"]
    assert all(p.reason.startswith("arc summary") for p in arcs)
    # the arc of chapters 9-12 has no summary before chapter 12
    normal = assemble_context(store, request(book_id, 12, budget_tokens=2_500))
    assert not [p for p in normal.pieces if p.path.startswith("/summaries/arc-")]
    briefs = [p for p in normal.pieces if "/chapter-" in p.path and "#p=" not in p.uri]
    assert len(briefs) == 11


def test_a_state_version_pins_the_context(tmp_path: Path) -> None:
    store = BookStore(Database(tmp_path / "db.sqlite3"))
    book_id = build_book(store)
    pinned = store.state_version(book_id)
    old = assemble_context(store, request(book_id, 12, budget_tokens=30_000))
    store.write_level(book_id, "/meta/world-rules", "L2", "Rewritten rules: nothing binds.")
    chapter = store.chapter(book_id, 5)
    store.write_level(book_id, chapter.path, "L1", "A rewritten chapter five.", as_of_chapter=5)
    again = assemble_context(
        store, request(book_id, 12, budget_tokens=30_000, state_version=pinned)
    )
    assert again == old
    now = assemble_context(store, request(book_id, 12, budget_tokens=30_000))
    assert now.state_version > pinned and "Rewritten rules" in now.text
    assert rebuild_context(store, again.sources()) == old.text


def test_bad_requests_are_refused(book: tuple[BookStore, str]) -> None:
    store, book_id = book
    with pytest.raises(InvalidInput):
        assemble_context(store, request(book_id, 0))
    with pytest.raises(InvalidInput):
        assemble_context(store, request(book_id, 3, budget_tokens=0))
