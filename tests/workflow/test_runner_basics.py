"""Running plain graphs: what runs, what it is given, what the run reports."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from storyloom.workflow.events import (
    NodeCompleted,
    NodeStarted,
    NodeStreaming,
    RunEvent,
    WorkflowCompleted,
    WorkflowStarted,
    event_json,
    run_event_adapter,
)
from storyloom.workflow.runner import WorkflowRunner
from storyloom.workflow.validation import WorkflowInvalid

if TYPE_CHECKING:
    from tests.workflow.conftest import BuildWorkflow, Probe


async def test_chain_runs_in_order_and_reports_target_outputs(
    runner: WorkflowRunner, make_workflow: BuildWorkflow, probe: Probe
) -> None:
    workflow = make_workflow(
        "chain",
        {
            "hello": ("test:Text", {"text": "hello"}),
            "up": ("test:Upper", {}),
            "join": ("test:Join", {"sep": " "}),
        },
        ["hello.text -> up.text", "up.text -> join.a"],
    )
    result = await runner.run(workflow)
    assert result.status == "completed"
    assert probe.ran == ["hello", "up", "join"]
    assert result.outputs["join"] == {"text": "HELLO B"}
    assert result.ran == ["hello", "up", "join"]
    assert result.errors == {}


async def test_only_nodes_the_targets_need_run(
    runner: WorkflowRunner, make_workflow: BuildWorkflow, probe: Probe
) -> None:
    workflow = make_workflow(
        "needs",
        {
            "a": ("test:Text", {"text": "a"}),
            "up": ("test:Upper", {}),
            "other": ("test:Text", {"text": "other"}),
            "other_up": ("test:Upper", {}),
        },
        ["a.text -> up.text", "other.text -> other_up.text"],
    )
    run = runner.start(workflow, outputs=["up"])
    result = await run.wait()
    assert sorted(probe.ran) == ["a", "up"]
    assert set(result.outputs) == {"a", "up"}
    started = run.events[0]
    assert isinstance(started, WorkflowStarted)
    assert sorted(started.node_ids) == ["a", "up"]


async def test_without_outputs_every_sink_is_computed(
    runner: WorkflowRunner, make_workflow: BuildWorkflow, probe: Probe
) -> None:
    workflow = make_workflow(
        "sinks",
        {"a": ("test:Text", {"text": "a"}), "b": ("test:Text", {"text": "b"})},
    )
    run = runner.start(workflow)
    result = await run.wait()
    assert sorted(probe.ran) == ["a", "b"]
    (done,) = [e for e in run.events if isinstance(e, WorkflowCompleted)]
    assert sorted((o.node_id, o.output) for o in done.outputs) == [("a", "a"), ("b", "b")]
    assert result.status == "completed"


async def test_unconnected_input_takes_config_value_else_slot_default(
    runner: WorkflowRunner, make_workflow: BuildWorkflow
) -> None:
    workflow = make_workflow(
        "defaults",
        {"a": ("test:Text", {"text": "x"}), "join": ("test:Join", {})},
        ["a.text -> join.a"],
    )
    result = await runner.run(workflow)
    # `b` is not a config field of Join: its slot default; `sep` comes from config defaults.
    assert result.outputs["join"] == {"text": "x+B"}


async def test_integer_output_converts_into_float_and_string_inputs(
    runner: WorkflowRunner, make_workflow: BuildWorkflow
) -> None:
    workflow = make_workflow(
        "convert",
        {"n": ("test:Number", {"value": 3}), "show": ("test:Show", {})},
        ["n.value -> show.number", "n.value -> show.text"],
    )
    result = await runner.run(workflow)
    assert result.outputs["show"]["seen"] == {"number": ["float", 3.0], "text": ["str", "3"]}


async def test_events_are_numbered_from_one_and_end_with_one_workflow_event(
    runner: WorkflowRunner, make_workflow: BuildWorkflow
) -> None:
    workflow = make_workflow(
        "seq",
        {
            "a": ("test:Text", {"text": "a"}),
            "b": ("test:Text", {"text": "b"}),
            "join": ("test:Join", {}),
        },
        ["a.text -> join.a", "b.text -> join.b"],
    )
    seen: list[RunEvent] = []
    run = runner.start(workflow, on_event=seen.append, run_id="r1")
    await run.wait()
    assert seen == run.events
    assert [e.seq for e in run.events] == list(range(1, len(run.events) + 1))
    assert {e.run_id for e in run.events} == {"r1"}
    assert run.events[0].type == "workflow:started"
    assert [e.type for e in run.events].count("workflow:completed") == 1
    assert run.events[-1].type == "workflow:completed"
    started = [e.node_id for e in run.events if isinstance(e, NodeStarted)]
    completed = [e for e in run.events if isinstance(e, NodeCompleted)]
    assert sorted(started) == ["a", "b", "join"]
    assert completed[-1].node_id == "join"
    assert completed[-1].output == "a+b"
    assert completed[-1].history_id is not None
    # Every event survives the trip through JSON as the protocol's own model.
    for event in run.events:
        assert run_event_adapter.validate_python(event_json(event)) == event


async def test_invalid_workflow_is_refused_before_anything_runs(
    runner: WorkflowRunner, make_workflow: BuildWorkflow, probe: Probe
) -> None:
    workflow = make_workflow(
        "bad",
        {"a": ("test:Text", {"text": "a"}), "nope": ("test:Nope", {})},
        ["a.text -> nope.text"],
    )
    with pytest.raises(WorkflowInvalid) as caught:
        runner.start(workflow)
    assert {p.code for p in caught.value.problems} >= {"unknown-type"}
    assert probe.ran == []


async def test_interface_inputs_are_checked_and_defaulted(
    runner: WorkflowRunner, make_workflow: BuildWorkflow
) -> None:
    workflow = make_workflow(
        "iface",
        {"in": ("core:GroupInput", {}), "show": ("test:Show", {})},
        ["in.count -> show.number", "in.label -> show.text"],
        interfaceInputs={
            "count": {"dataFlowType": "INTEGER", "required": True},
            "label": {"dataFlowType": "STRING", "config": {"default": "none"}},
        },
    )
    with pytest.raises(WorkflowInvalid) as missing:
        runner.start(workflow)
    assert [p.code for p in missing.value.problems] == ["missing-input"]
    with pytest.raises(WorkflowInvalid) as wrong:
        runner.start(workflow, inputs={"count": "three", "extra": 1})
    assert sorted(p.code for p in wrong.value.problems) == ["bad-interface", "bad-interface"]
    result = await runner.run(workflow, inputs={"count": "3"})
    assert result.outputs["show"]["seen"] == {"number": ["float", 3.0], "text": ["str", "none"]}


async def test_chunks_emitted_together_stream_as_one_event_before_the_node_completes(
    runner: WorkflowRunner, make_workflow: BuildWorkflow
) -> None:
    # The test node emits without waiting between chunks, as a burst from a fast model
    # arrives: one streaming event carries them all, and it comes before completion.
    workflow = make_workflow("burst", {"s": ("test:Stream", {"chunks": list("abcdef")})}, [])
    run = runner.start(workflow)
    result = await run.wait()
    assert result.outputs["s"] == {"text": "abcdef"}
    kinds = [e.type for e in run.events if getattr(e, "node_id", None) == "s"]
    assert kinds == ["node:started", "node:streaming", "node:completed"]
    streamed = [e for e in run.events if isinstance(e, NodeStreaming)]
    assert [e.chunk for e in streamed] == ["abcdef"]
