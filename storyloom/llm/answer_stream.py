"""A streamed answer read from server-sent events, whatever the wire format.

Chat completions (:class:`~storyloom.llm.chat.ChatStream`) and text completions
(:class:`~storyloom.llm.text_completion.TextStream`) share everything here: the SSE
reading on the hot path (``data:`` lines, ``json.loads`` per event, no pydantic per
chunk), retries before the first token only, ``stream_cut`` and ``cancelled`` errors
carrying the partial text, :meth:`AnswerStream.aclose` from another task, ``<think>``
splitting and draining the connection for reuse. A subclass says how to send its
request (:meth:`AnswerStream._start`) and how one event folds into the answer
(:meth:`AnswerStream._apply`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Awaitable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, Self, TypeVar, cast

import httpx2
import openai
from pydantic import BaseModel, Field

from storyloom.llm.endpoint_client import EndpointClient
from storyloom.llm.errors import LLMError
from storyloom.llm.think_split import ThinkSplitter, think_tags

__all__ = ["AnswerStream", "ChatResult", "drain"]

T = TypeVar("T")

_DRAIN_TIMEOUT_S = 0.1


class ChatResult(BaseModel):
    """A finished (or, from :meth:`AnswerStream.result`, partial) assistant answer."""

    text: str
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    model: str | None = None
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    reasoning_text: str = ""


class AnswerStream:
    """A streamed answer: an async iterator of text deltas and an async context manager.

    While it runs, ``text`` holds everything received so far; ``finish_reason``,
    ``usage`` (when the server sends it), ``model`` and ``reasoning_text`` fill in as
    events arrive. An answer that opens with ``<think>…</think>`` streams the thinking
    into ``reasoning_text``, never into the text (:mod:`.think_split`). Prefer
    ``async with client.stream(...) as stream:`` so the HTTP response is closed however
    the loop ends. :meth:`aclose` from another task stops the stream promptly; the
    consumer then gets ``LLMError(kind="cancelled")``.
    """

    def __init__(self, client: EndpointClient, model: str) -> None:
        self._client = client
        self._model = model
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.model: str | None = None
        self._parts: list[str] = []
        self._joined = ""
        self._joined_count = 0
        self._reasoning: list[str] = []
        self._think = ThinkSplitter(think_tags(client.endpoint))
        self._response: httpx2.Response | None = None
        self._closing = asyncio.Event()
        self._finished = False
        self._iterator = self._run()

    # -- what a subclass provides -------------------------------------------------------

    def _start(self, sdk: openai.AsyncOpenAI) -> AbstractAsyncContextManager[Any]:
        """The SDK's streaming-response context manager for this request."""
        raise NotImplementedError

    def _apply(self, event: Any) -> str | None:
        """Fold one event into the accumulated state; return its text delta."""
        raise NotImplementedError

    def _touched(self) -> bool:
        """Whether the caller has seen anything (then no retry is allowed)."""
        return bool(self._parts)

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """Tool calls in OpenAI message format (chat completions only)."""
        return []

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
    def finished(self) -> bool:
        """True once the stream ended, by its end, an error or :meth:`aclose`."""
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

    async def __aenter__(self) -> Self:
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
        model = self._model
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
                        await drain(response)
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
        manager = self._start(sdk)
        try:
            api_response = await self._unless_closed(manager.__aenter__())
        except LLMError:
            raise
        except Exception as exc:
            raise self._client._map(exc, self._model) from exc
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
        policy = self._client.retry_policy
        if self._touched() or not policy.should_retry(
            error, attempt, self._client.endpoint.max_retries
        ):
            raise error
        delay = policy.delay_s(error, attempt)
        await self._unless_closed(asyncio.sleep(delay))
        if self._closing.is_set():
            raise self._cancelled() from error

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


async def drain(response: httpx2.Response) -> None:
    """Read the few bytes after the end so HTTP/1.1 can reuse the connection.

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
