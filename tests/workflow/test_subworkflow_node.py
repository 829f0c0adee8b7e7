"""core:SubWorkflow: calling another workflow of the project through its interface."""

from __future__ import annotations

from pathlib import Path

import pytest

from storyloom.workflow.events import NodeStarted
from storyloom.workflow.node_registry import NodeRegistry
from storyloom.workflow.node_type import (
    WorkflowServices,
)
from storyloom.workflow.nodes.interface_nodes import GroupInput, GroupOutput
from storyloom.workflow.nodes.subworkflow_nodes import SubWorkflowNode
from storyloom.workflow.runner import WorkflowRunner
from storyloom.workflow.validation import WorkflowInvalid, validate_workflow
from storyloom.workflow.workflow_file import Workflow, WorkflowLibrary, parse_workflow
from tests.workflow.conftest import AppendNode as Append


def registry() -> NodeRegistry:
    return NodeRegistry([GroupInput, GroupOutput, SubWorkflowNode, Append])


def shout_workflow() -> Workflow:
    """text → text + "!", and its length as a second output."""
    return parse_workflow(
        {
            "id": "shout",
            "interfaceInputs": {"text": {"dataFlowType": "STRING", "required": True}},
            "interfaceOutputs": {"text": {"dataFlowType": "STRING"}},
            "nodes": [
                {"id": "in", "type": "core:GroupInput"},
                {"id": "bang", "type": "test:Append", "config": {"suffix": "!"}},
                {"id": "out", "type": "core:GroupOutput"},
            ],
            "edges": [
                {"source": "in", "sourceSlot": "text", "target": "bang", "targetSlot": "text"},
                {"source": "bang", "sourceSlot": "text", "target": "out", "targetSlot": "text"},
            ],
        }
    )


def caller_workflow(called: str) -> Workflow:
    return parse_workflow(
        {
            "id": "caller",
            "interfaceInputs": {"line": {"dataFlowType": "STRING", "required": True}},
            "interfaceOutputs": {"result": {"dataFlowType": "STRING"}},
            "nodes": [
                {"id": "in", "type": "core:GroupInput"},
                {"id": "sub", "type": "core:SubWorkflow", "config": {"workflow": called}},
                {"id": "twice", "type": "test:Append", "config": {"suffix": "?"}},
                {"id": "out", "type": "core:GroupOutput"},
            ],
            "edges": [
                {"source": "in", "sourceSlot": "line", "target": "sub", "targetSlot": "text"},
                {"source": "sub", "sourceSlot": "text", "target": "twice", "targetSlot": "text"},
                {"source": "twice", "sourceSlot": "text", "target": "out", "targetSlot": "result"},
            ],
        }
    )


@pytest.fixture
def library(tmp_path: Path) -> WorkflowLibrary:
    library = WorkflowLibrary(tmp_path)
    library.save(shout_workflow())
    return library


def test_sub_workflow_slots_are_the_called_workflows_interface(library: WorkflowLibrary) -> None:
    node = caller_workflow("shout").node("sub")
    assert node is not None

    class Env:
        workflow = caller_workflow("shout")

        def load_workflow(self, workflow_id: str) -> Workflow:
            return library.load(workflow_id)

    slots = SubWorkflowNode().slots(node, Env())

    assert [(s.name, s.type, s.required) for s in slots.inputs] == [("text", "STRING", True)]
    assert [(s.name, s.type) for s in slots.outputs] == [("text", "STRING")]


async def test_sub_workflow_passes_inputs_and_returns_interface_outputs(
    library: WorkflowLibrary, tmp_path: Path
) -> None:
    runner = WorkflowRunner(
        registry(), WorkflowServices(project_dir=tmp_path, workflows=library.load)
    )

    result = await runner.run(caller_workflow("shout"), inputs={"line": "hey"})

    assert result.status == "completed", result.errors
    assert result.outputs["sub"] == {"text": "hey!"}
    assert result.interface_outputs == {"result": "hey!?"}


async def test_sub_workflow_node_events_are_forwarded_under_the_calling_node(
    library: WorkflowLibrary, tmp_path: Path
) -> None:
    runner = WorkflowRunner(
        registry(), WorkflowServices(project_dir=tmp_path, workflows=library.load)
    )

    run = runner.start(caller_workflow("shout"), inputs={"line": "hey"})
    await run.wait()

    started = [e.node_id for e in run.events if isinstance(e, NodeStarted)]
    assert "sub/bang" in started


def test_missing_sub_workflow_is_reported_by_validation_with_the_node(
    library: WorkflowLibrary,
) -> None:
    problems = validate_workflow(caller_workflow("nowhere"), registry(), library.load)

    mine = [p for p in problems if p.node_id == "sub"]
    assert [p.code for p in mine] == ["missing-workflow"]
    assert "nowhere" in mine[0].message
    assert "no such workflow" in mine[0].message


def test_missing_sub_workflow_refuses_the_run(library: WorkflowLibrary, tmp_path: Path) -> None:
    runner = WorkflowRunner(
        registry(), WorkflowServices(project_dir=tmp_path, workflows=library.load)
    )

    with pytest.raises(WorkflowInvalid) as refused:
        runner.start(caller_workflow("nowhere"), inputs={"line": "hey"})

    assert any(p.node_id == "sub" for p in refused.value.problems)


def test_a_workflow_calling_itself_is_reported(library: WorkflowLibrary) -> None:
    library.save(caller_workflow("caller"))

    problems = validate_workflow(caller_workflow("caller"), registry(), library.load)

    assert any(p.node_id == "sub" and "itself" in p.message for p in problems)
