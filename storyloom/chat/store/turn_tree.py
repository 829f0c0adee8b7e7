"""Conversations as trees of messages in SQLite (Mnemosyne's turn tree, seed 001).

A swipe or an edit of any message adds a sibling, a branch is a new child of an old
message, and nothing is ever overwritten, so every version of the story stays reachable.
The conversation's ``pointer`` says where the user is; the path root → pointer is what
the chat shows and what the next prompt is built from. Each message also knows its
``active_child``, the child it continues with: moving the pointer back (time travel) keeps
the way forward, shown as the *continuation*, and swiping back to a sibling brings back
the branch that grew under it.

Every write that changes what a reader sees bumps the conversation's ``version`` inside
its own transaction, and refuses to write when the caller's ``expected_version`` is stale
(two tabs on one chat cannot overwrite each other). The version is bumped by the
transaction's first statement, so the write lock is taken before anything is read and the
check and the write cannot be separated by another writer.

Reading a 10,000-message path is one recursive query; rows read back from these tables
were validated when they were written, so they become models without validating again.
Moving the pointer walks up from the new message only to where its path meets the old
pointer's (found through the conversation's *ladder* of the pointer's ancestors at every
64th depth), so time travel in a long chat costs the distance moved, not the depth.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, TypeVar, get_args

import apsw
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from storyloom.chat.store.conversation import (
    BackgroundSnapshot,
    CharacterSnapshot,
    Conversation,
    ConversationSettings,
)
from storyloom.chat.store.message import Message, MessageStatus, Role
from storyloom.chat.store.state import ChatState
from storyloom.chat.store.state_chain import StateChain, StateDocument, StateRow, empty_document
from storyloom.core.errors import StoryloomError, problems_from_validation
from storyloom.store.database import Database

INTERRUPTED_ERROR = "interrupted: the server stopped while this reply was streaming"
SUMMARY_PREVIEW_CHARS = 120
TREE_PREVIEW_CHARS = 80


class ChatError(StoryloomError):
    """A chat operation that cannot be done as asked (the server answers 400)."""


class NotFound(ChatError):
    """No such conversation or message (404)."""


class VersionConflict(ChatError):
    """The conversation changed since the caller read it (409): reload and retry."""

    def __init__(self, conversation_id: str, expected: int, actual: int) -> None:
        self.conversation_id = conversation_id
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"conversation {conversation_id} was changed meanwhile: expected version "
            f"{expected}, it is at version {actual}; reload it and try again"
        )


def new_id() -> str:
    """A fresh conversation or message id: 16 hex characters."""
    return secrets.token_hex(8)


class ConversationSummary(BaseModel):
    """One line of the conversation list."""

    model_config = ConfigDict(frozen=True)

    id: str
    project_id: str
    title: str
    character_name: str = ""
    updated_at: float
    message_count: int = Field(description="Messages on the path root → pointer")
    last_message: str = Field(default="", description="Preview of the pointer message")


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


class TurnRecord(BaseModel):
    """What a reply was made from, kept apart from the message (see migration 6)."""

    prompt: dict[str, Any] | None = Field(default=None, description="Prompt inspector record")
    raw: str | None = Field(default=None, description="The model's text as it came")


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


# Rows to models.

_MESSAGE_FIELDS = (
    "id",
    "conversation_id",
    "parent_id",
    "role",
    "name",
    "content",
    "original",
    "thought",
    "status",
    "error",
    "sibling_index",
    "depth",
    "created_at",
    "extra",
)
_MESSAGE_FIELDS_SET = set(_MESSAGE_FIELDS)
_MESSAGE_COLUMNS = ", ".join(_MESSAGE_FIELDS)
_M_COLUMNS = ", ".join(f"m.{name}" for name in _MESSAGE_FIELDS)
_TREE_FIELDS_SET = set(TreeNode.model_fields)
_CONVERSATION_COLUMNS = (
    "id, project_id, title, created_at, updated_at, pointer, version, character, "
    "background, settings, metadata"
)

ModelT = TypeVar("ModelT", bound=BaseModel)


def _trusted(cls: type[ModelT], values: dict[str, Any], fields_set: set[str]) -> ModelT:
    """A model from values known to be valid, without validating them again.

    The same thing ``model_construct`` does, minus its per-field default handling, which
    makes it slower than validating: ``values`` must hold every field. ``fields_set`` is
    shared between models; pydantic copies it before changing it (``model_copy``), and
    frozen models never change it.
    """
    model = object.__new__(cls)
    object.__setattr__(model, "__dict__", values)
    object.__setattr__(model, "__pydantic_fields_set__", fields_set)
    object.__setattr__(model, "__pydantic_extra__", None)
    object.__setattr__(model, "__pydantic_private__", None)
    return model


def _messages(rows: Sequence[Sequence[Any]]) -> list[Message]:
    """Messages from chat_message rows (``_MESSAGE_COLUMNS``), as :func:`_trusted` does.

    Inlined, with the row unpacked into a dict literal, because a 10,000-message path
    spends most of its time here; the names follow ``_MESSAGE_FIELDS``.
    """
    new = object.__new__
    set_attr = object.__setattr__
    fields_set = _MESSAGE_FIELDS_SET
    loads = json.loads
    out: list[Message] = []
    append = out.append
    for (
        mid,
        conversation_id,
        parent_id,
        role,
        name,
        content,
        original,
        thought,
        status,
        error,
        sibling_index,
        depth,
        created_at,
        extra,
    ) in rows:
        message = new(Message)
        set_attr(
            message,
            "__dict__",
            {
                "id": mid,
                "conversation_id": conversation_id,
                "parent_id": parent_id,
                "role": role,
                "name": name,
                "content": content,
                "original": original,
                "thought": thought,
                "status": status,
                "error": error,
                "sibling_index": sibling_index,
                "depth": depth,
                "created_at": created_at,
                "extra": {} if extra == "{}" else loads(extra),
            },
        )
        set_attr(message, "__pydantic_fields_set__", fields_set)
        set_attr(message, "__pydantic_extra__", None)
        set_attr(message, "__pydantic_private__", None)
        append(message)
    return out


def _message(row: Sequence[Any]) -> Message:
    return _messages([row])[0]


def _fetch(conn: apsw.Connection, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """All rows of a query, typed loosely: each caller knows its columns."""
    rows: list[tuple[Any, ...]] = conn.execute(sql, params).fetchall()
    return rows


def _dumps(value: Any, what: str) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise ChatError(f"{what} is not JSON: {exc}") from exc


def _preview(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


# The path from a message up to its root, by parent links: message first, root last.
_UP_SQL = f"""
WITH RECURSIVE up({_MESSAGE_COLUMNS}) AS (
    SELECT {_MESSAGE_COLUMNS} FROM chat_message WHERE id = ?
    UNION ALL
    SELECT {_M_COLUMNS} FROM up CROSS JOIN chat_message AS m ON m.id = up.parent_id
)
SELECT {_MESSAGE_COLUMNS} FROM up
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
WITH RECURSIVE up({_MESSAGE_COLUMNS}, n) AS (
    SELECT {_MESSAGE_COLUMNS}, 1 FROM chat_message WHERE id = ?1
    UNION ALL
    SELECT {_M_COLUMNS}, up.n + 1 FROM up CROSS JOIN chat_message AS m ON m.id = up.parent_id
    WHERE up.n < ?2
)
SELECT {_MESSAGE_COLUMNS} FROM up
"""

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

# From a message down along active_child links (a link to a non-child is ignored).
_DOWN_SQL = f"""
WITH RECURSIVE down({_MESSAGE_COLUMNS}, active_child) AS (
    SELECT {_MESSAGE_COLUMNS}, active_child FROM chat_message WHERE id = ?
    UNION ALL
    SELECT {_M_COLUMNS}, m.active_child
    FROM down CROSS JOIN chat_message AS m ON m.id = down.active_child AND m.parent_id = down.id
)
SELECT {_MESSAGE_COLUMNS} FROM down
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

_SUBTREE_SQL = """
WITH RECURSIVE sub(id) AS (
    SELECT id FROM chat_message WHERE id = ?2
    UNION ALL
    SELECT m.id FROM sub CROSS JOIN chat_message AS m
        ON m.conversation_id = ?1 AND m.parent_id = sub.id
)
SELECT id FROM sub
"""

_INSERT_MESSAGE_SQL = (
    f"INSERT INTO chat_message ({_MESSAGE_COLUMNS}, active_child) "
    f"VALUES ({', '.join('?' * (len(_MESSAGE_FIELDS) + 1))})"
)


@dataclass(frozen=True, slots=True)
class _Head:
    """The conversation as a write found it, after bumping its version."""

    version: int
    pointer: str | None
    keyframe_every: int
    ladder: list[str]


class TurnTree:
    """Conversations, their message trees, pointers and the state chain, in SQLite."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._chain = StateChain(db)

    @property
    def state_chain(self) -> StateChain:
        return self._chain

    # conversations

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
        cid = conversation_id or new_id()
        now = time.time() if created_at is None else created_at
        character = character or CharacterSnapshot()
        settings = settings or ConversationSettings()
        params = (
            cid,
            project_id,
            title,
            now,
            now,
            _dumps(character.model_dump(mode="json"), "character"),
            None
            if background is None
            else _dumps(background.model_dump(mode="json"), "background"),
            _dumps(settings.model_dump(mode="json"), "settings"),
            _dumps(metadata or {}, "metadata"),
        )
        with self._db.transaction() as conn:
            try:
                conn.execute(
                    "INSERT INTO chat_conversation (id, project_id, title, created_at, "
                    "updated_at, pointer, version, character, background, settings, metadata) "
                    "VALUES (?, ?, ?, ?, ?, NULL, 0, ?, ?, ?, ?)",
                    params,
                )
            except apsw.ConstraintError as exc:
                raise ChatError(f"conversation id {cid} is already taken") from exc
            return self._conversation(conn, cid)

    def conversation(self, conversation_id: str) -> Conversation:
        return self._conversation(self._db.connection(), conversation_id)

    def _conversation(self, conn: apsw.Connection, conversation_id: str) -> Conversation:
        rows = _fetch(
            conn,
            f"SELECT {_CONVERSATION_COLUMNS} FROM chat_conversation WHERE id = ?",
            (conversation_id,),
        )
        if not rows:
            raise NotFound(f"conversation {conversation_id} not found")
        (cid, project, title, created, updated, pointer, version, char, bg, sets, meta) = rows[0]
        return Conversation.model_validate(
            {
                "id": cid,
                "project_id": project,
                "title": title,
                "created_at": created,
                "updated_at": updated,
                "pointer": pointer,
                "version": version,
                "character": json.loads(char),
                "background": None if bg is None else json.loads(bg),
                "settings": json.loads(sets),
                "metadata": json.loads(meta),
            }
        )

    def conversations(self, project_id: str | None = None) -> list[ConversationSummary]:
        """Newest first; ``message_count`` counts the messages on the path to the pointer."""
        rows = _fetch(
            self._db.connection(),
            "SELECT c.id, c.project_id, c.title, "
            "COALESCE(json_extract(c.character, '$.card.name'), ''), c.updated_at, "
            "COALESCE(p.depth + 1, 0), COALESCE(substr(p.content, 1, 400), '') "
            "FROM chat_conversation AS c LEFT JOIN chat_message AS p ON p.id = c.pointer "
            "WHERE ?1 IS NULL OR c.project_id = ?1 "
            "ORDER BY c.updated_at DESC, c.id",
            (project_id,),
        )
        return [
            ConversationSummary(
                id=cid,
                project_id=project,
                title=title,
                character_name=str(name),
                updated_at=updated,
                message_count=count,
                last_message=_preview(text, SUMMARY_PREVIEW_CHARS),
            )
            for cid, project, title, name, updated, count, text in rows
        ]

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
        changes: dict[str, Any] = {}
        if title is not None:
            changes["title"] = title
        if settings is not None:
            changes["settings"] = _dumps(settings.model_dump(mode="json"), "settings")
        if character is not None:
            changes["character"] = _dumps(character.model_dump(mode="json"), "character")
        if background is not None:
            changes["background"] = _dumps(background.model_dump(mode="json"), "background")
        if metadata is not None:
            changes["metadata"] = _dumps(metadata, "metadata")
        with self._writing(conversation_id, expected_version) as (conn, _head):
            if changes:
                assignments = ", ".join(f"{column} = ?" for column in changes)
                conn.execute(
                    f"UPDATE chat_conversation SET {assignments} WHERE id = ?",
                    (*changes.values(), conversation_id),
                )
            return self._conversation(conn, conversation_id)

    def delete_conversation(self, conversation_id: str) -> None:
        with self._db.transaction() as conn:
            conn.execute(
                "DELETE FROM chat_state WHERE message_id IN "
                "(SELECT id FROM chat_message WHERE conversation_id = ?)",
                (conversation_id,),
            )
            conn.execute("DELETE FROM chat_message WHERE conversation_id = ?", (conversation_id,))
            conn.execute("DELETE FROM chat_conversation WHERE id = ?", (conversation_id,))
            if conn.changes() == 0:
                raise NotFound(f"conversation {conversation_id} not found")
        self._chain.clear()

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
        with self._writing(conversation_id, expected_version) as (conn, head):
            depth = 0
            if parent_id is not None:
                depth = self._owned(conn, conversation_id, parent_id).depth + 1
            message = _validated_message(
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
                sibling_index=self._next_sibling_index(conn, conversation_id, parent_id),
                depth=depth,
                created_at=time.time() if created_at is None else created_at,
                extra=extra or {},
            )
            self._insert(conn, [(message, None)])
            if move_pointer:
                self._set_active(conn, conversation_id, parent_id, message.id)
                self._point_to_child(conn, conversation_id, head, message)
            elif not self._above_pointer(conn, head.pointer, parent_id, depth - 1):
                self._set_active(conn, conversation_id, parent_id, message.id)
            parent_doc = None if parent_id is None else self._chain.document_at(parent_id)
            doc = _state_doc(state, parent_doc)
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
        if not rows:
            return []
        now = time.time()
        with self._writing(conversation_id, expected_version) as (conn, head):
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
                    depth = self._owned(conn, conversation_id, pid).depth + 1
                    parent_doc = self._chain.document_at(pid)
                    depths[pid] = depth - 1
                    docs[pid] = parent_doc
                if pid not in next_index:
                    next_index[pid] = (
                        0 if pid in added else self._next_sibling_index(conn, conversation_id, pid)
                    )
                index = next_index[pid]
                next_index[pid] = index + 1
                message = _trusted(
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
                    _MESSAGE_FIELDS_SET,
                )
                doc = _state_doc(row.state, parent_doc)
                state_rows.append(
                    self._chain.row_for(
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
            self._insert(conn, [(m, last_child.get(m.id)) for m in messages])
            for pid, child in last_child.items():
                if pid is None or pid not in added:
                    self._set_active(conn, conversation_id, pid, child)
            # Links above the meeting point may have changed: walk the whole path.
            self._point_to(conn, conversation_id, messages[-1].id, [])
            self._chain.write_rows(conn, state_rows)
        self._chain.remember(messages[-1].id, docs[messages[-1].id])
        return messages

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
            changes["extra"] = _dumps(extra, f"extra of message {message_id}")
        # Always an UPDATE (a no-op one without changes): the write lock comes first.
        assignments = ", ".join(f"{column} = ?" for column in changes) or "status = status"
        with self._db.transaction() as conn:
            rows = _fetch(
                conn,
                f"UPDATE chat_message SET {assignments} WHERE id = ? RETURNING {_MESSAGE_COLUMNS}",
                (*changes.values(), message_id),
            )
            if not rows:
                raise NotFound(f"message {message_id} not found")
            message = _message(rows[0])
            every: int | None = None
            if bump_version:
                every = self._bump(conn, message.conversation_id, None).keyframe_every
            if raw is not None or prompt is not None:
                conn.execute(
                    "INSERT INTO chat_turn_record (message_id, prompt, raw) VALUES (?, ?, ?) "
                    "ON CONFLICT (message_id) DO UPDATE SET "
                    "prompt = coalesce(excluded.prompt, prompt), raw = coalesce(excluded.raw, raw)",
                    (
                        message.id,
                        None if prompt is None else _dumps(prompt, f"prompt of {message.id}"),
                        raw,
                    ),
                )
            if state is not None:
                if every is None:
                    every = self._keyframe_every(conn, message.conversation_id)
                self._chain.replace(conn, message, state, keyframe_every=every)
        if state is not None:
            self._chain.remember(message.id, state.as_json())
        return message

    def turn_record(self, message_id: str) -> TurnRecord:
        """What a reply was made from: its prompt inspector record and the model's raw
        text (each None when not recorded)."""
        rows = _fetch(
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
        """Edit any message: a new sibling with ``content``, the original kept.

        The sibling has the original's role, name, thought and state, and the user moves
        to it.
        """
        conversation_id = self.message(message_id).conversation_id
        with self._writing(conversation_id, expected_version) as (conn, head):
            original = self._owned(conn, conversation_id, message_id)
            edited = _validated_message(
                id=new_id(),
                conversation_id=conversation_id,
                parent_id=original.parent_id,
                role=original.role,
                name=original.name,
                content=content,
                thought=original.thought,
                status="complete",
                sibling_index=self._next_sibling_index(conn, conversation_id, original.parent_id),
                depth=original.depth,
                created_at=time.time(),
                extra={**original.extra, "edited_from": original.id},
            )
            self._insert(conn, [(edited, None)])
            self._set_active(conn, conversation_id, edited.parent_id, edited.id)
            self._chain.copy_row(conn, original.id, edited.id)
            self._point_to_child(conn, conversation_id, head, edited)
        return edited

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
        with self._writing(conversation_id, expected_version) as (conn, head):
            if message_id is not None:
                self._owned(conn, conversation_id, message_id)
            self._point_to(conn, conversation_id, message_id, head.ladder)
            return self._conversation(conn, conversation_id)

    def swipe(
        self, message_id: str, to_index: int, *, expected_version: int | None = None
    ) -> Conversation:
        """Show sibling ``to_index`` of ``message_id`` (any message, not only the last).

        The user moves to the end of the branch that sibling last continued with, so
        swiping back to a sibling brings its later messages back.
        """
        conversation_id = self.message(message_id).conversation_id
        with self._writing(conversation_id, expected_version) as (conn, head):
            message = self._owned(conn, conversation_id, message_id)
            rows = _fetch(
                conn,
                "SELECT id FROM chat_message WHERE conversation_id = ? AND parent_id IS ? "
                "AND sibling_index = ?",
                (conversation_id, message.parent_id, to_index),
            )
            if not rows:
                count = len(self._children(conn, conversation_id, message.parent_id))
                raise ChatError(
                    f"message {message_id} has {count} sibling(s) (itself included); "
                    f"there is no sibling {to_index}"
                )
            deepest = _fetch(conn, _DEEPEST_SQL, (rows[0][0],))[0][0]
            self._point_to(conn, conversation_id, str(deepest), head.ladder)
            return self._conversation(conn, conversation_id)

    def delete_message(
        self, message_id: str, *, expected_version: int | None = None
    ) -> Conversation:
        """Delete a message and everything below it.

        Later siblings move up one place; a pointer inside the deleted part moves to the
        message's parent; the parent continues with the neighbouring sibling.
        """
        conversation_id = self.message(message_id).conversation_id
        with self._writing(conversation_id, expected_version) as (conn, head):
            message = self._owned(conn, conversation_id, message_id)
            ids = [str(row[0]) for row in _fetch(conn, _SUBTREE_SQL, (conversation_id, message_id))]
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
            siblings = self._children(conn, conversation_id, message.parent_id)
            active = self._active_of(conn, conversation_id, message.parent_id)
            if active is None or active == message_id:
                neighbour = siblings[max(0, message.sibling_index - 1)] if siblings else None
                self._set_active(
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
            conversation = self._conversation(conn, conversation_id)
        self._chain.forget(ids)
        return conversation

    def recover_interrupted(self) -> int:
        """At server start: replies left streaming by a killed server become partial.

        Their text is what was flushed before the server stopped. Returns how many.
        """
        with self._db.transaction() as conn:
            rows = _fetch(
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

    # reading messages

    def message(self, message_id: str) -> Message:
        rows = _fetch(
            self._db.connection(),
            f"SELECT {_MESSAGE_COLUMNS} FROM chat_message WHERE id = ?",
            (message_id,),
        )
        if not rows:
            raise NotFound(f"message {message_id} not found")
        return _message(rows[0])

    def path(self, message_id: str | None) -> list[Message]:
        """The messages from the root down to ``message_id`` (None: none)."""
        if message_id is None:
            return []
        rows = _fetch(self._db.connection(), _UP_SQL, (message_id,))
        if not rows:
            raise NotFound(f"message {message_id} not found")
        # The walk yields the message first and the root last.
        rows.reverse()
        messages = _messages(rows)
        if messages[0].parent_id is not None or messages[-1].id != message_id:
            messages.sort(key=_depth)
        return messages

    def path_tail(self, message_id: str | None, limit: int) -> list[Message]:
        """The last ``limit`` messages of :meth:`path` (root-most first): a long chat's
        prompt needs only as much history as its context window holds."""
        if message_id is None or limit <= 0:
            return []
        rows = _fetch(self._db.connection(), _UP_TAIL_SQL, (message_id, limit))
        if not rows:
            raise NotFound(f"message {message_id} not found")
        rows.reverse()
        return _messages(rows)

    def path_json(self, message_id: str | None, *, limit: int | None = None) -> str:
        """:meth:`path` (or its last ``limit`` messages) as a JSON array of messages, each
        with its ``sibling_count``, written by SQLite itself.

        Opening a long chat is this one query: turning 10,000 rows into models and the
        models into JSON costs several times more than SQLite writing the JSON in C.
        """
        if message_id is None:
            return "[]"
        steps = limit if limit is not None and limit > 0 else -1
        rows = _fetch(self._db.connection(), _PATH_JSON_SQL, (message_id, steps))
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
        rows = _fetch(
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
        messages = _messages(_fetch(conn, _DOWN_SQL, (start,)))
        if messages[0].id != start:
            messages.sort(key=_depth)
        return messages[1:] if pointer is not None else messages

    def children(self, conversation_id: str, parent_id: str | None) -> list[Message]:
        """The children of ``parent_id`` (None: the roots) in sibling order."""
        return self._children(self._db.connection(), conversation_id, parent_id)

    def siblings(self, message_id: str) -> list[Message]:
        """The message and its siblings, in order."""
        message = self.message(message_id)
        return self.children(message.conversation_id, message.parent_id)

    def sibling_counts(self, message_ids: Sequence[str]) -> dict[str, int]:
        """How many siblings each message has, itself included (unknown ids left out)."""
        if not message_ids:
            return {}
        rows = _fetch(
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
        rows = _fetch(
            conn,
            "SELECT id, parent_id, role, name, substr(content, 1, 200), status, "
            "sibling_index, depth FROM chat_message WHERE conversation_id = ? "
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
            _trusted(
                TreeNode,
                {
                    "id": mid,
                    "parent_id": parent,
                    "role": role,
                    "name": name,
                    "preview": _preview(text, TREE_PREVIEW_CHARS),
                    "status": status,
                    "sibling_index": index,
                    "depth": depth,
                    "on_path": mid in on_path,
                },
                _TREE_FIELDS_SET,
            )
            for mid, parent, role, name, text, status, index, depth in rows
        ]

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

    # internals

    @contextmanager
    def _writing(
        self, conversation_id: str, expected_version: int | None
    ) -> Iterator[tuple[apsw.Connection, _Head]]:
        """A transaction whose first statement bumps the version (and checks it)."""
        with self._db.transaction() as conn:
            yield conn, self._bump(conn, conversation_id, expected_version)

    def _bump(
        self, conn: apsw.Connection, conversation_id: str, expected_version: int | None
    ) -> _Head:
        rows = _fetch(
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
        return _Head(int(version), pointer, _interval(every), json.loads(ladder))

    def _keyframe_every(self, conn: apsw.Connection, conversation_id: str) -> int:
        rows = _fetch(
            conn,
            "SELECT json_extract(settings, '$.keyframe_every') FROM chat_conversation WHERE id = ?",
            (conversation_id,),
        )
        return _interval(rows[0][0] if rows else None)

    def _pointer(self, conversation_id: str, conn: apsw.Connection | None = None) -> str | None:
        conn = conn or self._db.connection()
        rows = _fetch(
            conn, "SELECT pointer FROM chat_conversation WHERE id = ?", (conversation_id,)
        )
        if not rows:
            raise NotFound(f"conversation {conversation_id} not found")
        pointer: str | None = rows[0][0]
        return pointer

    def _owned(self, conn: apsw.Connection, conversation_id: str, message_id: str) -> Message:
        rows = _fetch(
            conn, f"SELECT {_MESSAGE_COLUMNS} FROM chat_message WHERE id = ?", (message_id,)
        )
        if not rows:
            raise NotFound(f"message {message_id} not found")
        message = _message(rows[0])
        if message.conversation_id != conversation_id:
            raise ChatError(
                f"message {message_id} belongs to conversation {message.conversation_id}, "
                f"not {conversation_id}"
            )
        return message

    def _children(
        self, conn: apsw.Connection, conversation_id: str, parent_id: str | None
    ) -> list[Message]:
        rows = _fetch(
            conn,
            f"SELECT {_MESSAGE_COLUMNS} FROM chat_message "
            "WHERE conversation_id = ? AND parent_id IS ? ORDER BY sibling_index",
            (conversation_id, parent_id),
        )
        return _messages(rows)

    def _next_sibling_index(
        self, conn: apsw.Connection, conversation_id: str, parent_id: str | None
    ) -> int:
        rows = _fetch(
            conn,
            "SELECT COALESCE(MAX(sibling_index) + 1, 0) FROM chat_message "
            "WHERE conversation_id = ? AND parent_id IS ?",
            (conversation_id, parent_id),
        )
        return int(rows[0][0])

    def _active_of(
        self, conn: apsw.Connection, conversation_id: str, parent_id: str | None
    ) -> str | None:
        if parent_id is None:
            sql = "SELECT active_root FROM chat_conversation WHERE id = ?"
            rows = _fetch(conn, sql, (conversation_id,))
        else:
            sql = "SELECT active_child FROM chat_message WHERE id = ?"
            rows = _fetch(conn, sql, (parent_id,))
        active: str | None = rows[0][0] if rows else None
        return active

    def _set_active(
        self,
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
            conn.execute(
                "UPDATE chat_message SET active_child = ? WHERE id = ?", (child_id, parent_id)
            )

    def _point_to(
        self,
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
        rows = _fetch(conn, _UP_LINKS_SQL, (message_id, json.dumps(ladder), LADDER_STEP))
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
                "UPDATE chat_conversation SET pointer = ?, active_root = ?, ladder = ? "
                "WHERE id = ?",
                (message_id, top_id, json.dumps(new_ladder), conversation_id),
            )
        else:
            conn.execute(
                "UPDATE chat_conversation SET pointer = ?, ladder = ? WHERE id = ?",
                (message_id, json.dumps(new_ladder), conversation_id),
            )

    def _above_pointer(
        self,
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
        rows = _fetch(conn, _ANCESTOR_AT_SQL, (pointer, depth))
        return bool(rows) and rows[0][0] == message_id

    def _point_to_child(
        self, conn: apsw.Connection, conversation_id: str, head: _Head, message: Message
    ) -> None:
        """Move the pointer to a message just added as its parent's active child."""
        if message.parent_id is None or message.parent_id != head.pointer:
            self._point_to(conn, conversation_id, message.id, head.ladder)
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

    def _insert(
        self, conn: apsw.Connection, messages: Sequence[tuple[Message, str | None]]
    ) -> None:
        """Insert messages, each with its active child (None: none yet)."""
        params = [
            (
                m.id,
                m.conversation_id,
                m.parent_id,
                m.role,
                m.name,
                m.content,
                m.original,
                m.thought,
                m.status,
                m.error,
                m.sibling_index,
                m.depth,
                m.created_at,
                "{}" if not m.extra else _dumps(m.extra, f"extra of message {m.id}"),
                active,
            )
            for m, active in messages
        ]
        try:
            conn.executemany(_INSERT_MESSAGE_SQL, params)
        except apsw.ConstraintError as exc:
            ids = [m.id for m, _ in messages]
            duplicate = (
                next((mid for mid in ids if ids.count(mid) > 1), None) if len(ids) < 50 else None
            )
            which = duplicate or (ids[0] if len(ids) == 1 else "one of the new messages")
            raise ChatError(f"message id {which} is already taken") from exc


def _depth(message: Message) -> int:
    return message.depth


def _interval(value: Any) -> int:
    try:
        every = int(value)
    except (TypeError, ValueError):
        return ConversationSettings().keyframe_every
    return max(1, every)


def _state_doc(state: ChatState | None, parent_doc: StateDocument | None) -> StateDocument:
    if state is not None:
        return state.as_json()
    return empty_document() if parent_doc is None else parent_doc


def _validated_message(**fields: Any) -> Message:
    try:
        return Message.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(str(p) for p in problems_from_validation(exc))
        raise ChatError(f"message {fields.get('id')}: {problems}") from exc
