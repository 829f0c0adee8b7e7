"""The open WebSocket connections, so server events reach every browser tab.

Each socket has one outbox and one writer task: what is queued for a socket reaches it in
the order it was queued (a run's events in ``seq`` order, a replay before the live events
that follow it), and a slow tab delays only itself.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from fastapi import WebSocket

from storyloom.server.api_errors import describe
from storyloom.server.protocol import ServerMessage, StatusMessage


@dataclass
class _Outbox:
    queue: asyncio.Queue[str]
    writer: asyncio.Task[None]


class WebSocketHub:
    def __init__(self) -> None:
        self._outboxes: dict[WebSocket, _Outbox] = {}

    def add(self, ws: WebSocket) -> None:
        """Start sending to ``ws``; call from the event loop once it is accepted."""
        queue: asyncio.Queue[str] = asyncio.Queue()
        writer = asyncio.get_running_loop().create_task(self._write(ws, queue))
        self._outboxes[ws] = _Outbox(queue, writer)

    def discard(self, ws: WebSocket) -> None:
        outbox = self._outboxes.pop(ws, None)
        if outbox is not None:
            outbox.writer.cancel()

    def sockets(self) -> list[WebSocket]:
        return list(self._outboxes)

    def __contains__(self, ws: object) -> bool:
        return ws in self._outboxes

    def publish(self, message: ServerMessage) -> None:
        """Queue ``message`` for every connection; call from the event loop, returns at once."""
        if not self._outboxes:
            return
        text = _text(message)
        for outbox in self._outboxes.values():
            outbox.queue.put_nowait(text)

    def send(self, ws: WebSocket, message: ServerMessage) -> bool:
        """Queue ``message`` for one connection; False when it is no longer open."""
        outbox = self._outboxes.get(ws)
        if outbox is None:
            return False
        outbox.queue.put_nowait(_text(message))
        return True

    def send_error(self, ws: WebSocket, error: Exception | str) -> bool:
        """Tell ``ws`` what was wrong with its message (``status: error``); the socket
        stays open: a bad request is that message's problem, not the connection's."""
        message = error if isinstance(error, str) else describe(error)
        return self.send(ws, StatusMessage(status="error", message=message))

    async def drain(self, ws: WebSocket) -> None:
        """Wait until everything queued for ``ws`` has been written (before closing it)."""
        outbox = self._outboxes.get(ws)
        if outbox is not None:
            await outbox.queue.join()

    @staticmethod
    async def _write(ws: WebSocket, queue: asyncio.Queue[str]) -> None:
        open_ = True
        while True:
            text = await queue.get()
            try:
                if open_:
                    await ws.send_text(text)
            except Exception:
                # A tab closing mid-send is that tab's problem; the receive loop notices
                # the disconnect and discards it. Keep consuming so drain() returns.
                open_ = False
            finally:
                queue.task_done()


def _text(message: ServerMessage) -> str:
    return message.model_dump_json(by_alias=True, exclude_none=True)
