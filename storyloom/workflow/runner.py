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

This module holds the runner and a run (its events, cancelling, answering humans). A
run's graphs are computed by :mod:`graph_execution` (planning what to compute, the ready
queue, running a node) from the plans of :mod:`graph_plan` (per-node facts and cache
keys); :mod:`run_context` is what a running node sees, :mod:`interface_inputs` parses a
run's inputs.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from storyloom.workflow.events import (
    NodeCached,
    NodeCancelled,
    NodeCompleted,
    NodeError,
    NodeIteration,
    NodeNeedsHuman,
    NodeStarted,
    NodeStreaming,
    NodeToolStep,
    RunEvent,
    WorkflowCompleted,
    WorkflowError,
    WorkflowStarted,
)
from storyloom.workflow.graph_execution import (
    DONE,
    MAX_DEPTH,
    ChildWorkflowFailed,
    GraphExecution,
    WorkflowNestingTooDeep,
)
from storyloom.workflow.graph_plan import GraphPlan, digest
from storyloom.workflow.interface_inputs import resolve_interface_inputs
from storyloom.workflow.node_cache import OutputCache
from storyloom.workflow.node_history import NodeHistory, jsonable_outputs
from storyloom.workflow.node_registry import NodeRegistry
from storyloom.workflow.node_type import HumanDecision, WorkflowServices
from storyloom.workflow.tool_results import REQUEST_START as TAM_START
from storyloom.workflow.validation import WorkflowInvalid, WorkflowProblem, check_workflow
from storyloom.workflow.workflow_file import Workflow
from storyloom.workflow.workflow_graph import WorkflowLoader

__all__ = [
    "MAX_DEPTH",
    "ChildWorkflowFailed",
    "RunResult",
    "WorkflowNestingTooDeep",
    "WorkflowRun",
    "WorkflowRunner",
    "resolve_interface_inputs",
]

logger = logging.getLogger(__name__)

E = TypeVar(
    "E",
    WorkflowStarted,
    NodeStarted,
    NodeStreaming,
    NodeCompleted,
    NodeCached,
    NodeNeedsHuman,
    NodeIteration,
    NodeToolStep,
    NodeError,
    NodeCancelled,
    WorkflowCompleted,
    WorkflowError,
)


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


class WorkflowRun:
    """One run under way: its events so far, and the handles to cancel it or answer it."""

    def __init__(
        self,
        runner: WorkflowRunner,
        workflow: Workflow,
        plan: GraphPlan,
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
        self._executions: set[GraphExecution] = set()
        history = runner.history
        self._top = GraphExecution(
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
            if self.workflow.execute_tool_calls and top.failure() is None:
                await self._run_output_tool_calls(top)
        except asyncio.CancelledError:
            self.cancel()
        except Exception as exc:  # a runner bug must still end the run with an event
            logger.exception("run %s failed inside the runner", self.run_id)
            top.first_error = top.first_error or ("", f"{type(exc).__name__}: {exc}")
            self.cancel()
        await self._drain()
        self._executions.discard(top)
        return self._finish(top)

    async def _run_output_tool_calls(self, top: GraphExecution) -> None:
        """``executeToolCalls``: each text output's TAM blocks run through the tool host
        (as the agent ``workflow:<id>``); the output keeps the text without them and
        each call is a ``node:tool-step`` of its GroupOutput."""
        agents = self.runner.services.agents
        for node_id in top.plan.group_outputs:
            values = top.outputs.get(node_id) or {}
            for name, value in list(values.items()):
                if not isinstance(value, str) or TAM_START not in value:
                    continue
                if agents is None:
                    message = (
                        f"executeToolCalls: output {name!r} holds tool calls and this "
                        "process has no tool host to run them"
                    )
                    self.errors[node_id] = message
                    top.first_error = top.first_error or (node_id, message)
                    return
                done = await agents.run_text_calls(
                    value, run_id=self.run_id, workflow_id=self.workflow.id
                )
                # A new dict: the one there may be the node cache's.
                values = {**values, name: done.text}
                top.outputs[node_id] = values
                for step in done.steps:
                    self._emit(NodeToolStep, node_id=node_id, step=step.model_dump(mode="json"))

    async def _drain(self) -> None:
        """Let every cancelled node task report before the run's last event."""
        while True:
            tasks = [t for exe in list(self._executions) for t in exe.tasks]
            if not tasks:
                return
            await asyncio.gather(*tasks, return_exceptions=True)

    def _finish(self, top: GraphExecution) -> RunResult:
        done = {n: o for n, o in top.outputs.items() if top.state.get(n) == DONE}
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
    return digest(workflow.model_dump_json())


@dataclass
class _Prepared:
    plan: GraphPlan
    loaded: dict[str, str]
    """Workflow id → fingerprint of each workflow loaded while working out slots."""
    generation: int = 0
    """The registry's generation it was planned against (plugins add and remove types)."""


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

    def prepare(self, workflow: Workflow) -> GraphPlan:
        """The validated, planned graph of ``workflow``; raises :class:`WorkflowInvalid`.

        Remembered by a fingerprint of the workflow's JSON (and of every workflow its
        node slots were worked out from), so a re-run skips validation and planning."""
        try:
            fingerprint: str | None = _fingerprint(workflow)
        except (ValueError, TypeError):  # a config value that is not JSON: no reuse
            fingerprint = None
        if fingerprint is not None:
            known = self._prepared.get(fingerprint)
            if (
                known is not None
                and known.generation == self.registry.generation
                and self._still_current(known.loaded)
            ):
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

        plan = GraphPlan(check_workflow(workflow, self.registry, recording))
        if fingerprint is not None:
            self._prepared[fingerprint] = _Prepared(plan, loaded, self.registry.generation)
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
        inputs = self._announce(workflow, inputs)
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

    def _announce(
        self, workflow: Workflow, inputs: Mapping[str, Any] | None
    ) -> Mapping[str, Any] | None:
        """The inputs after the plugins' ``storyloom_workflow_before_execute`` hooks: the
        first dict one returns replaces them."""
        hook = getattr(self.services.hooks, "storyloom_workflow_before_execute", None)
        if hook is None:
            return inputs
        for answer in hook(workflow=workflow, inputs=dict(inputs or {})):
            if isinstance(answer, dict):
                return answer
        return inputs

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
