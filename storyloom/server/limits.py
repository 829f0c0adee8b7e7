"""How much one request may carry, and the middleware that refuses more before reading it.

Every limit of the HTTP surface is here (docs/server.md, "Limits", lists them): the size
of a request body (JSON and anything else), of an uploaded file, and the lengths of the
names and titles the API models accept. The body limits are the server's
:class:`RequestLimits`, set with ``storyloom serve --max-body-mb / --max-upload-mb``;
the lengths are constants, because files and the database depend on them.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from storyloom.server.api_errors import refuse, request_headers

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


class BodyLimit:
    """ASGI middleware: a body over its limit is a 413 before the route reads it.

    A ``Content-Length`` over the limit is refused before a byte of the body is read; a
    chunked body (no length) is counted as it arrives and refused once it passes the limit.
    Uploads (``multipart/form-data``) have the upload limit, every other body the body limit.
    """

    def __init__(self, app: ASGIApp, limits: RequestLimits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = request_headers(scope)
        if headers.get("content-type", "").lower().startswith("multipart/form-data"):
            what, limit = "the upload", self.limits.multipart_bytes
        else:
            what, limit = "the request body", self.limits.body_bytes
        declared = headers.get("content-length", "").strip()
        # h11 and httptools refuse a malformed Content-Length before we see it.
        if declared.isdigit() and int(declared) > limit:
            await refuse(scope, send, 413, BodyTooLarge(what, limit).detail)
            return

        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(what, limit)
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
            await refuse(scope, send, 413, exc.detail)
