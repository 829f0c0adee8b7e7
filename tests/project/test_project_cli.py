"""``storyloom project`` and ``storyloom kb`` commands, run as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema

from storyloom.knowledge.knowledge_base import KnowledgeBase


def storyloom(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "storyloom", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def test_project_init_creates_a_project_and_show_prints_it(tmp_path: Path) -> None:
    result = storyloom("project", "init", str(tmp_path / "saga"), "--name", "Saga")
    assert result.returncode == 0, result.stderr
    assert "created (Saga" in result.stdout
    shown = storyloom("project", "show", str(tmp_path / "saga"))
    assert json.loads(shown.stdout)["name"] == "Saga"


def test_project_show_on_a_plain_folder_says_how_to_create_one(tmp_path: Path) -> None:
    result = storyloom("project", "show", str(tmp_path))
    assert result.returncode == 1
    assert "storyloom project init" in result.stderr


def test_kb_schema_prints_the_json_schema_of_knowledge_json() -> None:
    result = storyloom("kb", "schema")
    assert result.returncode == 0, result.stderr
    schema = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(KnowledgeBase.model_validate({"entries": [{"id": "a"}]}).to_json(), schema)
    assert "activation_criteria" in json.dumps(schema)
