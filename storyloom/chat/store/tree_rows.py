"""The chat tables' rows as models and back, and the small queries the turn tree shares.

Rows read back from these tables were validated when they were written, so they become
models without validating again (:func:`trusted`, :func:`to_messages`); what goes in is
validated (:func:`validated_message`) or built from validated parts.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Sequence
from typing import Any, TypeVar

import apsw
from pydantic import BaseModel, ValidationError

from storyloom.chat.store.chat_errors import ChatError
from storyloom.chat.store.message import Message
from storyloom.chat.store.state import ChatState
from storyloom.chat.store.state_chain import StateDocument, empty_document
from storyloom.core.errors import NotFound, problems_from_validation


def new_id() -> str:
    """A fresh conversation or message id: 16 hex characters."""
    return secrets.token_hex(8)


MESSAGE_FIELDS = (
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
MESSAGE_FIELDS_SET = set(MESSAGE_FIELDS)
MESSAGE_COLUMNS = ", ".join(MESSAGE_FIELDS)
M_COLUMNS = ", ".join(f"m.{name}" for name in MESSAGE_FIELDS)

ModelT = TypeVar("ModelT", bound=BaseModel)


def trusted(cls: type[ModelT], values: dict[str, Any], fields_set: set[str]) -> ModelT:
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


def to_messages(rows: Sequence[Sequence[Any]]) -> list[Message]:
    """Messages from chat_message rows (``MESSAGE_COLUMNS``), as :func:`trusted` does.

    Inlined, with the row unpacked into a dict literal, because a 10,000-message path
    spends most of its time here; the names follow ``MESSAGE_FIELDS``.
    """
    new = object.__new__
    set_attr = object.__setattr__
    fields_set = MESSAGE_FIELDS_SET
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


def to_message(row: Sequence[Any]) -> Message:
    return to_messages([row])[0]


def fetch(conn: apsw.Connection, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """All rows of a query, typed loosely: each caller knows its columns."""
    rows: list[tuple[Any, ...]] = conn.execute(sql, params).fetchall()
    return rows


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""``json.dumps`` with these options builds an encoder per call; an import calls it per
message."""


def dumps_json(value: Any, what: str) -> str:
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise ChatError(f"{what} is not JSON: {exc}") from exc


# A self-closing tag alone (``<StatusPlaceHolderImpl/>``): a placeholder a card's display
# regex draws a page in place of. A one-line preview draws nothing, so it shows nothing.
_PLACEHOLDER = re.compile(r"<[A-Za-z][\w:-]*\s*/>")


def preview(text: str, limit: int) -> str:
    """``text`` on one line without placeholder tags, cut to ``limit`` characters."""
    flat = " ".join(_PLACEHOLDER.sub(" ", text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


_INSERT_MESSAGE_SQL = (
    f"INSERT INTO chat_message ({MESSAGE_COLUMNS}, active_child) "
    f"VALUES ({', '.join('?' * (len(MESSAGE_FIELDS) + 1))})"
)


def owned_message(conn: apsw.Connection, conversation_id: str, message_id: str) -> Message:
    """The message, which must belong to ``conversation_id``."""
    rows = fetch(conn, f"SELECT {MESSAGE_COLUMNS} FROM chat_message WHERE id = ?", (message_id,))
    if not rows:
        raise NotFound(f"message {message_id} not found")
    message = to_message(rows[0])
    if message.conversation_id != conversation_id:
        raise ChatError(
            f"message {message_id} belongs to conversation {message.conversation_id}, "
            f"not {conversation_id}"
        )
    return message


def children_of(
    conn: apsw.Connection, conversation_id: str, parent_id: str | None
) -> list[Message]:
    """The children of ``parent_id`` (None: the roots) in sibling order."""
    rows = fetch(
        conn,
        f"SELECT {MESSAGE_COLUMNS} FROM chat_message "
        "WHERE conversation_id = ? AND parent_id IS ? ORDER BY sibling_index",
        (conversation_id, parent_id),
    )
    return to_messages(rows)


def next_sibling_index(conn: apsw.Connection, conversation_id: str, parent_id: str | None) -> int:
    """The ``sibling_index`` a new child of ``parent_id`` gets: after the others."""
    rows = fetch(
        conn,
        "SELECT COALESCE(MAX(sibling_index) + 1, 0) FROM chat_message "
        "WHERE conversation_id = ? AND parent_id IS ?",
        (conversation_id, parent_id),
    )
    return int(rows[0][0])


def insert_messages(conn: apsw.Connection, messages: Sequence[tuple[Message, str | None]]) -> None:
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
            "{}" if not m.extra else dumps_json(m.extra, f"extra of message {m.id}"),
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


def by_depth(message: Message) -> int:
    return message.depth


def validated_message(**fields: Any) -> Message:
    try:
        return Message.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(str(p) for p in problems_from_validation(exc))
        raise ChatError(f"message {fields.get('id')}: {problems}") from exc


def state_after(state: ChatState | None, parent_doc: StateDocument | None) -> StateDocument:
    """The state document of a new message: ``state``, or else its parent's."""
    if state is not None:
        return state.as_json()
    return empty_document() if parent_doc is None else parent_doc
