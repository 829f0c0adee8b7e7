"""A real storyloom server on a free loopback port, in a thread of the test process, and
the data directory a chat test starts it on: the scripted model server as its models."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from storyloom.cli.serve import bind_socket
from storyloom.project.project_file import init_project
from storyloom.server.app import create_app
from storyloom.server.token_auth import is_loopback
from storyloom.testing.replay_server import ReplayLLMServer


@dataclass
class LiveServer:
    url: str
    home: Path
    server: uvicorn.Server

    @property
    def ws_url(self) -> str:
        return self.url.replace("http://", "ws://") + "/ws"


def start_live_server(
    home: Path, token: str | None = None, host: str = "127.0.0.1", **app_options: Any
) -> LiveServer:
    """``app_options`` go to ``create_app`` (``node_registry=`` for test node types).
    Local models start only when a test asks (``local_models=True``): a server without
    a model set up would otherwise load the embedded one, which only the tests about a
    real model need."""
    app_options.setdefault("local_models", False)
    sock = bind_socket(host, 0)
    port = sock.getsockname()[1]
    app = create_app(home, token=token, environ={}, loopback_only=is_loopback(host), **app_options)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", ws="websockets-sansio"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("test server did not start")
        time.sleep(0.01)
    return LiveServer(f"http://{host}:{port}", home, server)


@pytest.fixture
def start_server() -> Iterator[Callable[..., LiveServer]]:
    """Start more servers (with a token, on a prepared home); all stop after the test."""
    started: list[LiveServer] = []

    def start(home: Path, token: str | None = None, **app_options: Any) -> LiveServer:
        started.append(start_live_server(home, token=token, **app_options))
        return started[-1]

    yield start
    for live in started:
        live.server.should_exit = True


@pytest.fixture
def live_server(tmp_path: Path, start_server: Callable[..., LiveServer]) -> LiveServer:
    return start_server(tmp_path / "home")


@pytest.fixture
def client(live_server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live_server.url, timeout=30) as c:
        yield c


@pytest.fixture
def llm() -> Iterator[ReplayLLMServer]:
    """The scripted OpenAI-compatible server, serving "test-model"."""
    with ReplayLLMServer(models=["test-model"]) as server:
        yield server


def chat_home(
    home: Path,
    llm: ReplayLLMServer,
    cards: Mapping[str, dict[str, Any]] | None = None,
    *,
    agent: bool = True,
    api_key: str | None = "sk-x",
) -> Path:
    """A data directory whose chat model (and agent model, with ``agent``) is ``llm``'s
    "test-model", tried once, and whose default project holds ``cards`` as character
    presets (id → card)."""
    home.mkdir(parents=True, exist_ok=True)
    endpoint: dict[str, Any] = {"base_url": llm.url, "model": "test-model", "max_retries": 0}
    if api_key is not None:
        endpoint["api_key"] = api_key
    settings = {"user_llm": endpoint, "agent_llm": endpoint} if agent else {"user_llm": endpoint}
    (home / "settings.json").write_text(json.dumps(settings))
    project = home / "projects" / "default"
    init_project(project)
    if cards:
        characters = project / "presets" / "characters"
        characters.mkdir(parents=True)
        for character_id, card in cards.items():
            (characters / f"{character_id}.json").write_text(json.dumps(card))
    return home
