"""The server's workflow runs, kept by id with every event, so a reloaded page re-attaches.

Active runs and the last ``keep_finished`` finished ones are kept. Each run's events go to
its followers: every socket open when it started, and any socket that attaches later
(``workflow:attach`` replays the events it missed, then it follows). A socket opened
mid-run is not sent that run's events until it attaches, so what it receives for a run is
always in ``seq`` order with nothing twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import WebSocket
from pydantic import BaseModel, ConfigDict, Field

from storyloom.core.errors import FieldProblem, FileFormatError, NotFound
from storyloom.server.workflow_service import WorkflowService
from storyloom.server.ws_hub import WebSocketHub
from storyloom.workflow.events import AnyRunEvent, WorkflowCompleted, WorkflowError
from storyloom.workflow.node_type import HumanDecision
from storyloom.workflow.runner import WorkflowRun
from storyloom.workflow.workflow_file import Workflow

logger = logging.getLogger(__name__)

RunStatus = Literal["running", "completed", "failed", "cancelled"]
KEEP_FINISHED = 50


class RunNotFound(NotFound):
    def __init__(self, run_id: str) -> None:
        super().__init__(
            f"no run {run_id!r} (runs are kept while active and the last "
            f"{KEEP_FINISHED} finished ones)"
        )


class RunInfo(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    run_id: str = Field(alias="runId")
    workflow_id: str = Field(alias="workflowId")
    status: RunStatus
    started_at: str = Field(alias="startedAt")
    waiting_for: list[str] = Field(
        alias="waitingFor", description="Nodes waiting for a human decision"
    )


@dataclass(eq=False)
class TrackedRun:
    run_id: str
    workflow_id: str
    started_at: str
    followers: set[WebSocket]
    events: list[AnyRunEvent] = field(default_factory=list)
    run: WorkflowRun | None = None

    @property
    def status(self) -> RunStatus:
        last = self.events[-1] if self.events else None
        if isinstance(last, WorkflowCompleted):
            return "completed"
        if isinstance(last, WorkflowError):
            return "cancelled" if last.cancelled else "failed"
        return "running"

    @property
    def active(self) -> bool:
        return self.status == "running"

    def events_after(self, seq: int) -> list[AnyRunEvent]:
        return [e for e in self.events if e.seq > seq]

    def waiting_for(self) -> list[str]:
        if self.run is None or not self.active:
            return []
        return list(self.run.waiting_for_human())

    def info(self) -> RunInfo:
        return RunInfo(
            run_id=self.run_id,
            workflow_id=self.workflow_id,
            status=self.status,
            started_at=self.started_at,
            waiting_for=self.waiting_for(),
        )


class RunManager:
    """Starts runs on the service's runner and routes their events to the sockets."""

    def __init__(
        self, service: WorkflowService, hub: WebSocketHub, *, keep_finished: int = KEEP_FINISHED
    ) -> None:
        self.service = service
        self.hub = hub
        self.keep_finished = keep_finished
        self._active: dict[str, TrackedRun] = {}
        self._finished: OrderedDict[str, TrackedRun] = OrderedDict()
        self._watchers: set[asyncio.Task[None]] = set()

    # -- starting -------------------------------------------------------------------------

    def start(
        self,
        workflow_id: str,
        *,
        workflow: Workflow | None = None,
        inputs: Mapping[str, Any] | None = None,
        outputs: Sequence[str] | None = None,
    ) -> TrackedRun:
        """Validate and start a run of the saved workflow (or of ``workflow``, unsaved).

        Raises ``WorkflowInvalid`` (nothing started), ``WorkflowNotFound``, or
        ``FileFormatError`` (the file does not load, or ``workflow.id`` is not
        ``workflow_id``). Call from the event loop.
        """
        if workflow is None:
            workflow = self.service.library.require(workflow_id)
        elif workflow.id != workflow_id:
            problem = FieldProblem("workflow.id", f"must be {workflow_id!r}, the run's workflow")
            raise FileFormatError("workflow", [problem])
        run_id = uuid.uuid4().hex
        tracked = TrackedRun(
            run_id=run_id,
            workflow_id=workflow_id,
            started_at=datetime.now(UTC).isoformat(timespec="milliseconds"),
            followers=set(self.hub.sockets()),
        )
        # Registered before the runner starts: it may report workflow:started at once.
        self._active[run_id] = tracked
        try:
            tracked.run = self.service.runner.start(
                workflow,
                inputs=inputs,
                outputs=outputs,
                on_event=lambda event: self._on_event(tracked, event),
                run_id=run_id,
            )
        except BaseException:
            self._active.pop(run_id, None)
            raise
        watcher = asyncio.get_running_loop().create_task(self._watch(tracked, tracked.run))
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)
        return tracked

    def _on_event(self, tracked: TrackedRun, event: AnyRunEvent) -> None:
        tracked.events.append(event)
        for ws in list(tracked.followers):
            if not self.hub.send(ws, event):
                tracked.followers.discard(ws)
        if isinstance(event, WorkflowCompleted | WorkflowError):
            self._retire(tracked)

    async def _watch(self, tracked: TrackedRun, run: WorkflowRun) -> None:
        try:
            await run.wait()
        except Exception as exc:  # the runner itself failed: say so instead of hanging
            logger.exception("workflow run %s failed outside its nodes", tracked.run_id)
            if tracked.active:
                seq = tracked.events[-1].seq + 1 if tracked.events else 1
                self._on_event(
                    tracked,
                    WorkflowError(run_id=tracked.run_id, seq=seq, error=f"runner failed: {exc}"),
                )
        if tracked.active:  # ended without a final event (should not happen)
            self._retire(tracked)

    def _retire(self, tracked: TrackedRun) -> None:
        self._active.pop(tracked.run_id, None)
        tracked.followers.clear()
        self._finished[tracked.run_id] = tracked
        while len(self._finished) > self.keep_finished:
            self._finished.popitem(last=False)

    # -- looking up -----------------------------------------------------------------------

    def get(self, run_id: str) -> TrackedRun:
        tracked = self._active.get(run_id) or self._finished.get(run_id)
        if tracked is None:
            raise RunNotFound(run_id)
        return tracked

    def runs(self) -> list[TrackedRun]:
        """Active runs, then finished ones; newest first in each."""
        return [*reversed(self._active.values()), *reversed(self._finished.values())]

    # -- controlling ----------------------------------------------------------------------

    def cancel(self, run_id: str) -> None:
        tracked = self.get(run_id)
        if tracked.active and tracked.run is not None:
            tracked.run.cancel()

    def cancel_all(self) -> list[str]:
        active = list(self._active.values())
        for tracked in active:
            if tracked.run is not None:
                tracked.run.cancel()
        return [t.run_id for t in active]

    def decide(self, run_id: str | None, node_id: str, decision: HumanDecision) -> bool:
        """Hand ``decision`` to the node; False when that node is not waiting.

        Without ``run_id``: the newest active run where ``node_id`` waits.
        """
        if run_id is not None:
            candidates = [self.get(run_id)]
        else:
            candidates = [t for t in reversed(self._active.values()) if node_id in t.waiting_for()]
        for tracked in candidates:
            if tracked.active and tracked.run is not None and tracked.run.decide(node_id, decision):
                return True
        return False

    def attach(self, ws: WebSocket, run_id: str, after_seq: int = 0) -> TrackedRun:
        """Queue the run's events after ``after_seq`` for ``ws``; it then follows the run."""
        tracked = self.get(run_id)
        for event in tracked.events_after(after_seq):
            self.hub.send(ws, event)
        if tracked.active:
            tracked.followers.add(ws)
        return tracked

    async def aclose(self, timeout_s: float = 5.0) -> None:
        """Cancel every active run and wait (a bounded time) for them to wind down."""
        runs = [t.run for t in self._active.values() if t.run is not None]
        self.cancel_all()
        if runs:
            waits = [asyncio.ensure_future(r.wait()) for r in runs]
            done, pending = await asyncio.wait(waits, timeout=timeout_s)
            for task in pending:
                task.cancel()
            for task in done:
                if not task.cancelled():
                    task.exception()  # retrieved here; the watcher has logged it
        for watcher in list(self._watchers):
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watcher
