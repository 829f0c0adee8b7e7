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


def test_project_init_from_a_template_copies_its_files_and_records_it(tmp_path: Path) -> None:
    # Seed 000 section 5: an interaction template sets a new project up, then lets it go.
    template = tmp_path / "tavern-template"
    assert storyloom("project", "init", str(template), "--name", "Tavern").returncode == 0
    (template / "workflows" / "turn.json").write_text('{"nodes": []}', "utf-8")
    data = json.loads((template / "project.json").read_text("utf-8"))
    data["description"] = "A tavern to start from"
    (template / "project.json").write_text(json.dumps(data), "utf-8")

    result = storyloom(
        "project", "init", str(tmp_path / "mine"), "--name", "Mine", "--template", str(template)
    )
    assert result.returncode == 0, result.stderr
    shown = json.loads(storyloom("project", "show", str(tmp_path / "mine")).stdout)
    assert shown["templateUsed"] == data["id"]
    assert shown["id"] != data["id"]
    assert (shown["name"], shown["description"]) == ("Mine", "A tavern to start from")
    assert (tmp_path / "mine" / "workflows" / "turn.json").read_text("utf-8") == '{"nodes": []}'
    # The new project goes its own way: the template is left as it was.
    (tmp_path / "mine" / "workflows" / "turn.json").unlink()
    assert (template / "workflows" / "turn.json").is_file()

    again = storyloom("project", "init", str(tmp_path / "mine"), "--template", str(template))
    assert again.returncode == 1
    assert "project.json" in again.stderr and "templateUsed" in again.stderr

    missing = storyloom("project", "init", str(tmp_path / "x"), "--template", str(tmp_path))
    assert missing.returncode == 1
    assert "no project.json here" in missing.stderr


def test_a_custom_preferred_view_is_refused_with_the_reason(tmp_path: Path) -> None:
    assert storyloom("project", "init", str(tmp_path / "p")).returncode == 0
    assert not (tmp_path / "p" / "scenes").exists() and not (tmp_path / "p" / "ui").exists()
    data = json.loads((tmp_path / "p" / "project.json").read_text("utf-8"))
    data["preferredView"] = "custom"
    (tmp_path / "p" / "project.json").write_text(json.dumps(data), "utf-8")
    result = storyloom("project", "show", str(tmp_path / "p"))
    assert result.returncode == 1
    assert "project.json" in result.stderr and "preferredView" in result.stderr
    assert "Custom UI" in result.stderr
