"""Fixtures the writing tests share: a fresh database, the user's and the agent's model
(each a real replay server)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from storyloom.store.database import Database
from storyloom.testing.replay_server import ReplayLLMServer


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "storyloom.sqlite3")
    yield database
    database.close()


@pytest.fixture
def llm() -> Iterator[ReplayLLMServer]:
    with ReplayLLMServer(models=["user-model"]) as server:
        yield server


@pytest.fixture
def agent() -> Iterator[ReplayLLMServer]:
    with ReplayLLMServer(models=["agent-model"]) as server:
        yield server
