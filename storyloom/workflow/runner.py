"""The one runner: computes what a run's targets need, concurrently, cached, with events.

Modelled on ComfyUI's executor, written afresh for asyncio:

- **Only what is needed.** From the target nodes the runner walks upstream along the
  inputs that are not lazy. A node whose output is frozen (pinned in its history) or
  already cached ends the walk: nothing upstream of it runs.
- **Ready queue by blocker counts.** Each pending node counts the upstream nodes it still
  waits for; a node whose count reaches zero is started as its own asyncio task, so
  independent branches overlap (bounded by ``max_concurrency`` per graph, 64 by
  default). CPU-heavy node code goes to a thread through ``ctx.run_blocking``.
- **Lazy inputs** (``Slot(lazy=True)``) are not waited for: before running, the node's
  ``check_lazy`` names the lazy inputs it wants given what it has; their upstream is
  scheduled then and the node asked again when they arrive. A branch never asked for never
  runs.
- **Node expansion**: ``run`` may return a :class:`NodeExpansion`; its nodes run inside
  this run with ids ``<node>/<inner node>`` and the node completes with the mapped outputs.
- **Cache key** = hash of type, version, config (canonical JSON, defaults filled), each
  input's upstream key and slot or its literal value, and the run's interface inputs for
  node types that read them. The key is structural, so it is known before anything runs;
  a non-idempotent node has none until it has run, and what it feeds is then keyed by a
  hash of its actual outputs. A frozen node's key is ``frozen:<history id>``. Cached
  values are the objects the node returned, shared between runs: nodes must not mutate
  their inputs.
- **Failure and cancellation**: a failing node skips its downstream only; other branches
  go on and their outputs are reported. Cancelling cancels every running node task
  (waiting humans included); each reports ``node:cancelled`` with the text it streamed.
  History rows are written only for nodes that completed, one transaction each.
- **Child workflows** (``ctx.run_workflow``) and expansions run as nested graph executions
  of the same run, their node events forwarded with prefixed node ids, at most
  ``MAX_DEPTH`` levels deep.

Hot path (``bench/runner.py``; 1,000 trivial nodes on a 2-core machine): about 35 µs
per node for a workflow the runner has prepared before, twice that for the first run of
a workflow version, which validates it and plans every node (per-node facts, structural
keys); prepared graphs are remembered by a fingerprint of the workflow JSON. Building the
two pydantic events of a node is about a third of the per-node cost. They are built all
the same, validated, even when nothing listens: ``run.events`` is the run's replay log,
a plain list of protocol models that callers filter and serialize, and a lazily
materialised log would make every reader pay instead. Outputs are turned into JSON once
per node, for the event and the history row.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import logging
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal, TypeVar

from pydantic_core import PydanticSerializationError, to_json

from storyloom.core.errors import StoryloomError
from storyloom.workflow.events import (
    NodeCached,
    NodeCancelled,
    NodeCompleted,
    NodeError,
    NodeIteration,
    NodeNeedsHuman,
    NodeOutput,
    NodeStarted,
    NodeStreaming,
    RunEvent,
    WorkflowCompleted,
    WorkflowError,
    WorkflowStarted,
)
from storyloom.workflow.node_cache import CachedOutputs, OutputCache
from storyloom.workflow.node_history import (
    HistoryEntry,
    NodeHistory,
    jsonable_outputs,
    output_preview,
)
from storyloom.workflow.node_registry import NodeRegistry
from storyloom.workflow.node_type import (
    ContextSource,
    Evaluation,
    HumanDecision,
    NodeExpansion,
    NodeType,
    WorkflowServices,
)
from storyloom.workflow.slot_types import ANY, convert, parse_value
from storyloom.workflow.validation import (
    WorkflowInvalid,
    WorkflowProblem,
    check_workflow,
    validate_workflow,
)
from storyloom.workflow.workflow_file import Workflow
from storyloom.workflow.workflow_graph import GROUP_OUTPUT, WorkflowGraph, WorkflowLoader

logger = logging.getLogger(__name__)

MAX_DEPTH = 16
"""How deeply child workflows and expansions may nest."""

T = TypeVar("T")
E = TypeVar(
    "E",
    WorkflowStarted,
    NodeStarted,
    NodeStreaming,
    NodeCompleted,
    NodeCached,
    NodeNeedsHuman,
    NodeIteration,
    NodeError,
    NodeCancelled,
    WorkflowCompleted,
    WorkflowError,
)

_PENDING, _RUNNING, _DONE, _FAILED, _SKIPPED = 1, 2, 3, 4, 5


class WorkflowNestingTooDeep(StoryloomError):
    pass


class ChildWorkflowFailed(StoryloomError):
    """A nested graph (child workflow, expansion, re-run) did not complete. Names the
    deepest failing node by its full id, so nesting does not nest the message too."""

    def __init__(self, what: str, node_id: str, message: str) -> None:
        self.node_id = node_id
        self.message = message
        super().__init__(f"{what} failed at node {node_id!r}: {message}")


@dataclass
class RunResult:
    run_id: str
    status: Literal["completed", "failed", "cancelled"]
    outputs: dict[str, dict[str, Any]]
    """Every top-level node that completed (ran, cached or frozen) → its outputs."""
    interface_outputs: dict[str, Any]
    errors: dict[str, str]
    """Failed node → ``"<ExcType>: message"``; nested nodes by their prefixed id."""
    ran: list[str] = field(default_factory=list)
    cached: list[str] = field(default_factory=list)


def resolve_interface_inputs(workflow: Workflow, given: Mapping[str, Any] | None) -> dict[str, Any]:
    """The run's interface input values: given ones parsed as their ``dataFlowType``,
    absent ones from ``config.default``; raises :class:`WorkflowInvalid` listing every
    unknown, missing or mistyped input."""
    given = given or {}
    declared = workflow.interface_inputs
    problems: list[WorkflowProblem] = []
    values: dict[str, Any] = {}
    for name in given:
        if name not in declared:
            problems.append(
                WorkflowProblem(
                    slot=name,
                    code="bad-interface",
                    message=f"workflow {workflow.id!r} has no input {name!r} "
                    f"(inputs: {', '.join(declared) or 'none'})",
                )
            )
    for name, slot in declared.items():
        raw = given.get(name)
        if raw is not None:
            try:
                values[name] = parse_value(raw, slot.data_flow_type)
            except (ValueError, KeyError) as exc:
                problems.append(
                    WorkflowProblem(
                        slot=name,
                        code="bad-interface",
                        message=f"workflow {workflow.id!r} input {name!r}: {exc}",
                    )
                )
        elif slot.config.default is not None:
            values[name] = slot.config.default
        elif slot.required:
            about = f": {slot.description}" if slot.description else ""
            problems.append(
                WorkflowProblem(
                    slot=name,
                    code="missing-input",
                    message=f"workflow {workflow.id!r} needs input {name!r} "
                    f"({slot.data_flow_type}){about}",
                )
            )
    if problems:
        raise WorkflowInvalid(workflow.id, problems)
    return values


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _canonical(value: Any) -> str | None:
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


class _Input:
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
class _NodePlan:
    node_id: str
    name: str
    type_name: str
    node_type: NodeType
    idempotent: bool
    reads_run_inputs: bool
    config: dict[str, Any]
    signature: str | None
    strong: tuple[_Input, ...]
    lazy: dict[str, _Input]
    connected: tuple[_Input, ...]
    literals: dict[str, Any]
    sources: tuple[str, ...]
    """Distinct upstream nodes of the inputs that are not lazy."""


_KEY_SETS = 8
"""Structural key sets remembered per graph (one per pin set and interface inputs)."""


class _GraphPlan:
    """Per-node facts of one graph, worked out once and shared by its executions (and,
    through the runner's prepared-graph cache, by later runs of the same workflow)."""

    def __init__(
        self, graph: WorkflowGraph, fixed: Mapping[tuple[str, str], Any] | None = None
    ) -> None:
        self.graph = graph
        self.fixed = fixed or {}
        self._nodes: dict[str, _NodePlan] = {}
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

    def node(self, node_id: str) -> _NodePlan:
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
        return _digest("\n".join(parts))

    def _outputs_of(self, node_id: str) -> dict[str, str]:
        types = self._output_types.get(node_id)
        if types is None:
            slots = self.graph.nodes[node_id].slots
            types = {s.name: s.type for s in slots.outputs} if slots else {}
            self._output_types[node_id] = types
        return types

    def _build(self, node_id: str) -> _NodePlan:
        g = self.graph.nodes[node_id]
        node_type, slots = g.node_type, g.slots
        if node_type is None or slots is None:  # check_workflow refuses such graphs
            raise StoryloomError(f"node {node_id!r}: {g.slot_error or 'unknown node type'}")
        config_names = self._config_names.get(node_type.type)
        if config_names is None:
            config_names = frozenset(f.name for f in node_type.config)
            self._config_names[node_type.type] = config_names
        config = node_type.config_with_defaults(_detached(g.node.config))
        feeding = self.graph.incoming.get(node_id, {})
        strong: list[_Input] = []
        lazy: dict[str, _Input] = {}
        literals: dict[str, Any] = {}
        fixed = self.fixed
        for slot in slots.inputs:
            name = slot.name
            edge = feeding.get(name)
            if edge is None:
                if fixed and (node_id, name) in fixed:
                    literals[name] = fixed[(node_id, name)]
                elif name in config_names:
                    literals[name] = config.get(name)
                else:
                    literals[name] = slot.default
                continue
            source_type = self._outputs_of(edge.source).get(edge.source_slot, ANY)
            item = _Input(name, edge.source, edge.source_slot, source_type, slot.type)
            if slot.lazy:
                lazy[name] = item
            else:
                strong.append(item)
        connected = (*strong, *lazy.values())
        if lazy:
            connected = tuple(sorted(connected, key=lambda i: i.slot))
        return _NodePlan(
            node_id=node_id,
            name=g.node.label or str(getattr(node_type, "display_name", node_type.type)),
            type_name=node_type.type,
            node_type=node_type,
            idempotent=node_type.idempotent,
            reads_run_inputs=node_type.reads_run_inputs,
            config=config,
            signature=_canonical((node_type.type, node_type.version, config, literals)),
            strong=tuple(strong),
            lazy=lazy,
            connected=connected,
            literals=literals,
            sources=tuple(dict.fromkeys(i.source for i in strong)),
        )


class _Context:
    """What a running node sees of its run (implements ``NodeContext``)."""

    __slots__ = (
        "_exe",
        "_flush_handle",
        "_full_id",
        "_node",
        "_pending",
        "chunks",
        "evaluation",
        "sources",
    )

    def __init__(self, exe: _Execution, node_id: str, full_id: str) -> None:
        self._exe = exe
        self._node = node_id
        self._full_id = full_id
        self.chunks: list[str] = []
        self.sources: list[ContextSource] = []
        self.evaluation: Evaluation | None = None
        self._pending: list[str] = []
        self._flush_handle: asyncio.Handle | None = None

    @property
    def node_id(self) -> str:
        return self._full_id

    @property
    def run_id(self) -> str:
        return self._exe.run.run_id

    @property
    def services(self) -> WorkflowServices:
        return self._exe.run.runner.services

    @property
    def interface_inputs(self) -> Mapping[str, Any]:
        return self._exe.interface_inputs

    @property
    def cancelled(self) -> bool:
        return self._exe.run.cancelled

    def raise_if_cancelled(self) -> None:
        if self._exe.run.cancelled:
            raise asyncio.CancelledError

    async def emit(self, chunk: str) -> None:
        # Chunks that arrive together go out as one event: the event is sent once the
        # node's task next waits (for the network, as a model's stream does). A slow
        # stream is passed on chunk by chunk; a burst (a local model, text already in
        # the socket buffer) is one event instead of thousands.
        self.chunks.append(chunk)
        self._pending.append(chunk)
        if self._flush_handle is None:
            self._flush_handle = asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """Send what was emitted and not yet sent (the runner calls it as the node ends)."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        if self._pending:
            chunk = "".join(self._pending)
            self._pending.clear()
            self._exe.run._emit(NodeStreaming, node_id=self._full_id, chunk=chunk)

    def report_iteration(
        self,
        iteration: int,
        total: int,
        kind: Literal["recursive", "evolutionary"],
        candidate_count: int | None = None,
    ) -> None:
        self._exe.run._emit(
            NodeIteration,
            node_id=self._full_id,
            iteration=iteration,
            total_iterations=total,
            kind=kind,
            candidate_count=candidate_count,
        )

    async def request_human(
        self,
        reason: str,
        output_preview: str,
        options: Sequence[str] = ("approve", "retry", "edit"),
        candidates: Sequence[str] | None = None,
    ) -> HumanDecision:
        return await self._exe.run._ask_human(
            self._full_id, reason, output_preview, options, candidates
        )

    async def rerun_inputs(self) -> dict[str, Any]:
        return await self._exe.rerun_inputs(self._node)

    async def run_workflow(
        self, workflow: Workflow | str, inputs: Mapping[str, Any]
    ) -> dict[str, Any]:
        return await self._exe.run_child(self._node, workflow, inputs)

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(fn, *args)

    def add_context_source(self, source: ContextSource) -> None:
        self.sources.append(source)

    def set_evaluation(self, evaluation: Evaluation) -> None:
        self.evaluation = evaluation


class _Execution:
    """One graph computed within a run: the top workflow, a child workflow, an expansion
    or a cache-bypassing re-run of some node's upstream."""

    def __init__(
        self,
        run: WorkflowRun,
        plan: _GraphPlan,
        targets: Sequence[str],
        *,
        prefix: str = "",
        depth: int = 0,
        interface_inputs: Mapping[str, Any],
        frozen: Mapping[str, HistoryEntry],
        history_workflow: str | None,
        bypass_cache: bool = False,
    ) -> None:
        self.run = run
        self.plan = plan
        self.targets = list(dict.fromkeys(targets))
        self.prefix = prefix
        self.depth = depth
        self.interface_inputs = interface_inputs
        self.frozen = frozen
        self.history_workflow = history_workflow
        self.bypass_cache = bypass_cache
        self.max_running = run.runner.max_concurrency
        self.state: dict[str, int] = {}
        self.keys: dict[str, str | None] = {}
        self.outputs: dict[str, dict[str, Any]] = {}
        self.previews: dict[str, str] = {}
        self.blockers: dict[str, int] = {}
        self.waiters: dict[str, list[str]] = {}
        self.ready: deque[str] = deque()
        self.running = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self.errors: dict[str, str] = {}
        self.first_error: tuple[str, str] | None = None
        self.root_causes: dict[str, tuple[str, str]] = {}
        """Failed node → (full id, message) of the nested node that failed first."""
        self.visited: list[str] = []
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._deferred: list[tuple[str, str, CachedOutputs]] | None = None
        self._pumping = False
        self._interface_json: str | None = None
        self._fingerprints: dict[str, str] = {}

    # -- planning -------------------------------------------------------------------

    def prepare(self, defer_events: bool = False) -> None:
        """Work out keys and the nodes to compute; resolved ones are done right away."""
        self.run._executions.add(self)
        self._interface_json = _canonical(dict(self.interface_inputs))
        self._fingerprints = self.plan.fingerprints(self.run.runner.services)
        self.keys = self.plan.structural_keys(self.frozen, self._interface_json, self._fingerprints)
        self._deferred = [] if defer_events else None
        self._visit(self.targets)

    def flush_events(self) -> None:
        deferred, self._deferred = self._deferred or [], None
        for node_id, source, hit in deferred:
            self._report_cached(node_id, source, hit)

    def _key(self, node_id: str) -> str | None:
        return self.plan.key(
            node_id, self.keys, self.frozen, self._interface_json, self._fingerprints
        )

    def _visit(self, roots: Sequence[str]) -> None:
        """Plan ``roots`` and what they need, depth first, skipping what is known."""
        state = self.state
        # Reversed pushes: the first root and its first inputs are planned (and run) first.
        stack: list[tuple[str, bool]] = [(r, False) for r in reversed(roots) if r not in state]
        while stack:
            node_id, leaving = stack.pop()
            if leaving:
                self._settle(node_id)
                continue
            if node_id in state:
                continue
            state[node_id] = _PENDING
            self.visited.append(node_id)
            entry = self.frozen.get(node_id)
            if entry is not None:
                self._resolved(node_id, "frozen", CachedOutputs(entry.outputs, entry.id, 0))
                continue
            key = self.keys.get(node_id)
            if key is not None and not self.bypass_cache:
                hit = self.run.runner.cache.get(key)
                if hit is not None:
                    self._resolved(node_id, "cache", hit)
                    continue
            stack.append((node_id, True))
            for source in reversed(self.plan.node(node_id).sources):
                if source not in state:
                    stack.append((source, False))

    def _settle(self, node_id: str) -> None:
        """Count what a newly planned node waits for; queue it when that is nothing."""
        count = 0
        for source in self.plan.node(node_id).sources:
            status = self.state[source]
            if status == _DONE:
                continue
            if status in (_FAILED, _SKIPPED):
                self._fail(node_id, f"upstream node {self.prefix + source!r} failed")
                return
            self.waiters.setdefault(source, []).append(node_id)
            count += 1
        self.blockers[node_id] = count
        if count == 0:
            self.ready.append(node_id)

    def _resolved(self, node_id: str, source: str, hit: CachedOutputs) -> None:
        self.run.cached.append(self.prefix + node_id)
        if self._deferred is not None:
            self._deferred.append((node_id, source, hit))
            self.state[node_id] = _DONE
            self.outputs[node_id] = hit.outputs
            return
        self._report_cached(node_id, source, hit)
        self._complete(node_id, hit.outputs)

    def _report_cached(self, node_id: str, source: str, hit: CachedOutputs) -> None:
        jsonable = jsonable_outputs(hit.outputs)
        preview = self.previews[node_id] = output_preview(jsonable)
        self.run._emit(
            NodeCached,
            node_id=self.prefix + node_id,
            source=source,
            output=preview,
            outputs=jsonable,
            history_id=hit.history_id,
        )

    # -- scheduling -----------------------------------------------------------------

    def pump(self) -> None:
        """Start ready nodes while there is room; settle the execution when all is quiet."""
        if self._pumping:
            return
        self._pumping = True
        try:
            ready, run = self.ready, self.run
            while ready and not run.cancelled and self.running < self.max_running:
                self._start(ready.popleft())
        finally:
            self._pumping = False
        quiet = self.running == 0 and (not self.ready or self.run.cancelled)
        if quiet and not self.done.done():
            self.done.set_result(None)

    def _start(self, node_id: str) -> None:
        if self.state.get(node_id) != _PENDING:
            return
        plan = self.plan.node(node_id)
        if (
            self.keys.get(node_id) is None
            and plan.node_type.idempotent
            and node_id not in self.frozen
        ):
            # Upstream of it was not idempotent: now that it ran, the key is known.
            key = self.keys[node_id] = self._key(node_id)
            if key is not None and not self.bypass_cache:
                hit = self.run.runner.cache.get(key)
                if hit is not None:
                    self._resolved(node_id, "cache", hit)
                    return
        try:
            inputs = self._gather(plan)
            while plan.lazy:
                wanted = plan.node_type.check_lazy(inputs, plan.config)
                missing = [
                    plan.lazy[name] for name in wanted if name in plan.lazy and name not in inputs
                ]
                if not missing:
                    for name in plan.lazy:
                        inputs.setdefault(name, None)
                    break
                if not self._request(node_id, missing):
                    return  # waiting for them, or failed
                inputs = self._gather(plan)
        except Exception as exc:
            self._fail(node_id, f"{type(exc).__name__}: {exc}")
            return
        self.state[node_id] = _RUNNING
        self.running += 1
        task = asyncio.get_running_loop().create_task(self._execute(node_id, plan, inputs))
        self.tasks.add(task)

    def _gather(self, plan: _NodePlan) -> dict[str, Any]:
        inputs = dict(plan.literals)
        outputs = self.outputs
        for item in plan.strong:
            inputs[item.slot] = item.value(outputs[item.source])
        if plan.lazy:
            state = self.state
            for item in plan.lazy.values():
                if state.get(item.source) == _DONE:
                    inputs[item.slot] = item.value(outputs[item.source])
                else:
                    inputs.pop(item.slot, None)
        return inputs

    def _request(self, node_id: str, missing: list[_Input]) -> bool:
        """Schedule the upstream of lazy inputs a node asked for. True when all of them
        are already there (resolved from the cache, say), so the node may ask again."""
        sources = list(dict.fromkeys(item.source for item in missing))
        self._visit(sources)
        count = 0
        for source in sources:
            status = self.state[source]
            if status == _DONE:
                continue
            if status in (_FAILED, _SKIPPED):
                self._fail(node_id, f"upstream node {self.prefix + source!r} failed")
                return False
            self.waiters.setdefault(source, []).append(node_id)
            count += 1
        self.blockers[node_id] = count
        return count == 0

    def _complete(self, node_id: str, outputs: dict[str, Any]) -> None:
        self.state[node_id] = _DONE
        self.outputs[node_id] = outputs
        waiting = self.waiters.pop(node_id, None)
        if waiting:
            blockers, state = self.blockers, self.state
            for waiter in waiting:
                blockers[waiter] -= 1
                if blockers[waiter] == 0 and state[waiter] == _PENDING:
                    self.ready.append(waiter)

    def _fail(self, node_id: str, message: str, *, cancelled: bool = False) -> None:
        self.state[node_id] = _FAILED
        self.errors[node_id] = message
        self.run.errors[self.prefix + node_id] = message
        if self.first_error is None:
            self.first_error = (node_id, message)
        skipped: list[str] = []
        stack = list(self.waiters.pop(node_id, ()))
        while stack:
            waiter = stack.pop()
            if self.state.get(waiter) == _PENDING:
                self.state[waiter] = _SKIPPED
                skipped.append(self.prefix + waiter)
                stack.extend(self.waiters.pop(waiter, ()))
        if not cancelled:
            self.run._emit(NodeError, node_id=self.prefix + node_id, error=message, skipped=skipped)

    # -- running a node -------------------------------------------------------------

    async def _execute(self, node_id: str, plan: _NodePlan, inputs: dict[str, Any]) -> None:
        run = self.run
        full_id = self.prefix + node_id
        ctx = _Context(self, node_id, full_id)
        run._emit(NodeStarted, node_id=full_id, node_name=plan.name, node_type=plan.type_name)
        started = time.perf_counter()
        try:
            try:
                result = await plan.node_type.run(ctx, inputs, plan.config)
            finally:
                ctx.flush()
            if isinstance(result, NodeExpansion):
                result = await self._expand(node_id, result)
            if not isinstance(result, dict):
                raise TypeError(
                    f"node {full_id!r} ({plan.type_name}) returned "
                    f"{type(result).__name__}, not a dict of outputs by slot"
                )
            self._succeeded(node_id, plan, ctx, result, started)
        except asyncio.CancelledError:
            run._emit(NodeCancelled, node_id=full_id, partial_output="".join(ctx.chunks))
            self._fail(node_id, "cancelled", cancelled=True)
        except ChildWorkflowFailed as exc:
            self.root_causes[node_id] = (exc.node_id, exc.message)
            self._fail(node_id, f"{type(exc).__name__}: {exc}")
        except Exception as exc:
            self._fail(node_id, f"{type(exc).__name__}: {exc}")
        finally:
            self.running -= 1
            self.tasks.discard(asyncio.current_task())
            self.pump()

    def _succeeded(
        self,
        node_id: str,
        plan: _NodePlan,
        ctx: _Context,
        outputs: dict[str, Any],
        started: float,
    ) -> None:
        run = self.run
        jsonable = jsonable_outputs(outputs)
        key = self.keys.get(node_id)
        if key is None:
            # Not cacheable itself; what it feeds is keyed by what it actually gave.
            text = _canonical(outputs)
            self.keys[node_id] = "out:" + _digest(text) if text is not None else None
        preview = self.previews[node_id] = output_preview(jsonable)
        history_id = None
        history = run.runner.history
        if history is not None and self.history_workflow is not None:
            history_id = history.record(
                self.history_workflow, node_id, run.run_id, key or "", jsonable, preview
            )
        if key is not None:
            run.runner.cache.put(key, outputs, history_id)
        run.ran.append(self.prefix + node_id)
        extra: dict[str, Any] = {}  # only what is set: defaults cost nothing to validate
        if ctx.evaluation is not None:
            extra["evaluation"] = ctx.evaluation
        if ctx.sources:
            extra["context_sources"] = ctx.sources
        if history_id is not None:
            extra["history_id"] = history_id
        run._emit(
            NodeCompleted,
            node_id=self.prefix + node_id,
            output=preview,
            outputs=jsonable,
            duration_ms=(time.perf_counter() - started) * 1000,
            **extra,
        )
        self._complete(node_id, outputs)

    async def run_to_end(self) -> None:
        self.prepare()
        self.pump()
        try:
            await self.done
        except asyncio.CancelledError:
            for task in list(self.tasks):
                task.cancel()
            raise
        finally:
            if not self.tasks:  # else the run drains them before its last event
                self.run._executions.discard(self)

    def nested_depth(self, node_id: str) -> int:
        depth = self.depth + 1
        if depth > MAX_DEPTH:
            raise WorkflowNestingTooDeep(
                f"node {self.prefix + node_id!r}: workflows and expansions nest deeper than "
                f"{MAX_DEPTH} levels"
            )
        return depth

    def nested_failure(self, what: str) -> ChildWorkflowFailed | None:
        """The error a node running this nested graph raises when it did not complete."""
        failure = self.failure()
        if failure is None:
            return None
        node_id, message = failure
        node_id, message = self.root_causes.get(node_id, (self.prefix + node_id, message))
        return ChildWorkflowFailed(what, node_id, message)

    def failure(self) -> tuple[str, str] | None:
        """The first failing node and its message, or why the targets are not all done."""
        if self.first_error is not None:
            return self.first_error
        for target in self.targets:
            if self.state.get(target) != _DONE:
                return target, "did not complete"
        return None

    def listed(self, node_ids: Iterable[str]) -> list[NodeOutput]:
        """``NodeOutput`` previews of the given nodes (done ones), as run-end events list."""
        listed = []
        for node_id in node_ids:
            preview = self.previews.get(node_id)
            if preview is None and node_id in self.outputs:
                preview = output_preview(jsonable_outputs(self.outputs[node_id]))
            if preview is not None:
                listed.append(NodeOutput(node_id=node_id, output=preview))
        return listed

    def interface_outputs(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for node_id in self.plan.group_outputs:
            if self.state.get(node_id) == _DONE:
                values.update(self.outputs[node_id])
        return values

    async def _expand(self, node_id: str, expansion: NodeExpansion) -> dict[str, Any]:
        depth = self.nested_depth(node_id)
        runner = self.run.runner
        fixed = expansion.inputs
        problems = [
            p
            for p in validate_workflow(expansion.workflow, runner.registry, runner.loader)
            if not (p.code == "missing-input" and (p.node_id, p.slot) in fixed)
        ]
        if problems:
            raise WorkflowInvalid(expansion.workflow.id, problems)
        graph = WorkflowGraph.build(expansion.workflow, runner.registry, runner.loader)
        for slot, (inner, _) in expansion.outputs.items():
            if inner not in graph.nodes:
                raise StoryloomError(
                    f"expansion output {slot!r} names node {inner!r}, which it does not have"
                )
        child = _Execution(
            self.run,
            _GraphPlan(graph, fixed),
            [inner for inner, _ in expansion.outputs.values()],
            prefix=f"{self.prefix}{node_id}/",
            depth=depth,
            interface_inputs=self.interface_inputs,
            frozen={},
            history_workflow=None,
            bypass_cache=self.bypass_cache,
        )
        await child.run_to_end()
        failed = child.nested_failure("the expansion")
        if failed is not None:
            raise failed
        return {
            slot: child.outputs[inner].get(inner_slot)
            for slot, (inner, inner_slot) in expansion.outputs.items()
        }

    async def run_child(
        self, node_id: str, workflow: Workflow | str, inputs: Mapping[str, Any]
    ) -> dict[str, Any]:
        depth = self.nested_depth(node_id)
        runner = self.run.runner
        if isinstance(workflow, str):
            if runner.loader is None:
                raise StoryloomError(
                    f"node {self.prefix + node_id!r}: no workflow library to load {workflow!r} from"
                )
            workflow = runner.loader(workflow)
        plan = runner.prepare(workflow)
        values = resolve_interface_inputs(workflow, inputs)
        history = runner.history
        child = _Execution(
            self.run,
            plan,
            plan.default_targets,
            prefix=f"{self.prefix}{node_id}/",
            depth=depth,
            interface_inputs=values,
            frozen=history.frozen(workflow.id) if history is not None else {},
            history_workflow=workflow.id,
        )
        await child.run_to_end()
        failed = child.nested_failure(f"sub-workflow {workflow.id!r}")
        if failed is not None:
            raise failed
        return child.interface_outputs()

    async def rerun_inputs(self, node_id: str) -> dict[str, Any]:
        plan = self.plan.node(node_id)
        sources = [
            item.source
            for item in plan.connected
            if item in plan.strong or self.state.get(item.source) == _DONE
        ]
        again = _Execution(
            self.run,
            self.plan,
            sources,
            prefix=self.prefix,
            depth=self.depth,
            interface_inputs=self.interface_inputs,
            frozen=self.frozen,
            history_workflow=self.history_workflow,
            bypass_cache=True,
        )
        await again.run_to_end()
        failed = again.nested_failure(f"re-running the inputs of {self.prefix + node_id!r}")
        if failed is not None:
            raise failed
        for source in again.targets:
            self.outputs[source] = again.outputs[source]
            self.previews.pop(source, None)
        inputs = self._gather(plan)
        for name in plan.lazy:
            inputs.setdefault(name, None)
        return inputs


class WorkflowRun:
    """One run under way: its events so far, and the handles to cancel it or answer it."""

    def __init__(
        self,
        runner: WorkflowRunner,
        workflow: Workflow,
        plan: _GraphPlan,
        targets: Sequence[str],
        interface_inputs: dict[str, Any],
        on_event: Callable[[RunEvent], None] | None,
        run_id: str,
    ) -> None:
        self.run_id = run_id
        self.workflow = workflow
        self.runner = runner
        self.events: list[RunEvent] = []
        self.cancelled = False
        self.errors: dict[str, str] = {}
        self.ran: list[str] = []
        self.cached: list[str] = []
        self._on_event = on_event
        self._seq = 0
        self._humans: dict[str, tuple[NodeNeedsHuman, asyncio.Future[HumanDecision]]] = {}
        self._executions: set[_Execution] = set()
        history = runner.history
        self._top = _Execution(
            self,
            plan,
            targets,
            interface_inputs=interface_inputs,
            frozen=history.frozen(workflow.id) if history is not None else {},
            history_workflow=workflow.id,
        )
        self._task = asyncio.get_running_loop().create_task(self._main())

    @property
    def done(self) -> bool:
        return self._task.done()

    def cancel(self) -> None:
        """Stop the run: running nodes are cancelled, nothing new starts."""
        if self.cancelled or self._task.done():
            return
        self.cancelled = True
        for exe in list(self._executions):
            for task in list(exe.tasks):
                task.cancel()
            exe.pump()

    def decide(self, node_id: str, decision: HumanDecision) -> bool:
        """Answer the node's ``node:needs-human``; False when it is not waiting."""
        waiting = self._humans.get(node_id)
        if waiting is None or waiting[1].done():
            return False
        waiting[1].set_result(decision)
        return True

    def waiting_for_human(self) -> dict[str, NodeNeedsHuman]:
        return {node_id: event for node_id, (event, fut) in self._humans.items() if not fut.done()}

    async def wait(self) -> RunResult:
        return await asyncio.shield(self._task)

    def _emit(self, cls: type[E], **fields: Any) -> E:
        self._seq += 1
        event = cls(run_id=self.run_id, seq=self._seq, **fields)
        self.events.append(event)
        if self._on_event is not None:
            try:
                self._on_event(event)
            except Exception:
                logger.exception("run %s: on_event failed on %s", self.run_id, cls.__name__)
        return event

    async def _ask_human(
        self,
        node_id: str,
        reason: str,
        preview: str,
        options: Sequence[str],
        candidates: Sequence[str] | None,
    ) -> HumanDecision:
        event = self._emit(
            NodeNeedsHuman,
            node_id=node_id,
            reason=reason,
            output_preview=preview,
            options=list(options),
            candidates=list(candidates) if candidates is not None else None,
        )
        future: asyncio.Future[HumanDecision] = asyncio.get_running_loop().create_future()
        self._humans[node_id] = (event, future)
        try:
            return await future
        finally:
            if self._humans.get(node_id, (None, None))[1] is future:
                del self._humans[node_id]

    async def _main(self) -> RunResult:
        top = self._top
        try:
            top.prepare(defer_events=True)
            self._emit(
                WorkflowStarted,
                workflow_id=self.workflow.id,
                node_ids=list(top.visited),
            )
            top.flush_events()
            top.pump()
            await top.done
        except asyncio.CancelledError:
            self.cancel()
        except Exception as exc:  # a runner bug must still end the run with an event
            logger.exception("run %s failed inside the runner", self.run_id)
            top.first_error = top.first_error or ("", f"{type(exc).__name__}: {exc}")
            self.cancel()
        await self._drain()
        self._executions.discard(top)
        return self._finish(top)

    async def _drain(self) -> None:
        """Let every cancelled node task report before the run's last event."""
        while True:
            tasks = [t for exe in list(self._executions) for t in exe.tasks]
            if not tasks:
                return
            await asyncio.gather(*tasks, return_exceptions=True)

    def _finish(self, top: _Execution) -> RunResult:
        done = {n: o for n, o in top.outputs.items() if top.state.get(n) == _DONE}
        interface_outputs = top.interface_outputs()
        failure = top.failure()
        status: Literal["completed", "failed", "cancelled"]
        if self.cancelled and failure is not None:
            status = "cancelled"
            self._emit(WorkflowError, error="cancelled", cancelled=True, outputs=top.listed(done))
        elif failure is not None:
            status = "failed"
            node_id, message = failure
            self._emit(
                WorkflowError,
                error=f"node {node_id!r} failed: {message}" if node_id else message,
                node_id=node_id or None,
                outputs=top.listed(done),
            )
        else:
            status = "completed"
            self._emit(
                WorkflowCompleted,
                outputs=top.listed(top.targets),
                interface_outputs=jsonable_outputs(interface_outputs),
            )
        return RunResult(
            run_id=self.run_id,
            status=status,
            outputs=done,
            interface_outputs=interface_outputs,
            errors=dict(self.errors),
            ran=list(self.ran),
            cached=list(self.cached),
        )


_PREPARED_GRAPHS = 32


def _fingerprint(workflow: Workflow) -> str:
    return _digest(workflow.model_dump_json())


@dataclass
class _Prepared:
    plan: _GraphPlan
    loaded: dict[str, str]
    """Workflow id → fingerprint of each workflow loaded while working out slots."""


class WorkflowRunner:
    """Runs workflows against one registry, sharing a cache and a history between runs."""

    def __init__(
        self,
        registry: NodeRegistry,
        services: WorkflowServices | None = None,
        *,
        cache: OutputCache | None = None,
        history: NodeHistory | None = None,
        max_concurrency: int = 64,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.registry = registry
        self.services = services or WorkflowServices()
        self.cache = cache if cache is not None else OutputCache()
        self.history = history
        self.max_concurrency = max_concurrency
        self._prepared: OrderedDict[str, _Prepared] = OrderedDict()

    @property
    def loader(self) -> WorkflowLoader | None:
        return self.services.workflows

    def prepare(self, workflow: Workflow) -> _GraphPlan:
        """The validated, planned graph of ``workflow``; raises :class:`WorkflowInvalid`.

        Remembered by a fingerprint of the workflow's JSON (and of every workflow its
        node slots were worked out from), so a re-run skips validation and planning."""
        try:
            fingerprint: str | None = _fingerprint(workflow)
        except (ValueError, TypeError):  # a config value that is not JSON: no reuse
            fingerprint = None
        if fingerprint is not None:
            known = self._prepared.get(fingerprint)
            if known is not None and self._still_current(known.loaded):
                self._prepared.move_to_end(fingerprint)
                return known.plan
        loaded: dict[str, str] = {}
        loader = self.loader
        recording: WorkflowLoader | None = None
        if loader is not None:
            load = loader

            def recording(workflow_id: str) -> Workflow:
                found = load(workflow_id)
                loaded[workflow_id] = _fingerprint(found)
                return found

        plan = _GraphPlan(check_workflow(workflow, self.registry, recording))
        if fingerprint is not None:
            self._prepared[fingerprint] = _Prepared(plan, loaded)
            if len(self._prepared) > _PREPARED_GRAPHS:
                self._prepared.popitem(last=False)
        return plan

    def _still_current(self, loaded: Mapping[str, str]) -> bool:
        """Whether the workflows a prepared graph was worked out from are unchanged."""
        if not loaded:
            return True
        if self.loader is None:
            return False
        for workflow_id, fingerprint in loaded.items():
            try:
                if _fingerprint(self.loader(workflow_id)) != fingerprint:
                    return False
            except Exception:
                return False
        return True

    def start(
        self,
        workflow: Workflow,
        *,
        inputs: Mapping[str, Any] | None = None,
        outputs: Sequence[str] | None = None,
        on_event: Callable[[RunEvent], None] | None = None,
        run_id: str | None = None,
    ) -> WorkflowRun:
        """Validate and start a run on the running event loop; raises
        :class:`WorkflowInvalid` with every problem before anything runs.

        ``outputs`` names the nodes wanted (default: the GroupOutput nodes, else every
        node whose outputs go nowhere)."""
        plan = self.prepare(workflow)
        graph = plan.graph
        values = resolve_interface_inputs(workflow, inputs)
        targets = list(outputs) if outputs is not None else plan.default_targets
        unknown = [t for t in targets if t not in graph.nodes]
        if unknown:
            raise WorkflowInvalid(
                workflow.id,
                [
                    WorkflowProblem(
                        node_id=t, code="bad-interface", message=f"no node {t!r} to compute"
                    )
                    for t in unknown
                ],
            )
        return WorkflowRun(
            self, workflow, plan, targets, values, on_event, run_id or uuid.uuid4().hex
        )

    async def run(
        self,
        workflow: Workflow,
        *,
        inputs: Mapping[str, Any] | None = None,
        outputs: Sequence[str] | None = None,
        on_event: Callable[[RunEvent], None] | None = None,
        run_id: str | None = None,
    ) -> RunResult:
        """Start a run and wait for its result."""
        run = self.start(workflow, inputs=inputs, outputs=outputs, on_event=on_event, run_id=run_id)
        return await run.wait()
