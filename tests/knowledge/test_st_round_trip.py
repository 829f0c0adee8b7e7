"""Every kind of SillyTavern file imports, and exports back equal: the fixtures in
``tests/fixtures/sillytavern`` (see ``make_fixtures.py`` for the variant each one is)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from storyloom.knowledge.st_export import (
    export_card_json,
    export_card_png,
    export_chat_jsonl,
    export_world_info,
)
from storyloom.knowledge.st_import import import_sillytavern
from storyloom.knowledge.st_world_info import export_character_book, export_lorebook_v3
from storyloom.sillytavern.character_card import read_png_card
from storyloom.sillytavern.charx import read_charx

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sillytavern"
# The preset is no file the importer reads: tests/chat/test_chat_cli.py imports it.
IMPORTABLE = sorted(p for p in FIXTURES.iterdir() if not p.name.startswith("preset_"))

# Entries in the book each fixture holds (a card's embedded book, or the world info).
BOOK_ENTRIES = {
    "world_info_lanternfall_2024.json": 4,
    "world_info_lanternfall_v1.18.json": 4,
    "world_info_tea_road_zh_original_data.json": 8,
    "world_info_star_port_imported_original_data.json": 6,
    "card_maren_v2_v3.png": 4,
    "card_maren_2024_v2_only.png": 4,
    "card_academy_zh_v3_mvu.json": 9,
    "lorebook_v3_drifting_isles.json": 6,
    "card_isa_v3_decorators_assets.png": 6,
}


def fixture(name: str) -> Path:
    return FIXTURES / name


def source_card(path: Path) -> Any:
    """The card as the file holds it: the chunk a PNG is read by, a CHARX's card.json."""
    data = path.read_bytes()
    if path.suffix == ".png":
        return read_png_card(data, path).card
    if path.suffix == ".charx":
        return read_charx(data, path).card
    return json.loads(data)


def assert_same_where_original_has_it(original: Any, exported: Any, where: str) -> None:
    """Every key of the original is in the export with the same value."""
    if isinstance(original, dict):
        assert isinstance(exported, dict), where
        for key, value in original.items():
            assert key in exported, f"{where}.{key} missing"
            assert_same_where_original_has_it(value, exported[key], f"{where}.{key}")
    else:
        assert exported == original, where


@pytest.mark.parametrize("path", IMPORTABLE, ids=lambda p: p.name)
def test_every_kind_of_file_imports_and_exports_back_equal(path: Path) -> None:
    result = import_sillytavern(path)
    if result.kind == "world_info" and path.name.startswith("lorebook_v3"):
        # A Character Card V3 book file comes back as itself, and as world info that
        # carries it in originalData, as SillyTavern's import of a card book does.
        original = json.loads(path.read_text(encoding="utf-8"))
        (kb,) = result.knowledge_bases
        assert export_lorebook_v3(kb) == original
        assert export_world_info(kb)["originalData"] == original["data"]
    elif result.kind == "world_info":
        original = json.loads(path.read_text(encoding="utf-8"))
        (kb,) = result.knowledge_bases
        assert kb.entries and all(e.content.value is not None for e in kb.entries)
        exported = export_world_info(kb)
        assert set(exported) == set(original)
        assert_same_where_original_has_it(original, exported, "")
        assert export_world_info(kb, fill_defaults=False) == original
    elif result.kind == "chat":
        assert result.chat is not None and result.chat.messages
        assert export_chat_jsonl(result.chat) == path.read_text(encoding="utf-8")
    else:
        assert result.character is not None
        original = source_card(path)
        exported = export_card_json(result.character, result.character_book)
        if "data" not in original:
            # A V1 card comes back as V2 with its top-level fields as they were.
            assert exported["spec"] == "chara_card_v2"
            assert {k: exported[k] for k in original} == original
            return
        assert set(exported) == set(original)
        for key in original:
            if key != "data":
                assert exported[key] == original[key], key
        added = set(exported["data"]) - set(original["data"])
        assert added <= {"group_only_greetings"}
        assert all(exported["data"][key] == [] for key in added)
        assert {k: exported["data"][k] for k in original["data"]} == original["data"]
    if path.name in BOOK_ENTRIES:
        assert len(result.knowledge_bases[-1].entries) == BOOK_ENTRIES[path.name]


def test_a_png_with_both_chunks_is_read_by_its_v3_chunk() -> None:
    result = import_sillytavern(fixture("card_maren_v2_v3.png"))
    assert result.character is not None
    assert result.character.card_spec == "chara_card_v3"
    assert result.character.name == "Maren"
    assert result.avatar_png is not None and result.avatar_png.startswith(b"\x89PNG")
    assert result.character_book is not None
    assert [e.activation_criteria.keywords[0] for e in result.character_book.entries] == [
        "harbour",
        "wraith",
        "lighthouse",
        "tide",
    ]


def test_a_png_with_only_the_chara_chunk_is_read_as_v2() -> None:
    result = import_sillytavern(fixture("card_maren_2024_v2_only.png"))
    assert result.character is not None and result.character.card_spec == "chara_card_v2"


def test_png_export_carries_the_card_in_chara_and_ccv3_chunks() -> None:
    path = fixture("card_maren_v2_v3.png")
    result = import_sillytavern(path)
    assert result.character is not None and result.avatar_png is not None
    png = export_card_png(result.character, result.character_book, result.avatar_png)
    again = read_png_card(png, "again.png")
    assert again.chunk == "ccv3"
    assert again.card == read_png_card(path.read_bytes(), path).card


def test_a_card_keeps_top_level_keys_from_other_editors() -> None:
    result = import_sillytavern(fixture("card_teahouse_zh_unknown_keys.png"))
    assert result.character is not None and result.character.source_card is not None
    source = result.character.source_card
    exported = export_card_json(result.character, result.character_book)
    for key in ("alternative", "misc", "metadata"):
        assert key in source
        assert exported[key] == source[key]


def test_talkativeness_given_as_a_string_is_exported_as_that_string() -> None:
    result = import_sillytavern(fixture("card_greta_de_v2_tiny.png"))
    preset = result.character
    assert preset is not None
    assert preset.talkativeness == 0.5
    exported = export_card_json(preset, None)
    assert exported["talkativeness"] == "0.5"
    assert exported["data"]["extensions"]["talkativeness"] == "0.5"
    preset.talkativeness = 0.8
    assert export_card_json(preset, None)["data"]["extensions"]["talkativeness"] == 0.8


def test_v3_json_card_keeps_regex_scripts_and_tavern_helper() -> None:
    result = import_sillytavern(fixture("card_academy_zh_v3_mvu.json"))
    assert result.character is not None
    ext = result.character.extensions
    assert ext["regex_scripts"] and "tavern_helper" in ext
    exported = export_card_json(result.character, result.character_book)
    assert exported["data"]["extensions"] == ext


def test_a_charx_card_brings_its_icon_as_the_avatar_and_keeps_its_assets() -> None:
    result = import_sillytavern(fixture("card_wren_v3.charx"))
    assert result.kind == "character_charx"
    assert result.character is not None and result.character.card_spec == "chara_card_v3"
    assert result.avatar_png is not None and result.avatar_png.startswith(b"\x89PNG")
    assert list(result.assets) == ["assets/icon/images/main.png"]


def test_a_v1_card_imports_with_its_fields() -> None:
    result = import_sillytavern(fixture("card_old_tom_v1.json"))
    assert result.kind == "character_json"
    assert result.character is not None
    assert (result.character.name, result.character.personality) == ("Old Tom", "gruff, honest")


def test_entries_of_2024_get_sillytavern_defaults() -> None:
    (kb,) = import_sillytavern(fixture("world_info_lanternfall_2024.json")).knowledge_bases
    entry = kb.entries[0]
    assert entry.activation_criteria.secondary_logic == "AND_ANY"
    assert entry.usage_metadata.role == "system"
    assert entry.usage_metadata.depth == 4
    assert entry.activation_criteria.trigger_probability == 1.0
    assert entry.activation_criteria.selective is False
    exported = export_world_info(kb)["entries"]["0"]
    assert exported["selectiveLogic"] == 0 and exported["role"] == 0
    assert exported["sticky"] is None and exported["triggers"] == []


def test_chinese_book_maps_positions_roles_and_keeps_original_data() -> None:
    path = fixture("world_info_tea_road_zh_original_data.json")
    (kb,) = import_sillytavern(path).knowledge_bases
    by_uid = {e.extensions["sillytavern"]["uid"]: e for e in kb.entries}
    assert by_uid[0].usage_metadata.placement == "at_depth"
    assert by_uid[0].usage_metadata.depth == 1
    assert by_uid[0].activation_criteria.keywords == ["马帮", "锅头", "赶马人"]
    assert by_uid[5].usage_metadata.placement == "authors_note_bottom"
    assert by_uid[7].usage_metadata.role == "assistant"
    assert by_uid[5].usage_metadata.role == "system"  # null role
    assert by_uid[0].displayName == "[主角] 马帮锅头"
    original = json.loads(path.read_text(encoding="utf-8"))
    assert export_world_info(kb)["originalData"] == original["originalData"]


def test_book_follows_its_entries_where_original_data_says_after_char() -> None:
    path = fixture("world_info_star_port_imported_original_data.json")
    (kb,) = import_sillytavern(path).knowledge_bases
    # entries say position 2; originalData says "after_char" with extensions.position 2.
    assert {e.usage_metadata.placement for e in kb.entries} == {"authors_note_top"}


def test_chats_keep_swipes_send_dates_and_models() -> None:
    result = import_sillytavern(fixture("chat_maren_legacy_header.jsonl"))
    chat = result.chat
    assert chat is not None and chat.header is not None
    assert chat.header.user_name == "青禾" and not chat.header.is_modern
    assert chat.messages[0].send_date == "October 2, 2024 9:14pm"
    assert max(len(m.swipes or []) for m in chat.messages) == 2
    assert {"gpt-4o-2024-08-06", "gemini-1.5-pro-002"} <= {m.model for m in chat.messages}
    modern = import_sillytavern(fixture("chat_maren_modern_header.jsonl"))
    assert modern.chat is not None and modern.chat.header is not None
    assert modern.chat.header.integrity == "5d0c7a8e-2f41-4b6a-9c3e-7a1b2c3d4e5f"
    assert modern.chat.character_name == "Maren"


def test_a_world_info_as_a_card_book_matches_the_book_sillytavern_embeds() -> None:
    (world,) = import_sillytavern(fixture("world_info_lanternfall_v1.18.json")).knowledge_bases
    card = import_sillytavern(fixture("card_maren_v2_v3.png")).character
    assert card is not None and card.source_card is not None
    embedded = card.source_card["data"]["character_book"]["entries"]
    ours = export_character_book(world)["entries"]
    assert len(ours) == len(embedded)
    for mine, theirs in zip(ours, embedded, strict=True):
        for key, value in theirs.items():
            if key != "extensions":
                assert mine[key] == value, key
        for key, value in theirs["extensions"].items():
            if key != "use_group_scoring":  # null kept as null on purpose, see character_book
                assert mine["extensions"][key] == value, key
