"""Schema migrations as code.

Each migration has a version, a name and the SQL that moves the schema one step. They run
in order inside one transaction each and are recorded in ``schema_migrations``; a database
newer than this code is refused instead of being guessed at.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import apsw

from storyloom.core.errors import StoryloomError


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "meta",
        """
        CREATE TABLE meta (
            key   TEXT PRIMARY KEY,
            value TEXT NOT NULL
        ) STRICT;
        """,
    ),
)


class SchemaTooNewError(StoryloomError):
    def __init__(self, found: int, known: int) -> None:
        super().__init__(
            f"the database schema is version {found}, newer than this storyloom knows "
            f"({known}); upgrade storyloom or use another --home"
        )


def current_version(conn: apsw.Connection) -> int:
    has_table = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_migrations'"
    ).fetchone()
    if not has_table:
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def migrate(conn: apsw.Connection, migrations: tuple[Migration, ...] = MIGRATIONS) -> list[int]:
    """Bring the schema up to date; return the versions applied now."""
    known = max((m.version for m in migrations), default=0)
    with conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL) STRICT"
        )
    found = current_version(conn)
    if found > known:
        raise SchemaTooNewError(found, known)
    applied = []
    for migration in sorted(migrations, key=lambda m: m.version):
        if migration.version <= found:
            continue
        # apsw's connection context manager is a savepoint: the step and its record
        # commit together or not at all.
        with conn:
            conn.execute(migration.sql)
            conn.execute(
                "INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, time.time()),
            )
        applied.append(migration.version)
    return applied
