"""Local models on the real llama.cpp runtime (xllamacpp) with the embedded SmolLM2-135M:
a file that cannot run is named with its reason, the embedded model answers over HTTP as
any endpoint does, and budgets read the context size the server really has."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from storyloom.core.settings import ChatEndpoint, LocalModelSettings, Settings
from storyloom.llm.chat import ChatClient
from storyloom.llm.context_size import context_size_of, probe_context_size
from storyloom.llm.local_model import (
    EMBEDDED_ALIAS,
    LocalModelError,
    LocalModels,
    LocalModelServer,
    embedded_model_file,
    model_file,
)
from storyloom.testing.replay_server import ReplayLLMServer


@pytest.fixture(scope="module")
def embedded() -> Iterator[LocalModelServer]:
    server = LocalModelServer(LocalModelSettings(context_size=2048))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_the_embedded_model_ships_inside_its_wheel() -> None:
    path = embedded_model_file()
    assert path is not None and path.name.endswith(".gguf")
    assert path.read_bytes()[:4] == b"GGUF"


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda tmp: tmp / "nowhere.gguf", "no such file"),
        (lambda tmp: tmp, "not a file"),
        (lambda tmp: _write(tmp / "model.bin", b"PK\x03\x04 a zip"), "not a GGUF model"),
    ],
)
def test_a_model_file_that_cannot_run_is_named_with_the_reason(
    tmp_path: Path, make: object, reason: str
) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    with pytest.raises(LocalModelError) as caught:
        model_file(LocalModelSettings(path=str(path)))
    assert str(path) in str(caught.value) and reason in str(caught.value)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_a_damaged_gguf_file_fails_in_its_own_process_and_says_so(tmp_path: Path) -> None:
    broken = _write(tmp_path / "broken.gguf", b"GGUF" + b"\x00" * 4096)
    server = LocalModelServer(LocalModelSettings(path=str(broken)))
    with pytest.raises(LocalModelError) as caught:
        server.start(timeout_s=120)
    assert str(broken) in str(caught.value)
    assert "llama.cpp could not load it" in str(caught.value)
    assert not server.alive


def test_the_embedded_model_answers_as_an_openai_compatible_endpoint(
    embedded: LocalModelServer,
) -> None:
    running = embedded.running
    assert running is not None and running.model == EMBEDDED_ALIAS
    assert running.url.startswith("http://127.0.0.1:") and running.url.endswith("/v1")
    endpoint = ChatEndpoint(
        base_url=running.url,
        model=running.model,
        parameters={"temperature": 0, "seed": 7, "max_tokens": 12},
    )

    async def ask() -> tuple[str, list[str]]:
        async with ChatClient(endpoint) as client:
            deltas: list[str] = []
            async with client.stream([{"role": "user", "content": "Say hello."}]) as stream:
                async for delta in stream:
                    deltas.append(delta)
            return stream.text, deltas

    text, deltas = asyncio.run(ask())
    assert text.strip() and len(deltas) > 1
    assert "".join(deltas) == text


def test_budgets_read_the_context_size_the_server_has(embedded: LocalModelServer) -> None:
    running = embedded.running
    assert running is not None
    assert probe_context_size(running.url, running.model, refresh=True) == 2048
    # A setting past what the server holds would be refused: the server's size wins.
    endpoint = ChatEndpoint(base_url=running.url, model=running.model, context_window=8192)
    assert context_size_of(endpoint) == 2048
    smaller = endpoint.model_copy(update={"context_window": 1024})
    assert context_size_of(smaller) == 1024


def test_a_server_that_does_not_say_keeps_the_setting(llm: ReplayLLMServer) -> None:
    endpoint = ChatEndpoint(base_url=llm.url, model="test-model", context_window=4096)
    assert context_size_of(endpoint) == 4096


def test_with_nothing_set_up_the_embedded_model_answers_both_roles() -> None:
    models = LocalModels()
    settings = Settings()
    try:
        models.sync(settings)
        applied = models.apply(settings)
        assert applied.user_llm.configured and applied.agent_llm.configured
        assert applied.user_llm.base_url == applied.agent_llm.base_url
        assert applied.user_llm.context_tokens == 2048
        (status,) = models.status(settings)
        assert status.embedded and status.running and status.problem is None
        health = httpx.get(applied.user_llm.base_url.removesuffix("/v1") + "/health")
        assert health.status_code == 200
        # A user model set up: the demo model is not wanted, and stops.
        chosen = Settings(user_llm=ChatEndpoint(base_url="http://127.0.0.1:9/v1", model="m"))
        models.sync(chosen)
        assert models.status(chosen) == [] and models.apply(chosen) == chosen
        with pytest.raises(httpx.HTTPError):
            httpx.get(applied.user_llm.base_url.removesuffix("/v1") + "/health", timeout=2)
    finally:
        models.close()


def test_a_local_model_that_fails_leaves_the_role_unset_with_the_reason(tmp_path: Path) -> None:
    missing = str(tmp_path / "gone.gguf")
    settings = Settings(user_llm=ChatEndpoint(local_model=LocalModelSettings(path=missing)))
    models = LocalModels()
    models.sync(settings)
    applied = models.apply(settings)
    assert not applied.user_llm.configured
    assert applied.user_llm.local_problem is not None
    assert missing in applied.user_llm.local_problem
    (status,) = models.status(settings)
    assert not status.running and status.problem is not None and "no such file" in status.problem


def test_a_connection_s_gguf_file_runs_and_the_connection_points_at_it() -> None:
    """A named connection with a local model: started with the others (once per distinct
    file), and the settings in force point that connection, not the roles, at it."""
    local = LocalModelSettings(context_size=1024)
    user = ChatEndpoint(base_url="http://127.0.0.1:9/v1", model="m")
    settings = Settings(
        user_llm=user,
        connections={
            "Tiny": ChatEndpoint(local_model=local),
            "Tiny again": ChatEndpoint(local_model=local, context_window=512),
        },
    )
    models = LocalModels(embedded=False)
    try:
        assert models.wanted(settings) == [local]
        models.sync(settings)
        applied = models.apply(settings)
        assert applied.user_llm == user
        tiny = applied.endpoint_for("user", "Tiny")
        again = applied.endpoint_for("user", "Tiny again")
        assert tiny.configured and tiny.base_url == again.base_url
        assert (tiny.context_tokens, again.context_tokens) == (1024, 512)

        async def ask() -> str:
            async with ChatClient(tiny) as client:
                result = await client.complete(
                    [{"role": "user", "content": "Say hi."}], max_tokens=4, temperature=0
                )
                return result.text

        assert asyncio.run(ask()).strip()
    finally:
        models.close()
