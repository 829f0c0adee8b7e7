"""Every way an LLM call can fail, as one error type with a ``kind``.

The openai SDK and httpx2 raise dozens of exception classes; callers (the server, the
workflow runner, the CLI) only need to know *what kind* of problem it is, a sentence the
user can act on, and the text already streamed (which is never lost). :func:`map_error`
turns any SDK or transport exception into an :class:`LLMError`.

``LLMError(message, kind="auth")`` builds the subclass for that kind, so both
``except AuthenticationFailed`` and ``if err.kind == "auth"`` work.

The kinds that may go away on their own or once the endpoint is set up (unreachable,
rate limited, timeout, not configured) are also :class:`~storyloom.core.errors.Unavailable`;
the others are failures of the endpoint's answer.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import re
import socket
import ssl
import time
from collections.abc import Sequence
from typing import Any, ClassVar, Literal, get_args

import httpx
import httpx2
import openai

from storyloom.core.errors import FieldProblem, InvalidInput, StoryloomError, Unavailable

ErrorKind = Literal[
    "unreachable",
    "auth",
    "model_not_found",
    "rate_limited",
    "timeout",
    "stream_cut",
    "bad_request",
    "server_error",
    "cancelled",
    "not_configured",
]
ERROR_KINDS: tuple[ErrorKind, ...] = get_args(ErrorKind)

#: Kinds worth another attempt (before the first token only; see :mod:`storyloom.llm.retry`).
RETRYABLE_KINDS: frozenset[ErrorKind] = frozenset({"unreachable", "rate_limited", "server_error"})


class LLMError(StoryloomError):
    """An LLM endpoint call failed.

    ``kind`` says what went wrong (one of :data:`ERROR_KINDS`), ``message`` says it in
    plain words with a hint, ``partial_text`` holds what was streamed before the failure,
    ``status_code`` is the HTTP status when the server answered, ``retry_after_s`` the
    wait the server asked for (429/503), ``retryable`` whether another attempt may help.
    """

    default_kind: ErrorKind = "server_error"
    _by_kind: ClassVar[dict[str, type[LLMError]]] = {}

    def __new__(
        cls, message: str = "", *args: Any, kind: ErrorKind | None = None, **kw: Any
    ) -> Any:
        if cls is LLMError and kind is not None:
            cls = LLMError._by_kind.get(kind, LLMError)
        return super().__new__(cls, message)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        LLMError._by_kind[cls.default_kind] = cls

    def __init__(
        self,
        message: str,
        *,
        kind: ErrorKind | None = None,
        partial_text: str = "",
        status_code: int | None = None,
        retry_after_s: float | None = None,
        retryable: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind or self.default_kind
        if self.kind not in ERROR_KINDS:
            raise ValueError(f"unknown LLM error kind {self.kind!r}")
        self.message = message
        self.partial_text = partial_text
        self.status_code = status_code
        self.retry_after_s = retry_after_s
        self.retryable = self.kind in RETRYABLE_KINDS if retryable is None else retryable

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(kind={self.kind!r}, message={self.message!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep kind, partial text and status when an error crosses a process boundary.
        return (_rebuild, (type(self), self.message, dict(self.__dict__)))

    def with_partial_text(self, partial_text: str) -> LLMError:
        """This error with ``partial_text`` set (the same object, for raising)."""
        self.partial_text = partial_text
        return self

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view for API responses and workflow events."""
        return {
            "kind": self.kind,
            "message": self.message,
            "partial_text": self.partial_text,
            "status_code": self.status_code,
        }


def _rebuild(cls: type[LLMError], message: str, state: dict[str, Any]) -> LLMError:
    error: LLMError = cls.__new__(cls, message)
    Exception.__init__(error, message)
    error.__dict__.update(state)
    return error


class EndpointUnreachable(LLMError, Unavailable):
    """No connection could be made (refused, unknown host, TLS, connect timeout)."""

    default_kind = "unreachable"


class AuthenticationFailed(LLMError):
    """401/403: the key is missing, wrong, or not allowed to use this model."""

    default_kind = "auth"


class ModelNotFound(LLMError):
    """The endpoint does not serve the configured model."""

    default_kind = "model_not_found"


class RateLimited(LLMError, Unavailable):
    """429: too many requests, or the account is out of quota."""

    default_kind = "rate_limited"


class LLMTimeout(LLMError, Unavailable):
    """The server accepted the connection but did not answer in time."""

    default_kind = "timeout"


class StreamCut(LLMError):
    """The stream broke after it started; ``partial_text`` holds what arrived."""

    default_kind = "stream_cut"


class BadRequest(LLMError):
    """4xx other than auth/not-found/rate-limit: the request itself was refused."""

    default_kind = "bad_request"


class ServerError(LLMError):
    """5xx, or an answer that is not the OpenAI API's (an HTML page, nothing, a bare
    404): the address answered, but not as a model server."""

    default_kind = "server_error"


class LLMCancelled(LLMError):
    """The call was stopped on purpose (``ChatStream.aclose()`` from another task)."""

    default_kind = "cancelled"


class NotConfigured(LLMError, Unavailable):
    """The endpoint lacks a base URL or model name."""

    default_kind = "not_configured"


class JsonAnswerError(InvalidInput):
    """The model answered, but not with the JSON that was asked for; ``problems`` names
    each bad field (``""`` for the answer as a whole). ``what`` is what was asked for."""

    def __init__(
        self, what: str, problems: Sequence[FieldProblem], *, who: str = "the model"
    ) -> None:
        self.what = what
        summary = "; ".join(str(p) for p in problems) or "unreadable"
        super().__init__(f"{who}'s {what} is not valid: {summary}", problems)


# -- mapping --------------------------------------------------------------------------

_TIMEOUTS = (httpx2.TimeoutException, httpx.TimeoutException, TimeoutError)
_CONNECT_TIMEOUTS = (
    httpx2.ConnectTimeout,
    httpx.ConnectTimeout,
    httpx2.PoolTimeout,
    httpx.PoolTimeout,
)
_TRANSPORT = (httpx2.TransportError, httpx.TransportError)

MAX_RETRY_AFTER_HEADER_S = 3600.0


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and its causes/contexts, outermost first, without cycles."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not s for s in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _connect_reason(exc: BaseException) -> str:
    for link in _chain(exc):
        if isinstance(link, ConnectionRefusedError):
            return "connection refused. Is the server running?"
        if isinstance(link, socket.gaierror):
            return "host name not found. Check the address for typos."
        if isinstance(link, ssl.SSLError):
            return f"TLS handshake failed ({link.reason or link}). Check http:// versus https://."
        if isinstance(link, ConnectionResetError):
            return "the connection was reset. Is it the right port?"
    last = _chain(exc)[-1]
    detail = (str(last) or type(last).__name__).rstrip(".")
    return f"{detail}. Is the server running and the address right?"


def retry_after_seconds(headers: Any) -> float | None:
    """Parse ``retry-after-ms`` / ``Retry-After`` (seconds or HTTP date); None if absent."""
    if headers is None:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            value = float(raw) / divisor
        except ValueError:
            parsed = email.utils.parsedate_tz(raw)
            if parsed is None:
                continue
            value = email.utils.mktime_tz(parsed) - time.time()
        if value != value:  # NaN
            continue
        return min(max(value, 0.0), MAX_RETRY_AFTER_HEADER_S)
    return None


def _server_message(exc: openai.APIStatusError) -> str:
    """The error text the server sent, if any, trimmed to one line."""
    body = exc.body
    text: str | None = None
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            candidate = inner.get("message") or inner.get("detail")
            text = candidate if isinstance(candidate, str) else None
        elif isinstance(inner, str):
            text = inner
        if text is None and isinstance(body.get("detail"), str):
            text = body["detail"]
    elif isinstance(body, str):
        text = body
    if not text:
        return ""
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:297] + "..."


def _error_code(exc: openai.APIStatusError) -> str:
    if exc.code:
        return exc.code
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        code = body["error"].get("code")
        return str(code) if code is not None else ""
    return ""


_OVERFLOWS = (
    # llama.cpp: "request (2069 tokens) exceeds the available context size (2048 tokens)"
    re.compile(r"\((\d+) tokens\) exceeds the available context size \((\d+) tokens\)"),
    # OpenAI, vLLM, DeepSeek: "maximum context length is 8192 tokens. However, your
    # messages resulted in 9000 tokens" / "you requested 2100 tokens"
    re.compile(
        r"maximum context length is (?P<limit>\d+) tokens.*?(?:resulted in|requested) "
        r"(?P<asked>\d+) tokens",
        re.IGNORECASE,
    ),
)


def context_overflow(said: str) -> tuple[int, int] | None:
    """(tokens asked, context size) when a server's error says the prompt is too long."""
    for pattern in _OVERFLOWS:
        found = pattern.search(said)
        if found is None:
            continue
        if "limit" in pattern.groupindex:
            return int(found["asked"]), int(found["limit"])
        return int(found.group(1)), int(found.group(2))
    return None


def _status_error(
    exc: openai.APIStatusError, base_url: str, model: str | None, timeout_s: float | None
) -> LLMError:
    status = exc.status_code
    said = _server_message(exc)
    said_part = f" The server said: {said}" if said else ""
    code = _error_code(exc)
    retry_after = retry_after_seconds(exc.response.headers)
    model_part = f" '{model}'" if model else ""
    if status in (401, 403):
        verb = "rejected the API key" if status == 401 else "refused access"
        return LLMError(
            f"{base_url} {verb} ({status}). Check the API key in settings.{said_part}",
            kind="auth", status_code=status,
        )  # fmt: skip
    if status in _NO_SUCH_ROUTE and not _is_json(exc.response):
        # A web page, a file server or a router's admin page: no API route answers here,
        # and the server's own words (an HTML error page) would only bury that.
        shown = "" if _looks_like_html(exc.response.text) else said_part
        return not_an_openai_api(base_url, f"got status {status}", status_code=status, said=shown)
    if status == 404 and (code == "model_not_found" or "model" in said.lower()):
        return LLMError(
            f"{base_url} does not serve model{model_part} (404). Pick a model the server "
            f"lists, or pull/load it there first.{said_part}",
            kind="model_not_found", status_code=status,
        )  # fmt: skip
    if status == 404:
        return LLMError(
            f"{exc.request.url} was not found (404). Does the base URL {base_url} end "
            f"in /v1?{said_part}",
            kind="bad_request", status_code=status,
        )  # fmt: skip
    if status == 429:
        out_of_quota = code == "insufficient_quota"
        hint = (
            "The account is out of quota; add credit or use another key."
            if out_of_quota
            else "Wait a moment and try again, or lower the request rate."
        )
        return LLMError(
            f"{base_url} is rate limiting requests (429). {hint}{said_part}",
            kind="rate_limited", status_code=status, retry_after_s=retry_after,
            retryable=not out_of_quota,
        )  # fmt: skip
    if status == 408 or status == 504:
        wait = f" within {timeout_s:g} s" if timeout_s else ""
        return LLMError(
            f"{base_url} timed out{wait} ({status}). The model may be loading or busy; "
            f"try again or raise the timeout in settings.{said_part}",
            kind="timeout", status_code=status,
        )  # fmt: skip
    overflow = context_overflow(said)
    if overflow is not None:
        asked, limit = overflow
        return LLMError(
            f"The prompt ({asked:,} tokens) does not fit the model's context ({limit:,} "
            f"tokens) on {base_url}. Set the context window in Settings to {limit} or less "
            "(or lower the pipeline's Token Budget), or start the server with a larger "
            "context (llama.cpp -c, KoboldCpp --contextsize). What you wrote is kept.",
            kind="bad_request", status_code=status,
        )  # fmt: skip
    if 400 <= status < 500:
        hint = said_part or " Check the model parameters."
        return LLMError(
            f"{base_url} refused the request ({status}).{hint}",
            kind="bad_request", status_code=status,
        )  # fmt: skip
    return LLMError(
        f"{base_url} had an internal error ({status}). Try again; if it persists, check "
        f"the server's log.{said_part}",
        kind="server_error", status_code=status, retry_after_s=retry_after,
    )  # fmt: skip


def map_error(
    exc: BaseException,
    *,
    base_url: str,
    model: str | None = None,
    timeout_s: float | None = None,
    connect_timeout_s: float | None = None,
    streaming: bool = False,
    partial_text: str = "",
) -> LLMError:
    """Turn any openai SDK / httpx / httpx2 / OS exception into an :class:`LLMError`.

    ``streaming`` means the response had started: transport failures then become
    ``stream_cut`` (with ``partial_text``) rather than ``unreachable``.
    """
    if isinstance(exc, LLMError):
        return exc.with_partial_text(partial_text or exc.partial_text)
    error = _map(exc, base_url, model, timeout_s, connect_timeout_s, streaming)
    error.partial_text = partial_text
    error.__cause__ = exc
    return error


def _map(
    exc: BaseException,
    base_url: str,
    model: str | None,
    timeout_s: float | None,
    connect_timeout_s: float | None,
    streaming: bool,
) -> LLMError:
    if isinstance(exc, asyncio.CancelledError):
        return LLMError("The request was cancelled.", kind="cancelled")
    if isinstance(exc, openai.APIStatusError):
        return _status_error(exc, base_url, model, timeout_s)
    if isinstance(exc, openai.APIResponseValidationError):
        return LLMError(
            f"{base_url} answered with something that is not an OpenAI-compatible response. "
            "Is the base URL right?",
            kind="server_error",
        )
    links = _chain(exc)
    if any(isinstance(link, _CONNECT_TIMEOUTS) for link in links):
        wait = f" within {connect_timeout_s:g} s" if connect_timeout_s else ""
        return LLMError(
            f"Cannot reach {base_url}: no answer to the connection{wait}. "
            "Is the server running and the address right?",
            kind="unreachable",
        )
    if any(isinstance(link, _TIMEOUTS) for link in links) or isinstance(
        exc, openai.APITimeoutError
    ):
        wait = f"{timeout_s:g} s" if timeout_s else "the time limit"
        if streaming:
            return LLMError(
                f"{base_url} stopped sending mid-answer for {wait}; the reply was cut off. "
                "The text received so far is kept.",
                kind="stream_cut",
            )
        return LLMError(
            f"{base_url} did not answer within {wait}. The model may be loading or busy; "
            "try again or raise the timeout in settings.",
            kind="timeout",
        )
    connect_failed = any(
        isinstance(link, (httpx2.ConnectError, httpx.ConnectError, ConnectionRefusedError))
        for link in links
    )
    if connect_failed:
        return LLMError(f"Cannot reach {base_url}: {_connect_reason(exc)}", kind="unreachable")
    if isinstance(exc, openai.APIConnectionError) or any(isinstance(x, _TRANSPORT) for x in links):
        if streaming:
            return LLMError(
                f"The connection to {base_url} broke mid-answer; the reply was cut off. "
                "The text received so far is kept.",
                kind="stream_cut",
            )
        return LLMError(
            f"The connection to {base_url} failed before an answer: {_connect_reason(exc)}",
            kind="unreachable",
        )
    if isinstance(exc, openai.APIError):
        said = " ".join(exc.message.split())
        return LLMError(
            f"{base_url} reported an error: {said}",
            kind="stream_cut" if streaming else "server_error",
        )
    if isinstance(exc, ValueError) and not streaming:
        # JSON and UTF-8 decoding errors, or JSON of another shape: the server's answer is
        # not what the OpenAI API sends, and asking again will not change that.
        return not_an_openai_api(base_url, _what_was_sent(exc))
    if isinstance(exc, ValueError):
        return LLMError(
            f"{base_url} sent a malformed answer ({exc}). Is it an OpenAI-compatible endpoint?",
            kind="stream_cut" if streaming else "server_error",
            retryable=False,
        )
    return LLMError(
        f"Calling {base_url} failed unexpectedly: {type(exc).__name__}: {exc}",
        kind="stream_cut" if streaming else "server_error",
    )


# -- answers that are not the API's -------------------------------------------------------

# Statuses a server gives for a path it has no route for (501: Python's http.server and
# others refuse a POST that way), as opposed to an API refusing a request it understood.
_NO_SUCH_ROUTE = frozenset({404, 405, 501})


def not_an_openai_api(
    base_url: str, got: str, *, status_code: int | None = None, said: str = ""
) -> LLMError:
    """The address answered, but not as an OpenAI-compatible API; ``got`` says what came
    ("got an HTML page", "got nothing", "got status 404", "got text, not JSON")."""
    return LLMError(
        f"{base_url} answered, but not as an OpenAI-compatible API ({got}). Is it the "
        f"address of the model server's API? It often ends in /v1.{said}",
        kind="server_error",
        status_code=status_code,
        retryable=False,
    )


def _is_json(response: Any) -> bool:
    """Whether a status answer's body is JSON; an unread body counts as JSON, so an
    answer nobody could read keeps the mapping its status gives."""
    try:
        json.loads(response.text)
    except (httpx2.ResponseNotRead, httpx.ResponseNotRead):
        return True
    except ValueError:
        return False
    return True


def _looks_like_html(text: str) -> bool:
    head = text.lstrip()[:1024].casefold()
    return head.startswith(("<!doctype html", "<html")) or "<html" in head or "<body" in head


def _what_was_sent(exc: ValueError) -> str:
    """What an unreadable 200 answer was, in a few words."""
    if isinstance(exc, UnicodeDecodeError):
        return "got bytes that are not text"
    if not isinstance(exc, json.JSONDecodeError):
        return f"got JSON, but {exc}"  # e.g. "the answer has no 'choices' list"
    if not exc.doc.strip():
        return "got nothing"
    if _looks_like_html(exc.doc):
        return "got an HTML page"
    return "got text, not JSON"
