"""SillyTavern macros (``{{char}}``, ``{{getvar::x}}``, ``{{roll::2d6}}``...) in prompt text.

Cards and presets written for SillyTavern rely on its macro engine, so this follows it
(SillyTavern 1.13+, the parser-based engine) rather than a chain of text replaces: the text
is parsed once, macros nested inside arguments resolve first and everything resolves left
to right, so ``{{setvar::x::{{char}}}}`` stores the name and a later ``{{getvar::x}}`` sees
it. Names are case-insensitive; arguments follow ``::`` (or the legacy single ``:`` or a
space: ``{{random:a,b}}``, ``{{roll d20}}``) and are trimmed. A scoped macro
``{{name …}}content{{/name}}`` takes its (trimmed, dedented; ``#`` keeps it as is) content
as its last argument: ``{{if cond}}…{{else}}…{{/if}}``, ``{{setvar::x}}…{{/setvar}}``,
``{{trim}}…{{/trim}}``, ``{{//}}…{{///}}``. Openers pair with closers by name, outermost
first; one whose closer is found but which cannot take one more argument (``{{user}}…
{{/user}}``) stays as written, closer included. A macro storyloom does not know, or one
called with the wrong arguments, stays exactly as written (with what was nested inside it
resolved), so text that merely looks like a macro is never eaten.

Variable shorthand: ``{{.name}}`` is the chat's variable, ``{{$name}}`` the user's global
one (:attr:`MacroContext.global_variables`, shared by every chat); ``= += -= ++ --`` change
it, ``|| ?? ||= ??=`` fall back (their value resolved only when used), ``== != > >= < <=``
compare. ``{{datetimeformat::…}}`` takes moment.js format tokens and ``{{idle_duration}}``
says how long since the user's previous message, as moment's ``humanize`` does.

Randomness is reproducible: ``{{random}}`` and ``{{roll}}`` draw from
``random.Random(seed, draw number)`` so the same seed gives the same sequence, and
``{{pick}}`` is stable for the same ``pick_seed`` (the chat's), text and position, as
SillyTavern's is per chat.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, assert_never

from storyloom.chat.prompt.helper_variables import (
    HELPER_SCOPES,
    HelperScope,
    format_text,
    get_text,
    lodash_get,
    without_dollar_keys,
)
from storyloom.chat.prompt.moment_format import format_moment, humanize

__all__ = ["MacroContext", "expand_macros", "macro_spans"]


@dataclass
class MacroContext:
    """What macros read; ``{{setvar}}``, ``{{.x = 1}}``... write ``variables``, their
    ``global`` forms ``global_variables``."""

    char: str = ""
    user: str = ""
    description: str = ""
    personality: str = ""
    scenario: str = ""
    persona: str = ""
    original: str = ""
    variables: dict[str, Any] = field(default_factory=dict)
    global_variables: dict[str, Any] = field(default_factory=dict)
    """The user's global variables (``{{$x}}``, ``{{getglobalvar}}``...), shared by every
    chat; changed in place like ``variables``."""
    character_variables: dict[str, Any] = field(default_factory=dict)
    """The card's Tavern Helper character variables (``{{get_character_variable::x}}``);
    read only."""
    now: datetime | None = None
    idle_since: datetime | None = None
    """When the user's message before the newest one was sent (``{{idle_duration}}``
    measures from it, as SillyTavern does); None: "just now"."""
    seed: int | str = 0
    pick_seed: int | str | None = None
    """What ``{{pick}}`` is fixed by (the chat; None: ``seed``)."""
    extra: dict[str, str] = field(default_factory=dict)
    draws: int = field(default=0, repr=False, compare=False)
    """How many ``{{random}}``/``{{roll}}`` draws were made with this context; successive
    calls continue the sequence instead of repeating it."""


def expand_macros(text: str, ctx: MacroContext) -> str:
    """``text`` with every macro SillyTavern would resolve resolved."""
    if not text:
        return ""
    # (each whole-text pass runs only when its trigger is present: prompts can be long)
    lowered = text.lower()
    has_marker = "<" in text and any(marker in lowered for marker in _LEGACY_MARKERS)
    if "{{" not in text and "\\" not in text and not has_marker:
        return text
    prepared = text
    if "{{time_" in lowered:
        prepared = _LEGACY_TIME.sub(lambda m: "{{time::" + m.group(1) + "}}", prepared)
    if has_marker:
        prepared = _LEGACY_MARKER.sub(lambda m: _LEGACY_MARKERS[m.group(0).lower()], prepared)
    evaluated = _Evaluator(ctx, prepared).document(_parse(prepared))
    if "\\{" in evaluated or "\\}" in evaluated:
        evaluated = _ESCAPED_BRACE.sub(r"\1", evaluated)
    if "{{trim}}" in evaluated.lower():
        evaluated = _TRIM.sub("", evaluated)
    if "\x00" in evaluated:
        evaluated = evaluated.replace(_ELSE_MARKER, "").replace(_PROTECTED, "")
    return evaluated


def macro_spans(text: str) -> list[tuple[int, int]]:
    """Start/end offsets of the outermost ``{{…}}`` macros of ``text``, as the parser sees them.

    For the regex extension's "escaped" find mode, which substitutes each macro's value
    escaped for a regex.
    """
    return [(node.start, node.end) for node in _parse(text) if isinstance(node, _Macro)]


# --- parsing ----------------------------------------------------------------------------

_LEGACY_TIME = re.compile(r"\{\{time_(UTC[+-]\d+)\}\}", re.IGNORECASE)
_LEGACY_MARKER = re.compile(r"<(?:USER|BOT|CHAR|GROUP|CHARIFNOTGROUP)>", re.IGNORECASE)
_LEGACY_MARKERS = {
    "<user>": "{{user}}",
    "<bot>": "{{char}}",
    "<char>": "{{char}}",
    "<group>": "{{group}}",
    "<charifnotgroup>": "{{charIfNotGroup}}",
}
_BRACES = re.compile(r"\{\{+|\}\}")
_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_FLAG_CHARS = "!?~#/>"
_ESCAPED_BRACE = re.compile(r"\\([{}])")
_TRIM = re.compile(r"(?:\r?\n)*\{\{trim\}\}(?:\r?\n)*", re.IGNORECASE)
_ELSE_MARKER = "\x00\x1fELSE\x1f\x00"
_PROTECTED = "\x00\x1fNOOP\x1f\x00"


@dataclass(frozen=True)
class _Text:
    text: str


@dataclass(eq=False)
class _Macro:
    """``{{…}}`` from ``start`` to ``end`` (exclusive); ``items``: what is between the braces."""

    start: int
    end: int
    items: list[_Node]
    head: _Head | None = None
    head_parsed: bool = False


_Node = _Text | _Macro


@dataclass(frozen=True)
class _Head:
    """A macro's name, flags and arguments (each a list of nodes, surrounding blanks trimmed)."""

    name: str
    flags: str
    args: list[list[_Node]]

    @property
    def closing(self) -> bool:
        if "/" in self.flags:
            return True
        # {{///}} closes a scoped {{//}} comment: the lexer reads it as "//" with arg "/".
        return self.name == "//" and bool(self.args) and _starts_with(self.args[0], "/")


@dataclass(frozen=True)
class _Scoped:
    """An opening macro, the content up to its closing ``{{/name}}``."""

    opener: _Macro
    content: list[_Item]


_Item = _Node | _Scoped


def _parse(text: str) -> list[_Node]:
    """Split ``text`` into plain text and (nested) macros in one pass.

    A run of braces longer than two leaves the extra ``{`` as text (``{{{char}}}`` is
    ``{`` + ``{{char}}`` + ``}``); ``}}`` closes the innermost open macro; an opening that
    never closes is plain text, and whatever closed inside it stays a macro.
    """
    root: list[_Node] = []
    stack: list[tuple[int, list[_Node]]] = []
    cursor = 0

    def emit(node: _Node) -> None:
        (stack[-1][1] if stack else root).append(node)

    for match in _BRACES.finditer(text):
        token = match.group(0)
        if token == "}}":
            if not stack:
                continue
            if match.start() > cursor:
                emit(_Text(text[cursor : match.start()]))
            start, items = stack.pop()
            emit(_Macro(start, match.end(), items))
            cursor = match.end()
        else:
            opener = match.end() - 2
            if opener > cursor:
                emit(_Text(text[cursor:opener]))
            stack.append((opener, []))
            cursor = match.end()
    if cursor < len(text):
        emit(_Text(text[cursor:]))
    while stack:
        _start, items = stack.pop()
        emit(_Text("{{"))
        for item in items:
            emit(item)
    return root


def _head(macro: _Macro) -> _Head | None:
    """Name, flags and arguments of a macro; ``None`` when it is not a valid macro call."""
    if macro.head_parsed:
        return macro.head
    macro.head_parsed = True
    if not macro.items or not isinstance(macro.items[0], _Text):
        return None
    first = macro.items[0].text
    i, flags, name = 0, "", ""
    while i < len(first):
        char = first[i]
        if char.isspace():
            i += 1
        elif first.startswith("//", i):
            name, i = "//", i + 2
            break
        elif char in _FLAG_CHARS:
            flags += char
            i += 1
        else:
            found = _IDENTIFIER.match(first, i)
            if found is None:
                return None
            name, i = found.group(0), found.end()
            # An identifier ends at a blank, a colon or the closing braces.
            if i < len(first):
                if not (first[i].isspace() or first[i] == ":"):
                    return None
            elif len(macro.items) > 1:
                return None
            break
    if not name:
        return None
    rest: list[_Node] = [_Text(first[i:])] if i < len(first) else []
    rest.extend(macro.items[1:])
    macro.head = _Head(name=name, flags=flags, args=_split_args(rest))
    return macro.head


def _split_args(rest: list[_Node]) -> list[list[_Node]]:
    """``::a::b`` → two arguments; ``:a::b``, `` a::b`` → one (the legacy forms)."""
    nodes = _strip_start(rest)
    if not nodes:
        return []
    head = nodes[0]
    if isinstance(head, _Text) and head.text.startswith("::"):
        args: list[list[_Node]] = [[]]
        nodes = [_Text(head.text[2:]), *nodes[1:]]
        for node in nodes:
            if isinstance(node, _Text):
                parts = node.text.split("::")
                args[-1].append(_Text(parts[0]))
                args.extend([_Text(part)] for part in parts[1:])
            else:
                args[-1].append(node)
        return [_strip(arg) for arg in args]
    if isinstance(head, _Text) and head.text.startswith(":"):
        nodes = [_Text(head.text[1:]), *nodes[1:]]
    return [_strip(nodes)]


def _strip_start(nodes: list[_Node]) -> list[_Node]:
    out = list(nodes)
    while out and isinstance(out[0], _Text):
        stripped = out[0].text.lstrip()
        if stripped:
            out[0] = _Text(stripped)
            break
        out.pop(0)
    return out


def _strip(nodes: list[_Node]) -> list[_Node]:
    out = _strip_start(nodes)
    while out and isinstance(out[-1], _Text):
        stripped = out[-1].text.rstrip()
        if stripped:
            out[-1] = _Text(stripped)
            break
        out.pop()
    return out


def _starts_with(nodes: list[_Node], prefix: str) -> bool:
    return bool(nodes) and isinstance(nodes[0], _Text) and nodes[0].text.startswith(prefix)


# --- evaluation -------------------------------------------------------------------------

Handler = Callable[["_Evaluator", _Macro, list[str]], str | None]


@dataclass(frozen=True)
class _Spec:
    min_args: int
    max_args: int | None  # None: any number (a list)
    handler: Handler


class _Evaluator:
    """One expansion: the context, the raw text (for ``{{pick}}``), ``{{original}}``'s use."""

    def __init__(self, ctx: MacroContext, raw: str) -> None:
        self.ctx = ctx
        self.raw = raw
        self.raw_hash = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        self.original_used = False
        self.resolved: dict[int, str] = {}
        self.extra = {key.lower(): value for key, value in ctx.extra.items()}
        self.keep_raw: set[int] = set()
        """Macros (by ``id``) paired with a closer they cannot take: left as written."""

    # structure -------------------------------------------------------------------------

    def spec(self, name: str) -> _Spec | None:
        lowered = name.lower()
        if lowered in self.extra:
            return _Spec(0, 0, _constant(self.extra[lowered]))
        return _BUILTINS.get(lowered)

    def can_open_scope(self, head: _Head) -> bool:
        """Whether scoped content, as one more argument, fits the macro's arity (SillyTavern:
        list macros such as ``{{random}}`` take none)."""
        spec = self.spec(head.name)
        return (
            spec is not None
            and not head.closing
            and spec.max_args is not None
            and spec.min_args <= len(head.args) + 1 <= spec.max_args
        )

    def structure(self, nodes: list[_Node]) -> list[_Item]:
        """Pair scoped openers with their ``{{/name}}`` closers, as SillyTavern does.

        Outermost first: an opener takes the first closer of its name whose depth matches
        (only openers that can take scoped content count as nested); what lies between is
        paired again on its own. An opener whose closer is found but which cannot take
        one more argument (``{{user}}…{{/user}}``, ``{{setvar::a::b}}…{{/setvar}}``) stays
        as written, and so does its closer; a closer with no opener stays as written.
        """
        if not any(isinstance(node, _Macro) and _is_closer(node) for node in nodes):
            return list(nodes)  # nothing to pair: the common case
        infos: list[tuple[int, str, bool, bool]] = []  # index, name, closing, takes scope
        for index, node in enumerate(nodes):
            if not isinstance(node, _Macro):
                continue
            head = _head(node)
            if head is None or self.spec(head.name) is None:
                continue  # unknown names are never paired: their closers stay as written
            infos.append((index, head.name.lower(), head.closing, self.can_open_scope(head)))
        last_closer = {
            name: position for position, (_, name, closing, _) in enumerate(infos) if closing
        }
        pairs: dict[int, int] = {}
        matched: set[int] = set()
        inside_until = -1
        for position, (index, name, closing, takes_scope) in enumerate(infos):
            if closing or index in matched or index <= inside_until:
                continue
            if last_closer.get(name, -1) < position:
                continue  # no closer of its name follows (the common case: {{char}})
            if not takes_scope and name == "//":
                continue  # a one-line comment is never kept as written
            close = _find_closer(infos, position, matched)
            if close is None:
                continue
            matched.update((index, close))
            if takes_scope:
                pairs[index] = close
                inside_until = close
            else:
                self.keep_raw.update((id(nodes[index]), id(nodes[close])))

        def build(low: int, high: int) -> list[_Item]:
            out: list[_Item] = []
            index = low
            while index < high:
                node = nodes[index]
                if index in pairs:
                    close = pairs[index]
                    out.append(_Scoped(_as_macro(node), self.structure(nodes[index + 1 : close])))
                    index = close + 1
                else:
                    out.append(node)
                    index += 1
            return out

        return build(0, len(nodes))

    # evaluation ------------------------------------------------------------------------

    def document(self, nodes: list[_Node]) -> str:
        return "".join(self.item(item) for item in self.structure(nodes))

    def item(self, item: _Item) -> str:
        if isinstance(item, _Text):
            return item.text
        if isinstance(item, _Scoped):
            return self.macro(item.opener, item.content)
        # A macro left as written is rebuilt from its parts; what was nested inside it has
        # already run (as an argument) and must not run twice.
        key = id(item)
        if key in self.keep_raw:
            return self.raw[item.start : item.end]
        if key not in self.resolved:
            self.resolved[key] = self.macro(item, None)
        return self.resolved[key]

    def macro(self, macro: _Macro, scoped: list[_Item] | None) -> str:
        expression = _variable_expression(macro)
        if expression is _NOT_AN_EXPRESSION:
            return "{{" + self.document(macro.items) + "}}"
        if expression is not None:
            return self.variable(expression)
        head = _head(macro)
        if head is None:
            return "{{" + self.document(macro.items) + "}}"
        if head.closing:
            return self.raw[macro.start : macro.end]  # a closing tag with no opener stays as is
        name = head.name.lower()
        if name == "//":
            return ""
        if name == "if":
            return self.if_macro(macro, head, scoped)
        spec = self.spec(name)
        if spec is None:
            return "{{" + self.document(macro.items) + "}}"
        args = [self.document(arg) for arg in head.args]
        if scoped is not None:
            content = "".join(self.item(item) for item in scoped)
            args.append(content if "#" in head.flags else _trim_content(content))
        if len(args) < spec.min_args or (spec.max_args is not None and len(args) > spec.max_args):
            return "{{" + self.document(macro.items) + "}}"
        result = spec.handler(self, macro, args)
        if result is None:
            return "{{" + self.document(macro.items) + "}}"
        return result

    def if_macro(self, macro: _Macro, head: _Head, scoped: list[_Item] | None) -> str:
        """``{{if cond}}then{{else}}other{{/if}}``: only the chosen branch is resolved."""
        if scoped is not None and len(head.args) == 1:
            content: list[_Item] = scoped
        elif scoped is None and len(head.args) == 2:
            content = self.structure(head.args[1])
        else:
            return "{{" + self.document(macro.items) + "}}"
        condition_nodes = list(head.args[0])
        inverted = False
        if _starts_with(condition_nodes, "!"):
            first = condition_nodes[0]
            assert isinstance(first, _Text)
            inverted = True
            condition_nodes[0] = _Text(first.text[1:].lstrip())
        condition = self.document(condition_nodes)
        shorthand = _VARIABLE_SHORTHAND.fullmatch(condition)
        if shorthand:
            condition = _get_variable(self.store(shorthand.group(1)), shorthand.group(2))
        else:
            spec = self.spec(condition)
            if spec is not None and spec.min_args == 0 and condition.lower() not in ("if", "else"):
                condition = spec.handler(self, macro, []) or ""
        bare = condition.replace(_PROTECTED, "")
        falsy = bare == "" or _is_false_boolean(bare)
        if inverted:
            falsy = not falsy
        then_branch, else_branch = _split_else(content)
        chosen = else_branch if falsy else then_branch
        if chosen is None:
            return ""
        result = "".join(self.item(item) for item in chosen)
        return result if "#" in head.flags else _trim_content(result)

    # variable shorthand ----------------------------------------------------------------

    def store(self, scope: str) -> dict[str, Any]:
        """``.`` the chat's variables, ``$`` the user's global ones."""
        return self.ctx.variables if scope == "." else self.ctx.global_variables

    def variable(self, expression: _Expression) -> str:
        """``{{.name}}``, ``{{$name op value}}``: the value is resolved only when the
        operator needs it, and at most once (``??`` and ``||`` skip it when they can)."""
        store = self.store(expression.scope)
        name, operator = expression.name, expression.operator
        resolved: list[str] = []

        def value() -> str:
            if not resolved:
                resolved.append(self.document(expression.value).strip())
            return resolved[0]

        if operator == "":
            return _get_variable(store, name)
        if operator == "=":
            store[name] = _typed(value())
            return ""
        if operator in ("++", "--"):
            return js_string(_add_variable(store, name, "1" if operator == "++" else "-1"))
        if operator == "+=":
            _add_variable(store, name, value())
            return ""
        if operator == "-=":
            amount = js_number(value(), empty_is_zero=True)
            if amount is not None:  # SillyTavern ignores (and logs) a non-number
                _add_variable(store, name, js_string(-amount))
            return ""
        if operator in ("||", "||="):
            if not _js_falsy(_read_variable(store, name)):
                return _get_variable(store, name)
            if operator == "||=":
                store[name] = _typed(value())
            return value()
        if operator in ("??", "??="):
            if name in store:
                return _get_variable(store, name)
            if operator == "??=":
                store[name] = _typed(value())
            return value()
        if operator in ("==", "!="):
            equal = _get_variable(store, name) == value()
            return "true" if equal == (operator == "==") else "false"
        # > >= < <=: numbers only (an empty value counts as 0, as JavaScript's Number)
        left = js_number(_get_variable(store, name), empty_is_zero=True)
        right = js_number(value(), empty_is_zero=True)
        if left is None or right is None:
            return "false"
        compared = {
            ">": left > right,
            ">=": left >= right,
            "<": left < right,
            "<=": left <= right,
        }[operator]
        return "true" if compared else "false"

    # randomness ------------------------------------------------------------------------

    def draw(self, purpose: str) -> random.Random:
        """A generator for the next random draw: same seed, same sequence."""
        self.ctx.draws += 1
        return random.Random(f"{self.ctx.seed}\x1f{purpose}\x1f{self.ctx.draws}")

    def stable(self, offset: int) -> random.Random:
        """A generator fixed by the seed, the text and the macro's position in it."""
        seed = self.ctx.seed if self.ctx.pick_seed is None else self.ctx.pick_seed
        return random.Random(f"{seed}\x1fpick\x1f{self.raw_hash}\x1f{offset}")


def _is_closer(macro: _Macro) -> bool:
    head = _head(macro)
    return head is not None and head.closing


def _find_closer(
    infos: list[tuple[int, str, bool, bool]], position: int, matched: set[int]
) -> int | None:
    """The index of the closer for the opener at ``infos[position]``, counting nested
    openers of the same name that can take scoped content."""
    name = infos[position][1]
    depth = 1
    for index, other, closing, takes_scope in infos[position + 1 :]:
        if other != name or index in matched:
            continue
        if closing:
            depth -= 1
            if depth == 0:
                return index
        elif takes_scope:
            depth += 1
    return None


# --- variable shorthand -----------------------------------------------------------------

_VARIABLE_PREFIX = re.compile(r"[\s!?~#/>]*([.$])")
_VARIABLE_NAME = re.compile(r"\s*([A-Za-z](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?)\s*")
# longest first, as SillyTavern's lexer tries them
_OPERATORS: tuple[str, ...] = ("++", "--", "??=", "??", "||=", "||", "-=", "==", "!=")
_OPERATORS += (">=", ">", "<=", "<", "+=", "=")
_VALUE_OPERATORS = frozenset(_OPERATORS) - {"++", "--"}


@dataclass(frozen=True)
class _Expression:
    """``{{.name}}`` / ``{{$name op value}}``: scope ``.`` (chat) or ``$`` (global)."""

    scope: str
    name: str
    operator: str
    value: list[_Node]


_NOT_AN_EXPRESSION = _Expression("", "", "", [])
"""A macro that starts like a variable expression but is not one: left as written."""


def _variable_expression(macro: _Macro) -> _Expression | None:
    """The variable expression a macro holds; None when it is not one."""
    if not macro.items or not isinstance(macro.items[0], _Text):
        return None
    first = macro.items[0].text
    prefix = _VARIABLE_PREFIX.match(first)
    if prefix is None:
        return None
    named = _VARIABLE_NAME.match(first, prefix.end())
    if named is None:
        return _NOT_AN_EXPRESSION
    rest, more = first[named.end() :], macro.items[1:]
    scope, name = prefix.group(1), named.group(1)
    if not rest:
        return _Expression(scope, name, "", []) if not more else _NOT_AN_EXPRESSION
    operator = next((op for op in _OPERATORS if rest.startswith(op)), None)
    if operator is None:
        return _NOT_AN_EXPRESSION
    after = rest[len(operator) :]
    if operator in _VALUE_OPERATORS:
        return _Expression(scope, name, operator, [_Text(after), *more])
    if after.strip() or more:  # nothing may follow ++ and --
        return _NOT_AN_EXPRESSION
    return _Expression(scope, name, operator, [])


def _js_falsy(value: Any) -> bool:
    """JavaScript's ``!value``, or a false-looking string, as SillyTavern's ``||`` tests."""
    if value is None or value == "" or value is False:
        return True
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value == 0 or (isinstance(value, float) and math.isnan(value))
    return isinstance(value, str) and _is_false_boolean(value)


def _as_macro(node: _Node) -> _Macro:
    assert isinstance(node, _Macro)
    return node


def _split_else(content: list[_Item]) -> tuple[list[_Item], list[_Item] | None]:
    """Split at the first ``{{else}}`` of this level (nested scoped ifs are already paired)."""
    for index, item in enumerate(content):
        if isinstance(item, _Macro):
            head = _head(item)
            if head is not None and not head.closing and head.name.lower() == "else":
                return content[:index], content[index + 1 :]
    return content, None


def _trim_content(content: str) -> str:
    """SillyTavern's scoped-content trim: strip, and remove the first line's indentation."""
    if not content:
        return ""
    lines = content.split("\n")
    base = 0
    for line in lines:
        bare = line.replace(_PROTECTED, "")
        if bare.strip():
            base = len(bare) - len(bare.lstrip(" \t"))
            break
    if base == 0:
        return content.strip()
    dedented = [
        line[base:] if len(line) - len(line.lstrip(" \t")) >= base else line.lstrip()
        for line in lines
    ]
    return "\n".join(dedented).strip()


def _is_false_boolean(value: str) -> bool:
    return value.strip().lower() in ("off", "false", "0")


_VARIABLE_SHORTHAND = re.compile(r"([.$])([A-Za-z](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?)")


# --- JavaScript-compatible values -------------------------------------------------------

_JS_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_JS_RADIX = re.compile(r"0([xXoObB])([0-9a-fA-F]+)")


def js_number(text: str, *, empty_is_zero: bool = False) -> int | float | None:
    """``Number(text)`` as JavaScript reads it; ``None`` where that is ``NaN``."""
    stripped = text.strip()
    if not stripped:
        return 0 if empty_is_zero else None
    if _JS_DECIMAL.fullmatch(stripped):
        if re.fullmatch(r"[+-]?\d+", stripped):
            return int(stripped)
        value = float(stripped)
        return value if math.isfinite(value) else None
    radix = _JS_RADIX.fullmatch(stripped)
    if radix:
        base = {"x": 16, "o": 8, "b": 2}[radix.group(1).lower()]
        try:
            return int(radix.group(2), base)
        except ValueError:
            return None
    return None


def js_string(value: Any) -> str:
    """A value as SillyTavern prints a macro result: JSON for objects, ``3`` not ``3.0``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _js_float(value)
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(_js_json(value), ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _js_float(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return re.sub(r"e([+-])0*(\d)", r"e\1\2", repr(value))


def _js_json(value: Any) -> Any:
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {str(key): _js_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_js_json(item) for item in value]
    return value


# --- variables --------------------------------------------------------------------------


def _get_variable(variables: Mapping[str, Any], name: str) -> str:
    return js_string(_read_variable(variables, name))


def _read_variable(variables: Mapping[str, Any], name: str) -> Any:
    """The value as SillyTavern's ``getvar`` reads it: numeric strings become numbers.

    A name that is not a key but is a dotted path (``stat.hp``) reads into nested
    objects, for state written by Filament or MVU updates.
    """
    value = variables[name] if name in variables else _dotted(variables, name)
    if isinstance(value, str):
        number = js_number(value)
        return value if number is None or value == "" else number
    return value


def _dotted(variables: Mapping[str, Any], name: str) -> Any:
    if "." not in name:
        return None
    current: Any = variables
    for part in name.split("."):
        if isinstance(current, Mapping):
            current = current.get(part)
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return None
    return current


def _typed(value: str) -> Any:
    """What ``{{setvar}}`` stores: numbers as numbers (every read in ST treats them so)."""
    number = js_number(value)
    return value if number is None else number


def _add_variable(variables: dict[str, Any], name: str, value: str) -> Any:
    """SillyTavern's ``addLocalVariable``: lists append, numbers add, anything else appends text."""
    current = variables.get(name)
    if isinstance(current, str) and current.lstrip().startswith("["):
        try:
            parsed = json.loads(current)
        except ValueError:
            parsed = None
        if isinstance(parsed, list):
            current = parsed
    if isinstance(current, list):
        updated = [*current, _typed(value)]
        variables[name] = updated
        return updated
    if isinstance(current, dict):
        return current
    read = _read_variable(variables, name) if name in variables else None
    base: Any = read or 0
    increment = js_number(value, empty_is_zero=True)
    base_number: int | float | None
    if isinstance(base, bool):
        base_number = int(base)
    elif isinstance(base, (int, float)):
        base_number = base
    else:
        base_number = None
    if increment is None or base_number is None:
        text = (js_string(base) if base else "") + value
        variables[name] = text
        return text
    total = base_number + increment
    variables[name] = total
    return total


# --- built-in macros --------------------------------------------------------------------


def _field(name: str) -> Handler:
    def handler(ev: _Evaluator, _macro: _Macro, _args: list[str]) -> str:
        value: str = getattr(ev.ctx, name)
        return value

    return handler


def _original(ev: _Evaluator, _macro: _Macro, _args: list[str]) -> str:
    # SillyTavern substitutes {{original}} once per expansion; later uses are empty.
    if ev.original_used:
        return ""
    ev.original_used = True
    return ev.ctx.original


def _repeat(unit: str) -> Handler:
    def handler(_ev: _Evaluator, _macro: _Macro, args: list[str]) -> str | None:
        count = js_number(args[0]) if args else 1
        if not isinstance(count, int) or count < 0:
            return None
        return unit * min(count, 1000)

    return handler


def _constant(value: str) -> Handler:
    def handler(_ev: _Evaluator, _macro: _Macro, _args: list[str]) -> str:
        return value

    return handler


def _trim_macro(_ev: _Evaluator, _macro: _Macro, args: list[str]) -> str:
    # Scoped {{trim}}…{{/trim}} returns its (already trimmed) content; the bare form is a
    # marker removed with the newlines around it once everything else is resolved.
    return args[0] if args else "{{trim}}"


def _reverse(_ev: _Evaluator, _macro: _Macro, args: list[str]) -> str:
    return args[0][::-1]


def _now(ev: _Evaluator) -> datetime:
    return ev.ctx.now if ev.ctx.now is not None else datetime.now()


def _time(ev: _Evaluator, _macro: _Macro, args: list[str]) -> str:
    moment = _now(ev)
    offset = re.fullmatch(r"UTC([+-]\d+)", args[0]) if args and args[0] else None
    if offset:
        amount = int(offset.group(1))
        # moment's utcOffset(n): hours when |n| < 16, minutes otherwise
        delta = timedelta(hours=amount) if abs(amount) < 16 else timedelta(minutes=amount)
        utc = moment.astimezone(UTC) if moment.tzinfo else moment.astimezone().astimezone(UTC)
        moment = utc + delta
    return format_moment(moment, "LT")


def _date(ev: _Evaluator, _macro: _Macro, _args: list[str]) -> str:
    return format_moment(_now(ev), "LL")


def _weekday(ev: _Evaluator, _macro: _Macro, _args: list[str]) -> str:
    return format_moment(_now(ev), "dddd")


def _isotime(ev: _Evaluator, _macro: _Macro, _args: list[str]) -> str:
    return _now(ev).strftime("%H:%M")


def _isodate(ev: _Evaluator, _macro: _Macro, _args: list[str]) -> str:
    moment = _now(ev)
    return f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"


def _datetimeformat(ev: _Evaluator, _macro: _Macro, args: list[str]) -> str:
    return format_moment(_now(ev), args[0])


def _idle_duration(ev: _Evaluator, _macro: _Macro, _args: list[str]) -> str:
    if ev.ctx.idle_since is None:
        return "just now"
    now, since = _now(ev), ev.ctx.idle_since
    if (now.tzinfo is None) != (since.tzinfo is None):  # one naive: both local time
        now, since = now.astimezone(), since.astimezone()
    return humanize(now - since)


def _choices(args: list[str]) -> list[str]:
    """The choices of ``{{random}}``/``{{pick}}``; one argument is a legacy ``a,b`` or ``a::b``."""
    if len(args) != 1:
        return args
    single = args[0]
    if "::" in single:
        return [item.strip() for item in single.split("::")]
    placeholder = "\x00COMMA\x00"
    return [
        item.strip().replace(placeholder, ",")
        for item in single.replace("\\,", placeholder).split(",")
    ]


def _random(ev: _Evaluator, _macro: _Macro, args: list[str]) -> str:
    choices = _choices(args)
    if not choices:
        return ""
    return choices[math.floor(ev.draw("random").random() * len(choices))]


def _pick(ev: _Evaluator, macro: _Macro, args: list[str]) -> str:
    choices = _choices(args)
    if not choices:
        return ""
    return choices[math.floor(ev.stable(macro.start).random() * len(choices))]


_DICE = re.compile(r"([1-9]\d*)?d([1-9]\d*)([+-]\d+)?", re.IGNORECASE)
MAX_DICE = 1000
"""More dice than this in one ``{{roll}}`` is refused (empty result), so a card cannot
stall a turn with ``{{roll::999999999d6}}``."""


def _roll(ev: _Evaluator, _macro: _Macro, args: list[str]) -> str:
    formula = args[0]
    if re.fullmatch(r"\d+", formula):
        formula = f"1d{formula}"
    dice = _DICE.fullmatch(formula)
    if dice is None:
        return ""
    count = int(dice.group(1) or 1)
    sides = int(dice.group(2))
    modifier = int(dice.group(3) or 0)
    if count > MAX_DICE:
        return ""
    rng = ev.draw("roll")
    return str(sum(rng.randint(1, sides) for _ in range(count)) + modifier)


def _getvar(scope: str) -> Handler:
    def handler(ev: _Evaluator, _macro: _Macro, args: list[str]) -> str:
        return _get_variable(ev.store(scope), args[0])

    return handler


def _setvar(scope: str) -> Handler:
    def handler(ev: _Evaluator, _macro: _Macro, args: list[str]) -> str:
        ev.store(scope)[args[0]] = _typed(args[1])
        return ""

    return handler


def _addvar(scope: str) -> Handler:
    def handler(ev: _Evaluator, _macro: _Macro, args: list[str]) -> str:
        _add_variable(ev.store(scope), args[0], args[1])
        return ""

    return handler


def _step(scope: str, amount: str) -> Handler:
    def handler(ev: _Evaluator, _macro: _Macro, args: list[str]) -> str:
        return js_string(_add_variable(ev.store(scope), args[0], amount))

    return handler


def _hasvar(scope: str) -> Handler:
    def handler(ev: _Evaluator, _macro: _Macro, args: list[str]) -> str:
        return "true" if args[0] in ev.store(scope) else "false"

    return handler


def _deletevar(scope: str) -> Handler:
    def handler(ev: _Evaluator, _macro: _Macro, args: list[str]) -> str:
        ev.store(scope).pop(args[0], None)
        return ""

    return handler


def _variable_macros() -> dict[str, _Spec]:
    """``getvar``… on the chat's variables, ``getglobalvar``… on the user's."""
    specs: dict[str, _Spec] = {}
    for scope, infix in ((".", ""), ("$", "global")):
        specs.update(
            {
                f"get{infix}var": _Spec(1, 1, _getvar(scope)),
                f"set{infix}var": _Spec(2, 2, _setvar(scope)),
                f"add{infix}var": _Spec(2, 2, _addvar(scope)),
                f"inc{infix}var": _Spec(1, 1, _step(scope, "1")),
                f"dec{infix}var": _Spec(1, 1, _step(scope, "-1")),
                f"has{infix}var": _Spec(1, 1, _hasvar(scope)),
                f"{infix}varexists": _Spec(1, 1, _hasvar(scope)),
                f"delete{infix}var": _Spec(1, 1, _deletevar(scope)),
                f"flush{infix}var": _Spec(1, 1, _deletevar(scope)),
            }
        )
    return specs


def _helper_scope(ev: _Evaluator, scope: HelperScope) -> dict[str, Any]:
    match scope:
        case "message" | "chat":
            return ev.ctx.variables
        case "global":
            return ev.ctx.global_variables
        case "character":
            return ev.ctx.character_variables
        case "preset":
            return {}  # storyloom keeps no preset variables: read as Tavern Helper's empty ones
        case _:
            assert_never(scope)


def _helper_get(scope: HelperScope) -> Handler:
    def handler(ev: _Evaluator, _macro: _Macro, args: list[str]) -> str:
        value = without_dollar_keys(lodash_get(_helper_scope(ev, scope), args[0]))
        return get_text(value)

    return handler


def _helper_format(scope: HelperScope, *, quoted: bool) -> Handler:
    def handler(ev: _Evaluator, macro: _Macro, args: list[str]) -> str:
        value = without_dollar_keys(lodash_get(_helper_scope(ev, scope), args[0]))
        # later lines line up under the first: indented by the text before it on its line
        line_start = ev.raw.rfind("\n", 0, macro.start) + 1
        return format_text(value, prefix_width=macro.start - line_start, quoted=quoted)

    return handler


def _helper_macros() -> dict[str, _Spec]:
    """Tavern Helper's ``get_…_variable`` / ``format_…_variable(_quoted)`` macros."""
    specs: dict[str, _Spec] = {}
    for scope in HELPER_SCOPES:
        specs[f"get_{scope}_variable"] = _Spec(1, 1, _helper_get(scope))
        specs[f"format_{scope}_variable"] = _Spec(1, 1, _helper_format(scope, quoted=False))
        specs[f"format_{scope}_variable_quoted"] = _Spec(1, 1, _helper_format(scope, quoted=True))
    return specs


def _unreachable(_ev: _Evaluator, _macro: _Macro, _args: list[str]) -> str | None:
    return None  # {{if}} and {{//}} are resolved by the evaluator itself


_BUILTINS: dict[str, _Spec] = {
    "char": _Spec(0, 0, _field("char")),
    "user": _Spec(0, 0, _field("user")),
    "description": _Spec(0, 0, _field("description")),
    "chardescription": _Spec(0, 0, _field("description")),
    "personality": _Spec(0, 0, _field("personality")),
    "charpersonality": _Spec(0, 0, _field("personality")),
    "scenario": _Spec(0, 0, _field("scenario")),
    "charscenario": _Spec(0, 0, _field("scenario")),
    "persona": _Spec(0, 0, _field("persona")),
    "group": _Spec(0, 0, _field("char")),
    "charifnotgroup": _Spec(0, 0, _field("char")),
    "original": _Spec(0, 0, _original),
    "time": _Spec(0, 1, _time),
    "date": _Spec(0, 0, _date),
    "weekday": _Spec(0, 0, _weekday),
    "isotime": _Spec(0, 0, _isotime),
    "isodate": _Spec(0, 0, _isodate),
    "datetimeformat": _Spec(1, 1, _datetimeformat),
    "idle_duration": _Spec(0, 0, _idle_duration),
    "idleduration": _Spec(0, 0, _idle_duration),
    "random": _Spec(0, None, _random),
    "pick": _Spec(0, None, _pick),
    "roll": _Spec(1, 1, _roll),
    **_variable_macros(),
    **_helper_macros(),
    "newline": _Spec(0, 1, _repeat("\n")),
    "space": _Spec(0, 1, _repeat(" ")),
    "noop": _Spec(0, 0, _constant(_PROTECTED)),
    "trim": _Spec(0, 1, _trim_macro),
    "else": _Spec(0, 0, _constant(_ELSE_MARKER)),
    "reverse": _Spec(1, 1, _reverse),
    # Character Card V3: never in a prompt (a hidden_key's words still activate lore).
    "comment": _Spec(0, None, _constant("")),
    "hidden_key": _Spec(0, None, _constant("")),
    "if": _Spec(1, 2, _unreachable),
    "//": _Spec(0, 1, _unreachable),
}
