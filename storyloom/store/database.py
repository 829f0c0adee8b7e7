"""The SQLite database of one data directory.

The standard ``sqlite3`` module of this Python cannot load extensions, so connections come
from ``apsw``, which can, and which tracks SQLite releases closely. Every connection gets
WAL, foreign keys, a busy timeout and ``sqlite-vec``; one connection per thread, because
FastAPI runs blocking handlers in a thread pool.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw
import sqlite_vec

from storyloom.core.errors import Unavailable
from storyloom.core.home import CHOOSE_ANOTHER
from storyloom.store.migrations import MIGRATIONS, current_version, migrate

DATABASE_FILE = "storyloom.sqlite3"
BUSY_TIMEOUT_MS = 5000


class DatabaseError(Unavailable):
    pass


class DatabaseUnusable(DatabaseError):
    """The file cannot be opened or is not a database; the message says how to fix it."""


class SqliteVecUnavailable(DatabaseError):
    """The sqlite-vec extension does not load: an installation problem."""


def _unusable(path: Path, reason: str) -> DatabaseUnusable:
    if path.is_dir():
        return DatabaseUnusable(
            f"{path} is a folder, not the database; move it away or {CHOOSE_ANOTHER}"
        )
    return DatabaseUnusable(
        f"cannot open the database {path} ({reason}); "
        f"fix its permissions, move it away or {CHOOSE_ANOTHER}"
    )


def _reason(exc: apsw.Error) -> str:
    # apsw's text starts with the class name ("NotADBError: file is not a database").
    text = str(exc)
    return text.split(": ", 1)[1] if text.startswith(type(exc).__name__ + ": ") else text


def open_connection(path: Path | str) -> apsw.Connection:
    """Open one connection with storyloom's pragmas and sqlite-vec loaded."""
    path = Path(path)
    try:
        conn = apsw.Connection(str(path))
    except apsw.Error as exc:
        raise _unusable(path, _reason(exc)) from exc
    try:
        conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA synchronous=NORMAL")
        # Vector tables are read whole by exact search; mapping the file saves a copy per page.
        conn.execute("PRAGMA mmap_size=1073741824")
    except apsw.Error as exc:
        # A folder or a file that is no database opens lazily and fails on first use.
        conn.close()
        raise _unusable(path, _reason(exc)) from exc
    try:
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
    except (apsw.Error, AttributeError) as exc:
        conn.close()
        raise SqliteVecUnavailable(f"cannot load sqlite-vec into {path}: {exc}") from exc
    return conn


class Database:
    """The data directory's database: migrated on open, one connection per thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._all: list[apsw.Connection] = []
        self._lock = threading.Lock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _unusable(path, exc.strerror or str(exc)) from exc
        try:
            self.applied_migrations = migrate(self.connection())
        except apsw.Error as exc:
            # A read-only file or folder fails on the first write, not on open.
            self.close()
            raise _unusable(path, _reason(exc)) from exc

    @classmethod
    def in_home(cls, home: Path) -> Database:
        return cls(home / DATABASE_FILE)

    def connection(self) -> apsw.Connection:
        conn: apsw.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = open_connection(self.path)
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    @contextmanager
    def transaction(self) -> Iterator[apsw.Connection]:
        conn = self.connection()
        with conn:
            yield conn

    @contextmanager
    def write_transaction(self) -> Iterator[apsw.Connection]:
        """A transaction that takes the write lock when it starts (``BEGIN IMMEDIATE``).

        A deferred transaction that reads first and writes later fails at once with
        "database is locked" when another connection committed in between (WAL cannot
        upgrade a stale snapshot, and the busy timeout does not apply); one that holds
        the lock from the start waits its turn instead. Nested in a transaction already
        open on this connection, it is a savepoint of that one."""
        conn = self.connection()
        if conn.in_transaction:
            with conn:
                yield conn
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def schema_version(self) -> int:
        return current_version(self.connection())

    @staticmethod
    def latest_schema_version() -> int:
        return max(m.version for m in MIGRATIONS)

    def vec_version(self) -> str:
        row = self.connection().execute("SELECT vec_version()").fetchone()
        return str(row[0]) if row else "unknown"

    def journal_mode(self) -> str:
        row = self.connection().execute("PRAGMA journal_mode").fetchone()
        return str(row[0]) if row else "unknown"

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()
