"""When and how long to wait before trying an LLM request again.

Retries are ours, not the SDK's (it is built with ``max_retries=0``), because a streamed
reply may only be retried before its first token: after that the user has seen text,
and a second attempt would silently replace it.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from storyloom.llm.errors import LLMError

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter; a server's ``Retry-After`` wins, up to a cap.

    Attempt *n* (0-based) waits ``base_delay_s * 2**n`` (at most ``max_delay_s``) plus up
    to ``jitter`` of that at random, unless the server named a wait, which is honoured up
    to ``max_retry_after_s``.
    """

    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    max_retry_after_s: float = 30.0
    jitter: float = 0.2

    def should_retry(self, error: LLMError, attempt: int, max_retries: int) -> bool:
        """Whether ``error`` on ``attempt`` (0-based) deserves another try."""
        return error.retryable and attempt < max_retries

    def delay_s(self, error: LLMError, attempt: int) -> float:
        """Seconds to wait before the next attempt after ``error`` on ``attempt``."""
        if error.retry_after_s is not None:
            return min(error.retry_after_s, self.max_retry_after_s)
        delay = min(self.base_delay_s * (2.0**attempt), self.max_delay_s)
        return delay * (1.0 + self.jitter * random.random())


DEFAULT_RETRY_POLICY = RetryPolicy()


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    *,
    map_exception: Callable[[Exception], LLMError],
    max_retries: int,
    policy: RetryPolicy = DEFAULT_RETRY_POLICY,
) -> T:
    """Run ``attempt`` until it succeeds, retrying retryable errors up to ``max_retries``.

    For whole-answer calls (non-streaming completion, model list, embeddings): nothing has
    reached the user yet, so every attempt is "before the first token". Failures leave as
    :class:`LLMError` (via ``map_exception``); cancellation passes through untouched.
    """
    tries = 0
    while True:
        try:
            return await attempt()
        except Exception as exc:
            error = map_exception(exc)
            if not policy.should_retry(error, tries, max_retries):
                raise error from exc
        await asyncio.sleep(policy.delay_s(error, tries))
        tries += 1
