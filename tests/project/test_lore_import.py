"""Importing books and cards into a project: names from the file, a card's book bound to
its character, duplicates found by their entries and stored once unless asked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from storyloom.knowledge.knowledge_base import KnowledgeBase, load_knowledge_base
from storyloom.project.knowledge_import import entries_fingerprint, import_knowledge_file
from storyloom.project.project_file import init_project, load_project
from storyloom.project.project_knowledge import open_project_knowledge
from storyloom.testing.st_documents import (
    card_book_entry,
    card_document,
    world_info_document,
    world_info_entry,
)

BOOK = world_info_document(
    [
        world_info_entry(0, ["Qin"], "The Qin unified the warring states."),
        world_info_entry(1, ["Xianyang"], "Xianyang was the Qin capital."),
    ]
)


def write(tmp_path: Path, name: str, document: object) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return path


def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    init_project(root)
    return root


def existing(root: Path, tmp_path: Path) -> list[KnowledgeBase]:
    return open_project_knowledge(root, [tmp_path / "global"]).catalog.knowledge_bases()


def test_a_book_takes_the_name_it_carries_not_the_file_name(tmp_path: Path) -> None:
    root = project(tmp_path)
    named = write(tmp_path, "download (3).json", {**BOOK, "name": "Qin History"})
    converted = write(
        tmp_path, "export.json", {**BOOK, "originalData": {"name": "楚橘亦秦枳", "entries": []}}
    )
    plain = write(tmp_path, "Eldoria.json", BOOK)
    names = [
        import_knowledge_file(p, project_dir=root, global_folder=tmp_path / "g").created[0]
        for p in (named, converted, plain)
    ]
    # Its own name, else the one SillyTavern kept from the card it came from, else the
    # file's (SillyTavern names a world by its file).
    assert [c.display_name for c in names] == ["Qin History", "楚橘亦秦枳", "Eldoria"]


def test_a_world_book_already_here_is_reported_and_stored_once_unless_both_are_asked_for(
    tmp_path: Path,
) -> None:
    root = project(tmp_path)
    first = write(tmp_path, "qin.json", {**BOOK, "name": "Qin History"})
    again = write(tmp_path, "qin-copy.json", {**BOOK, "name": "Qin History (2)"})
    made = import_knowledge_file(first, project_dir=root, global_folder=tmp_path / "g")
    references = load_project(root).knowledgeBaseReferences
    kept = import_knowledge_file(
        again, project_dir=root, global_folder=tmp_path / "g", existing=existing(root, tmp_path)
    )
    assert kept.created == []
    [duplicate] = kept.duplicates
    assert (duplicate.display_name, duplicate.existing_kb_id, duplicate.kept) == (
        "Qin History (2)",
        made.created[0].kb_id,
        "existing",
    )
    assert load_project(root).knowledgeBaseReferences == references
    both = import_knowledge_file(
        again,
        project_dir=root,
        global_folder=tmp_path / "g",
        existing=existing(root, tmp_path),
        on_duplicate="keep_both",
    )
    assert [c.display_name for c in both.created] == ["Qin History (2)"]
    assert both.duplicates[0].kept == "both"
    assert both.duplicates[0].new_kb_id == both.created[0].kb_id
    assert len(load_project(root).knowledgeBaseReferences) == len(references) + 1


def test_an_edited_book_is_not_a_duplicate(tmp_path: Path) -> None:
    root = project(tmp_path)
    made = import_knowledge_file(
        write(tmp_path, "qin.json", BOOK), project_dir=root, global_folder=tmp_path / "g"
    )
    kb = load_knowledge_base(Path(made.created[0].folder))
    edited = world_info_document(
        [
            world_info_entry(0, ["Qin"], "The Qin unified the warring states in 221 BC."),
            world_info_entry(1, ["Xianyang"], "Xianyang was the Qin capital."),
        ]
    )
    summary = import_knowledge_file(
        write(tmp_path, "qin2.json", edited),
        project_dir=root,
        global_folder=tmp_path / "g",
        existing=[kb],
    )
    assert summary.duplicates == [] and len(summary.created) == 1
    assert entries_fingerprint(kb) != entries_fingerprint(
        load_knowledge_base(Path(summary.created[0].folder))
    )


def test_a_cards_book_is_bound_to_its_character_and_not_imported_twice(tmp_path: Path) -> None:
    root = project(tmp_path)
    card = card_document(
        "Seraphina",
        book=[card_book_entry(0, ["glade"], "The glade is Seraphina's home.")],
        book_name="Seraphina's Forest",
    )
    path = write(tmp_path, "main_Seraphina_v2.json", card)
    first = import_knowledge_file(path, project_dir=root, global_folder=tmp_path / "g")
    assert [c.display_name for c in first.created] == ["Seraphina's Forest"]
    book_id = first.created[0].kb_id
    character = json.loads(Path(first.character_file or "").read_text(encoding="utf-8"))
    assert character["name"] == "Seraphina"
    assert character["knowledge_bases"] == [book_id]
    second = import_knowledge_file(
        path, project_dir=root, global_folder=tmp_path / "g", existing=existing(root, tmp_path)
    )
    # Nothing new in the knowledge bases; the second character is bound to the same book.
    assert second.created == []
    assert [d.existing_kb_id for d in second.duplicates] == [book_id]
    again = json.loads(Path(second.character_file or "").read_text(encoding="utf-8"))
    assert again["knowledge_bases"] == [book_id]


def test_a_world_book_is_bound_to_nothing(tmp_path: Path) -> None:
    root = project(tmp_path)
    import_knowledge_file(
        write(tmp_path, "qin.json", BOOK), project_dir=root, global_folder=tmp_path / "g"
    )
    assert load_project(root).globalKnowledgeBases == []


def test_the_command_line_reports_a_book_already_here_and_keeps_both_on_request(
    tmp_path: Path,
) -> None:
    root = project(tmp_path)
    path = write(tmp_path, "qin.json", {**BOOK, "name": "Qin History"})

    def kb_import(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "storyloom", "kb", "import", str(path), "--project",
             str(root), "--home", str(tmp_path / "home"), *args],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    assert kb_import().returncode == 0
    again = kb_import()
    assert again.returncode == 0, again.stderr
    assert "'Qin History' has the entries of 'Qin History'" in again.stdout
    assert "not imported again" in again.stdout
    assert len(load_project(root).knowledgeBaseReferences) == 1
    both = kb_import("--keep-both")
    assert "kept both" in both.stdout
    assert len(load_project(root).knowledgeBaseReferences) == 2
