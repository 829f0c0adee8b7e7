"""What a running node sees of its run: the ``NodeContext`` the runner passes to ``run``.

Streamed chunks, iteration reports and requests for a human go out as the run's events;
child workflows and re-runs of the node's inputs run as nested executions of the run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from storyloom.workflow.events import NodeIteration, NodeStreaming, NodeToolStep
from storyloom.workflow.node_type import ContextSource, Evaluation, HumanDecision, WorkflowServices
from storyloom.workflow.workflow_file import Workflow

if TYPE_CHECKING:
    from storyloom.workflow.graph_execution import GraphExecution


T = TypeVar("T")


class RunContext:
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

    def __init__(self, exe: GraphExecution, node_id: str, full_id: str) -> None:
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

    def report_tool_step(self, step: Mapping[str, Any]) -> None:
        # Text emitted before the call goes out first, so the log keeps their order.
        self.flush()
        self._exe.run._emit(NodeToolStep, node_id=self._full_id, step=dict(step))

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
