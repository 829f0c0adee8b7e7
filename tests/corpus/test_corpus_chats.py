"""Every chat of the corpus goes into the turn tree and comes back byte for byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from storyloom.chat.store.st_chat import export_st_chat, import_st_chat
from storyloom.chat.store.turn_tree import TurnTree
from storyloom.sillytavern.chat_log import parse_chat_jsonl
from storyloom.store.database import Database


def lines_of(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.split("\n") if line.strip()]


def test_every_chat_imports_with_its_swipes_and_exports_back_line_by_line(
    corpus_chat: Path, tmp_path: Path
) -> None:
    tree = TurnTree(Database(tmp_path / "chat.sqlite3"))
    text = corpus_chat.read_text(encoding="utf-8")
    messages = [o for o in lines_of(text) if "mes" in o]
    imported = import_st_chat(tree, parse_chat_jsonl(text, corpus_chat), project_id="p")
    path = tree.active_path(imported.conversation_id)
    assert [m.content for m in path] == [o["mes"] for o in messages]
    counts = tree.sibling_counts([m.id for m in path])
    assert [counts[m.id] for m in path] == [max(len(o.get("swipes") or []), 1) for o in messages]
    exported = export_st_chat(tree, imported.conversation_id)
    for mine, theirs in zip(lines_of(exported), lines_of(text), strict=True):
        # key order too, at every level
        assert json.dumps(mine, ensure_ascii=False) == json.dumps(theirs, ensure_ascii=False)
    assert exported == text  # SillyTavern's own bytes: no spaces, no final newline
