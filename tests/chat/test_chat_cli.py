"""``storyloom chat ...`` end to end: a real process, a real home and its database."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from storyloom.chat.turn_tree import TurnTree
from storyloom.project.project_file import init_project
from storyloom.store.database import Database

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "st-samples"
LEGACY = SAMPLES / "chat_legacy_header_Seraphina_2024.jsonl"
MODERN = SAMPLES / "chat_modern_header_Seraphina_2026_reconstructed.jsonl"


def storyloom(*args: str, home: Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "storyloom", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home)},
        timeout=120,
        cwd=cwd or home,
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


def lines_of(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.split("\n") if line.strip()]


def counts(path: Path) -> tuple[int, int]:
    messages = [o for o in lines_of(path.read_text(encoding="utf-8")) if "mes" in o]
    return len(messages), sum(max(len(o.get("swipes") or []) - 1, 0) for o in messages)


def import_json(file: Path, home: Path, *more: str) -> dict[str, Any]:
    result = storyloom("chat", "import", str(file), "--json", *more, home=home)
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


@pytest.mark.parametrize("sample", [LEGACY, MODERN], ids=["legacy", "modern"])
def test_import_prints_the_ids_and_counts_and_export_gives_the_file_back(
    home: Path, sample: Path
) -> None:
    report = import_json(sample, home)
    messages, siblings = counts(sample)
    assert set(report) == {"conversation_id", "messages", "siblings", "total"}
    assert (report["messages"], report["siblings"]) == (messages, siblings)
    assert report["total"] == messages + siblings
    out = home / "back.jsonl"
    result = storyloom(
        "chat",
        "export",
        report["conversation_id"],
        "--format",
        "sillytavern",
        "--out",
        str(out),
        home=home,
    )
    assert result.returncode == 0, result.stderr
    original = sample.read_text(encoding="utf-8")
    exported = out.read_text(encoding="utf-8")
    assert lines_of(exported) == lines_of(original)
    assert [list(o) for o in lines_of(exported)] == [list(o) for o in lines_of(original)]


def test_import_says_what_it_made_in_one_line(home: Path) -> None:
    result = storyloom("chat", "import", str(LEGACY), home=home)
    assert result.returncode == 0, result.stderr
    messages, siblings = counts(LEGACY)
    [line] = result.stdout.splitlines()
    conversation_id = line.split()[1].rstrip(":")
    assert line == f"conversation {conversation_id}: {messages} messages, {siblings} siblings"
    database = Database.in_home(home)
    try:
        conversation = TurnTree(database).conversation(conversation_id)
    finally:
        database.close()
    assert conversation.title == LEGACY.stem


def test_a_bad_file_names_the_line_and_writes_nothing(home: Path, tmp_path: Path) -> None:
    bad = tmp_path / "broken.jsonl"
    good = LEGACY.read_text(encoding="utf-8").split("\n")
    bad.write_text("\n".join([*good[:3], '{"name": "Sera", "mes": ', *good[3:]]), "utf-8")
    result = storyloom("chat", "import", str(bad), home=home)
    assert result.returncode == 1
    assert str(bad) in result.stderr
    assert "line 4" in result.stderr
    listed = storyloom("chat", "list", "--all", "--json", home=home)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []


def test_export_defaults_to_the_title_as_file_name_here(home: Path, tmp_path: Path) -> None:
    report = import_json(MODERN, home, "--title", "Sera: night/1")
    work = tmp_path / "work"
    work.mkdir()
    result = storyloom("chat", "export", report["conversation_id"], home=home, cwd=work)
    assert result.returncode == 0, result.stderr
    written = work / "Sera_ night_1.jsonl"
    assert written.is_file()
    assert lines_of(written.read_text(encoding="utf-8")) == lines_of(
        MODERN.read_text(encoding="utf-8")
    )


def test_export_as_personalab_writes_the_conversation_folder(home: Path, tmp_path: Path) -> None:
    report = import_json(LEGACY, home)
    folder = tmp_path / "lab"
    result = storyloom(
        "chat",
        "export",
        report["conversation_id"],
        "--format",
        "personalab",
        "-o",
        str(folder),
        home=home,
    )
    assert result.returncode == 0, result.stderr
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["character_snapshot.json", "conversation.jsonl", "metadata.json"]
    talk = lines_of((folder / "conversation.jsonl").read_text(encoding="utf-8"))
    originals = [o for o in lines_of(LEGACY.read_text(encoding="utf-8")) if "mes" in o]
    assert [line["content"] for line in talk] == [o["mes"] for o in originals]
    assert [line["role"] for line in talk][:3] == ["assistant", "user", "assistant"]
    metadata = json.loads((folder / "metadata.json").read_text(encoding="utf-8"))
    assert metadata["conversation_id"] == report["conversation_id"]


def test_export_of_an_unknown_conversation_or_format_fails_plainly(home: Path) -> None:
    missing = storyloom("chat", "export", "0123456789abcdef", home=home)
    assert missing.returncode == 1
    assert "0123456789abcdef" in missing.stderr
    assert "Traceback" not in missing.stderr
    report = import_json(MODERN, home)
    odd = storyloom("chat", "export", report["conversation_id"], "--format", "html", home=home)
    assert odd.returncode == 1
    assert "html" in odd.stderr


def test_conversations_belong_to_the_project_they_were_imported_into(
    home: Path, tmp_path: Path
) -> None:
    project = tmp_path / "novel"
    init_project(project)
    characters = project / "presets" / "characters"
    characters.mkdir(parents=True)
    card = {"name": "Seraphina", "description": "Guardian of the forest."}
    (characters / "seraphina.json").write_text(json.dumps(card), "utf-8")
    in_project = import_json(LEGACY, home, "--project", str(project))
    in_default = import_json(MODERN, home)

    def listed(*args: str) -> list[str]:
        result = storyloom("chat", "list", "--json", *args, home=home)
        assert result.returncode == 0, result.stderr
        return [row["id"] for row in json.loads(result.stdout)]

    assert listed("--project", str(project)) == [in_project["conversation_id"]]
    assert listed() == [in_default["conversation_id"]]
    assert sorted(listed("--all")) == sorted(
        [in_project["conversation_id"], in_default["conversation_id"]]
    )
    plain = storyloom("chat", "list", "--project", str(project), home=home)
    assert in_project["conversation_id"] in plain.stdout
    assert "Seraphina" in plain.stdout
    # The project's character preset of that name became the conversation's snapshot.
    database = Database.in_home(home)
    try:
        conversation = TurnTree(database).conversation(in_project["conversation_id"])
    finally:
        database.close()
    assert conversation.character.source_preset == "seraphina"
    assert conversation.character.base_persona == "Guardian of the forest."
