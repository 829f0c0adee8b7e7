"""Text completions on a real model: the embedded SmolLM2-135M (a ChatML model) on
llama.cpp, through its own ``/completion`` and its OpenAI-compatible ``/v1/completions``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from storyloom.core.settings import ChatEndpoint, CompletionApi, LocalModelSettings
from storyloom.llm.chat import ChatClient
from storyloom.llm.local_model import LocalModelServer
from storyloom.llm.text_completion import TextCompletionClient

GREEDY = {"temperature": 0, "seed": 7, "max_tokens": 16}
QUESTION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Name three colours."},
]


@pytest.fixture(scope="module")
def smollm() -> Iterator[ChatEndpoint]:
    server = LocalModelServer(LocalModelSettings(context_size=1024, threads=1))
    server.start()
    running = server.running
    assert running is not None
    try:
        yield ChatEndpoint(base_url=running.url, model=running.model, parameters=GREEDY)
    finally:
        server.stop()


@pytest.mark.parametrize("api", ["llamacpp", "text"])
def test_the_model_answers_a_chatml_prompt_streamed(
    smollm: ChatEndpoint, api: CompletionApi
) -> None:
    endpoint = smollm.model_copy(update={"api": api})

    async def ask() -> tuple[str, list[str], str | None]:
        async with ChatClient(endpoint) as client:
            async with client.stream(QUESTION) as stream:
                deltas = [delta async for delta in stream]
            return stream.text, deltas, stream.finish_reason

    text, deltas, finish = asyncio.run(ask())
    assert text.strip() and len(deltas) > 1
    assert "".join(deltas) == text
    assert "<|im_start|>" not in text
    assert finish in ("stop", "length")


@pytest.mark.parametrize("api", ["llamacpp", "text"])
def test_a_stop_string_ends_the_answer_where_it_appears(
    smollm: ChatEndpoint, api: CompletionApi
) -> None:
    endpoint = smollm.model_copy(update={"api": api})
    prompt = "<|im_start|>user\nCount from one to ten in words.<|im_end|>\n<|im_start|>assistant\n"

    async def ask() -> tuple[str, str, str | None]:
        async with TextCompletionClient(endpoint) as client:
            free = await client.complete(prompt)
            words = free.text.split()
            assert len(words) >= 3, free.text
            stop = words[2]
            stopped = await client.complete(prompt, stop=[stop])
            return free.text, stop, stopped.text if stopped.finish_reason == "stop" else None

    free, stop, stopped = asyncio.run(ask())
    assert stopped is not None
    assert stopped == free[: free.index(stop)]
