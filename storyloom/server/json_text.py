"""Lone surrogates in JSON text: replaced by U+FFFD before anything reads the request.

JSON may escape half of a UTF-16 pair (``"\\ud83d"``), and a browser sends exactly that
when a text is cut in the middle of an emoji. Python reads it into a ``str`` that cannot
be written as UTF-8, so a file, the database or a JSON answer would fail long after the
request was accepted. Such a half says nothing of its own, so the rest of the text is
kept and the half becomes U+FFFD (what a UTF-8 decoder makes of a broken character):
in every JSON request body (:class:`LoneSurrogates`) and every WebSocket message
(:func:`loads`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from storyloom.server.api_errors import request_headers

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")
# In JSON text a surrogate can only be written as an escape, high or low half.
_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")


def _clean(text: str) -> str:
    # json.loads joins an escaped pair into one character: what is left is a lone half.
    return _SURROGATE.sub(REPLACEMENT, text)


def without_lone_surrogates(value: Any) -> Any:
    """``value`` (parsed JSON) with every lone surrogate in strings and keys replaced.

    Iterative, so a document as deep as the parser allowed cannot overflow the stack here.
    """
    root: list[Any] = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        parent, key = stack.pop()
        item = parent[key]
        if isinstance(item, str):
            parent[key] = _clean(item)
        elif isinstance(item, list):
            stack.extend((item, i) for i in range(len(item)))
        elif isinstance(item, dict):
            cleaned = {_clean(k): v for k, v in item.items()}
            item.clear()
            item.update(cleaned)
            stack.extend((item, k) for k in item)
    return root[0]


def loads(text: str | bytes) -> Any:
    """``json.loads`` without lone surrogates in the result."""
    return without_lone_surrogates(json.loads(text))


class LoneSurrogates:
    """ASGI middleware: a JSON request body with an escaped lone surrogate is read whole,
    repaired and handed on re-encoded; every other request passes untouched.

    Put it inside :class:`~storyloom.server.limits.BodyLimit`, which bounds what is read.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _may_be_json(scope):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                # The client left before sending the body: let the app see that.
                await self.app(scope, _replay([message], receive), send)
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        if _ESCAPED_SURROGATE.search(body):
            body = _repaired(body)
            scope = {**scope, "headers": _with_length(scope["headers"], len(body))}
        await self.app(scope, _replay([{"type": "http.request", "body": body}], receive), send)


def _may_be_json(scope: Scope) -> bool:
    # FastAPI reads a body without a content type as JSON too.
    if scope["method"] in ("GET", "HEAD", "OPTIONS"):
        return False
    content_type = request_headers(scope).get("content-type", "").lower()
    return not content_type or "json" in content_type


def _with_length(headers: list[tuple[bytes, bytes]], length: int) -> list[tuple[bytes, bytes]]:
    kept = [(k, v) for k, v in headers if k.lower() != b"content-length"]
    return [*kept, (b"content-length", str(length).encode())]


def _repaired(body: bytes) -> bytes:
    """The body with lone surrogates replaced; as it was when it is not JSON the parser
    takes (the route answers that as it does any bad body)."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return body
    return json.dumps(without_lone_surrogates(value), ensure_ascii=False).encode()


def _replay(messages: list[Message], then: Receive) -> Receive:
    """A ``receive`` that gives ``messages`` first, then waits on ``then`` (a disconnect)."""
    pending = list(messages)

    async def receive() -> Message:
        if pending:
            return pending.pop(0)
        return await then()

    return receive
