"""Write transactions that bump the conversation's version first, and check it.

Every write that changes what a reader sees bumps the conversation's ``version`` inside
its own transaction, and refuses to write when the caller's ``expected_version`` is stale
(two tabs on one chat cannot overwrite each other). The version is bumped by the
transaction's first statement, so the write lock is taken before anything is read and the
check and the write cannot be separated by another writer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import apsw

from storyloom.chat.store.chat_errors import VersionConflict
from storyloom.chat.store.conversation import ConversationSettings
from storyloom.chat.store.tree_rows import fetch
from storyloom.core.errors import NotFound
from storyloom.store.database import Database


@dataclass(frozen=True, slots=True)
class WriteHead:
    """The conversation as a write found it, after bumping its version."""

    version: int
    pointer: str | None
    keyframe_every: int
    ladder: list[str]


@contextmanager
def writing(
    db: Database, conversation_id: str, expected_version: int | None
) -> Iterator[tuple[apsw.Connection, WriteHead]]:
    """A transaction whose first statement bumps the version (and checks it)."""
    with db.transaction() as conn:
        yield conn, bump(conn, conversation_id, expected_version)


def bump(conn: apsw.Connection, conversation_id: str, expected_version: int | None) -> WriteHead:
    rows = fetch(
        conn,
        "UPDATE chat_conversation SET version = version + 1, updated_at = ? WHERE id = ? "
        "RETURNING version, pointer, json_extract(settings, '$.keyframe_every'), ladder",
        (time.time(), conversation_id),
    )
    if not rows:
        raise NotFound(f"conversation {conversation_id} not found")
    version, pointer, every, ladder = rows[0]
    if expected_version is not None and expected_version != version - 1:
        raise VersionConflict(conversation_id, expected_version, version - 1)
    return WriteHead(int(version), pointer, keyframe_interval(every), json.loads(ladder))


def keyframe_every(conn: apsw.Connection, conversation_id: str) -> int:
    rows = fetch(
        conn,
        "SELECT json_extract(settings, '$.keyframe_every') FROM chat_conversation WHERE id = ?",
        (conversation_id,),
    )
    return keyframe_interval(rows[0][0] if rows else None)


def keyframe_interval(value: Any) -> int:
    try:
        every = int(value)
    except (TypeError, ValueError):
        return ConversationSettings().keyframe_every
    return max(1, every)
