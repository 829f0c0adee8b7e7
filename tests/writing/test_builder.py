"""Role B against the replay server as the agent model: suggestions are stored, nothing
changes until the author accepts, and a bad answer never reaches the workflow."""

from __future__ import annotations

import json
from typing import Any

import pytest

from storyloom.core.errors import Conflict, InvalidInput, NotFound, Unavailable
from storyloom.core.settings import ChatEndpoint
from storyloom.plugins import node_registry
from storyloom.store.database import Database
from storyloom.testing.replay_server import ReplayLLMServer
from storyloom.workflow.validation import validate_workflow
from storyloom.workflow.workflow_file import Workflow
from storyloom.writing.builder import Builder, BuilderError, Suggestion
from storyloom.writing.chapter_workflow import chapter_workflow

REGISTRY = node_registry(entry_points=False)

CHECK_AFTER_REVISE = {
    "nodes": [{"id": "check", "type": "writing:Check", "config": {"check_with_agent": False}}],
    "edges": [
        {"source": "revise", "sourceSlot": "text", "target": "check", "targetSlot": "text"},
        {"source": "in", "target": "check", "sourceSlot": "book", "targetSlot": "book"},
    ],
    "explanation": "Check the revised text once more.",
}


class Project:
    """Workflows by id, as the server's library keeps them."""

    def __init__(self) -> None:
        self.workflows: dict[str, Workflow] = {"writing-chapter": chapter_workflow()}
        self.saved: list[str] = []

    def load(self, workflow_id: str) -> Workflow:
        return self.workflows[workflow_id]

    def save(self, workflow: Workflow) -> None:
        self.workflows[workflow.id] = workflow
        self.saved.append(workflow.id)


@pytest.fixture
def project() -> Project:
    return Project()


def builder_for(db: Database, project: Project, agent: ReplayLLMServer | None) -> Builder:
    endpoint = (
        ChatEndpoint(base_url=agent.url, model="agent-model", max_retries=0)
        if agent is not None
        else None
    )
    return Builder(db, lambda: endpoint, REGISTRY, project.load, project.save)


def state_of(db: Database, suggestion_id: str) -> tuple[str, str | None]:
    row = (
        db.connection()
        .execute("SELECT state, reason FROM writing_suggestion WHERE id = ?", (suggestion_id,))
        .fetchone()
    )
    assert row is not None
    return row[0], row[1]


def answer(data: dict[str, Any]) -> str:
    return "Here is my suggestion:\n```json\n" + json.dumps(data) + "\n```"


async def test_a_suggestion_is_stored_pending_and_changes_nothing(
    db: Database, project: Project, agent: ReplayLLMServer
) -> None:
    agent.script(answer(CHECK_AFTER_REVISE))
    before = project.workflows["writing-chapter"].to_json()

    suggestion = await builder_for(db, project, agent).request(
        "check the revised chapter again", "writing-chapter"
    )

    assert project.workflows["writing-chapter"].to_json() == before
    assert project.saved == []
    assert state_of(db, suggestion.suggestion_id) == ("pending", None)
    assert suggestion.workflow_id == "writing-chapter"
    assert suggestion.explanation == "Check the revised text once more."
    # "check" is taken in the workflow: the new node gets an id of its own.
    [node] = suggestion.nodes
    assert node.id != "check" and node.id.endswith("check") and node.type == "writing:Check"
    assert {(e.source, e.target) for e in suggestion.edges} == {
        ("revise", node.id),
        ("in", node.id),
    }
    sent = suggestion.to_json()
    assert sent["suggestionId"] == suggestion.suggestion_id
    assert sent["workflowId"] == "writing-chapter"
    prompt = agent.chat_requests[0]["messages"][-1]["content"]
    assert "check the revised chapter again" in prompt
    assert "writing:Draft" in prompt and '"revise"' in prompt


async def test_accept_applies_the_suggestion_and_a_second_accept_conflicts(
    db: Database, project: Project, agent: ReplayLLMServer
) -> None:
    agent.script(answer(CHECK_AFTER_REVISE))
    builder = builder_for(db, project, agent)
    suggestion = await builder.request("check the revised chapter again", "writing-chapter")

    applied = builder.accept(suggestion.suggestion_id, None)

    assert project.saved == ["writing-chapter"]
    assert project.workflows["writing-chapter"] == applied
    new_id = suggestion.nodes[0].id
    assert applied.node(new_id) is not None
    assert len(applied.nodes) == len(chapter_workflow().nodes) + 1
    assert validate_workflow(applied, REGISTRY) == []
    assert state_of(db, suggestion.suggestion_id)[0] == "accepted"
    with pytest.raises(Conflict):
        builder.accept(suggestion.suggestion_id, None)


async def test_reject_leaves_the_workflow_as_it_is(
    db: Database, project: Project, agent: ReplayLLMServer
) -> None:
    agent.script(answer(CHECK_AFTER_REVISE))
    builder = builder_for(db, project, agent)
    suggestion = await builder.request("check the revised chapter again", "writing-chapter")

    builder.reject(suggestion.suggestion_id, "not now")

    assert project.saved == []
    assert state_of(db, suggestion.suggestion_id) == ("rejected", "not now")
    with pytest.raises(Conflict):
        builder.accept(suggestion.suggestion_id, None)
    with pytest.raises(NotFound):
        builder.reject("sg_unknown", None)


async def test_malformed_json_is_sent_back_once_then_refused(
    db: Database, project: Project, agent: ReplayLLMServer
) -> None:
    agent.script("Sure! Add a check node.", '{"nodes": [')
    with pytest.raises(BuilderError) as caught:
        await builder_for(db, project, agent).request("add a check", "writing-chapter")
    assert isinstance(caught.value, InvalidInput)
    assert "not valid" in str(caught.value)
    _first, second = agent.chat_requests
    assert "That answer cannot be used" in second["messages"][-1]["content"]
    row = db.connection().execute("SELECT count(*) FROM writing_suggestion").fetchone()
    assert row is not None and row[0] == 0


async def test_a_corrected_second_answer_is_used(
    db: Database, project: Project, agent: ReplayLLMServer
) -> None:
    bad = {**CHECK_AFTER_REVISE, "nodes": [{"id": "x", "type": "writing:Nope"}]}
    agent.script(answer(bad), answer(CHECK_AFTER_REVISE))
    suggestion = await builder_for(db, project, agent).request("add a check", "writing-chapter")
    assert isinstance(suggestion, Suggestion)
    assert "unknown node type 'writing:Nope'" in agent.chat_requests[1]["messages"][-1]["content"]


async def test_unknown_node_types_and_broken_wiring_are_named(
    db: Database, project: Project, agent: ReplayLLMServer
) -> None:
    unknown = {"nodes": [{"id": "x", "type": "writing:Nope"}], "edges": []}
    agent.script(answer(unknown), answer(unknown))
    with pytest.raises(BuilderError, match="writing:Nope"):
        await builder_for(db, project, agent).request("add a thing", "writing-chapter")

    wrong_slot = {
        "nodes": [{"id": "extra", "type": "writing:Check"}],
        "edges": [
            {"source": "revise", "sourceSlot": "nope", "target": "extra", "targetSlot": "text"}
        ],
    }
    agent.script(answer(wrong_slot), answer(wrong_slot))
    with pytest.raises(BuilderError, match="nope"):
        await builder_for(db, project, agent).request("add a check", "writing-chapter")
    assert project.saved == []


async def test_without_an_agent_model_role_b_says_to_set_it(db: Database, project: Project) -> None:
    with pytest.raises(Unavailable, match="Settings"):
        await builder_for(db, project, None).request("add a check", "writing-chapter")


async def test_a_suggestion_without_a_workflow_creates_one_on_accept(
    db: Database, project: Project, agent: ReplayLLMServer
) -> None:
    agent.script(
        answer(
            {
                "nodes": [
                    {"id": "ctx", "type": "writing:Context", "config": {"book": "bk_x"}},
                ],
                "edges": [],
                "explanation": "Show the book's context.",
            }
        )
    )
    builder = builder_for(db, project, agent)
    suggestion = await builder.request("show me the context", None)
    assert suggestion.workflow_id not in project.workflows

    created = builder.accept(suggestion.suggestion_id, None)
    assert project.workflows[suggestion.workflow_id] == created
    assert [n.id for n in created.nodes] == ["ctx"]


async def test_accept_with_modifications_applies_the_authors_version(
    db: Database, project: Project, agent: ReplayLLMServer
) -> None:
    agent.script(answer(CHECK_AFTER_REVISE))
    builder = builder_for(db, project, agent)
    suggestion = await builder.request("check the revised chapter again", "writing-chapter")
    changed = {
        "nodes": [{"id": "recheck", "type": "writing:Check"}],
        "edges": [{"source": "revise", "sourceSlot": "text", "target": "recheck"}],
    }
    with pytest.raises(BuilderError):
        builder.accept(suggestion.suggestion_id, "make it nicer")
    applied = builder.accept(suggestion.suggestion_id, json.dumps(changed))
    assert applied.node("recheck") is not None
    assert [e.target_slot for e in applied.edges if e.target == "recheck"] == ["text"]
