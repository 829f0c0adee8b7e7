"""Role C's findings kept with the book (``writing_warning``), so the author can see them
and mark one "intentional".

A warning is known by its fingerprint (book, chapter, subject, attribute, the value the
text says): checking the same chapter again finds the same warning rather than a new one,
and one the author marked intentional stays so and is not raised again. Warnings of a
chapter that a later check no longer finds (the author fixed the text) are removed,
unless they were marked intentional.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import apsw
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from storyloom.core.errors import NotFound
from storyloom.writing.monitor import Finding, WarningKind

_COLUMNS = (
    "id, book_id, output_id, chapter, dimension, category, subject, attribute, detail,"
    " evidence_uri, fingerprint, intentional, created_at, expected, found, since_chapter,"
    " evidence, fact_evidence, kind, subject_name, earlier_value, earlier_until"
)


class ConsistencyWarning(BaseModel):
    """One of Role C's findings on a curated chapter, as the Writing page lists it."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, serialize_by_alias=True, frozen=True
    )

    id: int
    book_id: str
    output_id: str | None
    chapter: int
    dimension: str
    category: str
    subject: str
    attribute: str
    detail: str
    evidence_uri: str
    """The chapter (or rule) that established the expected value."""
    fingerprint: str
    intentional: bool
    created_at: str
    expected: str
    """The value the book established (for a lost limb: the limb lost)."""
    found: str
    """What the checked text says (for a lost limb: the body part it uses)."""
    since_chapter: int
    """The chapter the expected value comes from."""
    evidence: str
    """The checked text's sentence that says otherwise."""
    fact_evidence: str
    """The sentence of chapter ``since_chapter`` that established the expected value
    (empty when the fact was stored without one)."""
    kind: WarningKind | None = None
    """The frame ``detail`` says the warning in (None: kept before warnings had one), for
    a page to say it in its own language from the fields here."""
    subject_name: str = ""
    """The subject's name as the book gives it."""
    earlier_value: str | None = None
    """When ``found`` is what the attribute was before a progression: that value…"""
    earlier_until: int | None = None
    """…and the chapter until which it held."""


class WarningNotFound(NotFound):
    def __init__(self, warning_id: int) -> None:
        super().__init__(f"no warning {warning_id}")


def _warning(row: Sequence[Any]) -> ConsistencyWarning:
    return ConsistencyWarning(
        id=row[0],
        book_id=row[1],
        output_id=row[2],
        chapter=row[3],
        dimension=row[4],
        category=row[5],
        subject=row[6],
        attribute=row[7],
        detail=row[8],
        evidence_uri=row[9],
        fingerprint=row[10],
        intentional=bool(row[11]),
        created_at=row[12],
        expected=row[13],
        found=row[14],
        since_chapter=row[15],
        evidence=row[16],
        fact_evidence=row[17],
        kind=row[18] or None,
        subject_name=row[19],
        earlier_value=row[20],
        earlier_until=row[21],
    )


def record_findings(
    tx: apsw.Connection,
    book_id: str,
    output_id: str,
    chapter: int,
    findings: Sequence[Finding],
) -> list[ConsistencyWarning]:
    """Upsert the findings of one check of ``chapter`` (inside the caller's transaction)
    and drop the chapter's earlier warnings this check no longer finds (intentional ones
    stay). Returns the chapter's warnings now, intentional ones included."""
    now = datetime.now(UTC).isoformat(timespec="milliseconds")
    for f in findings:
        tx.execute(
            "INSERT INTO writing_warning (book_id, output_id, chapter, dimension, category,"
            " subject, attribute, detail, evidence_uri, fingerprint, created_at, expected,"
            " found, since_chapter, evidence, fact_evidence, kind, subject_name,"
            " earlier_value, earlier_until)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (book_id, fingerprint)"
            " DO UPDATE SET output_id = excluded.output_id, detail = excluded.detail,"
            " evidence_uri = excluded.evidence_uri, expected = excluded.expected,"
            " found = excluded.found, since_chapter = excluded.since_chapter,"
            " evidence = excluded.evidence, fact_evidence = excluded.fact_evidence,"
            " kind = excluded.kind, subject_name = excluded.subject_name,"
            " earlier_value = excluded.earlier_value, earlier_until = excluded.earlier_until",
            (
                book_id,
                output_id,
                chapter,
                f.dimension,
                f.category,
                f.subject,
                f.attribute,
                f.detail,
                f.evidence_uri,
                f.fingerprint,
                now,
                f.expected,
                f.found,
                f.since_chapter,
                f.evidence.strip(),
                f.fact_evidence.strip(),
                f.kind,
                f.name,
                f.earlier[0] if f.earlier is not None else None,
                f.earlier[1] if f.earlier is not None else None,
            ),
        )
    tx.execute(
        "DELETE FROM writing_warning WHERE book_id = ? AND chapter = ? AND intentional = 0"
        " AND fingerprint NOT IN (SELECT value FROM json_each(?))",
        (book_id, chapter, _json_list([f.fingerprint for f in findings])),
    )
    return list_warnings(tx, book_id, chapter=chapter)


def _json_list(values: Sequence[str]) -> str:
    return json.dumps(list(values))


def list_warnings(
    conn: apsw.Connection,
    book_id: str,
    *,
    chapter: int | None = None,
    include_intentional: bool = True,
) -> list[ConsistencyWarning]:
    sql = f"SELECT {_COLUMNS} FROM writing_warning WHERE book_id = ?"
    args: list[Any] = [book_id]
    if chapter is not None:
        sql += " AND chapter = ?"
        args.append(chapter)
    if not include_intentional:
        sql += " AND intentional = 0"
    rows = conn.execute(sql + " ORDER BY chapter, id", args)
    return [_warning(row) for row in rows]


def set_intentional(
    conn: apsw.Connection, warning_id: int, intentional: bool
) -> ConsistencyWarning:
    row = conn.execute(
        f"UPDATE writing_warning SET intentional = ? WHERE id = ? RETURNING {_COLUMNS}",
        (int(intentional), warning_id),
    ).fetchone()
    if row is None:
        raise WarningNotFound(warning_id)
    return _warning(row)
