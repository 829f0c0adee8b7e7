"""What Character Card V3 decorators mean to a CAIU, on import and on export.

:mod:`storyloom.sillytavern.lorebook_decorators` reads the ``@@`` block at the top of an
entry's content; this module maps the decorators storyloom honours onto the CAIU's own
fields, so the activation engine and the editor see them as settings, and the injected
text is the content without the block:

====================  ==========================================================
``@@activate``        ``constant`` (always active; SillyTavern does the same)
``@@dont_activate``   ``never_activate`` (a scan never activates it)
``@@depth N``         placement ``at_depth``, ``depth`` N (below 0: 0)
``@@role R``          ``role`` (system, user, assistant)
``@@scan_depth N``    the entry's ``scan_depth``
``@@position P``      ``before_desc`` → before the character; ``after_desc``,
                      ``personality``, ``scenario`` → after it (SillyTavern's World
                      Info after sits right after the scenario); storyloom's own
                      placement names are taken too
``@@additional_keys`` secondary keys, AND ANY (only where the entry has none)
``@@exclude_keys``    secondary keys, NOT ANY (merged into NOT ANY ones)
====================  ==========================================================

ST-Prompt-Template's decorators (its EJS templates, :mod:`storyloom.chat.prompt.ejs_template`)
are kept in ``content.metadata["template"]`` and read with :func:`template_marks`, which
also reads its title tags (``[GENERATE:BEFORE]``, ``[RENDER:AFTER]``, ``[InitialVariables]``
... at the start of the entry's name):

========================  ======================================================
``@@if <expr>``           the entry takes part only when ``expr`` is true
``@@private``             the template runs in a block of its own (its ``const``
                          names cannot clash with another entry's)
``@@preprocessing``       evaluated before the scan (every template entry is)
``@@generate_before``     ``[GENERATE:BEFORE]``: at the top of the prompt
``@@generate_after``      ``[GENERATE:AFTER]``: at the end of the prompt
``@@render_before``       ``[RENDER:BEFORE]``: shown before each displayed message,
                          never sent to the model
``@@render_after``        ``[RENDER:AFTER]``: shown after each displayed message
``@@initial_variables``   ``[InitialVariables]``: a JSON object of starting variables
========================  ======================================================

Everything else is reported in the import warnings and left out of the prompt: the spec's
other decorators (greetings, instruct depths, user icons...), decorators of other
applications and values storyloom cannot use. A ``@@@`` fallback counts when the decorator
above it is not honoured, as the spec says. ``@@position`` wins over ``@@depth`` and
``@@activate`` over ``@@dont_activate``.

On export the block is written back: lines storyloom does not honour as they were, the
honoured ones with the entry's current values (a line whose setting the user removed goes,
with its fallbacks). The same function gives the block of an untouched entry, so its
content comes back byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from storyloom.knowledge.caiu import CAIU, Placement, SecondaryLogic
from storyloom.sillytavern.lorebook_decorators import (
    DecoratedContent,
    DecoratorLine,
    decorator_line,
    join_decorated,
    parse_decorators,
)

#: The decorators of SPEC_V3 storyloom does not honour (named so the warning says so).
SPEC_UNSUPPORTED = frozenset(
    {
        "activate_only_after",
        "activate_only_every",
        "keep_activate_after_match",
        "dont_activate_after_match",
        "instruct_depth",
        "reverse_depth",
        "reverse_instruct_depth",
        "instruct_scan_depth",
        "is_greeting",
        "ignore_on_max_context",
        "is_user_icon",
        "disable_ui_prompt",
    }
)
ROLES = ("system", "user", "assistant")
#: ``@@position`` values: the spec's four, then storyloom's own placements.
POSITIONS: dict[str, Placement] = {
    "before_desc": Placement.BEFORE_CHARACTER,
    "after_desc": Placement.AFTER_CHARACTER,
    "personality": Placement.AFTER_CHARACTER,
    "scenario": Placement.AFTER_CHARACTER,
    **{placement.value: placement for placement in Placement},
}
# The value a placement is written back as when the entry's placement changed.
_POSITION_NAME = {
    Placement.BEFORE_CHARACTER: "before_desc",
    Placement.AFTER_CHARACTER: "after_desc",
}
_MULTI = frozenset({"additional_keys"})  # the spec lets this one repeat

TemplateInjection = Literal["generate_before", "generate_after", "render_before", "render_after"]
#: ST-Prompt-Template's decorators without a value, kept as template marks.
TEMPLATE_FLAGS: tuple[str, ...] = (
    "private",
    "preprocessing",
    "generate_before",
    "generate_after",
    "render_before",
    "render_after",
    "initial_variables",
)
TEMPLATE_METADATA = "template"
"""The key of ``content.metadata`` holding an entry's template decorators."""
#: Its title tags (the start of the entry's name), as the decorator each one stands for.
TITLE_TAGS: dict[str, str] = {
    "[generate:before]": "generate_before",
    "[generate:after]": "generate_after",
    "[render:before]": "render_before",
    "[render:after]": "render_after",
    "[initialvariables]": "initial_variables",
    "[preprocessing]": "preprocessing",
}


class TemplateMarks(BaseModel):
    """What ST-Prompt-Template's decorators and title tags say of one entry."""

    condition: str | None = Field(default=None, description="@@if: JavaScript, one line")
    private: bool = False
    preprocessing: bool = False
    injection: TemplateInjection | None = None
    initial_variables: bool = False

    @property
    def prompt_only_when_rendered(self) -> bool:
        """A render entry or the starting variables: never part of the prompt."""
        return self.initial_variables or self.injection in ("render_before", "render_after")


def template_marks(entry: CAIU) -> TemplateMarks:
    """``entry``'s template decorators (kept at import) and the tags of its title."""
    stored = entry.content.metadata.get(TEMPLATE_METADATA)
    names: dict[str, str] = dict(stored) if isinstance(stored, dict) else {}
    title = (entry.displayName or "").lstrip().lower()
    for tag, name in TITLE_TAGS.items():
        if title.startswith(tag):
            names.setdefault(name, "")
    injection: TemplateInjection | None = None
    for name in ("generate_before", "generate_after", "render_before", "render_after"):
        if name in names:
            injection = name  # type: ignore[assignment]  # one of the four names above
            break
    condition = names.get("if")
    return TemplateMarks(
        condition=condition if condition else None,
        private="private" in names,
        preprocessing="preprocessing" in names,
        injection=injection,
        initial_variables="initial_variables" in names,
    )


def _number(value: str) -> int | None:
    try:
        number = float(value)
    except ValueError:
        return None
    if number != number or number in (float("inf"), float("-inf")):
        return None
    return int(number)


def _keys(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


@dataclass
class _Secondary:
    """The entry's secondary keys while decorators are applied to them."""

    keys: list[str]
    logic: SecondaryLogic
    free: bool


@dataclass
class Honoured:
    """The decorators of one entry that storyloom honours, by name, with their values."""

    values: dict[str, str] = field(default_factory=dict)
    # For export: per decorator of the block, the index of the honoured line (or None).
    chosen: list[int | None] = field(default_factory=list)


def _usable(name: str, value: str, secondary: _Secondary) -> str | None:
    """Why storyloom cannot honour ``@@name value`` here; None when it can."""
    if name in ("activate", "dont_activate") or name in TEMPLATE_FLAGS:
        return None
    if name == "if":
        return None if value else "no condition"
    if name in ("depth", "scan_depth"):
        number = _number(value)
        if number is None:
            return f"{value!r} is not a number"
        if name == "scan_depth" and number < 0:
            return f"{number} is negative"
        return None
    if name == "role":
        return None if value.lower() in ROLES else f"{value!r} is not system, user or assistant"
    if name == "position":
        return None if value.lower() in POSITIONS else f"storyloom has no position {value!r}"
    if name == "additional_keys":
        if not _keys(value):
            return "no keys"
        return None if secondary.free else "the entry already has secondary keys"
    if name == "exclude_keys":
        if not _keys(value):
            return "no keys"
        if secondary.free or secondary.logic is SecondaryLogic.NOT_ANY:
            return None
        return "the entry already has secondary keys of another logic"
    if name in SPEC_UNSUPPORTED:
        return "storyloom does not support it"
    return "unknown decorator"


def _take(name: str, value: str, secondary: _Secondary) -> None:
    if name == "additional_keys":
        secondary.keys = _keys(value)
        secondary.logic = SecondaryLogic.AND_ANY
        secondary.free = False
    elif name == "exclude_keys":
        secondary.keys = list(dict.fromkeys([*secondary.keys, *_keys(value)]))
        secondary.logic = SecondaryLogic.NOT_ANY
        secondary.free = False


def _honour(
    block: DecoratedContent, secondary: _Secondary, report: Callable[[str], None]
) -> Honoured:
    honoured = Honoured()
    for line in block.orphans:
        report(f"fallback {line.line!r} follows no decorator; ignored")
    for decorator in block.decorators:
        picked: int | None = None
        passed: list[str] = []
        for index, line in enumerate(decorator.choices):
            name = line.name
            if name in honoured.values and name not in _MULTI:
                reason: str | None = "it was given before; the first one counts"
            else:
                reason = _usable(name, line.value, secondary)
            if reason is None:
                picked = index
                break
            passed.append(f"{line.label} ({reason})")
        honoured.chosen.append(picked)
        if picked is None:
            report(f"decorator {', then '.join(passed)} ignored")
            continue
        line = decorator.choices[picked]
        if passed:
            report(f"decorator {', then '.join(passed)} ignored; its fallback {line.label} used")
        _take(line.name, line.value, secondary)
        honoured.values.setdefault(line.name, line.value)
    return honoured


def apply_decorators(entry: CAIU, label: str, warnings: list[str]) -> None:
    """Move the decorators of ``entry``'s content into its fields and out of its text."""
    text = entry.content.value or ""
    if "@@" not in text:
        return
    block = parse_decorators(text)
    if not block.has_block:
        return
    act = entry.activation_criteria
    usage = entry.usage_metadata
    in_use = act.selective and bool(act.secondary_keywords)
    kept = list(act.secondary_keywords) if in_use else []
    secondary = _Secondary(kept, act.secondary_logic, not in_use)
    honoured = _honour(block, secondary, lambda note: warnings.append(f"entry {label}: {note}"))
    values = honoured.values
    entry.content.value = block.body
    template = {n: values[n] for n in ("if", *TEMPLATE_FLAGS) if n in values}
    if template:
        entry.content.metadata[TEMPLATE_METADATA] = template
    if "activate" in values:
        act.constant = True
    elif "dont_activate" in values:
        act.never_activate = True
    if "position" in values:
        usage.placement = POSITIONS[values["position"].lower()]
        if "depth" in values:
            warnings.append(f"entry {label}: @@depth ignored: @@position wins over it")
    elif "depth" in values:
        usage.placement = Placement.AT_DEPTH
        usage.depth = max(_number(values["depth"]) or 0, 0)
    if "role" in values:
        role = values["role"].lower()
        usage.role = "assistant" if role == "assistant" else "user" if role == "user" else "system"
    if "scan_depth" in values:
        act.scan_depth = _number(values["scan_depth"])
    if "additional_keys" in values or "exclude_keys" in values:
        act.secondary_keywords = secondary.keys
        act.secondary_logic = secondary.logic
        act.selective = True


def _rendered(line: DecoratorLine, entry: CAIU) -> str | None:
    """The honoured ``line`` with ``entry``'s current value; None: the setting is gone."""
    act = entry.activation_criteria
    usage = entry.usage_metadata
    name = line.name
    value: Any
    if name == "activate":
        return line.line if act.constant else None
    if name == "dont_activate":
        return line.line if act.never_activate else None
    if name == "depth":
        if usage.placement is not Placement.AT_DEPTH:
            return None
        value = usage.depth
        if _number(line.value) == value or (value == 0 and (_number(line.value) or 0) < 0):
            return line.line
    elif name == "role":
        if line.value.lower() == usage.role:
            return line.line
        value = usage.role
    elif name == "scan_depth":
        if act.scan_depth is None:
            return None
        if _number(line.value) == act.scan_depth:
            return line.line
        value = act.scan_depth
    elif name == "position":
        if POSITIONS.get(line.value.lower()) is usage.placement:
            return line.line
        if usage.placement is Placement.AT_DEPTH:
            return None
        value = _POSITION_NAME.get(usage.placement, usage.placement.value)
    elif name in ("additional_keys", "exclude_keys"):
        logic = SecondaryLogic.AND_ANY if name == "additional_keys" else SecondaryLogic.NOT_ANY
        keys = act.secondary_keywords
        if not act.selective or act.secondary_logic is not logic or not keys:
            return None
        if _keys(line.value) == keys:
            return line.line
        value = ",".join(keys)
    else:
        return line.line
    return decorator_line(name, str(value), fallback=line.fallback)


def _imported_secondary(raw: Mapping[str, Any]) -> _Secondary:
    """The secondary keys an imported entry had before its decorators were applied."""
    if "keysecondary" in raw or "uid" in raw or "key" in raw:
        keys, logic = raw.get("keysecondary"), raw.get("selectiveLogic")
        selective = raw.get("selective")
        selective = True if selective is None else selective  # the template's default
    else:  # a card-book entry: a missing "selective" is false there
        ext = raw.get("extensions")
        keys, selective = raw.get("secondary_keys"), raw.get("selective")
        logic = ext.get("selectiveLogic") if isinstance(ext, dict) else None
    order = list(SecondaryLogic)  # SillyTavern's selectiveLogic numbers, in order
    index = logic if isinstance(logic, int) and 0 <= logic < len(order) else 0
    in_use = bool(selective) and isinstance(keys, list) and bool(keys)
    return _Secondary([], order[index], not in_use)


def decorated_content(entry: CAIU, original: Mapping[str, Any] | None) -> str:
    """``entry``'s text with the decorator block of ``original`` (the entry as imported)
    written back; the text alone when the imported content had no block."""
    body = entry.content.value or ""
    # SillyTavern reads @@dont_activate too: a storyloom setting without a line gets one.
    wanted = [decorator_line("dont_activate")] if entry.activation_criteria.never_activate else []
    text = original.get("content") if original is not None else None
    if not isinstance(text, str) or "@@" not in text:
        return join_decorated(wanted, body)
    block = parse_decorators(text)
    if not block.has_block:
        return join_decorated(wanted, body)
    # Which line counts is decided as at import, so that the lines chosen then are the
    # ones rewritten now.
    assert original is not None
    honoured = _honour(block, _imported_secondary(original), lambda _: None)
    lines = [line.line for line in block.orphans]
    counted: list[str] = []
    for decorator, picked in zip(block.decorators, honoured.chosen, strict=True):
        if picked is None:
            lines.extend(line.line for line in decorator.choices)
            continue
        rendered = _rendered(decorator.choices[picked], entry)
        if rendered is None:
            continue
        for index, line in enumerate(decorator.choices):
            lines.append(rendered if index == picked else line.line)
        counted.append(rendered[1:] if rendered.startswith("@@@") else rendered)
        if decorator.choices[picked].name == "dont_activate":
            wanted = []
    kept = join_decorated([*wanted, *lines], body)
    only_counted = join_decorated([*wanted, *counted], body)
    if _reads_back(entry, kept) and _honoured_values(kept, original) == _honoured_values(
        only_counted, original
    ):
        return kept
    # A line dropped above made one that was passed over count again (a repeated
    # decorator before a fallback, which then no longer counts): write only the lines
    # that count.
    return only_counted


def _honoured_values(content: str, original: Mapping[str, Any]) -> dict[str, str]:
    """The decorators ``content`` would have honoured at import, by name."""
    return _honour(parse_decorators(content), _imported_secondary(original), lambda _: None).values


def _reads_back(entry: CAIU, content: str) -> bool:
    """Whether ``content``'s decorators give ``entry``'s settings when read again."""
    again = entry.model_copy(deep=True)
    again.content.value = content
    apply_decorators(again, "", [])
    return (
        again.activation_criteria == entry.activation_criteria
        and again.usage_metadata == entry.usage_metadata
    )
