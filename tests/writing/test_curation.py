"""Curation: kept text stored at once, then summarized, extracted, profiled, indexed and
checked in the background; idempotent, resumable, retryable."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from storyloom.core.settings import ChatEndpoint, EmbeddingEndpoint
from storyloom.knowledge.vector_index import missing_vectors
from storyloom.llm.embeddings import EmbeddingProvider, embedding_provider
from storyloom.store.database import Database
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.writing.book_store import BookStore, Fact, index_id
from storyloom.writing.curation import (
    STEPS,
    CurationEvent,
    CurationProgress,
    Curator,
    OutputChecked,
    ProfileUpdated,
    embeddable,
)

LIN = "/entities/characters/lin-feng"
MEI = "/entities/characters/mei"
LIN_PROFILE = "/profiles/characters/lin-feng"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[BookStore]:
    database = Database(tmp_path / "storyloom.sqlite3")
    yield BookStore(database)
    database.close()


@pytest.fixture
def llm() -> Iterator[ReplayLLMServer]:
    with ReplayLLMServer(models=["agent-model", "embed-model"]) as server:
        yield server


def new_book(store: BookStore, chapters: int) -> str:
    book = store.create_book("The Long Road", book_id="bk_cur")
    for n in range(1, chapters + 1):
        store.add_chapter(book.id, f"Chapter {n}", text=f"Chapter {n}: the road goes on.")
    store.put_resource(
        book.id, LIN, kind="character", title="Lin Feng", aliases=["Lin Feng", "林枫"]
    )
    store.put_resource(book.id, MEI, kind="character", title="Mei", aliases=["Mei"])
    store.add_facts(
        book.id,
        [
            Fact(LIN, "hair", "black", 1, "factual"),
            Fact(MEI, "hair", "silver", 1, "factual"),
        ],
    )
    return book.id


# Without an agent model, summarize and extract do what they can and say what is missing.
OFFLINE_STEPS = {**dict.fromkeys(STEPS, "done"), "summarize": "skipped", "extract": "skipped"}


def offline(store: BookStore, events: list[CurationEvent] | None = None) -> Curator:
    sink = events if events is not None else []
    return Curator(store, agent_endpoint=lambda: None, publish=sink.append)


def with_agent(
    store: BookStore,
    llm: ReplayLLMServer,
    events: list[CurationEvent] | None = None,
    embeddings: EmbeddingProvider | None = None,
) -> Curator:
    endpoint = ChatEndpoint.model_validate(
        {"base_url": llm.url, "model": "agent-model", "max_retries": 0}
    )
    sink = events if events is not None else []
    return Curator(
        store,
        agent_endpoint=lambda: endpoint,
        embeddings=(lambda: embeddings) if embeddings is not None else None,
        publish=sink.append,
    )


def level_rows(store: BookStore, book_id: str) -> int:
    row = (
        store.database.connection()
        .execute("SELECT COUNT(*) FROM writing_level WHERE book_id = ?", (book_id,))
        .fetchone()
    )
    assert row is not None
    return int(row[0])


def memory_counts(store: BookStore, book_id: str) -> tuple[int, int, int]:
    return (level_rows(store, book_id), len(store.facts(book_id)), len(store.relations(book_id)))


def test_persisting_same_output_twice_is_a_no_op(store: BookStore) -> None:
    book = new_book(store, 3)
    curator = offline(store)
    first = curator.persist(book, chapter=3, text="Lin Feng rode north.", run_id="r1", node_id="n")
    assert first.created and first.output_id.startswith("out_")
    rows = level_rows(store, book)
    again = curator.persist(book, chapter=3, text="Lin Feng rode north.", run_id="r2")
    assert (again.output_id, again.created) == (first.output_id, False)
    assert level_rows(store, book) == rows
    [status] = curator.outputs(book)
    assert status.steps == dict.fromkeys(STEPS, "pending")
    assert status.run_id == "r1"
    chapter_text = store.level(book, store.chapter(book, 3).path, "L2")
    assert chapter_text is not None and chapter_text.text == "Lin Feng rode north."
    assert chapter_text.source == f"curation:{first.output_id}"
    # The next chapter is made on demand; a gap is refused.
    assert curator.persist(book, chapter=4, text="Mei waited.").created
    with pytest.raises(Exception, match="not next"):
        curator.persist(book, chapter=9, text="Too far.")


async def test_steps_run_in_order_and_profiles_follow_facts_as_of_each_chapter(
    store: BookStore,
) -> None:
    book = new_book(store, 129)
    events: list[CurationEvent] = []
    curator = offline(store, events)
    for chapter, text in (
        (40, "Lin Feng ate rice with Mei."),
        (120, "That night Lin Feng dyed his hair silver."),
        (130, "Lin Feng walked on alone."),
    ):
        persisted = curator.persist(book, chapter=chapter, text=text)
        await curator.process(persisted.output_id)
        assert curator.status(persisted.output_id).steps == OFFLINE_STEPS
    progress = [(e.step, e.state) for e in events if isinstance(e, CurationProgress)][:10]
    assert progress == [(s, state) for s in STEPS for state in ("running", OFFLINE_STEPS[s])]
    kinds = [type(e).__name__ for e in events if not isinstance(e, CurationProgress)][:2]
    assert kinds == ["ProfileUpdated", "OutputChecked"]
    updated = next(e for e in events if isinstance(e, ProfileUpdated))
    assert {p.name for p in updated.profiles} == {"Lin Feng", "Mei"}

    as_of_40 = store.level(book, LIN_PROFILE, "L1", before_chapter=41)
    as_of_130 = store.level(book, LIN_PROFILE, "L1", before_chapter=131)
    assert as_of_40 is not None and "hair: black" in as_of_40.text
    assert as_of_130 is not None and "hair: silver (since ch. 120)" in as_of_130.text
    assert [(f.value, f.chapter) for f in store.facts(book, subject=LIN)] == [
        ("black", 1),
        ("silver", 120),
    ]
    profile = store.resource(book, LIN_PROFILE)
    assert profile.attrs == {"profileType": "characters", "subject": LIN}
    chapter_120 = store.chapter(book, 120).path
    assert (chapter_120, LIN, "涉及") in {
        (r.from_path, r.to_path, r.kind) for r in store.relations(book)
    }
    l0 = store.level(book, chapter_120, "L0")
    assert l0 is not None and "dyed his hair silver" in l0.text
    arc = store.level(book, "/summaries/arc-01", "L1")
    assert arc is not None and "ch. 130" in arc.text
    assert store.level(book, "/summaries/full-work", "L0") is not None
    assert {h.path for h in store.search(book, "dyed", under="/manuscript")} == {chapter_120}
    # The legal progression raised nothing.
    assert curator.warnings(book) == []


async def test_agent_summary_and_extraction_become_memory(
    store: BookStore, llm: ReplayLLMServer
) -> None:
    book = new_book(store, 4)
    curator = with_agent(store, llm)
    llm.script(
        Reply(text=json.dumps({"l0": "Lin Feng meets Old Wu.", "l1": "- Old Wu appears"})),
        Reply(
            text="```json\n"
            + json.dumps(
                {
                    "facts": [
                        {"subject": "Old Wu", "attribute": "role", "value": "smith"},
                        {"subject": "Lin Feng", "attribute": "weapon", "value": "jade sword"},
                    ],
                    "entities": [
                        {
                            "path": "/entities/characters/old-wu",
                            "title": "Old Wu",
                            "aliases": ["Wu"],
                        }
                    ],
                    "relations": [{"from": "Lin Feng", "to": "Old Wu", "kind": "关联"}],
                    "threads": [{"path": "/entities/plot-threads/jade-sword", "due": 9}],
                }
            )
            + "\n```"
        ),
    )
    persisted = curator.persist(book, chapter=4, text="Lin Feng met Old Wu at the forge.")
    await curator.process(persisted.output_id)
    assert curator.status(persisted.output_id).steps == dict.fromkeys(STEPS, "done")
    chapter = store.chapter(book, 4).path
    l0 = store.level(book, chapter, "L0")
    assert l0 is not None and (l0.text, l0.source) == ("Lin Feng meets Old Wu.", "agent")
    wu = store.resource(book, "/entities/characters/old-wu")
    assert (wu.aliases, wu.chapter_from) == (("Wu",), 4)
    thread = store.resource(book, "/entities/plot-threads/jade-sword")
    assert thread.attrs == {"planted": 4, "due": 9}
    wu_profile = store.level(book, "/profiles/characters/old-wu", "L1")
    assert wu_profile is not None and "role: smith" in wu_profile.text
    assert (LIN, "/entities/characters/old-wu", "关联") in {
        (r.from_path, r.to_path, r.kind) for r in store.relations(book)
    }
    assert len(llm.chat_requests) == 2


async def test_malformed_extraction_fails_the_step_leaves_memory_untouched_and_retry_works(
    store: BookStore, llm: ReplayLLMServer
) -> None:
    book = new_book(store, 4)
    events: list[CurationEvent] = []
    curator = with_agent(store, llm, events)
    malformed = Reply(text='{"facts": [{"subject": "Lin Feng", "value": "tall"}]}')
    # The model is told what was wrong once; the same mistake again fails the step.
    llm.script(Reply(text=json.dumps({"l0": "Lin Feng waits.", "l1": "- waiting"})), malformed)
    llm.script(malformed)
    persisted = curator.persist(book, chapter=4, text="Lin Feng waited by the well.")
    before = memory_counts(store, book)
    await curator.process(persisted.output_id)
    status = curator.status(persisted.output_id)
    assert status.steps == {
        "summarize": "done",
        "extract": "failed",
        "profiles": "pending",
        "index": "pending",
        "check": "pending",
    }
    assert status.error is not None and status.error.startswith("extract: ")
    assert "facts[0].attribute" in status.error
    levels, facts, relations = memory_counts(store, book)
    assert (facts, relations) == before[1:] and levels == before[0] + 2  # only L0 and L1
    assert store.level(book, LIN_PROFILE, "L1") is None
    failed = [e for e in events if isinstance(e, CurationProgress) and e.state == "failed"]
    assert [e.step for e in failed] == ["extract"]
    told = llm.chat_requests[2]["messages"][-1]["content"]
    assert "facts[0].attribute: Field required" in told

    llm.script(Reply(text=json.dumps({"facts": [{"subject": "Lin Feng", "attribute": "height",
                                                 "value": "tall"}]})))  # fmt: skip
    await curator.retry(persisted.output_id)
    assert curator.status(persisted.output_id).steps == dict.fromkeys(STEPS, "done")
    assert curator.status(persisted.output_id).error is None
    profile = store.level(book, LIN_PROFILE, "L1")
    assert profile is not None and "height: tall" in profile.text


async def test_unreachable_agent_fails_summarize_and_later_steps_wait(
    store: BookStore, llm: ReplayLLMServer
) -> None:
    book = new_book(store, 2)
    curator = with_agent(store, llm)
    llm.script(Reply(status=500))
    persisted = curator.persist(book, chapter=2, text="Mei slept.")
    await curator.process(persisted.output_id)
    status = curator.status(persisted.output_id)
    assert status.steps["summarize"] == "failed" and status.steps["extract"] == "pending"
    assert status.error is not None and status.error.startswith("summarize: ")
    # Server start does not retry failed outputs on its own.
    assert await curator.resume() == []


async def test_crash_after_two_steps_resumes_without_duplicates(store: BookStore) -> None:
    book = new_book(store, 5)
    curator = offline(store)
    persisted = curator.persist(book, chapter=5, text="That night Lin Feng dyed his hair silver.")
    await curator.process(persisted.output_id, until="extract")
    assert curator.status(persisted.output_id).steps["profiles"] == "pending"
    # A worker died inside the profiles step: its mark says running, nothing was committed.
    with store.database.transaction() as tx:
        tx.execute(
            "UPDATE writing_curation_step SET state = 'running' WHERE output_id = ? AND step = ?",
            (persisted.output_id, "profiles"),
        )
    restarted = offline(store)
    assert await restarted.resume() == [persisted.output_id]
    assert restarted.status(persisted.output_id).steps == OFFLINE_STEPS
    after = memory_counts(store, book)
    history = store.level_history(book, LIN_PROFILE)
    assert sorted(t.level for t in history) == ["L0", "L1", "L2"]
    assert [(f.value, f.chapter) for f in store.facts(book, subject=LIN)] == [
        ("black", 1),
        ("silver", 5),
    ]
    # Everything again (resume, process, persist) changes nothing.
    assert await restarted.resume() == []
    await restarted.process(persisted.output_id)
    assert not restarted.persist(
        book, chapter=5, text="That night Lin Feng dyed his hair silver."
    ).created
    assert memory_counts(store, book) == after


async def test_contradiction_warns_and_stays_quiet_once_marked_intentional(
    store: BookStore,
) -> None:
    book = new_book(store, 3)
    events: list[CurationEvent] = []
    curator = offline(store, events)
    first = curator.persist(book, chapter=3, text="Lin Feng shook out his silver hair.")
    await curator.process(first.output_id)
    [warning] = curator.warnings(book, chapter=3)
    assert (warning.dimension, warning.category, warning.intentional) == (
        "character-state",
        "factual",
        False,
    )
    assert "black" in warning.detail and "silver" in warning.detail
    # The frame and its values beside the English words, for a page to say in its language.
    said = (warning.kind, warning.subject_name, warning.attribute, warning.expected, warning.found)
    assert said == ("contradiction", "Lin Feng", "hair", "black", "silver")
    assert (warning.earlier_value, warning.earlier_until) == (None, None)
    assert warning.evidence_uri == store.chapter(book, 1).uri
    checked = [e for e in events if isinstance(e, OutputChecked)]
    assert [w.id for w in checked[-1].warnings] == [warning.id]
    by_dimension = {c.dimension: c.passed for c in checked[-1].consistency_checks}
    assert by_dimension["character-state"] is False
    wire: dict[str, Any] = checked[-1].model_dump(mode="json")
    assert wire["type"] == "output:checked" and "consistencyChecks" in wire
    # Nothing contradicting became memory.
    assert [f.value for f in store.facts(book, subject=LIN)] == ["black"]

    assert curator.mark_intentional(warning.id).intentional
    second = curator.persist(book, chapter=3, text="Lin Feng shook out his silver hair again.")
    await curator.process(second.output_id)
    assert curator.warnings(book, include_intentional=False) == []
    [kept] = curator.warnings(book)
    assert (kept.id, kept.intentional) == (warning.id, True)
    last = [e for e in events if isinstance(e, OutputChecked)][-1]
    assert last.warnings == [] and all(c.passed for c in last.consistency_checks)


async def test_fixed_text_clears_its_warning(store: BookStore) -> None:
    book = new_book(store, 3)
    curator = offline(store)
    wrong = curator.persist(book, chapter=3, text="Lin Feng shook out his silver hair.")
    await curator.process(wrong.output_id)
    assert len(curator.warnings(book)) == 1
    fixed = curator.persist(book, chapter=3, text="Lin Feng shook out his black hair.")
    await curator.process(fixed.output_id)
    assert curator.warnings(book) == []


async def test_index_step_embeds_each_new_one_line_summary_once(
    store: BookStore, llm: ReplayLLMServer
) -> None:
    book = new_book(store, 2)
    provider = embedding_provider(
        EmbeddingEndpoint(provider="openai", base_url=llm.url, model="embed-model")
    )
    llm.script(
        Reply(text=json.dumps({"l0": "Mei sings.", "l1": "- Mei sings"})),
        Reply(text=json.dumps({"facts": []})),
    )
    curator = with_agent(store, llm, embeddings=provider)
    persisted = curator.persist(book, chapter=2, text="Mei sang to the river.")
    await curator.process(persisted.output_id)
    result = curator.step_result(persisted.output_id, "index")
    conn = store.database.connection()
    pending = missing_vectors(conn, index_id(book), provider.model_id)
    # Every L0 but the rolled-up summaries' has its vector; the longer levels and the
    # summaries are searched by keywords only.
    assert [p.entry_id for p in pending if embeddable(p.entry_id)] == []
    assert {p.entry_id for p in pending} >= {
        "/manuscript/arc-01/chapter-002#L2",
        "/manuscript/arc-01/chapter-002#L1",
        "/summaries/arc-01#L0",
    }
    embedded = result["vectors"]
    assert embedded > 0
    assert len(llm.embedding_requests) >= 1
    # Curating the next chapter embeds only what is new: its L0, not chapter 2's again.
    llm.script(
        Reply(text=json.dumps({"l0": "Mei rests.", "l1": "- Mei rests"})),
        Reply(text=json.dumps({"facts": []})),
    )
    following = curator.persist(book, chapter=3, text="Mei rested by the river.")
    await curator.process(following.output_id)
    assert curator.step_result(following.output_id, "index")["vectors"] == 1


def test_deleting_an_output_keeps_the_chapter_text(store: BookStore) -> None:
    book = new_book(store, 2)
    curator = offline(store)
    persisted = curator.persist(book, chapter=2, text="Mei sang.")
    curator.delete_output(persisted.output_id)
    assert curator.outputs(book) == []
    text = store.level(book, store.chapter(book, 2).path, "L2")
    assert text is not None and text.text == "Mei sang."


async def test_curating_an_earlier_chapter_later_reaches_the_later_profiles(
    store: BookStore, llm: ReplayLLMServer
) -> None:
    book = new_book(store, 5)
    curator = with_agent(store, llm)

    def extraction(attribute: str, value: str) -> Reply:
        fact = {"subject": "Lin Feng", "attribute": attribute, "value": value}
        return Reply(text=json.dumps({"facts": [fact]}))

    summary = Reply(text=json.dumps({"l0": "Lin Feng travels.", "l1": "- travels"}))
    llm.script(summary, extraction("weapon", "jade sword"))
    late = curator.persist(book, chapter=5, text="Lin Feng drew the jade sword.")
    await curator.process(late.output_id)
    # The author now rewrites chapter 2, where Lin Feng loses his left arm.
    llm.script(summary, extraction("left arm", "lost"))
    early = curator.persist(book, chapter=2, text="Lin Feng lost his left arm.")
    await curator.process(early.output_id)
    as_of_five = store.level(book, LIN_PROFILE, "L1", before_chapter=6)
    assert as_of_five is not None and as_of_five.as_of_chapter == 5
    assert "left arm: lost (since ch. 2)" in as_of_five.text
    assert "weapon: jade sword (since ch. 5)" in as_of_five.text
    as_of_three = store.level(book, LIN_PROFILE, "L1", before_chapter=4)
    assert as_of_three is not None and "jade sword" not in as_of_three.text


async def test_the_agent_and_the_prose_reader_are_merged_the_agent_winning_on_conflicts(
    store: BookStore, llm: ReplayLLMServer
) -> None:
    book = new_book(store, 4)
    curator = with_agent(store, llm)
    text = (
        "Lin Feng dyed his hair white and moved to Hangzhou. Mei had grey eyes. "
        "Lin Feng owed Mei forty crowns. Captain Ilse Varga watched them; Varga said nothing."
    )
    llm.script(
        Reply(text=json.dumps({"l0": "Lin Feng leaves.", "l1": "- Lin Feng moves"})),
        Reply(
            text=json.dumps(
                {
                    "facts": [
                        # The agent reads the hair as silver where the reader says white.
                        {
                            "subject": "Lin Feng",
                            "attribute": "hair",
                            "value": "silver",
                            "category": "characterization",
                            "change": True,
                        },
                        {"subject": "Mei", "attribute": "mood", "value": "wary"},
                    ],
                    "entities": [],
                    "relations": [],
                    "threads": [],
                }
            )
        ),
    )
    persisted = curator.persist(book, chapter=4, text=text)
    await curator.process(persisted.output_id)
    assert curator.status(persisted.output_id).steps == dict.fromkeys(STEPS, "done")
    assert curator.status(persisted.output_id).reasons == {}
    extraction = curator.step_result(persisted.output_id, "extract")
    assert extraction["source"] == "agent"
    facts = {(f["subject"], f["attribute"]): f["value"] for f in extraction["facts"]}
    assert facts[(LIN, "hair")] == "silver"  # the agent's, over the reader's "white"
    assert facts[(MEI, "mood")] == "wary"  # the agent's alone
    assert facts[(LIN, "home")] == "Hangzhou"  # the reader's alone
    assert facts[(MEI, "eyes")] == "grey"
    assert facts[(LIN, "owes")] == "forty crowns to Mei"
    # The reader found a person the agent did not name; she is in the book from chapter 4.
    varga = store.resource(book, "/entities/characters/ilse-varga")
    assert varga.chapter_from == 4
    assert set(varga.aliases) == {"Varga", "Captain Varga", "Captain Ilse Varga"}
    profile = store.level(book, LIN_PROFILE, "L1", before_chapter=5)
    assert profile is not None
    assert "- hair: silver (since ch. 4); before: black (ch. 1)" in profile.text
    assert "- home: Hangzhou (since ch. 4)" in profile.text
