"""Budgets count with the tokenizer of the model in use: the endpoint's tokenize route
(llama.cpp, vLLM, KoboldCpp, served for real by the replay server), SillyTavern's LLaMA
default (bundled, or a SentencePiece model file), or the bundled OpenAI encodings."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest

from storyloom.llm.llama_tokenizer import LlamaCounter, bundled_llama_counter
from storyloom.llm.llama_vocab import DATA_FILE
from storyloom.llm.tokenizers import (
    EndpointCounter,
    SentencePieceCounter,
    counter_for,
    probe_tokenize_route,
)
from storyloom.llm.tokens import token_counter
from storyloom.testing.replay_server import ReplayLLMServer, TokenizeRoute, fake_tokens
from tests.llm.conftest import EndpointFactory

TEXT = "The lighthouse keeper, old Hennet, lights the lamp at dusk."


@pytest.mark.parametrize("route", get_args(TokenizeRoute))
def test_the_endpoints_own_tokenize_route_counts(
    route: TokenizeRoute, make_endpoint: EndpointFactory
) -> None:
    with ReplayLLMServer(models=["test-model"], tokenize=route) as llm:
        counter = counter_for(make_endpoint(llm.url, tokenizer="endpoint"))
        assert counter.count(TEXT) == len(fake_tokens(TEXT)) != token_counter("x").count(TEXT)
        assert counter.name == f"endpoint ({route} tokenize route)"
        asked = [r for r in llm.requests if "token" in r.path]
        counter.count(TEXT)  # counted once: the answer is kept
        assert len([r for r in llm.requests if "token" in r.path]) == len(asked)


def test_a_port_that_now_serves_another_backend_is_probed_again(
    make_endpoint: EndpointFactory,
) -> None:
    with ReplayLLMServer(models=["test-model"], tokenize="llama.cpp") as first:
        port = first.port
        counter = counter_for(make_endpoint(first.url, tokenizer="endpoint"))
        assert counter.count("Hello there") == len(fake_tokens("Hello there"))
        assert counter.name == "endpoint (llama.cpp tokenize route)"
    with ReplayLLMServer(models=["test-model"], tokenize="koboldcpp", port=port) as second:
        assert counter.count(TEXT) == len(fake_tokens(TEXT))
        assert counter.name == "endpoint (koboldcpp tokenize route)"
        assert [r.path for r in second.requests if "token" in r.path][-1] == (
            "/api/extra/tokencount"
        )


def test_auto_uses_the_route_of_a_local_server(make_endpoint: EndpointFactory) -> None:
    with ReplayLLMServer(models=["test-model"], tokenize="llama.cpp") as llm:
        counter = counter_for(make_endpoint(llm.url))
        assert counter.count(TEXT) == len(fake_tokens(TEXT))


def test_a_server_without_a_tokenize_route_falls_back_to_llama_as_sillytavern_does(
    make_endpoint: EndpointFactory, llama: LlamaCounter
) -> None:
    with ReplayLLMServer(models=["test-model"]) as llm:
        counter = counter_for(make_endpoint(llm.url, tokenizer="endpoint"))
        assert counter.count(TEXT) == llama.count(TEXT) != token_counter("x").count(TEXT)
        assert counter.name == "llama (bundled)"
        assert probe_tokenize_route(llm.url, "test-model") is None


def test_an_openai_model_without_a_route_falls_back_to_its_encoding(
    make_endpoint: EndpointFactory,
) -> None:
    with ReplayLLMServer(models=["gpt-4o"]) as llm:
        counter = counter_for(make_endpoint(llm.url, model="gpt-4o", tokenizer="endpoint"))
        assert counter.name == "openai o200k_base"
        assert counter.count(TEXT) == token_counter("gpt-4o").count(TEXT)


def test_auto_counts_a_model_it_cannot_place_with_llama(
    make_endpoint: EndpointFactory, llama: LlamaCounter
) -> None:
    for model in ("test-model", "mythomax-l2-13b", "qwen2.5-72b-instruct", ""):
        counter = counter_for(make_endpoint("", model=model))
        assert counter is llama, model
    gpt = counter_for(make_endpoint("", model="gpt-4o"))
    assert gpt.name == "openai o200k_base"
    chosen = counter_for(make_endpoint("", model="mythomax", token_encoding="cl100k_base"))
    assert chosen.name == "openai cl100k_base"


def test_openai_models_count_with_their_bundled_encoding_without_asking(
    make_endpoint: EndpointFactory,
) -> None:
    with ReplayLLMServer(models=["gpt-4o"], tokenize="vllm") as llm:
        counter = counter_for(make_endpoint(llm.url, model="gpt-4o"))
        assert counter.name == "openai o200k_base"
        assert counter.count(TEXT) == token_counter("gpt-4o").count(TEXT)
        assert not [r for r in llm.requests if "token" in r.path]


def test_a_server_that_stops_answering_is_counted_by_the_fallback(
    make_endpoint: EndpointFactory,
) -> None:
    llm = ReplayLLMServer(models=["test-model"], tokenize="koboldcpp").start()
    counter = counter_for(make_endpoint(llm.url, tokenizer="endpoint"))
    assert isinstance(counter, EndpointCounter)
    assert counter.count("first words") == 2
    llm.stop()
    assert counter.count(TEXT) == counter.fallback.count(TEXT)
    assert counter.fallback.name.startswith("llama")


@pytest.fixture(scope="module")
def llama() -> LlamaCounter:
    try:
        return bundled_llama_counter()
    except OSError:
        # make test builds it (the Makefile's setup): missing is a broken setup, not a skip.
        pytest.fail(f"{DATA_FILE} is missing: `make setup` builds it")


@pytest.fixture(scope="module")
def sentencepiece_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small SentencePiece model trained here, standing in for LLaMA's (same format)."""
    import sentencepiece

    folder = tmp_path_factory.mktemp("spm")
    corpus = folder / "corpus.txt"
    lines = [
        f"{TEXT} Line {i}: the harbour, the tide and the lamp; 灯塔与潮汐 {i}." for i in range(300)
    ]
    corpus.write_text("\n".join(lines), encoding="utf-8")
    sentencepiece.SentencePieceTrainer.train(
        input=str(corpus),
        model_prefix=str(folder / "tiny"),
        vocab_size=400,
        model_type="bpe",
        byte_fallback=True,
        minloglevel=2,
    )
    return folder / "tiny.model"


def test_llama_counts_with_the_sentencepiece_model_file(
    sentencepiece_model: Path, make_endpoint: EndpointFactory
) -> None:
    import sentencepiece

    endpoint = make_endpoint(
        "http://127.0.0.1:9/v1", tokenizer="llama", tokenizer_model=str(sentencepiece_model)
    )
    counter = counter_for(endpoint)
    assert isinstance(counter, SentencePieceCounter)
    processor = sentencepiece.SentencePieceProcessor(model_file=str(sentencepiece_model))
    assert counter.count(TEXT) == len(processor.encode(TEXT))
    assert counter.name == "llama (tiny.model)"


def test_llama_without_a_model_file_counts_with_the_bundled_vocabulary(
    make_endpoint: EndpointFactory, llama: LlamaCounter
) -> None:
    counter = counter_for(make_endpoint("http://127.0.0.1:9/v1", tokenizer="llama"))
    assert counter is llama
    assert counter.count("Hello world!") == 3  # SillyTavern's count: no BOS


def test_a_model_file_that_is_not_there_is_named_and_the_bundled_vocabulary_counts(
    tmp_path: Path, make_endpoint: EndpointFactory, llama: LlamaCounter
) -> None:
    missing = tmp_path / "llama.model"
    endpoint = make_endpoint(
        "http://127.0.0.1:9/v1", tokenizer="llama", tokenizer_model=str(missing)
    )
    counter = counter_for(endpoint)
    assert counter.count(TEXT) == llama.count(TEXT)
    assert counter.name.startswith("llama (bundled); ")
    assert f"tokenizer_model {missing} is not a file" in counter.name
