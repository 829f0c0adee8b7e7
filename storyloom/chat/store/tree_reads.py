"""Reading a turn tree: messages, paths, the continuation, siblings and the tree view.

Reading a 10,000-message path is one recursive query, and opening a long chat is one
query that SQLite answers as JSON (:meth:`TreeReader.path_json`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import apsw
from pydantic import BaseModel, ConfigDict, Field

from storyloom.chat.store.message import Message, MessageStatus, Role
from storyloom.chat.store.tree_rows import (
    M_COLUMNS,
    MESSAGE_COLUMNS,
    by_depth,
    children_of,
    fetch,
    preview,
    to_message,
    to_messages,
    trusted,
)
from storyloom.core.errors import NotFound
from storyloom.store.database import Database

TREE_PREVIEW_CHARS = 80


class TreeNode(BaseModel):
    """One message in the tree view."""

    model_config = ConfigDict(frozen=True)

    id: str
    parent_id: str | None
    role: Role
    name: str
    preview: str
    status: MessageStatus
    sibling_index: int
    depth: int
    on_path: bool = Field(description="On the path root → pointer")
    hidden: bool = Field(
        default=False, description="Hidden from the prompt (extra.hidden, SillyTavern's ghost)"
    )


_TREE_FIELDS_SET = set(TreeNode.model_fields)

# The path from a message up to its root, by parent links: message first, root last.
_UP_SQL = f"""
WITH RECURSIVE up({MESSAGE_COLUMNS}) AS (
    SELECT {MESSAGE_COLUMNS} FROM chat_message WHERE id = ?
    UNION ALL
    SELECT {M_COLUMNS} FROM up CROSS JOIN chat_message AS m ON m.id = up.parent_id
)
SELECT {MESSAGE_COLUMNS} FROM up
"""

# The path root → ?1 (its last ?2 messages; ?2 < 0: all) as one JSON array (see
# TurnTree.path_json). Siblings are counted through the parent index.
_PATH_JSON_SQL = """
WITH RECURSIVE up(id, parent_id, n) AS (
    SELECT id, parent_id, 0 FROM chat_message WHERE id = ?1
    UNION ALL
    SELECT m.id, m.parent_id, up.n + 1
    FROM up CROSS JOIN chat_message AS m ON m.id = up.parent_id
    WHERE ?2 < 0 OR up.n + 1 < ?2
),
-- Only the ids are sorted (root first); the rows are then read in that order, which
-- costs far less than sorting rows that carry their text.
ordered(id) AS MATERIALIZED (SELECT id FROM up ORDER BY n DESC)
SELECT json_group_array(json_object(
    'id', m.id, 'conversation_id', m.conversation_id, 'parent_id', m.parent_id,
    'role', m.role, 'name', m.name, 'content', m.content, 'original', m.original,
    'thought', m.thought, 'status', m.status, 'error', m.error,
    'sibling_index', m.sibling_index, 'depth', m.depth, 'created_at', m.created_at,
    'extra', json(m.extra),
    'sibling_count', (
        SELECT COUNT(*) FROM chat_message AS s
        WHERE s.conversation_id = m.conversation_id AND s.parent_id IS m.parent_id
    )
))
FROM ordered CROSS JOIN chat_message AS m ON m.id = ordered.id
"""

# Up from ?1, at most ?2 messages, message first.
_UP_TAIL_SQL = f"""
WITH RECURSIVE up({MESSAGE_COLUMNS}, n) AS (
    SELECT {MESSAGE_COLUMNS}, 1 FROM chat_message WHERE id = ?1
    UNION ALL
    SELECT {M_COLUMNS}, up.n + 1 FROM up CROSS JOIN chat_message AS m ON m.id = up.parent_id
    WHERE up.n < ?2
)
SELECT {MESSAGE_COLUMNS} FROM up
"""

# From a message down along active_child links (a link to a non-child is ignored).
_DOWN_SQL = f"""
WITH RECURSIVE down({MESSAGE_COLUMNS}, active_child) AS (
    SELECT {MESSAGE_COLUMNS}, active_child FROM chat_message WHERE id = ?
    UNION ALL
    SELECT {M_COLUMNS}, m.active_child
    FROM down CROSS JOIN chat_message AS m ON m.id = down.active_child AND m.parent_id = down.id
)
SELECT {MESSAGE_COLUMNS} FROM down
"""


class TreeReader:
    """The read side of :class:`TurnTree`: nothing here writes."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def message(self, message_id: str) -> Message:
        rows = fetch(
            self._db.connection(),
            f"SELECT {MESSAGE_COLUMNS} FROM chat_message WHERE id = ?",
            (message_id,),
        )
        if not rows:
            raise NotFound(f"message {message_id} not found")
        return to_message(rows[0])

    def path(self, message_id: str | None) -> list[Message]:
        """The messages from the root down to ``message_id`` (None: none)."""
        if message_id is None:
            return []
        rows = fetch(self._db.connection(), _UP_SQL, (message_id,))
        if not rows:
            raise NotFound(f"message {message_id} not found")
        # The walk yields the message first and the root last.
        rows.reverse()
        messages = to_messages(rows)
        if messages[0].parent_id is not None or messages[-1].id != message_id:
            messages.sort(key=by_depth)
        return messages

    def path_tail(self, message_id: str | None, limit: int) -> list[Message]:
        """The last ``limit`` messages of :meth:`path` (root-most first): a long chat's
        prompt needs only as much history as its context window holds."""
        if message_id is None or limit <= 0:
            return []
        rows = fetch(self._db.connection(), _UP_TAIL_SQL, (message_id, limit))
        if not rows:
            raise NotFound(f"message {message_id} not found")
        rows.reverse()
        return to_messages(rows)

    def path_json(self, message_id: str | None, *, limit: int | None = None) -> str:
        """:meth:`path` (or its last ``limit`` messages) as a JSON array of messages, each
        with its ``sibling_count``, written by SQLite itself.

        Opening a long chat is this one query: turning 10,000 rows into models and the
        models into JSON costs several times more than SQLite writing the JSON in C.
        """
        if message_id is None:
            return "[]"
        steps = limit if limit is not None and limit > 0 else -1
        rows = fetch(self._db.connection(), _PATH_JSON_SQL, (message_id, steps))
        text = rows[0][0] if rows else None
        if text is None or text == "[]":
            raise NotFound(f"message {message_id} not found")
        return str(text)

    def active_path(self, conversation_id: str) -> list[Message]:
        """What the chat shows: root → pointer."""
        return self.path(self._pointer(conversation_id))

    def continuation(self, conversation_id: str) -> list[Message]:
        """The messages after the pointer along the active children: what time travel
        left ahead, restored by moving the pointer forward."""
        conn = self._db.connection()
        rows = fetch(
            conn,
            "SELECT pointer, active_root FROM chat_conversation WHERE id = ?",
            (conversation_id,),
        )
        if not rows:
            raise NotFound(f"conversation {conversation_id} not found")
        pointer, active_root = rows[0]
        start = pointer if pointer is not None else active_root
        if start is None:
            return []
        messages = to_messages(fetch(conn, _DOWN_SQL, (start,)))
        if messages[0].id != start:
            messages.sort(key=by_depth)
        return messages[1:] if pointer is not None else messages

    def children(self, conversation_id: str, parent_id: str | None) -> list[Message]:
        """The children of ``parent_id`` (None: the roots) in sibling order."""
        return children_of(self._db.connection(), conversation_id, parent_id)

    def siblings(self, message_id: str) -> list[Message]:
        """The message and its siblings, in order."""
        message = self.message(message_id)
        return self.children(message.conversation_id, message.parent_id)

    def sibling_counts(self, message_ids: Sequence[str]) -> dict[str, int]:
        """How many siblings each message has, itself included (unknown ids left out)."""
        if not message_ids:
            return {}
        rows = fetch(
            self._db.connection(),
            "SELECT m.id, COUNT(*) FROM json_each(?) AS j "
            "JOIN chat_message AS m ON m.id = j.value "
            "JOIN chat_message AS s ON s.conversation_id = m.conversation_id "
            "AND s.parent_id IS m.parent_id "
            "GROUP BY m.id",
            (json.dumps(list(message_ids)),),
        )
        return {str(mid): int(count) for mid, count in rows}

    def tree(self, conversation_id: str) -> list[TreeNode]:
        """Every message of the conversation, by depth then sibling order."""
        conn = self._db.connection()
        pointer = self._pointer(conversation_id, conn)
        rows = fetch(
            conn,
            "SELECT id, parent_id, role, name, substr(content, 1, 200), status, "
            "sibling_index, depth, COALESCE(json_type(extra, '$.hidden') = 'true', 0) "
            "FROM chat_message WHERE conversation_id = ? "
            "ORDER BY depth, parent_id, sibling_index",
            (conversation_id,),
        )
        parents = {row[0]: row[1] for row in rows}
        on_path: set[str] = set()
        node = pointer
        while node is not None and node not in on_path:
            on_path.add(node)
            node = parents.get(node)
        return [
            trusted(
                TreeNode,
                {
                    "id": mid,
                    "parent_id": parent,
                    "role": role,
                    "name": name,
                    "preview": preview(text, TREE_PREVIEW_CHARS),
                    "status": status,
                    "sibling_index": index,
                    "depth": depth,
                    "on_path": mid in on_path,
                    "hidden": bool(hidden),
                },
                _TREE_FIELDS_SET,
            )
            for mid, parent, role, name, text, status, index, depth, hidden in rows
        ]

    def _pointer(self, conversation_id: str, conn: apsw.Connection | None = None) -> str | None:
        conn = conn or self._db.connection()
        rows = fetch(conn, "SELECT pointer FROM chat_conversation WHERE id = ?", (conversation_id,))
        if not rows:
            raise NotFound(f"conversation {conversation_id} not found")
        pointer: str | None = rows[0][0]
        return pointer
