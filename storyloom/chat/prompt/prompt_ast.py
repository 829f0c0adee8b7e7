"""Prompt-time rewriting of the Skein: conditions, ``{{#if}}`` sections, macros, outlets,
and the regex scripts that act on the prompt only.

The Prompt AST executor (seed 001 §5.1) runs over the blocks in prompt order with one
set of chat variables, so a ``{{setvar}}`` in an earlier block is seen by a condition or
a ``{{getvar}}`` in a later one, as SillyTavern evaluates a prompt top to bottom. The
variables it leaves are the Skein's ``variables``; the State Updater stores them with
the turn, so macro-set variables travel with their branch like every other state.
Global variables (``{{$x}}``, ``{{setglobalvar}}``) are the user's, not the branch's: the
Skein carries them as its ``global_variables`` extra and the chat service saves what the
turn changed.

Everything here is a pure function of the Skein and the snapshot: same inputs, same
prompt (``{{random}}``/``{{pick}}`` draw from the snapshot's seed, ``{{time}}`` from its
``now``).
"""

from __future__ import annotations

import copy
import re
from datetime import datetime
from typing import Any, Literal

from storyloom.chat.prompt.conditions import ConditionError, evaluate_condition, render_conditionals
from storyloom.chat.prompt.macros import MacroContext, expand_macros
from storyloom.chat.prompt.regex_scripts import (
    RegexPlacement,
    apply_regex_scripts,
    parse_regex_scripts,
)
from storyloom.chat.prompt.skein import BlockKind, CutBlock, Skein, SkeinBlock
from storyloom.chat.store.conversation import card_macros
from storyloom.chat.store.snapshot import ContextSnapshot

_OUTLET = re.compile(r"\{\{outlet::(.*?)\}\}", re.IGNORECASE | re.DOTALL)
GLOBAL_VARIABLES = "global_variables"
"""The Skein's extra field with the user's global variables as the macros left them."""


def block_extra(block: SkeinBlock, key: str, default: Any = None) -> Any:
    """An extra (non-field) value of a block, such as ``group`` or ``original``."""
    return (block.model_extra or {}).get(key, default)


def skein_extra(skein: Skein, key: str, default: Any = None) -> Any:
    return (skein.model_extra or {}).get(key, default)


def _last_content(snapshot: ContextSnapshot, role: str | None) -> str:
    for message in reversed(snapshot.history):
        if role is None or message.role == role:
            return message.content
    return ""


def _now(snapshot: ContextSnapshot) -> datetime | None:
    return _time(snapshot.now)


def _time(iso: str) -> datetime | None:
    if not iso:
        return None
    try:
        return datetime.fromisoformat(iso)
    except ValueError:
        return None


def macro_context(
    snapshot: ContextSnapshot,
    variables: dict[str, Any],
    global_variables: dict[str, Any] | None = None,
) -> MacroContext:
    """The macro values of a turn; ``variables`` and ``global_variables`` (default: a copy
    of the snapshot's) are used (and changed) in place."""
    card = snapshot.character
    values = card_macros(card, snapshot.settings)
    values["char"] = values["char"] or "Character"
    values["description"] = values["description"] or card.base_persona
    return MacroContext(
        **values,
        variables=variables,
        global_variables=(
            dict(snapshot.global_variables) if global_variables is None else global_variables
        ),
        now=_now(snapshot),
        idle_since=_time(snapshot.idle_since),
        seed=snapshot.seed,
        pick_seed=snapshot.chat_seed,
        extra={
            "mesExamples": card.text("mes_example"),
            "charPrompt": card.text("system_prompt"),
            "charJailbreak": card.text("post_history_instructions"),
            "lastMessage": _last_content(snapshot, None),
            "lastUserMessage": _last_content(snapshot, "user"),
            "lastCharMessage": _last_content(snapshot, "assistant"),
        },
    )


def fill_outlets(text: str, outlets: dict[str, str]) -> str:
    """``{{outlet::name}}`` replaced by the lore placed in that outlet (empty if none)."""
    if "{{" not in text:
        return text
    return _OUTLET.sub(lambda m: outlets.get(m.group(1).strip(), ""), text)


def run_prompt_ast(
    skein: Skein, snapshot: ContextSnapshot, *, history_macros: bool = True
) -> Skein:
    """Blocks whose ``condition`` is false dropped (recorded in ``cut``), ``{{#if}}``
    sections resolved, outlets filled and macros expanded, block by block in order.

    ``history_macros``: also expand macros in chat messages (SillyTavern does). A chat
    message's ``{{setvar}}``/``{{addvar}}`` change the state once, in the turn that
    answers it: in older messages they are expanded against a scratch copy of the
    variables, or every later turn would add again what the message added once.
    A condition that cannot be evaluated keeps its block and adds a warning.
    """
    out = skein.model_copy(deep=True)
    variables: dict[str, Any] = dict(out.variables)
    global_variables = copy.deepcopy(skein_extra(out, GLOBAL_VARIABLES, snapshot.global_variables))
    ctx = macro_context(snapshot, variables, global_variables)
    history = [i for i, b in enumerate(out.blocks) if b.kind is BlockKind.HISTORY]
    answered = history[-1] if history and out.blocks[history[-1]].role == "user" else None
    scratch = macro_context(snapshot, {})
    outlets: dict[str, str] = dict(skein_extra(out, "outlets") or {})
    blocks: list[SkeinBlock] = []
    for index, block in enumerate(out.blocks):
        if not block.enabled:
            blocks.append(block)
            continue
        if block.condition and block.condition.strip():
            try:
                holds = evaluate_condition(block.condition, variables)
            except ConditionError as exc:
                out.warnings.append(f"block {block.id}: {exc}; the block is kept")
                holds = True
            if not holds:
                out.cut.append(
                    CutBlock(
                        id=block.id,
                        kind=block.kind,
                        tokens=0,
                        reason=f"condition {block.condition!r} is false",
                        term="condition_false",
                        values={"condition": block.condition or ""},
                    )
                )
                continue
        if block.kind is BlockKind.HISTORY and not history_macros:
            blocks.append(block)
            continue
        text, problems = render_conditionals(block.content, variables)
        out.warnings.extend(f"block {block.id}: {problem}" for problem in problems)
        text = fill_outlets(text, outlets)
        here = ctx
        if block.kind is BlockKind.HISTORY and index != answered:
            scratch.variables = dict(variables)
            scratch.global_variables = dict(global_variables)
            here = scratch
        here.original = str(block_extra(block, "original") or "")
        text = expand_macros(text, here)
        blocks.append(block.model_copy(update={"content": text}))
    out.blocks = blocks
    out.variables = variables
    setattr(out, GLOBAL_VARIABLES, global_variables)  # the service saves what changed
    return out


# -- regex scripts ----------------------------------------------------------------------


_WORLD_INFO_PHASES: tuple[Literal["stored", "prompt"], ...] = ("stored", "prompt")
_HISTORY_PLACEMENT = {"user": RegexPlacement.USER_INPUT, "assistant": RegexPlacement.AI_OUTPUT}


def apply_prompt_regex(skein: Skein, snapshot: ContextSnapshot) -> Skein:
    """The regex scripts that act on the prompt (the user's global ones, then the
    card's, as SillyTavern orders them), applied where SillyTavern applies them:
    ``promptOnly`` scripts on chat messages (user input / AI output, ``depth`` counted
    from the newest message along the branch, 0 = newest), and on lore (world info) both
    the plain scripts and the ``promptOnly`` ones, since lore text is never stored by a
    chat message. Thoughts never reach the prompt, so reasoning scripts
    have nothing to act on here."""
    global_scripts, problems = parse_regex_scripts(
        snapshot.global_regex_scripts, "snapshot global_regex_scripts"
    )
    card_scripts, card_problems = parse_regex_scripts(
        snapshot.regex_scripts, "snapshot regex_scripts"
    )
    scripts = [*global_scripts, *card_scripts]
    problems = [*snapshot.regex_problems, *problems, *card_problems]
    out = skein.model_copy(deep=True)
    out.warnings.extend(problems)
    if not scripts:
        return out
    global_variables = copy.deepcopy(skein_extra(out, GLOBAL_VARIABLES, snapshot.global_variables))
    ctx = macro_context(snapshot, dict(out.variables), global_variables)

    def macros(text: str) -> str:
        return expand_macros(text, ctx)

    history = [i for i, block in enumerate(out.blocks) if block.kind is BlockKind.HISTORY]
    depth_of = {index: len(history) - 1 - n for n, index in enumerate(history)}
    blocks: list[SkeinBlock] = []
    for index, block in enumerate(out.blocks):
        text = block.content
        if not block.enabled:
            blocks.append(block)
            continue
        if block.kind is BlockKind.HISTORY and block.role in _HISTORY_PLACEMENT:
            text = apply_regex_scripts(
                text,
                scripts,
                placement=_HISTORY_PLACEMENT[block.role],
                phase="prompt",
                depth=depth_of[index],
                macros=macros,
                problems=problems,
            )
        elif block.kind is BlockKind.LORE:
            for phase in _WORLD_INFO_PHASES:
                text = apply_regex_scripts(
                    text,
                    scripts,
                    placement=RegexPlacement.WORLD_INFO,
                    phase=phase,
                    depth=block.depth,
                    macros=macros,
                    problems=problems,
                )
        blocks.append(
            block if text == block.content else block.model_copy(update={"content": text})
        )
    out.blocks = blocks
    out.warnings = list(dict.fromkeys([*out.warnings, *problems]))
    return out
