"""Cancelling a run: running nodes stop, completed work is kept, history stays whole."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from storyloom.workflow.events import NodeCancelled, RunEvent, WorkflowError
from storyloom.workflow.node_history import NodeHistory
from storyloom.workflow.runner import WorkflowRunner
from storyloom.workflow.workflow_file import Workflow

if TYPE_CHECKING:
    from tests.workflow.conftest import BuildWorkflow, Probe


async def test_cancel_mid_stream_reports_partial_text_and_keeps_completed_history(
    runner: WorkflowRunner, history: NodeHistory, make_workflow: BuildWorkflow, probe: Probe
) -> None:
    workflow = make_workflow(
        "long",
        {
            "prompt": ("test:Text", {"text": "go"}),
            "stream": ("test:Stream", {"chunks": ["Once ", "upon"], "hold": True}),
            "after": ("test:Upper", {}),
        },
        ["prompt.text -> stream.text", "stream.text -> after.text"],
    )
    run = runner.start(workflow)
    await probe.wait("streamed")
    run.cancel()
    result = await run.wait()
    assert result.status == "cancelled"
    assert run.done
    (cancelled,) = [e for e in run.events if isinstance(e, NodeCancelled)]
    assert (cancelled.node_id, cancelled.partial_output) == ("stream", "Once upon")
    last = run.events[-1]
    assert isinstance(last, WorkflowError)
    assert last.cancelled is True
    assert [o.node_id for o in last.outputs] == ["prompt"]
    assert [e.type for e in run.events].count("workflow:error") == 1
    assert "after" not in probe.ran
    assert len(history.entries("long", "prompt")) == 1
    assert history.entries("long", "stream") == []
    assert result.outputs == {"prompt": {"text": "go"}}


async def test_cancel_while_a_human_is_asked_ends_the_wait(
    runner: WorkflowRunner, make_workflow: BuildWorkflow
) -> None:
    workflow = make_workflow(
        "ask",
        {"a": ("test:Text", {"text": "draft"}), "ask": ("test:Ask", {})},
        ["a.text -> ask.text"],
    )
    seen: list[str] = []
    asked = asyncio.Event()

    def on_event(event: RunEvent) -> None:
        seen.append(event.type)
        if event.type == "node:needs-human":
            asked.set()

    run = runner.start(workflow, on_event=on_event)
    await asyncio.wait_for(asked.wait(), 10)
    assert set(run.waiting_for_human()) == {"ask"}
    run.cancel()
    result = await run.wait()
    assert result.status == "cancelled"
    assert run.waiting_for_human() == {}
    assert seen[-2:] == ["node:cancelled", "workflow:error"]


async def test_cancel_after_the_end_changes_nothing(
    runner: WorkflowRunner, make_workflow: BuildWorkflow
) -> None:
    run = runner.start(make_workflow("quick", {"a": ("test:Text", {"text": "a"})}))
    result = await run.wait()
    run.cancel()
    assert (await run.wait()) == result
    assert result.status == "completed"


async def test_cancel_reaches_the_nodes_of_a_child_workflow(
    runner: WorkflowRunner,
    make_workflow: BuildWorkflow,
    library: dict[str, Workflow],
    probe: Probe,
) -> None:
    library["child"] = make_workflow(
        "child",
        {
            "in": ("core:GroupInput", {}),
            "stream": ("test:Stream", {"chunks": ["par", "tial"], "hold": True}),
            "out": ("core:GroupOutput", {}),
        },
        ["in.text -> stream.text", "stream.text -> out.text"],
        interfaceInputs={"text": {"dataFlowType": "STRING"}},
        interfaceOutputs={"text": {"dataFlowType": "STRING"}},
    )
    parent = make_workflow(
        "parent",
        {"a": ("test:Text", {"text": "go"}), "call": ("test:Call", {"workflow": "child"})},
        ["a.text -> call.text"],
    )
    run = runner.start(parent)
    await probe.wait("streamed")
    run.cancel()
    result = await run.wait()
    assert result.status == "cancelled"
    cancelled = {e.node_id: e.partial_output for e in run.events if isinstance(e, NodeCancelled)}
    assert cancelled == {"call/stream": "partial", "call": ""}
    assert run.events[-1].type == "workflow:error"
    assert not [e for e in run.events if e.type == "node:error"]
