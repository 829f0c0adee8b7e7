"""Role C: claims from text (lexical and agent LLM) checked against facts as of a chapter."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from storyloom.core.settings import ChatEndpoint
from storyloom.store.database import Database
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.writing.book_store import BookStore, Fact
from storyloom.writing.monitor import (
    Claim,
    MonitorError,
    check_claims,
    claims_by_agent,
    evaluate,
    extract_claims,
    findings_as_feedback,
)

LIN = "/entities/characters/lin-feng"
MEI = "/entities/characters/mei"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[BookStore]:
    database = Database(tmp_path / "storyloom.sqlite3")
    yield BookStore(database)
    database.close()


def book_with_chapters(store: BookStore, chapters: int, *, language: str = "en") -> str:
    book = store.create_book("The Long Road", language=language, book_id="bk_test")
    for n in range(1, chapters + 1):
        store.add_chapter(book.id, f"Chapter {n}", text=f"Chapter {n} text.")
    return book.id


def characters(store: BookStore, book_id: str) -> None:
    store.put_resource(
        book_id, LIN, kind="character", title="Lin Feng", aliases=["Lin Feng", "林枫", "Feng"]
    )
    store.put_resource(book_id, MEI, kind="character", title="Mei", aliases=["Mei", "梅"])


def fact(subject: str, attribute: str, value: str, chapter: int, **kw: str) -> Fact:
    return Fact(subject, attribute, value, chapter, **kw)  # type: ignore[arg-type]


def test_contradicted_hair_colour_is_a_character_state_finding(store: BookStore) -> None:
    book = book_with_chapters(store, 5)
    characters(store, book)
    store.add_facts(book, [fact(LIN, "hair", "black", 2), fact(MEI, "hair", "silver", 1)])
    text = "Lin Feng walked in. Lin Feng's silver hair caught the light. Mei laughed."
    claims = extract_claims(store, book, text, 5)
    assert Claim(LIN, "hair", "silver", "factual", "Lin Feng's silver hair caught the light.") in (
        claims
    )
    findings = check_claims(store, book, claims, 5)
    assert len(findings) == 1
    finding = findings[0]
    assert finding.dimension == "character-state"
    assert (finding.expected, finding.found, finding.since_chapter) == ("black", "silver", 2)
    assert finding.evidence_uri == store.chapter(book, 2).uri
    assert "silver hair" in finding.evidence
    # The same finding on a second check has the same fingerprint.
    again = check_claims(store, book, extract_claims(store, book, text, 5), 5)
    assert [f.fingerprint for f in again] == [finding.fingerprint]


def test_legal_progression_is_not_a_finding_and_older_value_later_is(store: BookStore) -> None:
    book = book_with_chapters(store, 130)
    characters(store, book)
    store.add_facts(book, [fact(LIN, "hair", "black", 1), fact(LIN, "hair", "silver", 120)])
    dyed = "That night Lin Feng dyed his hair silver."
    assert check_claims(store, book, extract_claims(store, book, dyed, 120), 120) == []
    # Chapter 130 saying "black" is the pre-progression value: a finding that says so.
    stale = "Lin Feng brushed back his black hair."
    findings = check_claims(store, book, extract_claims(store, book, stale, 130), 130)
    assert [(f.expected, f.found, f.since_chapter) for f in findings] == [("silver", "black", 120)]
    assert (findings[0].kind, findings[0].earlier) == ("contradiction", ("black", 120))
    assert "until ch. 120" in findings[0].detail
    # Chapter 40 still sees black: saying black there is fine.
    assert check_claims(store, book, extract_claims(store, book, stale, 40), 40) == []
    # A memory of the old colour is not a claim about now.
    memory = "Lin Feng remembered when his hair was black."
    assert extract_claims(store, book, memory, 130) == []


def test_ambiguous_value_needs_the_attribute_word(store: BookStore) -> None:
    book = book_with_chapters(store, 3)
    characters(store, book)
    store.add_facts(book, [fact(LIN, "hair", "black", 1), fact(LIN, "eyes", "black", 1)])
    store.add_facts(book, [fact(MEI, "eyes", "grey", 1)])
    vague = extract_claims(store, book, "Lin Feng wore black.", 3)
    assert vague == []
    eyes = extract_claims(store, book, "Lin Feng's eyes were grey as ash.", 3)
    assert [(c.attribute, c.value) for c in eyes] == [("eyes", "grey")]


def test_chinese_dyeing_is_a_progression_and_chinese_contradiction_is_found(
    store: BookStore,
) -> None:
    book = book_with_chapters(store, 6, language="zh")
    characters(store, book)
    store.add_facts(book, [fact(LIN, "hair", "黑色", 1), fact(MEI, "hair", "银色", 1)])
    dyed = extract_claims(store, book, "那天夜里，林枫的头发染成了银色。", 5)
    assert [(c.subject, c.value, c.change) for c in dyed] == [(LIN, "银色", True)]
    assert check_claims(store, book, dyed, 5) == []
    plain = extract_claims(store, book, "林枫甩了甩银色的头发。", 6)
    findings = check_claims(store, book, plain, 6)
    assert [(f.subject, f.expected, f.found) for f in findings] == [(LIN, "黑色", "银色")]


def test_dead_character_acting_later_is_a_timeline_finding(store: BookStore) -> None:
    book = book_with_chapters(store, 20)
    characters(store, book)
    store.add_facts(book, [fact(MEI, "status", "dead", 10, category="timeline")])
    acting = "Mei drew her sword and charged."
    findings = check_claims(store, book, extract_claims(store, book, acting, 15), 15)
    assert [(f.dimension, f.expected, f.found, f.since_chapter) for f in findings] == [
        ("timeline", "dead", "alive", 10)
    ]
    mourning = "Lin Feng stood by Mei's grave. 林枫回忆起梅。"
    assert check_claims(store, book, extract_claims(store, book, mourning, 15), 15) == []
    # Before she died she may act.
    assert check_claims(store, book, extract_claims(store, book, acting, 9), 9) == []


def test_every_sentence_in_which_the_dead_act_is_a_finding_of_its_own(store: BookStore) -> None:
    book = book_with_chapters(store, 20)
    characters(store, book)
    store.add_facts(book, [fact(MEI, "status", "dead", 10, category="timeline")])
    text = '"Not tonight," Mei said quietly. Mei opened the door and walked out into the rain.'
    findings = check_claims(store, book, extract_claims(store, book, text, 15), 15)
    assert [f.evidence for f in findings] == [
        '"Not tonight," Mei said quietly.',
        "Mei opened the door and walked out into the rain.",
    ]
    assert len({f.fingerprint for f in findings}) == 2


def test_world_rule_violation_is_found(store: BookStore) -> None:
    book = book_with_chapters(store, 4)
    characters(store, book)
    store.add_facts(
        book, [fact("/meta/world-rules", "magic at night", "impossible", 0, category="world")]
    )
    broken = "Under the night sky, Mei wove magic into the river."
    findings = check_claims(store, book, extract_claims(store, book, broken, 4), 4)
    assert [(f.dimension, f.category, f.expected, f.found) for f in findings] == [
        ("world-rules", "world", "impossible", "possible")
    ]
    kept = "Mei knew magic would not answer at night."
    assert check_claims(store, book, extract_claims(store, book, kept, 4), 4) == []


def test_perspective_shift_is_found_outside_dialogue(store: BookStore) -> None:
    book = book_with_chapters(store, 3)
    characters(store, book)
    store.write_level(book, "/meta/style-guide", "L2", "Narrated in the third person, past tense.")
    first = "I walked to the gate. My hands shook as I opened it. Mei waited for me."
    findings = check_claims(store, book, extract_claims(store, book, first, 3), 3)
    assert [(f.dimension, f.expected, f.found) for f in findings] == [
        ("perspective", "third person", "first person")
    ]
    dialogue = 'Mei turned to him. "I am done, and my mind is made up," she said. He nodded.'
    assert extract_claims(store, book, dialogue, 3) == []


def test_evaluate_retries_then_flags_and_approves_when_quiet(store: BookStore) -> None:
    book = book_with_chapters(store, 3)
    characters(store, book)
    store.add_facts(book, [fact(LIN, "hair", "black", 1)])
    findings = check_claims(store, book, [Claim(LIN, "hair", "blond", "factual", "x")], 3)
    retry = evaluate(findings, attempt=0, max_retries=2)
    assert retry.decision == "retry"
    by_dimension = {c.dimension: c.passed for c in retry.checks}
    assert by_dimension == {
        "timeline": True,
        "character-state": False,
        "world-rules": True,
        "callbacks": True,
        "perspective": True,
    }
    # The reason and each finding as a term and values too, for a page to say them.
    assert retry.reason_note is not None
    assert (retry.reason_note.term, retry.reason_note.values) == (
        "contradictions",
        {"count": 1, "dimensions": ["character-state"]},
    )
    [failed] = [c for c in retry.checks if not c.passed]
    assert [(n.term, n.values) for n in failed.findings] == [
        (
            "contradiction",
            {
                "name": "Lin Feng",
                "attribute": "hair",
                "expected": "black",
                "found": "blond",
                "since": 1,
                "earlierValue": None,
                "earlierUntil": None,
            },
        )
    ]
    assert evaluate(findings, attempt=2, max_retries=2).decision == "flag-human"
    approve = evaluate([], attempt=0, max_retries=2)
    assert (approve.decision, approve.confidence) == ("approve", 1.0)
    from dataclasses import replace

    quiet = [replace(f, intentional=True) for f in findings]
    approved = evaluate(quiet, attempt=0, max_retries=2)
    assert approved.decision == "approve"
    assert approved.reason_note is not None
    assert (approved.reason_note.term, approved.reason_note.values) == ("consistent", {"quiet": 1})
    feedback = findings_as_feedback(findings)
    assert "blond" in feedback and "black" in feedback


@pytest.fixture
def llm() -> Iterator[ReplayLLMServer]:
    with ReplayLLMServer(models=["agent-model"]) as server:
        yield server


def agent(llm: ReplayLLMServer) -> ChatEndpoint:
    return ChatEndpoint.model_validate(
        {"base_url": llm.url, "model": "agent-model", "max_retries": 0}
    )


async def test_agent_claims_resolve_names_and_are_checked(
    store: BookStore, llm: ReplayLLMServer
) -> None:
    book = book_with_chapters(store, 4)
    characters(store, book)
    store.add_facts(book, [fact(LIN, "hair", "black", 1)])
    answer = {
        "claims": [
            {"subject": "Feng", "attribute": "hair", "value": "white", "evidence": "..."},
            {"subject": "Nobody", "attribute": "hair", "value": "red"},
        ]
    }
    llm.script(Reply(text="Here you go:\n```json\n" + json.dumps(answer) + "\n```"))
    claims = await claims_by_agent(agent(llm), store, book, "Feng's hair was white.", 4)
    assert claims == [Claim(LIN, "hair", "white", "factual", "...")]
    assert [f.found for f in check_claims(store, book, claims, 4)] == ["white"]
    assert "hair=black" in llm.chat_requests[-1]["messages"][1]["content"]


async def test_malformed_agent_claims_raise_naming_the_problem(
    store: BookStore, llm: ReplayLLMServer
) -> None:
    book = book_with_chapters(store, 2)
    # Each is told back to the model once; the same answer again is the error.
    missing_fields = Reply(text='{"claims": [{"subject": "Lin Feng"}]}')
    llm.script(missing_fields, missing_fields, Reply(text="no json here"), Reply(text="none"))
    with pytest.raises(MonitorError) as missing:
        await claims_by_agent(agent(llm), store, book, "text", 2)
    assert "claims[0].attribute" in str(missing.value)
    with pytest.raises(MonitorError) as garbage:
        await claims_by_agent(agent(llm), store, book, "text", 2)
    assert "no JSON object" in str(garbage.value)


def test_a_common_colour_the_book_never_used_is_still_read_before_the_attribute(
    store: BookStore,
) -> None:
    book = book_with_chapters(store, 5)
    characters(store, book)
    store.add_facts(book, [fact(LIN, "eyes", "green", 1), fact(MEI, "hair", "black", 1)])
    claims = extract_claims(store, book, "Lin Feng's blue eyes narrowed.", 5)
    assert [(c.subject, c.attribute, c.value) for c in claims] == [(LIN, "eyes", "blue")]
    (finding,) = check_claims(store, book, claims, 5)
    assert (finding.expected, finding.found) == ("green", "blue")
    # A colour elsewhere in the sentence says nothing about the eyes.
    sea = "Lin Feng watched the blue sea with tired eyes."
    assert extract_claims(store, book, sea, 5) == []
    assert extract_claims(store, book, "林枫蓝色的眼睛眯了起来。", 5)[0].value == "蓝色"
