"""The access token every request to ``storyloom serve`` must carry.

Loopback is no boundary on a machine with several accounts: any local user can connect
to 127.0.0.1. So ``storyloom serve`` asks for a token wherever it listens, unless it is
started with ``--no-token`` on loopback (a machine with one user). The token is made once
and kept in ``<data dir>/token`` (mode 0600), so the address stays the same across
restarts; ``--token`` gives another. Every HTTP request and WebSocket handshake must
carry it: as ``Authorization: Bearer`` or as the ``storyloom_token`` cookie.

The address the server prints carries it as ``?token=``. On a page navigation (GET or
HEAD of a page, not ``/api`` or ``/ws``) that sets the cookie (HttpOnly, so page scripts
never see it; kept 400 days) and redirects to the same path without the token, so the
address bar and the history lose it; from then on the cookie is what counts. Anywhere
else a token in the address counts for nothing, so it is not left in logs and histories
of API calls.
"""

from __future__ import annotations

import ipaddress
import secrets
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode

from starlette.types import ASGIApp, Receive, Scope, Send

from storyloom.core.atomic_io import atomic_write_text
from storyloom.core.home import unusable_file
from storyloom.server.api_errors import refuse, request_headers

COOKIE = "storyloom_token"
TOKEN_FILE = "token"
COOKIE_MAX_AGE_S = 400 * 24 * 3600
"""As long as a browser keeps a cookie (Chromium caps it at 400 days): the address with
the token is needed once per browser, not once per browser start."""


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


def stored_token(home: Path) -> str:
    """The data directory's token: the one kept in ``<home>/token``, or a new one written
    there (0600 from the first byte) when there is none or it is too weak."""
    path = home / TOKEN_FILE
    try:
        kept = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        kept = ""
    except (OSError, UnicodeDecodeError) as exc:
        raise unusable_file(
            path, exc if isinstance(exc, OSError) else OSError(str(exc)), "the access token"
        ) from None
    if kept and weak_token_reason(kept) is None:
        return kept
    token = new_token()
    try:
        atomic_write_text(path, token + "\n", mode=0o600)
    except OSError as exc:
        raise unusable_file(path, exc, "the access token") from None
    return token


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
        cookie = (
            f"{COOKIE}={self.token}; Path=/; Max-Age={COOKIE_MAX_AGE_S}; HttpOnly; SameSite=Strict"
        )
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
