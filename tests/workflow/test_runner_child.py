"""Child workflows run through ``ctx.run_workflow`` inside the parent's run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from storyloom.workflow.events import NodeCompleted, NodeError, WorkflowStarted
from storyloom.workflow.node_history import NodeHistory
from storyloom.workflow.runner import MAX_DEPTH, WorkflowRunner
from storyloom.workflow.workflow_file import Workflow

if TYPE_CHECKING:
    from tests.workflow.conftest import BuildWorkflow


def shouter(make_workflow: BuildWorkflow, inner: str = "test:Upper") -> Workflow:
    """interface text → upper → interface shouted"""
    return make_workflow(
        "shouter",
        {
            "in": ("core:GroupInput", {}),
            "up": (inner, {}),
            "out": ("core:GroupOutput", {}),
        },
        ["in.text -> up.text", "up.text -> out.shouted"],
        interfaceInputs={"text": {"dataFlowType": "STRING", "required": True}},
        interfaceOutputs={"shouted": {"dataFlowType": "STRING"}},
    )


def caller(make_workflow: BuildWorkflow) -> Workflow:
    return make_workflow(
        "caller",
        {"a": ("test:Text", {"text": "hey"}), "call": ("test:Call", {"workflow": "shouter"})},
        ["a.text -> call.text"],
    )


async def test_child_workflow_returns_interface_outputs_and_forwards_node_events(
    runner: WorkflowRunner,
    history: NodeHistory,
    make_workflow: BuildWorkflow,
    library: dict[str, Workflow],
) -> None:
    library["shouter"] = shouter(make_workflow)
    run = runner.start(caller(make_workflow))
    result = await run.wait()
    assert result.status == "completed"
    assert result.outputs["call"] == {"result": {"shouted": "HEY"}}
    completed = [e.node_id for e in run.events if isinstance(e, NodeCompleted)]
    assert completed == ["a", "call/in", "call/up", "call/out", "call"]
    assert [e for e in run.events if isinstance(e, WorkflowStarted)] == [run.events[0]]
    assert [e.type for e in run.events].count("workflow:completed") == 1
    assert [e.seq for e in run.events] == list(range(1, len(run.events) + 1))
    # The child's nodes keep their history under the child workflow.
    assert history.entries("shouter", "up")[0].outputs == {"text": "HEY"}


async def test_group_output_values_are_the_runs_interface_outputs(
    runner: WorkflowRunner, make_workflow: BuildWorkflow
) -> None:
    run = runner.start(shouter(make_workflow), inputs={"text": "direct"})
    result = await run.wait()
    assert result.interface_outputs == {"shouted": "DIRECT"}
    last = run.events[-1]
    assert last.type == "workflow:completed"
    assert last.interface_outputs == {"shouted": "DIRECT"}


async def test_failing_child_fails_the_calling_node_with_the_child_node_named(
    runner: WorkflowRunner, make_workflow: BuildWorkflow, library: dict[str, Workflow]
) -> None:
    library["shouter"] = shouter(make_workflow, inner="test:Fail")
    run = runner.start(caller(make_workflow))
    result = await run.wait()
    assert result.status == "failed"
    assert set(result.errors) == {"call/up", "call"}
    assert result.errors["call"] == (
        "ChildWorkflowFailed: sub-workflow 'shouter' failed at node 'call/up': RuntimeError: boom"
    )
    errors = [e.node_id for e in run.events if isinstance(e, NodeError)]
    assert errors == ["call/up", "call"]


async def test_workflows_calling_themselves_stop_at_the_depth_limit(
    runner: WorkflowRunner, make_workflow: BuildWorkflow, library: dict[str, Workflow]
) -> None:
    library["loop"] = make_workflow("loop", {"call": ("test:Call", {"workflow": "loop"})})
    run = runner.start(library["loop"])
    result = await run.wait()
    assert result.status == "failed"
    deepest = "/".join(["call"] * (MAX_DEPTH + 1))
    assert f"nest deeper than {MAX_DEPTH} levels" in result.errors[deepest]
    # Each level names the deepest failure once instead of wrapping the one below it.
    assert result.errors["call"].count("failed at node") == 1
    assert f"failed at node {deepest!r}: WorkflowNestingTooDeep" in result.errors["call"]


async def test_missing_child_workflow_fails_the_node(
    runner: WorkflowRunner, make_workflow: BuildWorkflow
) -> None:
    result = await runner.run(caller(make_workflow))
    assert result.errors["call"] == "WorkflowNotFound: no workflow 'shouter'"
