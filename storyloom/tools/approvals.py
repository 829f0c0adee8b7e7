"""Pending ``ask`` approvals: a tool call waiting for a person's answer.

A caller (the agent loop, an MCP call) awaits :meth:`ApprovalBroker.request`; the broker
publishes the :class:`PendingApproval` through ``on_request`` (the server sends it as
``tool:approval-needed``) and resolves the wait when :meth:`ApprovalBroker.answer` is
called (from the chat, the canvas or the Tools page). A caller that stops waiting
(its run cancelled, its timeout) takes its approval off the list.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from storyloom.core.errors import NotFound
from storyloom.workflow.agent_host import ApprovalDecision


class PendingApproval(BaseModel):
    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    id: str
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    caller: dict[str, str] = Field(description="{kind, name}")
    conversation_id: str | None = Field(default=None, alias="conversationId")
    run_id: str | None = Field(default=None, alias="runId")
    created_at: str = Field(alias="createdAt", description="ISO 8601, UTC")


class ApprovalNotFound(NotFound):
    pass


@dataclass
class _Waiting:
    approval: PendingApproval
    future: asyncio.Future[ApprovalDecision]


class ApprovalBroker:
    def __init__(
        self,
        on_request: Callable[[PendingApproval], None] | None = None,
        on_resolved: Callable[[str, ApprovalDecision], None] | None = None,
    ) -> None:
        """``on_request`` publishes a new approval; ``on_resolved`` says it was answered
        (the server sends ``tool:approval-resolved``). Both may be set later."""
        self.on_request = on_request
        self.on_resolved = on_resolved
        self._waiting: dict[str, _Waiting] = {}

    async def request(
        self,
        tool: str,
        arguments: dict[str, Any],
        caller: Any,
    ) -> ApprovalDecision:
        """Wait for a person's answer about this call. ``caller`` is a
        :class:`~storyloom.tools.tool_manager.ToolCaller` (kind, name, run_id,
        conversation_id)."""
        approval = PendingApproval(
            id=uuid.uuid4().hex,
            tool=tool,
            arguments=dict(arguments),
            caller={"kind": str(caller.kind), "name": str(caller.name)},
            conversation_id=getattr(caller, "conversation_id", None),
            run_id=getattr(caller, "run_id", None),
            created_at=datetime.fromtimestamp(time.time(), tz=UTC).isoformat(
                timespec="milliseconds"
            ),
        )
        future: asyncio.Future[ApprovalDecision] = asyncio.get_running_loop().create_future()
        self._waiting[approval.id] = _Waiting(approval, future)
        try:
            if self.on_request is not None:
                self.on_request(approval)
            return await future
        finally:
            self._waiting.pop(approval.id, None)

    def answer(self, approval_id: str, decision: ApprovalDecision) -> None:
        """Resolve a pending approval; :class:`ApprovalNotFound` when there is none
        (answered already, or its caller stopped waiting)."""
        waiting = self._waiting.pop(approval_id, None)
        if waiting is None or waiting.future.done():
            raise ApprovalNotFound(f"no pending approval {approval_id!r}")
        waiting.future.get_loop().call_soon_threadsafe(_settle, waiting.future, decision)
        if self.on_resolved is not None:
            self.on_resolved(approval_id, decision)

    def pending(self) -> list[PendingApproval]:
        """Oldest first."""
        return [w.approval for w in self._waiting.values() if not w.future.done()]

    def deny_all(self) -> None:
        """Answer every pending approval with ``deny`` (the process is closing)."""
        for approval_id in list(self._waiting):
            with contextlib.suppress(ApprovalNotFound):
                self.answer(approval_id, "deny")


def _settle(future: asyncio.Future[ApprovalDecision], decision: ApprovalDecision) -> None:
    if not future.done():
        future.set_result(decision)
