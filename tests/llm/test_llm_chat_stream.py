"""ChatClient.stream against a real HTTP replay server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from storyloom.core.settings import ChatEndpoint
from storyloom.llm.chat import ChatClient
from storyloom.llm.errors import LLMCancelled, LLMError, LLMTimeout, StreamCut
from storyloom.llm.retry import RetryPolicy
from storyloom.testing.replay_server import ReplayLLMServer, Reply

from .conftest import stop_from_another_task

MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "Tell me a story."}]
HANG_GUARD_S = 20  # only stops a hung test; never a timing assertion


async def _disconnected(llm: ReplayLLMServer, count: int = 1) -> bool:
    return await asyncio.to_thread(llm.wait_for_disconnect, count, HANG_GUARD_S)


async def test_stream_yields_deltas_and_accumulates_text(
    llm: ReplayLLMServer, client: ChatClient
) -> None:
    llm.script(Reply(text="Once upon a time"))
    async with client.stream(MESSAGES) as stream:
        deltas = [delta async for delta in stream]
    assert deltas == ["Once ", "upon ", "a ", "time"]
    assert stream.text == "Once upon a time"
    assert not stream.stopped
    assert stream.finish_reason == "stop"
    assert stream.model == "test-model"
    assert stream.usage is not None and stream.usage["completion_tokens"] == 4
    assert stream.finished


async def test_finished_streams_reuse_the_connection(
    llm: ReplayLLMServer, client: ChatClient
) -> None:
    for _ in range(3):
        await client.stream(MESSAGES).collect()
    assert len({request.client_port for request in llm.chat_requests}) == 1


async def test_stream_text_is_readable_while_streaming(
    llm: ReplayLLMServer, client: ChatClient
) -> None:
    llm.script(Reply(text="abcdef", chunks=3))
    seen = []
    async with client.stream(MESSAGES) as stream:
        async for _ in stream:
            seen.append(stream.text)
    assert seen == ["ab", "abcd", "abcdef"]


async def test_stream_with_many_chunks_keeps_every_character(
    llm: ReplayLLMServer, client: ChatClient
) -> None:
    text = "".join(f"{i % 10}" for i in range(5000))
    llm.script(Reply(text=text, chunks=2000))
    async with client.stream(MESSAGES) as stream:
        count = sum([1 async for _ in stream])
    assert stream.text == text
    assert count == 2000


async def test_empty_deltas_are_not_yielded(llm: ReplayLLMServer, client: ChatClient) -> None:
    llm.script(Reply(text="x" * 10, chunks=2000))
    async with client.stream(MESSAGES) as stream:
        deltas = [delta async for delta in stream]
    assert deltas == ["x"] * 10


async def test_stream_is_also_a_plain_async_iterator(
    llm: ReplayLLMServer, client: ChatClient
) -> None:
    llm.script(Reply(text="one two"))
    stream = client.stream(MESSAGES)
    assert await stream.__anext__() == "one "
    assert await stream.__anext__() == "two"
    with pytest.raises(StopAsyncIteration):
        await stream.__anext__()


async def test_collect_returns_the_whole_result(llm: ReplayLLMServer, client: ChatClient) -> None:
    llm.script(Reply(text="All done.", reasoning="Think first."))
    result = await client.stream(MESSAGES).collect()
    assert result.text == "All done."
    assert result.reasoning_text == "Think first."
    assert result.finish_reason == "stop"


async def test_stream_sends_endpoint_parameters_merged_with_overrides(
    llm: ReplayLLMServer, make_endpoint: Any
) -> None:
    endpoint: ChatEndpoint = make_endpoint(
        llm.url,
        parameters={"temperature": 0.7, "top_p": 0.9, "max_tokens": 50, "min_p": 0.05},
    )
    async with ChatClient(endpoint) as client:
        await client.stream(MESSAGES, temperature=0.2, top_p=None, repetition_penalty=1.1).collect()
    body = llm.chat_requests[-1]
    assert body["model"] == "test-model"
    assert body["messages"] == MESSAGES
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0.2
    assert "top_p" not in body
    assert body["max_tokens"] == 50
    assert body["min_p"] == 0.05  # an extra key, sent through extra_body
    assert body["repetition_penalty"] == 1.1
    assert "presence_penalty" not in body and "stop" not in body


async def test_parameters_cannot_replace_protocol_fields(
    llm: ReplayLLMServer, make_endpoint: Any
) -> None:
    endpoint: ChatEndpoint = make_endpoint(llm.url, parameters={"stream": False, "messages": []})
    async with ChatClient(endpoint) as client:
        result = await client.stream(MESSAGES, stream=False).collect()
    assert result.text == "OK"
    assert llm.chat_requests[-1]["stream"] is True
    assert llm.chat_requests[-1]["messages"] == MESSAGES


async def test_model_override_picks_another_served_model(make_endpoint: Any) -> None:
    with ReplayLLMServer(models=["test-model", "other-model"]) as llm:
        async with ChatClient(make_endpoint(llm.url)) as client:
            stream = client.stream(MESSAGES, model="other-model")
            await stream.collect()
        assert llm.chat_requests[-1]["model"] == "other-model"
        assert stream.model == "other-model"


async def test_stream_merges_tool_call_deltas(llm: ReplayLLMServer, client: ChatClient) -> None:
    llm.script(Reply(text="", tool_calls=[{"name": "roll_dice", "arguments": {"sides": 20}}]))
    result = await client.stream(MESSAGES, tools=[{"type": "function"}]).collect()
    assert result.finish_reason == "tool_calls"
    assert result.tool_calls == [
        {
            "id": "call_replay_0",
            "type": "function",
            "function": {"name": "roll_dice", "arguments": '{"sides": 20}'},
        }
    ]
    assert llm.chat_requests[-1]["tools"] == [{"type": "function"}]


# -- failures mid-stream ------------------------------------------------------------------


async def test_stream_cut_keeps_partial_text(llm: ReplayLLMServer, client: ChatClient) -> None:
    llm.script(Reply(text="abcdef", chunks=6, cut_after_chunks=3), Reply(text="never sent"))
    received = []
    with pytest.raises(StreamCut) as caught:
        async with client.stream(MESSAGES) as stream:
            async for delta in stream:
                received.append(delta)
    assert caught.value.kind == "stream_cut"
    assert caught.value.partial_text == "abc" == "".join(received) == stream.text
    assert llm.url in caught.value.message


async def test_no_retry_once_tokens_flowed(llm: ReplayLLMServer, client: ChatClient) -> None:
    llm.script(Reply(text="a b c d", cut_after_chunks=2), Reply(text="replacement"))
    with pytest.raises(StreamCut):
        await client.stream(MESSAGES).collect()
    assert len(llm.chat_requests) == 1
    assert llm.pending == 1


async def test_error_event_mid_stream_is_a_stream_cut(
    llm: ReplayLLMServer, client: ChatClient
) -> None:
    llm.script(Reply(text="a b c", error_after_chunks=2, error_message="GPU fell over"))
    with pytest.raises(StreamCut) as caught:
        await client.stream(MESSAGES).collect()
    assert caught.value.partial_text == "a b "
    assert "GPU fell over" in caught.value.message


async def test_stall_after_first_tokens_is_a_stream_cut(
    llm: ReplayLLMServer, make_endpoint: Any
) -> None:
    llm.script(Reply(text="a b c d", hold_after_chunks=2))
    async with ChatClient(make_endpoint(llm.url, timeout_s=0.3)) as client:
        with pytest.raises(StreamCut) as caught:
            await asyncio.wait_for(client.stream(MESSAGES).collect(), HANG_GUARD_S)
    assert caught.value.partial_text == "a b "


async def test_slow_first_byte_beyond_timeout_is_a_timeout(
    llm: ReplayLLMServer, make_endpoint: Any, fast_retries: RetryPolicy
) -> None:
    llm.script(Reply(text="too late", delay_s=5))
    endpoint = make_endpoint(llm.url, timeout_s=0.2)
    async with ChatClient(endpoint, retry_policy=fast_retries) as client:
        with pytest.raises(LLMTimeout) as caught:
            await asyncio.wait_for(client.stream(MESSAGES).collect(), HANG_GUARD_S)
    assert caught.value.kind == "timeout"
    assert llm.url in caught.value.message
    assert len(llm.chat_requests) == 1  # a slow server is not hammered with retries


# -- retries before the first token ---------------------------------------------------------


async def test_retry_on_429_then_success(llm: ReplayLLMServer, client: ChatClient) -> None:
    llm.script(Reply(status=429, retry_after=0), Reply(text="fine now"))
    result = await client.stream(MESSAGES).collect()
    assert result.text == "fine now"
    assert len(llm.chat_requests) == 2


async def test_retry_when_cut_before_first_token(llm: ReplayLLMServer, client: ChatClient) -> None:
    llm.script(Reply(text="lost", cut_after_chunks=0), Reply(text="second try"))
    assert (await client.stream(MESSAGES).collect()).text == "second try"
    assert len(llm.chat_requests) == 2


async def test_server_errors_exhaust_retries(llm: ReplayLLMServer, client: ChatClient) -> None:
    llm.script(Reply(status=500), Reply(status=502), Reply(status=503), Reply(text="unused"))
    with pytest.raises(LLMError) as caught:
        await client.stream(MESSAGES).collect()
    assert caught.value.kind == "server_error"
    assert caught.value.status_code == 503
    assert len(llm.chat_requests) == 3  # first try + max_retries=2
    assert llm.pending == 1


async def test_bad_request_is_not_retried(llm: ReplayLLMServer, client: ChatClient) -> None:
    llm.script(Reply(status=400, error_message="max_tokens is too large"), Reply(text="unused"))
    with pytest.raises(LLMError) as caught:
        await client.stream(MESSAGES).collect()
    assert caught.value.kind == "bad_request"
    assert "max_tokens is too large" in caught.value.message
    assert len(llm.chat_requests) == 1


# -- cancellation -------------------------------------------------------------------------


async def test_cancelling_the_consumer_closes_the_response(
    llm: ReplayLLMServer, client: ChatClient
) -> None:
    llm.script(Reply(text="one two three four", hold_after_chunks=2))
    got_two = asyncio.Event()

    async def consume() -> None:
        async with client.stream(MESSAGES) as stream:
            async for _ in stream:
                if stream.text == "one two ":
                    got_two.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(got_two.wait(), HANG_GUARD_S)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, HANG_GUARD_S)
    assert await _disconnected(llm)


async def test_cancelling_a_bare_iteration_closes_the_response(
    llm: ReplayLLMServer, client: ChatClient
) -> None:
    llm.script(Reply(text="one two three", hold_after_chunks=1))
    stream = client.stream(MESSAGES)
    started = asyncio.Event()

    async def consume() -> None:
        async for _ in stream:
            started.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(started.wait(), HANG_GUARD_S)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, HANG_GUARD_S)
    assert await _disconnected(llm)
    assert stream.text == "one "


async def test_aclose_from_another_task_stops_the_consumer(
    llm: ReplayLLMServer, client: ChatClient
) -> None:
    llm.script(Reply(text="one two three", hold_after_chunks=2))
    stream = client.stream(MESSAGES)
    stopped = await stop_from_another_task(stream, "one two ")
    assert stopped.partial_text == "one two "
    assert stream.stopped
    assert await _disconnected(llm)


async def test_aclose_while_waiting_for_the_first_byte_stops_promptly(
    llm: ReplayLLMServer, client: ChatClient
) -> None:
    llm.script(Reply(text="far too late", delay_s=60))
    stream = client.stream(MESSAGES)
    task = asyncio.create_task(stream.collect())
    assert await asyncio.to_thread(llm.wait_for_requests, 1, HANG_GUARD_S)
    await stream.aclose()
    with pytest.raises(LLMCancelled) as caught:
        await asyncio.wait_for(task, HANG_GUARD_S)
    assert caught.value.partial_text == ""


async def test_leaving_the_context_early_closes_the_response(
    llm: ReplayLLMServer, client: ChatClient
) -> None:
    llm.script(Reply(text="one two three", hold_after_chunks=1))
    async with client.stream(MESSAGES) as stream:
        async for _ in stream:
            break
    assert await _disconnected(llm)
    assert stream.finished and stream.stopped
    assert stream.text == "one "


async def test_client_is_reusable_after_a_cancelled_stream(
    llm: ReplayLLMServer, client: ChatClient
) -> None:
    llm.script(Reply(text="one two", hold_after_chunks=1), Reply(text="next answer"))
    async with client.stream(MESSAGES) as stream:
        async for _ in stream:
            break
    assert (await client.stream(MESSAGES).collect()).text == "next answer"
