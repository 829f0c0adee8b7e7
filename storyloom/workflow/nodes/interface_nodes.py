"""A workflow's face to the outside (seed 003 4.1): GroupInput hands out the values a run
was started with, GroupOutput collects what the run gives back. Their slots are the
workflow's ``interfaceInputs`` / ``interfaceOutputs``, so editing the interface edits them."""

from __future__ import annotations

from typing import Any, ClassVar

from storyloom.core.plugin_markers import hookimpl
from storyloom.workflow.node_type import (
    NodeConfig,
    NodeContext,
    NodeExpansion,
    NodeSlots,
    NodeType,
    Slot,
    SlotEnvironment,
)
from storyloom.workflow.workflow_file import WorkflowNode


class GroupInput(NodeType):
    """Outputs one slot per ``interfaceInputs`` entry, valued from the run's inputs."""

    type: ClassVar[str] = "core:GroupInput"
    display_name: ClassVar[str] = "Group input"
    category: ClassVar[str] = "Interface"
    description: ClassVar[str] = (
        "The workflow's inputs (its interfaceInputs): what a caller, a tool call or the "
        "command line passes in."
    )
    dynamic_slots: ClassVar[bool] = True
    reads_run_inputs: ClassVar[bool] = True

    def slots(self, node: WorkflowNode, env: SlotEnvironment) -> NodeSlots:
        outputs = tuple(
            Slot(
                name=name,
                type=slot.data_flow_type,
                description=slot.description,
                required=slot.required,
                default=slot.config.default,
            )
            for name, slot in env.workflow.interface_inputs.items()
        )
        return NodeSlots((), outputs)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: NodeConfig
    ) -> dict[str, Any] | NodeExpansion:
        return dict(ctx.interface_inputs)


class GroupOutput(NodeType):
    """Inputs one optional slot per ``interfaceOutputs`` entry and passes them on; the
    runner reports them as the run's interface outputs."""

    type: ClassVar[str] = "core:GroupOutput"
    display_name: ClassVar[str] = "Group output"
    category: ClassVar[str] = "Interface"
    description: ClassVar[str] = (
        "The workflow's outputs (its interfaceOutputs): what the run gives back to its caller."
    )
    dynamic_slots: ClassVar[bool] = True

    def slots(self, node: WorkflowNode, env: SlotEnvironment) -> NodeSlots:
        inputs = tuple(
            Slot(name=name, type=slot.data_flow_type, description=slot.description, required=False)
            for name, slot in env.workflow.interface_outputs.items()
        )
        return NodeSlots(inputs, ())

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: NodeConfig
    ) -> dict[str, Any] | NodeExpansion:
        return dict(inputs)


@hookimpl
def storyloom_node_types() -> list[type[NodeType]]:
    return [GroupInput, GroupOutput]
