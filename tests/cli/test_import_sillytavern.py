"""``storyloom import-sillytavern DIR`` end to end: a real process on a real data
directory, a SillyTavern folder of 2023 (public/ layout, V1 cards) and of 2026."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from storyloom.testing.st_user_folder import MAIN_CHAT, write_st_user_folder
from tests.cli.cli_support import storyloom


def rows(home: Path) -> dict[str, int]:
    with sqlite3.connect(home / "storyloom.db") as db:
        tables = [r[0] for r in db.execute("select name from sqlite_master where type='table'")]
        return {t: db.execute(f'select count(*) from "{t}"').fetchone()[0] for t in tables}


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
    assert not (home / "storyloom.db").exists() or rows(home).get("conversations", 0) == 0

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
    assert "global regex script Tidy ellipses: global regex store not merged" in done.stdout

    wrong = storyloom("import-sillytavern", str(tmp_path / "nowhere"), home=home)
    assert wrong.returncode == 1
    assert str(tmp_path / "nowhere") in wrong.stderr
