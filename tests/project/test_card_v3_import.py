"""``storyloom kb import`` of Character Card V3 files: a standalone ``lorebook_v3`` book,
and a V3 PNG card whose assets ride in ``chara-ext-asset_`` chunks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from storyloom.knowledge.caiu import Placement
from storyloom.knowledge.knowledge_base import load_knowledge_base
from storyloom.project.project_file import init_project, load_project

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sillytavern"


def kb_import(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "storyloom", "kb", "import", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_lorebook_v3_file_imports_as_a_knowledge_base_with_its_warnings(
    tmp_path: Path,
) -> None:
    root = tmp_path / "proj"
    init_project(root)
    sample = FIXTURES / "lorebook_v3_drifting_isles.json"
    result = kb_import(str(sample), "--project", str(root), "--json", home=tmp_path / "home")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    (created,) = report["created"]
    assert created["display_name"] == "Drifting Isles"
    kb = load_knowledge_base(Path(created["folder"]))
    assert len(load_project(root).knowledgeBaseReferences) == 1
    isle = kb.entries[0]
    assert (isle.usage_metadata.placement, isle.usage_metadata.depth) == (Placement.AT_DEPTH, 1)
    assert isle.text.startswith("The isles drift")
    assert kb.token_budget == 400
    warnings = "\n".join(report["warnings"])
    assert "decorator @@sparkle (unknown decorator) ignored" in warnings
    assert "this book sets scan_depth 4; SillyTavern ignores it" in warnings


def test_png_asset_chunks_are_stored_beside_the_character(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    init_project(root)
    sample = FIXTURES / "card_isa_v3_decorators_assets.png"
    result = kb_import(str(sample), "--project", str(root), "--json", home=tmp_path / "home")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    preset_path = Path(report["character_file"])
    preset = json.loads(preset_path.read_text(encoding="utf-8"))
    assert preset["nickname"] == "Isa"
    assert preset["assets"][1]["uri"] == "__asset:0"
    asset = preset_path.with_suffix(".assets") / "__asset" / "0"
    assert asset.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The avatar is the image without the card and asset chunks.
    avatar = (preset_path.parent / preset["avatar"]).read_bytes()
    assert b"chara-ext-asset_" not in avatar and b"ccv3" not in avatar
