"""``storyloom kb import`` on every file of the corpus, into a project."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from storyloom.chat.store.turn_tree import TurnTree
from storyloom.knowledge.knowledge_base import load_knowledge_base
from storyloom.project.project_file import init_project, load_project
from storyloom.store.database import Database


def kb_import(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "storyloom", "kb", "import", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def conversations_in(home: Path, project_id: str) -> list[tuple[str, int]]:
    """(id, messages on the shown path) of the project's conversations in ``home``."""
    database = Database.in_home(home)
    try:
        return [(c.id, c.message_count) for c in TurnTree(database).conversations(project_id)]
    finally:
        database.close()


def test_every_file_imports_into_a_project_and_reports_what_it_made(
    corpus_file: Path, tmp_path: Path
) -> None:
    root = tmp_path / "proj"
    init_project(root)
    result = kb_import(str(corpus_file), "--project", str(root), "--json", home=tmp_path / "home")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    references = load_project(root).knowledgeBaseReferences
    assert len(references) == len(report["created"])
    for created in report["created"]:
        kb = load_knowledge_base(Path(created["folder"]))
        assert kb.kb_id == created["kb_id"]
        assert len(kb.entries) == created["entry_count"]
    if report["kind"] == "chat":
        assert report["chat_messages"] > 0
        assert report["chat_file"] is None
        assert not (root / "imports").exists()
        made = conversations_in(tmp_path / "home", load_project(root).id)
        assert made == [(report["conversation_id"], report["chat_messages"])]
    elif report["character"] is not None:
        # A card is a character; it makes a knowledge base only of its own book, if any.
        assert report["character_file"], report
        assert len(report["created"]) <= 1, report
    else:
        assert report["created"], report
