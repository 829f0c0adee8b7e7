"""A real storyloom server on a free loopback port, in a thread of the test process."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from storyloom.cli.serve import bind_socket
from storyloom.server.app import create_app
from storyloom.server.token_auth import is_loopback


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
    """``app_options`` go to ``create_app`` (``node_registry=`` for test node types)."""
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
