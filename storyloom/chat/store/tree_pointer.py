"""The pointer (where the user is) and the active path (the way on from each message).

Each message knows its ``active_child``, the child it continues with, and the
conversation its ``active_root``: moving the pointer makes the path to it the active one,
so what lay below it stays its continuation. Moving the pointer walks up from the new
message only to where its path meets the old pointer's, found through the conversation's
*ladder* of the pointer's ancestors at every ``LADDER_STEP``-th depth, so time travel in a
long chat costs the distance moved, not the depth.
"""

from __future__ import annotations

import json
from itertools import pairwise

import apsw

from storyloom.chat.store.message import Message
from storyloom.chat.store.tree_rows import fetch
from storyloom.chat.store.versioned_write import WriteHead

LADDER_STEP = 64
"""The ladder holds the pointer's ancestors at depths that are multiples of this."""

# Up from a message with what pointer moves need, stopping at the first ancestor found in
# the ladder (?2, a JSON array; ?3 the step): the path above it is the old pointer's,
# which is already the active one. Rows come message first.
_UP_LINKS_SQL = """
WITH RECURSIVE up(id, parent_id, active_child, depth) AS (
    SELECT id, parent_id, active_child, depth FROM chat_message WHERE id = ?1
    UNION ALL
    SELECT m.id, m.parent_id, m.active_child, m.depth
    FROM up CROSS JOIN chat_message AS m ON m.id = up.parent_id
    WHERE NOT (up.depth % ?3 = 0 AND up.id IS json_extract(?2, '$[' || (up.depth / ?3) || ']'))
)
SELECT id, parent_id, active_child, depth FROM up
"""

# The ancestor of ?1 at depth ?2 (nothing when ?1 is not deeper).
_ANCESTOR_AT_SQL = """
WITH RECURSIVE up(id, parent_id, depth) AS (
    SELECT id, parent_id, depth FROM chat_message WHERE id = ?1
    UNION ALL
    SELECT m.id, m.parent_id, m.depth
    FROM up CROSS JOIN chat_message AS m ON m.id = up.parent_id
    WHERE up.depth > ?2
)
SELECT id FROM up WHERE depth = ?2
"""

_DEEPEST_SQL = """
WITH RECURSIVE down(id, active_child, depth) AS (
    SELECT id, active_child, depth FROM chat_message WHERE id = ?
    UNION ALL
    SELECT m.id, m.active_child, m.depth
    FROM down CROSS JOIN chat_message AS m ON m.id = down.active_child AND m.parent_id = down.id
)
SELECT id FROM down ORDER BY depth DESC LIMIT 1
"""


def deepest_below(conn: apsw.Connection, message_id: str) -> str:
    """Where the active path below ``message_id`` ends (itself when it has no child)."""
    return str(fetch(conn, _DEEPEST_SQL, (message_id,))[0][0])


def active_of(conn: apsw.Connection, conversation_id: str, parent_id: str | None) -> str | None:
    if parent_id is None:
        sql = "SELECT active_root FROM chat_conversation WHERE id = ?"
        rows = fetch(conn, sql, (conversation_id,))
    else:
        sql = "SELECT active_child FROM chat_message WHERE id = ?"
        rows = fetch(conn, sql, (parent_id,))
    active: str | None = rows[0][0] if rows else None
    return active


def set_active(
    conn: apsw.Connection,
    conversation_id: str,
    parent_id: str | None,
    child_id: str | None,
) -> None:
    """The child ``parent_id`` continues with (None: the root the chat starts from)."""
    if parent_id is None:
        conn.execute(
            "UPDATE chat_conversation SET active_root = ? WHERE id = ?",
            (child_id, conversation_id),
        )
    else:
        conn.execute("UPDATE chat_message SET active_child = ? WHERE id = ?", (child_id, parent_id))


def point_to(
    conn: apsw.Connection,
    conversation_id: str,
    message_id: str | None,
    ladder: list[str],
) -> None:
    """Move the pointer and make the path to it the active one.

    ``ladder`` is the old pointer's: the walk up stops where the new path meets the
    old one, so time travel along a chat costs the distance moved, not the depth.
    """
    if message_id is None:
        conn.execute(
            "UPDATE chat_conversation SET pointer = NULL, ladder = '[]' WHERE id = ?",
            (conversation_id,),
        )
        return
    rows = fetch(conn, _UP_LINKS_SQL, (message_id, json.dumps(ladder), LADDER_STEP))
    rows.reverse()  # the meeting point (or the root) first
    if len(rows) > 1 and int(rows[0][3]) >= int(rows[1][3]):
        rows.sort(key=lambda row: int(row[3]))
    fixes = [(child[0], parent[0]) for parent, child in pairwise(rows) if parent[2] != child[0]]
    if fixes:
        conn.executemany("UPDATE chat_message SET active_child = ? WHERE id = ?", fixes)
    top_id, top_parent, _, top_depth = rows[0]
    kept = ladder[: int(top_depth) // LADDER_STEP] if top_parent is not None else []
    new_ladder = kept + [str(row[0]) for row in rows if int(row[3]) % LADDER_STEP == 0]
    if top_parent is None:
        conn.execute(
            "UPDATE chat_conversation SET pointer = ?, active_root = ?, ladder = ? WHERE id = ?",
            (message_id, top_id, json.dumps(new_ladder), conversation_id),
        )
    else:
        conn.execute(
            "UPDATE chat_conversation SET pointer = ?, ladder = ? WHERE id = ?",
            (message_id, json.dumps(new_ladder), conversation_id),
        )


def above_pointer(
    conn: apsw.Connection,
    pointer: str | None,
    message_id: str | None,
    depth: int,
) -> bool:
    """Whether ``message_id`` (at ``depth``; None: above the roots) is a strict
    ancestor of the pointer."""
    if pointer is None or message_id == pointer:
        return False
    if message_id is None:
        return True
    rows = fetch(conn, _ANCESTOR_AT_SQL, (pointer, depth))
    return bool(rows) and rows[0][0] == message_id


def point_to_child(
    conn: apsw.Connection, conversation_id: str, head: WriteHead, message: Message
) -> None:
    """Move the pointer to a message just added as its parent's active child."""
    if message.parent_id is None or message.parent_id != head.pointer:
        point_to(conn, conversation_id, message.id, head.ladder)
        return
    # A reply to the pointer: the path to it is the old one plus itself.
    if message.depth % LADDER_STEP == 0:
        conn.execute(
            "UPDATE chat_conversation SET pointer = ?, ladder = ? WHERE id = ?",
            (message.id, json.dumps([*head.ladder, message.id]), conversation_id),
        )
    else:
        conn.execute(
            "UPDATE chat_conversation SET pointer = ? WHERE id = ?",
            (message.id, conversation_id),
        )
