"""``storyloom kb export`` / ``kb import`` of packages and ``kb search``, end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.project.project_file import init_project
from storyloom.project.project_knowledge import add_local_knowledge_base


def storyloom(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "storyloom", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    init_project(root)
    kb = KnowledgeBase.model_validate(
        {
            "kb_id": "kb_tea",
            "kb_displayName": "Tea house",
            "entries": [
                {"id": "a", "displayName": "Oolong", "content": {"value": "乌龙茶产自福建。"}},
                {"id": "b", "displayName": "Kettle", "content": {"value": "A copper kettle."}},
            ],
        }
    )
    add_local_knowledge_base(root, kb, name="Tea")
    return root


def test_package_export_then_import_elsewhere_keeps_entries(tmp_path: Path) -> None:
    root = _project(tmp_path)
    home = tmp_path / "home"
    package = tmp_path / "tea.ctkbz"
    exported = storyloom(
        "kb", "export", "Tea", "-o", str(package), "--project", str(root), home=home
    )
    assert exported.returncode == 0, exported.stderr
    assert "2 entries" in exported.stdout

    other = tmp_path / "other"
    init_project(other)
    imported = storyloom("kb", "import", str(package), "--project", str(other), "--json", home=home)
    assert imported.returncode == 0, imported.stderr
    report = json.loads(imported.stdout)
    assert report["kind"] == "package"
    assert report["created"][0]["kb_id"] == "kb_tea"
    assert report["created"][0]["entry_count"] == 2

    again = storyloom("kb", "import", str(package), "--project", str(other), home=home)
    assert again.returncode == 1
    assert "already here" in again.stderr


def test_world_info_export_is_sillytavern_json(tmp_path: Path) -> None:
    root = _project(tmp_path)
    out = tmp_path / "tea.json"
    result = storyloom(
        "kb", "export", "kb_tea", "-o", str(out), "--format", "st-worldinfo",
        "--project", str(root), home=tmp_path / "home",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert sorted(e["comment"] for e in data["entries"].values()) == ["Kettle", "Oolong"]


def test_search_embeds_new_entries_and_finds_chinese_by_keyword(tmp_path: Path) -> None:
    root = _project(tmp_path)
    result = storyloom(
        "kb", "search", "乌龙茶", "--project", str(root), "--json", home=tmp_path / "home"
    )
    assert result.returncode == 0, result.stderr
    hits = json.loads(result.stdout)
    assert hits[0]["entry_id"] == "a"
    assert "keyword" in hits[0]["matched_by"]
    assert "vector" in hits[0]["matched_by"]


def test_unknown_kb_name_is_one_clear_line(tmp_path: Path) -> None:
    root = _project(tmp_path)
    result = storyloom(
        "kb",
        "export",
        "Nope",
        "-o",
        str(tmp_path / "x"),
        "--project",
        str(root),
        home=tmp_path / "home",
    )
    assert result.returncode == 1
    assert "no knowledge base named 'Nope'" in result.stderr
