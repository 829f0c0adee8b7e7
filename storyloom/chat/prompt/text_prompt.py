"""The Skein as one prompt string, for a text-completion API (the ``chat:TextPrompt`` node).

A text-completion server takes the prompt as one string, so the turn markers come from
an instruct template and the card's fields go into a context template's *story
string*, the way SillyTavern's instruct mode lays a chat out
(:func:`storyloom.llm.instruct.format_prompt` does the formatting). This module decides
what of the Skein goes where:

- blocks before the chat history fill the story string's fields: ``system`` (the main
  prompt and the preset's other prompts), ``description`` and ``personality`` (the
  card's blocks by field), ``scenario``, ``persona``, ``wiBefore`` / ``wiAfter`` (lore
  by its world-info group) and ``anchorAfter`` (summaries and memories, where
  SillyTavern puts the extensions' "in prompt" text);
- example dialogues (and lore placed around them) become the example blocks, turn by
  turn; the template's ``skip_examples`` decides whether they are wrapped in turns;
- the history, the in-chat blocks woven in at their depth exactly as the Weaver weaves
  them (:func:`~storyloom.chat.prompt.weaver.weave_sources`), and the blocks after the
  history (post-history instructions, the continue nudge) are the chat's turns;
- the chat-completion "[Start a new Chat]" line is left out: the context template's
  chat start stands in for it.

Every stretch of the text is labelled with where it came from: a template's sequence,
the chat start, or the Skein block (its id and its source's label), so the prompt
inspector shows the exact text sent and what each part of it is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from storyloom.chat.prompt.prompt_ast import block_extra
from storyloom.chat.prompt.skein import BlockKind, Skein, SkeinBlock
from storyloom.chat.prompt.token_budget import MessageCost
from storyloom.chat.prompt.weaver import group_text, parse_example, weave_sources
from storyloom.llm.instruct import (
    PromptPiece,
    PromptTurn,
    ResolvedTemplates,
    TextPrompt,
    format_prompt,
)

STORY_STRING = "story string"
"""The label format_prompt gives the rendered story string."""

_CHARACTER_FIELDS = {"personality": "personality"}
"""Card fields with a story-string field of their own; other character blocks (the
description, the base and evolved persona) are the ``description``."""

NEW_CHAT_BLOCK = "newMainChat"


@dataclass
class _Layout:
    """The Skein sorted into the parts of a text-completion prompt."""

    story: dict[str, list[SkeinBlock]] = field(default_factory=dict)
    examples: list[list[SkeinBlock]] = field(default_factory=list)
    chat: list[SkeinBlock] = field(default_factory=list)


def _story_field(block: SkeinBlock) -> str:
    match block.kind:
        case BlockKind.PERSONA:
            return "persona"
        case BlockKind.SCENARIO:
            return "scenario"
        case BlockKind.CHARACTER:
            return _CHARACTER_FIELDS.get(block.source.field or "", "description")
        case BlockKind.LORE:
            return "wiAfter" if block_extra(block, "group") == "worldInfoAfter" else "wiBefore"
        case (
            BlockKind.SUMMARY
            | BlockKind.RAG
            | BlockKind.DIRECTOR
            | BlockKind.FORMAT
            | BlockKind.AUTHORS_NOTE
        ):
            return "anchorAfter"
        case (
            BlockKind.SYSTEM
            | BlockKind.CUSTOM
            | BlockKind.POST_HISTORY
            | BlockKind.HISTORY
            | BlockKind.EXAMPLES
        ):
            return "system"


def _layout(blocks: Sequence[SkeinBlock]) -> _Layout:
    layout = _Layout()
    first_history = next((i for i, b in enumerate(blocks) if b.kind is BlockKind.HISTORY), None)
    pending_lore: list[SkeinBlock] = []  # lore placed above the first example
    for index, block in enumerate(blocks):
        after_history = first_history is not None and index > first_history
        if block.id == NEW_CHAT_BLOCK and block.kind is BlockKind.SYSTEM:
            continue
        if (
            block.depth is not None
            or block.kind in (BlockKind.HISTORY, BlockKind.POST_HISTORY)
            or after_history
        ):
            layout.chat.append(block)
        elif block.kind is BlockKind.EXAMPLES:
            layout.examples.append([*pending_lore, block])
            pending_lore = []
        elif block.kind is BlockKind.LORE and not block_extra(block, "group"):
            # Lore at the examples' top or bottom: with the example next to it.
            if layout.examples:
                layout.examples[-1].append(block)
            else:
                pending_lore.append(block)
        else:
            layout.story.setdefault(_story_field(block), []).append(block)
    if pending_lore:
        layout.examples.append(pending_lore)
    return layout


def _field_text(blocks: Sequence[SkeinBlock]) -> str:
    """A story field's text: its blocks joined by newlines, a group's blocks inside the
    group's format (world info's ``{0}``), as the Weaver joins them."""
    parts: list[str] = []
    index = 0
    while index < len(blocks):
        group = block_extra(blocks[index], "group")
        end = index + 1
        while group and end < len(blocks) and block_extra(blocks[end], "group") == group:
            end += 1
        parts.append(group_text(blocks[index:end]) if group else blocks[index].content.strip())
        index = end
    return "\n".join(parts)


@dataclass
class _Sources:
    """Turn keys (PromptTurn.source) → the blocks the turn's text came from."""

    blocks: dict[str, list[SkeinBlock]] = field(default_factory=dict)

    def key(self, blocks: Iterable[SkeinBlock]) -> str:
        key = f"turn {len(self.blocks) + 1}"
        self.blocks[key] = list(blocks)
        return key


def _example_turns(
    group: Sequence[SkeinBlock], user: str, char: str, sources: _Sources
) -> list[PromptTurn]:
    turns: list[PromptTurn] = []
    for block in group:
        if block.kind is not BlockKind.EXAMPLES:
            turns.append(
                PromptTurn(role="system", content=block.content, source=sources.key([block]))
            )
            continue
        speakers = block_extra(block, "speakers") or {}
        parsed = parse_example(
            block.content, str(speakers.get("user") or user), str(speakers.get("char") or char)
        )
        if not parsed:
            turns.append(
                PromptTurn(role="system", content=block.content, source=sources.key([block]))
            )
        for who, text in parsed:
            role: Literal["user", "assistant"] = "user" if who == "user" else "assistant"
            turns.append(PromptTurn(role=role, content=text, source=sources.key([block])))
    return turns


def _chat_turns(skein: Skein, chat: list[SkeinBlock], sources: _Sources) -> list[PromptTurn]:
    by_id = {block.id: block for block in chat}
    woven = weave_sources(skein.model_copy(update={"blocks": chat}))
    turns: list[PromptTurn] = []
    for item in woven:
        blocks = [by_id[i] for i in item.block_ids if i in by_id]
        name = blocks[0].name if len(blocks) == 1 and blocks[0].kind is BlockKind.HISTORY else None
        role = item.message["role"]
        turns.append(
            PromptTurn(
                role=role if role in ("system", "user", "assistant") else "system",
                content=str(item.message["content"]),
                name=name,
                source=sources.key(blocks),
            )
        )
    return turns


def skein_text_prompt(skein: Skein, templates: ResolvedTemplates) -> dict[str, Any]:
    """The prompt of ``skein`` for a text-completion API, as JSON: ``text``, ``stop``,
    ``pieces`` (``{start, end, kind, source, block}``: ``text[start:end]`` came from the
    Skein block ``block``, labelled ``source``; ``block`` null for the template's own
    text) and the ``instruct`` and ``context`` template names."""
    extra = skein.model_extra or {}
    char = str(extra.get("char_name") or "")
    user = str(extra.get("user_name") or "")
    blocks = [b for b in skein.blocks if b.enabled and b.content.strip()]
    layout = _layout(blocks)
    sources = _Sources()
    story = {name: _field_text(found) for name, found in layout.story.items()}
    examples = [_example_turns(group, user, char, sources) for group in layout.examples]
    turns = _chat_turns(skein, layout.chat, sources)
    prompt = format_prompt(
        turns,
        templates.instruct,
        templates.context,
        user=user,
        char=char,
        story=story,
        examples=examples,
    )
    story_blocks = [b for found in layout.story.values() for b in found]
    return {
        "text": prompt.text,
        "stop": list(prompt.stop),
        "pieces": _labelled(prompt, sources, story_blocks),
        "instruct": templates.instruct.name,
        "context": templates.context.name,
    }


def _labelled(
    prompt: TextPrompt, sources: _Sources, story_blocks: Sequence[SkeinBlock]
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for piece in prompt.pieces:
        found = sources.blocks.get(piece.source)
        if piece.source == STORY_STRING and piece.kind == "story_string":
            out.extend(_split(prompt.text, piece, story_blocks))
        elif found is not None and len(found) == 1:
            out.append(_piece(piece.start, piece.end, piece.kind, found[0]))
        elif found is not None:
            out.extend(_split(prompt.text, piece, found))
        else:
            out.append(_piece(piece.start, piece.end, piece.kind, None, piece.source))
    return out


def _piece(
    start: int, end: int, kind: str, block: SkeinBlock | None, label: str = ""
) -> dict[str, Any]:
    if block is not None:
        label = block.source.label or block.id
    return {
        "start": start,
        "end": end,
        "kind": kind,
        "source": label,
        "block": block.id if block is not None else None,
    }


def _split(text: str, piece: PromptPiece, blocks: Sequence[SkeinBlock]) -> list[dict[str, Any]]:
    """``piece`` cut where each of ``blocks`` stands in it: a story string holds many
    blocks, a message woven from one depth's injections several. What no block claims
    (a story string's "Scenario: ", the newlines between) keeps the piece's label."""
    claimed: list[tuple[int, int, SkeinBlock]] = []
    for block in blocks:
        needle = block.content.strip()
        at = text.find(needle, piece.start, piece.end) if needle else -1
        while at != -1 and any(a < at + len(needle) and at < b for a, b, _ in claimed):
            at = text.find(needle, at + 1, piece.end)
        if at != -1:
            claimed.append((at, at + len(needle), block))
    claimed.sort(key=lambda found: found[0])
    label = piece.source if piece.source.startswith(STORY_STRING) else ""
    out: list[dict[str, Any]] = []
    position = piece.start
    for start, end, block in claimed:
        if start > position:
            out.append(_piece(position, start, piece.kind, None, label or piece.kind))
        out.append(_piece(start, end, piece.kind, block))
        position = end
    if position < piece.end:
        out.append(_piece(position, piece.end, piece.kind, None, label or piece.kind))
    return out


_STORY_FIELDS = (
    "system",
    "description",
    "personality",
    "scenario",
    "persona",
    "wiBefore",
    "wiAfter",
    "anchorBefore",
    "anchorAfter",
)


_ROLES: tuple[Literal["system", "user", "assistant"], ...] = ("system", "user", "assistant")


def template_cost(templates: ResolvedTemplates, count: Callable[[str], int]) -> MessageCost:
    """What ``templates`` add to the blocks' own tokens, measured by formatting: the
    most one message's sequences (or one example's separator) add, and what the story
    string's prefix, suffix and labels, the chat start and the open reply add once."""
    instruct, context = templates.instruct, templates.context
    filler = "x"
    unit = count(filler)
    story = dict.fromkeys(_STORY_FIELDS, filler)

    def size(turns: Sequence[PromptTurn], examples: Sequence[Sequence[PromptTurn]] = ()) -> int:
        prompt = format_prompt(
            turns, instruct, context, user="User", char="Char", story=story, examples=examples
        )
        return count(prompt.text)

    bare = size([])
    per_message = max(
        [size([PromptTurn(role=role, content=filler)]) - bare - unit for role in _ROLES]
        + [size([], [[PromptTurn(role="user", content=filler)]]) - bare - unit]
    )
    return MessageCost(per_message=max(0, per_message), fixed=max(0, bare - unit * len(story)))
