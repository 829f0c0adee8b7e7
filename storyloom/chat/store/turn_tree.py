"""Conversations as trees of messages in SQLite (Mnemosyne's turn tree, seed 001).

A swipe or an edit as a new branch adds a sibling, a branch is a new child of an old
message, and an edit in place keeps the text it replaced as a version of the message
(:mod:`message_marks`), so every version of the story stays reachable.
The conversation's ``pointer`` says where the user is; the path root → pointer is what
the chat shows and what the next prompt is built from. Each message also knows its
``active_child``, the child it continues with: moving the pointer back (time travel) keeps
the way forward, shown as the *continuation*, and swiping back to a sibling brings back
the branch that grew under it.

Every write bumps the conversation's ``version`` first and refuses a stale
``expected_version`` (:mod:`versioned_write`). Reading a 10,000-message path is one
recursive query, and moving the pointer costs the distance moved, not the depth
(:mod:`tree_pointer`).

:class:`TurnTree` is the one object the rest of storyloom uses. It writes messages
itself and hands the rest to its parts: :mod:`conversation_records` (the conversation
rows), :mod:`bulk_messages` (many messages in one write, for importers),
:mod:`tree_reads` (paths, the continuation, siblings, the tree view),
:mod:`tree_pointer` (the pointer and the active path), :mod:`versioned_write` and
:mod:`tree_rows` (rows to models and back); its errors are in :mod:`chat_errors`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, get_args

import apsw
from pydantic import BaseModel, Field

from storyloom.chat.store.bulk_messages import NewMessage, add_messages
from storyloom.chat.store.chat_errors import ChatError, VersionConflict
from storyloom.chat.store.conversation import (
    BackgroundSnapshot,
    CharacterSnapshot,
    Conversation,
    ConversationSettings,
)
from storyloom.chat.store.conversation_records import (
    ConversationRecords,
    ConversationSummary,
    read_conversation,
)
from storyloom.chat.store.message import Message, MessageStatus, Role
from storyloom.chat.store.message_marks import (
    MessageVersion,
    versions_of,
    with_hidden,
    with_version,
)
from storyloom.chat.store.state import ChatState
from storyloom.chat.store.state_chain import StateChain
from storyloom.chat.store.tree_pointer import (
    LADDER_STEP,
    above_pointer,
    active_of,
    deepest_below,
    point_to,
    point_to_child,
    set_active,
)
from storyloom.chat.store.tree_reads import TreeNode, TreeReader
from storyloom.chat.store.tree_rows import (
    MESSAGE_COLUMNS,
    children_of,
    dumps_json,
    fetch,
    insert_messages,
    new_id,
    next_sibling_index,
    owned_message,
    state_after,
    to_message,
    validated_message,
)
from storyloom.chat.store.versioned_write import bump, keyframe_every, writing
from storyloom.core.errors import NotFound
from storyloom.store.database import Database

__all__ = [
    "INTERRUPTED_ERROR",
    "LADDER_STEP",
    "ChatError",
    "ConversationSummary",
    "NewMessage",
    "NotFound",
    "TreeNode",
    "TurnRecord",
    "TurnTree",
    "VersionConflict",
    "new_id",
]

INTERRUPTED_ERROR = "interrupted: the server stopped while this reply was streaming"


class TurnRecord(BaseModel):
    """What a reply was made from, kept apart from the message (see migration 6)."""

    prompt: dict[str, Any] | None = Field(default=None, description="Prompt inspector record")
    raw: str | None = Field(default=None, description="The model's text as it came")


_SUBTREE_SQL = """
WITH RECURSIVE sub(id) AS (
    SELECT id FROM chat_message WHERE id = ?2
    UNION ALL
    SELECT m.id FROM sub CROSS JOIN chat_message AS m
        ON m.conversation_id = ?1 AND m.parent_id = sub.id
)
SELECT id FROM sub
"""


class TurnTree:
    """Conversations, their message trees, pointers and the state chain, in SQLite."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._chain = StateChain(db)
        self._conversations = ConversationRecords(db, self._chain)
        self._reads = TreeReader(db)

    @property
    def state_chain(self) -> StateChain:
        return self._chain

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One transaction around several writes (each one's own becomes a savepoint of
        it): an importer's conversation and its messages commit together, or not at all,
        and pay one commit instead of one per write."""
        with self._db.write_transaction():
            yield

    # conversations (ConversationRecords)

    def create_conversation(
        self,
        *,
        project_id: str,
        title: str,
        character: CharacterSnapshot | None = None,
        background: BackgroundSnapshot | None = None,
        settings: ConversationSettings | None = None,
        metadata: dict[str, Any] | None = None,
        conversation_id: str | None = None,
        created_at: float | None = None,
    ) -> Conversation:
        return self._conversations.create_conversation(
            project_id=project_id,
            title=title,
            character=character,
            background=background,
            settings=settings,
            metadata=metadata,
            conversation_id=conversation_id,
            created_at=created_at,
        )

    def conversation(self, conversation_id: str) -> Conversation:
        return self._conversations.conversation(conversation_id)

    def conversations(self, project_id: str | None = None) -> list[ConversationSummary]:
        """Newest first; ``message_count`` counts the messages on the path to the pointer."""
        return self._conversations.conversations(project_id)

    def update_conversation(
        self,
        conversation_id: str,
        *,
        expected_version: int | None = None,
        title: str | None = None,
        settings: ConversationSettings | None = None,
        character: CharacterSnapshot | None = None,
        background: BackgroundSnapshot | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Conversation:
        """Change the given fields (None: unchanged)."""
        return self._conversations.update_conversation(
            conversation_id,
            expected_version=expected_version,
            title=title,
            settings=settings,
            character=character,
            background=background,
            metadata=metadata,
        )

    def delete_conversation(self, conversation_id: str) -> None:
        self._conversations.delete_conversation(conversation_id)

    # writing messages

    def add_message(
        self,
        conversation_id: str,
        *,
        parent_id: str | None,
        role: Role,
        content: str,
        name: str = "",
        status: MessageStatus = "complete",
        thought: str | None = None,
        original: str | None = None,
        error: str | None = None,
        extra: dict[str, Any] | None = None,
        state: ChatState | None = None,
        expected_version: int | None = None,
        move_pointer: bool = True,
        message_id: str | None = None,
        created_at: float | None = None,
    ) -> Message:
        """Add a child of ``parent_id`` after its other children.

        ``state`` is the state after this message (None: the parent's). The parent
        continues with it (its active child) and ``move_pointer`` puts the user on it.
        Without ``move_pointer`` the path to the pointer stays as it is: a parent above
        the pointer keeps the child the pointer is under.
        """
        with writing(self._db, conversation_id, expected_version) as (conn, head):
            depth = 0
            if parent_id is not None:
                depth = owned_message(conn, conversation_id, parent_id).depth + 1
            message = validated_message(
                id=message_id or new_id(),
                conversation_id=conversation_id,
                parent_id=parent_id,
                role=role,
                name=name,
                content=content,
                original=original,
                thought=thought,
                status=status,
                error=error,
                sibling_index=next_sibling_index(conn, conversation_id, parent_id),
                depth=depth,
                created_at=time.time() if created_at is None else created_at,
                extra=extra or {},
            )
            insert_messages(conn, [(message, None)])
            if move_pointer:
                set_active(conn, conversation_id, parent_id, message.id)
                point_to_child(conn, conversation_id, head, message)
            elif not above_pointer(conn, head.pointer, parent_id, depth - 1):
                set_active(conn, conversation_id, parent_id, message.id)
            parent_doc = None if parent_id is None else self._chain.document_at(parent_id)
            doc = state_after(state, parent_doc)
            row = self._chain.row_for(
                message.id,
                conversation_id,
                depth,
                parent_doc,
                doc,
                keyframe_every=head.keyframe_every,
            )
            self._chain.write_rows(conn, [row])
        self._chain.remember(message.id, doc)
        return message

    def add_messages(
        self,
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
        return add_messages(
            self._db, self._chain, conversation_id, rows, expected_version=expected_version
        )

    def update_message(
        self,
        message_id: str,
        *,
        content: str | None = None,
        status: MessageStatus | None = None,
        thought: str | None = None,
        original: str | None = None,
        error: str | None = None,
        extra: dict[str, Any] | None = None,
        state: ChatState | None = None,
        bump_version: bool = False,
        raw: str | None = None,
        prompt: Mapping[str, Any] | None = None,
    ) -> Message:
        """Change a message in place (None: unchanged; ``extra`` replaces the old one;
        ``error=""`` clears the error). ``raw`` and ``prompt`` go to the reply's
        :meth:`turn_record`, in the same transaction.

        For streaming flushes and finalising a reply: no new sibling, and the version
        moves only with ``bump_version``. A new ``state`` leaves the children's states as
        they were.
        """
        if status is not None and status not in get_args(MessageStatus):
            raise ChatError(
                f"message {message_id}: status {status!r} is not one of "
                f"{', '.join(get_args(MessageStatus))}"
            )
        changes: dict[str, Any] = {}
        if content is not None:
            changes["content"] = content
        if status is not None:
            changes["status"] = status
        if thought is not None:
            changes["thought"] = thought
        if original is not None:
            changes["original"] = original
        if error is not None:
            changes["error"] = error or None
        if extra is not None:
            changes["extra"] = dumps_json(extra, f"extra of message {message_id}")
        # Always an UPDATE (a no-op one without changes): the write lock comes first.
        assignments = ", ".join(f"{column} = ?" for column in changes) or "status = status"
        with self._db.transaction() as conn:
            rows = fetch(
                conn,
                f"UPDATE chat_message SET {assignments} WHERE id = ? RETURNING {MESSAGE_COLUMNS}",
                (*changes.values(), message_id),
            )
            if not rows:
                raise NotFound(f"message {message_id} not found")
            message = to_message(rows[0])
            every: int | None = None
            if bump_version:
                every = bump(conn, message.conversation_id, None).keyframe_every
            if raw is not None or prompt is not None:
                conn.execute(
                    "INSERT INTO chat_turn_record (message_id, prompt, raw) VALUES (?, ?, ?) "
                    "ON CONFLICT (message_id) DO UPDATE SET "
                    "prompt = coalesce(excluded.prompt, prompt), raw = coalesce(excluded.raw, raw)",
                    (
                        message.id,
                        None if prompt is None else dumps_json(prompt, f"prompt of {message.id}"),
                        raw,
                    ),
                )
            if state is not None:
                if every is None:
                    every = keyframe_every(conn, message.conversation_id)
                self._chain.replace(conn, message, state, keyframe_every=every)
        if state is not None:
            self._chain.remember(message.id, state.as_json())
        return message

    def pin_state(self, message_id: str) -> Message:
        """Store the state after a message whole (a keyframe: MVU's snapshot); nothing
        it reads changes. Moves the conversation's version."""
        message = self.message(message_id)
        with self._db.transaction() as conn:
            self._chain.pin(conn, message)
            bump(conn, message.conversation_id, None)
        return message

    def clear_states(self, conversation_id: str, message_ids: Sequence[str]) -> list[str]:
        """Forget the stored states of ``message_ids`` (MVU's "clear old variables"):
        each message of the conversation below them that keeps its state is pinned first
        (:meth:`pin_state`), so its state and its descendants' stay as they were; the
        cleared ones read as empty. Returns the ids whose states were dropped."""
        dropped = set(message_ids)
        with self._db.transaction() as conn:
            rows = fetch(
                conn,
                "SELECT id, parent_id FROM chat_message WHERE conversation_id = ?",
                (conversation_id,),
            )
            below = [
                str(mid)
                for mid, parent in rows
                if parent is not None and str(parent) in dropped and str(mid) not in dropped
            ]
            for mid in below:
                self._chain.pin(conn, self.message(mid))
            known = {str(mid) for mid, _ in rows}
            ids = [mid for mid in message_ids if mid in known]
            self._chain.drop(conn, ids)
            bump(conn, conversation_id, None)
        return ids

    def turn_record(self, message_id: str) -> TurnRecord:
        """What a reply was made from: its prompt inspector record and the model's raw
        text (each None when not recorded)."""
        rows = fetch(
            self._db.connection(),
            "SELECT m.id, r.prompt, r.raw FROM chat_message AS m "
            "LEFT JOIN chat_turn_record AS r ON r.message_id = m.id WHERE m.id = ?",
            (message_id,),
        )
        if not rows:
            raise NotFound(f"message {message_id} not found")
        _, prompt, raw = rows[0]
        return TurnRecord(prompt=json.loads(prompt) if prompt else None, raw=raw)

    def edit_message(
        self, message_id: str, content: str, *, expected_version: int | None = None
    ) -> Message:
        """Edit as a new branch: a new sibling with ``content``, the original kept.

        The sibling has the original's role, name, thought and state, and the user moves
        to it.
        """
        conversation_id = self.message(message_id).conversation_id
        with writing(self._db, conversation_id, expected_version) as (conn, head):
            original = owned_message(conn, conversation_id, message_id)
            edited = validated_message(
                id=new_id(),
                conversation_id=conversation_id,
                parent_id=original.parent_id,
                role=original.role,
                name=original.name,
                content=content,
                thought=original.thought,
                status="complete",
                sibling_index=next_sibling_index(conn, conversation_id, original.parent_id),
                depth=original.depth,
                created_at=time.time(),
                extra={**original.extra, "edited_from": original.id},
            )
            insert_messages(conn, [(edited, None)])
            set_active(conn, conversation_id, edited.parent_id, edited.id)
            self._chain.copy_row(conn, original.id, edited.id)
            point_to_child(conn, conversation_id, head, edited)
        return edited

    def rewrite_message(
        self,
        message_id: str,
        content: str,
        *,
        original: str | None = None,
        expected_version: int | None = None,
    ) -> Message:
        """Edit in place, as SillyTavern does: the message gets ``content`` and keeps its
        place, its children and its state; the text it had is kept as a version."""
        conversation_id = self.message(message_id).conversation_id
        with writing(self._db, conversation_id, expected_version) as (conn, _):
            old = owned_message(conn, conversation_id, message_id)
            replaced = MessageVersion(content=old.content, replaced_at=time.time())
            return self._set_text(conn, old, content, original, with_version(old.extra, replaced))

    def restore_version(
        self, message_id: str, index: int, *, expected_version: int | None = None
    ) -> Message:
        """Make version ``index`` (0 = oldest) the message's text again; the text it
        replaces becomes the newest version, so nothing is lost."""
        conversation_id = self.message(message_id).conversation_id
        with writing(self._db, conversation_id, expected_version) as (conn, _):
            old = owned_message(conn, conversation_id, message_id)
            versions = versions_of(old.extra)
            if not 0 <= index < len(versions):
                raise ChatError(
                    f"message {message_id} has {len(versions)} earlier version(s); "
                    f"there is no version {index}"
                )
            replaced = MessageVersion(content=old.content, replaced_at=time.time())
            extra = with_version(old.extra, replaced, drop=index)
            return self._set_text(conn, old, versions[index].content, None, extra)

    def _set_text(
        self,
        conn: apsw.Connection,
        old: Message,
        content: str,
        original: str | None,
        extra: dict[str, Any],
    ) -> Message:
        rows = fetch(
            conn,
            "UPDATE chat_message SET content = ?, original = ?, extra = ? "
            f"WHERE id = ? RETURNING {MESSAGE_COLUMNS}",
            (content, original, dumps_json(extra, f"extra of message {old.id}"), old.id),
        )
        return to_message(rows[0])

    def set_hidden(
        self, message_id: str, hidden: bool, *, expected_version: int | None = None
    ) -> Message:
        """Hide a message from the prompt (SillyTavern's ghost) or bring it back; it
        stays in the chat either way."""
        conversation_id = self.message(message_id).conversation_id
        with writing(self._db, conversation_id, expected_version) as (conn, _):
            old = owned_message(conn, conversation_id, message_id)
            extra = with_hidden(old.extra, hidden)
            rows = fetch(
                conn,
                f"UPDATE chat_message SET extra = ? WHERE id = ? RETURNING {MESSAGE_COLUMNS}",
                (dumps_json(extra, f"extra of message {old.id}"), old.id),
            )
            return to_message(rows[0])

    def set_pointer(
        self,
        conversation_id: str,
        message_id: str | None,
        *,
        expected_version: int | None = None,
    ) -> Conversation:
        """Time travel: put the user on ``message_id``; nothing is deleted.

        The path to it becomes the active one, so the messages below it that were active
        stay its continuation.
        """
        with writing(self._db, conversation_id, expected_version) as (conn, head):
            if message_id is not None:
                owned_message(conn, conversation_id, message_id)
            point_to(conn, conversation_id, message_id, head.ladder)
            return read_conversation(conn, conversation_id)

    def swipe(
        self, message_id: str, to_index: int, *, expected_version: int | None = None
    ) -> Conversation:
        """Show sibling ``to_index`` of ``message_id`` (any message, not only the last).

        The user moves to the end of the branch that sibling last continued with, so
        swiping back to a sibling brings its later messages back.
        """
        conversation_id = self.message(message_id).conversation_id
        with writing(self._db, conversation_id, expected_version) as (conn, head):
            message = owned_message(conn, conversation_id, message_id)
            rows = fetch(
                conn,
                "SELECT id FROM chat_message WHERE conversation_id = ? AND parent_id IS ? "
                "AND sibling_index = ?",
                (conversation_id, message.parent_id, to_index),
            )
            if not rows:
                count = len(children_of(conn, conversation_id, message.parent_id))
                raise ChatError(
                    f"message {message_id} has {count} sibling(s) (itself included); "
                    f"there is no sibling {to_index}"
                )
            point_to(conn, conversation_id, deepest_below(conn, rows[0][0]), head.ladder)
            return read_conversation(conn, conversation_id)

    def delete_message(
        self, message_id: str, *, expected_version: int | None = None
    ) -> Conversation:
        """Delete a message and everything below it.

        Later siblings move up one place; a pointer inside the deleted part moves to the
        message's parent; the parent continues with the neighbouring sibling.
        """
        conversation_id = self.message(message_id).conversation_id
        with writing(self._db, conversation_id, expected_version) as (conn, head):
            message = owned_message(conn, conversation_id, message_id)
            ids = [str(row[0]) for row in fetch(conn, _SUBTREE_SQL, (conversation_id, message_id))]
            id_list = json.dumps(ids)
            conn.execute(
                "DELETE FROM chat_state WHERE message_id IN (SELECT value FROM json_each(?))",
                (id_list,),
            )
            conn.execute(
                "DELETE FROM chat_message WHERE id IN (SELECT value FROM json_each(?))",
                (id_list,),
            )
            conn.execute(
                "UPDATE chat_message SET sibling_index = sibling_index - 1 "
                "WHERE conversation_id = ? AND parent_id IS ? AND sibling_index > ?",
                (conversation_id, message.parent_id, message.sibling_index),
            )
            siblings = children_of(conn, conversation_id, message.parent_id)
            active = active_of(conn, conversation_id, message.parent_id)
            if active is None or active == message_id:
                neighbour = siblings[max(0, message.sibling_index - 1)] if siblings else None
                set_active(
                    conn,
                    conversation_id,
                    message.parent_id,
                    None if neighbour is None else neighbour.id,
                )
            if head.pointer is not None and head.pointer in set(ids):
                # The parent is an ancestor of the old pointer: its ladder stays, cut short.
                ladder = [] if message.parent_id is None else head.ladder
                conn.execute(
                    "UPDATE chat_conversation SET pointer = ?, ladder = ? WHERE id = ?",
                    (
                        message.parent_id,
                        json.dumps(ladder[: (message.depth - 1) // LADDER_STEP + 1]),
                        conversation_id,
                    ),
                )
            conversation = read_conversation(conn, conversation_id)
        self._chain.forget(ids)
        return conversation

    def recover_interrupted(self) -> int:
        """At server start: replies left streaming by a killed server become partial.

        Their text is what was flushed before the server stopped. Returns how many.
        """
        with self._db.transaction() as conn:
            rows = fetch(
                conn,
                "UPDATE chat_message SET status = 'partial', error = ? "
                "WHERE status = 'streaming' RETURNING conversation_id",
                (INTERRUPTED_ERROR,),
            )
            conversation_ids = sorted({str(row[0]) for row in rows})
            if conversation_ids:
                conn.execute(
                    "UPDATE chat_conversation SET version = version + 1, updated_at = ? "
                    "WHERE id IN (SELECT value FROM json_each(?))",
                    (time.time(), json.dumps(conversation_ids)),
                )
            return len(rows)

    # reading messages (TreeReader)

    def message(self, message_id: str) -> Message:
        return self._reads.message(message_id)

    def path(self, message_id: str | None) -> list[Message]:
        """The messages from the root down to ``message_id`` (None: none)."""
        return self._reads.path(message_id)

    def path_tail(self, message_id: str | None, limit: int) -> list[Message]:
        """The last ``limit`` messages of :meth:`path` (root-most first)."""
        return self._reads.path_tail(message_id, limit)

    def path_json(self, message_id: str | None, *, limit: int | None = None) -> str:
        """:meth:`path` (or its last ``limit`` messages) as a JSON array of messages, each
        with its ``sibling_count``, written by SQLite itself."""
        return self._reads.path_json(message_id, limit=limit)

    def active_path(self, conversation_id: str) -> list[Message]:
        """What the chat shows: root → pointer."""
        return self._reads.active_path(conversation_id)

    def continuation(self, conversation_id: str) -> list[Message]:
        """The messages after the pointer along the active children."""
        return self._reads.continuation(conversation_id)

    def children(self, conversation_id: str, parent_id: str | None) -> list[Message]:
        """The children of ``parent_id`` (None: the roots) in sibling order."""
        return self._reads.children(conversation_id, parent_id)

    def siblings(self, message_id: str) -> list[Message]:
        """The message and its siblings, in order."""
        return self._reads.siblings(message_id)

    def sibling_counts(self, message_ids: Sequence[str]) -> dict[str, int]:
        """How many siblings each message has, itself included (unknown ids left out)."""
        return self._reads.sibling_counts(message_ids)

    def tree(self, conversation_id: str) -> list[TreeNode]:
        """Every message of the conversation, by depth then sibling order."""
        return self._reads.tree(conversation_id)

    # the state chain

    def state_at(self, message_id: str | None) -> ChatState:
        """The state after ``message_id`` (None: before the first message)."""
        try:
            return self._chain.state_at(message_id)
        except KeyError:
            raise NotFound(f"message {message_id} not found") from None

    def delta_of(self, message_id: str) -> list[dict[str, Any]]:
        """The RFC 6902 operations from the parent's state to this message's."""
        try:
            return self._chain.delta_of(message_id)
        except KeyError:
            raise NotFound(f"message {message_id} not found") from None
