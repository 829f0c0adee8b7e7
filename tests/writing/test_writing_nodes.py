"""The writing node types through the real runner, against the replay server (real HTTP,
real SSE) for the user model and the agent model, over a small book in a real database."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from storyloom.core.settings import Settings
from storyloom.plugins import node_registry
from storyloom.store.database import Database
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.workflow.events import (
    NodeCached,
    NodeCompleted,
    NodeIteration,
    NodeNeedsHuman,
    NodeStreaming,
    RunEvent,
)
from storyloom.workflow.node_type import HumanDecision, WorkflowServices
from storyloom.workflow.runner import RunResult, WorkflowRunner
from storyloom.workflow.workflow_file import Workflow
from storyloom.writing.book_store import BookStore, Fact
from storyloom.writing.context_assembly import ContextRequest, assemble_context
from storyloom.writing.writing_nodes import DRAFT_SYSTEM

REGISTRY = node_registry(entry_points=False)
BOOK = "bk_rain"
LIN = "/entities/characters/lin-feng"
BRIEF = "Lin Feng comes back to the city at night."
CLEAN = "Lin Feng pushed his black hair back and walked into the rain."
CONTRADICTION = "Lin Feng brushed his silver hair from his eyes and drew the sword."
INTENT = '{"entities": ["Lin Feng"], "sceneType": "any"}'
ANSWER_TIMEOUT_S = 30.0
"""Only a guard against a hung test; nothing depends on how long anything takes."""


@pytest.fixture
def store(db: Database) -> BookStore:
    return make_book(db)


def make_book(db: Database) -> BookStore:
    """Lin Feng has black hair as of chapter 1; Mei's silver hair puts "silver" in the
    book's hair vocabulary, so the offline reader recognises it as a hair colour."""
    store = BookStore(db)
    store.create_book("The Rain Sword", book_id=BOOK)
    store.write_level(BOOK, "/meta/outline", "L2", "Lin Feng seeks the sword that cut the rain.")
    store.put_resource(BOOK, LIN, kind="character", title="Lin Feng", aliases=("Feng",))
    store.write_level(BOOK, LIN, "L1", "Lin Feng: a young swordsman with black hair.")
    store.put_resource(BOOK, "/entities/characters/mei", kind="character", title="Mei")
    store.add_chapter(
        BOOK,
        "The Rain",
        text="Lin Feng, his black hair soaked, met Mei. Mei's silver hair shone in the rain.",
    )
    store.add_facts(
        BOOK,
        [
            Fact(LIN, "hair", "black", 1, "characterization"),
            Fact("/entities/characters/mei", "hair", "silver", 1, "characterization"),
        ],
    )
    return store


def settings_for(llm: ReplayLLMServer, agent: ReplayLLMServer | None = None) -> Settings:
    data: dict[str, Any] = {
        "user_llm": {"base_url": llm.url, "model": "user-model", "max_retries": 0}
    }
    if agent is not None:
        data["agent_llm"] = {"base_url": agent.url, "model": "agent-model", "max_retries": 0}
    else:
        # No agent model would mean the user's model plans and checks too: here the
        # writing agent's connection has no address (as one whose local model does not
        # run), so Role A and Role C work offline and the user model only drafts.
        data["connections"] = {"offline": {}}
        data["writing"] = {"agent_connection": "offline"}
    return Settings.model_validate(data)


def runner_for(
    db: Database | None, llm: ReplayLLMServer, agent: ReplayLLMServer | None = None
) -> WorkflowRunner:
    settings = settings_for(llm, agent)
    return WorkflowRunner(REGISTRY, WorkflowServices(settings=lambda: settings, database=db))


def one_node(node_type: str, **config: Any) -> Workflow:
    return Workflow.model_validate(
        {"id": "one", "nodes": [{"id": "node", "type": node_type, "config": config}]}
    )


def draft(**config: Any) -> Workflow:
    return one_node("writing:Draft", book=BOOK, chapter=2, prompt=BRIEF, **config)


async def run_answering(
    runner: WorkflowRunner,
    workflow: Workflow,
    answers: Sequence[HumanDecision] = (),
    inputs: dict[str, Any] | None = None,
) -> tuple[RunResult, list[RunEvent]]:
    """Run ``workflow``, answering each ``node:needs-human`` in turn as a browser would."""
    events: list[RunEvent] = []
    questions: asyncio.Queue[NodeNeedsHuman] = asyncio.Queue()

    def on_event(event: RunEvent) -> None:
        events.append(event)
        if isinstance(event, NodeNeedsHuman):
            questions.put_nowait(event)

    run = runner.start(workflow, inputs=inputs, on_event=on_event)
    waiting = asyncio.ensure_future(run.wait())
    for answer in answers:
        asked = asyncio.ensure_future(questions.get())
        await asyncio.wait(
            {waiting, asked}, timeout=ANSWER_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED
        )
        if not asked.done():
            asked.cancel()
            break
        assert run.decide(asked.result().node_id, answer)
    result = await asyncio.wait_for(waiting, ANSWER_TIMEOUT_S)
    return result, events


def completed(events: list[RunEvent], node_id: str = "node") -> NodeCompleted:
    [event] = [e for e in events if isinstance(e, NodeCompleted) and e.node_id == node_id]
    return event


def user_message(request: dict[str, Any]) -> str:
    return str(request["messages"][-1]["content"])


def system_message(request: dict[str, Any]) -> str:
    first = request["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


async def test_draft_streams_with_the_book_context_and_reports_sources_and_evaluation(
    db: Database, store: BookStore, llm: ReplayLLMServer
) -> None:
    llm.script(Reply(text=CLEAN, chunk_delay_s=0.01))
    result, events = await run_answering(runner_for(db, llm), draft())

    assert result.status == "completed", result.errors
    streamed = "".join(e.chunk for e in events if isinstance(e, NodeStreaming))
    assert streamed == CLEAN
    assert result.outputs["node"]["text"] == CLEAN
    done = completed(events)
    assert done.evaluation is not None and done.evaluation.decision == "approve"
    assert result.outputs["node"]["evaluation"]["decision"] == "approve"
    expected = assemble_context(store, ContextRequest(book_id=BOOK, chapter=2, prompt=BRIEF))
    assert done.context_sources == expected.sources()
    assert done.context_sources and all(s.version is not None for s in done.context_sources)
    assert all(s.uri.startswith(f"viking://resources/{BOOK}/") for s in done.context_sources)
    [request] = llm.chat_requests
    # Three layers: Role A's context first, then the node's system text; the brief is
    # the user message.
    system = system_message(request)
    assert system.endswith(DRAFT_SYSTEM)
    assert "Lin Feng seeks the sword that cut the rain." in system
    assert BRIEF in user_message(request)


async def test_a_planted_contradiction_is_retried_with_the_findings_then_flagged(
    db: Database, store: BookStore, llm: ReplayLLMServer
) -> None:
    llm.script(CONTRADICTION, CONTRADICTION)
    result, events = await run_answering(
        runner_for(db, llm), draft(max_retries=1), [HumanDecision(decision="approve")]
    )

    assert result.status == "completed", result.errors
    first, second = llm.chat_requests
    assert "silver" not in user_message(first)
    feedback = user_message(second)
    assert feedback.startswith(user_message(first))
    assert "contradicts facts established" in feedback
    assert "“black”" in feedback and "“silver”" in feedback
    assert [(e.iteration, e.total_iterations) for e in events if isinstance(e, NodeIteration)] == [
        (2, 2)
    ]
    [question] = [e for e in events if isinstance(e, NodeNeedsHuman)]
    assert question.options == ["approve", "retry", "edit"]
    assert question.output_preview == CONTRADICTION
    assert "hair" in question.reason
    done = completed(events)
    assert done.evaluation is not None and done.evaluation.decision == "flag-human"
    assert result.outputs["node"]["text"] == CONTRADICTION


async def test_the_author_can_edit_a_flagged_draft(
    db: Database, store: BookStore, llm: ReplayLLMServer
) -> None:
    llm.script(CONTRADICTION)
    edited = "Lin Feng, black hair dripping, drew the sword."
    result, _ = await run_answering(
        runner_for(db, llm),
        draft(max_retries=0),
        [HumanDecision(decision="edit", edited_output=edited)],
    )
    assert result.status == "completed", result.errors
    assert result.outputs["node"]["text"] == edited
    assert len(llm.chat_requests) == 1


async def test_a_human_retry_writes_the_draft_once_more_with_the_findings(
    db: Database, store: BookStore, llm: ReplayLLMServer
) -> None:
    llm.script(CONTRADICTION, CLEAN)
    result, events = await run_answering(
        runner_for(db, llm), draft(max_retries=0), [HumanDecision(decision="retry")]
    )
    assert result.status == "completed", result.errors
    assert result.outputs["node"]["text"] == CLEAN
    assert result.outputs["node"]["evaluation"]["decision"] == "approve"
    assert "contradicts facts established" in user_message(llm.chat_requests[1])
    assert len([e for e in events if isinstance(e, NodeNeedsHuman)]) == 1


async def test_the_same_book_state_is_cached_and_a_new_state_version_reruns(
    db: Database, store: BookStore, llm: ReplayLLMServer
) -> None:
    runner = runner_for(db, llm)
    llm.script(CLEAN, "Lin Feng walked on.")
    first, _ = await run_answering(runner, draft())
    again, events = await run_answering(runner, draft())
    assert again.outputs["node"]["text"] == first.outputs["node"]["text"] == CLEAN
    assert any(isinstance(e, NodeCached) and e.node_id == "node" for e in events)
    assert len(llm.chat_requests) == 1

    store.write_level(BOOK, "/meta/style-guide", "L2", "Short sentences.")
    changed, events = await run_answering(runner, draft())
    assert changed.outputs["node"]["text"] == "Lin Feng walked on."
    assert not any(isinstance(e, NodeCached) for e in events)
    assert len(llm.chat_requests) == 2


async def test_a_stream_cut_midway_fails_the_draft_after_streaming_what_came(
    db: Database, store: BookStore, llm: ReplayLLMServer
) -> None:
    llm.script(Reply(text="Lin Feng walked into the rain", cut_after_chunks=2))
    result, events = await run_answering(runner_for(db, llm), draft())
    assert result.status == "failed"
    assert "".join(e.chunk for e in events if isinstance(e, NodeStreaming)) == "Lin Feng "
    assert "cut off" in result.errors["node"]


async def test_more_drafts_than_one_let_the_author_pick_one(
    db: Database, store: BookStore, llm: ReplayLLMServer
) -> None:
    llm.script(CONTRADICTION, CLEAN)
    result, events = await run_answering(
        runner_for(db, llm), draft(drafts=2), [HumanDecision(decision="approve", choice=1)]
    )
    assert result.status == "completed", result.errors
    [question] = [e for e in events if isinstance(e, NodeNeedsHuman)]
    assert question.candidates == [CONTRADICTION, CLEAN]
    assert "#0 flag-human" in question.reason and "#1 approve" in question.reason
    assert result.outputs["node"]["text"] == CLEAN
    assert result.outputs["node"]["evaluation"]["decision"] == "approve"


async def test_role_c_reads_the_draft_with_the_agent_model_when_one_is_set(
    db: Database, store: BookStore, llm: ReplayLLMServer, agent: ReplayLLMServer
) -> None:
    llm.script("Feng stood in the rain.")
    agent.script(
        INTENT,
        '```json\n{"claims": [{"subject": "Lin Feng", "attribute": "hair", '
        '"value": "white", "category": "characterization", "evidence": "x"}]}\n```',
    )
    result, _ = await run_answering(
        runner_for(db, llm, agent), draft(max_retries=0), [HumanDecision(decision="approve")]
    )
    assert result.status == "completed", result.errors
    assert result.outputs["node"]["evaluation"]["decision"] == "flag-human"
    assert "Feng stood in the rain." in user_message(agent.chat_requests[1])


async def test_the_agent_names_the_scenes_entities_for_role_a(
    db: Database, store: BookStore, llm: ReplayLLMServer, agent: ReplayLLMServer
) -> None:
    llm.script("Rain.")
    # The brief names nobody; the agent says who the scene is about.
    agent.script(INTENT, '{"claims": []}')
    workflow = one_node(
        "writing:Draft", book=BOOK, chapter=2, prompt="The swordsman waits.", max_retries=0
    )
    result, events = await run_answering(runner_for(db, llm, agent), workflow)
    assert result.status == "completed", result.errors
    assert "The book's entities so far" in user_message(agent.chat_requests[0])
    reasons = [s.reason for s in completed(events).context_sources]
    assert any(r == "Lin Feng is in the scene (intent analysis)" for r in reasons), reasons


async def test_with_no_agent_model_the_user_model_plans_and_checks_the_draft(
    db: Database, store: BookStore, llm: ReplayLLMServer
) -> None:
    # A day-one user: one model. It names the scene's entities, writes, then reads claims.
    llm.script(
        INTENT,
        "Feng stood in the rain.",
        '{"claims": [{"subject": "Lin Feng", "attribute": "hair", "value": "white", '
        '"category": "characterization", "evidence": "x"}]}',
    )
    settings = Settings.model_validate(
        {"user_llm": {"base_url": llm.url, "model": "user-model", "max_retries": 0}}
    )
    runner = WorkflowRunner(REGISTRY, WorkflowServices(settings=lambda: settings, database=db))
    result, _ = await run_answering(
        runner, draft(max_retries=0), [HumanDecision(decision="approve")]
    )
    assert result.status == "completed", result.errors
    assert [r["model"] for r in llm.chat_requests] == ["user-model"] * 3
    assert "The book's entities so far" in user_message(llm.chat_requests[0])
    assert "Feng stood in the rain." in user_message(llm.chat_requests[2])
    assert result.outputs["node"]["evaluation"]["decision"] == "flag-human"


async def test_an_unusable_agent_answer_falls_back_to_the_offline_reader(
    db: Database, store: BookStore, llm: ReplayLLMServer, agent: ReplayLLMServer
) -> None:
    llm.script(CONTRADICTION)
    # Intent and claims: each unusable answer is told back once, then given up on.
    agent.script("I cannot tell who is in it.", "Still cannot.", "It is fine.", "Fine.")
    result, events = await run_answering(
        runner_for(db, llm, agent), draft(max_retries=0), [HumanDecision(decision="approve")]
    )
    assert result.status == "completed", result.errors
    assert len(agent.chat_requests) == 4
    assert completed(events).evaluation is not None
    assert result.outputs["node"]["evaluation"]["decision"] == "flag-human"


async def test_the_context_node_gives_role_a_context_with_its_sources(
    db: Database, store: BookStore, llm: ReplayLLMServer
) -> None:
    workflow = one_node("writing:Context", book=BOOK, prompt=BRIEF, budget_tokens=2000)
    result, events = await run_answering(runner_for(db, llm), workflow)
    assert result.status == "completed", result.errors
    # No chapter given: the next one (2) is written.
    expected = assemble_context(
        store, ContextRequest(book_id=BOOK, chapter=2, prompt=BRIEF, budget_tokens=2000)
    )
    outputs = result.outputs["node"]
    assert outputs["context"] == expected.text
    assert outputs["tokens"] == expected.tokens <= 2000
    assert outputs["sources"] == [
        s.model_dump(mode="json", exclude_none=True) for s in expected.sources()
    ]
    assert completed(events).context_sources == expected.sources()
    assert llm.chat_requests == []


async def test_check_reports_findings_and_never_changes_the_text(
    db: Database, store: BookStore, llm: ReplayLLMServer
) -> None:
    workflow = Workflow.model_validate(
        {
            "id": "check",
            "nodes": [
                {"id": "in", "type": "core:GroupInput"},
                {"id": "node", "type": "writing:Check", "config": {"book": BOOK, "chapter": 2}},
            ],
            "edges": [
                {"source": "in", "sourceSlot": "text", "target": "node", "targetSlot": "text"}
            ],
            "interfaceInputs": {"text": {"dataFlowType": "STRING"}},
        }
    )
    result, events = await run_answering(
        runner_for(db, llm), workflow, inputs={"text": CONTRADICTION}
    )
    assert result.status == "completed", result.errors
    outputs = result.outputs["node"]
    assert set(outputs) == {"evaluation", "findings"}
    [finding] = outputs["findings"]
    assert (finding["subject"], finding["attribute"]) == (LIN, "hair")
    assert (finding["expected"], finding["found"]) == ("black", "silver")
    assert outputs["evaluation"]["decision"] == "flag-human"
    evaluation = completed(events).evaluation
    assert evaluation is not None and evaluation.decision == "flag-human"
    assert llm.chat_requests == []


async def test_revise_fixes_the_findings_with_the_book_context(
    db: Database, store: BookStore, llm: ReplayLLMServer
) -> None:
    finding = {
        "subject": LIN,
        "attribute": "hair",
        "expected": "black",
        "found": "silver",
        "since_chapter": 1,
    }
    workflow = Workflow.model_validate(
        {
            "id": "revise",
            "nodes": [
                {"id": "in", "type": "core:GroupInput"},
                {"id": "node", "type": "writing:Revise", "config": {"book": BOOK, "chapter": 2}},
            ],
            "edges": [
                {"source": "in", "sourceSlot": "text", "target": "node", "targetSlot": "text"},
                {
                    "source": "in",
                    "sourceSlot": "findings",
                    "target": "node",
                    "targetSlot": "findings",
                },
            ],
            "interfaceInputs": {
                "text": {"dataFlowType": "STRING"},
                "findings": {"dataFlowType": "ARRAY"},
            },
        }
    )
    llm.script(CLEAN)
    result, events = await run_answering(
        runner_for(db, llm), workflow, inputs={"text": CONTRADICTION, "findings": [finding]}
    )
    assert result.status == "completed", result.errors
    assert result.outputs["node"]["text"] == CLEAN
    [request] = llm.chat_requests
    user = user_message(request)
    assert "'black'" in user and "'silver'" in user and CONTRADICTION in user
    assert "Lin Feng seeks the sword" in system_message(request)
    assert completed(events).context_sources

    # Nothing to fix: the text passes on and no model is asked.
    unchanged, _ = await run_answering(
        runner_for(db, llm), workflow, inputs={"text": CLEAN, "findings": []}
    )
    assert unchanged.outputs["node"]["text"] == CLEAN
    assert len(llm.chat_requests) == 1


async def test_writing_nodes_without_a_database_say_so(llm: ReplayLLMServer) -> None:
    result, _ = await run_answering(runner_for(None, llm), draft())
    assert result.status == "failed"
    assert result.errors["node"].startswith("Unavailable")
    assert "database" in result.errors["node"]


async def test_a_missing_book_fails_with_not_found(
    db: Database, store: BookStore, llm: ReplayLLMServer
) -> None:
    result, _ = await run_answering(
        runner_for(db, llm), one_node("writing:Context", book="bk_none")
    )
    assert result.status == "failed"
    assert "bk_none" in result.errors["node"]


async def test_the_writing_settings_connections_write_and_check_instead_of_the_roles(
    db: Database, store: BookStore, llm: ReplayLLMServer, agent: ReplayLLMServer
) -> None:
    """Settings → Writing picks a connection per role: the draft goes to the user
    connection and Role C's reading to the agent connection; the roles' models (here
    servers that refuse every model) are not asked."""
    with ReplayLLMServer(models=["nobody"]) as unused:
        settings = Settings.model_validate(
            {
                "user_llm": {"base_url": unused.url, "model": "x", "max_retries": 0},
                "agent_llm": {"base_url": unused.url, "model": "x", "max_retries": 0},
                "connections": {
                    "Writer": {"base_url": llm.url, "model": "user-model", "max_retries": 0},
                    "Editor": {"base_url": agent.url, "model": "agent-model", "max_retries": 0},
                },
                "writing": {"user_connection": "Writer", "agent_connection": "Editor"},
            }
        )
        runner = WorkflowRunner(REGISTRY, WorkflowServices(settings=lambda: settings, database=db))
        llm.script(CLEAN)
        agent.script(INTENT, '{"claims": []}')
        result, _ = await run_answering(runner, draft(max_retries=0))
        assert result.status == "completed", result.errors
        assert result.outputs["node"]["text"] == CLEAN
        assert len(llm.chat_requests) == 1 and len(agent.chat_requests) == 2
        assert not unused.chat_requests

        gone = settings.model_copy(
            update={"writing": settings.writing.model_copy(update={"user_connection": "Gone"})}
        )
        runner = WorkflowRunner(REGISTRY, WorkflowServices(settings=lambda: gone, database=db))
        result, _ = await run_answering(runner, draft(max_retries=0))
        assert result.status == "failed"
        message = str(result.errors)
        assert "'Gone'" in message and "Settings → Writing (user connection)" in message
