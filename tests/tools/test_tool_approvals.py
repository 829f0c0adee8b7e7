"""The approval broker: a waiting call, answered once; cancelled waits leave the list."""

from __future__ import annotations

import asyncio

import pytest

from storyloom.tools.approvals import ApprovalBroker, ApprovalNotFound, PendingApproval
from storyloom.tools.tool_manager import ToolCaller

CALLER = ToolCaller("agent", "bard", run_id="r1", conversation_id="c1")


async def test_a_request_waits_for_its_answer() -> None:
    published: list[PendingApproval] = []
    resolved: list[tuple[str, str]] = []
    broker = ApprovalBroker(published.append, lambda i, d: resolved.append((i, d)))
    task = asyncio.create_task(broker.request("chat:RollDice", {"notation": "d20"}, CALLER))
    await asyncio.sleep(0)
    (pending,) = broker.pending()
    assert published == [pending]
    dumped = pending.model_dump()
    assert dumped["conversationId"] == "c1" and dumped["runId"] == "r1"
    assert dumped["caller"] == {"kind": "agent", "name": "bard"}
    broker.answer(pending.id, "always")
    assert await task == "always"
    assert broker.pending() == [] and resolved == [(pending.id, "always")]
    with pytest.raises(ApprovalNotFound):
        broker.answer(pending.id, "deny")


async def test_unknown_ids_are_not_found() -> None:
    with pytest.raises(ApprovalNotFound):
        ApprovalBroker().answer("nope", "deny")


async def test_a_cancelled_wait_leaves_the_list() -> None:
    broker = ApprovalBroker()
    task = asyncio.create_task(broker.request("kb:CreateEntry", {}, CALLER))
    await asyncio.sleep(0)
    assert len(broker.pending()) == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert broker.pending() == []
