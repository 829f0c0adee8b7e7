"""Fixtures for the LLM layer: a real replay server and clients pointed at it.

Nothing is faked below HTTP: every client call crosses a real socket to
:class:`~storyloom.testing.replay_server.ReplayLLMServer`.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from storyloom.core.settings import ChatEndpoint
from storyloom.llm.answer_stream import AnswerStream
from storyloom.llm.chat import ChatClient
from storyloom.llm.context_size import forget_probes as forget_context_sizes
from storyloom.llm.errors import LLMCancelled
from storyloom.llm.retry import RetryPolicy
from storyloom.llm.tokenizers import forget_probes as forget_tokenize_routes
from storyloom.testing.replay_server import ReplayLLMServer

EndpointFactory = Callable[..., ChatEndpoint]
_HANG_GUARD_S = 20  # only stops a hung test; never a timing assertion


async def stop_from_another_task(stream: AnswerStream, seen: str) -> LLMCancelled:
    """Consume ``stream`` in a task until its text is ``seen``, close it from here, and
    return the cancellation the consumer got."""
    reached = asyncio.Event()

    async def consume() -> None:
        async for _ in stream:
            if stream.text == seen:
                reached.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(reached.wait(), _HANG_GUARD_S)
    await stream.aclose()
    with pytest.raises(LLMCancelled) as caught:
        await asyncio.wait_for(task, _HANG_GUARD_S)
    return caught.value


@pytest.fixture(autouse=True)
def fresh_probes() -> Iterator[None]:
    """Each test meets its servers afresh: a port the OS hands out again must not bring
    back what an earlier test's server was probed to have."""
    forget_tokenize_routes()
    forget_context_sizes()
    yield


@pytest.fixture
def fast_retries() -> RetryPolicy:
    """Backoff of a millisecond: tests count retries by requests received, never by time."""
    return RetryPolicy(base_delay_s=0.001, max_delay_s=0.002, max_retry_after_s=0.01, jitter=0)


@pytest.fixture
def llm() -> Iterator[ReplayLLMServer]:
    with ReplayLLMServer(models=["test-model"]) as server:
        yield server


@pytest.fixture
def make_endpoint() -> EndpointFactory:
    """Build a ChatEndpoint with test-friendly defaults; keyword arguments override them."""

    def build(base_url: str, **fields: Any) -> ChatEndpoint:
        values: dict[str, Any] = {
            "base_url": base_url,
            "model": "test-model",
            "timeout_s": 10,
            "connect_timeout_s": 5,
            "max_retries": 2,
        }
        values.update(fields)
        return ChatEndpoint.model_validate(values)

    return build


@pytest.fixture
def endpoint(llm: ReplayLLMServer, make_endpoint: EndpointFactory) -> ChatEndpoint:
    return make_endpoint(llm.url)


@pytest.fixture
async def client(endpoint: ChatEndpoint, fast_retries: RetryPolicy) -> AsyncIterator[ChatClient]:
    async with ChatClient(endpoint, retry_policy=fast_retries) as chat:
        yield chat


@pytest.fixture
def closed_port_url() -> str:
    """A base URL on a port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
