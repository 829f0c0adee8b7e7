"""One graph computed within a run: planning, the ready queue and running its nodes.

A :class:`GraphExecution` is the top workflow of a run, a child workflow, an expansion
or a cache-bypassing re-run of a node's upstream. It walks upstream from its targets to
what must be computed (frozen and cached nodes end the walk), counts for each pending
node the upstream nodes it waits for, starts a node as its own task when that count
reaches zero, and on completion records history, fills the cache, emits the node's
events and releases what waited for it. A failing node skips its downstream only.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from storyloom.core.errors import StoryloomError
from storyloom.workflow.events import (
    NodeCached,
    NodeCancelled,
    NodeCompleted,
    NodeError,
    NodeOutput,
    NodeStarted,
)
from storyloom.workflow.graph_plan import GraphPlan, NodePlan, PlannedInput, canonical_json, digest
from storyloom.workflow.interface_inputs import resolve_interface_inputs
from storyloom.workflow.node_cache import CachedOutputs
from storyloom.workflow.node_history import HistoryEntry, jsonable_outputs, output_preview
from storyloom.workflow.node_type import NodeExpansion
from storyloom.workflow.run_context import RunContext
from storyloom.workflow.validation import WorkflowInvalid, validate_workflow
from storyloom.workflow.workflow_file import Workflow
from storyloom.workflow.workflow_graph import WorkflowGraph

if TYPE_CHECKING:
    from storyloom.workflow.runner import WorkflowRun


MAX_DEPTH = 16
"""How deeply child workflows and expansions may nest."""

PENDING, RUNNING, DONE, FAILED, SKIPPED = 1, 2, 3, 4, 5
"""A node's state in an execution."""


class WorkflowNestingTooDeep(StoryloomError):
    pass


class ChildWorkflowFailed(StoryloomError):
    """A nested graph (child workflow, expansion, re-run) did not complete. Names the
    deepest failing node by its full id, so nesting does not nest the message too."""

    def __init__(self, what: str, node_id: str, message: str) -> None:
        self.node_id = node_id
        self.message = message
        super().__init__(f"{what} failed at node {node_id!r}: {message}")


class GraphExecution:
    """One graph computed within a run: the top workflow, a child workflow, an expansion
    or a cache-bypassing re-run of some node's upstream."""

    def __init__(
        self,
        run: WorkflowRun,
        plan: GraphPlan,
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
        self._interface_json = canonical_json(dict(self.interface_inputs))
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
            state[node_id] = PENDING
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
            if status == DONE:
                continue
            if status in (FAILED, SKIPPED):
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
            self.state[node_id] = DONE
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
        if self.state.get(node_id) != PENDING:
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
        self.state[node_id] = RUNNING
        self.running += 1
        task = asyncio.get_running_loop().create_task(self._execute(node_id, plan, inputs))
        self.tasks.add(task)

    def _gather(self, plan: NodePlan) -> dict[str, Any]:
        inputs = dict(plan.literals)
        outputs = self.outputs
        for item in plan.strong:
            inputs[item.slot] = item.value(outputs[item.source])
        if plan.lazy:
            state = self.state
            for item in plan.lazy.values():
                if state.get(item.source) == DONE:
                    inputs[item.slot] = item.value(outputs[item.source])
                else:
                    inputs.pop(item.slot, None)
        return inputs

    def _request(self, node_id: str, missing: list[PlannedInput]) -> bool:
        """Schedule the upstream of lazy inputs a node asked for. True when all of them
        are already there (resolved from the cache, say), so the node may ask again."""
        sources = list(dict.fromkeys(item.source for item in missing))
        self._visit(sources)
        count = 0
        for source in sources:
            status = self.state[source]
            if status == DONE:
                continue
            if status in (FAILED, SKIPPED):
                self._fail(node_id, f"upstream node {self.prefix + source!r} failed")
                return False
            self.waiters.setdefault(source, []).append(node_id)
            count += 1
        self.blockers[node_id] = count
        return count == 0

    def _complete(self, node_id: str, outputs: dict[str, Any]) -> None:
        self.state[node_id] = DONE
        self.outputs[node_id] = outputs
        waiting = self.waiters.pop(node_id, None)
        if waiting:
            blockers, state = self.blockers, self.state
            for waiter in waiting:
                blockers[waiter] -= 1
                if blockers[waiter] == 0 and state[waiter] == PENDING:
                    self.ready.append(waiter)

    def _fail(self, node_id: str, message: str, *, cancelled: bool = False) -> None:
        self.state[node_id] = FAILED
        self.errors[node_id] = message
        self.run.errors[self.prefix + node_id] = message
        if self.first_error is None:
            self.first_error = (node_id, message)
        skipped: list[str] = []
        stack = list(self.waiters.pop(node_id, ()))
        while stack:
            waiter = stack.pop()
            if self.state.get(waiter) == PENDING:
                self.state[waiter] = SKIPPED
                skipped.append(self.prefix + waiter)
                stack.extend(self.waiters.pop(waiter, ()))
        if not cancelled:
            self.run._emit(NodeError, node_id=self.prefix + node_id, error=message, skipped=skipped)

    # -- running a node -------------------------------------------------------------

    async def _execute(self, node_id: str, plan: NodePlan, inputs: dict[str, Any]) -> None:
        run = self.run
        full_id = self.prefix + node_id
        ctx = RunContext(self, node_id, full_id)
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
        plan: NodePlan,
        ctx: RunContext,
        outputs: dict[str, Any],
        started: float,
    ) -> None:
        run = self.run
        jsonable = jsonable_outputs(outputs)
        key = self.keys.get(node_id)
        if key is None:
            # Not cacheable itself; what it feeds is keyed by what it actually gave.
            text = canonical_json(outputs)
            self.keys[node_id] = "out:" + digest(text) if text is not None else None
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
            if self.state.get(target) != DONE:
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
            if self.state.get(node_id) == DONE:
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
        child = GraphExecution(
            self.run,
            GraphPlan(graph, fixed),
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
        child = GraphExecution(
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
            if item in plan.strong or self.state.get(item.source) == DONE
        ]
        again = GraphExecution(
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
