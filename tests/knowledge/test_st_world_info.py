"""SillyTavern world info ↔ CAIU: the field mapping, edits on export, bad entries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from storyloom.core.errors import FileFormatError
from storyloom.knowledge.caiu import CAIU, Content, Placement, SecondaryLogic
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.st_export import export_world_info
from storyloom.knowledge.st_import import import_sillytavern
from storyloom.knowledge.st_world_info import (
    character_book_to_kb,
    export_character_book,
    world_info_to_kb,
)
from storyloom.sillytavern.world_info_entry import WI_ENTRY_TEMPLATE
from storyloom.testing.st_documents import (
    card_book_entry,
    world_info_document,
    world_info_entry,
)

BOOK = Path("book.json")


def one(**fields: Any) -> CAIU:
    kb, warnings = world_info_to_kb(
        world_info_document([world_info_entry(0, ["dragon"], "Dragons fly.", **fields)]), BOOK
    )
    assert warnings == []
    return kb.entries[0]


@pytest.mark.parametrize(
    ("position", "placement"),
    [
        (0, Placement.BEFORE_CHARACTER),
        (1, Placement.AFTER_CHARACTER),
        (2, Placement.AUTHORS_NOTE_TOP),
        (3, Placement.AUTHORS_NOTE_BOTTOM),
        (4, Placement.AT_DEPTH),
        (5, Placement.EXAMPLES_TOP),
        (6, Placement.EXAMPLES_BOTTOM),
        (7, Placement.OUTLET),
    ],
)
def test_position_maps_to_placement(position: int, placement: Placement) -> None:
    assert one(position=position).usage_metadata.placement == placement


@pytest.mark.parametrize(
    ("logic", "expected"),
    [
        (0, SecondaryLogic.AND_ANY),
        (1, SecondaryLogic.NOT_ALL),
        (2, SecondaryLogic.NOT_ANY),
        (3, SecondaryLogic.AND_ALL),
    ],
)
def test_selective_logic_maps_to_secondary_logic(logic: int, expected: SecondaryLogic) -> None:
    assert one(selectiveLogic=logic).activation_criteria.secondary_logic == expected


@pytest.mark.parametrize(("role", "expected"), [(0, "system"), (1, "user"), (2, "assistant")])
def test_at_depth_role_maps_to_message_role(role: int | None, expected: str) -> None:
    entry = one(position=4, depth=2, role=role)
    assert (entry.usage_metadata.depth, entry.usage_metadata.role) == (2, expected)


def test_null_role_reads_as_system() -> None:
    assert one(role=None).usage_metadata.role == "system"


def test_every_mapped_field_lands_in_its_caiu_field() -> None:
    entry = one(
        keysecondary=["wing"],
        comment="Dragons/Wyrms {{{x}}}",
        constant=True,
        selective=True,
        selectiveLogic=2,
        disable=True,
        order=250,
        position=7,
        outletName="lore",
        probability=40,
        useProbability=True,
        excludeRecursion=True,
        preventRecursion=True,
        delayUntilRecursion=3,
        scanDepth=6,
        caseSensitive=True,
        matchWholeWords=False,
        useGroupScoring=True,
        group="beasts, sky",
        groupOverride=True,
        groupWeight=30,
        sticky=2,
        cooldown=3,
        delay=4,
        ignoreBudget=True,
        matchPersonaDescription=True,
        matchScenario=True,
        characterFilter={"isExclude": True, "names": ["Seraphina"], "tags": ["elf"]},
        triggers=["normal", "swipe"],
        vectorized=True,
    )
    act, usage = entry.activation_criteria, entry.usage_metadata
    assert entry.id == "st_0"
    assert entry.displayName == "Dragons／Wyrms x"
    assert entry.extensions["sillytavern"]["comment"] == "Dragons/Wyrms {{{x}}}"
    assert entry.content.value == "Dragons fly."
    assert act.keywords == ["dragon"] and act.secondary_keywords == ["wing"]
    assert act.constant and act.selective and act.secondary_logic == SecondaryLogic.NOT_ANY
    assert not entry.management_metadata.is_enabled
    assert usage.priority == 250 and usage.placement == Placement.OUTLET
    assert usage.outlet_name == "lore"
    assert act.trigger_probability == pytest.approx(0.4)
    assert act.exclude_recursion and act.prevent_recursion and act.delay_until_recursion == 3
    assert (act.scan_depth, act.case_sensitive, act.match_whole_words) == (6, True, False)
    assert act.use_group_scoring is True
    assert act.inclusion_groups == ["beasts", "sky"]
    assert act.group_override and act.group_weight == 30
    assert (act.sticky, act.cooldown, act.delay) == (2, 3, 4)
    assert usage.token_budget_impact == "critical"
    assert act.also_scan == ["persona_description", "scenario"]
    assert act.character_filter is not None and act.character_filter.is_exclude
    assert act.character_filter.names == ["Seraphina"]
    assert act.generation_triggers == ["normal", "swipe"]
    assert act.use_semantic_search
    assert entry.management_metadata.source == "st_import_v1"
    assert "sillytavern" in entry.management_metadata.tags


def test_probability_counts_only_when_use_probability_is_on() -> None:
    assert one(probability=25, useProbability=False).activation_criteria.trigger_probability == 1.0


def test_delay_until_recursion_true_is_level_one() -> None:
    assert one(delayUntilRecursion=True).activation_criteria.delay_until_recursion == 1


def test_null_group_scoring_and_scan_depth_mean_the_global_setting() -> None:
    act = one(useGroupScoring=None, scanDepth=None, caseSensitive=None).activation_criteria
    assert (act.use_group_scoring, act.scan_depth, act.case_sensitive) == (None, None, None)


def test_edits_to_keywords_priority_and_placement_reach_the_exported_entry() -> None:
    document = world_info_document(
        [
            world_info_entry(0, ["dragon"], "Dragons fly.", comment="dragons"),
            world_info_entry(1, ["elf"], "Elves sing.", comment="elves"),
        ]
    )
    kb, _ = world_info_to_kb(document, BOOK)
    entry = kb.entries[0]
    entry.activation_criteria.keywords = ["dragon", "wyrm"]
    entry.usage_metadata.priority = 7
    entry.usage_metadata.placement = Placement.AT_DEPTH
    entry.usage_metadata.depth = 2
    entry.usage_metadata.role = "user"
    entry.displayName = "wyrms"
    entry.management_metadata.is_enabled = False
    exported = export_world_info(kb)["entries"]
    assert exported["0"]["key"] == ["dragon", "wyrm"]
    assert exported["0"]["order"] == 7
    assert (exported["0"]["position"], exported["0"]["depth"], exported["0"]["role"]) == (4, 2, 1)
    assert exported["0"]["comment"] == "wyrms"
    assert exported["0"]["disable"] is True
    assert exported["1"] == document["entries"]["1"]


def test_untouched_lossy_values_come_back_as_they_were() -> None:
    raw = world_info_entry(0, ["a"], "x", probability=37, useProbability=False, role=None)
    kb, _ = world_info_to_kb(world_info_document([raw]), BOOK)
    assert export_world_info(kb)["entries"]["0"] == raw


def test_edit_of_a_card_book_entry_is_written_where_the_card_keeps_it() -> None:
    original = {
        "name": "Eldoria",
        "entries": [
            card_book_entry(0, ["eldoria"], "The forest."),
            card_book_entry(1, ["shadowfang"], "The beasts.", comment="beasts"),
        ],
    }
    book, _ = character_book_to_kb(original, BOOK, name="unused")
    entry = book.entries[1]
    entry.activation_criteria.keywords = ["shadowfang", "wolf"]
    entry.usage_metadata.priority = 5
    entry.usage_metadata.placement = Placement.AUTHORS_NOTE_TOP
    exported = export_character_book(book)
    assert exported["entries"][0] == original["entries"][0]
    changed = exported["entries"][1]
    assert changed["keys"] == ["shadowfang", "wolf"]
    assert changed["insertion_order"] == 5
    assert changed["extensions"]["position"] == 2
    assert changed["position"] == "after_char"
    assert changed["comment"] == "beasts"
    as_world_info = export_world_info(book)["entries"]["1"]
    assert as_world_info["key"] == ["shadowfang", "wolf"] and as_world_info["position"] == 2


def test_entries_made_in_storyloom_get_every_sillytavern_default_and_a_free_uid() -> None:
    kb, _ = world_info_to_kb(world_info_document([world_info_entry(0, ["a"], "x")]), BOOK)
    kb.entries.append(
        CAIU(id="caiu_new", displayName="Harbour", content=Content(value="Ships dock here."))
    )
    kb.entries[-1].activation_criteria.keywords = ["harbour"]
    exported = export_world_info(kb)["entries"]
    new = exported["1"]
    assert new["uid"] == 1
    for field, default in WI_ENTRY_TEMPLATE.items():
        if field not in ("key", "comment", "content", "probability", "useProbability"):
            assert new[field] == default, field
    assert (new["key"], new["comment"], new["content"]) == (
        ["harbour"],
        "Harbour",
        "Ships dock here.",
    )
    assert new["probability"] == 100 and new["useProbability"] is True


def test_a_new_kb_exports_as_a_plain_world_info_file() -> None:
    kb = KnowledgeBase(kb_displayName="Harbour", entries=[CAIU(id="a"), CAIU(id="b")])
    exported = export_world_info(kb)
    assert list(exported) == ["entries"]
    assert [e["uid"] for e in exported["entries"].values()] == [0, 1]
    assert export_character_book(kb)["name"] == "Harbour"


def test_storyloom_only_placements_are_written_as_the_nearest_position_with_a_warning() -> None:
    kb = KnowledgeBase(entries=[CAIU(id="a")])
    kb.entries[0].usage_metadata.placement = Placement.AFTER_PROMPT
    warnings: list[str] = []
    assert export_world_info(kb, warnings=warnings)["entries"]["0"]["position"] == 1
    assert any("after_prompt" in w for w in warnings)


def test_one_bad_entry_is_skipped_with_a_warning_and_written_back_untouched() -> None:
    bad = world_info_entry(1, ["x"], "bad", comment="broken one")
    bad["key"] = "not, a, list"
    document = world_info_document([world_info_entry(0, ["ok"], "fine"), bad])
    kb, warnings = world_info_to_kb(document, BOOK)
    assert [e.id for e in kb.entries] == ["st_0"]
    assert len(warnings) == 1
    assert "uid 1" in warnings[0] and "broken one" in warnings[0] and "key" in warnings[0]
    assert export_world_info(kb)["entries"]["1"] == bad


def test_a_book_whose_only_entry_is_bad_is_refused_naming_file_entry_and_field() -> None:
    bad = world_info_entry(0, ["x"], "bad")
    bad["key"] = "dragon"
    with pytest.raises(FileFormatError) as caught:
        world_info_to_kb(world_info_document([bad]), BOOK)
    assert caught.value.path == BOOK
    assert [p.field for p in caught.value.problems] == ["entries.0.key"]
    assert "list" in caught.value.problems[0].reason


def test_entries_that_are_not_an_object_refuse_the_file(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"entries": "nope"}))
    with pytest.raises(FileFormatError, match="entries"):
        import_sillytavern(path)


def test_malformed_json_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"entries": {"0": {"key": [}}')
    with pytest.raises(FileFormatError) as caught:
        import_sillytavern(path)
    assert caught.value.path == path and "not valid JSON" in str(caught.value)


def test_book_fields_and_key_order_survive_a_round_trip() -> None:
    document = {
        "name": "Harbour lore",
        "entries": {"3": world_info_entry(3, ["a"], "x")},
        "description": "docks",
        "extensions": {"custom": 1},
    }
    kb, _ = world_info_to_kb(document, BOOK)
    assert kb.kb_displayName == "Harbour lore" and kb.kb_description == "docks"
    exported = export_world_info(kb)
    assert list(exported) == list(document) and exported == document
    kb.kb_displayName = "Docks"
    assert export_world_info(kb)["name"] == "Docks"


def test_a_bare_card_book_file_imports_as_a_book(tmp_path: Path) -> None:
    path = tmp_path / "lorebook.json"
    book = {"name": "Loose book", "entries": [{"keys": ["k"], "content": "c", "enabled": True}]}
    path.write_text(json.dumps(book))
    (kb,) = import_sillytavern(path).knowledge_bases
    assert kb.kb_displayName == "Loose book"
    assert kb.entries[0].activation_criteria.keywords == ["k"]
    assert export_character_book(kb) == book
