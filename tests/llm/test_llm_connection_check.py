"""The "test connection" checks: one report per outcome, never an exception."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from storyloom.core.settings import ChatEndpoint, EmbeddingEndpoint
from storyloom.llm.connection_check import check_chat_endpoint, check_embedding_endpoint
from storyloom.testing.loopback import serve_in_thread
from storyloom.testing.replay_server import ReplayLLMServer, Reply


async def test_chat_check_success_reports_latency_and_models(
    llm: ReplayLLMServer, endpoint: ChatEndpoint
) -> None:
    report = await check_chat_endpoint(endpoint, role="user_llm")
    assert report.ok
    assert report.role == "user_llm"
    assert report.kind is None
    assert report.models == ["test-model"]
    assert report.latency_ms is not None and report.latency_ms >= 0
    assert report.message.startswith(f"Connected to {llm.url}: model test-model answered in ")
    probe = llm.chat_requests[-1]
    assert probe["max_tokens"] == 1


async def test_chat_check_tolerates_a_server_without_model_list(make_endpoint: Any) -> None:
    with ReplayLLMServer(models=["test-model"], serve_models=False) as llm:
        report = await check_chat_endpoint(make_endpoint(llm.url))
    assert report.ok
    assert report.models is None


async def test_chat_check_reports_a_model_missing_from_the_list(
    llm: ReplayLLMServer, make_endpoint: Any
) -> None:
    report = await check_chat_endpoint(make_endpoint(llm.url, model="llama9"), role="agent_llm")
    assert not report.ok
    assert report.kind == "model_not_found"
    assert report.role == "agent_llm"
    assert "'llama9'" in report.message and "test-model" in report.message
    assert report.models == ["test-model"]


async def test_chat_check_allows_an_unlisted_model_that_answers_with_a_warning(
    make_endpoint: Any,
) -> None:
    with ReplayLLMServer(models=["test-model", "hidden"], listed_models=["test-model"]) as llm:
        report = await check_chat_endpoint(make_endpoint(llm.url, model="hidden"))
    assert report.ok
    assert report.warning is not None
    assert "'hidden'" in report.warning and "test-model" in report.warning


async def test_chat_check_accepts_ollama_latest_tag(make_endpoint: Any) -> None:
    served = ["llama3:latest", "llama3"]
    with ReplayLLMServer(models=served, listed_models=["llama3:latest"]) as llm:
        report = await check_chat_endpoint(make_endpoint(llm.url, model="llama3"))
    assert report.ok
    assert report.models == ["llama3:latest"]


async def test_chat_check_reports_unknown_model_when_no_list(make_endpoint: Any) -> None:
    with ReplayLLMServer(models=["test-model"], serve_models=False) as llm:
        report = await check_chat_endpoint(make_endpoint(llm.url, model="ghost"))
    assert not report.ok
    assert report.kind == "model_not_found"


async def test_chat_check_reports_unreachable(closed_port_url: str, make_endpoint: Any) -> None:
    report = await check_chat_endpoint(make_endpoint(closed_port_url))
    assert not report.ok
    assert report.kind == "unreachable"
    assert closed_port_url in report.message
    assert "Is the server running?" in report.message


async def test_chat_check_reports_a_wrong_key(make_endpoint: Any) -> None:
    with ReplayLLMServer(api_key="secret") as llm:
        report = await check_chat_endpoint(make_endpoint(llm.url, api_key="guess"))
    assert not report.ok
    assert report.kind == "auth"
    assert "API key" in report.message


async def test_chat_check_reports_a_timeout(llm: ReplayLLMServer, make_endpoint: Any) -> None:
    llm.script(Reply(text="late", delay_s=5))
    report = await check_chat_endpoint(make_endpoint(llm.url, timeout_s=0.2))
    assert not report.ok
    assert report.kind == "timeout"


async def test_chat_check_does_not_retry(llm: ReplayLLMServer, endpoint: ChatEndpoint) -> None:
    llm.script(Reply(status=503), Reply(text="unused"))
    report = await check_chat_endpoint(endpoint)
    assert not report.ok
    assert report.kind == "server_error"
    assert len(llm.chat_requests) == 1


async def test_chat_check_falls_back_for_models_refusing_max_tokens(
    llm: ReplayLLMServer, endpoint: ChatEndpoint
) -> None:
    llm.script(
        Reply(
            status=400,
            error_message="Unsupported parameter: 'max_tokens'. Use 'max_completion_tokens'.",
        )
    )
    report = await check_chat_endpoint(endpoint)
    assert report.ok
    retry = llm.chat_requests[-1]
    assert "max_tokens" not in retry and retry["max_completion_tokens"] == 16


async def test_chat_check_reports_not_configured() -> None:
    report = await check_chat_endpoint(ChatEndpoint(), role="user_llm")
    assert not report.ok
    assert report.kind == "not_configured"


async def test_embedding_check_with_bundled_model() -> None:
    report = await check_embedding_endpoint(EmbeddingEndpoint())
    assert report.ok
    assert report.role == "embedding"
    assert report.dimensions == 384


async def test_embedding_check_against_an_endpoint() -> None:
    with ReplayLLMServer(models=["embed"], embedding_dim=24) as llm:
        endpoint = EmbeddingEndpoint(provider="openai", base_url=llm.url, model="embed")
        report = await check_embedding_endpoint(endpoint)
        assert llm.url in report.message
    assert report.ok
    assert report.dimensions == 24


async def test_embedding_check_honoured_dimensions_pass() -> None:
    with ReplayLLMServer(models=["embed"], embedding_dim=24) as llm:
        endpoint = EmbeddingEndpoint(
            provider="openai", base_url=llm.url, model="embed", dimensions=8
        )
        report = await check_embedding_endpoint(endpoint)
    assert report.ok and report.dimensions == 8
    assert llm.embedding_requests[-1]["dimensions"] == 8


async def test_embedding_check_reports_ignored_dimensions() -> None:
    with ReplayLLMServer(models=["embed"], embedding_dim=24, honour_dimensions=False) as llm:
        endpoint = EmbeddingEndpoint(
            provider="openai", base_url=llm.url, model="embed", dimensions=8
        )
        report = await check_embedding_endpoint(endpoint)
    assert not report.ok
    assert report.dimensions == 24
    assert "24" in report.message and "8" in report.message


async def test_embedding_check_reports_unreachable(closed_port_url: str) -> None:
    endpoint = EmbeddingEndpoint(provider="openai", base_url=closed_port_url, model="embed")
    report = await check_embedding_endpoint(endpoint)
    assert not report.ok
    assert report.kind == "unreachable"
    assert closed_port_url in report.message


async def test_embedding_check_reports_not_configured() -> None:
    report = await check_embedding_endpoint(EmbeddingEndpoint(provider="openai"))
    assert not report.ok
    assert report.kind == "not_configured"


# -- an address that is not an LLM -------------------------------------------------------


def answering_every_path(status: int, body: str, media_type: str) -> Starlette:
    """A server that is not a model server: every GET and POST gets the same answer."""

    async def answer(request: Request) -> Response:
        return Response(body, status_code=status, media_type=media_type)

    return Starlette(routes=[Route("/{path:path}", answer, methods=["GET", "POST"])])


WEB_PAGE = "<!DOCTYPE html><html><head><title>Router</title></head><body>Hi</body></html>"


@pytest.mark.parametrize(
    ("status", "body", "media_type", "got"),
    [
        (200, WEB_PAGE, "text/html", "got an HTML page"),
        (200, "", "text/plain", "got nothing"),
        (404, "404 page not found", "text/plain", "got status 404"),
        (404, WEB_PAGE, "text/html", "got status 404"),
        (501, WEB_PAGE, "text/html", "got status 501"),
        (200, "hello from a web app", "text/plain", "got text, not JSON"),
    ],
)
async def test_chat_check_says_an_address_answered_but_not_as_an_llm(
    make_endpoint: Any, status: int, body: str, media_type: str, got: str
) -> None:
    with serve_in_thread(answering_every_path(status, body, media_type)) as url:
        report = await check_chat_endpoint(make_endpoint(f"{url}/v1"))
    assert not report.ok
    assert report.kind == "server_error"
    assert report.message.startswith(
        f"{url}/v1 answered, but not as an OpenAI-compatible API ({got})."
    )
    assert "Expecting value" not in report.message
    assert "<html" not in report.message.casefold()
