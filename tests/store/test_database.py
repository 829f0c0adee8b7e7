import threading
import time
from pathlib import Path

import apsw
import pytest

from storyloom.store.database import Database
from storyloom.store.migrations import MIGRATIONS, Migration, SchemaTooNewError, migrate


def test_database_opens_in_wal_with_foreign_keys_and_sqlite_vec(tmp_path: Path) -> None:
    db = Database.in_home(tmp_path)
    try:
        assert db.journal_mode() == "wal"
        assert db.connection().execute("PRAGMA foreign_keys").fetchall() == [(1,)]
        assert db.vec_version().startswith("v")
        sql = "SELECT vec_distance_l2('[1, 0]', '[0, 1]')"
        ((distance,),) = db.connection().execute(sql).fetchall()
        assert distance == pytest.approx(2**0.5)
    finally:
        db.close()


def test_migrations_run_once_and_are_recorded(tmp_path: Path) -> None:
    first = Database.in_home(tmp_path)
    assert first.applied_migrations == [m.version for m in MIGRATIONS]
    first.close()
    second = Database.in_home(tmp_path)
    assert second.applied_migrations == []
    assert second.schema_version() == Database.latest_schema_version()
    second.close()


def test_failed_migration_leaves_schema_unchanged(tmp_path: Path) -> None:
    conn = apsw.Connection(str(tmp_path / "x.db"))
    good = Migration(1, "t", "CREATE TABLE t (a INTEGER)")
    bad = Migration(2, "broken", "CREATE TABLE u (a INTEGER); INSERT INTO nowhere VALUES (1)")
    with pytest.raises(apsw.SQLError):
        migrate(conn, (good, bad))
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "t" in tables and "u" not in tables
    assert conn.execute("SELECT MAX(version) FROM schema_migrations").fetchall() == [(1,)]


def test_newer_database_is_refused(tmp_path: Path) -> None:
    conn = apsw.Connection(str(tmp_path / "x.db"))
    migrate(conn, (Migration(1, "a", "SELECT 1"), Migration(2, "b", "SELECT 1")))
    with pytest.raises(SchemaTooNewError, match="newer than this storyloom"):
        migrate(conn, (Migration(1, "a", "SELECT 1"),))


def test_each_thread_gets_its_own_connection(tmp_path: Path) -> None:
    db = Database.in_home(tmp_path)
    seen: list[apsw.Connection] = []
    worker = threading.Thread(target=lambda: seen.append(db.connection()))
    worker.start()
    worker.join()
    assert seen[0] is not db.connection()
    db.close()


def test_writers_that_read_first_wait_their_turn_instead_of_failing(tmp_path: Path) -> None:
    """Two threads each read a counter and write it back, many times: with the write lock
    taken when the transaction begins, none fails with "database is locked" and no
    increment is lost."""
    db = Database(tmp_path / "storyloom.sqlite3")
    db.connection().execute("CREATE TABLE counter (n INTEGER NOT NULL)")
    db.connection().execute("INSERT INTO counter VALUES (0)")
    errors: list[BaseException] = []

    def bump(times: int) -> None:
        try:
            for _ in range(times):
                with db.write_transaction() as tx:
                    row = tx.execute("SELECT n FROM counter").fetchone()
                    assert row is not None
                    n = row[0]
                    time.sleep(0.0005)  # let the other thread commit in between
                    tx.execute("UPDATE counter SET n = ?", (n + 1,))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=bump, args=(200,)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert db.connection().execute("SELECT n FROM counter").fetchone() == (400,)
    db.close()
