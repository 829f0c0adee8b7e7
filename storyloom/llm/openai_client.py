"""Building the openai SDK client for one endpoint, the same way for chat and embeddings."""

from __future__ import annotations

import functools
import ssl

import httpx2
import openai
from pydantic import SecretStr


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One context for every client: building one loads the CA bundle, about 30-50 ms,
    which a client per chat turn would otherwise pay each time."""
    return httpx2.create_ssl_context()


def openai_client(
    base_url: str, api_key: SecretStr | None, timeout_s: float, connect_timeout_s: float
) -> openai.AsyncOpenAI:
    """An ``AsyncOpenAI`` with the SDK's own retries off: :mod:`storyloom.llm.retry` decides.

    Local servers (Ollama, llama.cpp) need no key, but the SDK insists on one, so an
    absent key is sent as ``none``.
    """
    key = api_key.get_secret_value() if api_key is not None else ""
    return openai.AsyncOpenAI(
        base_url=base_url,
        api_key=key or "none",
        max_retries=0,
        timeout=openai.Timeout(timeout_s, connect=connect_timeout_s),
        http_client=openai.DefaultAsyncHttpxClient(verify=_ssl_context()),
    )
