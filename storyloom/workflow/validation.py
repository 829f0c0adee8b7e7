"""Checking a workflow whole before it runs: every problem at once, each naming its node
and slot, so a hand-edited file can be fixed in one pass instead of one error per run."""

from __future__ import annotations

import difflib
from collections import Counter
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from storyloom.core.errors import StoryloomError
from storyloom.workflow import slot_types
from storyloom.workflow.node_registry import NodeRegistry
from storyloom.workflow.workflow_file import InterfaceSlot, Workflow, WorkflowEdge
from storyloom.workflow.workflow_graph import GraphNode, WorkflowGraph, WorkflowLoader

ProblemCode = Literal[
    "unknown-type",
    "missing-input",
    "type-mismatch",
    "cycle",
    "bad-config",
    "dangling-edge",
    "duplicate-id",
    "unknown-slot",
    "duplicate-input",
    "bad-interface",
    "missing-workflow",
]


class WorkflowProblem(BaseModel):
    """One thing wrong with a workflow, located by node, slot and config field."""

    model_config = ConfigDict(populate_by_name=True, frozen=True)

    node_id: str | None = Field(default=None, alias="nodeId")
    slot: str | None = None
    field: str | None = None
    code: ProblemCode
    message: str

    def __str__(self) -> str:
        return self.message


class WorkflowInvalid(StoryloomError):
    """A workflow that cannot run; ``problems`` lists everything wrong with it."""

    def __init__(self, workflow_id: str, problems: list[WorkflowProblem]) -> None:
        self.workflow_id = workflow_id
        self.problems = problems
        lines = "\n".join(f"- {p.message}" for p in problems)
        super().__init__(f"workflow {workflow_id!r} has {len(problems)} problem(s):\n{lines}")


def validate_workflow(
    workflow: Workflow, registry: NodeRegistry, loader: WorkflowLoader | None = None
) -> list[WorkflowProblem]:
    """Every problem of ``workflow``; an empty list means it may run."""
    return graph_problems(WorkflowGraph.build(workflow, registry, loader), registry)


def check_workflow(
    workflow: Workflow, registry: NodeRegistry, loader: WorkflowLoader | None = None
) -> WorkflowGraph:
    """The resolved graph of a valid workflow; raises :class:`WorkflowInvalid` otherwise."""
    graph = WorkflowGraph.build(workflow, registry, loader)
    problems = graph_problems(graph, registry)
    if problems:
        raise WorkflowInvalid(workflow.id, problems)
    return graph


def graph_problems(graph: WorkflowGraph, registry: NodeRegistry) -> list[WorkflowProblem]:
    """Every problem of a graph already built, for a caller that also reads its slots."""
    workflow = graph.workflow
    problems: list[WorkflowProblem] = []
    problems += _interface_problems("interfaceInputs", workflow.interface_inputs)
    problems += _interface_problems("interfaceOutputs", workflow.interface_outputs)
    for node_id, count in Counter(n.id for n in workflow.nodes).items():
        if count > 1:
            problems.append(
                WorkflowProblem(
                    node_id=node_id,
                    code="duplicate-id",
                    message=f"node id {node_id!r} is used by {count} nodes; ids must be unique",
                )
            )
    for node_id, g in graph.nodes.items():
        problems += _node_problems(node_id, g, graph, registry)
    for edge in graph.dangling:
        problems.append(_dangling(edge, graph))
    for edge in workflow.edges:
        problems += _edge_problems(edge, graph)
    for edge in graph.duplicate_inputs:
        first = graph.incoming[edge.target][edge.target_slot]
        problems.append(
            WorkflowProblem(
                node_id=edge.target,
                slot=edge.target_slot,
                code="duplicate-input",
                message=(
                    f"node {edge.target!r} input {edge.target_slot!r} is fed by two edges "
                    f"({_end(first.source, first.source_slot)} and "
                    f"{_end(edge.source, edge.source_slot)}); an input takes one"
                ),
            )
        )
    for cycle in graph.cycles():
        problems.append(
            WorkflowProblem(
                node_id=cycle[0],
                code="cycle",
                message=f"cycle: {' → '.join(cycle)}; a workflow must not feed a node its own"
                " output",
            )
        )
    return problems


def _interface_problems(where: str, slots: dict[str, InterfaceSlot]) -> list[WorkflowProblem]:
    out: list[WorkflowProblem] = []
    for name, slot in slots.items():
        if not slot_types.is_known_type(slot.data_flow_type):
            out.append(
                WorkflowProblem(
                    slot=name,
                    field=f"{where}.{name}.dataFlowType",
                    code="bad-interface",
                    message=(
                        f"{where} {name!r}: unknown dataFlowType {slot.data_flow_type!r} "
                        f"(known: {', '.join(slot_types.ALL_TYPES)})"
                    ),
                )
            )
    return out


def _node_problems(
    node_id: str, g: GraphNode, graph: WorkflowGraph, registry: NodeRegistry
) -> list[WorkflowProblem]:
    if g.node_type is None:
        close = difflib.get_close_matches(g.node.type, registry.names(), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        return [
            WorkflowProblem(
                node_id=node_id,
                code="unknown-type",
                message=f"node {node_id!r}: unknown node type {g.node.type!r}{hint}",
            )
        ]
    out = [
        WorkflowProblem(
            node_id=node_id,
            field=f"nodes.{node_id}.config.{path}",
            code="bad-config",
            message=f"node {node_id!r} config {path!r}: {reason}",
        )
        for path, reason in g.node_type.config_problems(g.node.config)
    ]
    if g.slot_error is not None or g.slots is None:
        out.append(
            WorkflowProblem(
                node_id=node_id,
                code="missing-workflow",
                message=f"node {node_id!r}: {g.slot_error or 'its slots could not be worked out'}",
            )
        )
        return out
    fields = g.node_type.config_model.model_fields
    feeding = graph.incoming.get(node_id, {})
    for slot in g.slots.inputs:
        if not slot.required or slot.name in feeding:
            continue
        field = fields.get(slot.name)
        value = g.node.config.get(slot.name)
        if value is None and field is not None and not field.is_required():
            value = field.get_default(call_default_factory=True)
        if value is None:
            how = "connect it or set its config value" if field is not None else "connect it"
            out.append(
                WorkflowProblem(
                    node_id=node_id,
                    slot=slot.name,
                    code="missing-input",
                    message=(
                        f"node {node_id!r} input {slot.name!r} ({slot.type}) is required: {how}"
                    ),
                )
            )
    return out


def _dangling(edge: WorkflowEdge, graph: WorkflowGraph) -> WorkflowProblem:
    missing = [n for n in dict.fromkeys((edge.source, edge.target)) if n not in graph.nodes]
    names = " and ".join(repr(n) for n in missing)
    return WorkflowProblem(
        node_id=missing[0],
        slot=edge.target_slot if edge.target in missing else edge.source_slot,
        code="dangling-edge",
        message=(
            f"edge {_end(edge.source, edge.source_slot)} → {_end(edge.target, edge.target_slot)}"
            f" names node {names}, which is not in the workflow"
        ),
    )


def _edge_problems(edge: WorkflowEdge, graph: WorkflowGraph) -> list[WorkflowProblem]:
    source, target = graph.nodes.get(edge.source), graph.nodes.get(edge.target)
    if source is None or target is None:
        return []  # reported as dangling
    out: list[WorkflowProblem] = []
    source_slot = target_slot = None
    if source.slots is not None:
        source_slot = source.slots.output(edge.source_slot)
        if source_slot is None:
            out.append(_unknown_slot(edge.source, edge.source_slot, "output", source))
    if target.slots is not None:
        target_slot = target.slots.input(edge.target_slot)
        if target_slot is None:
            out.append(_unknown_slot(edge.target, edge.target_slot, "input", target))
    if source_slot is None or target_slot is None:
        return out
    if not slot_types.can_connect(source_slot.type, target_slot.type):
        out.append(
            WorkflowProblem(
                node_id=edge.target,
                slot=edge.target_slot,
                code="type-mismatch",
                message=(
                    f"node {edge.target!r} input {edge.target_slot!r} takes "
                    f"{target_slot.type} but {_end(edge.source, edge.source_slot)} gives "
                    f"{source_slot.type}; {_conversions(source_slot.type, target_slot.type)}"
                ),
            )
        )
    return out


def _unknown_slot(node_id: str, name: str, kind: str, g: GraphNode) -> WorkflowProblem:
    assert g.slots is not None
    known = [s.name for s in (g.slots.outputs if kind == "output" else g.slots.inputs)]
    return WorkflowProblem(
        node_id=node_id,
        slot=name,
        code="unknown-slot",
        message=(
            f"node {node_id!r} ({g.node.type}) has no {kind} {name!r} "
            f"({kind}s: {', '.join(known) or 'none'})"
        ),
    )


def _conversions(source: str, target: str) -> str:
    """Which conversions exist around a refused edge, so the fix is obvious."""
    feeds = [t for t in slot_types.ALL_TYPES if slot_types.can_connect(source, t)]
    accepts = [t for t in slot_types.ALL_TYPES if slot_types.can_connect(t, target)]
    return f"{source} can feed {', '.join(feeds)}; {target} accepts {', '.join(accepts)}"


def _end(node_id: str, slot: str) -> str:
    return f"{node_id}.{slot}"
