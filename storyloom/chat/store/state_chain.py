"""The state chain: the chat state after every message, as keyframes and deltas.

Storing the whole :class:`ChatState` with every message would make a long chat carry
thousands of copies of the same variables; storing only deltas would make going back to
an old turn replay every delta from the root. So a message at a depth that is a multiple
of ``keyframe_every`` (and every root) stores its whole state, a *keyframe*, and every
other message stores the RFC 6902 patch from its parent's state, a *delta*. The state at
any message is then its nearest keyframe ancestor plus at most ``keyframe_every - 1``
deltas, whatever the size of the tree, and a branch or a swipe never shares state with
its siblings because each delta is relative to its own parent.

Reconstructed states are kept in a small LRU cache by message id: the state after a
message changes only through :meth:`StateChain.replace`, which updates the cache. Another
process rewriting a message's state is not seen by this cache; one server owns a data
directory.
"""

from __future__ import annotations

import copy
import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import apsw
import jsonpatch

from storyloom.chat.store.message import Message
from storyloom.chat.store.state import ChatState
from storyloom.store.database import Database

StateDocument = dict[str, Any]
"""A ChatState as the JSON document the chain diffs and patches (``ChatState.as_json``)."""

StateKind = Literal["keyframe", "delta"]

# Walks up from a message to its nearest keyframe ancestor (included). A message without a
# state row counts as an empty delta, so a chain with gaps still reaches a keyframe or the
# root. Rows come out message first, keyframe last.
_CHAIN_SQL = """
WITH RECURSIVE chain(id, parent_id, kind, data, n) AS (
    SELECT m.id, m.parent_id, s.kind, s.data, 0
    FROM chat_message AS m LEFT JOIN chat_state AS s ON s.message_id = m.id
    WHERE m.id = ?
    UNION ALL
    SELECT m.id, m.parent_id, s.kind, s.data, chain.n + 1
    FROM chain
    CROSS JOIN chat_message AS m ON m.id = chain.parent_id
    LEFT JOIN chat_state AS s ON s.message_id = m.id
    WHERE chain.kind IS NOT 'keyframe'
)
SELECT id, kind, data FROM chain ORDER BY n
"""


def _fetch(conn: apsw.Connection, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """All rows of a query, typed loosely: each caller knows its columns."""
    rows: list[tuple[Any, ...]] = conn.execute(sql, params).fetchall()
    return rows


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""One encoder for every row (``json.dumps`` with options builds one per call)."""


def _dumps(value: Any) -> str:
    return _ENCODER.encode(value)


def empty_document() -> StateDocument:
    """The state before the first message."""
    return ChatState().as_json()


def state_delta(before: StateDocument, after: StateDocument) -> list[dict[str, Any]]:
    """The RFC 6902 operations that turn ``before`` into ``after``.

    Objects are compared key by key; any other changed value (a list included) is
    replaced whole. ``jsonpatch.make_patch`` finds smaller list patches, but it serialises
    every value it compares and costs milliseconds per turn on a state of a few hundred
    variables, which an import of a long chat pays thousands of times.
    """
    ops: list[dict[str, Any]] = []
    _diff(before, after, "", ops)
    return ops


def _pointer_part(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _same(a: Any, b: Any) -> bool:
    """JSON equality: unlike ``==``, ``true`` is not ``1`` and ``1`` is not ``1.0``."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _diff(before: Any, after: Any, path: str, ops: list[dict[str, Any]]) -> None:
    if before == after and _same(before, after):
        return
    if not (isinstance(before, dict) and isinstance(after, dict)):
        ops.append({"op": "replace", "path": path, "value": copy.deepcopy(after)})
        return
    for key in before:
        if key not in after:
            ops.append({"op": "remove", "path": f"{path}/{_pointer_part(key)}"})
    for key, value in after.items():
        where = f"{path}/{_pointer_part(key)}"
        if key not in before:
            ops.append({"op": "add", "path": where, "value": copy.deepcopy(value)})
        else:
            _diff(before[key], value, where, ops)


@dataclass(frozen=True, slots=True)
class StateRow:
    """One chat_state row as stored."""

    message_id: str
    conversation_id: str
    kind: StateKind
    data: str

    def as_params(self) -> tuple[str, str, str, str]:
        return (self.message_id, self.conversation_id, self.kind, self.data)


_NO_CHANGE = _dumps([])
"""The delta of a message that changed no state."""

_INSERT_SQL = (
    "INSERT OR REPLACE INTO chat_state (message_id, conversation_id, kind, data) "
    "VALUES (?, ?, ?, ?)"
)


class StateChain:
    """Writes and reconstructs the state after each message of the turn tree."""

    def __init__(self, db: Database, *, keyframe_every: int = 32, cache_size: int = 256) -> None:
        if keyframe_every < 1:
            raise ValueError("keyframe_every must be at least 1")
        self._db = db
        self.keyframe_every = keyframe_every
        self._cache_size = max(0, cache_size)
        self._cache: OrderedDict[str, StateDocument] = OrderedDict()
        self._lock = threading.Lock()
        # Counts changes to the cache: a state rebuilt while a write changed it is not
        # cached, as it may have been read before the write committed.
        self._changes = 0

    # writing

    def row_for(
        self,
        message_id: str,
        conversation_id: str,
        depth: int,
        parent_doc: StateDocument | None,
        doc: StateDocument,
        *,
        keyframe_every: int | None = None,
    ) -> StateRow:
        """The row storing ``doc`` after a message (``parent_doc`` None: a root)."""
        every = keyframe_every or self.keyframe_every
        if parent_doc is None or depth % every == 0:
            return StateRow(message_id, conversation_id, "keyframe", _dumps(doc))
        # A message that changed nothing carries its parent's very document: no diff to
        # walk (an import of a long chat is mostly such messages).
        data = _NO_CHANGE if doc is parent_doc else _dumps(state_delta(parent_doc, doc))
        return StateRow(message_id, conversation_id, "delta", data)

    def write(
        self,
        conn: apsw.Connection,
        message: Message,
        parent_state: ChatState | None,
        state: ChatState,
        *,
        keyframe_every: int | None = None,
    ) -> None:
        """Store the state after ``message``; ``parent_state`` None means a root."""
        parent_doc = None if parent_state is None else parent_state.as_json()
        row = self.row_for(
            message.id,
            message.conversation_id,
            message.depth,
            parent_doc,
            state.as_json(),
            keyframe_every=keyframe_every,
        )
        conn.execute(_INSERT_SQL, row.as_params())

    def write_rows(self, conn: apsw.Connection, rows: Iterable[StateRow]) -> None:
        """Store many rows at once (bulk imports)."""
        conn.executemany(_INSERT_SQL, [row.as_params() for row in rows])

    def copy_row(self, conn: apsw.Connection, source_id: str, target_id: str) -> None:
        """Give ``target_id`` the same stored row as ``source_id`` (a sibling made by an
        edit: same parent, same depth, so the same delta means the same state)."""
        conn.execute(
            "INSERT OR REPLACE INTO chat_state (message_id, conversation_id, kind, data) "
            "SELECT ?, conversation_id, kind, data FROM chat_state WHERE message_id = ?",
            (target_id, source_id),
        )
        with self._lock:
            doc = self._cache.get(source_id)
        if doc is not None:
            self.remember(target_id, doc)

    def replace(
        self,
        conn: apsw.Connection,
        message: Message,
        state: ChatState,
        *,
        keyframe_every: int | None = None,
    ) -> None:
        """Change the state after ``message`` without changing its children's states.

        The children that store deltas are rewritten against the new state (their own
        descendants are relative to them and stay as they are).
        """
        doc = state.as_json()
        children = _fetch(
            conn,
            "SELECT id, depth FROM chat_message WHERE conversation_id = ? AND parent_id = ?",
            (message.conversation_id, message.id),
        )
        kept = [(str(cid), int(depth), self.document_at(str(cid))) for cid, depth in children]
        parent_doc = None if message.parent_id is None else self.document_at(message.parent_id)
        cid = message.conversation_id
        row = self.row_for(
            message.id, cid, message.depth, parent_doc, doc, keyframe_every=keyframe_every
        )
        conn.execute(_INSERT_SQL, row.as_params())
        self.forget([message.id])
        for child_id, depth, child_doc in kept:
            child_row = self.row_for(
                child_id, cid, depth, doc, child_doc, keyframe_every=keyframe_every
            )
            conn.execute(_INSERT_SQL, child_row.as_params())

    def pin(self, conn: apsw.Connection, message: Message) -> None:
        """Store the state after ``message`` whole (a keyframe), whatever its depth: its
        state then no longer depends on any row above it. The children's deltas are
        relative to the same document and stay right."""
        doc = self.document_at(message.id)
        row = StateRow(message.id, message.conversation_id, "keyframe", _dumps(doc))
        conn.execute(_INSERT_SQL, row.as_params())

    def drop(self, conn: apsw.Connection, message_ids: Sequence[str]) -> None:
        """Delete the stored states of ``message_ids`` (they read as empty afterwards);
        whoever calls this pins the messages below them first (:meth:`pin`)."""
        conn.executemany(
            "DELETE FROM chat_state WHERE message_id = ?", [(mid,) for mid in message_ids]
        )
        self.clear()

    # reading

    def state_at(self, message_id: str | None) -> ChatState:
        """The state after ``message_id`` (None: before the first message).

        Raises KeyError when there is no such message.
        """
        if message_id is None:
            return ChatState()
        return ChatState.from_json(copy.deepcopy(self.document_at(message_id)))

    def document_at(self, message_id: str) -> StateDocument:
        """The state after ``message_id`` as a JSON document; do not mutate it (cached)."""
        with self._lock:
            cached = self._cache.get(message_id)
            if cached is not None:
                self._cache.move_to_end(message_id)
                return cached
            changes = self._changes
        rows = _fetch(self._db.connection(), _CHAIN_SQL, (message_id,))
        if not rows:
            raise KeyError(message_id)
        doc = self._rebuild(rows)
        with self._lock:
            if self._changes == changes:
                self._put(message_id, doc)
        return doc

    def _rebuild(self, rows: Sequence[tuple[Any, ...]]) -> StateDocument:
        """Apply the deltas of ``rows`` (message first) onto their base."""
        base: StateDocument | None = None
        deltas: list[list[dict[str, Any]]] = []
        for message_id, kind, data in rows:
            with self._lock:
                cached = self._cache.get(str(message_id))
            if cached is not None:
                base = copy.deepcopy(cached)
                break
            if kind == "keyframe":
                base = json.loads(data)
                break
            if kind == "delta":
                ops = json.loads(data)
                if ops:
                    deltas.append(ops)
        if base is None:
            base = empty_document()
        doc: StateDocument = base
        for ops in reversed(deltas):
            doc = jsonpatch.apply_patch(doc, ops, in_place=True)
        return doc

    def delta_of(self, message_id: str) -> list[dict[str, Any]]:
        """The RFC 6902 operations from the parent's state to this message's state.

        Raises KeyError when there is no such message.
        """
        rows = _fetch(
            self._db.connection(),
            "SELECT m.parent_id, s.kind, s.data FROM chat_message AS m "
            "LEFT JOIN chat_state AS s ON s.message_id = m.id WHERE m.id = ?",
            (message_id,),
        )
        if not rows:
            raise KeyError(message_id)
        parent_id, kind, data = rows[0]
        if kind == "delta":
            ops: list[dict[str, Any]] = json.loads(data)
            return ops
        if kind is None:
            return []
        before = empty_document() if parent_id is None else self.document_at(str(parent_id))
        return state_delta(before, json.loads(data))

    # the cache

    def remember(self, message_id: str, doc: StateDocument) -> None:
        """Cache the state after ``message_id`` (call once its row is committed)."""
        with self._lock:
            self._changes += 1
            self._put(message_id, doc)

    def forget(self, message_ids: Iterable[str]) -> None:
        with self._lock:
            self._changes += 1
            for message_id in message_ids:
                self._cache.pop(message_id, None)

    def clear(self) -> None:
        with self._lock:
            self._changes += 1
            self._cache.clear()

    def _put(self, message_id: str, doc: StateDocument) -> None:
        if self._cache_size == 0:
            return
        self._cache[message_id] = doc
        self._cache.move_to_end(message_id)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
