"""``storyloom import-sillytavern DIR`` end to end: a real process on a real data
directory, a SillyTavern folder of 2023 (public/ layout, V1 cards) and of 2026."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from storyloom.store.database import DATABASE_FILE, Database
from storyloom.testing.st_user_folder import MAIN_CHAT, write_st_user_folder
from tests.cli.cli_support import storyloom


def rows(home: Path) -> dict[str, int]:
    database = Database.in_home(home)  # the server's own driver: safe beside it
    try:
        db = database.connection()
        tables = [
            r[0]
            for r in db.execute(
                "select name from sqlite_master where type='table' "
                "and sql not like 'CREATE VIRTUAL%'"
            )
        ]
        return {t: _count(db, t) for t in tables}
    finally:
        database.close()


def counts(report: dict[str, Any]) -> dict[str, tuple[int, int, int]]:
    return {c["kind"]: (c["added"], c["updated"], c["unchanged"]) for c in report["counts"]}


def test_an_old_public_folder_previews_imports_once_and_names_the_broken_card(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    root = tmp_path / "SillyTavern"
    write_st_user_folder(root, shape="2023", broken_card=True)

    dry = storyloom("import-sillytavern", str(root), "--dry-run", "--json", home=home)
    assert dry.returncode == 0, dry.stderr
    preview = json.loads(dry.stdout)
    assert preview["layout"] == "public"
    assert not (home / DATABASE_FILE).exists() or rows(home).get("conversations", 0) == 0

    done = storyloom("import-sillytavern", str(root), "--json", home=home)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert counts(report)["characters"] == (3, 0, 0)
    assert counts(report)["chats"] == (5, 0, 0)
    assert counts(report)["instruct"] == (1, 0, 0)
    assert [p["file"] for p in report["problems"]] == ["characters/Broken.json"]

    listed = storyloom("chat", "list", "--json", home=home)
    titles = sorted(c["title"] for c in json.loads(listed.stdout)["conversations"])
    # The checkpoint and the branch are branches of the main chat, not chats of their own.
    assert MAIN_CHAT in titles and len(titles) == 4, titles

    before = rows(home)
    assert before.get("chat_message", 0) > 0, before
    again = storyloom("import-sillytavern", str(root), "--json", home=home)
    assert again.returncode == 0, again.stderr
    assert all(a == 0 and u == 0 for a, u, _ in counts(json.loads(again.stdout)).values())
    assert rows(home) == before


def test_the_report_reads_as_text_and_a_wrong_folder_is_named(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    root = tmp_path / "SillyTavern"
    user = write_st_user_folder(root)
    done = storyloom("import-sillytavern", str(user), home=home)
    assert done.returncode == 0, done.stderr
    assert "characters: 3 added, 0 updated, 0 unchanged" in done.stdout
    assert "regex: 2 added, 0 updated, 0 unchanged" in done.stdout
    assert "extension settings 'caption': storyloom has no use for them" in done.stdout

    wrong = storyloom("import-sillytavern", str(tmp_path / "nowhere"), home=home)
    assert wrong.returncode == 1
    assert str(tmp_path / "nowhere") in wrong.stderr


def _count(db: Any, table: str) -> int:
    (count,) = db.execute(f'select count(*) from "{table}"').fetchall()[0]
    return int(count)
