"""How a knowledge base says it belongs to a character: its tags.

A card's embedded book becomes a KB tagged ``character:<name>`` (SillyTavern scans a
character's book only in that character's chats, and the lore scope reads this tag for
files from before books were bound). A card without a book makes no KB: its fields stay
in the character file (:class:`~storyloom.sillytavern.character.CharacterDefinition`),
the source of truth for them.

Projects imported before issue 27 also hold a "<name> · character" KB of
``character_definition`` entries, one per card field, that nothing scanned. It is not
lore: the lore scope, the card export, the move-out and the "Bind a book…" lists leave a
KB tagged :data:`CHARACTER_DEFINITION` out.
"""

from __future__ import annotations

CHARACTER_DEFINITION = "character_definition"
CHARACTER_TAG_PREFIX = "character:"


def character_tag(name: str) -> str:
    """The tag of the knowledge bases that belong to one character."""
    return f"{CHARACTER_TAG_PREFIX}{name}"
