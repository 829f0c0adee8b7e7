"""A real HTTP server that speaks the OpenAI API and replays scripted answers.

Tests and benchmarks talk to it over real sockets, so everything above the HTTP layer
(the openai SDK, our retries, error mapping, SSE parsing, cancellation) runs for real::

    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(Reply(text="Hello there"), Reply(status=429, retry_after=0))
        ...  # point a ChatEndpoint at llm.url
        assert llm.chat_requests[-1]["messages"][0]["content"] == "hi"

It serves ``GET /v1/models``, ``POST /v1/chat/completions`` (SSE streaming in the OpenAI
chunk format, and non-streaming) and ``POST /v1/embeddings`` (deterministic vectors),
and the text-completion routes: OpenAI's ``POST /v1/completions``, llama.cpp's
``POST /completion`` and KoboldCpp's ``POST /api/v1/generate``,
``POST /api/extra/generate/stream`` and ``POST /api/extra/abort``. Each chat or text
completion request takes the next scripted :class:`Reply`; embeddings requests take
theirs from :meth:`ReplayLLMServer.script_embeddings`. An empty queue answers the default
reply. It also runs on its own for manual testing::

    python -m storyloom.testing.replay_server --port 8421 --reply "Once upon a time..."
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import json
import math
import random
import re
import select
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

__all__ = ["RecordedRequest", "ReplayLLMServer", "Reply", "main"]

_WORDS = re.compile(r"\S+\s*|\s+")


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    ``status`` other than 200 returns an OpenAI-style error (with ``Retry-After`` when
    ``retry_after`` is set). ``chunks`` splits ``text`` into that many stream chunks (some
    empty when it exceeds the length); by default each word is a chunk. ``delay_s`` waits
    before the first byte. ``cut_after_chunks`` drops the connection after that many
    content chunks, with no ``[DONE]``; ``error_after_chunks`` sends an ``{"error": ...}``
    event instead; ``hold_after_chunks`` keeps the connection open, silent, until the
    client goes away. ``tool_calls`` items are ``{"name": ..., "arguments": dict | str}``;
    ``tool_argument_chunks`` streams each call's arguments in that many pieces (the first
    with the call's id and name, the rest only ``index`` and an arguments fragment), as
    OpenAI streams them.
    ``burst`` sends the whole stream in one write instead of one write per chunk, so a
    benchmark measures the client rather than the server's syscalls.
    """

    text: str = ""
    status: int = 200
    retry_after: float | None = None
    error_message: str | None = None
    error_code: str | None = None
    chunks: int | None = None
    chunk_delay_s: float = 0.0
    delay_s: float = 0.0
    cut_after_chunks: int | None = None
    error_after_chunks: int | None = None
    hold_after_chunks: int | None = None
    finish_reason: str | None = None
    tool_calls: Sequence[dict[str, Any]] = ()
    tool_argument_chunks: int = 1
    reasoning: str = ""
    model: str | None = None
    burst: bool = False

    def pieces(self) -> list[str]:
        """The content deltas this reply streams, in order."""
        if self.chunks is None:
            return _WORDS.findall(self.text) or [""]
        count = max(1, self.chunks)
        size = len(self.text)
        return [self.text[i * size // count : (i + 1) * size // count] for i in range(count)]


class RecordedRequest(dict[str, Any]):
    """A received request: the JSON body as a dict, plus ``method``, ``path``, ``headers``
    (lower-case names) and ``client_port`` (the same port means a reused connection)."""

    def __init__(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        body: dict[str, Any],
        client_port: int = 0,
    ) -> None:
        super().__init__(body)
        self.method = method
        self.path = path
        self.headers = headers
        self.client_port = client_port


_ERROR_DEFAULTS: dict[int, tuple[str, str, str | None]] = {
    400: ("Bad request (replay server)", "invalid_request_error", None),
    401: ("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
    403: ("You are not allowed to use this model.", "invalid_request_error", None),
    404: ("Not found.", "invalid_request_error", None),
    429: ("Rate limit reached (replay server).", "requests", "rate_limit_exceeded"),
}


def _error_body(status: int, message: str | None, code: str | None) -> dict[str, Any]:
    default_message, kind, default_code = _ERROR_DEFAULTS.get(
        status, ("The server had an error processing your request.", "server_error", None)
    )
    return {
        "error": {
            "message": message or default_message,
            "type": kind,
            "param": None,
            "code": code or default_code,
        }
    }


TokenizeRoute = Literal["llama.cpp", "vllm", "koboldcpp"]
_TOKENIZE_ROUTES: dict[str, str] = {
    "llama.cpp": "/tokenize",
    "vllm": "/tokenize",
    "koboldcpp": "/api/extra/tokencount",
}
# Text-completion routes and the wire format each answers in.
Wire = Literal["text", "llamacpp", "koboldcpp"]
_TEXT_ROUTES: dict[str, tuple[Wire, bool | None]] = {
    "/v1/completions": ("text", None),
    "/completion": ("llamacpp", None),
    "/api/v1/generate": ("koboldcpp", False),
    "/api/extra/generate/stream": ("koboldcpp", True),
}
_FAKE_TOKEN = re.compile(r"\w+|[^\w\s]")


def fake_tokens(text: str) -> list[int]:
    """The replay server's tokenizer: one token per word or other non-space character."""
    return [len(piece) for piece in _FAKE_TOKEN.findall(text)]


def fake_embedding(text: str, dimensions: int) -> list[float]:
    """A unit vector seeded by the text's hash: the same text always gives the same vector."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
    rng = random.Random(seed)
    vector = [rng.gauss(0.0, 1.0) for _ in range(dimensions)]
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    _unsent: list[bytes]

    def log_message(self, format: str, *args: Any) -> None:
        # Tests read assertions, not access logs.
        return

    # -- plumbing ---------------------------------------------------------------------

    def _read_body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return {}
        parsed = json.loads(raw)
        return parsed if isinstance(parsed, dict) else {"_body": parsed}

    def _send_json(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, status: int, message: str | None = None, code: str | None = None) -> None:
        self._send_json(status, _error_body(status, message, code))

    def _authorised(self) -> bool:
        key = self.server.owner.api_key
        if key is None:
            return True
        if self.headers.get("Authorization", "") == f"Bearer {key}":
            return True
        self._send_error(401)
        return False

    def _record(self, body: dict[str, Any]) -> None:
        headers = {name.lower(): value for name, value in self.headers.items()}
        port = int(self.client_address[1])
        self.server.owner._record(RecordedRequest(self.command, self.path, headers, body, port))

    def _known_model(self, body: dict[str, Any]) -> bool:
        models = self.server.owner.models
        model = body.get("model")
        if not models or model in models:
            return True
        self._send_error(
            404,
            f"The model `{model}` does not exist or you do not have access to it.",
            "model_not_found",
        )
        return False

    # -- routes -----------------------------------------------------------------------

    def do_GET(self) -> None:
        self._record({})
        if not self._authorised():
            return
        owner = self.server.owner
        if self.path.rstrip("/") == "/v1/models" and owner.serve_models:
            listed = owner.models if owner.listed_models is None else owner.listed_models
            data = [
                {"id": m, "object": "model", "created": 0, "owned_by": "replay"} for m in listed
            ]
            self._send_json(200, {"object": "list", "data": data})
        elif self.path == "/api/extra/true_max_context_length" and owner.context_length:
            self._send_json(200, {"value": owner.context_length})
        elif self.path == "/props" and owner.context_length:
            self._send_json(200, {"default_generation_settings": {"n_ctx": owner.context_length}})
        else:
            self._send_error(404, f"Unknown path {self.path}")

    def do_POST(self) -> None:
        try:
            body = self._read_body()
        except (ValueError, UnicodeDecodeError):
            self._record({})
            self._send_error(400, "Request body is not valid JSON.")
            return
        self._record(body)
        if not self._authorised():
            return
        path = self.path.rstrip("/")
        tokenize = self.server.owner.tokenize
        if path == "/v1/chat/completions":
            if self._known_model(body) and self._format_taken(body):
                self._chat(body, self.server.owner._next_reply())
        elif tokenize is not None and path == _TOKENIZE_ROUTES[tokenize]:
            self._tokenize(tokenize, body)
        elif path == "/v1/embeddings":
            if self._known_model(body):
                self._embeddings(body, self.server.owner._next_embedding_reply())
        elif path in _TEXT_ROUTES:
            wire, streams = _TEXT_ROUTES[path]
            if wire != "text" or self._known_model(body):
                stream = bool(body.get("stream")) if streams is None else streams
                self._text(body, self.server.owner._next_reply(), wire, stream)
        elif path == "/api/extra/abort":
            self._send_json(200, {"success": "true", "done": "true"})
        else:
            self._send_error(404, f"Unknown path {self.path}")

    def _format_taken(self, body: dict[str, Any]) -> bool:
        """Refuse a json_schema ``response_format`` as servers without it do (400, before
        any answer: no scripted reply is used)."""
        asked = body.get("response_format")
        if self.server.owner.json_schema or not isinstance(asked, dict):
            return True
        if asked.get("type") != "json_schema":
            return True
        self._send_error(400, "response_format type 'json_schema' is not supported (replay server)")
        return False

    def _tokenize(self, kind: TokenizeRoute, body: dict[str, Any]) -> None:
        """The tokenize route of a local server, with :func:`fake_tokens` as its tokenizer."""
        text = body.get("prompt" if kind != "llama.cpp" else "content")
        if not isinstance(text, str):
            self._send_error(422, "the text to tokenize is missing")
            return
        ids = fake_tokens(text)
        if kind == "koboldcpp":
            self._send_json(200, {"value": len(ids), "ids": ids})
        elif kind == "vllm":
            self._send_json(200, {"count": len(ids), "max_model_len": 8192, "tokens": ids})
        else:
            self._send_json(200, {"tokens": ids})

    # -- chat -------------------------------------------------------------------------

    def _wait(self, seconds: float) -> bool:
        """Sleep unless the server stops first; False means it is stopping."""
        return seconds <= 0 or not self.server.owner._stopping.wait(seconds)

    def _delay_or_error(self, reply: Reply) -> bool:
        """Wait ``delay_s``, then send the reply's error if it has one; True when done."""
        if not self._wait(reply.delay_s):
            self.close_connection = True
            return True
        if reply.status == 200:
            return False
        headers = {}
        if reply.retry_after is not None:
            headers["Retry-After"] = f"{reply.retry_after:g}"
        body = _error_body(reply.status, reply.error_message, reply.error_code)
        self._send_json(reply.status, body, headers)
        return True

    def _chat(self, body: dict[str, Any], reply: Reply) -> None:
        if self._delay_or_error(reply):
            return
        model = reply.model or str(body.get("model", "replay"))
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream_chat(reply, model, include_usage)
        else:
            self._send_json(200, _completion(reply, model))

    def _write_chunk(self, data: bytes, *, flush: bool = True) -> None:
        self._unsent.append(b"%x\r\n%s\r\n" % (len(data), data))
        if flush:
            self._flush()

    def _flush(self) -> None:
        if self._unsent:
            self.wfile.write(b"".join(self._unsent))
            self._unsent.clear()

    def _start_event_stream(self) -> None:
        """Send the headers of a chunked SSE answer; its events follow via _write_chunk."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._unsent = []

    def _stream_chat(self, reply: Reply, model: str, include_usage: bool) -> None:
        self._start_event_stream()
        special = (reply.cut_after_chunks, reply.error_after_chunks, reply.hold_after_chunks)
        flush_each = not reply.burst
        if reply.burst and special == (None, None, None) and not reply.chunk_delay_s:
            # Rendered once per reply: a benchmark then times the client, not json.dumps.
            key = (id(reply), model, include_usage)
            cache = self.server.owner._burst_cache
            if key not in cache:
                self._render_stream(reply, model, include_usage, flush_each=False)
                cache[key] = (reply, b"".join(self._unsent))
            self.wfile.write(cache[key][1])
            self._unsent.clear()
            return
        self._render_stream(reply, model, include_usage, flush_each=flush_each)

    def _render_stream(
        self, reply: Reply, model: str, include_usage: bool, *, flush_each: bool
    ) -> None:
        stamp = int(time.time())
        head = {"id": "chatcmpl-replay", "object": "chat.completion.chunk", "created": stamp,
                "model": model, "system_fingerprint": None}  # fmt: skip

        def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return b"data: " + _compact({**head, "choices": [choice]}) + b"\n\n"

        self._write_chunk(event({"role": "assistant", "content": ""}), flush=flush_each)
        if reply.reasoning:
            self._write_chunk(event({"reasoning_content": reply.reasoning}), flush=flush_each)
        if not self._write_pieces(
            reply, lambda piece: self._write_chunk(event({"content": piece}), flush=flush_each)
        ):
            return
        for index, call in enumerate(reply.tool_calls):
            for delta in _tool_call_deltas(index, call, reply.tool_argument_chunks):
                self._write_chunk(event({"tool_calls": [delta]}), flush=flush_each)
        self._write_chunk(event({}, _finish_reason(reply)), flush=flush_each)
        if include_usage:
            usage = {**head, "choices": [], "usage": _usage(reply)}
            self._write_chunk(b"data: " + _compact(usage) + b"\n\n", flush=flush_each)
        self._write_chunk(b"data: [DONE]\n\n", flush=False)
        self._write_chunk(b"", flush=flush_each)

    # -- text completions -------------------------------------------------------------

    def _text(self, body: dict[str, Any], reply: Reply, wire: Wire, stream: bool) -> None:
        if self._delay_or_error(reply):
            return
        model = reply.model or str(body.get("model") or "replay")
        if not stream:
            self._send_json(200, _text_completion(reply, model, wire))
            return
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        self._start_event_stream()
        flush = not reply.burst
        if not self._write_pieces(
            reply,
            lambda piece: self._write_chunk(_text_event(wire, model, piece, None), flush=flush),
        ):
            return
        self._write_chunk(_text_event(wire, model, "", reply), flush=flush)
        if wire == "text":
            if include_usage:
                usage = {"id": "cmpl-replay", "object": "text_completion", "model": model,
                         "choices": [], "usage": _usage(reply)}  # fmt: skip
                self._write_chunk(b"data: " + _compact(usage) + b"\n\n", flush=flush)
            self._write_chunk(b"data: [DONE]\n\n", flush=False)
        self._write_chunk(b"")

    def _write_pieces(self, reply: Reply, write: Callable[[str], None]) -> bool:
        """Stream the reply's pieces with ``write``, acting out its scripted failure (a
        cut, an error event, a hold) where it comes; False when the stream ends there."""
        for index, piece in enumerate(reply.pieces()):
            if index == reply.cut_after_chunks:
                self._drop_connection()
                return False
            if index == reply.error_after_chunks:
                error = _error_body(500, reply.error_message, reply.error_code)
                self._write_chunk(b"data: " + _compact(error) + b"\n\n", flush=False)
                self._write_chunk(b"")
                return False
            if index == reply.hold_after_chunks:
                self._hold_until_client_leaves()
                return False
            write(piece)
            if reply.chunk_delay_s and not self._wait(reply.chunk_delay_s):
                return False
        return True

    def _drop_connection(self) -> None:
        """Close the socket mid-body: the client sees an incomplete chunked message."""
        self._flush()
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _hold_until_client_leaves(self) -> None:
        self._flush()
        self.close_connection = True
        owner = self.server.owner
        while not owner._stopping.is_set():
            readable, _, _ = select.select([self.connection], [], [], 0.02)
            if not readable:
                continue
            try:
                gone = self.connection.recv(1, socket.MSG_PEEK) == b""
            except OSError:
                gone = True
            if gone:
                owner._note_disconnect()
                return

    # -- embeddings -------------------------------------------------------------------

    def _embeddings(self, body: dict[str, Any], reply: Reply) -> None:
        if self._delay_or_error(reply):
            return
        raw_input = body.get("input")
        texts = [raw_input] if isinstance(raw_input, str) else raw_input
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            self._send_error(400, "'input' must be a non-empty string or list of strings.")
            return
        owner = self.server.owner
        asked = body.get("dimensions") if owner.honour_dimensions else None
        dimensions = int(asked or owner.embedding_dim)
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for index, text in enumerate(texts):
            vector = fake_embedding(text, dimensions)
            encoded: Any = vector
            if as_base64:
                encoded = base64.b64encode(struct.pack(f"<{dimensions}f", *vector)).decode()
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        tokens = sum(len(t.split()) for t in texts)
        self._send_json(
            200,
            {
                "object": "list",
                "data": data,
                "model": body.get("model"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )


def _compact(payload: dict[str, Any]) -> bytes:
    # Compact separators, as OpenAI sends them.
    return json.dumps(payload, separators=(",", ":")).encode()


def _finish_reason(reply: Reply) -> str:
    return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")


def _usage(reply: Reply) -> dict[str, int]:
    completion = len(_WORDS.findall(reply.text))
    return {"prompt_tokens": 10, "completion_tokens": completion, "total_tokens": 10 + completion}


def _tool_call(index: int, call: dict[str, Any]) -> dict[str, Any]:
    arguments = call.get("arguments", {})
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    return {
        "index": index,
        "id": call.get("id", f"call_replay_{index}"),
        "type": "function",
        "function": {"name": call["name"], "arguments": arguments},
    }


def _tool_call_deltas(index: int, call: dict[str, Any], pieces: int) -> list[dict[str, Any]]:
    """The stream deltas of one tool call: its arguments cut into ``pieces`` fragments."""
    whole = _tool_call(index, call)
    arguments: str = whole["function"]["arguments"]
    count = max(1, pieces)
    size = len(arguments)
    cuts = [arguments[i * size // count : (i + 1) * size // count] for i in range(count)]
    first = {**whole, "function": {"name": whole["function"]["name"], "arguments": cuts[0]}}
    rest = [{"index": index, "function": {"arguments": cut}} for cut in cuts[1:]]
    return [first, *rest]


def _completion(reply: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {k: v for k, v in _tool_call(i, c).items() if k != "index"}
            for i, c in enumerate(reply.tool_calls)
        ]
        message["content"] = reply.text or None
    return {
        "id": "chatcmpl-replay",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": _finish_reason(reply),
            }
        ],
        "usage": _usage(reply),
    }


def _llamacpp_end(reply: Reply, model: str) -> dict[str, Any]:
    finish = _finish_reason(reply)
    usage = _usage(reply)
    return {
        "stop": True,
        "stop_type": "limit" if finish == "length" else "eos",
        "stopping_word": "",
        "model": model,
        "tokens_predicted": usage["completion_tokens"],
        "tokens_evaluated": usage["prompt_tokens"],
        "timings": {"predicted_n": usage["completion_tokens"]},
    }


def _text_event(wire: Wire, model: str, piece: str, end: Reply | None) -> bytes:
    """One SSE event of a streamed text completion; ``end`` set: the closing one."""
    finish = None if end is None else _finish_reason(end)
    if wire == "koboldcpp":
        return (
            b"event: message\ndata: "
            + _compact({"token": piece, "finish_reason": finish})
            + b"\n\n"
        )
    if wire == "llamacpp":
        payload: dict[str, Any] = {"content": piece, "stop": False, "index": 0}
        if end is not None:
            payload.update(_llamacpp_end(end, model))
        return b"data: " + _compact(payload) + b"\n\n"
    choice = {"index": 0, "text": piece, "logprobs": None, "finish_reason": finish}
    head = {"id": "cmpl-replay", "object": "text_completion", "created": int(time.time()),
            "model": model}  # fmt: skip
    return b"data: " + _compact({**head, "choices": [choice]}) + b"\n\n"


def _text_completion(reply: Reply, model: str, wire: Wire) -> dict[str, Any]:
    """A whole text completion in ``wire``'s format."""
    usage = _usage(reply)
    finish = _finish_reason(reply)
    if wire == "koboldcpp":
        return {"results": [{"text": reply.text, "finish_reason": finish, "logprobs": None,
                             "prompt_tokens": usage["prompt_tokens"],
                             "completion_tokens": usage["completion_tokens"]}]}  # fmt: skip
    if wire == "llamacpp":
        return {"content": reply.text, "index": 0, **_llamacpp_end(reply, model)}
    return {
        "id": "cmpl-replay",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"text": reply.text, "index": 0, "logprobs": None, "finish_reason": finish}],
        "usage": usage,
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: ReplayLLMServer

    def __init__(self, address: tuple[str, int], handler: type[_Handler]) -> None:
        super().__init__(address, handler)
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Hang up on kept-alive clients, so a stopped server really stops answering."""
        with self._open_lock:
            sockets = list(self._open)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-answer is normal here (cancellation tests).
        return


class ReplayLLMServer:
    """An OpenAI-compatible server on 127.0.0.1 that replays scripted replies.

    ``api_key`` set: requests without ``Authorization: Bearer <api_key>`` get 401.
    ``models`` non-empty: chat or embeddings requests for another model get 404
    ``model_not_found``.
    ``serve_models=False`` answers 404 on ``/v1/models`` like servers that lack it;
    ``listed_models`` lists other names than those served (Ollama lists ``llama3:latest``
    and answers to ``llama3`` too). ``honour_dimensions=False`` ignores a requested
    embedding size, as many local servers do. ``tokenize`` serves the tokenize route of
    llama.cpp (``POST /tokenize`` {content}), vLLM (``POST /tokenize`` {model, prompt}) or
    KoboldCpp (``POST /api/extra/tokencount`` {prompt}), counting with :func:`fake_tokens`.
    ``context_length`` set: KoboldCpp's ``GET /api/extra/true_max_context_length`` and
    llama.cpp's ``GET /props`` report it.
    Every body is recorded as sent (``response_format`` included); ``json_schema=False``
    answers a chat request with a json_schema ``response_format`` 400, as a server without
    structured outputs does (the scripted reply stays queued).
    """

    def __init__(
        self,
        models: Sequence[str] = ("test-model",),
        *,
        api_key: str | None = None,
        default_reply: Reply | str = "OK",
        embedding_dim: int = 16,
        serve_models: bool = True,
        listed_models: Sequence[str] | None = None,
        honour_dimensions: bool = True,
        tokenize: TokenizeRoute | None = None,
        context_length: int | None = None,
        json_schema: bool = True,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.models = list(models)
        self.api_key = api_key
        self.default_reply = (
            default_reply if isinstance(default_reply, Reply) else Reply(text=default_reply)
        )
        self.embedding_dim = embedding_dim
        self.serve_models = serve_models
        self.listed_models = None if listed_models is None else list(listed_models)
        self.honour_dimensions = honour_dimensions
        self.tokenize = tokenize
        self.context_length = context_length
        self.json_schema = json_schema
        self._address = (host, port)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._replies: deque[Reply] = deque()
        self._embedding_replies: deque[Reply] = deque()
        self._burst_cache: dict[tuple[int, str, bool], tuple[Reply, bytes]] = {}
        self._requests: list[RecordedRequest] = []
        self._disconnects = 0
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> ReplayLLMServer:
        """Bind and serve in a daemon thread; returns self."""
        if self._server is not None:
            return self
        server = _Server(self._address, _Handler)
        server.owner = self
        self._server = server
        self._stopping.clear()
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True,
            name="replay-llm-server",
        )  # fmt: skip
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; held or delayed answers end at once."""
        if self._server is None:
            return
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._server.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def serve_forever(self) -> None:
        """Serve in the calling thread until interrupted (for the command line)."""
        self.start()
        try:
            while self._thread is not None and self._thread.is_alive():
                self._thread.join(timeout=0.5)
        finally:
            self.stop()

    def __enter__(self) -> ReplayLLMServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- what tests use ---------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the replay server is not running; call start() first")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """Base URL to configure, ending in ``/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *replies: Reply | str) -> None:
        """Queue replies for the next chat completion requests, in order."""
        with self._lock:
            self._replies.extend(r if isinstance(r, Reply) else Reply(text=r) for r in replies)

    def script_embeddings(self, *replies: Reply) -> None:
        """Queue replies (errors, delays) for the next embeddings requests."""
        with self._lock:
            self._embedding_replies.extend(replies)

    @property
    def pending(self) -> int:
        """Scripted chat replies not yet used."""
        with self._lock:
            return len(self._replies)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """Only the ``POST /v1/chat/completions`` requests."""
        return [r for r in self.requests if r.path.rstrip("/").endswith("/chat/completions")]

    @property
    def completion_requests(self) -> list[RecordedRequest]:
        """Only the text-completion requests (``/v1/completions``, llama.cpp's
        ``/completion``, KoboldCpp's generate routes)."""
        return [r for r in self.requests if r.path.rstrip("/") in _TEXT_ROUTES]

    @property
    def embedding_requests(self) -> list[RecordedRequest]:
        """Only the ``POST /v1/embeddings`` requests."""
        return [r for r in self.requests if r.path.rstrip("/").endswith("/embeddings")]

    @property
    def disconnects(self) -> int:
        """How many held streams (``hold_after_chunks``) the client has closed."""
        with self._lock:
            return self._disconnects

    def wait_for_disconnect(self, count: int = 1, timeout: float = 10.0) -> bool:
        """Block until ``count`` held streams were closed by the client; False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: self._disconnects >= count, timeout)

    def wait_for_requests(self, count: int = 1, timeout: float = 10.0) -> bool:
        """Block until ``count`` requests have arrived in total; False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: len(self._requests) >= count, timeout)

    # -- used by the handler ----------------------------------------------------------

    def _record(self, request: RecordedRequest) -> None:
        with self._changed:
            self._requests.append(request)
            self._changed.notify_all()

    def _next_reply(self) -> Reply:
        with self._lock:
            return self._replies.popleft() if self._replies else self.default_reply

    def _next_embedding_reply(self) -> Reply:
        with self._lock:
            return self._embedding_replies.popleft() if self._embedding_replies else Reply()

    def _note_disconnect(self) -> None:
        with self._changed:
            self._disconnects += 1
            self._changed.notify_all()


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: serve one reply forever, for manual tests and benchmarks."""
    parser = argparse.ArgumentParser(
        prog="python -m storyloom.testing.replay_server",
        description="OpenAI-compatible server that answers every request with the same reply.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8421, help="0 picks a free port")
    parser.add_argument("--reply", default="OK", help="text of every chat answer")
    parser.add_argument("--chunks", type=int, default=None, help="stream chunks (default: words)")
    parser.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between chunks")
    parser.add_argument("--burst", action="store_true", help="send each stream in one write")
    parser.add_argument("--model", action="append", help="served model name (repeatable)")
    parser.add_argument("--api-key", default=None, help="require this Bearer key")
    parser.add_argument("--embedding-dim", type=int, default=16)
    args = parser.parse_args(argv)
    reply = Reply(
        text=args.reply, chunks=args.chunks, chunk_delay_s=args.chunk_delay, burst=args.burst
    )
    server = ReplayLLMServer(
        models=args.model or ["test-model"],
        api_key=args.api_key,
        default_reply=reply,
        embedding_dim=args.embedding_dim,
        host=args.host,
        port=args.port,
    )
    server.start()
    print(f"replay LLM server at http://{args.host}:{server.port}/v1", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    main()
