"""A node that asks a human waits until the run is told the decision."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from storyloom.workflow.events import NodeNeedsHuman, RunEvent
from storyloom.workflow.node_type import HumanDecision
from storyloom.workflow.runner import WorkflowRun, WorkflowRunner
from storyloom.workflow.workflow_file import Workflow

if TYPE_CHECKING:
    from tests.workflow.conftest import BuildWorkflow, Probe


def review(make_workflow: BuildWorkflow) -> Workflow:
    return make_workflow(
        "review",
        {"draft": ("test:Counter", {}), "ask": ("test:Ask", {})},
        ["draft.value -> ask.text"],
    )


class Asked:
    """Collects ``node:needs-human`` events and lets a test await the next one."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[NodeNeedsHuman] = asyncio.Queue()

    def __call__(self, event: RunEvent) -> None:
        if isinstance(event, NodeNeedsHuman):
            self.queue.put_nowait(event)

    async def next(self) -> NodeNeedsHuman:
        return await asyncio.wait_for(self.queue.get(), 10)


async def test_human_request_waits_for_the_decision(
    runner: WorkflowRunner, make_workflow: BuildWorkflow
) -> None:
    asked = Asked()
    run = runner.start(review(make_workflow), on_event=asked)
    event = await asked.next()
    assert (event.node_id, event.reason, event.output_preview) == ("ask", "check this", "0")
    assert event.options == ["approve", "retry", "edit"]
    assert set(run.waiting_for_human()) == {"ask"}
    assert not run.done
    assert run.decide("draft", HumanDecision(decision="approve")) is False
    assert run.decide("ask", HumanDecision(decision="edit", edited_output="better")) is True
    result = await run.wait()
    assert result.outputs["ask"] == {"text": "better"}
    assert run.waiting_for_human() == {}
    assert run.decide("ask", HumanDecision(decision="approve")) is False


async def test_retry_reruns_the_upstream_and_asks_again_with_the_fresh_value(
    runner: WorkflowRunner, make_workflow: BuildWorkflow, probe: Probe
) -> None:
    asked = Asked()
    run: WorkflowRun = runner.start(review(make_workflow), on_event=asked)
    first = await asked.next()
    run.decide("ask", HumanDecision(decision="retry"))
    second = await asked.next()
    assert (first.output_preview, second.output_preview) == ("0", "1")
    run.decide("ask", HumanDecision(decision="approve"))
    result = await run.wait()
    assert result.outputs["ask"] == {"text": 1}
    assert result.outputs["draft"] == {"value": 1}
    assert probe.ran == ["draft", "ask", "draft"]
    started = [e.node_id for e in run.events if e.type == "node:started"]
    assert started == ["draft", "ask", "draft"]
