"""Chat variables as knowledge entries see them: lookup by dotted name and ``{{name}}``.

Variables are a JSON object (the chat state's ``variables``). A dotted name reaches into
nested objects and lists (``stats.hp``, ``party.0.name``), the shape MVU-style cards use.
:func:`check_variable_usage` compares an entry's declared variables with its content.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from storyloom.knowledge.caiu import CAIU

_MISSING = object()

# {{name}} but not {{{reference}}} and not SillyTavern macros with "::" arguments.
_PLACEHOLDER = re.compile(
    r"(?<!\{)\{\{\s*([A-Za-z_\u00c0-\uffff][\w.\u00c0-\uffff-]*)\s*\}\}(?!\})"
)


def lookup_variable(variables: Mapping[str, Any], name: str) -> tuple[bool, Any]:
    """``(found, value)`` of a variable; a dotted name walks objects and list indexes."""
    if name in variables:
        return True, variables[name]
    current: Any = variables
    for part in name.split("."):
        if isinstance(current, Mapping) and part in current:
            current = current[part]
        elif isinstance(current, Sequence) and not isinstance(current, str) and part.isdigit():
            index = int(part)
            if index >= len(current):
                return False, None
            current = current[index]
        else:
            return False, None
    return True, current


def placeholders(text: str) -> list[str]:
    """Names of the ``{{name}}`` placeholders in ``text``, in order, without repeats."""
    return list(dict.fromkeys(m.group(1) for m in _PLACEHOLDER.finditer(text)))


def render_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def apply_variables(text: str, variables: Mapping[str, Any]) -> str:
    """Replace each known ``{{name}}``; unknown ones stay, so macros of later stages survive."""

    def replace(match: re.Match[str]) -> str:
        found, value = lookup_variable(variables, match.group(1))
        return render_value(value) if found else match.group(0)

    return _PLACEHOLDER.sub(replace, text)


@dataclass(frozen=True)
class VariableMismatch:
    name: str
    kind: Literal["undeclared", "unused"]
    message: str


def check_variable_usage(entry: CAIU) -> list[VariableMismatch]:
    """Where ``variable_handling.uses_variables_in_content`` and the content disagree."""
    used = placeholders(entry.text)
    declared: Sequence[str] = entry.variable_handling.uses_variables_in_content
    out = [
        VariableMismatch(name, "undeclared", f"content uses {{{{{name}}}}} but does not list it")
        for name in used
        if name not in declared
    ]
    out += [
        VariableMismatch(name, "unused", f"'{name}' is listed but the content does not use it")
        for name in dict.fromkeys(declared)
        if name not in used
    ]
    return out
