"""Adding many messages to a turn tree in one transaction: importers and benchmarks.

Rows may name earlier rows as their parents, so a whole chat with its branches goes in
as one write: the rows become messages without validating them one by one (a
:class:`NewMessage` was validated when it was made), and the states go to the state
chain in one batch.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from storyloom.chat.store.message import Message, MessageStatus, Role
from storyloom.chat.store.state import ChatState
from storyloom.chat.store.state_chain import StateChain, StateDocument, StateRow
from storyloom.chat.store.tree_pointer import point_to, set_active
from storyloom.chat.store.tree_rows import (
    MESSAGE_FIELDS_SET,
    insert_messages,
    new_id,
    next_sibling_index,
    owned_message,
    state_after,
    trusted,
)
from storyloom.chat.store.versioned_write import writing
from storyloom.store.database import Database


class NewMessage(BaseModel):
    """One row of :meth:`TurnTree.add_messages` (the keyword fields of ``add_message``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    parent_id: str | None = None
    role: Role
    content: str
    name: str = ""
    status: MessageStatus = "complete"
    thought: str | None = None
    original: str | None = None
    error: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)
    state: ChatState | None = Field(default=None, description="None: the parent's state")
    message_id: str | None = None
    created_at: float | None = None


def add_messages(
    db: Database,
    chain: StateChain,
    conversation_id: str,
    rows: Sequence[NewMessage],
    *,
    expected_version: int | None = None,
) -> list[Message]:
    """Add many messages in one transaction (importers, benchmarks).

    A row's ``parent_id`` may name an earlier row's ``message_id``. Each parent
    continues with its last child added here, the pointer moves to the last row, and
    the path to it is made the active one.
    """
    if not rows:
        return []
    now = time.time()
    with writing(db, conversation_id, expected_version) as (conn, head):
        depths: dict[str, int] = {}
        docs: dict[str, StateDocument] = {}
        next_index: dict[str | None, int] = {}
        last_child: dict[str | None, str] = {}
        messages: list[Message] = []
        added: set[str] = set()
        state_rows: list[StateRow] = []
        for row in rows:
            mid = row.message_id or new_id()
            pid = row.parent_id
            parent_doc: StateDocument | None = None
            if pid is None:
                depth = 0
            elif pid in depths:
                depth = depths[pid] + 1
                parent_doc = docs[pid]
            else:
                depth = owned_message(conn, conversation_id, pid).depth + 1
                parent_doc = chain.document_at(pid)
                depths[pid] = depth - 1
                docs[pid] = parent_doc
            if pid not in next_index:
                next_index[pid] = (
                    0 if pid in added else next_sibling_index(conn, conversation_id, pid)
                )
            index = next_index[pid]
            next_index[pid] = index + 1
            message = trusted(
                Message,
                {
                    "id": mid,
                    "conversation_id": conversation_id,
                    "parent_id": pid,
                    "role": row.role,
                    "name": row.name,
                    "content": row.content,
                    "original": row.original,
                    "thought": row.thought,
                    "status": row.status,
                    "error": row.error,
                    "sibling_index": index,
                    "depth": depth,
                    "created_at": now if row.created_at is None else row.created_at,
                    "extra": dict(row.extra),
                },
                MESSAGE_FIELDS_SET,
            )
            doc = state_after(row.state, parent_doc)
            state_rows.append(
                chain.row_for(
                    mid,
                    conversation_id,
                    depth,
                    parent_doc,
                    doc,
                    keyframe_every=head.keyframe_every,
                )
            )
            depths[mid] = depth
            docs[mid] = doc
            last_child[pid] = mid
            messages.append(message)
            added.add(mid)
        insert_messages(conn, [(m, last_child.get(m.id)) for m in messages])
        for pid, child in last_child.items():
            if pid is None or pid not in added:
                set_active(conn, conversation_id, pid, child)
        # Links above the meeting point may have changed: walk the whole path.
        point_to(conn, conversation_id, messages[-1].id, [])
        chain.write_rows(conn, state_rows)
    chain.remember(messages[-1].id, docs[messages[-1].id])
    return messages
