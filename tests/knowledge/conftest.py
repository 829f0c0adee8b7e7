"""Fixtures shared by the knowledge tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from storyloom.store.database import Database


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    """A migrated database in its own folder, so ``tmp_path`` holds only what a test writes."""
    database = Database(tmp_path / "db" / "knowledge.sqlite3")
    yield database
    database.close()
