"""Tavern Helper's variable macros: ``{{get_message_variable::path}}``,
``{{format_message_variable::path}}`` and their ``chat``/``character``/``preset``/``global``
forms, read the way Tavern Helper (JS-Slash-Runner, ``macro_like.ts``) reads them.

A path is a lodash path (``stat_data.理.好感度[0]``, ``a.b.0``, ``a["x.y"]``; HTML entities
such as ``&amp;`` are unescaped first, as Tavern Helper does). Keys starting with ``$``
(MVU's ``$meta``, ``$internal``) are dropped at every depth before the value is shown. A
missing path reads as ``null``, as ``_.get(..., null)`` gives there.

``get_*`` gives a string as it is and anything else as compact JSON; ``format_*`` gives a
string as it is and anything else as YAML in the style of the ``yaml`` package's
``stringify`` with ``blockQuote: 'literal'`` (two-space indents, sequences indented under
their key, plain scalars where YAML reads them back the same, else double quotes, text
with line breaks as a literal block), its lines after the first indented by the width of
the text before the macro on its line, so a macro written after ``状态:`` lines up.
``format_*_variable_quoted`` quotes every string. One difference: the ``yaml`` package
folds plain text longer than 80 columns at spaces; this never folds (a line break would
change nothing the model reads).
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Mapping
from typing import Any, Literal

from storyloom.chat.reply.state_ops import split_dotted_key

HelperScope = Literal["message", "chat", "character", "preset", "global"]
HELPER_SCOPES: tuple[HelperScope, ...] = ("message", "chat", "character", "preset", "global")


def lodash_get(variables: Mapping[str, Any], path: str) -> Any:
    """``_.get(variables, _.unescape(path), null)``: the value at a lodash path, or None."""
    path = html.unescape(path.strip())
    if not path:
        return None
    if path in variables:  # lodash tries the whole path as one key first
        return variables[path]
    node: Any = variables
    for part in split_dotted_key(path):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def without_dollar_keys(value: Any) -> Any:
    """``value`` with every key starting with ``$`` left out, at any depth."""
    if isinstance(value, Mapping):
        return {
            str(k): without_dollar_keys(v) for k, v in value.items() if not str(k).startswith("$")
        }
    if isinstance(value, list):
        return [without_dollar_keys(item) for item in value]
    return value


def get_text(value: Any) -> str:
    """What ``get_*_variable`` shows: a string as is, else compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(_json_ready(value), ensure_ascii=False, separators=(",", ":"))


def format_text(value: Any, *, prefix_width: int = 0, quoted: bool = False) -> str:
    """What ``format_*_variable`` shows: a string as is, else YAML (see the module)."""
    if isinstance(value, str):
        text = value
    else:
        text = "\n".join(_yaml_lines(_json_ready(value), 0, quoted)).rstrip()
    return text.replace("\n", "\n" + " " * prefix_width) if prefix_width else text


def _json_ready(value: Any) -> Any:
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON.stringify(NaN) is null
    if isinstance(value, Mapping):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_ready(v) for v in value]
    return value


# -- YAML ---------------------------------------------------------------------------------

_INDENT = "  "
# What YAML 1.2 (core schema) would read as something other than the string.
_NOT_PLAIN = re.compile(
    r"""(?x)
    ^(?:
      [-+]?(?:\d[\d_]*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?
      | 0x[0-9a-fA-F]+ | 0o[0-7]+
      | [-+]?\.(?:inf|Inf|INF) | \.(?:nan|NaN|NAN)
      | true|True|TRUE|false|False|FALSE|null|Null|NULL|~
    )$"""
)
_INDICATORS = set("-?:,[]{}#&*!|>'\"%@`")


def _plain_ok(text: str) -> bool:
    if not text or text != text.strip() or _NOT_PLAIN.match(text):
        return False
    if text[0] in _INDICATORS and not (text[0] in "-?:" and len(text) > 1 and text[1] != " "):
        return False
    if ": " in text or " #" in text or text.endswith(":") or "\t" in text:
        return False
    return all(ch >= " " and ch != "\x7f" for ch in text)


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _scalar(value: Any, quoted: bool) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return re.sub(r"e([+-])0*(\d)", r"e\1\2", text)
    text = str(value)
    if not quoted and _plain_ok(text):
        return text
    return _quote(text)


def _key(key: str) -> str:
    return key if _plain_ok(key) else _quote(key)


def _block(text: str, indent: str) -> list[str]:
    """A literal block scalar (``|``, ``|-`` or ``|+``) for text with line breaks."""
    stripped = text.rstrip("\n")
    trailing = len(text) - len(stripped)
    chomp = "-" if trailing == 0 else ("" if trailing == 1 else "+")
    lead = "2" if stripped[:1] == " " else ""
    body = [indent + line if line else "" for line in stripped.split("\n")]
    if chomp == "+":
        body.extend([""] * (trailing - 1))
    return ["|" + lead + chomp, *body]


def _multiline(value: Any) -> bool:
    return isinstance(value, str) and "\n" in value


def _yaml_lines(value: Any, depth: int, quoted: bool) -> list[str]:
    """``value`` as YAML lines, each indented for ``depth``."""
    indent = _INDENT * depth
    if isinstance(value, dict):
        if not value:
            return [indent + "{}"]
        lines: list[str] = []
        for key, item in value.items():
            head = indent + _key(key) + ":"
            lines.extend(_entry(head, item, depth, quoted, in_sequence=False))
        return lines
    if isinstance(value, list):
        if not value:
            return [indent + "[]"]
        lines = []
        for item in value:
            lines.extend(_entry(indent + "-", item, depth, quoted, in_sequence=True))
        return lines
    if _multiline(value) and not quoted:
        block = _block(value, indent + _INDENT)
        return [indent + block[0], *block[1:]]
    return [indent + _scalar(value, quoted)]


def _entry(head: str, item: Any, depth: int, quoted: bool, *, in_sequence: bool) -> list[str]:
    """A mapping entry (``key:``) or a sequence item (``-``) holding ``item``."""
    if isinstance(item, dict | list) and item:
        if in_sequence:
            # "- a: 1" / "- - 1": the first line goes on the dash, the rest align under it
            inner = _yaml_lines(item, depth + 1, quoted)
            return [head + " " + inner[0].lstrip(), *inner[1:]]
        # a sequence under a key is indented one level, as the yaml package writes it
        return [head, *_yaml_lines(item, depth + 1, quoted)]
    if isinstance(item, dict | list):
        return [head + (" {}" if isinstance(item, dict) else " []")]
    if _multiline(item) and not quoted:
        block = _block(item, _INDENT * (depth + 1))
        return [head + " " + block[0], *block[1:]]
    return [head + " " + _scalar(item, quoted)]
