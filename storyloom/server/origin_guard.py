"""Refuse requests that other web sites make through the user's browser.

A server on 127.0.0.1 needs no token, but any page the user visits can still reach it:
a cross-site ``POST /api/settings/test`` could point the user LLM at the attacker and
send it the stored key, and browsers apply no same-origin rule to WebSocket handshakes.
Two checks close that:

- DNS rebinding: on a loopback server the ``Host`` header must name a loopback host,
  so a hostile name that resolves to 127.0.0.1 gets nothing.
- Cross-site requests: when a browser sends ``Origin`` (it does on every WebSocket
  handshake and every cross-origin or state-changing fetch), it must be the server's own
  origin, the one in ``Host``.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from storyloom.server.api_errors import refuse, request_headers
from storyloom.server.token_auth import is_loopback

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _hostname(host_header: str) -> str:
    return urlsplit(f"//{host_header}").hostname or ""


class OriginGuard:
    """ASGI middleware: 403 for foreign ``Host`` (loopback servers) or foreign ``Origin``."""

    def __init__(self, app: ASGIApp, *, loopback_only: bool) -> None:
        self.app = app
        self.loopback_only = loopback_only

    def _refusal(self, scope: Scope) -> str | None:
        headers = request_headers(scope)
        host = headers.get("host", "")
        if self.loopback_only and host and not is_loopback(_hostname(host)):
            return f"host {host!r} is not this computer; open storyloom at 127.0.0.1"
        origin = headers.get("origin")
        checks_origin = scope["type"] == "websocket" or scope["method"] not in _SAFE_METHODS
        if origin and checks_origin and urlsplit(origin).netloc.lower() != host.lower():
            return f"requests from {origin} are not allowed; use storyloom's own page"
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        reason = self._refusal(scope)
        if reason is None:
            await self.app(scope, receive, send)
            return
        await refuse(scope, send, 403, reason)
