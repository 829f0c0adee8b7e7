"""core:HumanDecision through a real WorkflowRunner run: the test answers each
``node:needs-human`` with ``run.decide`` as a browser would."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from storyloom.workflow.events import NodeNeedsHuman, RunEvent
from storyloom.workflow.node_registry import NodeRegistry
from storyloom.workflow.node_type import (
    HumanDecision,
    NodeContext,
    NodeExpansion,
    NodeType,
    Slot,
)
from storyloom.workflow.nodes.human_nodes import HumanDecisionNode
from storyloom.workflow.runner import RunResult, WorkflowRunner
from storyloom.workflow.workflow_file import Workflow, parse_workflow


class Draft(NodeType):
    """Writes "draft N" on its N-th call, so a re-run upstream is visible."""

    type: ClassVar[str] = "test:Draft"
    display_name: ClassVar[str] = "Draft"
    outputs: ClassVar[tuple[Slot, ...]] = (Slot(name="text", type="STRING"),)

    def __init__(self) -> None:
        self.calls = 0

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: dict[str, Any]
    ) -> dict[str, Any] | NodeExpansion:
        self.calls += 1
        return {"text": f"draft {self.calls}"}


def review_workflow(max_retries: int = 3) -> Workflow:
    return parse_workflow(
        {
            "id": "review",
            "nodes": [
                {"id": "draft", "type": "test:Draft"},
                {
                    "id": "check",
                    "type": "core:HumanDecision",
                    "config": {"reason": "Is this draft good?", "max_retries": max_retries},
                },
            ],
            "edges": [
                {"source": "draft", "sourceSlot": "text", "target": "check", "targetSlot": "value"}
            ],
        }
    )


class Reviewer:
    """Runs the workflow and answers the questions in order, recording what it was asked."""

    def __init__(self, answers: list[HumanDecision]) -> None:
        self.registry = NodeRegistry([Draft, HumanDecisionNode])
        self.answers = answers
        self.asked: list[NodeNeedsHuman] = []
        self.accepted: list[bool] = []

    @property
    def draft_calls(self) -> int:
        draft = self.registry.get("test:Draft")
        assert isinstance(draft, Draft)
        return draft.calls

    async def review(self, workflow: Workflow) -> RunResult:
        questions: asyncio.Queue[NodeNeedsHuman] = asyncio.Queue()

        def on_event(event: RunEvent) -> None:
            if isinstance(event, NodeNeedsHuman):
                questions.put_nowait(event)

        run = WorkflowRunner(self.registry).start(workflow, on_event=on_event)
        waiting = asyncio.ensure_future(run.wait())
        for answer in self.answers:
            question_arrived = asyncio.ensure_future(questions.get())
            await asyncio.wait({waiting, question_arrived}, return_when=asyncio.FIRST_COMPLETED)
            if not question_arrived.done():
                question_arrived.cancel()
                break  # the run ended without asking
            question = question_arrived.result()
            self.asked.append(question)
            assert question.node_id in run.waiting_for_human()
            self.accepted.append(run.decide(question.node_id, answer))
        return await waiting


async def test_approve_passes_the_value_on() -> None:
    reviewer = Reviewer([HumanDecision(decision="approve")])

    result = await reviewer.review(review_workflow())

    assert result.status == "completed", result.errors
    assert result.outputs["check"] == {"value": "draft 1", "decision": "approve", "retries": 0}
    [question] = reviewer.asked
    assert question.reason == "Is this draft good?"
    assert question.output_preview == "draft 1"
    assert question.options == ["approve", "retry", "edit"]


async def test_edit_passes_the_edited_text_on() -> None:
    reviewer = Reviewer([HumanDecision(decision="edit", edited_output="my own draft")])

    result = await reviewer.review(review_workflow())

    assert result.status == "completed", result.errors
    assert result.outputs["check"]["value"] == "my own draft"
    assert result.outputs["check"]["decision"] == "edit"


async def test_retry_reruns_upstream_and_asks_again_with_the_new_value() -> None:
    reviewer = Reviewer([HumanDecision(decision="retry"), HumanDecision(decision="approve")])

    result = await reviewer.review(review_workflow())

    assert result.status == "completed", result.errors
    assert reviewer.draft_calls == 2
    assert [q.output_preview for q in reviewer.asked] == ["draft 1", "draft 2"]
    assert result.outputs["check"] == {"value": "draft 2", "decision": "approve", "retries": 1}


async def test_retry_is_no_longer_offered_after_max_retries() -> None:
    reviewer = Reviewer([HumanDecision(decision="retry"), HumanDecision(decision="approve")])

    result = await reviewer.review(review_workflow(max_retries=1))

    assert result.status == "completed", result.errors
    assert [q.options for q in reviewer.asked] == [
        ["approve", "retry", "edit"],
        ["approve", "edit"],
    ]


async def test_retry_beyond_max_retries_fails_the_node_clearly() -> None:
    reviewer = Reviewer([HumanDecision(decision="retry")])

    result = await reviewer.review(review_workflow(max_retries=0))

    assert reviewer.asked[0].options == ["approve", "edit"]
    assert result.status == "failed"
    assert "max_retries" in result.errors["check"]
    assert reviewer.draft_calls == 1
