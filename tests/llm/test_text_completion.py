"""Text completions on the three wire formats, against the real replay server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from storyloom.core.settings import ChatEndpoint, CompletionApi
from storyloom.llm.chat import ChatClient
from storyloom.llm.connection_check import check_chat_endpoint
from storyloom.llm.context_size import probe_context_size
from storyloom.llm.errors import LLMError
from storyloom.llm.instruct import (
    PromptTurn,
    builtin_context_templates,
    builtin_instruct_templates,
    format_prompt,
)
from storyloom.llm.retry import RetryPolicy
from storyloom.llm.text_completion import TextCompletionClient
from storyloom.testing.replay_server import RecordedRequest, ReplayLLMServer, Reply

from .conftest import EndpointFactory, stop_from_another_task

HANG_GUARD_S = 20  # only stops a hung test; never a timing assertion
APIS: list[CompletionApi] = ["text", "llamacpp", "koboldcpp"]
SAMPLERS: dict[str, Any] = {
    "temperature": 0.7,
    "top_p": 0.9,
    "max_tokens": 64,
    "seed": 7,
    "min_p": 0.05,
    "top_k": 40,
    "repetition_penalty": 1.1,
    "typical_p": 0.95,
    "dry_multiplier": 0.8,
    "dry_base": 1.75,
    "dry_allowed_length": 2,
    "dry_sequence_breakers": ["\n", ":"],
    "xtc_threshold": 0.1,
    "xtc_probability": 0.5,
}
# What each backend calls them.
EXPECTED: dict[CompletionApi, dict[str, Any]] = {
    "text": dict(SAMPLERS),
    "llamacpp": {
        **{k: v for k, v in SAMPLERS.items() if k not in ("max_tokens", "repetition_penalty")},
        "n_predict": 64,
        "repeat_penalty": 1.1,
    },
    "koboldcpp": {
        **{
            k: v
            for k, v in SAMPLERS.items()
            if k not in ("max_tokens", "repetition_penalty", "seed", "typical_p")
        },
        "max_length": 64,
        "rep_pen": 1.1,
        "sampler_sed": None,
    },
}
EXPECTED["koboldcpp"].pop("sampler_sed")
EXPECTED["koboldcpp"].update({"sampler_seed": 7, "typical": 0.95})
STOP_KEY: dict[CompletionApi, str] = {
    "text": "stop",
    "llamacpp": "stop",
    "koboldcpp": "stop_sequence",
}
PATHS: dict[tuple[CompletionApi, bool], str] = {
    ("text", True): "/v1/completions",
    ("text", False): "/v1/completions",
    ("llamacpp", True): "/completion",
    ("llamacpp", False): "/completion",
    ("koboldcpp", True): "/api/extra/generate/stream",
    ("koboldcpp", False): "/api/v1/generate",
}


def text_endpoint(
    llm: ReplayLLMServer, make_endpoint: EndpointFactory, api: CompletionApi, **fields: Any
) -> ChatEndpoint:
    return make_endpoint(llm.url, api=api, parameters=SAMPLERS, **fields)


def last_completion(llm: ReplayLLMServer) -> RecordedRequest:
    return llm.completion_requests[-1]


@pytest.mark.parametrize("api", APIS)
async def test_each_backend_streams_the_prompt_with_its_sampler_names(
    api: CompletionApi,
    llm: ReplayLLMServer,
    make_endpoint: EndpointFactory,
    fast_retries: RetryPolicy,
) -> None:
    llm.script(Reply(text="Once upon a time"))
    async with (
        TextCompletionClient(
            text_endpoint(llm, make_endpoint, api), retry_policy=fast_retries
        ) as client,
        client.stream("The prompt", stop=["\nBob:"]) as stream,
    ):
        deltas = [delta async for delta in stream]
    assert deltas == ["Once ", "upon ", "a ", "time"]
    assert stream.text == "Once upon a time"
    assert stream.finish_reason == "stop"
    assert not stream.stopped
    request = last_completion(llm)
    assert request.path == PATHS[(api, True)]
    assert request["prompt"] == "The prompt"
    assert request[STOP_KEY[api]] == ["\nBob:"]
    for name, value in EXPECTED[api].items():
        assert request[name] == value, name
    if api != "text":
        assert "max_tokens" not in request and "repetition_penalty" not in request
    if api == "text":
        assert stream.usage is not None and stream.usage["completion_tokens"] == 4
        assert request["model"] == "test-model"
    if api == "llamacpp":
        assert request["stream"] is True
        assert stream.usage == {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14}


@pytest.mark.parametrize("api", APIS)
async def test_each_backend_completes_whole(
    api: CompletionApi,
    llm: ReplayLLMServer,
    make_endpoint: EndpointFactory,
    fast_retries: RetryPolicy,
) -> None:
    llm.script(Reply(text="<think>Hmm.</think>The end.", finish_reason="length"))
    async with TextCompletionClient(
        text_endpoint(llm, make_endpoint, api), retry_policy=fast_retries
    ) as client:
        result = await client.complete("The prompt")
    assert result.text == "The end."
    assert result.reasoning_text == "Hmm."
    assert result.finish_reason == "length"
    assert result.usage is not None and result.usage["prompt_tokens"] == 10
    request = last_completion(llm)
    assert request.path == PATHS[(api, False)]
    assert request["prompt"] == "The prompt"
    assert request.get("stream") in (False, None)


@pytest.mark.parametrize("api", APIS)
async def test_a_leading_think_block_streams_into_the_reasoning(
    api: CompletionApi,
    llm: ReplayLLMServer,
    make_endpoint: EndpointFactory,
    fast_retries: RetryPolicy,
) -> None:
    llm.script(Reply(text="<think>Plan it.</think>Hello there", chunks=5))
    async with TextCompletionClient(
        text_endpoint(llm, make_endpoint, api), retry_policy=fast_retries
    ) as client:
        stream = client.stream("p")
        result = await stream.collect()
    assert result.text == "Hello there"
    assert result.reasoning_text == "Plan it."


@pytest.mark.parametrize("api", APIS)
async def test_cancelling_mid_stream_keeps_the_partial_text(
    api: CompletionApi,
    llm: ReplayLLMServer,
    make_endpoint: EndpointFactory,
    fast_retries: RetryPolicy,
) -> None:
    llm.script(Reply(text="one two three", hold_after_chunks=2))
    async with TextCompletionClient(
        text_endpoint(llm, make_endpoint, api), retry_policy=fast_retries
    ) as client:
        stream = client.stream("p")
        stopped = await stop_from_another_task(stream, "one two ")
    assert stopped.partial_text == "one two "
    assert stream.stopped
    assert await asyncio.to_thread(llm.wait_for_disconnect, 1, HANG_GUARD_S)
    aborts = [r for r in llm.requests if r.path == "/api/extra/abort"]
    if api == "koboldcpp":
        assert [r["genkey"] for r in aborts] == [last_completion(llm)["genkey"]]
    else:
        assert aborts == []


async def test_kobold_is_not_asked_to_abort_a_finished_stream(
    llm: ReplayLLMServer, make_endpoint: EndpointFactory, fast_retries: RetryPolicy
) -> None:
    async with (
        TextCompletionClient(
            text_endpoint(llm, make_endpoint, "koboldcpp"), retry_policy=fast_retries
        ) as client,
        client.stream("p") as stream,
    ):
        await stream.collect()
    assert not [r for r in llm.requests if r.path == "/api/extra/abort"]


@pytest.mark.parametrize("api", APIS)
async def test_a_failure_before_the_first_token_is_retried(
    api: CompletionApi,
    llm: ReplayLLMServer,
    make_endpoint: EndpointFactory,
    fast_retries: RetryPolicy,
) -> None:
    llm.script(Reply(status=503), Reply(text="Fine now"))
    async with TextCompletionClient(
        text_endpoint(llm, make_endpoint, api), retry_policy=fast_retries
    ) as client:
        assert (await client.stream("p").collect()).text == "Fine now"
    assert len(llm.completion_requests) == 2


@pytest.mark.parametrize("api", APIS)
async def test_a_cut_after_text_is_not_retried_and_keeps_the_text(
    api: CompletionApi,
    llm: ReplayLLMServer,
    make_endpoint: EndpointFactory,
    fast_retries: RetryPolicy,
) -> None:
    llm.script(Reply(text="one two three", cut_after_chunks=2), Reply(text="never"))
    async with TextCompletionClient(
        text_endpoint(llm, make_endpoint, api), retry_policy=fast_retries
    ) as client:
        with pytest.raises(LLMError) as caught:
            await client.stream("p").collect()
    assert caught.value.kind == "stream_cut"
    assert caught.value.partial_text == "one two "
    assert len(llm.completion_requests) == 1


async def test_chat_client_on_a_text_api_sends_the_chatml_prompt(
    llm: ReplayLLMServer, make_endpoint: EndpointFactory, fast_retries: RetryPolicy
) -> None:
    endpoint = make_endpoint(llm.url, api="text", parameters={"stop": ["THE END"]})
    llm.script(Reply(text="Hi!"), Reply(text="Whole."))
    messages = [
        {"role": "system", "content": "You are Ann."},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi."},
        {"role": "user", "content": "How are you?"},
    ]
    async with ChatClient(endpoint, retry_policy=fast_retries) as client:
        async with client.stream(messages, temperature=0) as stream:
            assert await stream.collect() == stream.result()
        whole = await client.complete(messages, stop=None)
    assert stream.text == "Hi!"
    assert whole.text == "Whole."
    streamed, completed = llm.completion_requests
    assert streamed["prompt"] == (
        "<|im_start|>system\nYou are Ann.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
        "<|im_start|>assistant\nHi.<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    template_stops = [
        "<|im_end|>",
        "<|im_start|>user",
        "<|im_start|>assistant",
        "<|im_start|>system",
        "\nUser:",
    ]
    assert streamed["stop"] == [*template_stops, "THE END"]
    assert streamed["temperature"] == 0
    assert completed["stop"] == template_stops
    assert llm.chat_requests == []


async def test_chat_client_streams_a_prompt_built_by_the_caller(
    make_endpoint: EndpointFactory, fast_retries: RetryPolicy
) -> None:
    with ReplayLLMServer(models=[]) as server:
        endpoint = make_endpoint(server.url, api="llamacpp", instruct_template="Llama 3 Instruct")
        prompt = format_prompt(
            [PromptTurn(role="user", content="Hi")],
            builtin_instruct_templates()["Llama 3 Instruct"],
            builtin_context_templates()["Llama 3 Instruct"],
            user="Bob",
            char="Ann",
        )
        server.script(Reply(text="Hello, Bob."))
        async with ChatClient(endpoint, retry_policy=fast_retries) as client:
            result = await client.stream_prompt(prompt, max_tokens=20).collect()
        assert result.text == "Hello, Bob."
        request = server.completion_requests[-1]
    assert request.path == "/completion"
    assert request["prompt"] == prompt.text
    assert request["n_predict"] == 20
    assert request["stop"][0] == "<|eot_id|>"


async def test_tools_on_a_text_api_ask_for_a_chat_connection(
    llm: ReplayLLMServer, make_endpoint: EndpointFactory, fast_retries: RetryPolicy
) -> None:
    endpoint = make_endpoint(llm.url, api="koboldcpp")
    tools = [{"type": "function", "function": {"name": "look", "parameters": {}}}]
    async with ChatClient(endpoint, retry_policy=fast_retries) as client:
        with pytest.raises(LLMError) as streamed:
            await client.stream([{"role": "user", "content": "hi"}], tools=tools).collect()
        with pytest.raises(LLMError) as whole:
            await client.complete([{"role": "user", "content": "hi"}], tools=tools)
    for caught in (streamed, whole):
        assert caught.value.kind == "bad_request"
        assert "chat-completion connection" in caught.value.message
    assert llm.requests == []


@pytest.mark.parametrize("api", APIS)
async def test_test_connection_works_on_text_apis(
    api: CompletionApi, llm: ReplayLLMServer, make_endpoint: EndpointFactory
) -> None:
    llm.script(Reply(text="OK"))
    report = await check_chat_endpoint(make_endpoint(llm.url, api=api), role="user_llm")
    assert report.ok, report.message
    assert llm.completion_requests[-1]["prompt"].endswith("<|im_start|>assistant\n")


def test_context_size_is_read_from_koboldcpp_and_llamacpp() -> None:
    with ReplayLLMServer(context_length=6144) as server:
        assert probe_context_size(server.url, "test-model", refresh=True) == 6144
