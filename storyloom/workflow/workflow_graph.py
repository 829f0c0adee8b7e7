"""A workflow resolved against the node registry: each node's type and slots, and its
edges indexed both ways. Validation reports on it; the runner schedules from it."""

from __future__ import annotations

import graphlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from storyloom.core.errors import NotFound, StoryloomError
from storyloom.workflow.node_registry import NodeRegistry
from storyloom.workflow.node_type import NodeSlots, NodeType
from storyloom.workflow.workflow_file import Workflow, WorkflowEdge, WorkflowNode

WorkflowLoader = Callable[[str], Workflow]
GROUP_OUTPUT = "core:GroupOutput"


class WorkflowNotFound(NotFound):
    pass


@dataclass
class _Environment:
    workflow: Workflow
    loader: WorkflowLoader | None

    def load_workflow(self, workflow_id: str) -> Workflow:
        if self.loader is None:
            raise WorkflowNotFound(f"no workflow library here to load {workflow_id!r} from")
        return self.loader(workflow_id)


@dataclass
class GraphNode:
    node: WorkflowNode
    node_type: NodeType | None
    slots: NodeSlots | None
    slot_error: str | None = None
    """Why the slots could not be worked out (a sub-workflow that does not load)."""


@dataclass
class WorkflowGraph:
    workflow: Workflow
    nodes: dict[str, GraphNode]
    incoming: dict[str, dict[str, WorkflowEdge]] = field(default_factory=dict)
    """node id → input slot → the edge feeding it (the first one, when a file has two)."""
    outgoing: dict[str, list[WorkflowEdge]] = field(default_factory=dict)
    duplicate_inputs: list[WorkflowEdge] = field(default_factory=list)
    dangling: list[WorkflowEdge] = field(default_factory=list)
    """Edges naming a node that is not in the workflow."""
    _order: list[str] | None = field(default=None, repr=False)

    @classmethod
    def build(
        cls, workflow: Workflow, registry: NodeRegistry, loader: WorkflowLoader | None = None
    ) -> WorkflowGraph:
        env = _Environment(workflow, loader)
        nodes: dict[str, GraphNode] = {}
        for node in workflow.nodes:
            if node.id in nodes:
                continue  # validation reports duplicate ids; the first one counts
            node_type = registry.get(node.type)
            slots: NodeSlots | None = None
            error: str | None = None
            if node_type is not None:
                try:
                    slots = node_type.slots(node, env)
                except StoryloomError as exc:
                    error = str(exc)
            nodes[node.id] = GraphNode(node, node_type, slots, error)
        graph = cls(workflow, nodes, {node_id: {} for node_id in nodes}, {n: [] for n in nodes})
        for edge in workflow.edges:
            if edge.source not in nodes or edge.target not in nodes:
                graph.dangling.append(edge)
                continue
            feeding = graph.incoming[edge.target]
            if edge.target_slot in feeding:
                graph.duplicate_inputs.append(edge)
                continue
            feeding[edge.target_slot] = edge
            graph.outgoing[edge.source].append(edge)
        return graph

    def predecessors(self, node_id: str) -> set[str]:
        return {edge.source for edge in self.incoming.get(node_id, {}).values()}

    def cycles(self) -> list[list[str]]:
        """Each cycle found, as the node ids along it with the first repeated at the end."""
        found: list[list[str]] = []
        if self.order_or_none() is not None:
            return found  # the common case, answered by one Kahn pass
        remaining = {node_id: self.predecessors(node_id) for node_id in self.nodes}
        while True:
            try:
                graphlib.TopologicalSorter(remaining).prepare()
                return found
            except graphlib.CycleError as exc:
                # graphlib reports one cycle as [a, b, ..., a], each feeding the next.
                cycle = list(exc.args[1])
                found.append(cycle)
                # Break it (drop one of its edges) and look for more.
                remaining[cycle[1]] = remaining[cycle[1]] - {cycle[0]}

    def order_or_none(self) -> list[str] | None:
        """Node ids, each after what feeds it (Kahn's algorithm); None when there is a cycle."""
        if self._order is None:
            self._order = self._kahn()
        return self._order if len(self._order) == len(self.nodes) else None

    def _kahn(self) -> list[str]:
        waiting = {
            n: len({e.source for e in inputs.values()}) for n, inputs in self.incoming.items()
        }
        order = [n for n, count in waiting.items() if count == 0]
        for node_id in order:  # grows while it is walked
            for target in {e.target for e in self.outgoing[node_id]}:
                waiting[target] -= 1
                if waiting[target] == 0:
                    order.append(target)
        return order  # shorter than the node list when some nodes sit on a cycle

    def order(self) -> list[str]:
        """Node ids, each after what feeds it; raises ``ValueError`` on a cycle (validation
        reports cycles before anything asks for an order)."""
        order = self.order_or_none()
        if order is None:
            raise ValueError(f"workflow {self.workflow.id!r} has a cycle")
        return order

    def ancestors(self, targets: Iterable[str]) -> set[str]:
        """``targets`` and every node they depend on."""
        seen: set[str] = set()
        stack = [t for t in targets if t in self.nodes]
        while stack:
            node_id = stack.pop()
            if node_id in seen:
                continue
            seen.add(node_id)
            stack.extend(self.predecessors(node_id) - seen)
        return seen

    def default_targets(self) -> list[str]:
        """What a run computes when not told: the GroupOutput nodes, or else every node
        whose outputs go nowhere."""
        outputs = [n for n, g in self.nodes.items() if g.node.type == GROUP_OUTPUT]
        if outputs:
            return outputs
        return [n for n in self.nodes if not self.outgoing.get(n)]
