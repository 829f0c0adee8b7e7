"""The Skein Builder (seed 001 §5.1): a context snapshot laid out as SillyTavern would.

SillyTavern's chat-completion prompt is a list of prompts in the preset's
``prompt_order``: markers whose text comes from the card, the persona and the world info
(``main``, ``worldInfoBefore``, ``personaDescription``, ``charDescription``,
``charPersonality``, ``scenario``, ``enhanceDefinitions``, ``nsfw``, ``worldInfoAfter``,
``dialogueExamples``, ``chatHistory``, ``jailbreak``) and the preset's own prompts,
either in that order (relative) or inside the chat at a depth (in-chat). Extensions
(author's note, the card's character note, world info "at depth") are in-chat too. The
builder follows that layout so a SillyTavern preset gives the prompt its user expects,
and it keeps every part a separate block with its source, so the inspector shows where
each came from and the budget can cut precisely.

Lore placements (:class:`~storyloom.knowledge.caiu.Placement`) go where SillyTavern puts
the matching world-info positions: before/after the character definitions, into the
author's note (top/bottom), around the example dialogue, at a depth in the chat, or into
an outlet (``{{outlet::name}}``, filled by the Prompt AST).

Block extras (kept in the Skein JSON, read by later shuttles): ``original`` (the text
``{{original}}`` stands for), ``group`` / ``group_format`` (adjacent blocks of a group
become one message, ``{0}`` in the format standing for their joined text),
``injection_order`` (in-chat ordering, SillyTavern's ``injection_order``), ``header``
(the line sent before an example dialogue) and ``squash`` (False: never merged with the
system messages around it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from storyloom.chat.personalab.director import director_guidance
from storyloom.chat.prompt.format_guide import format_guide
from storyloom.chat.prompt.skein import (
    BlockKind,
    BlockRole,
    BlockSource,
    CutBlock,
    Skein,
    SkeinBlock,
)
from storyloom.chat.prompt.source_label import PROMPT_NAMES, SourceWhat
from storyloom.chat.store.snapshot import ContextSnapshot, HistoryMessage, LoreHit
from storyloom.chat.store.template_problem import TemplateProblem
from storyloom.knowledge.caiu import Placement

# -- the preset's prompts ---------------------------------------------------------------

MARKERS = (
    "worldInfoBefore",
    "personaDescription",
    "charDescription",
    "charPersonality",
    "scenario",
    "worldInfoAfter",
    "dialogueExamples",
    "chatHistory",
)
"""Identifiers whose text the builder supplies (SillyTavern's markers)."""

RELATIVE: Literal[0] = 0
IN_CHAT: Literal[1] = 1
"""SillyTavern's ``injection_position``: 0 in prompt order, 1 inside the chat at a depth."""

DEFAULT_INJECTION_ORDER = 100
GROUP_DEPTH_PROMPTS = "group_depth_prompts"
"""Key in a group speaker's card ``extensions`` (never stored in a card file): every
member's character note, ``[{member, prompt, depth, role}]``, in the join-cards modes."""
FULL = 100
"""Priority of what the budget never cuts."""


class PresetPrompt(BaseModel):
    """One prompt of a SillyTavern chat-completion preset (``prompts[]``)."""

    model_config = ConfigDict(extra="allow")

    identifier: str = Field(min_length=1)
    name: str = ""
    role: BlockRole = "system"
    content: str = ""
    system_prompt: bool = False
    marker: bool = False
    injection_position: Literal[0, 1] = RELATIVE
    injection_depth: int = Field(default=4, ge=0)
    injection_order: int = DEFAULT_INJECTION_ORDER
    forbid_overrides: bool = False
    condition: str | None = Field(
        default=None,
        description="storyloom: a condition on the chat variables (hp < 30 and not "
        "asleep); the Prompt AST leaves the prompt out while it is false",
    )


class PromptOrderEntry(BaseModel):
    """One line of ``prompt_order``: which prompt, and whether it is on."""

    model_config = ConfigDict(extra="allow")

    identifier: str = Field(min_length=1)
    enabled: bool = True


DEFAULT_MAIN_PROMPT = (
    "Write {{char}}'s next reply in a fictional chat between {{char}} and {{user}}."
)
DEFAULT_ENHANCE_DEFINITIONS = (
    "If you have more knowledge of {{char}}, add to the character's lore and personality to "
    "enhance them but keep the Character Sheet's definitions absolute."
)
DEFAULT_NEW_CHAT_PROMPT = "[Start a new Chat]"
DEFAULT_NEW_EXAMPLE_CHAT_PROMPT = "[Example Chat]"
DEFAULT_CONTINUE_NUDGE_PROMPT = (
    "[Continue your last message without repeating its original content.]"
)
DEFAULT_IMPERSONATION_PROMPT = (
    "[Write your next reply from the point of view of {{user}}, using the chat history so "
    "far as a guideline for the writing style of {{user}}. Don't write as {{char}} or "
    "system. Don't describe actions of {{char}}.]"
)

DEFAULT_PROMPTS: tuple[PresetPrompt, ...] = (
    PresetPrompt(
        identifier="main", name="Main Prompt", system_prompt=True, content=DEFAULT_MAIN_PROMPT
    ),
    PresetPrompt(identifier="nsfw", name="Auxiliary Prompt", system_prompt=True),
    PresetPrompt(identifier="jailbreak", name="Post-History Instructions", system_prompt=True),
    PresetPrompt(
        identifier="enhanceDefinitions",
        name="Enhance Definitions",
        system_prompt=True,
        content=DEFAULT_ENHANCE_DEFINITIONS,
    ),
    *(
        PresetPrompt(identifier=marker, name=PROMPT_NAMES[marker], system_prompt=True, marker=True)
        for marker in MARKERS
    ),
)
"""SillyTavern's default OpenAI preset (``default/content/presets/openai/Default.json``)."""

DEFAULT_PROMPT_ORDER: tuple[PromptOrderEntry, ...] = tuple(
    PromptOrderEntry(identifier=identifier, enabled=identifier != "enhanceDefinitions")
    for identifier in (
        "main",
        "worldInfoBefore",
        "personaDescription",
        "charDescription",
        "charPersonality",
        "scenario",
        "enhanceDefinitions",
        "nsfw",
        "worldInfoAfter",
        "dialogueExamples",
        "chatHistory",
        "jailbreak",
    )
)
"""The default preset's global order (``character_id`` 100001)."""


@dataclass(frozen=True)
class SkeinOptions:
    """How to lay the prompt out: the preset's prompts and order, and the few texts
    SillyTavern keeps beside them."""

    prompts: Sequence[PresetPrompt] = DEFAULT_PROMPTS
    prompt_order: Sequence[PromptOrderEntry] = DEFAULT_PROMPT_ORDER
    new_chat_prompt: str = DEFAULT_NEW_CHAT_PROMPT
    new_example_chat_prompt: str = DEFAULT_NEW_EXAMPLE_CHAT_PROMPT
    continue_nudge_prompt: str = DEFAULT_CONTINUE_NUDGE_PROMPT
    impersonation_prompt: str = DEFAULT_IMPERSONATION_PROMPT
    wi_format: str = "{0}"
    scenario_format: str = "{{scenario}}"
    personality_format: str = "{{personality}}"
    summary_format: str = "[Summary of the story so far:\n{0}]"
    rag_format: str = "[Memories that may be relevant:\n{0}]"
    director_depth: int = 0
    pin_examples: bool = False
    prefer_character_prompt: bool = True
    prefer_character_jailbreak: bool = True
    format_guide: bool = True


# -- priorities -----------------------------------------------------------------------
# The budget cuts the lowest first, ties in prompt order. SillyTavern fills the history
# before the examples (unless they are pinned), and the history before optional lore is
# given up, so: examples < history (oldest lowest) < RAG < lore < summaries < the rest.

_EXAMPLES_PRIORITY = 9
_HISTORY_FLOOR = 10
_HISTORY_TOP = 30
_RAG_PRIORITY = 40
_LORE_FLOOR = 45
_LORE_TOP = 75
_SUMMARY_PRIORITY = 80
_AUTHORS_NOTE_PRIORITY = 85
_DIRECTOR_PRIORITY = 90
FORMAT_GUIDE_DEPTH = 1
"""The format guide goes just before the latest message."""


def lore_priority(entry_priority: int) -> int:
    """A lore entry's block priority from its CAIU priority (100 by default → 55)."""
    return max(_LORE_FLOOR, min(_LORE_TOP, _LORE_FLOOR + entry_priority // 10))


def history_priority(distance_from_end: int) -> int:
    """The newest message 30, one less per older message, never below 10."""
    return max(_HISTORY_FLOOR, _HISTORY_TOP - distance_from_end)


# -- the card -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Card:
    data: Mapping[str, Any]

    def text(self, key: str) -> str:
        value = self.data.get(key)
        return value if isinstance(value, str) else ""

    def depth_prompt(self) -> tuple[str, int, BlockRole] | None:
        """SillyTavern's character note (``extensions.depth_prompt``), read as its card
        importer reads it."""
        extensions = self.data.get("extensions")
        value = extensions.get("depth_prompt") if isinstance(extensions, Mapping) else None
        return self._note(value)

    def group_depth_prompts(self) -> list[tuple[str, str, int, BlockRole]] | None:
        """A group speaker's card in the "join character cards" modes: every member's
        character note (member id, text, depth, role), as SillyTavern injects each one;
        None on any other card (its own note is :meth:`depth_prompt`)."""
        extensions = self.data.get("extensions")
        values = extensions.get(GROUP_DEPTH_PROMPTS) if isinstance(extensions, Mapping) else None
        if not isinstance(values, list):
            return None
        notes = []
        for value in values:
            note = self._note(value)
            if note is not None and isinstance(value, Mapping):
                notes.append((str(value.get("member") or ""), *note))
        return notes

    @staticmethod
    def _note(value: object) -> tuple[str, int, BlockRole] | None:
        if not isinstance(value, Mapping) or not isinstance(value.get("prompt"), str):
            return None
        prompt = value["prompt"]
        if not prompt.strip():
            return None
        depth = value.get("depth")
        role = value.get("role")
        return (
            prompt,
            depth if isinstance(depth, int) and not isinstance(depth, bool) and depth >= 0 else 4,
            role if role in ("system", "user", "assistant") else "system",
        )


_START = re.compile(r"<START>", re.IGNORECASE)


def split_examples(mes_example: str) -> list[str]:
    """The example dialogues of a card: ``mes_example`` cut at each ``<START>``."""
    text = mes_example.replace("\r", "")
    parts = _START.split(text)
    return [part.strip() for part in parts if part.strip()]


def _format(template: str, name: str, value: str) -> str:
    """``template`` with the ``{{name}}`` macro (any case) filled by ``value``."""
    return re.sub(r"\{\{" + name + r"\}\}", lambda _: value, template, flags=re.IGNORECASE)


# -- building ---------------------------------------------------------------------------


@dataclass
class _Layout:
    """Blocks collected per prompt identifier, then put in prompt order."""

    by_prompt: dict[str, list[SkeinBlock]] = field(default_factory=dict)
    in_chat: list[SkeinBlock] = field(default_factory=list)
    after_main: list[SkeinBlock] = field(default_factory=list)
    control: list[SkeinBlock] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def add(self, identifier: str, *blocks: SkeinBlock) -> None:
        self.by_prompt.setdefault(identifier, []).extend(blocks)


def _lore_block(hit: LoreHit, group: str | None, group_format: str | None) -> SkeinBlock:
    extra: dict[str, Any] = {}
    if hit.prompt_top:
        extra[PROMPT_TOP] = True
    if group:
        extra["group"] = group
        extra["group_format"] = group_format or "{0}"
    return SkeinBlock(
        id=f"lore:{hit.kb_id}/{hit.entry_id}",
        kind=BlockKind.LORE,
        role="system",
        content=hit.content,
        source=BlockSource.of(
            "lore",
            "lore",
            id=f"{hit.kb_id}/{hit.entry_id}",
            field=hit.placement,
            # The inspector names a book by its name, never its id (an old snapshot's hit
            # has no name: its id is all there is).
            book=hit.kb_name or hit.kb_id,
            title=hit.title or hit.entry_id,
            placement=hit.placement,
        ).model_copy(update={"kb_name": hit.kb_name or hit.kb_id}),
        priority=lore_priority(hit.priority),
        **extra,
    )


PROMPT_TOP = "prompt_top"
"""A lore block's extra field: it goes first in the prompt ([GENERATE:BEFORE])."""

_WORLD_INFO_BEFORE = {
    Placement.BEFORE_CHARACTER.value,
    Placement.BEFORE_PROMPT.value,
    Placement.SYSTEM_CONTEXT.value,
}
_WORLD_INFO_AFTER = {Placement.AFTER_CHARACTER.value, Placement.AFTER_PROMPT.value}
_AN_TOP = {Placement.AUTHORS_NOTE_TOP.value}
_AN_BOTTOM = {Placement.AUTHORS_NOTE_BOTTOM.value, Placement.SCRATCHPAD_NOTES.value}


def build_skein(snapshot: ContextSnapshot, options: SkeinOptions | None = None) -> Skein:
    """The Skein of one turn: every part of the prompt as a block, in prompt order, the
    history contiguous and the in-chat blocks (``depth`` set) right after it."""
    options = options or SkeinOptions()
    card = _Card(snapshot.character.card)
    char_name = card.text("name") or "Character"
    user_name = snapshot.settings.user_name
    prompts = {p.identifier: p for p in DEFAULT_PROMPTS}
    prompts.update({p.identifier: p for p in options.prompts})
    if snapshot.preset_templates:
        # EJS in a preset prompt: its text as the turn's template batch rendered it.
        rendered = snapshot.preset_templates
        prompts = {
            key: p.model_copy(update={"content": rendered[p.content]})
            if p.content in rendered
            else p
            for key, p in prompts.items()
        }
    layout = _Layout()

    _add_card(layout, snapshot, card, prompts, options)
    outlets = _add_lore(layout, prompt_lore(snapshot), options)
    _add_examples(layout, card, options, char_name, user_name)
    _add_history(layout, snapshot.history, options, snapshot.generation)
    _add_in_chat_extensions(layout, snapshot, card, options)
    _add_memories(layout, snapshot, options)
    if options.format_guide:
        _add_format_guide(layout, snapshot)

    blocks: list[SkeinBlock] = []
    custom_in_chat: list[SkeinBlock] = []
    seen_main = False
    for entry in options.prompt_order:
        prompt = prompts.get(entry.identifier)
        if prompt is None:
            layout.warnings.append(
                f"prompt_order names {entry.identifier!r}, which is not among the prompts"
            )
            continue
        if not entry.enabled and entry.identifier != "main":
            continue
        if entry.identifier in MARKERS or entry.identifier in layout.by_prompt:
            if prompt.injection_position == IN_CHAT and entry.identifier not in MARKERS:
                custom_in_chat.extend(
                    _in_chat(b, prompt) for b in layout.by_prompt[entry.identifier]
                )
            else:
                blocks.extend(layout.by_prompt.get(entry.identifier, []))
        elif prompt.marker:
            continue  # a marker storyloom has no text for (SillyTavern ignores those too)
        elif prompt.content.strip():
            block = _custom_block(prompt)
            if prompt.injection_position == IN_CHAT:
                custom_in_chat.append(_in_chat(block, prompt))
            else:
                blocks.append(block)
        if entry.identifier == "main":
            seen_main = True
            blocks.extend(layout.after_main)
    if not seen_main:
        blocks[0:0] = layout.after_main

    # The history stays contiguous; in-chat blocks follow it (the Weaver puts them in).
    # SillyTavern joins a depth's preset prompts before the extensions' text.
    history_end = _last_index(blocks, BlockKind.HISTORY)
    in_chat = custom_in_chat + layout.in_chat
    insert_at = history_end + 1 if history_end >= 0 else len(blocks)
    blocks[insert_at:insert_at] = in_chat
    blocks.extend(layout.control)
    # [GENERATE:BEFORE] lore opens the prompt, whatever the preset's order.
    top = [b for b in blocks if (b.model_extra or {}).get(PROMPT_TOP)]
    if top:
        blocks = top + [b for b in blocks if not (b.model_extra or {}).get(PROMPT_TOP)]

    # The snapshot brought only the history the context window can hold: what lies
    # before it is shown in the inspector as cut, like the budget's own cuts.
    cut = []
    if snapshot.history_omitted:
        cut.append(
            CutBlock(
                id="history:older",
                kind=BlockKind.HISTORY,
                tokens=0,
                reason=f"{snapshot.history_omitted} older message(s) lie beyond the "
                "model's context window",
                term="beyond_context",
                values={"count": snapshot.history_omitted},
            )
        )
    warnings = layout.warnings + [template_warning(p) for p in snapshot.template_problems]
    skein = Skein(
        blocks=_unique_ids(blocks),
        variables=dict(snapshot.state.variables),
        lore=[record.model_copy() for record in snapshot.lore_report],
        lore_dropped=snapshot.lore_dropped,
        cut=cut,
        warnings=warnings,
        char_name=char_name,
        user_name=user_name,
        outlets=outlets,
    )
    if snapshot.template_global_variables is not None:
        # What the templates wrote is saved with the turn, as a {{setglobalvar}} would be.
        # (an extra field of the skein, as prompt_ast keeps it)
        setattr(skein, GLOBAL_VARIABLES_EXTRA, dict(snapshot.template_global_variables))
    return skein


GLOBAL_VARIABLES_EXTRA = "global_variables"
"""The skein's extra field holding the global variables (prompt_ast.GLOBAL_VARIABLES)."""


def template_warning(problem: TemplateProblem) -> str:
    """A template left as written, as the reply's warnings say it."""
    where = f" (line {problem.line})" if problem.line is not None else ""
    return f"template {problem.name}{where}: {problem.message}; its text is left as written"


def _last_index(blocks: Sequence[SkeinBlock], kind: BlockKind) -> int:
    for index in range(len(blocks) - 1, -1, -1):
        if blocks[index].kind is kind:
            return index
    return -1


def _unique_ids(blocks: list[SkeinBlock]) -> list[SkeinBlock]:
    """Block ids made unique (a lore entry twice, two custom prompts of one id)."""
    seen: dict[str, int] = {}
    out: list[SkeinBlock] = []
    for block in blocks:
        count = seen.get(block.id, 0)
        seen[block.id] = count + 1
        out.append(block if count == 0 else block.model_copy(update={"id": f"{block.id}#{count}"}))
    return out


def _in_chat(block: SkeinBlock, prompt: PresetPrompt) -> SkeinBlock:
    return block.model_copy(
        update={"depth": prompt.injection_depth, "injection_order": prompt.injection_order}
    )


def _custom_block(prompt: PresetPrompt) -> SkeinBlock:
    builtin = prompt.identifier in ("main", "nsfw", "jailbreak", "enhanceDefinitions")
    kind = (
        BlockKind.POST_HISTORY
        if prompt.identifier == "jailbreak"
        else (BlockKind.SYSTEM if builtin else BlockKind.CUSTOM)
    )
    return SkeinBlock(
        id=prompt.identifier,
        kind=kind,
        role=prompt.role,
        content=prompt.content,
        source=BlockSource.of(
            "preset",
            "preset_prompt",
            id=prompt.identifier,
            field="prompts",
            prompt=prompt.identifier,
            # SillyTavern's own name of a built-in prompt is no name the user gave: the
            # web app says it in the page's language.
            name="" if prompt.name == PROMPT_NAMES.get(prompt.identifier) else prompt.name,
        ),
        priority=FULL,
        condition=prompt.condition,
    )


def _add_card(
    layout: _Layout,
    snapshot: ContextSnapshot,
    card: _Card,
    prompts: Mapping[str, PresetPrompt],
    options: SkeinOptions,
) -> None:
    character = snapshot.character

    def card_block(
        block_id: str,
        kind: BlockKind,
        text: str,
        field_name: str,
        what: SourceWhat,
        source: BlockSource | None = None,
    ) -> SkeinBlock:
        return SkeinBlock(
            id=block_id,
            kind=kind,
            role="system",
            content=text,
            source=source
            or BlockSource.of("character", what, id=character.source_preset, field=field_name),
            priority=FULL,
        )

    # Main prompt and post-history instructions: the card's own replace the preset's
    # (SillyTavern's "prefer character card prompt"), {{original}} being the preset's.
    card_prompts: tuple[tuple[str, str, bool, SourceWhat], ...] = (
        ("main", "system_prompt", options.prefer_character_prompt, "card_system_prompt"),
        (
            "jailbreak",
            "post_history_instructions",
            options.prefer_character_jailbreak,
            "card_post_history",
        ),
    )
    for identifier, card_field, prefer, what in card_prompts:
        prompt = prompts.get(identifier)
        if prompt is None:
            continue
        block = _custom_block(prompt)
        override = card.text(card_field)
        if prefer and override.strip() and not prompt.forbid_overrides:
            block = block.model_copy(
                update={
                    "content": override,
                    "source": BlockSource.of(
                        "character", what, id=character.source_preset, field=card_field
                    ),
                    "original": prompt.content,
                }
            )
        if block.content.strip():
            layout.add(identifier, block)

    description = card.text("description")
    if description.strip():
        layout.add(
            "charDescription",
            card_block(
                "charDescription",
                BlockKind.CHARACTER,
                description,
                "description",
                "card_description",
            ),
        )
    elif character.base_persona.strip():
        layout.add(
            "charDescription",
            card_block(
                "charDescription",
                BlockKind.CHARACTER,
                character.base_persona,
                "base_persona",
                "character_base_persona",
            ),
        )
    if character.evolved_persona.strip():
        layout.add(
            "charDescription",
            card_block(
                "evolvedPersona",
                BlockKind.CHARACTER,
                character.evolved_persona,
                "evolved_persona",
                "character_evolved_persona",
            ),
        )

    personality = card.text("personality")
    if personality.strip() and options.personality_format:
        text = _format(options.personality_format, "personality", personality)
        layout.add(
            "charPersonality",
            card_block(
                "charPersonality", BlockKind.CHARACTER, text, "personality", "card_personality"
            ),
        )

    scenario = card.text("scenario")
    if scenario.strip() and options.scenario_format:
        text = _format(options.scenario_format, "scenario", scenario)
        layout.add(
            "scenario",
            card_block("scenario", BlockKind.SCENARIO, text, "scenario", "card_scenario"),
        )
    background = snapshot.background
    if background is not None and background.world_setting.strip():
        source = BlockSource.of(
            "background",
            "background",
            id=background.source_preset,
            field="world_setting",
            name=background.name,
        )
        layout.add(
            "scenario",
            card_block(
                "worldSetting",
                BlockKind.SCENARIO,
                background.world_setting,
                "",
                "background",
                source,
            ),
        )

    persona = snapshot.settings.persona
    if persona.strip():
        layout.add(
            "personaDescription",
            SkeinBlock(
                id="personaDescription",
                kind=BlockKind.PERSONA,
                role="system",
                content=persona,
                source=BlockSource.of(
                    "persona", "persona", field="persona", name=snapshot.settings.user_name
                ),
                priority=FULL,
            ),
        )

    for identifier in ("nsfw", "enhanceDefinitions"):
        prompt = prompts.get(identifier)
        if prompt is not None and prompt.content.strip():
            layout.add(identifier, _custom_block(prompt))


def _add_lore(layout: _Layout, hits: Sequence[LoreHit], options: SkeinOptions) -> dict[str, str]:
    """Lore blocks at their placements; returns the outlets' texts by name."""
    outlets: dict[str, list[str]] = {}
    for hit in hits:
        if not hit.content.strip():
            continue
        placement = hit.placement
        if placement in _WORLD_INFO_BEFORE:
            layout.add("worldInfoBefore", _lore_block(hit, "worldInfoBefore", options.wi_format))
        elif placement in _WORLD_INFO_AFTER:
            layout.add("worldInfoAfter", _lore_block(hit, "worldInfoAfter", options.wi_format))
        elif placement == Placement.EXAMPLES_TOP.value:
            layout.add("examplesTop", _lore_block(hit, None, None))
        elif placement == Placement.EXAMPLES_BOTTOM.value:
            layout.add("examplesBottom", _lore_block(hit, None, None))
        elif placement in _AN_TOP:
            layout.add("authorsNoteTop", _lore_block(hit, None, None))
        elif placement in _AN_BOTTOM:
            layout.add("authorsNoteBottom", _lore_block(hit, None, None))
        elif placement == Placement.AT_DEPTH.value:
            depth = hit.depth if hit.depth is not None else 4
            role = hit.role if hit.role in ("system", "user", "assistant") else "system"
            block = _lore_block(hit, None, None)
            layout.add("atDepth", block.model_copy(update={"depth": depth, "role": role}))
        elif placement == Placement.OUTLET.value:
            extra = hit.model_extra or {}
            name = str(extra.get("outlet_name") or "")
            outlets.setdefault(name, []).append(hit.content)
        else:
            layout.warnings.append(
                f"lore {hit.kb_id}/{hit.entry_id}: unknown placement {placement!r}; "
                "placed before the character"
            )
            layout.add("worldInfoBefore", _lore_block(hit, "worldInfoBefore", options.wi_format))
    return {name: "\n".join(texts) for name, texts in outlets.items()}


def _add_examples(
    layout: _Layout, card: _Card, options: SkeinOptions, char_name: str, user_name: str
) -> None:
    top = layout.by_prompt.pop("examplesTop", [])
    bottom = layout.by_prompt.pop("examplesBottom", [])
    dialogues = split_examples(card.text("mes_example"))
    blocks: list[SkeinBlock] = list(top)
    for n, dialogue in enumerate(dialogues):
        priority = FULL - 5 if options.pin_examples else max(1, _EXAMPLES_PRIORITY - n)
        blocks.append(
            SkeinBlock(
                id=f"example:{n + 1}",
                kind=BlockKind.EXAMPLES,
                role="system",
                content=dialogue,
                source=BlockSource.of(
                    "character",
                    "card_example",
                    field="mes_example",
                    n=n + 1,
                    total=len(dialogues),
                ),
                priority=priority,
                header=options.new_example_chat_prompt,
                # After macros "{{char}}:" reads as a V3 card's nickname, where it has one.
                speakers={"user": user_name, "char": card.text("nickname").strip() or char_name},
            )
        )
    blocks.extend(bottom)
    if blocks:
        layout.add("dialogueExamples", *blocks)


def _history_source(index: int, message: HistoryMessage) -> BlockSource:
    # Numbered as the chat (#n) and the lore reasons number it: its place in the whole chat.
    number = message.number if message.number is not None else index
    return BlockSource.of(
        "message",
        "message",
        id=message.id,
        number=number,
        role=message.role,
        speaker=message.name,
    )


STATUS_PLACEHOLDER = "<StatusPlaceHolderImpl/>"
MVU_UPDATE_MARK = "[mvu_update]"
"""MVU's name for the lore of its separate updater (the update rules and format)."""


def mvu_update_lore(snapshot: ContextSnapshot) -> list[LoreHit]:
    """The activated lore entries MVU's separate updater is sent (named ``[mvu_update]``)."""
    return [hit for hit in snapshot.lore if MVU_UPDATE_MARK in hit.title.lower()]


def prompt_lore(snapshot: ContextSnapshot) -> list[LoreHit]:
    """The activated lore of the reply's prompt: all of it, except the ``[mvu_update]``
    entries where the chat sends those to a separate updater (``[mvu_plot]`` entries
    always stay: they are for the story)."""
    if not snapshot.settings.mvu_updater:
        return list(snapshot.lore)
    return [hit for hit in snapshot.lore if MVU_UPDATE_MARK not in hit.title.lower()]


def without_status_placeholder(text: str) -> str:
    """``text`` without MVU's status-bar placeholder: it marks where the page draws the
    bar and means nothing to the model."""
    return text.replace(STATUS_PLACEHOLDER, "") if STATUS_PLACEHOLDER in text else text


def _with_tool_results(message: HistoryMessage) -> str:
    """An agent turn as the model saw it: its tool results first, then the reply."""
    content = without_status_placeholder(message.content)
    if not message.tool_results:
        return content
    return f"{message.tool_results}\n\n{content}" if content else message.tool_results


def _add_history(
    layout: _Layout, history: Sequence[HistoryMessage], options: SkeinOptions, generation: str
) -> None:
    blocks: list[SkeinBlock] = []
    if options.new_chat_prompt:
        blocks.append(
            SkeinBlock(
                id="newMainChat",
                kind=BlockKind.SYSTEM,
                role="system",
                content=options.new_chat_prompt,
                source=BlockSource.of("preset", "preset_new_chat", field="new_chat_prompt"),
                priority=FULL,
                squash=False,
            )
        )
    newest_user = max((i for i, m in enumerate(history) if m.role == "user"), default=-1)
    for index, message in enumerate(history):
        distance = len(history) - 1 - index
        keep = index == newest_user or distance == 0
        blocks.append(
            SkeinBlock(
                id=f"msg:{message.id}",
                kind=BlockKind.HISTORY,
                role=message.role,
                content=_with_tool_results(message),
                source=_history_source(index, message),
                priority=FULL if keep else history_priority(distance),
                message_id=message.id,
                name=message.name or None,
            )
        )
    if generation == "continue" and history and options.continue_nudge_prompt:
        blocks.append(
            SkeinBlock(
                id="continueNudge",
                kind=BlockKind.SYSTEM,
                role="system",
                content=options.continue_nudge_prompt,
                source=BlockSource.of(
                    "preset", "preset_continue_nudge", field="continue_nudge_prompt"
                ),
                priority=FULL,
            )
        )
    if generation == "impersonate" and options.impersonation_prompt:
        layout.control.append(
            SkeinBlock(
                id="impersonate",
                kind=BlockKind.SYSTEM,
                role="system",
                content=options.impersonation_prompt,
                source=BlockSource.of(
                    "preset", "preset_impersonation", field="impersonation_prompt"
                ),
                priority=FULL,
            )
        )
    layout.add("chatHistory", *blocks)


def _add_in_chat_extensions(
    layout: _Layout, snapshot: ContextSnapshot, card: _Card, options: SkeinOptions
) -> None:
    """Author's note (with its lore), the card's character note, lore at depth and the
    director, in SillyTavern's order of extension prompts at one depth."""
    settings = snapshot.settings
    note_depth = settings.authors_note_depth
    note: list[SkeinBlock] = [
        b.model_copy(update={"depth": note_depth})
        for b in layout.by_prompt.pop("authorsNoteTop", [])
    ]
    if settings.authors_note.strip():
        note.append(
            SkeinBlock(
                id="authorsNote",
                kind=BlockKind.AUTHORS_NOTE,
                role="system",
                content=settings.authors_note,
                source=BlockSource.of("conversation", "authors_note", field="authors_note"),
                priority=_AUTHORS_NOTE_PRIORITY,
                depth=note_depth,
            )
        )
    note.extend(
        b.model_copy(update={"depth": note_depth})
        for b in layout.by_prompt.pop("authorsNoteBottom", [])
    )
    layout.in_chat.extend(note)

    group_notes = card.group_depth_prompts()
    if group_notes is None:
        own = card.depth_prompt()
        notes = [("", *own)] if own is not None else []
    else:
        notes = group_notes
    for member, text, depth, role in notes:
        layout.in_chat.append(
            SkeinBlock(
                id=f"characterNote:{member}" if member else "characterNote",
                kind=BlockKind.CHARACTER,
                role=role,
                content=text,
                source=BlockSource.of(
                    "character",
                    "card_character_note",
                    id=member or snapshot.character.source_preset,
                    field="extensions.depth_prompt",
                    member=member,
                ),
                priority=_DIRECTOR_PRIORITY,
                depth=depth,
            )
        )
    layout.in_chat.extend(layout.by_prompt.pop("atDepth", []))

    plot = snapshot.state.plot
    if plot is not None and settings.director_enabled:
        guidance = director_guidance(plot, snapshot.background, settings.rag_fallback_threshold)
        if guidance:
            layout.in_chat.append(
                SkeinBlock(
                    id="director",
                    kind=BlockKind.DIRECTOR,
                    role="system",
                    content=guidance,
                    source=BlockSource.of(
                        "director",
                        "director",
                        id=snapshot.background.source_preset if snapshot.background else None,
                        field="story_outline",
                        point=plot.current_plot_index,
                    ),
                    priority=_DIRECTOR_PRIORITY,
                    depth=options.director_depth,
                )
            )


_FORMAT_SOURCES: dict[str, tuple[Literal["conversation", "character"], str, SourceWhat]] = {
    "builtin": ("conversation", "settings.format_guide", "format_guide_builtin"),
    "chat": ("conversation", "settings.format_guide_text", "format_guide_chat"),
    "card": ("character", "extensions.storyloom.format_guide", "format_guide_card"),
}


def _add_format_guide(layout: _Layout, snapshot: ContextSnapshot) -> None:
    """The Filament format and the state as it is now, just before the latest message:
    near the end is where a small model still reads it."""
    guide = format_guide(snapshot)
    if guide is None:
        return
    kind, field_name, what = _FORMAT_SOURCES[guide.origin]
    layout.in_chat.append(
        SkeinBlock(
            id="formatGuide",
            kind=BlockKind.FORMAT,
            role="system",
            content=guide.text,
            source=BlockSource.of(
                kind,
                what,
                id=snapshot.character.source_preset if kind == "character" else None,
                field=field_name,
            ),
            priority=_DIRECTOR_PRIORITY,
            depth=FORMAT_GUIDE_DEPTH,
        )
    )


def _add_memories(layout: _Layout, snapshot: ContextSnapshot, options: SkeinOptions) -> None:
    """Summaries and retrieved memories, right after the main prompt as SillyTavern puts
    its summary and vector-memory extensions."""
    for n, summary in enumerate(s for s in snapshot.summaries if s.strip()):
        layout.after_main.append(
            SkeinBlock(
                id=f"summary:{n + 1}",
                kind=BlockKind.SUMMARY,
                role="system",
                content=summary,
                source=BlockSource.of("summary", "summary", n=n + 1),
                priority=_SUMMARY_PRIORITY,
                group="summary",
                group_format=options.summary_format or "{0}",
            )
        )
    for rank, hit in enumerate(snapshot.rag):
        if not hit.content.strip():
            continue
        layout.after_main.append(
            SkeinBlock(
                id=f"rag:{hit.id}",
                kind=BlockKind.RAG,
                role="system",
                content=hit.content,
                source=BlockSource.of(
                    "rag", "rag", id=hit.id, field=hit.source, source=hit.source, score=hit.score
                ),
                priority=max(_HISTORY_TOP + 1, _RAG_PRIORITY - rank),
                group="rag",
                group_format=options.rag_format or "{0}",
            )
        )
