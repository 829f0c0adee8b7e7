"""A card's definition as character_definition CAIUs, apart from its book."""

from __future__ import annotations

import json
from pathlib import Path

from storyloom.knowledge.caiu import Placement
from storyloom.knowledge.card_knowledge import card_knowledge_base, character_tag
from storyloom.knowledge.st_import import import_sillytavern
from storyloom.sillytavern.character import CharacterDefinition
from storyloom.testing.st_documents import card_book_entry, card_document


def test_each_non_empty_card_field_becomes_a_tagged_definition_entry() -> None:
    preset = CharacterDefinition(
        name="Sera/phina",
        description="A guardian.",
        personality="kind",
        scenario="",
        first_mes="Hello.",
        mes_example="<START>",
        system_prompt="Be Sera.",
        post_history_instructions="Stay in character.",
        creator_notes="Made with care.",
        alternate_greetings=["Hi again.", ""],
        group_only_greetings=["Hello, all."],
        extensions={"depth_prompt": {"prompt": "Sera is tired.", "depth": 2, "role": "user"}},
    )
    kb = card_knowledge_base(preset)
    names = {e.displayName: e for e in kb.entries}
    assert set(names) == {
        "Sera／phina · description",
        "Sera／phina · personality",
        "Sera／phina · first message",
        "Sera／phina · example messages",
        "Sera／phina · system prompt",
        "Sera／phina · post-history instructions",
        "Sera／phina · creator notes",
        "Sera／phina · character note",
        "Sera／phina · alternate greeting 1",
        "Sera／phina · group greeting 1",
    }
    for entry in kb.entries:
        assert entry.entry_type == "character_definition"
        assert {"character_definition", "character:Sera/phina"} <= set(
            entry.management_metadata.tags
        )
        assert not entry.activation_criteria.constant and not entry.activation_criteria.keywords
    note = names["Sera／phina · character note"]
    assert note.usage_metadata.placement == Placement.AT_DEPTH
    assert (note.usage_metadata.depth, note.usage_metadata.role) == (2, "user")
    assert names["Sera／phina · description"].content.value == "A guardian."
    assert names["Sera／phina · alternate greeting 1"].extensions["character_card"] == {
        "field": "alternate_greetings",
        "index": 0,
    }
    assert kb.kb_displayName == "Sera/phina · character"


def test_card_import_keeps_definition_and_book_in_separate_knowledge_bases(tmp_path: Path) -> None:
    path = tmp_path / "aria.json"
    card = card_document(book=[card_book_entry(0, ["map"], "Maps drift.", comment="maps")])
    path.write_text(json.dumps(card))
    result = import_sillytavern(path)
    definition, book = result.knowledge_bases
    assert {e.entry_type for e in definition.entries} == {"character_definition"}
    assert [e.displayName for e in book.entries] == ["maps"]
    assert book.entries[0].entry_type == "lore_detail"
    assert result.character_book is book
    # Both belong to the character: a chat with another character does not scan them.
    assert result.character is not None
    tag = character_tag(result.character.name)
    assert tag in definition.tags and tag in book.tags
