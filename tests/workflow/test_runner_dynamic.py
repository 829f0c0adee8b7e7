"""Lazy inputs (only the chosen branch runs) and node expansion."""

from __future__ import annotations

from typing import TYPE_CHECKING

from storyloom.workflow.events import NodeCompleted, NodeIteration
from storyloom.workflow.runner import WorkflowRunner
from storyloom.workflow.workflow_file import Workflow

if TYPE_CHECKING:
    from tests.workflow.conftest import BuildWorkflow, Probe


def switch(make_workflow: BuildWorkflow, on: bool) -> Workflow:
    return make_workflow(
        "switch",
        {
            "yes": ("test:Text", {"text": "yes"}),
            "yes_up": ("test:Upper", {}),
            "no": ("test:Text", {"text": "no"}),
            "no_up": ("test:Upper", {}),
            "switch": ("test:Switch", {"on": on}),
        },
        [
            "yes.text -> yes_up.text",
            "no.text -> no_up.text",
            "yes_up.text -> switch.yes",
            "no_up.text -> switch.no",
        ],
    )


async def test_lazy_switch_computes_only_the_chosen_branch(
    runner: WorkflowRunner, make_workflow: BuildWorkflow, probe: Probe
) -> None:
    result = await runner.run(switch(make_workflow, on=False))
    assert result.outputs["switch"] == {"value": "NO"}
    assert sorted(probe.ran) == ["no", "no_up", "switch"]
    probe.ran.clear()
    result = await runner.run(switch(make_workflow, on=True))
    assert result.outputs["switch"] == {"value": "YES"}
    assert sorted(probe.ran) == ["switch", "yes", "yes_up"]


async def test_lazy_branch_from_the_cache_is_not_run_again(
    runner: WorkflowRunner, make_workflow: BuildWorkflow, probe: Probe
) -> None:
    await runner.run(switch(make_workflow, on=False), outputs=["no_up"])
    probe.ran.clear()
    result = await runner.run(switch(make_workflow, on=False))
    assert probe.ran == ["switch"]
    assert result.cached == ["no_up"]


async def test_node_expansion_runs_its_subgraph_under_the_node(
    runner: WorkflowRunner, make_workflow: BuildWorkflow, probe: Probe
) -> None:
    workflow = make_workflow(
        "expand",
        {"a": ("test:Text", {"text": "hi"}), "shout": ("test:Shout", {}), "up": ("test:Upper", {})},
        ["a.text -> shout.text", "shout.text -> up.text"],
    )
    run = runner.start(workflow)
    result = await run.wait()
    assert result.outputs["shout"] == {"text": "HI!"}
    assert result.outputs["up"] == {"text": "HI!"}
    assert probe.ran == ["a", "shout", "shout/up", "shout/join", "up"]
    completed = [e.node_id for e in run.events if isinstance(e, NodeCompleted)]
    assert completed == ["a", "shout/up", "shout/join", "shout", "up"]
    probe.ran.clear()
    again = await runner.run(workflow)
    assert probe.ran == [] and again.cached == ["up"]


async def test_iterations_are_reported(
    runner: WorkflowRunner, make_workflow: BuildWorkflow
) -> None:
    run = runner.start(make_workflow("iter", {"it": ("test:Iterate", {"times": 3})}))
    await run.wait()
    iterations = [e for e in run.events if isinstance(e, NodeIteration)]
    assert [(e.iteration, e.total_iterations, e.kind) for e in iterations] == [
        (1, 3, "recursive"),
        (2, 3, "recursive"),
        (3, 3, "recursive"),
    ]
