"""Every file of the corpus imports, and exports back equal; named samples keep what
made them worth collecting (see the corpus README for what each one exercises)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from storyloom.knowledge.st_export import (
    export_card_json,
    export_card_png,
    export_chat_jsonl,
    export_world_info,
)
from storyloom.knowledge.st_import import import_sillytavern
from storyloom.knowledge.st_world_info import export_character_book
from storyloom.sillytavern.character_card import read_png_card

Sample = Callable[[str], Path]

# Entries in the book each sample holds (a card's embedded book, or the world info).
BOOK_ENTRIES = {
    "st-default_Eldoria_worldinfo_v1.18.0.json": 4,
    "st-default_Eldoria_worldinfo_2024-09.json": 4,
    "zh_worldinfo_chujuyiqinzhi_19entries.json": 19,
    "worldinfo_EU4_imported_with_originalData_20entries.json": 20,
    "st-default_Seraphina_card_v1.18.0_v2+v3.png": 4,
    "st-default_Seraphina_card_2024-09_v2only.png": 4,
    "zh_card_ai_v3json_mvu_27entries.json": 27,
}


def test_the_corpus_folder_has_files(corpus_files: list[Path], corpus: Path) -> None:
    assert corpus.is_dir(), f"no corpus at {corpus}: set STORYLOOM_CORPUS=DIR"
    assert corpus_files, f"the corpus {corpus} has no SillyTavern files"


def _source_json(path: Path) -> Any:
    if path.suffix == ".png":
        return read_png_card(path.read_bytes(), path).card
    return json.loads(path.read_text(encoding="utf-8"))


def assert_same_where_original_has_it(original: Any, exported: Any, where: str) -> None:
    """Every key of the original is in the export with the same value."""
    if isinstance(original, dict):
        assert isinstance(exported, dict), where
        for key, value in original.items():
            assert key in exported, f"{where}.{key} missing"
            assert_same_where_original_has_it(value, exported[key], f"{where}.{key}")
    else:
        assert exported == original, where


def test_every_file_imports_and_exports_back_equal(corpus_file: Path) -> None:
    path = corpus_file
    result = import_sillytavern(path)
    original: Any = (
        path.read_text(encoding="utf-8") if result.kind == "chat" else _source_json(path)
    )
    if result.kind == "world_info":
        (kb,) = result.knowledge_bases
        assert kb.entries and all(e.content.value is not None for e in kb.entries)
        exported: Any = export_world_info(kb)
        assert set(exported) == set(original)
        assert_same_where_original_has_it(original, exported, "")
        assert export_world_info(kb, fill_defaults=False) == original
    elif result.kind == "chat":
        assert result.chat is not None and result.chat.messages
        assert export_chat_jsonl(result.chat) == original
    else:
        assert result.character is not None
        exported = export_card_json(result.character, result.character_book)
        assert set(exported) == set(original)
        for key in original:
            if key != "data":
                assert exported[key] == original[key], key
        added = set(exported["data"]) - set(original["data"])
        assert added <= {"group_only_greetings"}
        assert all(exported["data"][key] == [] for key in added)
        assert {k: exported["data"][k] for k in original["data"]} == original["data"]
    if path.name in BOOK_ENTRIES:
        book = result.knowledge_bases[-1]
        assert len(book.entries) == BOOK_ENTRIES[path.name]


def test_seraphina_png_reads_the_v3_chunk_when_both_are_present(corpus_sample: Sample) -> None:
    result = import_sillytavern(corpus_sample("st-default_Seraphina_card_v1.18.0_v2+v3.png"))
    assert result.character is not None
    assert result.character.card_spec == "chara_card_v3"
    assert result.character.name == "Seraphina"
    assert result.avatar_png is not None and result.avatar_png.startswith(b"\x89PNG")
    assert result.character_book is not None
    assert [e.activation_criteria.keywords[0] for e in result.character_book.entries] == [
        "eldoria",
        "shadowfang",
        "glade",
        "power",
    ]


def test_seraphina_2024_png_reads_the_v2_chunk(corpus_sample: Sample) -> None:
    result = import_sillytavern(corpus_sample("st-default_Seraphina_card_2024-09_v2only.png"))
    assert result.character is not None and result.character.card_spec == "chara_card_v2"


def test_png_export_carries_the_card_in_chara_and_ccv3_chunks(corpus_sample: Sample) -> None:
    path = corpus_sample("st-default_Seraphina_card_v1.18.0_v2+v3.png")
    result = import_sillytavern(path)
    assert result.character is not None and result.avatar_png is not None
    png = export_card_png(result.character, result.character_book, result.avatar_png)
    original = read_png_card(path.read_bytes(), "x")
    again = read_png_card(png, "again.png")
    assert again.chunk == "ccv3"
    assert again.card == original.card


def test_kori_keeps_its_unknown_top_level_keys(corpus_sample: Sample) -> None:
    result = import_sillytavern(corpus_sample("zh_card_kori_v2+v3_aichared.png"))
    assert result.character is not None and result.character.source_card is not None
    source = result.character.source_card
    exported = export_card_json(result.character, result.character_book)
    for key in ("alternative", "misc", "metadata"):
        assert key in source
        assert exported[key] == source[key]


def test_german_card_keeps_talkativeness_as_the_string_it_was_given(
    corpus_sample: Sample,
) -> None:
    result = import_sillytavern(corpus_sample("de_card_PeerDerPersonaler_v2only_tiny.png"))
    preset = result.character
    assert preset is not None
    assert preset.talkativeness == 0.5
    exported = export_card_json(preset, None)
    assert exported["talkativeness"] == "0.5"
    assert exported["data"]["extensions"]["talkativeness"] == "0.5"


def test_v3_json_card_keeps_regex_scripts_and_tavern_helper(corpus_sample: Sample) -> None:
    result = import_sillytavern(corpus_sample("zh_card_ai_v3json_mvu_27entries.json"))
    assert result.character is not None
    ext = result.character.extensions
    assert ext["regex_scripts"] and "tavern_helper" in ext
    exported = export_card_json(result.character, result.character_book)
    assert exported["data"]["extensions"] == ext


def test_old_eldoria_entries_get_sillytavern_defaults(corpus_sample: Sample) -> None:
    path = corpus_sample("st-default_Eldoria_worldinfo_2024-09.json")
    (kb,) = import_sillytavern(path).knowledge_bases
    entry = kb.entries[0]
    assert entry.activation_criteria.secondary_logic == "AND_ANY"
    assert entry.usage_metadata.role == "system"
    assert entry.usage_metadata.depth == 4
    assert entry.activation_criteria.trigger_probability == 1.0
    assert entry.activation_criteria.selective is False
    exported = export_world_info(kb)["entries"]["0"]
    assert exported["selectiveLogic"] == 0 and exported["role"] == 0
    assert exported["sticky"] is None and exported["triggers"] == []


def test_chinese_book_maps_positions_roles_and_keeps_original_data(corpus_sample: Sample) -> None:
    path = corpus_sample("zh_worldinfo_chujuyiqinzhi_19entries.json")
    (kb,) = import_sillytavern(path).knowledge_bases
    by_uid = {e.extensions["sillytavern"]["uid"]: e for e in kb.entries}
    assert by_uid[0].usage_metadata.placement == "at_depth"
    assert by_uid[0].usage_metadata.depth == 1
    assert by_uid[0].activation_criteria.keywords == ["昌平君", "熊启", "芈启"]
    assert by_uid[5].usage_metadata.placement == "authors_note_bottom"
    assert by_uid[7].usage_metadata.role == "assistant"
    assert by_uid[5].usage_metadata.role == "system"  # null role
    assert by_uid[0].displayName == "[主角设定] 昌平君"
    original = json.loads(path.read_text(encoding="utf-8"))
    assert export_world_info(kb)["originalData"] == original["originalData"]


def test_eu4_book_follows_entries_where_original_data_says_after_char(
    corpus_sample: Sample,
) -> None:
    path = corpus_sample("worldinfo_EU4_imported_with_originalData_20entries.json")
    (kb,) = import_sillytavern(path).knowledge_bases
    # entries say position 2; originalData says "after_char" with extensions.position 2.
    assert {e.usage_metadata.placement for e in kb.entries} == {"authors_note_top"}


def test_chats_keep_swipes_send_dates_and_models(corpus_sample: Sample) -> None:
    result = import_sillytavern(corpus_sample("chat_legacy_header_Seraphina_2024.jsonl"))
    chat = result.chat
    assert chat is not None and chat.header is not None
    assert chat.header.user_name == "白羽" and not chat.header.is_modern
    assert chat.messages[0].send_date == "September 19, 2024 8:03pm"
    assert any(m.swipes for m in chat.messages)
    assert "claude-3-5-sonnet-20240620" in {m.model for m in chat.messages}
    modern = import_sillytavern(
        corpus_sample("chat_modern_header_Seraphina_2026_reconstructed.jsonl")
    )
    assert modern.chat is not None and modern.chat.header is not None
    assert modern.chat.header.integrity == "aa6b43a4-7acb-42c2-9946-5acce736ea22"
    assert modern.chat.character_name == "Seraphina"


def test_eldoria_as_a_card_book_matches_the_book_sillytavern_embedded_in_seraphina(
    corpus_sample: Sample,
) -> None:
    (world,) = import_sillytavern(
        corpus_sample("st-default_Eldoria_worldinfo_v1.18.0.json")
    ).knowledge_bases
    card = import_sillytavern(
        corpus_sample("st-default_Seraphina_card_v1.18.0_v2+v3.png")
    ).character
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
