"""The Weaver (seed 001 §5.1, the Prompt Assembler): a Skein rendered to chat messages.

Blocks become messages in Skein order, the way SillyTavern's chat completion builds
them:

- adjacent blocks of one ``group`` (world info before/after, summaries, memories) are
  one message, their texts joined by newlines inside the group's ``{0}`` format;
- an example dialogue is a ``[Example Chat]`` line, then each turn as a system message
  named ``example_user`` / ``example_assistant``;
- in-chat blocks (``depth`` set) are woven into the history as SillyTavern's
  ``populationInjectionPrompts`` does: per depth (0 = after the newest message), texts of
  one ``injection_order`` and role joined, higher orders nearer the end, and at one
  depth the system text last;
- speakers are named as the preset's ``names_behavior`` says (none, default: only
  speakers other than the character and the user, completion: the ``name`` field,
  content: a ``Name: `` prefix);
- with ``squash_system``, consecutive unnamed system messages are merged (never the
  ``[Start a new Chat]`` and example headers), as SillyTavern's option does.

Empty blocks send nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from storyloom.chat.prompt.skein import BlockKind, Skein, SkeinBlock

NamesBehavior = Literal["none", "default", "completion", "content"]
NAMES_BEHAVIORS: tuple[NamesBehavior, ...] = ("none", "default", "completion", "content")
ST_NAMES_BEHAVIOR: dict[int, NamesBehavior] = {
    -1: "none",
    0: "default",
    1: "completion",
    2: "content",
}
"""SillyTavern's ``names_behavior`` numbers."""

DEFAULT_INJECTION_ORDER = 100
_ROLES = ("system", "user", "assistant")
_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


@dataclass
class _Item:
    message: dict[str, Any]
    block_index: int
    history: bool = False
    squash: bool = True
    block_ids: tuple[str, ...] = ()
    """The blocks whose text the message holds, in order (a group, a depth's injections)."""


@dataclass(frozen=True)
class WovenMessage:
    """A chat message and the ids of the blocks it was made of."""

    message: dict[str, Any]
    block_ids: tuple[str, ...]


def _extra(block: SkeinBlock, key: str, default: Any = None) -> Any:
    return (block.model_extra or {}).get(key, default)


def api_name(name: str) -> str:
    """A name as the OpenAI ``name`` field accepts it (``^[a-zA-Z0-9_-]{1,64}$``)."""
    return _NAME_CHARS.sub("_", name)[:64] or "_"


def weave(
    skein: Skein, *, names_behavior: NamesBehavior = "none", squash_system: bool = False
) -> list[dict[str, Any]]:
    """The chat messages ``[{role, content, name?}]`` of ``skein``."""
    woven = weave_sources(skein, names_behavior=names_behavior, squash_system=squash_system)
    return [item.message for item in woven]


def weave_sources(
    skein: Skein, *, names_behavior: NamesBehavior = "none", squash_system: bool = False
) -> list[WovenMessage]:
    """:func:`weave`, each message with the blocks it came from (the text-completion
    prompt labels every stretch of its text with them)."""
    extra = skein.model_extra or {}
    char = str(extra.get("char_name") or "")
    user = str(extra.get("user_name") or "")
    blocks = [b for b in skein.blocks if b.enabled and b.content.strip()]
    items: list[_Item] = []
    index = 0
    while index < len(blocks):
        block = blocks[index]
        group = _extra(block, "group")
        if block.depth is not None:
            index += 1
            continue
        if group:
            end = index
            while (
                end < len(blocks)
                and blocks[end].depth is None
                and _extra(blocks[end], "group") == group
            ):
                end += 1
            run = blocks[index:end]
            message = {"role": block.role, "content": group_text(run)}
            items.append(_Item(message, index, block_ids=tuple(b.id for b in run)))
            index = end
            continue
        if block.kind is BlockKind.EXAMPLES:
            items.extend(_example_items(block, index, user, char))
        elif block.kind is BlockKind.HISTORY:
            message = _history_message(block, names_behavior, char, user)
            items.append(_Item(message, index, history=True, block_ids=(block.id,)))
        else:
            squash = bool(_extra(block, "squash", True))
            message = {"role": block.role, "content": block.content}
            items.append(_Item(message, index, squash=squash, block_ids=(block.id,)))
        index += 1

    injections = [(i, b) for i, b in enumerate(blocks) if b.depth is not None]
    if injections:
        items = _inject(items, injections)
    if squash_system:
        items = _squash(items)
    return [WovenMessage(item.message, item.block_ids) for item in items]


def group_text(blocks: Sequence[SkeinBlock]) -> str:
    """The text of adjacent blocks of one group: theirs, one a line, inside the first
    block's ``group_format`` (world info's ``{0}``)."""
    template = str(_extra(blocks[0], "group_format") or "{0}")
    return template.replace("{0}", "\n".join(b.content.strip() for b in blocks))


def _history_message(
    block: SkeinBlock, behavior: NamesBehavior, char: str, user: str
) -> dict[str, Any]:
    content = block.content
    default_name = {"user": user, "assistant": char}.get(block.role, "")
    name = block.name or default_name
    message: dict[str, Any] = {"role": block.role, "content": content}
    if not name:
        return message
    if behavior == "completion":
        message["name"] = api_name(name)
    elif behavior == "content" and block.role != "system":
        message["content"] = f"{name}: {content}"
    elif behavior == "default" and block.role != "system" and name not in (char, user):
        # SillyTavern prefixes only speakers that are not the chat's two (group chats,
        # messages sent as someone else).
        message["content"] = f"{name}: {content}"
    return message


def parse_example(text: str, user: str, char: str) -> list[tuple[str, str]]:
    """An example dialogue's turns ``[("user" | "char", text)]``: a line starting with
    ``User:`` or ``Char:`` starts a turn, following lines belong to it, the speaker's
    ``Name:`` is removed. Lines before the first turn go with the first turn."""
    turns: list[tuple[str, str]] = []
    speaker: str | None = None
    lines: list[str] = []
    lead: list[str] = []

    def flush() -> None:
        if speaker is None:
            return
        turns.append((speaker, "\n".join([*lead, *lines]).strip()))
        lead.clear()

    for line in text.replace("\r", "").split("\n"):
        found = None
        for who, name in (("user", user), ("char", char)):
            if name and line.startswith(f"{name}:"):
                found, line = who, line[len(name) + 1 :].lstrip()
                break
        if found is not None:
            flush()
            speaker, lines = found, [line]
        elif speaker is None:
            lead.append(line)
        else:
            lines.append(line)
    flush()
    return [(who, content) for who, content in turns if content]


def _example_items(block: SkeinBlock, index: int, user: str, char: str) -> list[_Item]:
    speakers = _extra(block, "speakers") or {}
    user = str(speakers.get("user") or user)
    char = str(speakers.get("char") or char)
    items: list[_Item] = []
    ids = (block.id,)
    header = str(_extra(block, "header") or "")
    if header:
        message = {"role": "system", "content": header}
        items.append(_Item(message, index, squash=False, block_ids=ids))
    turns = parse_example(block.content, user, char)
    if not turns:
        items.append(_Item({"role": "system", "content": block.content}, index, block_ids=ids))
        return items
    for who, content in turns:
        name = "example_user" if who == "user" else "example_assistant"
        message = {"role": "system", "content": content, "name": name}
        items.append(_Item(message, index, block_ids=ids))
    return items


def _inject(items: list[_Item], injections: list[tuple[int, SkeinBlock]]) -> list[_Item]:
    """``items`` with the in-chat blocks woven into the history (SillyTavern's order)."""
    by_depth: dict[int, dict[int, dict[str, list[SkeinBlock]]]] = {}
    for _, block in injections:
        depth = max(0, block.depth or 0)
        order = _extra(block, "injection_order", DEFAULT_INJECTION_ORDER)
        order = order if isinstance(order, int) else DEFAULT_INJECTION_ORDER
        found = by_depth.setdefault(depth, {}).setdefault(order, {}).setdefault(block.role, [])
        found.append(block)

    history = [n for n, item in enumerate(items) if item.history]
    if history:
        start, end = history[0], history[-1] + 1
    else:
        # No chat history in the prompt: the injections stand where they are listed.
        first = injections[0][0]
        start = end = sum(1 for item in items if item.block_index < first)
    anchor = items[start].block_index if start < len(items) else injections[0][0]
    newest_first = list(reversed(items[start:end]))
    inserted = 0
    for depth in sorted(by_depth):
        messages: list[_Item] = []
        for order in sorted(by_depth[depth], reverse=True):
            for role in _ROLES:
                joined = by_depth[depth][order].get(role)
                if joined:
                    content = "\n".join(b.content.strip() for b in joined)
                    ids = tuple(b.id for b in joined)
                    message = {"role": role, "content": content}
                    messages.append(_Item(message, anchor, block_ids=ids))
        at = min(depth + inserted, len(newest_first))
        newest_first[at:at] = messages
        inserted += len(messages)
    return [*items[:start], *reversed(newest_first), *items[end:]]


def _squash(items: list[_Item]) -> list[_Item]:
    out: list[_Item] = []
    for item in items:
        message = item.message
        mergeable = item.squash and message["role"] == "system" and "name" not in message
        if out and mergeable:
            last = out[-1]
            if last.squash and last.message["role"] == "system" and "name" not in last.message:
                merged = {
                    **last.message,
                    "content": f"{last.message['content']}\n{message['content']}",
                }
                ids = (*last.block_ids, *item.block_ids)
                out[-1] = _Item(merged, last.block_index, last.history, last.squash, ids)
                continue
        out.append(item)
    return out
