"""Exports have every field SillyTavern's own code reads, with the type it expects.

The lists below are copied by hand from SillyTavern (v1.18): the world-info entry fields
of ``newWorldInfoEntryDefinition`` (public/scripts/world-info.js), the Character Card V2
and V3 ``data`` fields, and the chat message fields ``script.js`` reads. They are kept
apart from the package's own constants on purpose: a change there must fail here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from storyloom.knowledge.caiu import CAIU, Content
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.st_export import export_card_json, export_chat_jsonl, export_world_info
from storyloom.knowledge.st_import import import_sillytavern
from storyloom.knowledge.st_world_info import export_character_book
from storyloom.sillytavern.character import CharacterDefinition

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sillytavern"
# Every kind of file the importer reads (the preset is not one).
FIXTURE_FILES = sorted(p for p in FIXTURES.iterdir() if not p.name.startswith("preset_"))

NUMBER = (int, float)
NULL = type(None)
WORLD_INFO_ENTRY_FIELDS: dict[str, type | tuple[type, ...]] = {
    "uid": int,
    "key": list,
    "keysecondary": list,
    "comment": str,
    "content": str,
    "constant": bool,
    "vectorized": bool,
    "selective": bool,
    "selectiveLogic": int,
    "addMemo": bool,
    "order": NUMBER,
    "position": int,
    "disable": bool,
    "ignoreBudget": bool,
    "excludeRecursion": bool,
    "preventRecursion": bool,
    "matchPersonaDescription": bool,
    "matchCharacterDescription": bool,
    "matchCharacterPersonality": bool,
    "matchCharacterDepthPrompt": bool,
    "matchScenario": bool,
    "matchCreatorNotes": bool,
    "delayUntilRecursion": (bool, int),
    "probability": NUMBER,
    "useProbability": bool,
    "depth": int,
    "outletName": str,
    "group": str,
    "groupOverride": bool,
    "groupWeight": NUMBER,
    "scanDepth": (int, NULL),
    "caseSensitive": (bool, NULL),
    "matchWholeWords": (bool, NULL),
    "useGroupScoring": (bool, NULL),
    "automationId": str,
    "role": (int, NULL),
    "sticky": (int, NULL),
    "cooldown": (int, NULL),
    "delay": (int, NULL),
    "triggers": list,
}
CARD_BOOK_ENTRY_FIELDS: dict[str, type | tuple[type, ...]] = {
    "keys": list,
    "content": str,
    "extensions": dict,
    "enabled": bool,
    "insertion_order": NUMBER,
}
CARD_V2_DATA_FIELDS: dict[str, type] = {
    "name": str,
    "description": str,
    "personality": str,
    "scenario": str,
    "first_mes": str,
    "mes_example": str,
    "creator_notes": str,
    "system_prompt": str,
    "post_history_instructions": str,
    "alternate_greetings": list,
    "tags": list,
    "creator": str,
    "character_version": str,
    "extensions": dict,
}
CARD_V3_DATA_FIELDS: dict[str, type | tuple[type, ...]] = {
    "nickname": str,
    "creator_notes_multilingual": dict,
    "source": list,
    "group_only_greetings": list,
    "creation_date": NUMBER,
    "modification_date": NUMBER,
    "assets": list,
}
CHAT_MESSAGE_FIELDS: dict[str, type | tuple[type, ...]] = {
    "name": str,
    "is_user": bool,
    "send_date": (str, int, float),
    "mes": str,
}
# SillyTavern itself leaves is_system out of some messages it writes.
CHAT_OPTIONAL_FIELDS: dict[str, type | tuple[type, ...]] = {
    "is_system": bool,
    "swipes": list,
    "swipe_id": int,
    "swipe_info": list,
    "extra": dict,
}


def assert_fields(obj: dict[str, Any], fields: dict[str, Any], where: str) -> None:
    for name, kind in fields.items():
        assert name in obj, f"{where}: {name} missing"
        assert isinstance(obj[name], kind), f"{where}: {name} is {type(obj[name]).__name__}"


def assert_world_info(document: dict[str, Any]) -> None:
    assert isinstance(document["entries"], dict)
    for key, entry in document["entries"].items():
        assert_fields(entry, WORLD_INFO_ENTRY_FIELDS, f"entries.{key}")
        assert key == str(entry["uid"])
        assert all(isinstance(k, str) for k in entry["key"] + entry["keysecondary"])


def assert_card(card: dict[str, Any]) -> None:
    assert card["spec"] in ("chara_card_v2", "chara_card_v3")
    data = card["data"]
    assert_fields(data, CARD_V2_DATA_FIELDS, "data")
    assert isinstance(data["group_only_greetings"], list)
    for name, kind in CARD_V3_DATA_FIELDS.items():
        if name in data:
            assert isinstance(data[name], kind), name
    book = data.get("character_book")
    if book is not None:
        assert isinstance(book["entries"], list)
        for index, entry in enumerate(book["entries"]):
            assert_fields(entry, CARD_BOOK_ENTRY_FIELDS, f"character_book.entries[{index}]")


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_exports_of_every_kind_of_file_have_the_fields_sillytavern_reads(path: Path) -> None:
    result = import_sillytavern(path)
    for kb in result.knowledge_bases:
        assert_world_info(export_world_info(kb))
        assert_card(export_card_json(result.character or CharacterDefinition(name="x"), kb))
    if result.character is not None:
        assert_card(export_card_json(result.character, result.character_book, spec="v3"))
    if result.chat is not None:
        lines = [json.loads(line) for line in export_chat_jsonl(result.chat).split("\n")]
        for number, line in enumerate(lines[1:] if result.chat.header else lines, start=1):
            assert_fields(line, CHAT_MESSAGE_FIELDS, f"message {number}")
            for name, kind in CHAT_OPTIONAL_FIELDS.items():
                if name in line:
                    assert isinstance(line[name], kind), name


def test_a_kb_made_in_storyloom_exports_as_valid_world_info_and_card_book() -> None:
    kb = KnowledgeBase(
        kb_displayName="Made here",
        entries=[CAIU(id="a", displayName="A", content=Content(value="alpha")), CAIU(id="b")],
    )
    assert_world_info(export_world_info(kb))
    book = export_character_book(kb)
    for entry in book["entries"]:
        assert_fields(entry, CARD_BOOK_ENTRY_FIELDS, "entry")
    assert_card(export_card_json(CharacterDefinition(name="New"), kb))
