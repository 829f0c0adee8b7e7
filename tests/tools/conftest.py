"""Every tool test: the plugin hosts it opened are closed after it; ``llm``, the replay
server the agent tests script."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from storyloom.testing.replay_server import ReplayLLMServer
from tests.tools.plugin_support import HOSTS


@pytest.fixture
def llm() -> Iterator[ReplayLLMServer]:
    with ReplayLLMServer(models=["test-model"]) as server:
        yield server


@pytest.fixture(autouse=True)
def close_plugin_hosts() -> Iterator[None]:
    yield
    while HOSTS:
        HOSTS.pop().close()
