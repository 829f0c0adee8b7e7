"""A book's resources in SQLite: the tree, versioned L0/L1/L2 texts, facts and relations.

Every committed write bumps the book's ``state_version`` and stamps the rows it wrote
with it, so a reader can ask for the book exactly as it stood at a version (what makes
context assembly a pure function of that version). Texts are never overwritten: a new
text is a new version of its (path, level), valid from the end of chapter
``as_of_chapter`` on; reading "before chapter c" takes the newest row whose
``as_of_chapter`` is below c. A chapter's own texts have ``as_of_chapter`` = its ordinal,
so writing chapter c never sees chapter c or any later one.

The search index is the knowledge layer's (FTS5 with jieba, vectors, hybrid search),
under the index id ``writing:<book_id>`` with one entry per (path, level), tagged with
the path's ancestor directories so a search can be scoped to a directory.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal, cast, get_args

import apsw

from storyloom.core.errors import NotFound
from storyloom.knowledge.hybrid_search import search_with_vector
from storyloom.knowledge.search_index import (
    IndexedEntry,
    SyncReport,
    remove_entries,
    remove_kb,
    sync_entries,
)
from storyloom.knowledge.vector_index import vector_dims
from storyloom.store.database import Database
from storyloom.writing.tokens import count_tokens
from storyloom.writing.uris import (
    ancestors,
    arc_path,
    chapter_path,
    invalid,
    is_under,
    normalize_path,
    parent_path,
    resource_uri,
)

Level = Literal["L0", "L1", "L2"]
LEVELS: tuple[Level, ...] = get_args(Level)
ResourceKind = Literal[
    "meta",
    "character",
    "location",
    "plot-thread",
    "arc",
    "chapter",
    "scene",
    "summary",
    "profile",
]
RESOURCE_KINDS: tuple[str, ...] = get_args(ResourceKind)
ENTITY_KIND_OF_FOLDER: Mapping[str, ResourceKind] = {
    "characters": "character",
    "locations": "location",
    "plot-threads": "plot-thread",
}
"""``/entities/<folder>/…`` → the kind of resource it holds."""
ENTITY_KINDS: tuple[ResourceKind, ...] = tuple(ENTITY_KIND_OF_FOLDER.values())
FactCategory = Literal["characterization", "factual", "narrative", "timeline", "world"]
"""The five error categories of ConStory-Bench, as the kinds of fact Role C can check."""
FACT_CATEGORIES: tuple[str, ...] = get_args(FactCategory)
FactSource = Literal["author", "agent", "prose"]
"""Who made a fact: the author (on the page or through the API: wins over the others for
the same subject, attribute and chapter), the agent model, or the offline prose reader."""
FACT_SOURCES: tuple[str, ...] = get_args(FactSource)
FactAction = Literal["set", "edit", "reject", "unreject", "merge"]
"""What a version of a fact records: curation or the author set it, the author edited,
rejected or un-rejected it, or a merge moved it onto another entity."""
RELATION_KINDS = ("关联", "冲突", "引入", "涉及")
"""Seed 002's relation kinds (related, conflict, introduces, involves); others are the
author's own."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def index_id(book_id: str) -> str:
    """The knowledge layer's index id of a book's resources."""
    return f"writing:{book_id}"


@dataclass(frozen=True)
class Book:
    id: str
    project_id: str
    title: str
    language: str
    created_at: str
    state_version: int


@dataclass(frozen=True)
class Resource:
    book_id: str
    path: str
    kind: ResourceKind
    title: str
    parent: str
    ordinal: int
    """A chapter's number (1-based, across the book); the order among siblings otherwise."""
    chapter_from: int
    """The first chapter the resource exists in (0: from the start)."""
    aliases: tuple[str, ...] = ()
    attrs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def uri(self) -> str:
        return resource_uri(self.book_id, self.path)


@dataclass(frozen=True)
class LevelText:
    path: str
    level: Level
    version: int
    as_of_chapter: int
    text: str
    tokens: int
    content_hash: str
    source: str
    """``author``, ``import``, ``curation:<output id>``, ``profile`` or ``agent``."""
    state_version: int
    created_at: str
    input_hash: str | None = None


@dataclass(frozen=True)
class LevelWrite:
    path: str
    level: Level
    text: str
    as_of_chapter: int = 0
    source: str = "author"
    input_hash: str | None = None


@dataclass(frozen=True)
class Fact:
    subject: str
    """The entity's path."""
    attribute: str
    value: str
    chapter: int
    """The chapter the fact comes from (it holds from that chapter on)."""
    category: FactCategory = "factual"
    source_uri: str = ""
    evidence: str = ""
    output_id: str | None = None
    source: FactSource = "prose"


@dataclass(frozen=True)
class FactVersion:
    """One write of a fact (subject, attribute, chapter): its value from then on."""

    fact: Fact
    version: int
    action: FactAction
    state_version: int
    created_at: str


@dataclass(frozen=True)
class Relation:
    from_path: str
    to_path: str
    kind: str
    reason: str = ""
    chapter: int = 0
    source: FactSource = "prose"


@dataclass(frozen=True)
class BookHit:
    path: str
    level: Level
    score: float


_LEVEL_COLUMNS = (
    "path, level, version, as_of_chapter, text, tokens, content_hash, source, state_version,"
    " created_at, input_hash"
)
_RESOURCE_COLUMNS = "book_id, path, kind, title, parent, ordinal, chapter_from, aliases, attrs"


def _level(row: Sequence[Any]) -> LevelText:
    return LevelText(
        path=row[0],
        level=row[1],
        version=row[2],
        as_of_chapter=row[3],
        text=row[4],
        tokens=row[5],
        content_hash=row[6],
        source=row[7],
        state_version=row[8],
        created_at=row[9],
        input_hash=row[10],
    )


def _resource(row: Sequence[Any]) -> Resource:
    return Resource(
        book_id=row[0],
        path=row[1],
        kind=row[2],
        title=row[3],
        parent=row[4],
        ordinal=row[5],
        chapter_from=row[6],
        aliases=tuple(json.loads(row[7])),
        attrs=json.loads(row[8]),
    )


_FACT_COLUMNS = (
    "subject, attribute, value, chapter, category, source_uri, evidence, output_id, source"
)
_RELATION_COLUMNS = "from_path, to_path, kind, reason, chapter, source"


def _fact(row: Sequence[Any]) -> Fact:
    return Fact(
        subject=row[0],
        attribute=row[1],
        value=row[2],
        chapter=row[3],
        category=row[4],
        source_uri=row[5],
        evidence=row[6],
        output_id=row[7],
        source=row[8],
    )


def _relation(row: Sequence[Any]) -> Relation:
    return Relation(*row)


def _fact_args(fact: Fact) -> tuple[Any, ...]:
    return (
        fact.subject,
        fact.attribute,
        fact.value,
        fact.chapter,
        fact.category,
        fact.source_uri,
        fact.evidence,
        fact.output_id,
        fact.source,
    )


class BookNotFound(NotFound):
    def __init__(self, book_id: str) -> None:
        super().__init__(f"no book {book_id!r}")


class ResourceNotFound(NotFound):
    def __init__(self, book_id: str, path: str) -> None:
        super().__init__(f"book {book_id!r} has no resource {path!r}")


class FactNotFound(NotFound):
    def __init__(self, book_id: str, subject: str, attribute: str, chapter: int) -> None:
        super().__init__(
            f"book {book_id!r} has no fact {attribute!r} of {subject!r} from chapter {chapter}"
        )


class RejectionNotFound(NotFound):
    def __init__(self, book_id: str, what: str) -> None:
        super().__init__(f"book {book_id!r} has not rejected {what}")


class RelationNotFound(NotFound):
    def __init__(self, book_id: str, relation: Relation) -> None:
        super().__init__(
            f"book {book_id!r} has no {relation.kind!r} relation from {relation.from_path!r}"
            f" to {relation.to_path!r}"
        )


class BookStore:
    """The books of one data directory. Thread-safe as :class:`Database` is (a connection
    per thread); every method is blocking."""

    def __init__(self, database: Database) -> None:
        self.database = database

    # -- books ---------------------------------------------------------------------------

    def create_book(
        self,
        title: str,
        *,
        project_id: str = "default",
        language: str = "en",
        book_id: str | None = None,
    ) -> Book:
        if not title.strip():
            raise invalid("title", "a book needs a title")
        new_id = book_id or f"bk_{uuid.uuid4().hex[:10]}"
        with self.database.write_transaction() as tx:
            tx.execute(
                "INSERT INTO writing_book (id, project_id, title, language, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (new_id, project_id, title.strip(), language, _now()),
            )
            for number, (path, kind, name) in enumerate(_SKELETON):
                attrs = {"profileType": path.split("/")[2]} if kind == "profile" else None
                self._put_resource(
                    tx, new_id, path, kind=kind, title=name, ordinal=number, attrs=attrs
                )
        return self.book(new_id)

    def books(self, project_id: str | None = None) -> list[Book]:
        sql = "SELECT id, project_id, title, language, created_at, state_version FROM writing_book"
        args: tuple[Any, ...] = ()
        if project_id is not None:
            sql += " WHERE project_id = ?"
            args = (project_id,)
        rows = self.database.connection().execute(sql + " ORDER BY created_at, id", args)
        return [Book(*row) for row in rows]

    def book(self, book_id: str) -> Book:
        row = (
            self.database.connection()
            .execute(
                "SELECT id, project_id, title, language, created_at, state_version"
                " FROM writing_book WHERE id = ?",
                (book_id,),
            )
            .fetchone()
        )
        if row is None:
            raise BookNotFound(book_id)
        return Book(*row)

    def delete_book(self, book_id: str) -> None:
        self.book(book_id)
        with self.database.write_transaction() as tx:
            tx.execute("DELETE FROM writing_book WHERE id = ?", (book_id,))
        remove_kb(self.database, index_id(book_id))

    def state_version(self, book_id: str) -> int:
        return self.book(book_id).state_version

    def _bump(self, tx: apsw.Connection, book_id: str) -> int:
        row = tx.execute(
            "UPDATE writing_book SET state_version = state_version + 1 WHERE id = ?"
            " RETURNING state_version",
            (book_id,),
        ).fetchone()
        if row is None:
            raise BookNotFound(book_id)
        return cast(int, row[0])

    # -- resources -----------------------------------------------------------------------

    def put_resource(
        self,
        book_id: str,
        path: str,
        *,
        kind: ResourceKind,
        title: str,
        ordinal: int = 0,
        chapter_from: int = 0,
        aliases: Sequence[str] = (),
        attrs: Mapping[str, Any] | None = None,
    ) -> Resource:
        """Create or update a resource (its texts are kept)."""
        with self.database.write_transaction() as tx:
            self._bump(tx, book_id)
            resource = self._put_resource(
                tx,
                book_id,
                path,
                kind=kind,
                title=title,
                ordinal=ordinal,
                chapter_from=chapter_from,
                aliases=aliases,
                attrs=attrs,
            )
        return resource

    def _put_resource(
        self,
        tx: apsw.Connection,
        book_id: str,
        path: str,
        *,
        kind: str,
        title: str,
        ordinal: int = 0,
        chapter_from: int = 0,
        aliases: Sequence[str] = (),
        attrs: Mapping[str, Any] | None = None,
    ) -> Resource:
        path = normalize_path(path)
        if kind not in RESOURCE_KINDS:
            known = ", ".join(RESOURCE_KINDS)
            raise invalid("kind", f"{kind!r} is not one of {known}")
        names = list(dict.fromkeys(a.strip() for a in aliases if a.strip()))
        row = tx.execute(
            f"INSERT INTO writing_resource ({_RESOURCE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (book_id, path) DO UPDATE SET kind = excluded.kind,"
            " title = excluded.title, ordinal = excluded.ordinal,"
            " chapter_from = excluded.chapter_from, aliases = excluded.aliases,"
            f" attrs = excluded.attrs RETURNING {_RESOURCE_COLUMNS}",
            (
                book_id,
                path,
                kind,
                title,
                parent_path(path),
                ordinal,
                chapter_from,
                json.dumps(names, ensure_ascii=False),
                json.dumps(dict(attrs or {}), ensure_ascii=False, sort_keys=True),
            ),
        ).fetchone()
        return _resource(_one(row))

    def resource(self, book_id: str, path: str) -> Resource:
        path = normalize_path(path)
        row = (
            self.database.connection()
            .execute(
                f"SELECT {_RESOURCE_COLUMNS} FROM writing_resource WHERE book_id = ? AND path = ?",
                (book_id, path),
            )
            .fetchone()
        )
        if row is None:
            self.book(book_id)
            raise ResourceNotFound(book_id, path)
        return _resource(row)

    def resources(
        self,
        book_id: str,
        under: str = "/",
        kinds: Sequence[str] | None = None,
        *,
        state_version: int | None = None,
    ) -> list[Resource]:
        """Resources under a directory (itself included), ordered by parent, then ordinal;
        with ``state_version``, those the book had at that version (their title, names and
        attributes are the current ones: only texts are versioned)."""
        sql = f"SELECT {_RESOURCE_COLUMNS} FROM writing_resource WHERE book_id = ?"
        args: list[Any] = [book_id]
        if state_version is not None:
            sql += " AND created_state <= ?"
            args.append(state_version)
        if under not in ("", "/"):
            under = normalize_path(under)
            sql += " AND (path = ? OR path LIKE ? ESCAPE '\\')"
            args += [under, _like_prefix(under)]
        if kinds:
            sql += f" AND kind IN ({', '.join('?' * len(kinds))})"
            args += list(kinds)
        rows = self.database.connection().execute(sql + " ORDER BY parent, ordinal, path", args)
        return [_resource(row) for row in rows]

    def entities(self, book_id: str, *, state_version: int | None = None) -> list[Resource]:
        """The book's characters, locations and plot threads."""
        return self.resources(book_id, "/entities", kinds=ENTITY_KINDS, state_version=state_version)

    def delete_resource(self, book_id: str, path: str) -> None:
        """Delete a resource and everything under it: texts, facts about it, its links."""
        path = normalize_path(path)
        self.resource(book_id, path)
        prefix = _like_prefix(path)
        with self.database.write_transaction() as tx:
            self._bump(tx, book_id)
            tx.execute(
                "DELETE FROM writing_resource WHERE book_id = ? AND (path = ? OR path LIKE ?"
                " ESCAPE '\\')",
                (book_id, path, prefix),
            )
            tx.execute(
                "DELETE FROM writing_level WHERE book_id = ? AND (path = ? OR path LIKE ?"
                " ESCAPE '\\')",
                (book_id, path, prefix),
            )
            tx.execute(
                "DELETE FROM writing_fact WHERE book_id = ? AND subject = ?", (book_id, path)
            )
            tx.execute(
                "DELETE FROM writing_relation WHERE book_id = ? AND (from_path = ? OR to_path = ?)",
                (book_id, path, path),
            )
        gone = [
            entry for entry in self._indexed_ids(book_id) if is_under(entry.partition("#")[0], path)
        ]
        remove_entries(self.database, index_id(book_id), gone)

    def chapters(self, book_id: str) -> list[Resource]:
        rows = self.database.connection().execute(
            f"SELECT {_RESOURCE_COLUMNS} FROM writing_resource"
            " WHERE book_id = ? AND kind = 'chapter' ORDER BY ordinal",
            (book_id,),
        )
        return [_resource(row) for row in rows]

    def chapter(self, book_id: str, ordinal: int) -> Resource:
        row = (
            self.database.connection()
            .execute(
                f"SELECT {_RESOURCE_COLUMNS} FROM writing_resource WHERE book_id = ?"
                " AND kind = 'chapter' AND ordinal = ?",
                (book_id, ordinal),
            )
            .fetchone()
        )
        if row is None:
            self.book(book_id)
            raise NotFound(f"book {book_id!r} has no chapter {ordinal}")
        return _resource(row)

    def add_chapter(
        self,
        book_id: str,
        title: str,
        *,
        arc: str | None = None,
        text: str = "",
        source: str = "author",
        ordinal: int | None = None,
    ) -> Resource:
        """A new chapter after the last one (or at ``ordinal`` when that is free), in
        ``arc`` (default: the last arc, ``/manuscript/arc-01`` made when there is none).
        ``text`` becomes its L2."""
        with self.database.write_transaction() as tx:
            # First: an unknown book is NotFound before anything is written for it.
            state = self._bump(tx, book_id)
            last = tx.execute(
                "SELECT COALESCE(MAX(ordinal), 0) FROM writing_resource"
                " WHERE book_id = ? AND kind = 'chapter'",
                (book_id,),
            ).fetchone()
            number = ordinal if ordinal is not None else int(_one(last)[0]) + 1
            if number < 1:
                raise invalid("ordinal", "chapters are numbered from 1")
            taken = tx.execute(
                "SELECT path FROM writing_resource WHERE book_id = ? AND kind = 'chapter'"
                " AND ordinal = ?",
                (book_id, number),
            ).fetchone()
            if taken is not None:
                raise invalid("ordinal", f"chapter {number} exists already ({taken[0]})")
            arc_dir = self._arc_for(tx, book_id, arc)
            path = chapter_path(arc_dir, number)
            resource = self._put_resource(
                tx,
                book_id,
                path,
                kind="chapter",
                title=title.strip() or f"Chapter {number}",
                ordinal=number,
                chapter_from=number,
            )
            if text:
                self._insert_level(tx, book_id, LevelWrite(path, "L2", text, number, source), state)
        return resource

    def _arc_for(self, tx: apsw.Connection, book_id: str, arc: str | None) -> str:
        if arc:
            arc = normalize_path(arc)
            if not arc.startswith("/manuscript/") or arc.count("/") != 2:
                raise invalid("arc", f"{arc!r} is not /manuscript/<arc>")
            exists = tx.execute(
                "SELECT 1 FROM writing_resource WHERE book_id = ? AND path = ?", (book_id, arc)
            ).fetchone()
            if exists is None:
                count = tx.execute(
                    "SELECT COUNT(*) FROM writing_resource WHERE book_id = ? AND kind = 'arc'",
                    (book_id,),
                ).fetchone()
                title = arc.rsplit("/", 1)[1].replace("-", " ").title()
                self._put_resource(
                    tx, book_id, arc, kind="arc", title=title, ordinal=int(_one(count)[0]) + 1
                )
            return arc
        row = tx.execute(
            "SELECT path FROM writing_resource WHERE book_id = ? AND kind = 'arc'"
            " ORDER BY ordinal DESC, path DESC LIMIT 1",
            (book_id,),
        ).fetchone()
        if row is not None:
            return str(row[0])
        first = arc_path(1)
        self._put_resource(tx, book_id, first, kind="arc", title="Arc 1", ordinal=1)
        return first

    # -- levels --------------------------------------------------------------------------

    def write_level(
        self,
        book_id: str,
        path: str,
        level: Level,
        text: str,
        *,
        as_of_chapter: int = 0,
        source: str = "author",
        input_hash: str | None = None,
    ) -> LevelText:
        """A new version of a text; the newest one for the same (path, level,
        ``as_of_chapter``) when it says the same already (no new version, no bump)."""
        (written,) = self.write_levels(
            book_id, [LevelWrite(path, level, text, as_of_chapter, source, input_hash)]
        )
        return written

    def write_levels(self, book_id: str, rows: Sequence[LevelWrite]) -> list[LevelText]:
        """Write several texts in one transaction and one state version: all or none
        (a profile's levels for one chapter change together)."""
        for row in rows:
            if row.level not in LEVELS:
                raise invalid("level", f"{row.level!r} is not L0, L1 or L2")
        normalized = [
            LevelWrite(
                normalize_path(r.path), r.level, r.text, r.as_of_chapter, r.source, r.input_hash
            )
            for r in rows
        ]
        with self.database.write_transaction() as tx:
            existing = [self._same_text(tx, book_id, row) for row in normalized]
            if all(e is not None for e in existing):
                return [cast(LevelText, e) for e in existing]
            state = self._bump(tx, book_id)
            out: list[LevelText] = []
            for row, same in zip(normalized, existing, strict=True):
                out.append(
                    same if same is not None else self._insert_level(tx, book_id, row, state)
                )
        return out

    def _same_text(self, tx: apsw.Connection, book_id: str, row: LevelWrite) -> LevelText | None:
        found = tx.execute(
            f"SELECT {_LEVEL_COLUMNS} FROM writing_level WHERE book_id = ? AND path = ?"
            " AND level = ? AND as_of_chapter = ? ORDER BY version DESC LIMIT 1",
            (book_id, row.path, row.level, row.as_of_chapter),
        ).fetchone()
        if found is None or found[6] != content_hash(row.text):
            return None
        return _level(found)

    def _insert_level(
        self, tx: apsw.Connection, book_id: str, row: LevelWrite, state: int
    ) -> LevelText:
        exists = tx.execute(
            "SELECT 1 FROM writing_resource WHERE book_id = ? AND path = ?", (book_id, row.path)
        ).fetchone()
        if exists is None:
            raise ResourceNotFound(book_id, row.path)
        version = _one(
            tx.execute(
                "SELECT COALESCE(MAX(version), 0) + 1 FROM writing_level"
                " WHERE book_id = ? AND path = ? AND level = ?",
                (book_id, row.path, row.level),
            ).fetchone()
        )[0]
        inserted = tx.execute(
            "INSERT INTO writing_level (book_id, path, level, version, as_of_chapter, text,"
            " tokens, content_hash, input_hash, source, state_version, created_at)"
            f" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING {_LEVEL_COLUMNS}",
            (
                book_id,
                row.path,
                row.level,
                version,
                row.as_of_chapter,
                row.text,
                count_tokens(row.text),
                content_hash(row.text),
                row.input_hash,
                row.source,
                state,
                _now(),
            ),
        ).fetchone()
        return _level(_one(inserted))

    def level(
        self,
        book_id: str,
        path: str,
        level: Level,
        *,
        before_chapter: int | None = None,
        version: int | None = None,
        state_version: int | None = None,
    ) -> LevelText | None:
        """One text: exactly ``version``; else the newest valid before ``before_chapter``
        (None: the newest of all), as the book stood at ``state_version`` (None: now)."""
        path = normalize_path(path)
        sql = (
            f"SELECT {_LEVEL_COLUMNS} FROM writing_level"
            " WHERE book_id = ? AND path = ? AND level = ?"
        )
        args: list[Any] = [book_id, path, level]
        if version is not None:
            row = self.database.connection().execute(sql + " AND version = ?", [*args, version])
            found = row.fetchone()
            return _level(found) if found else None
        if before_chapter is not None:
            sql += " AND as_of_chapter < ?"
            args.append(before_chapter)
        if state_version is not None:
            sql += " AND state_version <= ?"
            args.append(state_version)
        found = (
            self.database.connection()
            .execute(sql + " ORDER BY as_of_chapter DESC, version DESC LIMIT 1", args)
            .fetchone()
        )
        return _level(found) if found else None

    def latest_levels(
        self,
        book_id: str,
        level: Level,
        *,
        under: str = "/",
        before_chapter: int | None = None,
        state_version: int | None = None,
    ) -> dict[str, LevelText]:
        """For every resource under a directory, its text at ``level`` as :meth:`level`
        picks it: one query for the whole directory."""
        where = ["book_id = ?", "level = ?"]
        args: list[Any] = [book_id, level]
        if under not in ("", "/"):
            under = normalize_path(under)
            where.append("(path = ? OR path LIKE ? ESCAPE '\\')")
            args += [under, _like_prefix(under)]
        if before_chapter is not None:
            where.append("as_of_chapter < ?")
            args.append(before_chapter)
        if state_version is not None:
            where.append("state_version <= ?")
            args.append(state_version)
        rows = self.database.connection().execute(
            f"SELECT {_LEVEL_COLUMNS} FROM (SELECT {_LEVEL_COLUMNS}, ROW_NUMBER() OVER"
            " (PARTITION BY path ORDER BY as_of_chapter DESC, version DESC) AS rn"
            f" FROM writing_level WHERE {' AND '.join(where)}) WHERE rn = 1 ORDER BY path",
            args,
        )
        return {row[0]: _level(row) for row in rows}

    def level_chapters(self, book_id: str, path: str) -> list[int]:
        """The chapters a resource has a text as of (``as_of_chapter``), in order."""
        rows = self.database.connection().execute(
            "SELECT DISTINCT as_of_chapter FROM writing_level WHERE book_id = ? AND path = ?"
            " ORDER BY as_of_chapter",
            (book_id, normalize_path(path)),
        )
        return [int(r[0]) for r in rows]

    def level_history(self, book_id: str, path: str) -> list[LevelText]:
        rows = self.database.connection().execute(
            f"SELECT {_LEVEL_COLUMNS} FROM writing_level WHERE book_id = ? AND path = ?"
            " ORDER BY level, version",
            (book_id, normalize_path(path)),
        )
        return [_level(row) for row in rows]

    # -- facts and relations -------------------------------------------------------------

    def add_facts(self, book_id: str, facts: Sequence[Fact]) -> int:
        """Store facts, one per subject, attribute and chapter: a second replaces it,
        except that an extracted fact never replaces the author's and a rejected one is
        not stored again. Returns how many were given."""
        if not facts:
            return 0
        with self.database.write_transaction() as tx:
            state = self._bump(tx, book_id)
            self._insert_facts(tx, book_id, facts, state)
        return len(facts)

    def _insert_facts(
        self, tx: apsw.Connection, book_id: str, facts: Iterable[Fact], state: int
    ) -> None:
        redirects = self._redirects(tx, book_id)
        for given in facts:
            fact = _clean_fact(given, redirects)
            if fact.source != "author" and self._is_rejected(tx, book_id, fact):
                continue
            current = self._current_fact(tx, book_id, fact.subject, fact.attribute, fact.chapter)
            if current == fact:
                continue
            if current is not None and current.source == "author" and fact.source != "author":
                continue
            self._write_fact(tx, book_id, fact, state, "set")

    def _write_fact(
        self, tx: apsw.Connection, book_id: str, fact: Fact, state: int, action: FactAction
    ) -> None:
        tx.execute(
            f"INSERT INTO writing_fact (book_id, {_FACT_COLUMNS}, state_version)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (book_id, subject, attribute, chapter) DO UPDATE SET"
            " value = excluded.value, category = excluded.category,"
            " source_uri = excluded.source_uri, evidence = excluded.evidence,"
            " output_id = excluded.output_id, source = excluded.source,"
            " state_version = excluded.state_version",
            (book_id, *_fact_args(fact), state),
        )
        self._record_fact(tx, book_id, fact, state, action)

    def _record_fact(
        self, tx: apsw.Connection, book_id: str, fact: Fact, state: int, action: FactAction
    ) -> None:
        tx.execute(
            "INSERT INTO writing_fact_version (book_id, subject, attribute, chapter, version,"
            " action, value, category, source_uri, evidence, output_id, source, state_version,"
            " created_at) SELECT ?, ?, ?, ?, COALESCE(MAX(version), 0) + 1, ?, ?, ?, ?, ?, ?,"
            " ?, ?, ? FROM writing_fact_version WHERE book_id = ? AND subject = ?"
            " AND attribute = ? AND chapter = ?",
            (
                book_id,
                fact.subject,
                fact.attribute,
                fact.chapter,
                action,
                fact.value,
                fact.category,
                fact.source_uri,
                fact.evidence,
                fact.output_id,
                fact.source,
                state,
                _now(),
                book_id,
                fact.subject,
                fact.attribute,
                fact.chapter,
            ),
        )

    def _current_fact(
        self, tx: apsw.Connection, book_id: str, subject: str, attribute: str, chapter: int
    ) -> Fact | None:
        row = tx.execute(
            f"SELECT {_FACT_COLUMNS} FROM writing_fact WHERE book_id = ? AND subject = ?"
            " AND attribute = ? AND chapter = ?",
            (book_id, subject, attribute, chapter),
        ).fetchone()
        return _fact(row) if row else None

    def _is_rejected(self, tx: apsw.Connection, book_id: str, fact: Fact) -> bool:
        row = tx.execute(
            "SELECT 1 FROM writing_fact_rejection WHERE book_id = ? AND subject = ?"
            " AND attribute = ? AND value = ? AND chapter = ?",
            (book_id, fact.subject, fact.attribute, fact.value, fact.chapter),
        ).fetchone()
        return row is not None

    def _forget_rejection(self, tx: apsw.Connection, book_id: str, fact: Fact) -> None:
        tx.execute(
            "DELETE FROM writing_fact_rejection WHERE book_id = ? AND subject = ?"
            " AND attribute = ? AND value = ? AND chapter = ?",
            (book_id, fact.subject, fact.attribute, fact.value, fact.chapter),
        )

    def add_author_fact(self, book_id: str, fact: Fact) -> int:
        """The author's fact: it wins over an extracted one of the same subject, attribute
        and chapter (a new version of that fact), and un-rejects the same fact if it was
        rejected. Returns the new state version."""
        with self.database.write_transaction() as tx:
            state = self._bump(tx, book_id)
            mine = _clean_fact(replace(fact, source="author"), self._redirects(tx, book_id))
            current = self._current_fact(tx, book_id, mine.subject, mine.attribute, mine.chapter)
            self._forget_rejection(tx, book_id, mine)
            self._write_fact(tx, book_id, mine, state, "set" if current is None else "edit")
        return state

    def edit_fact(
        self, book_id: str, subject: str, attribute: str, chapter: int, edited: Fact
    ) -> int:
        """The author's edit of the fact (``subject``, ``attribute``, ``chapter``): a new
        version of it, made by the author. An edit that moves it (another attribute or
        chapter) rejects the old one, so curating its chapter again does not bring it
        back. The subject stays (two names for one entity are a merge)."""
        with self.database.write_transaction() as tx:
            state = self._bump(tx, book_id)
            old = self._current_fact(
                tx, book_id, normalize_path(subject), attribute.strip(), chapter
            )
            if old is None:
                raise FactNotFound(book_id, normalize_path(subject), attribute.strip(), chapter)
            new = _clean_fact(replace(edited, subject=old.subject, source="author"), {})
            if (new.attribute, new.chapter) != (old.attribute, old.chapter):
                self._reject(tx, book_id, old, state)
            self._forget_rejection(tx, book_id, new)
            self._write_fact(tx, book_id, new, state, "edit")
        return state

    def reject_fact(
        self, book_id: str, subject: str, attribute: str, value: str, chapter: int
    ) -> int:
        """Take the fact out of the book's memory and remember that it was rejected:
        curation never stores it again. Returns the new state version."""
        with self.database.write_transaction() as tx:
            state = self._bump(tx, book_id)
            key = (normalize_path(subject), attribute.strip(), chapter)
            current = self._current_fact(tx, book_id, *key)
            if current is None or current.value != value.strip():
                raise FactNotFound(book_id, *key)
            self._reject(tx, book_id, current, state)
        return state

    def _reject(self, tx: apsw.Connection, book_id: str, fact: Fact, state: int) -> None:
        tx.execute(
            f"INSERT OR REPLACE INTO writing_fact_rejection (book_id, {_FACT_COLUMNS},"
            " state_version, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (book_id, *_fact_args(fact), state, _now()),
        )
        tx.execute(
            "DELETE FROM writing_fact WHERE book_id = ? AND subject = ? AND attribute = ?"
            " AND chapter = ?",
            (book_id, fact.subject, fact.attribute, fact.chapter),
        )
        self._record_fact(tx, book_id, fact, state, "reject")

    def unreject_fact(
        self, book_id: str, subject: str, attribute: str, value: str, chapter: int
    ) -> int:
        """Undo a rejection: the fact is back (unless the author has since set another
        value for its subject, attribute and chapter, which stays)."""
        with self.database.write_transaction() as tx:
            state = self._bump(tx, book_id)
            key = (normalize_path(subject), attribute.strip(), value.strip(), chapter)
            row = tx.execute(
                f"DELETE FROM writing_fact_rejection WHERE book_id = ? AND subject = ?"
                f" AND attribute = ? AND value = ? AND chapter = ? RETURNING {_FACT_COLUMNS}",
                (book_id, *key),
            ).fetchone()
            if row is None:
                self.book(book_id)
                raise RejectionNotFound(
                    book_id, f"{key[1]}={key[2]!r} of {key[0]!r} from chapter {chapter}"
                )
            fact = _fact(row)
            if self._current_fact(tx, book_id, fact.subject, fact.attribute, fact.chapter) is None:
                self._write_fact(tx, book_id, fact, state, "unreject")
        return state

    def rejected_facts(self, book_id: str, *, subject: str | None = None) -> list[Fact]:
        sql = f"SELECT {_FACT_COLUMNS} FROM writing_fact_rejection WHERE book_id = ?"
        args: list[Any] = [book_id]
        if subject is not None:
            sql += " AND subject = ?"
            args.append(normalize_path(subject))
        rows = self.database.connection().execute(
            sql + " ORDER BY subject, attribute, chapter, value", args
        )
        return [_fact(row) for row in rows]

    def fact_history(
        self,
        book_id: str,
        subject: str,
        *,
        attribute: str | None = None,
        chapter: int | None = None,
    ) -> list[FactVersion]:
        """Every write of the subject's facts (of one attribute, one chapter), oldest
        first per fact."""
        sql = (
            f"SELECT {_FACT_COLUMNS}, version, action, state_version, created_at"
            " FROM writing_fact_version WHERE book_id = ? AND subject = ?"
        )
        args: list[Any] = [book_id, normalize_path(subject)]
        if attribute is not None:
            sql += " AND attribute = ?"
            args.append(attribute.strip())
        if chapter is not None:
            sql += " AND chapter = ?"
            args.append(chapter)
        rows = self.database.connection().execute(
            sql + " ORDER BY attribute, chapter, version", args
        )
        return [
            FactVersion(
                fact=_fact(row[:9]),
                version=row[9],
                action=row[10],
                state_version=row[11],
                created_at=row[12],
            )
            for row in rows
        ]

    def facts(
        self, book_id: str, *, subject: str | None = None, before_chapter: int | None = None
    ) -> list[Fact]:
        sql = f"SELECT {_FACT_COLUMNS} FROM writing_fact WHERE book_id = ?"
        args: list[Any] = [book_id]
        if subject is not None:
            sql += " AND subject = ?"
            args.append(normalize_path(subject))
        if before_chapter is not None:
            sql += " AND chapter < ?"
            args.append(before_chapter)
        rows = self.database.connection().execute(
            sql + " ORDER BY subject, attribute, chapter", args
        )
        return [_fact(row) for row in rows]

    def facts_as_of(self, book_id: str, before_chapter: int) -> dict[str, dict[str, Fact]]:
        """subject → attribute → the newest fact from a chapter before ``before_chapter``."""
        out: dict[str, dict[str, Fact]] = {}
        for fact in self.facts(book_id, before_chapter=before_chapter):
            out.setdefault(fact.subject, {})[fact.attribute] = fact  # ordered by chapter
        return out

    def link(
        self,
        book_id: str,
        from_path: str,
        to_path: str,
        kind: str,
        reason: str = "",
        chapter: int = 0,
    ) -> Relation:
        """The author's relation (a rejected one of the same kind is un-rejected)."""
        if not kind.strip():
            raise invalid("kind", "a relation needs a kind")
        relation = Relation(
            normalize_path(from_path),
            normalize_path(to_path),
            kind.strip(),
            reason,
            chapter,
            "author",
        )
        with self.database.write_transaction() as tx:
            state = self._bump(tx, book_id)
            tx.execute(
                "DELETE FROM writing_relation_rejection WHERE book_id = ? AND from_path = ?"
                " AND to_path = ? AND kind = ?",
                (book_id, relation.from_path, relation.to_path, relation.kind),
            )
            self._insert_relations(tx, book_id, [relation], state)
        return relation

    def _insert_relations(
        self, tx: apsw.Connection, book_id: str, relations: Iterable[Relation], state: int
    ) -> None:
        redirects = self._redirects(tx, book_id)
        for given in relations:
            r = replace(
                given,
                from_path=redirects.get(given.from_path, given.from_path),
                to_path=redirects.get(given.to_path, given.to_path),
            )
            if r.from_path == r.to_path and given.from_path != given.to_path:
                continue  # a merge made the two ends one entity
            rejected = tx.execute(
                "SELECT 1 FROM writing_relation_rejection WHERE book_id = ? AND from_path = ?"
                " AND to_path = ? AND kind = ?",
                (book_id, r.from_path, r.to_path, r.kind),
            ).fetchone()
            if rejected is not None and r.source != "author":
                continue
            tx.execute(
                "INSERT INTO writing_relation (book_id, from_path, to_path, kind, reason,"
                " chapter, source) VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (book_id, from_path, to_path, kind) DO UPDATE SET"
                " reason = excluded.reason, source = excluded.source,"
                " chapter = MIN(writing_relation.chapter, excluded.chapter)"
                " WHERE writing_relation.source != 'author' OR excluded.source = 'author'",
                (book_id, r.from_path, r.to_path, r.kind, r.reason, r.chapter, r.source),
            )

    def reject_relation(self, book_id: str, from_path: str, to_path: str, kind: str) -> int:
        """Take the relation out and remember that it was rejected: curation never stores
        it again (the author adding it again un-rejects it)."""
        key = Relation(normalize_path(from_path), normalize_path(to_path), kind.strip())
        with self.database.write_transaction() as tx:
            state = self._bump(tx, book_id)
            gone = tx.execute(
                "DELETE FROM writing_relation WHERE book_id = ? AND from_path = ? AND to_path = ?"
                " AND kind = ? RETURNING id",
                (book_id, key.from_path, key.to_path, key.kind),
            ).fetchone()
            if gone is None:
                raise RelationNotFound(book_id, key)
            tx.execute(
                "INSERT OR REPLACE INTO writing_relation_rejection (book_id, from_path, to_path,"
                " kind, state_version, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (book_id, key.from_path, key.to_path, key.kind, state, _now()),
            )
        return state

    def relations(
        self,
        book_id: str,
        *,
        path: str | None = None,
        before_chapter: int | None = None,
        state_version: int | None = None,
    ) -> list[Relation]:
        sql = f"SELECT {_RELATION_COLUMNS} FROM writing_relation WHERE book_id = ?"
        args: list[Any] = [book_id]
        if path is not None:
            sql += " AND (from_path = ? OR to_path = ?)"
            args += [normalize_path(path)] * 2
        if before_chapter is not None:
            sql += " AND chapter < ?"
            args.append(before_chapter)
        if state_version is not None:
            sql += " AND created_state <= ?"
            args.append(state_version)
        rows = self.database.connection().execute(sql + " ORDER BY from_path, to_path, kind", args)
        return [_relation(row) for row in rows]

    # -- merging entities ----------------------------------------------------------------

    def _redirects(self, tx: apsw.Connection, book_id: str) -> dict[str, str]:
        rows = tx.execute(
            "SELECT from_path, to_path FROM writing_redirect WHERE book_id = ?", (book_id,)
        )
        return {str(r[0]): str(r[1]) for r in rows}

    def redirects(self, book_id: str) -> dict[str, str]:
        """Merged-away path → the path kept in its place."""
        return self._redirects(self.database.connection(), book_id)

    def merge_entities(self, book_id: str, from_path: str, into_path: str) -> int:
        """Two names for one entity: ``into`` keeps, ``from``'s title and aliases become
        its aliases, ``from``'s facts, rejections, relations and the texts ``into`` lacks
        move over, and ``from`` (with its profile) is gone, in one transaction. Later
        extractions naming ``from`` land on ``into``. Returns the new state version."""
        source = self.resource(book_id, from_path)
        kept = self.resource(book_id, into_path)
        for field_name, entity in (("from", source), ("into", kept)):
            if entity.kind not in ENTITY_KINDS:
                raise invalid(field_name, f"{entity.path} is a {entity.kind}, not an entity")
        if source.path == kept.path:
            raise invalid("into", "an entity is not merged into itself")
        old, new = source.path, kept.path
        names = [n for n in (*kept.aliases, source.title, *source.aliases) if n != kept.title]
        profiles = {
            subject_path: r
            for r in self.resources(book_id, "/profiles", kinds=["profile"])
            if isinstance(subject_path := r.attrs.get("subject"), str)
        }
        with self.database.write_transaction() as tx:
            state = self._bump(tx, book_id)
            self._put_resource(
                tx,
                book_id,
                new,
                kind=kept.kind,
                title=kept.title,
                ordinal=kept.ordinal,
                chapter_from=min(kept.chapter_from, source.chapter_from),
                aliases=names,
                attrs={**source.attrs, **kept.attrs},
            )
            self._move_facts(tx, book_id, old, new, state)
            self._move_relations(tx, book_id, old, new)
            for level in LEVELS:
                has = tx.execute(
                    "SELECT 1 FROM writing_level WHERE book_id = ? AND path = ? AND level = ?",
                    (book_id, new, level),
                ).fetchone()
                if has is None:
                    tx.execute(
                        "UPDATE writing_level SET path = ? WHERE book_id = ? AND path = ?"
                        " AND level = ?",
                        (new, book_id, old, level),
                    )
            gone = [old]
            if old in profiles:
                gone.append(profiles[old].path)
                if new in profiles:
                    self._redirect(tx, book_id, profiles[old].path, profiles[new].path, state)
            for path in gone:
                tx.execute(
                    "DELETE FROM writing_level WHERE book_id = ? AND path = ?", (book_id, path)
                )
                tx.execute(
                    "DELETE FROM writing_resource WHERE book_id = ? AND path = ?", (book_id, path)
                )
            self._redirect(tx, book_id, old, new, state)
        removed = [
            entry
            for entry in self._indexed_ids(book_id)
            if any(is_under(entry.partition("#")[0], path) for path in gone)
        ]
        remove_entries(self.database, index_id(book_id), removed)
        self.index_levels(book_id, [new])
        return state

    def _redirect(self, tx: apsw.Connection, book_id: str, old: str, new: str, state: int) -> None:
        tx.execute(
            "INSERT OR REPLACE INTO writing_redirect (book_id, from_path, to_path, state_version)"
            " VALUES (?, ?, ?, ?)",
            (book_id, old, new, state),
        )
        # An earlier merge into the path merged now follows it.
        tx.execute(
            "UPDATE writing_redirect SET to_path = ? WHERE book_id = ? AND to_path = ?",
            (new, book_id, old),
        )
        tx.execute(
            "DELETE FROM writing_redirect WHERE book_id = ? AND from_path = to_path", (book_id,)
        )

    def _move_facts(
        self, tx: apsw.Connection, book_id: str, old: str, new: str, state: int
    ) -> None:
        rows = tx.execute(
            f"SELECT {_FACT_COLUMNS} FROM writing_fact WHERE book_id = ? AND subject = ?"
            " ORDER BY attribute, chapter",
            (book_id, old),
        ).fetchall()
        for row in rows:
            moved = replace(_fact(row), subject=new)
            there = self._current_fact(tx, book_id, new, moved.attribute, moved.chapter)
            # The kept entity's own fact stays, unless only the merged one is the author's.
            if there is None or (moved.source == "author" and there.source != "author"):
                self._write_fact(tx, book_id, moved, state, "merge")
        tx.execute("DELETE FROM writing_fact WHERE book_id = ? AND subject = ?", (book_id, old))
        tx.execute(
            "UPDATE OR IGNORE writing_fact_rejection SET subject = ? WHERE book_id = ?"
            " AND subject = ?",
            (new, book_id, old),
        )
        tx.execute(
            "DELETE FROM writing_fact_rejection WHERE book_id = ? AND subject = ?", (book_id, old)
        )

    def _move_relations(self, tx: apsw.Connection, book_id: str, old: str, new: str) -> None:
        rows = tx.execute(
            f"SELECT {_RELATION_COLUMNS} FROM writing_relation WHERE book_id = ?"
            " AND (from_path = ? OR to_path = ?)",
            (book_id, old, old),
        ).fetchall()
        for row in rows:
            r = _relation(row)
            ends = (
                new if r.from_path == old else r.from_path,
                new if r.to_path == old else r.to_path,
            )
            if ends[0] == ends[1]:
                continue
            tx.execute(
                "INSERT OR IGNORE INTO writing_relation (book_id, from_path, to_path, kind,"
                " reason, chapter, source) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (book_id, *ends, r.kind, r.reason, r.chapter, r.source),
            )
        tx.execute(
            "DELETE FROM writing_relation WHERE book_id = ? AND (from_path = ? OR to_path = ?)",
            (book_id, old, old),
        )
        for column in ("from_path", "to_path"):
            tx.execute(
                f"UPDATE OR IGNORE writing_relation_rejection SET {column} = ? WHERE book_id = ?"
                f" AND {column} = ?",
                (new, book_id, old),
            )
        tx.execute(
            "DELETE FROM writing_relation_rejection WHERE book_id = ? AND (from_path = ?"
            " OR to_path = ?)",
            (book_id, old, old),
        )

    def commit_chapter_memory(
        self,
        book_id: str,
        *,
        levels: Sequence[LevelWrite] = (),
        facts: Sequence[Fact] = (),
        relations: Sequence[Relation] = (),
        resources: Sequence[Resource] = (),
    ) -> int:
        """What curating one chapter changes, in one transaction: the book's memory is
        never left half-updated. What the author corrected stays corrected: a rejected
        fact or relation is not stored again, an extracted fact does not replace the
        author's, and a merged-away entity's names land on the entity it was merged into.
        Returns the new state version."""
        with self.database.write_transaction() as tx:
            state = self._bump(tx, book_id)
            redirects = self._redirects(tx, book_id)
            for r in resources:
                kept = redirects.get(normalize_path(r.path))
                if kept is not None:
                    if r.kind in ENTITY_KINDS:
                        self._alias_onto(tx, book_id, kept, (r.title, *r.aliases))
                    continue
                self._put_resource(
                    tx,
                    book_id,
                    r.path,
                    kind=r.kind,
                    title=r.title,
                    ordinal=r.ordinal,
                    chapter_from=r.chapter_from,
                    aliases=r.aliases,
                    attrs=r.attrs,
                )
            self._insert_facts(tx, book_id, facts, state)
            self._insert_relations(tx, book_id, relations, state)
            for row in levels:
                normalized = LevelWrite(
                    normalize_path(row.path),
                    row.level,
                    row.text,
                    row.as_of_chapter,
                    row.source,
                    row.input_hash,
                )
                if normalized.path in redirects:
                    continue  # the text of a merged-away entity (or its profile)
                if self._same_text(tx, book_id, normalized) is None:
                    self._insert_level(tx, book_id, normalized, state)
        return state

    def _alias_onto(
        self, tx: apsw.Connection, book_id: str, path: str, names: Sequence[str]
    ) -> None:
        row = tx.execute(
            f"SELECT {_RESOURCE_COLUMNS} FROM writing_resource WHERE book_id = ? AND path = ?",
            (book_id, path),
        ).fetchone()
        if row is None:
            return
        kept = _resource(row)
        aliases = [*kept.aliases, *(n for n in names if n.strip() and n != kept.title)]
        if list(dict.fromkeys(aliases)) == list(kept.aliases):
            return
        self._put_resource(
            tx,
            book_id,
            kept.path,
            kind=kept.kind,
            title=kept.title,
            ordinal=kept.ordinal,
            chapter_from=kept.chapter_from,
            aliases=aliases,
            attrs=kept.attrs,
        )

    # -- search --------------------------------------------------------------------------

    def _indexed_ids(self, book_id: str) -> list[str]:
        rows = self.database.connection().execute(
            "SELECT entry_id FROM kb_entry_index WHERE kb_id = ?", (index_id(book_id),)
        )
        return [str(r[0]) for r in rows]

    def index_levels(self, book_id: str, paths: Sequence[str] | None = None) -> SyncReport:
        """Bring the search index up to date with the newest text of each level, for
        ``paths`` (and what is under them) or the whole book."""
        entries: list[IndexedEntry] = []
        for level in LEVELS:
            for path, text in self.latest_levels(book_id, level).items():
                if paths is not None and not any(is_under(path, p) for p in paths):
                    continue
                entries.append(
                    IndexedEntry(
                        kb_id=index_id(book_id),
                        entry_id=f"{path}#{level}",
                        text=text.text,
                        content_hash=text.content_hash,
                        entry_type=path.split("/")[1],
                        tags=tuple(ancestors(path)),
                        enabled=True,
                        use_semantic=False,
                        semantic_threshold=None,
                    )
                )
        return sync_entries(self.database, index_id(book_id), entries, remove_others=paths is None)

    def search(
        self,
        book_id: str,
        query: str,
        *,
        under: str = "/",
        levels: Sequence[Level] = LEVELS,
        top_k: int = 10,
        before_chapter: int | None = None,
        query_vector: Sequence[float] | None = None,
        model_id: str | None = None,
    ) -> list[BookHit]:
        """Hybrid search (keywords, and vectors when ``query_vector`` is given) over the
        indexed levels, scoped to a directory; with ``before_chapter``, only resources
        that exist before that chapter."""
        scope = None if under in ("", "/") else [normalize_path(under)]
        hits = search_with_vector(
            self.database,
            query,
            query_vector,
            kb_ids=[index_id(book_id)],
            model_id=model_id,
            top_k=max(top_k * 4, top_k + 20),
            tags=scope,
        )
        visible = None if before_chapter is None else self._visible_paths(book_id, before_chapter)
        out: list[BookHit] = []
        for hit in hits:
            path, _, level = hit.entry_id.partition("#")
            if level not in levels or (visible is not None and path not in visible):
                continue
            out.append(BookHit(path, cast(Level, level), hit.score))
            if len(out) >= top_k:
                break
        return out

    def has_vectors(self, book_id: str, model_id: str) -> bool:
        """Whether any of the book's indexed texts has a vector of ``model_id``."""
        conn = self.database.connection()
        return bool(vector_dims(conn, [index_id(book_id)], model_id))

    def _visible_paths(self, book_id: str, before_chapter: int) -> set[str]:
        rows = self.database.connection().execute(
            "SELECT path FROM writing_resource WHERE book_id = ? AND chapter_from < ?",
            (book_id, before_chapter),
        )
        return {str(r[0]) for r in rows}


def _clean_fact(fact: Fact, redirects: Mapping[str, str]) -> Fact:
    """The fact as stored: its subject normalized (and redirected past a merge), its
    attribute and value stripped, its category and source checked."""
    if fact.category not in FACT_CATEGORIES:
        known = ", ".join(FACT_CATEGORIES)
        raise invalid("category", f"{fact.category!r} is not one of {known}")
    if fact.source not in FACT_SOURCES:
        raise invalid("source", f"{fact.source!r} is not one of {', '.join(FACT_SOURCES)}")
    subject = normalize_path(fact.subject)
    return replace(
        fact,
        subject=redirects.get(subject, subject),
        attribute=fact.attribute.strip(),
        value=fact.value.strip(),
    )


def _one(row: Any) -> Sequence[Any]:
    """The row a statement always returns (an aggregate, an INSERT … RETURNING)."""
    if row is None:
        raise RuntimeError("the statement returned no row")
    return cast(Sequence[Any], row)


def _like_prefix(path: str) -> str:
    escaped = path.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "/%"


_SKELETON: tuple[tuple[str, ResourceKind, str], ...] = (
    ("/meta/outline", "meta", "Outline"),
    ("/meta/style-guide", "meta", "Style guide"),
    ("/meta/world-rules", "meta", "World rules"),
    ("/summaries/full-work", "summary", "The whole work"),
    ("/profiles/world-state/current", "profile", "World state"),
    ("/profiles/style/narrative-voice", "profile", "Narrative voice"),
)
"""What every new book starts with: the seed's always-present resources, empty."""
