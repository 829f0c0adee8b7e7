"""Chat completions against any OpenAI-compatible endpoint, streamed or whole.

The openai SDK builds and sends requests (auth headers, base URL joining, status-code
errors); the streamed body is read here, straight from the HTTP response. The SDK's own
stream turns every chunk into a pydantic object, which costs about seven times the
network time on a 2,000-chunk reply; reading the SSE lines and ``json.loads`` each chunk
keeps the hot path as lean as a bare httpx loop (see ``bench/llm_stream.py``).

Retries happen only before the first token: once text has reached the caller, a failure
raises :class:`~storyloom.llm.errors.LLMError` ``stream_cut`` carrying the partial text.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Mapping,
)
from types import TracebackType
from typing import Any, TypeVar, cast

import httpx2
import openai
from pydantic import BaseModel, Field

from storyloom.core.settings import ChatEndpoint, ModelParameters
from storyloom.llm.errors import LLMError, map_error
from storyloom.llm.openai_client import openai_client
from storyloom.llm.retry import DEFAULT_RETRY_POLICY, RetryPolicy, call_with_retries
from storyloom.llm.think_split import ThinkSplitter, split_think

__all__ = ["ChatClient", "ChatResult", "ChatStream"]

T = TypeVar("T")

_DRAIN_TIMEOUT_S = 0.1

# Request fields this module sets itself; parameters and overrides cannot replace them.
_RESERVED = frozenset({"model", "messages", "stream", "extra_body"})

# Parameters the SDK's ``create()`` knows by name; everything else goes in ``extra_body``.
_TYPED_PARAMETERS = frozenset(ModelParameters.model_fields) | {
    "logit_bias",
    "logprobs",
    "max_completion_tokens",
    "n",
    "parallel_tool_calls",
    "reasoning_effort",
    "response_format",
    "stream_options",
    "tool_choice",
    "tools",
    "top_logprobs",
    "user",
}


class ChatResult(BaseModel):
    """A finished (or, from :meth:`ChatStream.result`, partial) assistant answer."""

    text: str
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    model: str | None = None
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    reasoning_text: str = ""


class ChatClient:
    """A client for one :class:`~storyloom.core.settings.ChatEndpoint`.

    Build it freely; an unconfigured endpoint (no base URL or model) raises
    ``LLMError(kind="not_configured")`` on first use, not here. Use as
    ``async with ChatClient(endpoint) as client:`` or call :meth:`aclose`.
    """

    def __init__(
        self, endpoint: ChatEndpoint, *, retry_policy: RetryPolicy = DEFAULT_RETRY_POLICY
    ) -> None:
        self.endpoint = endpoint
        self.retry_policy = retry_policy
        self._client: openai.AsyncOpenAI | None = None

    # -- lifecycle --------------------------------------------------------------------

    async def __aenter__(self) -> ChatClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close pooled connections. Streams still open are closed with them."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    # -- public calls -----------------------------------------------------------------

    def stream(self, messages: list[dict[str, Any]], **overrides: Any) -> ChatStream:
        """Start a streamed completion; iterate the result for text deltas.

        ``overrides`` replace the endpoint's parameters for this call (``None`` removes
        one); ``model=`` picks another model. Nothing is sent until iteration starts.
        """
        return ChatStream(self, self._request(messages, overrides, stream=True))

    async def complete(self, messages: list[dict[str, Any]], **overrides: Any) -> ChatResult:
        """A whole (non-streamed) completion, retried on 429/5xx/connection errors."""
        request = self._request(messages, overrides, stream=False)
        client = self._sdk()

        async def attempt() -> ChatResult:
            async with client.chat.completions.with_streaming_response.create(
                **request
            ) as response:
                data = await response.json()
            return _result_from_completion(data)

        return await self._with_retries(attempt, request.get("model"))

    async def list_models(self) -> list[str]:
        """Model names the endpoint lists at ``GET /models``."""
        client = self._sdk()

        async def attempt() -> list[str]:
            async with client.models.with_streaming_response.list() as response:
                data = await response.json()
            return _model_names(data)

        return await self._with_retries(attempt, None)

    # -- internals --------------------------------------------------------------------

    def _sdk(self) -> openai.AsyncOpenAI:
        endpoint = self.endpoint
        if not endpoint.configured and endpoint.local_problem is not None:
            raise LLMError(
                f"The local model does not run: {endpoint.local_problem}. Fix it under "
                "Settings → Local model, or set a base URL instead.",
                kind="not_configured",
            )
        if not endpoint.configured:
            fields = (("base URL", endpoint.base_url), ("model", endpoint.model))
            missing = [name for name, value in fields if not value]
            verb = "are" if len(missing) > 1 else "is"
            raise LLMError(
                f"No chat model is set up: the {' and '.join(missing)} {verb} empty. "
                "Fill them in under Settings.",
                kind="not_configured",
            )
        if self._client is None:
            self._client = openai_client(
                endpoint.base_url,
                endpoint.api_key,
                endpoint.timeout_s,
                endpoint.connect_timeout_s,
            )
        return self._client

    def _request(
        self, messages: list[dict[str, Any]], overrides: Mapping[str, Any], *, stream: bool
    ) -> dict[str, Any]:
        """Keyword arguments for ``chat.completions.create``."""
        parameters: dict[str, Any] = self.endpoint.parameters.model_dump(exclude_none=True)
        for name in _RESERVED:
            # A stray "stream" in the settings' extra keys must not break the protocol.
            parameters.pop(name, None)
        if stream:
            parameters["stream_options"] = {"include_usage": True}
        model = overrides.get("model") or self.endpoint.model
        for name, value in overrides.items():
            if name in _RESERVED:
                continue
            if value is None:
                parameters.pop(name, None)
            else:
                parameters[name] = value
        if not parameters.get("stop"):
            parameters.pop("stop", None)
        # The messages travel in ``extra_body``, which the SDK merges into the JSON body
        # as is. Given as ``messages=``, the SDK walks every message through its typed-dict
        # transform first: about 0.2 ms a message here, 100 ms for a long chat's prompt.
        request: dict[str, Any] = {"model": model, "messages": [], "stream": stream}
        extra = {k: v for k, v in parameters.items() if k not in _TYPED_PARAMETERS}
        request.update((k, v) for k, v in parameters.items() if k in _TYPED_PARAMETERS)
        request["extra_body"] = {**extra, "messages": messages}
        return request

    def _map(
        self, exc: BaseException, model: str | None, *, streaming: bool = False, partial: str = ""
    ) -> LLMError:
        endpoint = self.endpoint
        return map_error(
            exc,
            base_url=endpoint.base_url,
            model=model or endpoint.model,
            timeout_s=endpoint.timeout_s,
            connect_timeout_s=endpoint.connect_timeout_s,
            streaming=streaming,
            partial_text=partial,
        )

    async def _with_retries(self, attempt: Callable[[], Awaitable[T]], model: str | None) -> T:
        return await call_with_retries(
            attempt,
            map_exception=lambda exc: self._map(exc, model),
            max_retries=self.endpoint.max_retries,
            policy=self.retry_policy,
        )


class ChatStream:
    """A streamed answer: an async iterator of text deltas and an async context manager.

    While it runs, ``text`` holds everything received so far; ``finish_reason``,
    ``usage`` (when the server sends it), ``model``, ``tool_calls`` and ``reasoning_text``
    fill in as chunks arrive. An answer that opens with ``<think>…</think>`` streams the
    thinking into ``reasoning_text``, never into the text (:mod:`.think_split`). Prefer
    ``async with client.stream(...) as stream:`` so the HTTP response is closed however
    the loop ends. :meth:`aclose` from another task stops
    the stream promptly; the consumer then gets ``LLMError(kind="cancelled")``.
    """

    def __init__(self, client: ChatClient, request: dict[str, Any]) -> None:
        self._client = client
        self._request = request
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.model: str | None = None
        self._parts: list[str] = []
        self._joined = ""
        self._joined_count = 0
        self._reasoning: list[str] = []
        self._think = ThinkSplitter()
        self._tool_calls: dict[int, dict[str, Any]] = {}
        self._response: httpx2.Response | None = None
        self._closing = asyncio.Event()
        self._finished = False
        self._iterator = self._run()

    # -- accumulated state ------------------------------------------------------------

    @property
    def text(self) -> str:
        """All text streamed so far."""
        parts = self._parts
        if self._joined_count != len(parts):
            self._joined += "".join(parts[self._joined_count :])
            self._joined_count = len(parts)
        return self._joined

    @property
    def reasoning_text(self) -> str:
        """Reasoning the server streamed separately (``reasoning_content``) or inside a
        leading ``<think>`` block, if any."""
        return "".join(self._reasoning) + self._think.reasoning

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """Tool calls in OpenAI message format, merged from their deltas."""
        return [self._tool_calls[i] for i in sorted(self._tool_calls)]

    @property
    def finished(self) -> bool:
        """True once the stream ended, by ``[DONE]``, an error or :meth:`aclose`."""
        return self._finished

    @property
    def stopped(self) -> bool:
        """True when :meth:`aclose` ended the stream before the answer was complete.

        A consumer whose loop simply ended (it was between chunks when another task
        called :meth:`aclose`) can tell a stopped answer from a finished one here.
        """
        return self._closing.is_set()

    def result(self) -> ChatResult:
        """What has arrived so far, as a :class:`ChatResult`."""
        return ChatResult(
            text=self.text,
            finish_reason=self.finish_reason,
            usage=self.usage,
            model=self.model,
            tool_calls=self.tool_calls,
            reasoning_text=self.reasoning_text,
        )

    async def collect(self) -> ChatResult:
        """Read the stream to the end and return the whole answer."""
        async for _ in self._iterator:
            pass
        return self.result()

    # -- protocol ---------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[str]:
        # The generator itself: `async for` then skips a layer of delegation per chunk.
        return self._iterator

    async def __anext__(self) -> str:
        return await self._iterator.__anext__()

    async def __aenter__(self) -> ChatStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the stream and close its HTTP response; the text so far stays in ``text``.

        From another task: a consumer waiting on the network gets
        ``LLMError(kind="cancelled")``; one between chunks sees its loop end, with
        :attr:`stopped` set. Does nothing once the stream has finished.
        """
        if self._finished:
            return
        self._closing.set()
        try:
            await self._iterator.aclose()
        except RuntimeError:
            # Another task is inside the generator, waiting on the network: closing the
            # response wakes it with a read error, which it reports as "cancelled".
            response = self._response
            if response is not None:
                await response.aclose()
        self._finished = True

    # -- the hot path -----------------------------------------------------------------

    async def _run(self) -> AsyncGenerator[str, None]:
        client = self._client
        model = self._request["model"]
        parts = self._parts
        apply = self._apply
        attempt = 0
        try:
            sdk = client._sdk()
            while True:
                try:
                    response = await self._open(sdk)
                except LLMError as error:
                    await self._before_retry(error, attempt)
                    attempt += 1
                    continue
                self._response = response
                failure: LLMError | None = None
                pending: list[bytes] = []
                buffer = b""
                done = False
                try:
                    async for raw in response.aiter_bytes():
                        lines = (buffer + raw).split(b"\n") if buffer else raw.split(b"\n")
                        buffer = lines.pop()
                        for line in lines:
                            if line.startswith(b"data:"):
                                pending.append(line[5:])
                                continue
                            if (line and line != b"\r") or not pending:
                                continue  # comments, event names, ids, extra blank lines
                            payload = pending[0] if len(pending) == 1 else b"\n".join(pending)
                            pending.clear()
                            payload = payload.strip()
                            if payload == b"[DONE]":
                                done = True
                                break
                            content = apply(json.loads(payload))
                            if content:
                                parts.append(content)
                                yield content
                        if done:
                            break
                    if done:
                        await _drain(response)
                    elif pending:
                        # A last event without its blank line, from a server that closed.
                        payload = b"\n".join(pending).strip()
                        done = payload == b"[DONE]"
                        content = None if done else apply(json.loads(payload))
                        if content:
                            parts.append(content)
                            yield content
                    tail = self._think.flush()
                    if tail:
                        parts.append(tail)
                        yield tail
                    if not done and self.finish_reason is None:
                        failure = LLMError(
                            f"{client.endpoint.base_url} ended the answer early, without "
                            "finishing it; the reply was cut off. The text received so far "
                            "is kept.",
                            kind="stream_cut",
                            retryable=True,
                        )
                except LLMError as error:
                    failure = error
                except Exception as exc:
                    failure = (
                        self._cancelled()
                        if self._closing.is_set()
                        else client._map(exc, model, streaming=bool(parts), partial=self.text)
                    )
                    failure.__cause__ = exc
                finally:
                    self._response = None
                    await response.aclose()
                if failure is None:
                    return
                await self._before_retry(failure, attempt)
                attempt += 1
                self._reset()
        except LLMError as error:
            error.partial_text = self.text
            raise
        except Exception as exc:
            raise client._map(exc, model, streaming=bool(parts), partial=self.text) from exc
        finally:
            self._finished = True

    async def _open(self, sdk: openai.AsyncOpenAI) -> httpx2.Response:
        """Send the request and wait for the response headers (status errors raise here)."""
        manager = sdk.chat.completions.with_streaming_response.create(**self._request)
        try:
            api_response = await self._unless_closed(manager.__aenter__())
        except LLMError:
            raise
        except Exception as exc:
            raise self._client._map(exc, self._request["model"]) from exc
        if self._closing.is_set():
            await api_response.close()
            raise self._cancelled()
        response: httpx2.Response = api_response.http_response
        return response

    async def _before_retry(self, error: LLMError, attempt: int) -> None:
        """Wait before the next attempt, or raise ``error`` when no retry is allowed."""
        if self._closing.is_set() and error.kind != "cancelled":
            raise self._cancelled() from error
        # Retrying is safe only while the caller has seen nothing.
        untouched = not self._parts and not self._tool_calls
        policy = self._client.retry_policy
        if not (
            untouched and policy.should_retry(error, attempt, self._client.endpoint.max_retries)
        ):
            raise error
        delay = policy.delay_s(error, attempt)
        await self._unless_closed(asyncio.sleep(delay))
        if self._closing.is_set():
            raise self._cancelled() from error

    def _apply(self, chunk: Any) -> str | None:
        """Fold one chunk into the accumulated state; return its content delta."""
        if not isinstance(chunk, dict):
            return None
        if chunk.get("error"):
            raise self._stream_error(chunk["error"])
        if self.model is None:
            self.model = chunk.get("model")
        usage = chunk.get("usage")
        if usage:
            self.usage = usage
        choices = chunk.get("choices")
        if not choices:
            return None
        choice = choices[0]
        finish = choice.get("finish_reason")
        if finish:
            self.finish_reason = finish
        delta = choice.get("delta")
        if not delta:
            return None
        if len(delta) > 1 or "content" not in delta:
            self._apply_extras(delta)
        content: str | None = delta.get("content")
        if content and not self._think.done:
            return self._think.feed(content) or None
        return content

    def _apply_extras(self, delta: dict[str, Any]) -> None:
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self._reasoning.append(reasoning)
        for call in delta.get("tool_calls") or ():
            index = call.get("index")
            if index is None:
                fresh = call.get("id") or not self._tool_calls
                index = len(self._tool_calls) if fresh else max(self._tool_calls)
            entry = self._tool_calls.setdefault(
                index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
            )
            if call.get("id"):
                entry["id"] = call["id"]
            function = call.get("function") or {}
            if function.get("name") and not entry["function"]["name"]:
                entry["function"]["name"] = function["name"]
            if function.get("arguments"):
                entry["function"]["arguments"] += function["arguments"]

    def _stream_error(self, error: Any) -> LLMError:
        said = error.get("message") if isinstance(error, dict) else error
        return LLMError(
            f"{self._client.endpoint.base_url} reported an error mid-answer: {said}. "
            "The text received so far is kept.",
            kind="stream_cut",
            retryable=True,
        )

    def _reset(self) -> None:
        """Forget metadata from a failed attempt that yielded no text."""
        self.finish_reason = None
        self.usage = None
        self.model = None
        self._reasoning.clear()
        self._think.reset()

    def _cancelled(self) -> LLMError:
        return LLMError(
            "The answer was stopped before it finished. The text received so far is kept.",
            kind="cancelled",
            partial_text=self.text,
        )

    async def _unless_closed(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable``, giving up with "cancelled" if :meth:`aclose` is called.

        For the waits where no HTTP response exists yet to be closed: the response
        headers (a local model may think for a minute first) and the backoff. A result
        that wins the race anyway is returned; callers check ``_closing`` after.
        """
        if self._closing.is_set():
            if asyncio.iscoroutine(awaitable):
                awaitable.close()
            raise self._cancelled()
        work = asyncio.ensure_future(awaitable)
        closing = asyncio.ensure_future(self._closing.wait())
        try:
            await asyncio.wait((work, closing), return_when=asyncio.FIRST_COMPLETED)
        finally:
            closing.cancel()
            if not work.done():
                work.cancel()
                # Not `await work`: that would swallow a cancellation of this task too.
                await asyncio.wait((work,))
        if work.cancelled():
            raise self._cancelled()
        return work.result()


async def _drain(response: httpx2.Response) -> None:
    """Read the few bytes after ``[DONE]`` so HTTP/1.1 can reuse the connection.

    Closing a response with unread body drops its connection, and the next request would
    pay a new TCP (and TLS) handshake. Bounded, because a server may keep it open.
    """
    if response.http_version != "HTTP/1.1" or response.is_closed:
        return
    stream = cast(AsyncIterable[bytes], response.stream)
    with contextlib.suppress(TimeoutError, httpx2.HTTPError, httpx2.StreamError):
        async with asyncio.timeout(_DRAIN_TIMEOUT_S):
            async for _ in stream:
                pass


def _result_from_completion(data: Any) -> ChatResult:
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
        raise ValueError("the answer has no 'choices' list")
    choice = data["choices"][0] if data["choices"] else {}
    message = choice.get("message") or {}
    reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
    thought, text = split_think(message.get("content") or "")
    return ChatResult(
        text=text,
        finish_reason=choice.get("finish_reason"),
        usage=data.get("usage"),
        model=data.get("model"),
        tool_calls=list(message.get("tool_calls") or []),
        reasoning_text=(reasoning if isinstance(reasoning, str) else "") + thought,
    )


def _model_names(data: Any) -> list[str]:
    """Names from ``{"data": [{"id": ...}]}``, or Ollama-style ``{"models": [{"name": ...}]}``."""
    items: Any = []
    if isinstance(data, dict):
        items = data.get("data") or data.get("models") or []
    elif isinstance(data, list):
        items = data
    names: list[str] = []
    for item in items:
        if isinstance(item, str):
            names.append(item)
        elif isinstance(item, dict):
            name = item.get("id") or item.get("name") or item.get("model")
            if isinstance(name, str):
                names.append(name)
    return names
