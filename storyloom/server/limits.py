"""How much one request may carry, and the middleware that refuses more before reading it.

Every limit of the HTTP surface is here (docs/server.md, "Limits", lists them): the size
of a request body (JSON and anything else), of an uploaded file, and the lengths of the
names and titles the API models accept. The body limits are the server's
:class:`RequestLimits`, set with ``storyloom serve --max-body-mb / --max-upload-mb``;
the lengths are constants, because files and the database depend on them.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from storyloom.server.api_errors import envelope_bytes, request_headers

MIB = 1024 * 1024

MAX_BODY_BYTES = 16 * MIB
"""A request body that is not an upload: room for the largest knowledge base or workflow."""
MAX_UPLOAD_BYTES = 50 * MIB
"""One uploaded file: more than any SillyTavern card, book, chat or knowledge package."""
FORM_ALLOWANCE_BYTES = 1 * MIB
"""An upload's request also carries its multipart framing and small form fields."""

MAX_TITLE_CHARS = 500
"""A conversation's title (it also names the exported file)."""
MAX_NAME_CHARS = 200
"""A person's or a thing's name (user name, knowledge base name)."""
MAX_FILENAME_BYTES = 255
"""An upload's file name, in UTF-8: the most a file system allows in one name."""


@dataclass(frozen=True)
class RequestLimits:
    """The body limits of one server (``create_app(limits=...)``)."""

    body_bytes: int = MAX_BODY_BYTES
    upload_bytes: int = MAX_UPLOAD_BYTES

    @property
    def multipart_bytes(self) -> int:
        return self.upload_bytes + FORM_ALLOWANCE_BYTES

    @classmethod
    def in_mib(cls, body: int | None = None, upload: int | None = None) -> RequestLimits:
        """Limits given in MiB, as ``storyloom serve`` takes them (None: the default)."""
        return cls(
            body_bytes=MAX_BODY_BYTES if body is None else body * MIB,
            upload_bytes=MAX_UPLOAD_BYTES if upload is None else upload * MIB,
        )


def size_text(size: int) -> str:
    """``size`` bytes for a message, in the largest unit that divides it (MB, KB, bytes)."""
    if size % MIB == 0:
        return f"{size // MIB} MB"
    return f"{size // 1024} KB" if size % 1024 == 0 else f"{size} bytes"


class BodyTooLarge(HTTPException):
    """A request body over its limit: a 413 with the error envelope wherever it is noticed
    (an ``HTTPException``, so FastAPI's body parsing passes it on instead of a 400)."""

    def __init__(self, what: str, limit: int) -> None:
        super().__init__(
            413, f"{what} is larger than {size_text(limit)}, the most this server takes"
        )


DRAIN_BYTES = 256 * MIB
"""How much of a refused body is read and thrown away so that its client hears the 413."""
DRAIN_SECONDS = 30.0
"""How long a refused body is read before the connection is closed anyway."""


def _path_pattern(template: str) -> re.Pattern[str]:
    """An OpenAPI path template (``/api/characters/{character_id}/avatar``) as a regex."""
    parts = re.split(r"(\{[^}]+\})", template)
    return re.compile(
        "".join(("[^/]+" if part.startswith("{") else re.escape(part)) for part in parts if part)
        + "$"
    )


def upload_routes(document: dict[str, Any]) -> list[tuple[str, re.Pattern[str]]]:
    """(method, path pattern) of every operation of an OpenAPI ``document`` whose body is
    a ``multipart/form-data`` upload."""
    found = []
    for template, operations in document.get("paths", {}).items():
        for method, operation in operations.items():
            content = (operation.get("requestBody") or {}).get("content", {})
            if "multipart/form-data" in content:
                found.append((method.upper(), _path_pattern(template)))
    return found


class BodyLimit:
    """ASGI middleware: a body over its limit is a 413 before the route reads it.

    Only the routes that take an upload (a ``multipart/form-data`` body in the API
    document) have the upload limit, and only for a multipart body; every other body has
    the body limit, whatever its ``Content-Type`` claims. A ``Content-Length`` over the
    limit is answered before a byte of the body is read; a chunked body (no length) is
    counted as it arrives and answered once it passes the limit. Either way the answer
    goes out first, then the rest of the body is read and thrown away (at most
    :data:`DRAIN_BYTES`, for :data:`DRAIN_SECONDS`) and the connection closed: most
    clients read no answer before they have sent the whole body, and closing on them
    mid-upload would leave them a reset connection instead of the 413.
    """

    def __init__(self, app: ASGIApp, limits: RequestLimits) -> None:
        self.app = app
        self.limits = limits
        self._uploads: list[tuple[str, re.Pattern[str]]] | None = None

    def _takes_uploads(self, scope: Scope) -> bool:
        if self._uploads is None:
            application = scope.get("app")
            openapi = getattr(application, "openapi", None)
            self._uploads = upload_routes(openapi()) if callable(openapi) else []
        path: str = scope["path"]
        method: str = scope["method"]
        return any(m == method and pattern.match(path) for m, pattern in self._uploads)

    def _limit(self, scope: Scope, headers: Mapping[str, str]) -> tuple[str, int, int]:
        """What the body is called in the answer, the limit named there, and the bytes
        it may have (an upload's framing on top)."""
        multipart = headers.get("content-type", "").lower().startswith("multipart/form-data")
        if multipart and self._takes_uploads(scope):
            upload = self.limits.upload_bytes
            return "the upload", upload, self.limits.multipart_bytes
        return "the request body", self.limits.body_bytes, self.limits.body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = request_headers(scope)
        what, named, limit = self._limit(scope, headers)
        declared = headers.get("content-length", "").strip()
        # h11 refuses a malformed Content-Length before we see it.
        if declared.isdigit() and int(declared) > limit:
            await _refuse_unread(scope, receive, send, headers, BodyTooLarge(what, named))
            return

        received = 0
        ended = False

        async def counted() -> Message:
            nonlocal received, ended
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                ended = not message.get("more_body", False)
                if received > limit:
                    raise BodyTooLarge(what, named)
            return message

        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLarge as exc:
            # Raised in a middleware below (FastAPI's handlers answer it in a route).
            if started:
                raise
            rest = receive if not ended else _nothing_more
            await _refuse_unread(scope, rest, send, headers, exc)


async def _nothing_more() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


async def _refuse_unread(
    scope: Scope, receive: Receive, send: Send, headers: Mapping[str, str], exc: BodyTooLarge
) -> None:
    """Answer 413 now, then read what the client still sends (bounded), then close."""
    body = envelope_bytes(exc.detail)
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    # A client that asked to be told before sending (Expect: 100-continue) sends nothing
    # more: reading would only tell the server to ask for the body.
    waits = headers.get("expect", "").lower() == "100-continue"
    await send({"type": "http.response.body", "body": body, "more_body": not waits})
    if waits:
        return
    drained = 0
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(DRAIN_SECONDS):
            while drained <= DRAIN_BYTES:
                message = await receive()
                if message["type"] != "http.request":
                    break
                drained += len(message.get("body", b""))
                if not message.get("more_body", False):
                    break
    await send({"type": "http.response.body", "body": b""})
