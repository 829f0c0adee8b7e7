"""Calling another workflow of the project through its interface (seed 003 4.1.1).

The helpers here (loading a referenced workflow for ``slots``, its interface as slots)
are shared with the iteration nodes, which call workflows the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from pydantic import Field

from storyloom.core.errors import FileFormatError, NotFound, StoryloomError
from storyloom.core.plugin_markers import hookimpl
from storyloom.workflow.node_type import (
    WORKFLOW_PICKER,
    NodeConfig,
    NodeContext,
    NodeExpansion,
    NodeSlots,
    NodeType,
    Slot,
    SlotEnvironment,
)
from storyloom.workflow.workflow_file import InterfaceSlot, Workflow, WorkflowNode


class SubWorkflowMissing(NotFound):
    """A node names a workflow that the project does not have (or that does not load)."""


def load_referenced(env: SlotEnvironment, field: str, workflow_id: str) -> Workflow:
    """``workflow_id`` (the value of config ``field``) loaded through ``env``; a missing or
    broken file is a :class:`SubWorkflowMissing` saying which."""
    if workflow_id == env.workflow.id:
        raise StoryloomError(
            f"config {field!r} names this workflow itself ({workflow_id!r});"
            " a workflow cannot call itself as a node (use core:Recursive for repetition)"
        )
    try:
        return env.load_workflow(workflow_id)
    except FileFormatError as exc:
        reason = "; ".join(str(p) for p in exc.problems) or "unreadable"
        if any(p.reason == "no such file" for p in exc.problems):
            reason = "no such workflow in the project"
        raise SubWorkflowMissing(
            f"config {field!r} names workflow {workflow_id!r}: {reason}"
        ) from None
    except LookupError as exc:
        raise SubWorkflowMissing(
            f"config {field!r} names workflow {workflow_id!r}: {exc}"
        ) from None


def load_for_run(ctx: NodeContext, field: str, workflow_id: str) -> Workflow:
    """``workflow_id`` loaded once at the start of a node's run, so every call the node makes
    runs the same version even if the file is saved meanwhile."""
    loader = ctx.services.workflows
    if loader is None:
        raise StoryloomError(
            f"no workflow library in this run to load {workflow_id!r} (config {field!r}) from"
        )
    try:
        return loader(workflow_id)
    except (FileFormatError, LookupError) as exc:
        raise SubWorkflowMissing(
            f"config {field!r} names workflow {workflow_id!r}: {exc}"
        ) from None


def interface_input_slots(workflow: Workflow) -> tuple[Slot, ...]:
    return tuple(
        _interface_slot(name, slot, as_input=True)
        for name, slot in workflow.interface_inputs.items()
    )


def interface_output_slots(workflow: Workflow) -> tuple[Slot, ...]:
    return tuple(
        _interface_slot(name, slot, as_input=False)
        for name, slot in workflow.interface_outputs.items()
    )


def _interface_slot(name: str, slot: InterfaceSlot, *, as_input: bool) -> Slot:
    return Slot(
        name=name,
        type=slot.data_flow_type,
        description=slot.description,
        required=slot.required if as_input else True,
        default=slot.config.default if as_input else None,
    )


def given_inputs(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs that carry a value: an unset optional input is left out, so the called
    workflow applies its own interface default."""
    return {name: value for name, value in inputs.items() if value is not None}


WorkflowId = Annotated[str, WORKFLOW_PICKER]
"""A config field naming another workflow of the project (the canvas offers a picker)."""


class SubWorkflowConfig(NodeConfig):
    workflow: WorkflowId = Field(description="The id of the workflow to call (its file name)")


class SubWorkflowNode(NodeType[SubWorkflowConfig]):
    """Runs another workflow: this node's inputs and outputs are that workflow's
    ``interfaceInputs`` and ``interfaceOutputs``.

    Not idempotent on purpose: the cache key knows the called workflow only by its id, so
    an edit to that file would not invalidate a cached result. The called workflow's own
    nodes are cached one by one, so running this node again recomputes only what changed.
    """

    type: ClassVar[str] = "core:SubWorkflow"
    display_name: ClassVar[str] = "Sub-workflow"
    category: ClassVar[str] = "Flow"
    description: ClassVar[str] = (
        "Run another workflow of the project through its interface (its GroupInput and "
        "GroupOutput); the slots follow that workflow's interfaceInputs / interfaceOutputs."
    )
    idempotent: ClassVar[bool] = False
    dynamic_slots: ClassVar[bool] = True

    def slots(self, node: WorkflowNode, env: SlotEnvironment) -> NodeSlots:
        config = self.lenient_config(node.config)
        workflow_id = config.workflow.strip() if config else ""
        if not workflow_id:
            return NodeSlots((), ())  # config validation reports the missing id
        workflow = load_referenced(env, "workflow", workflow_id)
        return NodeSlots(interface_input_slots(workflow), interface_output_slots(workflow))

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: SubWorkflowConfig
    ) -> dict[str, Any] | NodeExpansion:
        workflow_id = config.workflow
        return await ctx.run_workflow(workflow_id, given_inputs(inputs))


@hookimpl
def storyloom_node_types() -> list[type[NodeType]]:
    return [SubWorkflowNode]
