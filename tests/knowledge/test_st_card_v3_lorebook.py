"""Character Card V3 lorebooks as knowledge: decorators, the spec's entry and book fields,
and the standalone ``lorebook_v3`` file; each honoured as the spec says and written back."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from storyloom.core.errors import FileFormatError
from storyloom.knowledge.activation import (
    ActivationEngine,
    ActivationRequest,
    ActivationResult,
    ScanMessage,
)
from storyloom.knowledge.caiu import CAIU, Placement, SecondaryLogic
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.st_export import export_card_json, export_card_png
from storyloom.knowledge.st_import import import_sillytavern_bytes
from storyloom.knowledge.st_world_info import (
    character_book_to_kb,
    export_character_book,
    export_world_info,
    world_info_to_kb,
)
from storyloom.sillytavern.character_card import read_png_card
from storyloom.testing.st_documents import (
    card_book_entry,
    card_document,
    card_png,
    lorebook_v3_document,
    v3_book_entry,
    world_info_document,
    world_info_entry,
)

BOOK = Path("book.json")


def imported(content: str, **fields: Any) -> tuple[CAIU, list[str]]:
    """The CAIU of one world-info entry with ``content``, and the import warnings."""
    document = world_info_document([world_info_entry(0, ["dragon"], content, **fields)])
    kb, warnings = world_info_to_kb(document, BOOK)
    return kb.entries[0], warnings


def book_kb(entries: list[dict[str, Any]], **book: Any) -> tuple[KnowledgeBase, list[str]]:
    return character_book_to_kb({"name": "Isles", "entries": entries, **book}, BOOK, name="x")


def scan(kbs: list[KnowledgeBase], messages: list[str], **request: Any) -> ActivationResult:
    engine = ActivationEngine(kbs, count_tokens=lambda text: len(text.split()))
    chat = [ScanMessage("User", m) for m in messages]
    return engine.activate(ActivationRequest(messages=chat, **request))


def active(result: ActivationResult) -> set[str]:
    return {item.entry_id for item in result.activated}


# -- each decorator ----------------------------------------------------------------------


def test_depth_decorator_places_the_entry_in_the_chat_at_that_depth() -> None:
    entry, warnings = imported("@@depth 2\nThe dragon sleeps.")
    assert entry.usage_metadata.placement is Placement.AT_DEPTH
    assert entry.usage_metadata.depth == 2
    assert entry.text == "The dragon sleeps."
    assert warnings == []


def test_depth_below_one_goes_after_the_newest_message() -> None:
    entry, _ = imported("@@depth -3\nText")
    assert (entry.usage_metadata.placement, entry.usage_metadata.depth) == (Placement.AT_DEPTH, 0)


def test_role_decorator_sets_the_role_of_the_in_chat_message() -> None:
    entry, warnings = imported("@@depth 1\n@@role assistant\nText")
    assert entry.usage_metadata.role == "assistant"
    assert warnings == []


def test_role_decorator_with_an_unknown_role_is_reported_and_ignored() -> None:
    entry, warnings = imported("@@role narrator\nText")
    assert entry.usage_metadata.role == "system"
    assert warnings == [
        "entry uid 0: decorator @@role ('narrator' is not system, user or assistant) ignored"
    ]


def test_activate_decorator_makes_the_entry_always_active() -> None:
    entry, _ = imported("@@activate\nAlways here.")
    assert entry.activation_criteria.constant is True
    kb = KnowledgeBase(kb_id="kb", entries=[entry])
    result = scan([kb], ["nothing about it"])
    assert active(result) == {entry.id}
    assert result.activated[0].text == "Always here."


def test_dont_activate_decorator_keeps_the_entry_out_of_every_scan() -> None:
    entry, _ = imported("@@dont_activate\nOnly by reference.", constant=True)
    assert entry.activation_criteria.never_activate is True
    assert entry.activation_criteria.keywords == ["dragon"]  # kept, for the editor
    kb = KnowledgeBase(kb_id="kb", entries=[entry])
    result = scan([kb], ["the dragon"])
    assert active(result) == set()
    assert [r.detail for r in result.dropped[0].reasons][-1].endswith("(@@dont_activate)")


def test_activate_wins_over_dont_activate() -> None:
    entry, _ = imported("@@dont_activate\n@@activate\nText")
    assert entry.activation_criteria.constant is True
    assert entry.activation_criteria.never_activate is False


def test_scan_depth_decorator_sets_the_entry_scan_depth() -> None:
    entry, _ = imported("@@scan_depth 5\nText")
    assert entry.activation_criteria.scan_depth == 5
    kb = KnowledgeBase(kb_id="kb", entries=[entry])
    older = ["a dragon!", "x", "x", "x"]  # the dragon is 4 messages back; the default is 2
    assert active(scan([kb], older)) == {entry.id}


@pytest.mark.parametrize(
    ("value", "placement"),
    [
        ("before_desc", Placement.BEFORE_CHARACTER),
        ("after_desc", Placement.AFTER_CHARACTER),
        ("personality", Placement.AFTER_CHARACTER),
        ("scenario", Placement.AFTER_CHARACTER),
        ("authors_note_top", Placement.AUTHORS_NOTE_TOP),
    ],
)
def test_position_decorator_places_the_entry(value: str, placement: Placement) -> None:
    entry, warnings = imported(f"@@position {value}\nText", position=4)
    assert entry.usage_metadata.placement is placement
    assert warnings == []


def test_position_wins_over_depth() -> None:
    entry, warnings = imported("@@depth 3\n@@position before_desc\nText")
    assert entry.usage_metadata.placement is Placement.BEFORE_CHARACTER
    assert warnings == ["entry uid 0: @@depth ignored: @@position wins over it"]


def test_additional_keys_decorator_requires_one_of_its_keys() -> None:
    entry, _ = imported("@@additional_keys cave, lair\nText", keysecondary=[])
    act = entry.activation_criteria
    assert (act.secondary_keywords, act.secondary_logic, act.selective) == (
        ["cave", "lair"],
        SecondaryLogic.AND_ANY,
        True,
    )
    kb = KnowledgeBase(kb_id="kb", entries=[entry])
    assert active(scan([kb], ["the dragon flies"])) == set()
    assert active(scan([kb], ["the dragon's lair"])) == {entry.id}


def test_additional_keys_on_an_entry_with_secondary_keys_is_reported() -> None:
    entry, warnings = imported("@@additional_keys cave\nText", keysecondary=["red"])
    assert entry.activation_criteria.secondary_keywords == ["red"]
    assert warnings == [
        "entry uid 0: decorator @@additional_keys (the entry already has secondary keys) ignored"
    ]


def test_exclude_keys_decorator_keeps_the_entry_out_when_one_key_is_there() -> None:
    entry, _ = imported("@@exclude_keys egg,hatchling\nText")
    act = entry.activation_criteria
    assert (act.secondary_keywords, act.secondary_logic) == (
        ["egg", "hatchling"],
        SecondaryLogic.NOT_ANY,
    )
    kb = KnowledgeBase(kb_id="kb", entries=[entry])
    assert active(scan([kb], ["a dragon egg"])) == set()
    assert active(scan([kb], ["a dragon"])) == {entry.id}


def test_exclude_keys_merge_into_not_any_secondary_keys() -> None:
    entry, warnings = imported("@@exclude_keys egg\nText", keysecondary=["baby"], selectiveLogic=2)
    assert entry.activation_criteria.secondary_keywords == ["baby", "egg"]
    assert warnings == []


def test_a_fallback_is_used_when_the_decorator_above_is_unknown() -> None:
    entry, warnings = imported("@@risu_only 4\n@@@depth 4\nText")
    assert entry.usage_metadata.placement is Placement.AT_DEPTH
    assert entry.usage_metadata.depth == 4
    assert warnings == [
        "entry uid 0: decorator @@risu_only (unknown decorator) ignored; its fallback @@@depth used"
    ]


def test_a_fallback_is_skipped_when_the_decorator_above_is_honoured() -> None:
    entry, warnings = imported("@@depth 1\n@@@depth 7\n@@@scan_depth 9\nText")
    assert entry.usage_metadata.depth == 1
    assert entry.activation_criteria.scan_depth is None
    assert warnings == []


def test_fallbacks_chain_top_to_bottom_past_unusable_values() -> None:
    entry, _ = imported("@@instruct_depth 3\n@@@position nowhere\n@@@depth 3\nText")
    assert (entry.usage_metadata.placement, entry.usage_metadata.depth) == (Placement.AT_DEPTH, 3)


def test_an_unknown_decorator_is_reported_and_never_reaches_the_prompt() -> None:
    entry, warnings = imported("@@sparkle 3\nThe dragon sleeps.")
    assert warnings == ["entry uid 0: decorator @@sparkle (unknown decorator) ignored"]
    kb = KnowledgeBase(kb_id="kb", entries=[entry])
    assert scan([kb], ["dragon"]).activated[0].text == "The dragon sleeps."


def test_a_spec_decorator_storyloom_does_not_support_is_reported_as_such() -> None:
    _, warnings = imported("@@is_greeting 1\nText")
    assert warnings == [
        "entry uid 0: decorator @@is_greeting (storyloom does not support it) ignored"
    ]


def test_only_the_first_of_repeated_decorators_counts() -> None:
    entry, warnings = imported("@@depth 1\n@@depth 6\nText")
    assert entry.usage_metadata.depth == 1
    assert "the first one counts" in warnings[0]


def test_decorators_in_a_card_book_entry_are_honoured_too() -> None:
    kb, warnings = book_kb([v3_book_entry(0, ["isle"], "@@depth 0\n@@role user\nIsles drift.")])
    entry = kb.entries[0]
    assert (entry.usage_metadata.placement, entry.usage_metadata.role) == (
        Placement.AT_DEPTH,
        "user",
    )
    assert entry.text == "Isles drift."
    assert warnings == []


# -- round trip ----------------------------------------------------------------------------


DECORATED = [
    world_info_entry(
        0, ["dragon"], "@@depth 2\n@@role assistant\n@@risu_x 4\n@@@scan_depth 3\n\nD."
    ),
    world_info_entry(1, ["x"], "@@dont_activate\nHidden"),
    world_info_entry(2, ["y"], "@@position after_desc\n@@exclude_keys c\nText"),
]


def test_untouched_decorated_entries_export_exactly_as_imported() -> None:
    document = world_info_document(DECORATED, name="Dragons")
    kb, _ = world_info_to_kb(copy.deepcopy(document), BOOK)
    assert export_world_info(kb) == document


def test_untouched_decorated_card_book_exports_exactly_as_imported() -> None:
    entries = [
        v3_book_entry(0, ["isle"], "@@depth 0\n@@@instruct_depth 0\nIsles drift."),
        card_book_entry(1, ["sky"], "@@activate\nThe sky is green."),
    ]
    book = {"name": "Isles", "entries": entries, "scan_depth": 4, "token_budget": 300}
    kb, _ = character_book_to_kb(copy.deepcopy(book), BOOK, name="x")
    assert export_character_book(kb) == book


def test_an_edited_entry_writes_its_decorators_back_with_the_new_values() -> None:
    kb, _ = world_info_to_kb(world_info_document(copy.deepcopy(DECORATED)), BOOK)
    first, hidden, _ = kb.entries
    first.content.value = "New text."
    first.usage_metadata.depth = 5
    hidden.activation_criteria.never_activate = False
    out = export_world_info(kb)["entries"]
    assert (
        out["0"]["content"] == "@@depth 5\n@@role assistant\n@@risu_x 4\n@@@scan_depth 3\nNew text."
    )
    assert out["0"]["depth"] == 5
    assert out["1"]["content"] == "Hidden"


def test_a_setting_moved_away_from_its_decorator_drops_that_line() -> None:
    kb, _ = world_info_to_kb(world_info_document(copy.deepcopy(DECORATED)), BOOK)
    kb.entries[0].usage_metadata.placement = Placement.AFTER_CHARACTER
    content = export_world_info(kb)["entries"]["0"]["content"]
    assert content == "@@role assistant\n@@risu_x 4\n@@@scan_depth 3\nD."


def test_never_activate_set_in_storyloom_is_exported_as_the_decorator() -> None:
    entry, _ = imported("Plain text.")
    entry.activation_criteria.never_activate = True
    kb = KnowledgeBase(kb_id="kb", entries=[entry])
    assert export_world_info(kb)["entries"]["0"]["content"] == "@@dont_activate\nPlain text."


# -- the spec's entry and book fields --------------------------------------------------------


def test_use_regex_makes_a_v3_entry_keys_regular_expressions() -> None:
    kb, warnings = book_kb([v3_book_entry(0, ["dra(g|k)on", "a/b"], "Text", use_regex=True)])
    assert kb.entries[0].activation_criteria.keywords == ["/dra(g|k)on/i", "/a\\/b/i"]
    assert any("1 entry sets use_regex" in w for w in warnings)
    assert active(scan([kb], ["a DRAKON!"])) == {kb.entries[0].id}


def test_use_regex_respects_case_sensitive_and_keeps_slash_keys() -> None:
    entry = v3_book_entry(0, ["Drake", "/wyrm/"], "Text", use_regex=True, case_sensitive=True)
    kb, _ = book_kb([entry])
    assert kb.entries[0].activation_criteria.keywords == ["/Drake/", "/wyrm/"]


def test_use_regex_written_by_sillytavern_on_every_entry_is_not_a_regex() -> None:
    # SillyTavern writes use_regex: true on each entry and matches keys as plain text.
    kb, warnings = book_kb([card_book_entry(0, ["dra(g)on"], "Text")])
    assert kb.entries[0].activation_criteria.keywords == ["dra(g)on"]
    assert warnings == []


def test_entry_case_sensitive_is_honoured_and_reported() -> None:
    kb, warnings = book_kb([v3_book_entry(0, ["Drake"], "Text", case_sensitive=True)])
    assert kb.entries[0].activation_criteria.case_sensitive is True
    assert warnings == [
        "1 entry sets case_sensitive; SillyTavern reads only extensions.case_sensitive,"
        " storyloom honours it"
    ]
    assert active(scan([kb], ["a drake"])) == set()
    assert active(scan([kb], ["a Drake"])) == {kb.entries[0].id}


def test_sillytavern_case_sensitive_extension_wins_over_the_entry_field() -> None:
    entry = card_book_entry(0, ["Drake"], "Text", case_sensitive=True)
    entry["extensions"]["case_sensitive"] = False
    kb, _ = book_kb([entry])
    assert kb.entries[0].activation_criteria.case_sensitive is False


def test_book_scan_depth_applies_to_entries_without_their_own() -> None:
    own = v3_book_entry(1, ["b"], "@@scan_depth 1\nB")
    kb, warnings = book_kb([v3_book_entry(0, ["a"], "A"), own], scan_depth=5)
    assert [e.activation_criteria.scan_depth for e in kb.entries] == [5, 1]
    assert warnings == [
        "this book sets scan_depth 5; SillyTavern ignores it, storyloom honours it for the 1"
        " entry without their own scan depth"
    ]


def test_book_recursive_scanning_false_keeps_other_entries_text_from_activating() -> None:
    trigger = v3_book_entry(0, ["dragon"], "The dragon guards the cave.")
    target = v3_book_entry(1, ["cave"], "The cave is deep.")
    kb, warnings = book_kb([trigger, target], recursive_scanning=False)
    assert all(e.activation_criteria.exclude_recursion for e in kb.entries)
    assert any("recursive_scanning false" in w for w in warnings)
    assert active(scan([kb], ["a dragon"])) == {kb.entries[0].id}
    open_kb, _ = book_kb([trigger, target])
    assert len(active(scan([open_kb], ["a dragon"]))) == 2


def test_book_token_budget_cuts_that_book_entries_inside_the_global_budget() -> None:
    entries = [
        v3_book_entry(0, ["isle"], "one two three four", insertion_order=200),
        v3_book_entry(1, ["isle"], "five six seven", insertion_order=100),
    ]
    kb, warnings = book_kb(entries, token_budget=5)
    assert kb.token_budget == 5
    assert any("token_budget 5" in w for w in warnings)
    result = scan([kb], ["an isle"], max_context_tokens=100_000)
    assert active(result) == {kb.entries[0].id}
    cut = result.dropped[0].reasons[-1]
    assert (cut.rule, cut.outcome) == ("budget", "dropped")
    assert "its book's budget of 5" in cut.detail


def test_a_token_budget_changed_in_storyloom_is_written_back() -> None:
    kb, _ = book_kb([v3_book_entry(0, ["a"], "A")], token_budget=100)
    kb.token_budget = 40
    assert export_character_book(kb)["token_budget"] == 40
    kb.token_budget = None
    assert "token_budget" not in export_character_book(kb)


def test_unusable_book_settings_are_reported_and_ignored() -> None:
    kb, warnings = book_kb([v3_book_entry(0, ["a"], "A")], scan_depth=-2, token_budget="lots")
    assert kb.entries[0].activation_criteria.scan_depth is None
    assert kb.token_budget is None
    assert len(warnings) == 2


# -- the standalone lorebook_v3 file ----------------------------------------------------------


def test_a_lorebook_v3_file_imports_as_a_knowledge_base() -> None:
    document = lorebook_v3_document(
        [v3_book_entry(0, ["isle"], "@@depth 1\nIsles drift."), v3_book_entry(1, ["sky"], "Sky")],
        scan_depth=3,
    )
    result = import_sillytavern_bytes(json.dumps(document).encode(), "download.json")
    assert result.kind == "world_info"
    (kb,) = result.knowledge_bases
    assert kb.kb_displayName == "Drifting Isles"
    assert [e.text for e in kb.entries] == ["Isles drift.", "Sky"]
    assert kb.entries[0].usage_metadata.placement is Placement.AT_DEPTH
    assert any("scan_depth 3" in w for w in result.warnings)
    assert export_character_book(kb) == document["data"]


def test_a_lorebook_v3_file_without_a_name_takes_the_file_name() -> None:
    document = lorebook_v3_document([v3_book_entry(0, ["a"], "A")])
    del document["data"]["name"]
    result = import_sillytavern_bytes(json.dumps(document).encode(), "isles.json")
    assert result.knowledge_bases[0].kb_displayName == "isles"


@pytest.mark.parametrize("data", [None, [], "book"])
def test_a_lorebook_v3_file_without_a_book_object_is_refused(data: Any) -> None:
    document = {"spec": "lorebook_v3", "data": data}
    with pytest.raises(FileFormatError) as caught:
        import_sillytavern_bytes(json.dumps(document).encode(), "bad.json")
    assert caught.value.problems[0].field == "data"


def test_a_lorebook_v3_file_with_a_bad_entries_field_names_it() -> None:
    document = {"spec": "lorebook_v3", "data": {"entries": {"0": {}}}}
    with pytest.raises(FileFormatError) as caught:
        import_sillytavern_bytes(json.dumps(document).encode(), "bad.json")
    assert caught.value.problems[0].field == "data.entries"


# -- card assets -----------------------------------------------------------------------------


def test_png_asset_chunks_become_the_card_assets() -> None:
    card = card_document(spec="v3")
    card["data"]["assets"] = [
        {"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"},
        {"type": "emotion", "uri": "__asset:0", "name": "happy", "ext": "webp"},
    ]
    result = import_sillytavern_bytes(card_png(card, assets={"0": b"webp bytes"}), "aria.png")
    assert result.assets == {"__asset/0": b"webp bytes"}
    assert result.character is not None
    assert result.character.assets is not None
    assert result.character.assets[1]["uri"] == "__asset:0"


def test_png_asset_chunks_go_back_into_an_exported_png() -> None:
    card = card_document(spec="v3")
    card["data"]["assets"] = [
        {"type": "emotion", "uri": "__asset:0", "name": "happy", "ext": "png"},
        {"type": "emotion", "uri": "__asset:1", "name": "sad", "ext": "png"},
    ]
    result = import_sillytavern_bytes(card_png(card, assets={"0": b"joy"}), "aria.png")
    assert result.character is not None and result.avatar_png is not None
    warnings: list[str] = []
    png = export_card_png(
        result.character, None, result.avatar_png, warnings=warnings, assets=result.assets
    )
    assert read_png_card(png, "out.png").assets == {"0": b"joy"}
    assert warnings == ["asset '__asset:1' has no file here; its chunk is left out"]


@pytest.mark.parametrize(("version", "warned"), [(3.0, False), ("3.5", True), ("4.0", True)])
def test_a_card_of_any_spec_version_imports_and_exports_back_unchanged(
    version: object, warned: bool
) -> None:
    card = card_document(spec="v3")
    card["spec_version"] = version
    result = import_sillytavern_bytes(json.dumps(card).encode(), "aria.json")
    assert result.character is not None
    assert any("newer than storyloom knows" in w for w in result.warnings) is warned
    assert export_card_json(result.character, result.character_book) == card


# -- any decorator block ----------------------------------------------------------------------

_VALUES = ["", "2", "-1", "0", "x", "assistant", "User", "after_desc", "scenario", "nowhere"]
_VALUES += ["at_depth", "a,b", "c", " , ", "red"]
_NAMES = ["depth", "role", "activate", "dont_activate", "scan_depth", "position"]
_NAMES += ["additional_keys", "exclude_keys", "sparkle", "is_greeting", "Depth", ""]
decorator_lines = st.builds(
    lambda prefix, name, value: f"{prefix}{name} {value}".rstrip(),
    st.sampled_from(["@@", "@@", "@@@"]),
    st.sampled_from(_NAMES),
    st.sampled_from(_VALUES),
)
bodies = st.text(alphabet="ab @\n", max_size=12)


def test_a_repeated_decorator_before_a_fallback_keeps_the_fallback_after_an_edit() -> None:
    # The second @@dont_activate repeats the first, so its fallback @@@activate counts;
    # rewriting the block must not let the repeat count instead.
    content = "@@dont_activate 0\n@@dont_activate 0\n@@@activate red\n "
    raw = world_info_entry(0, ["dragon"], content, keysecondary=["red", "c"], selectiveLogic=3)
    kb, _ = world_info_to_kb(world_info_document([raw]), BOOK)
    (entry,) = kb.entries
    assert entry.activation_criteria.constant and not entry.activation_criteria.never_activate
    entry.content.value = "Edited x"
    again, _ = world_info_to_kb(export_world_info(kb), BOOK)
    (back,) = again.entries
    assert back.activation_criteria == entry.activation_criteria
    assert back.text == "Edited x"


@settings(max_examples=300, deadline=None)
# Found by hypothesis: the repeated @@dont_activate is passed over and its fallback counts;
# once @@activate drops the first, the fallback's primary would count instead.
@example(
    lines=["@@activate", "@@dont_activate", "@@dont_activate", "@@@role assistant"],
    body="",
    secondary=([], 0),
    edited="x",
)
@given(
    lines=st.lists(decorator_lines, max_size=6),
    body=bodies,
    secondary=st.sampled_from([([], 0), (["red"], 0), (["red"], 2), (["red", "c"], 3)]),
    edited=st.text(alphabet="xyz .", min_size=1, max_size=8),
)
def test_any_decorator_block_survives_export_and_an_edited_text(
    lines: list[str], body: str, secondary: tuple[list[str], int], edited: str
) -> None:
    keys, logic = secondary
    content = "\n".join([*lines, body])
    raw = world_info_entry(0, ["dragon"], content, keysecondary=keys, selectiveLogic=logic)
    document = world_info_document([raw])
    kb, _ = world_info_to_kb(copy.deepcopy(document), BOOK)
    assert export_world_info(kb, fill_defaults=False) == document

    (entry,) = kb.entries
    entry.content.value = f"Edited {edited}"
    again, _ = world_info_to_kb(export_world_info(kb), BOOK)
    (back,) = again.entries
    assert back.text == entry.text
    assert back.activation_criteria == entry.activation_criteria
    assert back.usage_metadata == entry.usage_metadata


@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(decorator_lines, max_size=4),
    fields=st.fixed_dictionaries(
        {},
        optional={
            "use_regex": st.booleans(),
            "case_sensitive": st.booleans(),
            "secondary_keys": st.sampled_from([[], ["red"]]),
            "selective": st.booleans(),
        },
    ),
    book=st.fixed_dictionaries(
        {},
        optional={
            "scan_depth": st.sampled_from([0, 3, -1, "x"]),
            "recursive_scanning": st.booleans(),
            "token_budget": st.sampled_from([1, 50, 0]),
        },
    ),
    sillytavern=st.booleans(),
)
def test_any_v3_card_book_exports_back_unchanged_and_keeps_an_edit(
    lines: list[str], fields: dict[str, Any], book: dict[str, Any], sillytavern: bool
) -> None:
    content = "\n".join([*lines, "The isles drift."])
    make = card_book_entry if sillytavern else v3_book_entry
    entries = [make(0, ["isle", "a/b"], content, **fields)]
    original = {"name": "Isles", "entries": entries, **book}
    kb, _ = character_book_to_kb(copy.deepcopy(original), BOOK, name="x")
    assert export_character_book(kb) == original

    (entry,) = kb.entries
    entry.content.value = "Edited."
    again, _ = character_book_to_kb(export_character_book(kb), BOOK, name="x")
    (back,) = again.entries
    assert back.text == "Edited."
    assert back.activation_criteria == entry.activation_criteria
    assert back.usage_metadata == entry.usage_metadata
