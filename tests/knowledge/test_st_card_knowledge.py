"""A card's knowledge: its book, and no knowledge base for a card without one."""

from __future__ import annotations

import json
from pathlib import Path

from storyloom.knowledge.card_knowledge import character_tag
from storyloom.knowledge.st_import import import_sillytavern
from storyloom.testing.st_documents import card_book_entry, card_document


def test_a_card_without_lore_makes_no_knowledge_base(tmp_path: Path) -> None:
    path = tmp_path / "aria.json"
    path.write_text(json.dumps(card_document()))
    result = import_sillytavern(path)
    assert result.character is not None and result.character.name
    assert result.knowledge_bases == [] and result.character_book is None


def test_a_cards_book_is_its_only_knowledge_base(tmp_path: Path) -> None:
    path = tmp_path / "aria.json"
    card = card_document(book=[card_book_entry(0, ["map"], "Maps drift.", comment="maps")])
    path.write_text(json.dumps(card))
    result = import_sillytavern(path)
    (book,) = result.knowledge_bases
    assert [e.displayName for e in book.entries] == ["maps"]
    assert book.entries[0].entry_type == "lore_detail"
    assert result.character_book is book
    # It belongs to the character: a chat with another character does not scan it.
    assert result.character is not None
    assert character_tag(result.character.name) in book.tags
