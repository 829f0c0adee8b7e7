"""Independent branches run at the same time; a failure stops only what depends on it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from storyloom.workflow.events import NodeError, WorkflowError
from storyloom.workflow.node_history import NodeHistory
from storyloom.workflow.runner import WorkflowRunner

if TYPE_CHECKING:
    from tests.workflow.conftest import BuildWorkflow, Probe


async def test_two_independent_slow_branches_overlap(
    runner: WorkflowRunner, make_workflow: BuildWorkflow, probe: Probe
) -> None:
    workflow = make_workflow(
        "overlap",
        {
            "left": ("test:Rendezvous", {"name": "left", "peer": "right"}),
            "right": ("test:Rendezvous", {"name": "right", "peer": "left"}),
            "join": ("test:Join", {}),
        },
        ["left.text -> join.a", "right.text -> join.b"],
    )
    result = await runner.run(workflow)
    assert result.status == "completed"
    # Each branch waits for the other to have started: they only finish when overlapping.
    assert sorted(probe.log[:2]) == ["start left", "start right"]
    assert sorted(probe.log[2:]) == ["end left", "end right"]
    assert result.outputs["join"] == {"text": "left+right"}


async def test_failing_node_fails_only_its_downstream(
    runner: WorkflowRunner,
    history: NodeHistory,
    make_workflow: BuildWorkflow,
    probe: Probe,
) -> None:
    workflow = make_workflow(
        "partial",
        {
            "ok": ("test:Text", {"text": "fine"}),
            "ok_up": ("test:Upper", {}),
            "bad": ("test:Fail", {"message": "no model configured"}),
            "bad_up": ("test:Upper", {}),
            "bad_join": ("test:Join", {}),
        },
        [
            "ok.text -> ok_up.text",
            "bad.text -> bad_up.text",
            "bad_up.text -> bad_join.a",
            "ok.text -> bad_join.b",
        ],
    )
    run = runner.start(workflow)
    result = await run.wait()
    assert result.status == "failed"
    assert result.errors == {"bad": "RuntimeError: no model configured"}
    assert result.outputs["ok_up"] == {"text": "FINE"}
    assert "bad_up" not in probe.ran and "bad_join" not in probe.ran
    (error,) = [e for e in run.events if isinstance(e, NodeError)]
    assert error.node_id == "bad"
    assert error.error == "RuntimeError: no model configured"
    assert sorted(error.skipped) == ["bad_join", "bad_up"]
    last = run.events[-1]
    assert isinstance(last, WorkflowError)
    assert last.node_id == "bad" and not last.cancelled
    assert "no model configured" in last.error
    assert {o.node_id for o in last.outputs} == {"ok", "ok_up"}
    assert history.entries("partial", "bad") == []
    assert len(history.entries("partial", "ok_up")) == 1


async def test_max_concurrency_one_runs_one_node_at_a_time(
    runner: WorkflowRunner, make_workflow: BuildWorkflow, probe: Probe
) -> None:
    serial = WorkflowRunner(runner.registry, max_concurrency=1)
    workflow = make_workflow(
        "serial",
        {f"s{i}": ("test:Stream", {"chunks": [f"{i}a", f"{i}b"]}) for i in range(3)},
    )
    run = serial.start(workflow)
    await run.wait()
    streamed = [e.node_id for e in run.events if e.type in ("node:started", "node:completed")]
    # started/completed alternate: no node starts while another is running
    assert streamed == [n for i in range(3) for n in (f"s{i}", f"s{i}")]
