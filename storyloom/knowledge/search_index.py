"""The search index of knowledge entries in SQLite, kept in step with ``knowledge.json``.

Each entry has one row in ``kb_entry_index`` (text, type, tags, enabled, semantic
threshold) and one in the FTS table. The *embedding text* of an entry is its
``displayName``, ``content.value``, the media stand-ins ``caption`` and ``alt_text``, and
its primary ``keywords``, one per line, empty parts left out; it is what gets embedded and
keyword-indexed. Its SHA-256 is the entry's ``content_hash``: a vector is current when it
was made from text with that hash, so :func:`sync_kb` lets only new and changed entries be
re-embedded and drops vectors of text that no longer exists.

The index is derived data: deleting it loses nothing a sync cannot rebuild.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import apsw

from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.text_index import segmented_text
from storyloom.knowledge.vector_index import delete_vectors
from storyloom.store.database import Database


def embedding_text(entry: CAIU) -> str:
    """The text that represents ``entry`` for search (see the module docstring)."""
    content = entry.content
    keywords = ", ".join(k for k in entry.activation_criteria.keywords if k.strip())
    parts = [entry.displayName, content.value, content.caption, content.alt_text, keywords]
    return "\n".join(part.strip() for part in parts if part and part.strip())


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class IndexedEntry:
    """What the index keeps of one entry."""

    kb_id: str
    entry_id: str
    text: str
    content_hash: str
    entry_type: str
    tags: tuple[str, ...]
    enabled: bool
    use_semantic: bool
    semantic_threshold: float | None

    @classmethod
    def of(cls, kb_id: str, entry: CAIU) -> IndexedEntry:
        text = embedding_text(entry)
        criteria = entry.activation_criteria
        return cls(
            kb_id=kb_id,
            entry_id=entry.id,
            text=text,
            content_hash=content_hash(text),
            entry_type=entry.entry_type,
            tags=tuple(entry.management_metadata.tags),
            enabled=entry.management_metadata.is_enabled,
            use_semantic=criteria.use_semantic_search,
            semantic_threshold=criteria.semantic_threshold,
        )

    def row(self) -> tuple[object, ...]:
        return (
            self.kb_id,
            self.entry_id,
            self.content_hash,
            self.text,
            self.entry_type,
            json.dumps(list(self.tags), ensure_ascii=False),
            int(self.enabled),
            int(self.use_semantic),
            self.semantic_threshold,
        )


@dataclass(frozen=True)
class SyncReport:
    """Entry ids by what a sync did to them. ``added`` and ``changed`` need embedding."""

    kb_id: str
    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    metadata_updated: tuple[str, ...] = field(default=())
    """Same text, but tags, type, enabled or threshold changed (no re-embedding)."""


_UPSERT = """
INSERT INTO kb_entry_index
    (kb_id, entry_id, content_hash, text, entry_type, tags, enabled, use_semantic,
     semantic_threshold)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (kb_id, entry_id) DO UPDATE SET
    content_hash = excluded.content_hash, text = excluded.text,
    entry_type = excluded.entry_type, tags = excluded.tags, enabled = excluded.enabled,
    use_semantic = excluded.use_semantic, semantic_threshold = excluded.semantic_threshold
RETURNING id
"""


def _indexed_rows(conn: apsw.Connection, kb_id: str) -> dict[str, tuple[object, ...]]:
    rows = conn.execute(
        "SELECT entry_id, id, content_hash, entry_type, tags, enabled, use_semantic,"
        " semantic_threshold FROM kb_entry_index WHERE kb_id = ?",
        (kb_id,),
    ).fetchall()
    return {str(r[0]): tuple(r[1:]) for r in rows}


def sync_kb(db: Database, kb: KnowledgeBase) -> SyncReport:
    """Make the index of ``kb`` match its entries; drop vectors of changed/removed text."""
    return sync_entries(db, kb.kb_id, [IndexedEntry.of(kb.kb_id, entry) for entry in kb.entries])


def sync_entries(
    db: Database, kb_id: str, entries: Sequence[IndexedEntry], *, remove_others: bool = True
) -> SyncReport:
    """Make the index of ``kb_id`` hold ``entries`` (any searchable text, not only a KB's:
    the writing studio indexes its resources' levels here); with ``remove_others``, entries
    not given are removed. Vectors of changed or removed text are dropped."""
    conn = db.connection()
    before = _indexed_rows(conn, kb_id)
    added: list[IndexedEntry] = []
    changed: list[IndexedEntry] = []
    retagged: list[IndexedEntry] = []
    unchanged: list[str] = []
    for entry in entries:
        old = before.get(entry.entry_id)
        if old is None:
            added.append(entry)
        elif old[1] != entry.content_hash:
            changed.append(entry)
        elif old[2:] != entry.row()[4:]:
            retagged.append(entry)
        else:
            unchanged.append(entry.entry_id)
    current = {entry.entry_id for entry in entries}
    removed = [e for e in before if e not in current] if remove_others else []
    # Segmenting is the slow part: done before the write transaction starts.
    segmented = {e.entry_id: segmented_text(e.text) for e in (*added, *changed)}
    with db.transaction() as tx:
        for entry_id in removed:
            _delete_entry(tx, kb_id, entry_id)
        for entry in (*added, *changed):
            ((row_id,),) = tx.execute(_UPSERT, entry.row()).fetchall()
            tx.execute("DELETE FROM kb_entry_fts WHERE rowid = ?", (row_id,))
            tx.execute(
                "INSERT INTO kb_entry_fts(rowid, segmented) VALUES (?, ?)",
                (row_id, segmented[entry.entry_id]),
            )
        for entry in retagged:
            tx.execute(_UPSERT, entry.row()).fetchall()
        for entry in changed:
            delete_vectors(tx, kb_id, [entry.entry_id], keep_hash=entry.content_hash)
    return SyncReport(
        kb_id=kb_id,
        added=tuple(e.entry_id for e in added),
        changed=tuple(e.entry_id for e in changed),
        removed=tuple(removed),
        unchanged=tuple(unchanged),
        metadata_updated=tuple(e.entry_id for e in retagged),
    )


def _delete_entry(conn: apsw.Connection, kb_id: str, entry_id: str) -> None:
    row = conn.execute(
        "SELECT id FROM kb_entry_index WHERE kb_id = ? AND entry_id = ?", (kb_id, entry_id)
    ).fetchone()
    if row is not None:
        conn.execute("DELETE FROM kb_entry_fts WHERE rowid = ?", (row[0],))
        conn.execute("DELETE FROM kb_entry_index WHERE id = ?", (row[0],))
    delete_vectors(conn, kb_id, [entry_id])


def remove_entries(db: Database, kb_id: str, entry_ids: Sequence[str]) -> None:
    """Forget some entries of ``kb_id``: their index rows, FTS rows and vectors."""
    with db.transaction() as tx:
        for entry_id in entry_ids:
            _delete_entry(tx, kb_id, entry_id)


def remove_kb(db: Database, kb_id: str) -> int:
    """Forget a KB: its index rows, FTS rows and vectors. Returns the entries removed."""
    with db.transaction() as tx:
        ids = [str(r[0]) for r in tx.execute(
            "SELECT entry_id FROM kb_entry_index WHERE kb_id = ?", (kb_id,)
        )]  # fmt: skip
        tx.execute(
            "DELETE FROM kb_entry_fts WHERE rowid IN (SELECT id FROM kb_entry_index"
            " WHERE kb_id = ?)",
            (kb_id,),
        )
        tx.execute("DELETE FROM kb_entry_index WHERE kb_id = ?", (kb_id,))
        delete_vectors(tx, kb_id, None)
    return len(ids)


def indexed_entry_count(conn: apsw.Connection, kb_id: str) -> int:
    row = conn.execute("SELECT COUNT(*) FROM kb_entry_index WHERE kb_id = ?", (kb_id,)).fetchone()
    return int(row[0]) if row else 0


def current_hashes(conn: apsw.Connection, kb_id: str) -> dict[str, str]:
    """entry id -> content hash, as indexed now."""
    rows = conn.execute(
        "SELECT entry_id, content_hash FROM kb_entry_index WHERE kb_id = ?", (kb_id,)
    )
    return {str(r[0]): str(r[1]) for r in rows}


@dataclass(frozen=True)
class EntryFilter:
    """Which indexed entries a search may return; renders a condition on alias ``i``."""

    kb_ids: Sequence[str]
    tags: Sequence[str] | None = None
    """Entries with at least one of these tags; None or empty: any."""
    entry_types: Sequence[str] | None = None
    include_disabled: bool = False

    def sql(self) -> tuple[str, list[object]]:
        clauses: list[str] = []
        args: list[object] = []
        kb_ids = list(dict.fromkeys(self.kb_ids))
        clauses.append(f"i.kb_id IN ({', '.join('?' * len(kb_ids))})" if kb_ids else "0")
        args.extend(kb_ids)
        if not self.include_disabled:
            clauses.append("i.enabled = 1")
        if self.entry_types:
            types = list(dict.fromkeys(self.entry_types))
            clauses.append(f"i.entry_type IN ({', '.join('?' * len(types))})")
            args.extend(types)
        if self.tags:
            tags = list(dict.fromkeys(self.tags))
            clauses.append(
                "EXISTS (SELECT 1 FROM json_each(i.tags) AS t"
                f" WHERE t.value IN ({', '.join('?' * len(tags))}))"
            )
            args.extend(tags)
        return " AND ".join(clauses), args
