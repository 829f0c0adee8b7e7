"""Token check for servers bound beyond loopback.

On 127.0.0.1 only the local user can connect, so no token is asked. On any other address
every HTTP request and WebSocket handshake must carry the token: as ``Authorization:
Bearer`` or as the ``storyloom_token`` cookie. The address the server prints carries it
as ``?token=``: on a page navigation (GET or HEAD of a page, not ``/api`` or ``/ws``) that
sets the cookie (HttpOnly, so page scripts never see it) and redirects to the same path on
this server without the token; anywhere else a token in the address counts for nothing,
so it is not left in logs and histories of API calls.
"""

from __future__ import annotations

import ipaddress
import secrets
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, quote, urlencode

from starlette.types import ASGIApp, Receive, Scope, Send

from storyloom.server.api_errors import refuse, request_headers

COOKIE = "storyloom_token"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


MIN_TOKEN_CHARS = 16


def new_token() -> str:
    return secrets.token_urlsafe(24)


def weak_token_reason(token: str) -> str | None:
    """Why ``token`` is too weak to guard a server (None: it is strong enough)."""
    if len(token) < MIN_TOKEN_CHARS:
        return (
            f"the token must be at least {MIN_TOKEN_CHARS} characters; leave out --token "
            "and one is generated"
        )
    if len(set(token)) < 6:
        return "the token repeats too few characters; leave out --token and one is generated"
    return None


def _page_navigation(scope: Scope) -> bool:
    path: str = scope["path"]
    return (
        scope["type"] == "http"
        and scope["method"] in ("GET", "HEAD")
        and not (path == "/api" or path.startswith("/api/") or path == "/ws")
    )


def same_origin_path(path: str) -> str:
    """``path`` as a redirect target that stays on this server: ``//host/x`` or ``/\\host``
    would send the browser to another site, so leading slashes and backslashes become one."""
    return "/" + path.lstrip("/\\")


class TokenAuth:
    """ASGI middleware: refuse requests without the token (401, or 403 on a WebSocket)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    def _valid(self, candidate: str | None) -> bool:
        return bool(candidate) and secrets.compare_digest(str(candidate), self.token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = request_headers(scope)
        auth = headers.get("authorization", "")
        bearer = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        cookie = SimpleCookie(headers.get("cookie", ""))
        from_cookie = cookie[COOKIE].value if COOKIE in cookie else None
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        from_query = next((v for k, v in query if k == "token"), None)

        if self._valid(bearer) or self._valid(from_cookie):
            await self.app(scope, receive, send)
            return
        if self._valid(from_query) and _page_navigation(scope):
            await self._set_cookie_and_redirect(scope, send, query)
            return
        await refuse(scope, send, 401, "this server needs its access token")

    async def _set_cookie_and_redirect(
        self, scope: Scope, send: Send, query: list[tuple[str, str]]
    ) -> None:
        rest = urlencode([(k, v) for k, v in query if k != "token"])
        path = same_origin_path(scope.get("root_path", "") + scope["path"])
        location = quote(path, safe="/") + (f"?{rest}" if rest else "")
        cookie = f"{COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", location.encode("latin-1")),
                    (b"set-cookie", cookie.encode("latin-1")),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})
