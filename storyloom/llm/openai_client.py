"""Building the openai SDK client for one endpoint, the same way for chat and embeddings."""

from __future__ import annotations

import openai
from pydantic import SecretStr


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
    )
