"""The built-in chapter workflow: valid with the real node registry, written into a project
once and never over an author's copy, and run end to end against the scripted models."""

from __future__ import annotations

import json
from pathlib import Path

from storyloom.plugins import node_registry
from storyloom.server.workflow_service import ProjectWorkflows
from storyloom.store.database import Database
from storyloom.testing.replay_server import ReplayLLMServer
from storyloom.workflow.events import NodeCompleted, NodeNeedsHuman
from storyloom.workflow.node_type import HumanDecision
from storyloom.workflow.validation import validate_workflow
from storyloom.workflow.workflow_file import WorkflowLibrary
from storyloom.writing.chapter_workflow import (
    CHAPTER_WORKFLOW_ID,
    chapter_workflow,
    ensure_chapter_workflow,
)
from tests.writing.test_writing_nodes import BOOK, CLEAN, make_book, run_answering, runner_for

REGISTRY = node_registry(entry_points=False)


def test_the_chapter_workflow_validates_with_the_real_node_registry() -> None:
    workflow = chapter_workflow()
    assert validate_workflow(workflow, REGISTRY) == []
    assert workflow.id == CHAPTER_WORKFLOW_ID == "writing-chapter"
    assert workflow.name == "Write a chapter"
    ids = [n.id for n in workflow.nodes]
    assert ids == ["in", "plan", "draft", "check", "revise", "choose", "out"]
    assert set(workflow.interface_inputs) == {"book", "chapter", "brief"}
    assert set(workflow.interface_outputs) == {"text"}


def test_ensure_writes_the_workflow_once_and_keeps_the_authors_copy(tmp_path: Path) -> None:
    written = ensure_chapter_workflow(tmp_path)
    path = tmp_path / "workflows" / f"{CHAPTER_WORKFLOW_ID}.json"
    assert path.is_file()
    assert written.to_json() == chapter_workflow().to_json()

    data = json.loads(path.read_text(encoding="utf-8"))
    data["name"] = "My chapter flow"
    path.write_text(json.dumps(data), encoding="utf-8")
    kept = ensure_chapter_workflow(WorkflowLibrary(tmp_path))
    assert kept.name == "My chapter flow"
    assert json.loads(path.read_text(encoding="utf-8"))["name"] == "My chapter flow"


def test_ensure_writes_through_the_servers_library(tmp_path: Path) -> None:
    library = ProjectWorkflows(tmp_path)
    ensure_chapter_workflow(library)
    assert library.has_file(CHAPTER_WORKFLOW_ID)
    assert library.load(CHAPTER_WORKFLOW_ID).name == "Write a chapter"


async def test_the_chapter_workflow_runs_end_to_end_with_the_authors_approval(
    db: Database, llm: ReplayLLMServer, agent: ReplayLLMServer
) -> None:
    make_book(db)
    agent.script(
        "1. Lin Feng reaches the gate. 2. The rain stops.",  # plan
        '{"entities": ["Lin Feng"], "sceneType": "any"}',  # the draft's intent analysis
        '{"claims": []}',  # Role C inside the draft
        '{"claims": []}',  # the check node
    )
    llm.script(CLEAN)
    result, events = await run_answering(
        runner_for(db, llm, agent),
        chapter_workflow(),
        [HumanDecision(decision="approve")],
        inputs={"book": BOOK, "chapter": 2, "brief": "Lin Feng comes back to the city."},
    )

    assert result.status == "completed", result.errors
    assert result.interface_outputs == {"text": CLEAN}
    [question] = [e for e in events if isinstance(e, NodeNeedsHuman)]
    assert question.node_id == "choose" and question.output_preview == CLEAN
    # The plan reached the draft's prompt; the draft carried its sources and verdict.
    assert "The rain stops." in llm.chat_requests[0]["messages"][-1]["content"]
    [draft] = [e for e in events if isinstance(e, NodeCompleted) and e.node_id == "draft"]
    assert draft.context_sources
    assert draft.evaluation is not None and draft.evaluation.decision == "approve"
    # Nothing to fix: the reviser passed the draft on without asking a model.
    assert len(llm.chat_requests) == 1
    assert len(agent.chat_requests) == 4
