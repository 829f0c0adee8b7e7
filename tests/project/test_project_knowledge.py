"""project.json, the layout, and how a project's knowledge-base references resolve."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from storyloom.core.errors import FileFormatError
from storyloom.knowledge.catalog import KnowledgeCatalog
from storyloom.knowledge.global_library import global_folders
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.project.project_file import (
    LAYOUT_DIRS,
    ProjectFile,
    init_project,
    load_project,
    save_project,
)
from storyloom.project.project_knowledge import (
    add_global_knowledge_base,
    add_local_knowledge_base,
    open_project_knowledge,
    reference_global_knowledge_base,
)


def test_init_creates_the_seed_layout_and_project_json(tmp_path: Path) -> None:
    root = tmp_path / "My Story"
    project = init_project(root)
    assert project.name == "My Story"
    for folder in LAYOUT_DIRS:
        assert (root / folder).is_dir()
    data = json.loads((root / "project.json").read_text())
    assert data["schemaVersion"] == "2.0"
    assert data["knowledgeBaseReferences"] == []
    assert data["preferredView"] == "editor"
    assert init_project(root).id == project.id  # a second init keeps the project


def test_broken_project_json_names_the_field(tmp_path: Path) -> None:
    (tmp_path / "project.json").write_text(
        json.dumps({"knowledgeBaseReferences": [{"id": "x", "type": "local"}]})
    )
    with pytest.raises(FileFormatError) as caught:
        load_project(tmp_path)
    assert caught.value.problems[0].field == "knowledgeBaseReferences[0]"
    assert "path" in caught.value.problems[0].reason


def test_local_reference_cannot_leave_the_project(tmp_path: Path) -> None:
    (tmp_path / "project.json").write_text(
        json.dumps({"knowledgeBaseReferences": [{"id": "x", "path": "../elsewhere"}]})
    )
    with pytest.raises(FileFormatError, match="inside the project"):
        load_project(tmp_path)


def _setup(tmp_path: Path) -> tuple[Path, list[Path]]:
    root = tmp_path / "proj"
    init_project(root)
    home = tmp_path / "home"
    folders = global_folders(home, [str(tmp_path / "shared-lore")])
    return root, folders


def test_references_resolve_by_reference_id_kb_id_alias_and_display_name(tmp_path: Path) -> None:
    root, folders = _setup(tmp_path)
    local = KnowledgeBase(kb_id="kb_local", kb_displayName="Backstory")
    add_local_knowledge_base(root, local, name="Hero lore")
    world = KnowledgeBase(kb_id="kb_world", kb_displayName="Fantasy World")
    add_global_knowledge_base(folders[1], world)
    reference_global_knowledge_base(root, world)

    knowledge = open_project_knowledge(root, folders)
    assert knowledge.problems == []
    catalog = knowledge.catalog
    ref_id = load_project(root).knowledgeBaseReferences[0].id
    assert [b.kb_id for b in catalog.find(ref_id)] == ["kb_local"]
    assert [b.kb_id for b in catalog.find("kb_world")] == ["kb_world"]
    assert [b.kb_id for b in catalog.find("Hero lore")] == ["kb_local"]
    assert [b.kb_id for b in catalog.find("Fantasy World")] == ["kb_world"]
    assert catalog.get("kb_world") is not None
    assert catalog.get("kb_world").scope == "global"  # type: ignore[union-attr]


def test_project_alias_wins_over_a_global_display_name(tmp_path: Path) -> None:
    root, folders = _setup(tmp_path)
    add_local_knowledge_base(root, KnowledgeBase(kb_id="kb_mine", kb_displayName="x"), name="Lore")
    add_global_knowledge_base(folders[0], KnowledgeBase(kb_id="kb_other", kb_displayName="Lore"))
    catalog = open_project_knowledge(root, folders).catalog
    assert [b.kb_id for b in catalog.find("Lore")] == ["kb_mine"]


def test_same_display_name_in_two_global_kbs_is_ambiguous(tmp_path: Path) -> None:
    root, folders = _setup(tmp_path)
    add_global_knowledge_base(folders[0], KnowledgeBase(kb_id="kb_a", kb_displayName="Common"))
    add_global_knowledge_base(folders[1], KnowledgeBase(kb_id="kb_b", kb_displayName="Common"))
    catalog = open_project_knowledge(root, folders).catalog
    assert sorted(b.kb_id for b in catalog.find("Common")) == ["kb_a", "kb_b"]


def test_duplicate_kb_id_across_global_folders_is_reported_and_first_wins(tmp_path: Path) -> None:
    root, folders = _setup(tmp_path)
    add_global_knowledge_base(folders[0], KnowledgeBase(kb_id="kb_same", kb_displayName="One"))
    add_global_knowledge_base(folders[1], KnowledgeBase(kb_id="kb_same", kb_displayName="Two"))
    knowledge = open_project_knowledge(root, folders)
    assert knowledge.catalog.get("kb_same").kb.kb_displayName == "One"  # type: ignore[union-attr]
    assert any("kb_same is already used" in p for p in knowledge.problems)


def test_missing_or_broken_kb_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    root, folders = _setup(tmp_path)
    folder = add_local_knowledge_base(root, KnowledgeBase(kb_id="kb_ok"), name="ok")
    broken = add_local_knowledge_base(root, KnowledgeBase(kb_id="kb_broken"), name="broken")
    (broken / "knowledge.json").write_text('{"entries": 5}')
    project = load_project(root)
    project.knowledgeBaseReferences.append(
        project.knowledgeBaseReferences[0].model_copy(update={"id": "gone", "path": "nope/"})
    )
    save_project(root, project)
    knowledge = open_project_knowledge(root, folders)
    assert [b.kb_id for b in knowledge.catalog.bases] == ["kb_ok"]
    assert any("entries" in p and "broken" in p for p in knowledge.problems)
    assert any("nope" in p and "does not exist" in p for p in knowledge.problems)
    assert (folder / "knowledge.json").is_file()


def test_unknown_project_fields_are_kept(tmp_path: Path) -> None:
    init_project(tmp_path)
    data = json.loads((tmp_path / "project.json").read_text())
    data["customThing"] = [1]
    (tmp_path / "project.json").write_text(json.dumps(data))
    save_project(tmp_path, load_project(tmp_path))
    assert json.loads((tmp_path / "project.json").read_text())["customThing"] == [1]


def test_in_memory_catalog_finds_by_display_name() -> None:
    catalog = KnowledgeCatalog.of([KnowledgeBase(kb_id="k1", kb_displayName="Eldoria")])
    assert catalog.find("Eldoria")[0].kb_id == "k1"
    assert catalog.find("nothing") == []


def test_seed_example_project_json_loads() -> None:
    example = {
        "id": "uuid",
        "name": "My Project",
        "description": "Project description.",
        "version": "1.0.0",
        "createdAt": "2026-01-01T00:00:00Z",
        "updatedAt": "2026-01-01T00:00:00Z",
        "templateUsed": "optional_template_id",
        "preferredView": "editor",
        "schemaVersion": "2.0",
        "knowledgeBaseReferences": [
            {
                "id": "kb_local_char_backstory",
                "type": "local",
                "path": "knowledgebases/character_specific_lore/",
                "name": "Character Specific Backstory",
                "source_id": None,
            },
            {
                "id": "kb_global_fantasy_world",
                "type": "global",
                "path": None,
                "name": "Generic Fantasy World Setting",
                "source_id": "global_kb_registry_id_001",
            },
        ],
        "customMetadata": {},
    }
    project = ProjectFile.model_validate(example)
    assert project.reference("kb_global_fantasy_world").source_id == (  # type: ignore[union-attr]
        "global_kb_registry_id_001"
    )
