"""A character card as knowledge: one CAIU per field of the character's definition.

Decision: a card gives two knowledge bases, not one. The character's own fields
(description, personality, scenario, first message, examples, system prompt,
post-history instructions, creator notes, character note, greetings) become a
"<name> · character" KB of ``character_definition`` entries; the embedded
``character_book`` becomes a second KB converted exactly like a world-info book
(:func:`.st_world_info.character_book_to_kb`). Kept apart, the book still exports back
into the card (and as a world-info file) entry for entry, and the definition entries
never leak into it; the definition KB is derived from the :class:`CharacterDefinition`,
which stays the source of truth for the card's fields.

The definition entries are not constant and have no keywords: the prompt assembler
places the character from the preset. They exist to be referenced
(``{{{Seraphina · description}}}``), searched and shown in the knowledge editor.
Display names use " · " because '/' separates reference path segments.
"""

from __future__ import annotations

from storyloom.knowledge.caiu import (
    CAIU,
    ActivationCriteria,
    Content,
    ManagementMetadata,
    Placement,
    UsageMetadata,
)
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.st_world_info_entry import (
    EXTENSION_KEY,
    IMPORT_SOURCE,
    ST_TAG,
    display_name_from_comment,
)
from storyloom.sillytavern.character import CharacterDefinition

CHARACTER_DEFINITION = "character_definition"
CARD_FIELD_KEY = "character_card"

# Card field -> (label in the display name, where the prompt would put it).
DEFINITION_FIELDS: dict[str, tuple[str, Placement]] = {
    "description": ("description", Placement.BEFORE_CHARACTER),
    "personality": ("personality", Placement.BEFORE_CHARACTER),
    "scenario": ("scenario", Placement.BEFORE_CHARACTER),
    "first_mes": ("first message", Placement.BEFORE_CHARACTER),
    "mes_example": ("example messages", Placement.EXAMPLES_TOP),
    "system_prompt": ("system prompt", Placement.BEFORE_PROMPT),
    "post_history_instructions": ("post-history instructions", Placement.AFTER_PROMPT),
    "creator_notes": ("creator notes", Placement.BEFORE_CHARACTER),
}


CHARACTER_TAG_PREFIX = "character:"


def character_tag(name: str) -> str:
    """The tag of the knowledge bases that belong to one character."""
    return f"{CHARACTER_TAG_PREFIX}{name}"


def _definition_entry(
    preset: CharacterDefinition,
    entry_id: str,
    label: str,
    text: str,
    card_field: str,
    placement: Placement,
    index: int | None = None,
) -> CAIU:
    name = display_name_from_comment(f"{preset.name} · {label}") or label
    origin: dict[str, object] = {"field": card_field}
    if index is not None:
        origin["index"] = index
    return CAIU(
        id=entry_id,
        entry_type=CHARACTER_DEFINITION,
        displayName=name,
        content=Content(value=text),
        activation_criteria=ActivationCriteria(),
        usage_metadata=UsageMetadata(placement=placement),
        management_metadata=ManagementMetadata(
            tags=[CHARACTER_DEFINITION, character_tag(preset.name), ST_TAG],
            source=IMPORT_SOURCE,
            editor_description=f"From the card's {card_field}"
            + (f"[{index}]" if index is not None else ""),
        ),
        extensions={CARD_FIELD_KEY: origin},
    )


def definition_entries(preset: CharacterDefinition) -> list[CAIU]:
    """The character_definition CAIUs of a preset; empty fields give none."""
    entries: list[CAIU] = []
    for card_field, (label, placement) in DEFINITION_FIELDS.items():
        text = getattr(preset, card_field)
        if text.strip():
            entries.append(
                _definition_entry(preset, f"char_{card_field}", label, text, card_field, placement)
            )
    note = preset.depth_prompt
    if note is not None:
        entry = _definition_entry(
            preset,
            "char_depth_prompt",
            "character note",
            note.prompt,
            "extensions.depth_prompt",
            Placement.AT_DEPTH,
        )
        entry.usage_metadata.depth = note.depth
        entry.usage_metadata.role = note.role
        entries.append(entry)
    for list_field, label in (
        ("alternate_greetings", "alternate greeting"),
        ("group_only_greetings", "group greeting"),
    ):
        for number, text in enumerate(getattr(preset, list_field), start=1):
            if text.strip():
                entries.append(
                    _definition_entry(
                        preset,
                        f"char_{list_field}_{number}",
                        f"{label} {number}",
                        text,
                        list_field,
                        Placement.BEFORE_CHARACTER,
                        number - 1,
                    )
                )
    return entries


def card_knowledge_base(preset: CharacterDefinition) -> KnowledgeBase:
    """The "<name> · character" KB of a preset."""
    return KnowledgeBase(
        kb_displayName=f"{preset.name} · character",
        kb_description=f"The character definition of {preset.name}, from a SillyTavern card",
        tags=[CHARACTER_DEFINITION, character_tag(preset.name), ST_TAG],
        author=preset.creator or None,
        entries=definition_entries(preset),
        kb_extensions={EXTENSION_KEY: {"format": CHARACTER_DEFINITION, "character": preset.name}},
    )
