"""A key far past any real one (~700,000 characters) once killed ``storyloom kb import``
(SIGSEGV in the keyword automaton); now every path refuses it with a clear error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from storyloom.core.errors import FileFormatError, InvalidInput
from storyloom.knowledge.activation import ActivationEngine
from storyloom.knowledge.activation_settings import ActivationSettings
from storyloom.knowledge.caiu import CAIU, MAX_KEY_CHARS
from storyloom.knowledge.keyword_matcher import KeyTooLongError, KeywordMatcher
from storyloom.knowledge.knowledge_base import KnowledgeBase, parse_knowledge_base
from storyloom.knowledge.st_import import import_sillytavern
from storyloom.project.project_file import init_project

HUGE = 700_000


def _book(key: str) -> dict[str, object]:
    return {
        "entries": {
            "0": {"uid": 0, "key": ["castle"], "comment": "Fine", "content": "x"},
            "1": {"uid": 1, "key": ["tower", key], "comment": "Huge", "content": "y"},
        }
    }


def test_kb_import_of_a_huge_key_exits_with_an_error_naming_the_entry(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    init_project(root)
    before = (root / "project.json").read_text()
    book = tmp_path / "huge_key.json"
    book.write_text(json.dumps(_book("a" * HUGE)))
    command = [sys.executable, "-m", "storyloom", "kb", "import", str(book)]
    result = subprocess.run(
        [*command, "--project", str(root), "--home", str(tmp_path / "home")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, (result.returncode, result.stderr[-2000:])
    assert "huge_key.json" in result.stderr
    assert "entries.1.key[1]" in result.stderr
    assert (root / "project.json").read_text() == before
    assert list((root / "knowledgebases").iterdir()) == []


def test_a_card_book_key_past_the_limit_refuses_the_card(tmp_path: Path) -> None:
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Ava",
            "character_book": {"entries": [{"keys": ["b" * (MAX_KEY_CHARS + 1)], "content": "z"}]},
        },
    }
    path = tmp_path / "card.json"
    path.write_text(json.dumps(card))
    with pytest.raises(FileFormatError, match=r"character_book\.entries\[0\]\.keys\[0\]"):
        import_sillytavern(path)


def test_a_key_at_the_limit_still_imports(tmp_path: Path) -> None:
    path = tmp_path / "book.json"
    path.write_text(json.dumps(_book("c" * MAX_KEY_CHARS)))
    kb = import_sillytavern(path).knowledge_bases[0]
    assert kb.entries[1].activation_criteria.keywords[1] == "c" * MAX_KEY_CHARS


def test_the_editor_schema_and_model_refuse_a_key_past_the_limit() -> None:
    entry = CAIU(id="e1", content={"mime_type": "text/plain", "value": "x"})
    data = KnowledgeBase(entries=[entry]).to_json()
    data["entries"][0]["activation_criteria"]["secondary_keywords"] = ["d" * (MAX_KEY_CHARS + 1)]
    with pytest.raises(InvalidInput, match=r"activation_criteria\.secondary_keywords"):
        parse_knowledge_base(data, "knowledge.json")
    schema = KnowledgeBase.model_json_schema(by_alias=True)
    keywords = schema["$defs"]["ActivationCriteria"]["properties"]["keywords"]
    assert keywords["items"]["maxLength"] == MAX_KEY_CHARS


def test_the_matcher_refuses_a_huge_key_whatever_path_it_took() -> None:
    matcher = KeywordMatcher()
    with pytest.raises(KeyTooLongError):
        matcher.add_plain("e" * HUGE, case_sensitive=False, whole_words=True)
    with pytest.raises(KeyTooLongError):
        matcher.add_regex("/" + "f" * HUGE + "/i")
    # An entry built past validation (model_construct) is reported, not built.
    entry = CAIU(id="e1", content={"mime_type": "text/plain", "value": "x"})
    entry.activation_criteria.keywords = ["g" * HUGE]
    engine = ActivationEngine([KnowledgeBase(entries=[entry])], ActivationSettings())
    assert [p.entry_id for p in engine.problems] == ["e1"]
