"""The WebSocket endpoint ``/ws``: the message protocol of seed 002."""

from __future__ import annotations

import json

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from pydantic import ValidationError

from storyloom import __version__
from storyloom.server.protocol import (
    ConnectMessage,
    DisconnectMessage,
    ServerMessage,
    StatusMessage,
    client_message_adapter,
)
from storyloom.server.ws_hub import WebSocketHub

router = APIRouter()


async def _send(ws: WebSocket, message: ServerMessage) -> None:
    await ws.send_text(message.model_dump_json(by_alias=True, exclude_none=True))


@router.websocket("/ws")
async def websocket_endpoint(ws: WebSocket) -> None:
    await ws.accept()
    await _send(ws, StatusMessage(status="connected", message=f"storyloom {__version__}"))
    hub: WebSocketHub = ws.app.state.storyloom.hub
    hub.add(ws)
    try:
        while True:
            raw = await ws.receive_text()
            try:
                message = client_message_adapter.validate_python(json.loads(raw))
            except json.JSONDecodeError as exc:
                await _send(ws, StatusMessage(status="error", message=f"not JSON: {exc}"))
                continue
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first.get("loc", ())) or "message"
                await _send(
                    ws, StatusMessage(status="error", message=f"{where}: {first.get('msg')}")
                )
                continue
            if isinstance(message, DisconnectMessage):
                await ws.close()
                return
            if isinstance(message, ConnectMessage):
                await _send(
                    ws,
                    StatusMessage(status="connected", message=f"project {message.project_id}"),
                )
    except WebSocketDisconnect:
        return
    finally:
        hub.discard(ws)
