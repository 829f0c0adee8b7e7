"""What the runner works out once per graph: each node's plan and the structural keys.

A :class:`GraphPlan` is shared by the executions of its graph and, through the runner's
prepared-graph cache, by later runs of the same workflow. A node's :class:`NodePlan`
says where each input comes from (and how it converts), its literal inputs, its config
with defaults filled and its signature; its cache key is the hash of that signature and
its upstream keys, known before anything runs for idempotent nodes.
"""

from __future__ import annotations

import copy
import hashlib
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from pydantic_core import PydanticSerializationError, to_json

from storyloom.core.errors import StoryloomError
from storyloom.workflow.node_history import HistoryEntry
from storyloom.workflow.node_type import NodeConfig, NodeType, WorkflowServices
from storyloom.workflow.slot_types import ANY, convert
from storyloom.workflow.workflow_graph import GROUP_OUTPUT, WorkflowGraph


def digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def canonical_json(value: Any) -> str | None:
    """``value`` as JSON for a cache key, or None when it holds something JSON cannot say
    exactly (a numpy array's text is abridged): such a value keys nothing, so two
    different ones never share a cache entry. Keys come in a fixed order (config fields
    in declaration order, slots in slot order), so no sorting is needed."""
    try:
        return to_json(value, inf_nan_mode="constants").decode()
    except (TypeError, ValueError, PydanticSerializationError):
        return None


def _detached(config: dict[str, Any]) -> dict[str, Any]:
    """A copy sharing no container with the workflow object, which callers may edit
    in place while this plan is remembered."""
    if any(isinstance(v, (dict, list)) for v in config.values()):
        return copy.deepcopy(config)
    return dict(config)


class PlannedInput:
    """One connected input: where its value comes from and how it converts on the way."""

    __slots__ = ("same_type", "slot", "source", "source_slot", "source_type", "target_type")

    def __init__(
        self, slot: str, source: str, source_slot: str, source_type: str, target_type: str
    ) -> None:
        self.slot = slot
        self.source = source
        self.source_slot = source_slot
        self.source_type = source_type
        self.target_type = target_type
        self.same_type = source_type == target_type or ANY in (source_type, target_type)

    def value(self, outputs: dict[str, Any]) -> Any:
        value = outputs.get(self.source_slot)
        if self.same_type:
            return value
        return convert(value, self.source_type, self.target_type)


@dataclass(slots=True)
class NodePlan:
    node_id: str
    name: str
    type_name: str
    node_type: NodeType
    idempotent: bool
    reads_run_inputs: bool
    config: NodeConfig
    signature: str | None
    strong: tuple[PlannedInput, ...]
    lazy: dict[str, PlannedInput]
    connected: tuple[PlannedInput, ...]
    literals: dict[str, Any]
    sources: tuple[str, ...]
    """Distinct upstream nodes of the inputs that are not lazy."""


_KEY_SETS = 8
"""Structural key sets remembered per graph (one per pin set and interface inputs)."""


class GraphPlan:
    """Per-node facts of one graph, worked out once and shared by its executions (and,
    through the runner's prepared-graph cache, by later runs of the same workflow)."""

    def __init__(
        self, graph: WorkflowGraph, fixed: Mapping[tuple[str, str], Any] | None = None
    ) -> None:
        self.graph = graph
        self.fixed = fixed or {}
        self._nodes: dict[str, NodePlan] = {}
        self._order: list[str] | None = None
        self._output_types: dict[str, dict[str, str]] = {}
        self._config_names: dict[str, frozenset[str]] = {}
        self._key_sets: OrderedDict[tuple[str, str | None, str], dict[str, str | None]] = (
            OrderedDict()
        )

    def order(self) -> list[str]:
        """Node ids, each after what feeds it (Kahn's algorithm over the edge index)."""
        if self._order is None:
            self._order = self.graph.order()
        return self._order

    @cached_property
    def default_targets(self) -> list[str]:
        return self.graph.default_targets()

    @cached_property
    def group_outputs(self) -> list[str]:
        return [n for n, g in self.graph.nodes.items() if g.node.type == GROUP_OUTPUT]

    def node(self, node_id: str) -> NodePlan:
        plan = self._nodes.get(node_id)
        if plan is None:
            plan = self._nodes[node_id] = self._build(node_id)
        return plan

    def fingerprints(self, services: WorkflowServices) -> dict[str, str]:
        """Each node's ``fingerprint`` for this run, for the types that have one."""
        found: dict[str, str] = {}
        for node_id, g in self.graph.nodes.items():
            node_type = g.node_type
            if node_type is None or type(node_type).fingerprint is NodeType.fingerprint:
                continue
            mark = node_type.fingerprint(self.node(node_id).config, services)
            if mark is not None:
                found[node_id] = mark
        return found

    def structural_keys(
        self,
        frozen: Mapping[str, HistoryEntry],
        interface_json: str | None,
        fingerprints: Mapping[str, str],
    ) -> dict[str, str | None]:
        """Every node's key as far as it is known before anything runs (a fresh copy)."""
        memo = (
            repr(sorted((n, e.id) for n, e in frozen.items())),
            interface_json,
            repr(sorted(fingerprints.items())),
        )
        keys = self._key_sets.get(memo)
        if keys is None:
            keys = {}
            for node_id in self.order():
                keys[node_id] = self.key(node_id, keys, frozen, interface_json, fingerprints)
            self._key_sets[memo] = keys
            if len(self._key_sets) > _KEY_SETS:
                self._key_sets.popitem(last=False)
        else:
            self._key_sets.move_to_end(memo)
        return dict(keys)

    def key(
        self,
        node_id: str,
        keys: Mapping[str, str | None],
        frozen: Mapping[str, HistoryEntry],
        interface_json: str | None,
        fingerprints: Mapping[str, str],
    ) -> str | None:
        """The node's cache key from its upstream ``keys``; None while one is unknown."""
        entry = frozen.get(node_id)
        if entry is not None:
            return f"frozen:{entry.id}"
        plan = self.node(node_id)
        if not plan.idempotent or plan.signature is None:
            return None
        parts = [plan.signature]
        for item in plan.connected:
            upstream = keys.get(item.source)
            if upstream is None:
                return None
            parts.append(f"{item.slot}<{upstream}.{item.source_slot}")
        if plan.reads_run_inputs:
            if interface_json is None:
                return None
            parts.append(interface_json)
        mark = fingerprints.get(node_id)
        if mark is not None:
            parts.append(mark)
        return digest("\n".join(parts))

    def _outputs_of(self, node_id: str) -> dict[str, str]:
        types = self._output_types.get(node_id)
        if types is None:
            slots = self.graph.nodes[node_id].slots
            types = {s.name: s.type for s in slots.outputs} if slots else {}
            self._output_types[node_id] = types
        return types

    def _build(self, node_id: str) -> NodePlan:
        g = self.graph.nodes[node_id]
        node_type, slots = g.node_type, g.slots
        if node_type is None or slots is None:  # check_workflow refuses such graphs
            raise StoryloomError(f"node {node_id!r}: {g.slot_error or 'unknown node type'}")
        config_names = self._config_names.get(node_type.type)
        if config_names is None:
            config_names = frozenset(node_type.config_names())
            self._config_names[node_type.type] = config_names
        config = node_type.parse_config(_detached(g.node.config))
        feeding = self.graph.incoming.get(node_id, {})
        strong: list[PlannedInput] = []
        lazy: dict[str, PlannedInput] = {}
        literals: dict[str, Any] = {}
        fixed = self.fixed
        for slot in slots.inputs:
            name = slot.name
            edge = feeding.get(name)
            if edge is None:
                if fixed and (node_id, name) in fixed:
                    literals[name] = fixed[(node_id, name)]
                elif name in config_names:
                    literals[name] = getattr(config, name)
                else:
                    literals[name] = slot.default
                continue
            source_type = self._outputs_of(edge.source).get(edge.source_slot, ANY)
            item = PlannedInput(name, edge.source, edge.source_slot, source_type, slot.type)
            if slot.lazy:
                lazy[name] = item
            else:
                strong.append(item)
        connected = (*strong, *lazy.values())
        if lazy:
            connected = tuple(sorted(connected, key=lambda i: i.slot))
        return NodePlan(
            node_id=node_id,
            name=g.node.label or str(getattr(node_type, "display_name", node_type.type)),
            type_name=node_type.type,
            node_type=node_type,
            idempotent=node_type.idempotent,
            reads_run_inputs=node_type.reads_run_inputs,
            config=config,
            signature=canonical_json(
                (node_type.type, node_type.version, config.model_dump(), literals)
            ),
            strong=tuple(strong),
            lazy=lazy,
            connected=connected,
            literals=literals,
            sources=tuple(dict.fromkeys(i.source for i in strong)),
        )
