"""``storyloom kb import`` of SillyTavern files, into a project or the global folder.

The same import of every file of the real-user corpus is in ``tests/corpus``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from storyloom.chat.store.turn_tree import TurnTree
from storyloom.knowledge.knowledge_base import load_knowledge_base
from storyloom.project.project_file import init_project, load_project
from storyloom.store.database import Database
from storyloom.testing.st_documents import card_book_entry, card_document

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sillytavern"


def kb_import(*args: str, home: Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "storyloom", "kb", "import", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def conversations_in(home: Path, project_id: str) -> list[tuple[str, int]]:
    """(id, messages on the shown path) of the project's conversations in ``home``."""
    database = Database.in_home(home)
    try:
        return [(c.id, c.message_count) for c in TurnTree(database).conversations(project_id)]
    finally:
        database.close()


@pytest.mark.parametrize(
    "name",
    [
        "world_info_tea_road_zh_original_data.json",
        "card_maren_v2_v3.png",
        "card_academy_zh_v3_mvu.json",
        "card_wren_v3.charx",
        "chat_maren_legacy_header.jsonl",
    ],
)
def test_each_kind_of_file_imports_into_a_project_and_reports_what_it_made(
    name: str, tmp_path: Path
) -> None:
    root = tmp_path / "proj"
    init_project(root)
    sample = FIXTURES / name
    result = kb_import(str(sample), "--project", str(root), "--json", home=tmp_path / "home")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    references = load_project(root).knowledgeBaseReferences
    assert len(references) == len(report["created"])
    for created in report["created"]:
        kb = load_knowledge_base(Path(created["folder"]))
        assert kb.kb_id == created["kb_id"]
        assert len(kb.entries) == created["entry_count"]
    if sample.suffix == ".jsonl":
        assert report["chat_messages"] > 0
        assert report["chat_file"] is None
        assert not (root / "imports").exists()
        made = conversations_in(tmp_path / "home", load_project(root).id)
        assert made == [(report["conversation_id"], report["chat_messages"])]
    elif report["character"] is not None:
        # A card makes a knowledge base only of its book; one without lore makes none.
        assert report["character_file"], report
        card = json.loads(sample.read_bytes()) if sample.suffix == ".json" else None
        if card is not None:
            assert bool(report["created"]) == bool(card["data"].get("character_book")), report
    else:
        assert report["created"], report


def test_card_import_writes_the_character_preset_and_avatar(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    init_project(root)
    card = FIXTURES / "card_maren_v2_v3.png"
    result = kb_import(str(card), "--project", str(root), home=tmp_path / "home")
    assert result.returncode == 0, result.stderr
    assert "character 'Maren'" in result.stdout
    preset = json.loads((root / "presets" / "characters" / "Maren.json").read_text())
    assert preset["name"] == "Maren"
    assert (root / "presets" / "characters" / preset["avatar"]).read_bytes()[:8] == (
        b"\x89PNG\r\n\x1a\n"
    )


def test_chat_import_prints_the_conversation_it_made(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    init_project(root)
    chat = FIXTURES / "chat_maren_legacy_header.jsonl"
    result = kb_import(str(chat), "--project", str(root), home=tmp_path / "home")
    assert result.returncode == 0, result.stderr
    [(conversation_id, messages)] = conversations_in(tmp_path / "home", load_project(root).id)
    assert f"chat of {messages} messages -> conversation {conversation_id}" in result.stdout
    assert "warning" not in result.stdout


def test_a_chat_imported_without_a_project_joins_the_default_project(tmp_path: Path) -> None:
    home = tmp_path / "home"
    chat = FIXTURES / "chat_maren_modern_header.jsonl"
    result = kb_import(str(chat), "--json", home=home, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    default = load_project(home / "projects" / "default")
    assert [c for c, _ in conversations_in(home, default.id)] == [report["conversation_id"]]


def test_import_without_a_project_goes_to_the_global_folder(tmp_path: Path) -> None:
    home = tmp_path / "home"
    sample = FIXTURES / "world_info_lanternfall_v1.18.json"
    result = kb_import(str(sample), "--name", "Lanternfall", home=home, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "'Lanternfall'" in result.stdout
    assert load_knowledge_base(home / "knowledge" / "Lanternfall").kb_displayName == "Lanternfall"
    # Only a chat needs a project: none is made for a world info.
    assert not (home / "projects").exists()


def test_broken_file_names_the_file_and_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    init_project(root)
    bad = tmp_path / "broken.json"
    bad.write_text('{"entries": {"0": {"uid": 0, "key": "not a list"')
    before = (root / "project.json").read_text()
    result = kb_import(str(bad), "--project", str(root), home=tmp_path / "home")
    assert result.returncode == 1
    assert "broken.json" in result.stderr
    assert (root / "project.json").read_text() == before
    assert list((root / "knowledgebases").iterdir()) == []


def test_a_regex_key_that_does_not_compile_is_a_warning_naming_the_entry(tmp_path: Path) -> None:
    book = {
        "entries": {
            "0": {"uid": 0, "key": ["/drag(on/"], "comment": "Broken", "content": "x"},
            "1": {"uid": 1, "key": ["castle"], "comment": "Fine", "content": "y"},
        }
    }
    path = tmp_path / "book.json"
    path.write_text(json.dumps(book))
    result = kb_import(str(path), "--json", home=tmp_path / "home")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["created"][0]["entry_count"] == 2
    warning = next(w for w in report["warnings"] if "Broken" in w)
    assert "keywords" in warning
    assert "invalid regular expression" in warning


def _characters(root: Path) -> dict[str, str]:
    """The project's character presets: file stem → description."""
    folder = root / "presets" / "characters"
    return {p.stem: json.loads(p.read_text())["description"] for p in folder.glob("*.json")}


def test_a_card_here_already_writes_nothing_unless_the_user_says_update_or_keep_both(
    tmp_path: Path,
) -> None:
    root = tmp_path / "proj"
    init_project(root)
    home = tmp_path / "home"
    card = tmp_path / "Seraphina.json"
    book = [card_book_entry(0, ["glade"], "The glade is Seraphina's home.")]
    card.write_text(json.dumps(card_document("Seraphina", description="A guardian.", book=book)))
    first = kb_import(str(card), "--project", str(root), home=home)
    assert first.returncode == 0, first.stderr
    assert _characters(root) == {"Seraphina": "A guardian."}
    books = load_project(root).knowledgeBaseReferences

    again = kb_import(str(card), "--project", str(root), home=home)
    assert again.returncode == 0, again.stderr
    assert "already in your library as 'Seraphina'" in again.stdout
    assert _characters(root) == {"Seraphina": "A guardian."}
    assert load_project(root).knowledgeBaseReferences == books

    changed = tmp_path / "Seraphina_new.json"
    document = card_document("Seraphina", description="A guardian who left.", book=book)
    changed.write_text(json.dumps(document))
    asked = kb_import(str(changed), "--project", str(root), home=home)
    assert asked.returncode == 1
    assert "--update" in asked.stderr and "'Seraphina'" in asked.stderr
    assert _characters(root) == {"Seraphina": "A guardian."}

    both_flags = kb_import(
        str(changed), "--project", str(root), "--update", "--keep-both", home=home
    )
    assert both_flags.returncode == 1 and "give one" in both_flags.stderr

    updated = kb_import(str(changed), "--project", str(root), "--update", home=home)
    assert updated.returncode == 0, updated.stderr
    assert "character 'Seraphina' updated" in updated.stdout
    assert _characters(root) == {"Seraphina": "A guardian who left."}

    kept = kb_import(str(card), "--project", str(root), "--keep-both", home=home)
    assert kept.returncode == 0, kept.stderr
    assert _characters(root) == {"Seraphina": "A guardian who left.", "Seraphina_2": "A guardian."}
