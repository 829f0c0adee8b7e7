"""Fixtures shared by the chat tests: a migrated database and a turn tree over it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from storyloom.chat.store.turn_tree import TurnTree
from storyloom.store.database import Database


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    """A migrated database in its own folder, so ``tmp_path`` holds only what a test writes."""
    database = Database(tmp_path / "db" / "chat.sqlite3")
    yield database
    database.close()


@pytest.fixture
def tree(db: Database) -> TurnTree:
    return TurnTree(db)
