"""ChatClient.complete, list_models and the error kinds, over real HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from storyloom.core.settings import ChatEndpoint
from storyloom.llm.chat import ChatClient
from storyloom.llm.errors import (
    AuthenticationFailed,
    EndpointUnreachable,
    LLMError,
    ModelNotFound,
    NotConfigured,
    RateLimited,
)
from storyloom.llm.retry import RetryPolicy
from storyloom.testing.replay_server import ReplayLLMServer, Reply

MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "Hello?"}]


async def test_complete_returns_the_whole_answer(llm: ReplayLLMServer, client: ChatClient) -> None:
    llm.script(Reply(text="Hello there", reasoning="be polite"))
    result = await client.complete(MESSAGES, max_tokens=20)
    assert result.text == "Hello there"
    assert result.finish_reason == "stop"
    assert result.model == "test-model"
    assert result.reasoning_text == "be polite"
    assert result.usage is not None and result.usage["total_tokens"] > 0
    body = llm.chat_requests[-1]
    assert body["stream"] is False and body["max_tokens"] == 20
    assert "stream_options" not in body


async def test_complete_returns_tool_calls(llm: ReplayLLMServer, client: ChatClient) -> None:
    llm.script(Reply(tool_calls=[{"name": "look", "arguments": {"at": "door"}}]))
    result = await client.complete(MESSAGES)
    assert result.finish_reason == "tool_calls"
    assert result.tool_calls[0]["function"] == {"name": "look", "arguments": '{"at": "door"}'}
    assert result.text == ""


async def test_default_reply_answers_when_the_script_is_empty(client: ChatClient) -> None:
    assert (await client.complete(MESSAGES)).text == "OK"


async def test_list_models_returns_served_names(make_endpoint: Any) -> None:
    with ReplayLLMServer(models=["alpha", "beta"]) as llm:
        async with ChatClient(make_endpoint(llm.url, model="alpha")) as client:
            assert await client.list_models() == ["alpha", "beta"]


async def test_complete_retries_429_then_succeeds(llm: ReplayLLMServer, client: ChatClient) -> None:
    llm.script(Reply(status=429, retry_after=0), Reply(status=429), Reply(text="third time"))
    assert (await client.complete(MESSAGES)).text == "third time"
    assert len(llm.chat_requests) == 3


async def test_out_of_quota_is_not_retried(llm: ReplayLLMServer, client: ChatClient) -> None:
    llm.script(Reply(status=429, error_code="insufficient_quota"), Reply(text="unused"))
    with pytest.raises(RateLimited) as caught:
        await client.complete(MESSAGES)
    assert "quota" in caught.value.message
    assert len(llm.chat_requests) == 1


async def test_rate_limit_exhaustion_reports_rate_limited(
    llm: ReplayLLMServer, client: ChatClient
) -> None:
    llm.script(*[Reply(status=429, retry_after=0)] * 3)
    with pytest.raises(RateLimited) as caught:
        await client.complete(MESSAGES)
    assert caught.value.status_code == 429
    assert caught.value.retry_after_s == 0
    assert len(llm.chat_requests) == 3


async def test_server_error_exhaustion_reports_server_error(
    llm: ReplayLLMServer, client: ChatClient
) -> None:
    llm.script(*[Reply(status=500)] * 3)
    with pytest.raises(LLMError) as caught:
        await client.complete(MESSAGES)
    assert caught.value.kind == "server_error"
    assert caught.value.status_code == 500
    assert len(llm.chat_requests) == 3


async def test_unreachable_port_names_the_url(
    closed_port_url: str, make_endpoint: Any, fast_retries: RetryPolicy
) -> None:
    async with ChatClient(make_endpoint(closed_port_url), retry_policy=fast_retries) as client:
        with pytest.raises(EndpointUnreachable) as caught:
            await client.complete(MESSAGES)
        with pytest.raises(EndpointUnreachable):
            await client.stream(MESSAGES).collect()
    error = caught.value
    assert error.kind == "unreachable"
    assert (
        error.message
        == f"Cannot reach {closed_port_url}: connection refused. Is the server running?"
    )
    assert error.status_code is None


async def test_stopped_server_is_unreachable_even_with_pooled_connections(
    make_endpoint: Any,
) -> None:
    llm = ReplayLLMServer().start()
    async with ChatClient(make_endpoint(llm.url, max_retries=0)) as client:
        assert (await client.complete(MESSAGES)).text == "OK"
        llm.stop()
        with pytest.raises(EndpointUnreachable):
            await client.complete(MESSAGES)


async def test_unknown_host_says_so(make_endpoint: Any) -> None:
    endpoint = make_endpoint("http://no-such-host.invalid/v1", max_retries=0)
    async with ChatClient(endpoint) as client:
        with pytest.raises(EndpointUnreachable) as caught:
            await client.list_models()
    assert "no-such-host.invalid" in caught.value.message


async def test_wrong_key_is_an_auth_error(make_endpoint: Any) -> None:
    with ReplayLLMServer(api_key="right-key") as llm:
        async with ChatClient(make_endpoint(llm.url, api_key="wrong-key")) as client:
            with pytest.raises(AuthenticationFailed) as caught:
                await client.stream(MESSAGES).collect()
        assert caught.value.kind == "auth"
        assert caught.value.status_code == 401
        assert "API key" in caught.value.message
        assert len(llm.chat_requests) == 1  # a wrong key does not get better by retrying


async def test_right_key_is_sent_as_bearer(make_endpoint: Any) -> None:
    with ReplayLLMServer(api_key="right-key") as llm:
        async with ChatClient(make_endpoint(llm.url, api_key="right-key")) as client:
            assert (await client.complete(MESSAGES)).text == "OK"
        assert llm.chat_requests[-1].headers["authorization"] == "Bearer right-key"


async def test_unknown_model_is_model_not_found(llm: ReplayLLMServer, make_endpoint: Any) -> None:
    async with ChatClient(make_endpoint(llm.url, model="no-such-model")) as client:
        with pytest.raises(ModelNotFound) as caught:
            await client.complete(MESSAGES)
        with pytest.raises(ModelNotFound):
            await client.stream(MESSAGES).collect()
    assert caught.value.kind == "model_not_found"
    assert "'no-such-model'" in caught.value.message
    assert caught.value.status_code == 404


async def test_base_url_without_v1_hints_at_the_fix(
    llm: ReplayLLMServer, make_endpoint: Any
) -> None:
    base = llm.url.removesuffix("/v1")
    async with ChatClient(make_endpoint(base)) as client:
        with pytest.raises(LLMError) as caught:
            await client.complete(MESSAGES)
    assert caught.value.kind == "bad_request"
    assert "/v1" in caught.value.message


@pytest.mark.parametrize("fields", [{"base_url": ""}, {"model": ""}])
async def test_unconfigured_endpoint_raises_not_configured(fields: dict[str, str]) -> None:
    endpoint = ChatEndpoint.model_validate(
        {"base_url": "http://127.0.0.1:1/v1", "model": "m", **fields}
    )
    client = ChatClient(endpoint)  # building it is fine; using it is not
    with pytest.raises(NotConfigured) as caught:
        await client.complete(MESSAGES)
    with pytest.raises(NotConfigured):
        await client.stream(MESSAGES).collect()
    with pytest.raises(NotConfigured):
        await client.list_models()
    assert caught.value.kind == "not_configured"
    assert "Settings" in caught.value.message
    await client.aclose()
