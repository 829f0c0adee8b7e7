"""The open WebSocket connections, so server events reach every browser tab."""

from __future__ import annotations

import asyncio
import contextlib

from fastapi import WebSocket

from storyloom.server.protocol import ServerMessage


class WebSocketHub:
    def __init__(self) -> None:
        self._sockets: set[WebSocket] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def add(self, ws: WebSocket) -> None:
        self._sockets.add(ws)

    def discard(self, ws: WebSocket) -> None:
        self._sockets.discard(ws)

    def publish(self, message: ServerMessage) -> None:
        """Send ``message`` to every connection; call from the event loop, returns at once."""
        if not self._sockets:
            return
        text = message.model_dump_json(by_alias=True, exclude_none=True)
        task = asyncio.get_running_loop().create_task(self._send_all(text))
        # Kept until done: the loop holds only weak references to tasks.
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_all(self, text: str) -> None:
        for ws in list(self._sockets):
            # A tab closing mid-send is that tab's problem, not the other tabs'.
            with contextlib.suppress(Exception):
                await ws.send_text(text)
