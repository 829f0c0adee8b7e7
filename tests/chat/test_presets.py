"""The PersonaLab preset library: characters (from SillyTavern cards and PersonaLab files),
backgrounds and summaries as files, and the snapshots conversations copy from them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from storyloom.chat.personalab.library import (
    BackgroundPreset,
    OutlinePoint,
    PresetLibrary,
    SummaryPoint,
    SummaryPreset,
    background_snapshot,
    character_snapshot,
    iso_utc,
)
from storyloom.chat.store.turn_tree import ChatError
from storyloom.core.errors import FileFormatError, NotFound
from storyloom.sillytavern.character import CharacterDefinition
from tests.chat.conftest import import_card

NOW = datetime(2025, 10, 16, 10, 0, 0, tzinfo=UTC)

PERSONALAB_CHARACTER = {
    "character_id": "alserqi",
    "name": "Alserqi",
    "description": "废土黑帮老大，被背叛后寻求复仇",
    "avatar": "path/to/avatar.png",
    "base_persona": "Alserqi，废土黑帮老大，曾经掌控北区，被心腹背叛后失去一切。",
    "created_at": "2025-10-10T10:00:00Z",
    "updated_at": "2025-10-15T15:30:00Z",
}

PERSONALAB_BACKGROUND = {
    "background_id": "wasteland",
    "name": "废土复仇记",
    "description": "核战后的废土世界，资源匮乏，强者为王",
    "world_setting": "核战后的废土世界。你是一个被背叛的前帮派老大，现在要复仇。",
    "story_outline": [
        {"index": 2, "content": "潜入敌人据点"},
        {"index": 1, "content": "发现背叛者的线索"},
        {"index": 3, "content": "与仇人对峙"},
    ],
    "created_at": "2025-10-10T10:00:00Z",
    "updated_at": "2025-10-15T15:30:00Z",
    "mood": "grim",
}

PERSONALAB_SUMMARY = {
    "summary_id": "conv_001_summary",
    "source_conversation": "conv_001",
    "created_at": "2025-10-16T12:00:00Z",
    "summaries": [
        {"index": 1, "content": "情报交换与信任建立。"},
        {"index": 2, "content": "制定复仇计划。"},
    ],
}


def write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def test_imported_sillytavern_card_is_listed_and_snapshots_its_persona(
    project: Path, library: PresetLibrary
) -> None:
    character_id = import_card(project, "card_maren_v2_v3.png")

    listing = library.characters()
    assert [(c.id, c.name, c.avatar, c.error) for c in listing] == [
        (character_id, "Maren", f"{character_id}.png", None)
    ]
    preset = library.character(character_id)
    snapshot = character_snapshot(character_id, preset, NOW)

    assert snapshot.source_preset == character_id
    assert snapshot.snapshot_created_at == "2025-10-16T10:00:00Z"
    assert snapshot.base_persona == preset.description.strip()
    assert "Maren" in snapshot.base_persona
    assert snapshot.evolved_persona == ""
    assert snapshot.card["name"] == "Maren"
    assert snapshot.card["first_mes"] == preset.first_mes
    assert "source_card" not in snapshot.card


def test_base_persona_joins_description_and_personality_without_an_explicit_one(
    library: PresetLibrary,
) -> None:
    preset = CharacterDefinition(
        name="Mira", description="A ferry pilot.", personality="Wry, loyal."
    )
    character_id = library.save_character(None, preset)

    snapshot = character_snapshot(character_id, library.character(character_id), NOW)

    assert snapshot.base_persona == "A ferry pilot.\n\nWry, loyal."


def test_personalab_character_file_reads_with_its_base_persona_and_keeps_its_keys(
    project: Path, library: PresetLibrary
) -> None:
    write(project / "presets" / "characters" / "alserqi.json", PERSONALAB_CHARACTER)

    preset = library.character("alserqi")
    snapshot = character_snapshot("alserqi", preset, NOW)
    assert snapshot.base_persona == PERSONALAB_CHARACTER["base_persona"]
    assert library.characters()[0].description == PERSONALAB_CHARACTER["description"]

    library.save_character("alserqi_copy", preset)
    saved = json.loads((project / "presets/characters/alserqi_copy.json").read_text("utf-8"))
    assert saved["base_persona"] == PERSONALAB_CHARACTER["base_persona"]
    assert saved["created_at"] == "2025-10-10T10:00:00Z"
    assert saved["character_id"] == "alserqi_copy"


def test_editing_a_preset_leaves_an_earlier_snapshot_unchanged(library: PresetLibrary) -> None:
    character_id = library.save_character("mira", CharacterDefinition(name="Mira", description="A"))
    before = character_snapshot(character_id, library.character(character_id), NOW)

    library.save_character(character_id, CharacterDefinition(name="Mira", description="B"))

    assert before.base_persona == "A"
    assert before.card["description"] == "A"
    assert character_snapshot(character_id, library.character(character_id), NOW).base_persona == (
        "B"
    )


def test_new_character_ids_come_from_the_name_and_do_not_overwrite(
    library: PresetLibrary,
) -> None:
    first = library.save_character(None, CharacterDefinition(name="Mira Vale"))
    second = library.save_character(None, CharacterDefinition(name="Mira Vale"))

    assert first == "Mira_Vale"
    assert second == "Mira_Vale_2"
    assert [c.id for c in library.characters()] == ["Mira_Vale", "Mira_Vale_2"]


@pytest.mark.parametrize("bad_id", ["../evil", "a/b", "a\\b", "..", ".hidden", ""])
def test_ids_with_path_separators_are_refused_and_nothing_is_written(
    project: Path, library: PresetLibrary, bad_id: str
) -> None:
    with pytest.raises(ChatError, match="not allowed"):
        library.save_character(bad_id, CharacterDefinition(name="X"))
    with pytest.raises(ChatError, match="not allowed"):
        library.character(bad_id)

    assert not (project / "evil.json").exists()
    assert not (project / "presets").exists() or not any((project / "presets").rglob("*.json"))


def test_a_bad_character_file_names_file_and_field_and_is_listed_with_its_error(
    project: Path, library: PresetLibrary
) -> None:
    folder = project / "presets" / "characters"
    write(folder / "good.json", {"name": "Good"})
    write(folder / "nameless.json", {"description": "no name", "tags": 5})
    (folder / "broken.json").write_text("{not json", encoding="utf-8")

    with pytest.raises(FileFormatError) as nameless:
        library.character("nameless")
    assert nameless.value.path == folder / "nameless.json"
    assert {p.field for p in nameless.value.problems} == {"name", "tags"}
    with pytest.raises(FileFormatError, match="not valid JSON"):
        library.character("broken")

    listing = {c.id: c for c in library.characters()}
    assert listing["good"].error is None
    assert listing["nameless"].error is not None and "nameless.json" in listing["nameless"].error
    assert listing["broken"].error is not None and "line 1" in listing["broken"].error
    assert {(p.kind, p.id) for p in library.problems()} == {
        ("characters", "nameless"),
        ("characters", "broken"),
    }


def test_missing_preset_is_not_found(library: PresetLibrary) -> None:
    with pytest.raises(NotFound, match="nobody"):
        library.character("nobody")
    with pytest.raises(NotFound):
        library.background("nowhere")
    with pytest.raises(NotFound):
        library.delete("summaries", "none")


def test_personalab_background_reads_sorted_keeps_unknown_keys_and_snapshots(
    project: Path, library: PresetLibrary
) -> None:
    write(project / "presets" / "backgrounds" / "wasteland.json", PERSONALAB_BACKGROUND)

    background = library.background("wasteland")
    assert [p.index for p in background.story_outline] == [1, 2, 3]
    assert background.model_extra == {"mood": "grim"}

    snapshot = background_snapshot(background)
    assert snapshot.source_preset == "wasteland"
    assert snapshot.world_setting == PERSONALAB_BACKGROUND["world_setting"]
    assert snapshot.story_outline == [
        {"index": 1, "content": "发现背叛者的线索"},
        {"index": 2, "content": "潜入敌人据点"},
        {"index": 3, "content": "与仇人对峙"},
    ]


def test_background_id_is_the_file_stem(project: Path, library: PresetLibrary) -> None:
    write(project / "presets" / "backgrounds" / "renamed.json", PERSONALAB_BACKGROUND)

    assert library.background("renamed").background_id == "renamed"
    assert [b.background_id for b in library.backgrounds()] == ["renamed"]


def test_saving_a_background_stamps_times_and_round_trips(
    project: Path, library: PresetLibrary
) -> None:
    later = datetime(2025, 11, 1, 8, 30, tzinfo=UTC)
    preset = BackgroundPreset(
        name="Harbour Town",
        world_setting="Fog and ferries.",
        story_outline=[OutlinePoint(index=1, content="Find the missing ferry")],
    )

    saved = library.save_background(preset, now=NOW)
    again = library.save_background(saved.model_copy(update={"description": "misty"}), now=later)

    assert saved.background_id == "Harbour_Town"
    assert (again.created_at, again.updated_at) == ("2025-10-16T10:00:00Z", "2025-11-01T08:30:00Z")
    assert library.background("Harbour_Town") == again
    assert len(library.backgrounds()) == 1


def test_a_bad_background_is_skipped_in_the_list_and_reported(
    project: Path, library: PresetLibrary
) -> None:
    folder = project / "presets" / "backgrounds"
    write(folder / "ok.json", {"name": "Ok"})
    duplicated = dict(PERSONALAB_BACKGROUND)
    duplicated["story_outline"] = [{"index": 1, "content": "a"}, {"index": 1, "content": "b"}]
    write(folder / "dup.json", duplicated)
    write(folder / "nocontent.json", {"name": "N", "story_outline": [{"index": 0}]})

    with pytest.raises(FileFormatError) as dup:
        library.background("dup")
    assert [p.field for p in dup.value.problems] == ["story_outline"]
    assert "index 1 is used twice" in str(dup.value)
    with pytest.raises(FileFormatError) as nocontent:
        library.background("nocontent")
    assert {p.field for p in nocontent.value.problems} == {
        "story_outline[0].index",
        "story_outline[0].content",
    }

    assert [b.background_id for b in library.backgrounds()] == ["ok"]
    problems = library.problems("backgrounds")
    assert sorted(p.id for p in problems) == ["dup", "nocontent"]
    assert all(p.file.endswith(f"{p.id}.json") for p in problems)


def test_personalab_summary_reads_and_a_new_one_gets_an_id_from_its_source(
    project: Path, library: PresetLibrary
) -> None:
    write(project / "presets" / "summaries" / "conv_001_summary.json", PERSONALAB_SUMMARY)

    loaded = library.summary("conv_001_summary")
    assert [p.content for p in loaded.summaries] == ["情报交换与信任建立。", "制定复仇计划。"]

    first = library.save_summary(
        SummaryPreset(
            source_conversation="conv_001", summaries=[SummaryPoint(index=1, content="x")]
        ),
        now=NOW,
    )
    assert first.summary_id == "conv_001_summary_2"
    assert first.created_at == "2025-10-16T10:00:00Z"
    assert library.summary(first.summary_id) == first
    assert [s.summary_id for s in library.summaries()] == ["conv_001_summary", first.summary_id]


def test_deleting_a_character_removes_its_avatar_too(project: Path, library: PresetLibrary) -> None:
    character_id = import_card(project, "card_maren_v2_v3.png")
    folder = project / "presets" / "characters"
    assert (folder / f"{character_id}.png").exists()

    library.delete("characters", character_id)

    assert not (folder / f"{character_id}.json").exists()
    assert not (folder / f"{character_id}.png").exists()
    assert library.characters() == []


def test_iso_utc_writes_seconds_with_z() -> None:
    assert iso_utc(0.0) == "1970-01-01T00:00:00Z"
    assert iso_utc(datetime(2025, 10, 16, 18, 1, 5)) == "2025-10-16T18:01:05Z"
