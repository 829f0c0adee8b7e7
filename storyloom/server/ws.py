"""The WebSocket endpoint ``/ws``: the message protocol of seed 002."""

from __future__ import annotations

import json
import logging

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from pydantic import ValidationError

from storyloom import __version__
from storyloom.core.errors import StoryloomError
from storyloom.server import json_text, writing_ws
from storyloom.server.protocol import (
    BrokenWorkflowFile,
    ClientMessage,
    ConnectMessage,
    DisconnectMessage,
    HumanDecisionMessage,
    StatusMessage,
    ToolApprovalMessage,
    WorkflowAttachMessage,
    WorkflowCancelMessage,
    WorkflowDataMessage,
    WorkflowInvalidMessage,
    WorkflowListMessage,
    WorkflowListRequest,
    WorkflowLoadMessage,
    WorkflowRunAcceptedMessage,
    WorkflowRunMessage,
    WorkflowSavedMessage,
    WorkflowSaveMessage,
    client_message_adapter,
)
from storyloom.server.state import ServerState, server_state
from storyloom.workflow.node_type import HumanDecision
from storyloom.workflow.validation import WorkflowInvalid

router = APIRouter()
logger = logging.getLogger(__name__)


@router.websocket("/ws")
async def websocket_endpoint(ws: WebSocket) -> None:
    await ws.accept()
    state = server_state(ws)
    hub = state.hub
    # Everything this socket is sent goes through its outbox, replies included, so a
    # reply and the run events around it arrive in the order they happened.
    hub.add(ws)
    hub.send(ws, StatusMessage(status="connected", message=f"storyloom {__version__}"))
    try:
        while True:
            frame = await ws.receive()
            if frame["type"] == "websocket.disconnect":
                return
            raw = frame.get("text")
            if raw is None:
                hub.send_error(ws, "a binary frame: messages are JSON text frames")
                continue
            try:
                data = json_text.loads(raw)
                if state.chat_subscriptions.handle(ws, data):
                    continue
                message = client_message_adapter.validate_python(data)
            except (json.JSONDecodeError, ValidationError) as exc:
                hub.send_error(ws, exc)
                continue
            except (ValueError, RecursionError) as exc:
                # Python's own limits: integers of thousands of digits, deep nesting.
                why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
                hub.send_error(ws, f"not JSON this server reads: {why}")
                continue
            if isinstance(message, DisconnectMessage):
                await hub.drain(ws)
                await ws.close()
                return
            # A bad request is this message's problem: say why and keep the socket.
            try:
                _handle(state, ws, message)
            except WorkflowInvalid as exc:
                invalid = WorkflowInvalidMessage(workflow_id=exc.workflow_id, problems=exc.problems)
                hub.send(ws, invalid)
            except (StoryloomError, OSError) as exc:
                hub.send_error(ws, exc)
            except Exception as exc:
                # A bug met by one message must not cut the tab off: logged, answered.
                logger.exception("WebSocket message %s failed", message.type)
                hub.send_error(ws, f"{message.type} failed: {type(exc).__name__}")
    except WebSocketDisconnect:
        return
    finally:
        hub.discard(ws)
        state.chat_subscriptions.forget(ws)


def _handle(state: ServerState, ws: WebSocket, message: ClientMessage) -> None:
    hub, workflows, runs = state.hub, state.workflows, state.workflow_runs
    if isinstance(message, ConnectMessage):
        hub.send(ws, StatusMessage(status="connected", message=f"project {message.project_id}"))
    elif isinstance(message, WorkflowSaveMessage):
        workflows.library.save(message.workflow)
        problems = workflows.validate(message.workflow)
        hub.send(ws, WorkflowSavedMessage(workflow_id=message.workflow.id, problems=problems))
    elif isinstance(message, WorkflowLoadMessage):
        workflow = workflows.library.require(message.workflow_id)
        hub.send(ws, WorkflowDataMessage(workflow=workflow, problems=workflows.validate(workflow)))
    elif isinstance(message, WorkflowListRequest):
        summaries, broken = workflows.library.entries()
        listing = WorkflowListMessage(
            workflows=summaries, broken=[BrokenWorkflowFile.of(e) for e in broken]
        )
        hub.send(ws, listing)
    elif isinstance(message, WorkflowRunMessage):
        tracked = runs.start(
            message.workflow_id,
            workflow=message.workflow,
            inputs=message.inputs,
            outputs=message.outputs,
        )
        hub.send(
            ws, WorkflowRunAcceptedMessage(run_id=tracked.run_id, workflow_id=tracked.workflow_id)
        )
    elif isinstance(message, WorkflowCancelMessage):
        if message.run_id is None:
            runs.cancel_all()
        else:
            runs.cancel(message.run_id)
    elif isinstance(message, HumanDecisionMessage):
        decision = HumanDecision(
            decision=message.decision, edited_output=message.edited_output, choice=message.choice
        )
        if not runs.decide(message.run_id, message.node_id, decision):
            where = f"run {message.run_id!r}" if message.run_id else "any active run"
            hub.send_error(ws, f"node {message.node_id!r} is not waiting in {where}")
    elif isinstance(message, WorkflowAttachMessage):
        runs.attach(ws, message.run_id, message.after_seq)
    elif isinstance(message, ToolApprovalMessage):
        # An approval already answered (or whose run ended) is a `status: error` reply.
        state.tools.approvals.answer(message.id, message.decision)
    elif writing_ws.handles(message):
        writing_ws.handle(state, ws, message)
