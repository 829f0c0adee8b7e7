"""The workflow layer's plugin hooks: before a run starts (inputs may be replaced) and
before a node type registers (it may be refused); unregistering a type makes prepared
graphs that used it stale."""

from __future__ import annotations

from typing import Any

import pluggy
import pytest

from storyloom.core.plugin_markers import PROJECT, hookimpl
from storyloom.workflow import hookspecs
from storyloom.workflow.node_registry import NodeRegistry, NodeTypeRefused
from storyloom.workflow.node_type import NodeType, WorkflowServices
from storyloom.workflow.runner import WorkflowRunner
from storyloom.workflow.validation import WorkflowInvalid
from storyloom.workflow.workflow_file import Workflow
from tests.workflow.conftest import BuildWorkflow, JoinNode, UpperNode


def relay(*plugins: object) -> pluggy.HookRelay:
    manager = pluggy.PluginManager(PROJECT)
    manager.add_hookspecs(hookspecs)
    for plugin in plugins:
        manager.register(plugin)
    return manager.hook


class Rewrite:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    @hookimpl
    def storyloom_workflow_before_execute(
        self, workflow: Workflow, inputs: dict[str, Any]
    ) -> dict[str, Any] | None:
        self.seen.append((workflow.id, dict(inputs)))
        return {"text": inputs["text"] + " by hook"}


class Silent:
    @hookimpl
    def storyloom_workflow_before_execute(self, workflow: Workflow) -> None:
        return None


def interface_workflow(make_workflow: BuildWorkflow) -> Workflow:
    return make_workflow(
        "shout",
        {"in": ("core:GroupInput", {}), "up": ("test:Upper", {}), "out": ("core:GroupOutput", {})},
        ["in.text -> up.text", "up.text -> out.result"],
        interfaceInputs={"text": {"dataFlowType": "STRING", "required": True}},
        interfaceOutputs={"result": {"dataFlowType": "STRING"}},
    )


async def test_before_execute_may_replace_the_inputs(
    registry: NodeRegistry, make_workflow: BuildWorkflow
) -> None:
    rewrite = Rewrite()
    runner = WorkflowRunner(registry, WorkflowServices(hooks=relay(Silent(), rewrite)))
    result = await runner.run(interface_workflow(make_workflow), inputs={"text": "hi"})
    assert result.interface_outputs == {"result": "HI BY HOOK"}
    assert rewrite.seen == [("shout", {"text": "hi"})]


async def test_answers_of_none_leave_the_inputs(
    registry: NodeRegistry, make_workflow: BuildWorkflow
) -> None:
    runner = WorkflowRunner(registry, WorkflowServices(hooks=relay(Silent())))
    result = await runner.run(interface_workflow(make_workflow), inputs={"text": "hi"})
    assert result.interface_outputs == {"result": "HI"}


class Refuse:
    @hookimpl
    def storyloom_nodemanager_before_register(self, node_type: type[NodeType]) -> bool | None:
        return False if node_type.type == "test:Upper" else None


def test_before_register_may_refuse_a_node_type() -> None:
    registry = NodeRegistry()
    registry.hooks = relay(Refuse())
    registry.register(JoinNode)
    with pytest.raises(NodeTypeRefused, match="test:Upper"):
        registry.register(UpperNode)
    assert registry.names() == ["test:Join"]


async def test_an_unregistered_type_is_no_longer_runnable(
    registry: NodeRegistry, make_workflow: BuildWorkflow
) -> None:
    runner = WorkflowRunner(registry, WorkflowServices())
    workflow = interface_workflow(make_workflow)
    assert (await runner.run(workflow, inputs={"text": "a"})).status == "completed"
    assert registry.unregister("test:Upper")
    assert not registry.unregister("test:Upper")
    with pytest.raises(WorkflowInvalid):
        await runner.run(workflow, inputs={"text": "a"})
