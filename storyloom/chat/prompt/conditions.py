"""Conditions on chat variables: ``{{#if hp < 30 && !healed}}…{{else}}…{{/if}}`` in prompts.

Prompt blocks and card text may depend on the RPG state (seed 001, the Prompt AST step).
The conditions come from downloaded cards and presets, so they are never run as code:
the expression is parsed with :mod:`ast` and only a small whitelist is evaluated -
literals, variable names and dotted paths (``stat.hp``, ``items[0]``, ``系统.当前阶段``)
looked up in the variables by this module (never ``getattr``), comparisons, ``and``/``or``/
``not``, ``+ - * / %`` and list literals for ``in``. Calls, attributes of anything but a
variable path, dunder names, comprehensions and the rest raise :class:`ConditionError`.
JavaScript spellings as written for SillyTavern (``&&``, ``||``, ``!``, ``===``, ``true``,
``null``) are translated first. A missing variable is ``None``; comparisons follow
JavaScript where Python would raise (``"5" == 5``, ``None < 3`` is false) so a condition on
state that is not there yet is simply false.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from storyloom.core.errors import StoryloomError

__all__ = ["ConditionError", "evaluate_condition", "is_state_condition", "render_conditionals"]

MAX_EXPRESSION_LENGTH = 500
MAX_TEXT_RESULT = 100_000


class ConditionError(StoryloomError):
    """An expression that cannot be evaluated: it names the expression and why."""

    def __init__(self, expression: str, reason: str) -> None:
        self.expression = expression
        self.reason = reason
        super().__init__(f"condition {expression!r}: {reason}")


def evaluate_condition(expression: str, variables: Mapping[str, Any]) -> bool:
    """Whether ``expression`` holds for ``variables``; raises :class:`ConditionError` if invalid."""
    return _truthy(_Evaluation(expression, variables).run())


# --- translation of JavaScript spellings ------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
    |(?P<op>===|!==|==|!=|<=|>=|&&|\|\||[-+*/%<>()\[\],.!])
    |(?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)
    |(?P<name>[^\W\d]\w*)
    |(?P<space>\s+)
    |(?P<other>.)
    """,
    re.VERBOSE,
)
_JS_LITERALS = {"true": "True", "false": "False", "null": "None", "undefined": "None"}
_JS_OPERATORS = {"===": "==", "!==": "!=", "&&": " and ", "||": " or "}


@dataclass
class _Token:
    kind: str
    text: str


def _tokens(expression: str) -> list[_Token]:
    out: list[_Token] = []
    for match in _TOKEN.finditer(expression):
        kind = match.lastgroup or "other"
        if kind == "space":
            continue
        if kind == "other":
            raise ConditionError(expression, f"unexpected character {match.group(0)!r}")
        out.append(_Token(kind, match.group(0)))
    return out


def _to_python(expression: str) -> str:
    """The expression with JavaScript's operators and literals spelled as Python's.

    ``!x`` becomes ``(not x)`` around the operand only, so ``!a == b`` keeps
    JavaScript's meaning ``(not a) == b``.
    """
    tokens = _tokens(expression)
    out, index = _sequence(tokens, 0, expression, stop=None)
    if index != len(tokens):
        raise ConditionError(expression, f"unbalanced {tokens[index].text!r}")
    return out


def _sequence(
    tokens: list[_Token], index: int, expression: str, stop: str | None
) -> tuple[str, int]:
    parts: list[str] = []
    previous: _Token | None = None
    while index < len(tokens):
        token = tokens[index]
        if stop is not None and token.text == stop:
            return " ".join(parts), index
        if token.text in (")", "]") and stop is None:
            raise ConditionError(expression, f"unbalanced {token.text!r}")
        if token.text == "!":
            operand, index = _operand(tokens, index + 1, expression)
            parts.append(f"(not {operand})")
        elif token.text in ("(", "["):
            closer = ")" if token.text == "(" else "]"
            inner, index = _sequence(tokens, index + 1, expression, stop=closer)
            if index >= len(tokens):
                raise ConditionError(expression, f"{token.text!r} is never closed")
            parts.append(token.text + inner + closer)
            index += 1
        else:
            parts.append(_spell(token, previous))
            index += 1
        previous = token
    if stop is not None:
        return " ".join(parts), index
    return " ".join(parts), index


def _operand(tokens: list[_Token], index: int, expression: str) -> tuple[str, int]:
    """One unary operand: a literal, a variable path (``a.x[k]``), ``(…)`` or ``!…``."""
    if index >= len(tokens):
        raise ConditionError(expression, "'!' without an operand")
    token = tokens[index]
    if token.text == "!":
        inner, index = _operand(tokens, index + 1, expression)
        return f"(not {inner})", index
    if token.text == "(":
        inner, index = _sequence(tokens, index + 1, expression, stop=")")
        if index >= len(tokens):
            raise ConditionError(expression, "'(' is never closed")
        return f"({inner})", index + 1
    if token.text in ("-", "+"):
        inner, index = _operand(tokens, index + 1, expression)
        return f"{token.text}{inner}", index
    if token.kind not in ("name", "number", "string"):
        raise ConditionError(expression, f"'!' before {token.text!r}")
    text = _spell(token, None)
    index += 1
    if token.kind == "name":
        while index < len(tokens) and tokens[index].text in (".", "["):
            if tokens[index].text == ".":
                if index + 1 >= len(tokens) or tokens[index + 1].kind != "name":
                    raise ConditionError(expression, "'.' must be followed by a name")
                text += "." + tokens[index + 1].text
                index += 2
            else:
                inner, index = _sequence(tokens, index + 1, expression, stop="]")
                if index >= len(tokens):
                    raise ConditionError(expression, "'[' is never closed")
                text += f"[{inner}]"
                index += 1
    return text, index


def _spell(token: _Token, previous: _Token | None) -> str:
    if token.kind == "op":
        return _JS_OPERATORS.get(token.text, token.text)
    if token.kind == "name" and (previous is None or previous.text != "."):
        return _JS_LITERALS.get(token.text, token.text)
    return token.text


# --- evaluation -------------------------------------------------------------------------

_ALLOWED_CONSTANTS = (str, int, float, bool, type(None))


class _Evaluation:
    def __init__(self, expression: str, variables: Mapping[str, Any]) -> None:
        self.expression = expression
        self.variables = variables

    def fail(self, reason: str) -> ConditionError:
        return ConditionError(self.expression, reason)

    def run(self) -> Any:
        stripped = self.expression.strip()
        if not stripped:
            raise self.fail("empty condition")
        if len(stripped) > MAX_EXPRESSION_LENGTH:
            raise self.fail(f"longer than {MAX_EXPRESSION_LENGTH} characters")
        source = _to_python(stripped)
        try:
            tree = ast.parse(source, mode="eval")
        except SyntaxError as exc:
            raise self.fail(f"not a valid expression ({exc.msg})") from None
        except (ValueError, MemoryError, RecursionError):
            raise self.fail("not a valid expression") from None
        try:
            return self.value(tree.body)
        except RecursionError:
            raise self.fail("nested too deeply") from None

    def value(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            if not isinstance(node.value, _ALLOWED_CONSTANTS):
                raise self.fail(f"the literal {node.value!r} is not allowed")
            return node.value
        if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
            return self.lookup(self.path(node))
        if isinstance(node, ast.BoolOp):
            return self.bool_op(node)
        if isinstance(node, ast.UnaryOp):
            return self.unary(node)
        if isinstance(node, ast.BinOp):
            return self.binary(node)
        if isinstance(node, ast.Compare):
            return self.compare(node)
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.value(item) for item in node.elts]
        raise self.fail(f"{_describe(node)} is not allowed")

    # variables -------------------------------------------------------------------------------

    def path(self, node: ast.expr) -> list[str | int]:
        """The keys of a variable path: ``a.b[0]["c"]`` → ``["a", "b", 0, "c"]``."""
        if isinstance(node, ast.Name):
            return [self.key_name(node.id)]
        if isinstance(node, ast.Attribute):
            return [*self.path(node.value), self.key_name(node.attr)]
        if isinstance(node, ast.Subscript):
            return [*self.path(node.value), self.subscript(node.slice)]
        raise self.fail(f"{_describe(node)} cannot be indexed or have attributes")

    def key_name(self, name: str) -> str:
        if name.startswith("__"):
            raise self.fail(f"the name {name!r} is not allowed")
        return name

    def subscript(self, node: ast.expr) -> str | int:
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, int)):
            if isinstance(node.value, bool):
                raise self.fail("an index must be a string or an integer")
            if isinstance(node.value, str):
                return self.key_name(node.value)
            return node.value
        if (
            isinstance(node, ast.UnaryOp)
            and isinstance(node.op, ast.USub)
            and isinstance(node.operand, ast.Constant)
            and type(node.operand.value) is int
        ):
            return -node.operand.value
        raise self.fail("an index must be a literal string or integer")

    def lookup(self, path: Sequence[str | int]) -> Any:
        current: Any = self.variables
        for key in path:
            if isinstance(current, Mapping):
                if key in current:
                    current = current[key]
                elif isinstance(key, int) and str(key) in current:
                    current = current[str(key)]
                else:
                    return None
            elif isinstance(current, (list, tuple)):
                index = int(key) if isinstance(key, str) and key.isdigit() else key
                if not isinstance(index, int) or not -len(current) <= index < len(current):
                    return None
                current = current[index]
            else:
                return None
        return current

    # operators -------------------------------------------------------------------------------

    def bool_op(self, node: ast.BoolOp) -> Any:
        is_and = isinstance(node.op, ast.And)
        result: Any = None
        for operand in node.values:
            result = self.value(operand)
            if _truthy(result) != is_and:
                return result
        return result

    def unary(self, node: ast.UnaryOp) -> Any:
        operand = self.value(node.operand)
        if isinstance(node.op, ast.Not):
            return not _truthy(operand)
        if isinstance(node.op, (ast.USub, ast.UAdd)):
            number = self.number(operand, "-" if isinstance(node.op, ast.USub) else "+")
            return -number if isinstance(node.op, ast.USub) else number
        raise self.fail(f"{_describe(node)} is not allowed")

    def number(self, value: Any, operator: str) -> int | float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            coerced = _as_number(value)
            if coerced is not None:
                return coerced
        raise self.fail(f"{operator!r} needs numbers, not {_kind(value)}")

    def binary(self, node: ast.BinOp) -> Any:
        left = self.value(node.left)
        right = self.value(node.right)
        op = node.op
        if isinstance(op, ast.Add):
            if isinstance(left, str) or isinstance(right, str):
                text = _text(left) + _text(right)
                if len(text) > MAX_TEXT_RESULT:
                    raise self.fail("the text grows too long")
                return text
            return self.number(left, "+") + self.number(right, "+")
        symbols = {ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Mod: "%"}
        symbol = symbols.get(type(op))
        if symbol is None:
            raise self.fail(f"{_describe(node)} is not allowed")
        a, b = self.number(left, symbol), self.number(right, symbol)
        if isinstance(op, ast.Sub):
            return a - b
        if isinstance(op, ast.Mult):
            result = a * b
            if isinstance(result, int) and result.bit_length() > 256:
                raise self.fail("the number grows too large")
            return result
        if b == 0:
            raise self.fail(f"division by zero ({symbol})")
        return a / b if isinstance(op, ast.Div) else math.fmod(a, b)

    def compare(self, node: ast.Compare) -> bool:
        left = self.value(node.left)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = self.value(right_node)
            if not self.compare_one(op, left, right):
                return False
            left = right
        return True

    def compare_one(self, op: ast.cmpop, left: Any, right: Any) -> bool:
        if isinstance(op, ast.Eq):
            return _loose_equal(left, right)
        if isinstance(op, ast.NotEq):
            return not _loose_equal(left, right)
        if isinstance(op, (ast.In, ast.NotIn)):
            found = _contains(right, left)
            return found if isinstance(op, ast.In) else not found
        if isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)):
            pair = _ordered(left, right)
            if pair is None:
                return False
            a, b = pair
            if isinstance(op, ast.Lt):
                return bool(a < b)
            if isinstance(op, ast.LtE):
                return bool(a <= b)
            if isinstance(op, ast.Gt):
                return bool(a > b)
            return bool(a >= b)
        raise self.fail(f"the comparison {type(op).__name__} is not allowed")


def _describe(node: ast.AST) -> str:
    names = {
        "Call": "calling a function",
        "Attribute": "attribute access",
        "Subscript": "indexing",
        "Lambda": "a lambda",
        "Pow": "'**'",
        "FloorDiv": "'//'",
        "NamedExpr": "':='",
        "IfExp": "'x if c else y'",
        "Dict": "a dict literal",
        "Set": "a set literal",
        "ListComp": "a comprehension",
        "GeneratorExp": "a generator",
        "JoinedStr": "an f-string",
        "Starred": "'*'",
        "Await": "'await'",
        "Tuple": "a tuple",
        "List": "a list",
    }
    kind = type(node).__name__
    if isinstance(node, (ast.BinOp, ast.UnaryOp)):
        kind = type(node.op).__name__
    return names.get(kind, kind)


def _kind(value: Any) -> str:
    if value is None:
        return "a missing value"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return f"the text {value[:20]!r}"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def _truthy(value: Any) -> bool:
    """Truth as SillyTavern's ``{{if}}`` sees text: ``"false"``, ``"off"``, ``"0"`` are false."""
    if isinstance(value, str):
        return value != "" and value.strip().lower() not in ("false", "off", "0")
    if isinstance(value, float) and math.isnan(value):
        return False
    return bool(value)


def _as_number(text: str) -> int | float | None:
    stripped = text.strip()
    if re.fullmatch(r"[+-]?\d+", stripped):
        return int(stripped)
    if re.fullmatch(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", stripped):
        value = float(stripped)
        return value if math.isfinite(value) else None
    return None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _loose_equal(left: Any, right: Any) -> bool:
    """``==`` with JavaScript's number/text coercion (``"5" == 5``), otherwise Python's."""
    if _is_number(left) and isinstance(right, str):
        return bool(_as_number(right) == left)
    if isinstance(left, str) and _is_number(right):
        return bool(_as_number(left) == right)
    return bool(left == right)


def _ordered(left: Any, right: Any) -> tuple[Any, Any] | None:
    """Operands that can be ordered (numbers, numeric text, two texts), or ``None``."""
    if isinstance(left, str) and isinstance(right, str):
        return left, right
    a = _as_number(left) if isinstance(left, str) else left
    b = _as_number(right) if isinstance(right, str) else right
    if _is_number(a) and _is_number(b):
        return a, b
    return None


def _contains(container: Any, item: Any) -> bool:
    if isinstance(container, str):
        return isinstance(item, str) and item in container
    if isinstance(container, (list, tuple)):
        return any(_loose_equal(item, member) for member in container)
    if isinstance(container, Mapping):
        return isinstance(item, str) and item in container
    return False


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# --- {{#if}} blocks ---------------------------------------------------------------------

_TAG = re.compile(
    r"""\{\{\s*(?:
        \#\s*if\s+(?P<if>.+?)
        |else\s+if\s+(?P<elif>.+?)
        |(?P<else>else)
        |/\s*if
        |(?P<stif>if\b(?:(?!::|\}\}).)*)
    )\s*\}\}""",
    re.IGNORECASE | re.VERBOSE | re.DOTALL,
)


@dataclass
class _Tag:
    kind: str  # "if", "elif", "else", "end", "st-if"
    expression: str
    start: int
    end: int
    raw: str


@dataclass
class _Block:
    """``{{#if}}`` (``ours``) or SillyTavern's own ``{{if}}`` (passed through for the macros)."""

    opener: _Tag
    ours: bool
    branches: list[tuple[_Tag, list[_Part]]] = field(default_factory=list)
    closer: _Tag | None = None


_Part = str | _Block


def render_conditionals(text: str, variables: Mapping[str, Any]) -> tuple[str, list[str]]:
    """``text`` with each ``{{#if expr}}…{{else if expr}}…{{else}}…{{/if}}`` resolved.

    Blocks nest. A tag alone on its line takes its line with it, so blocks can be
    written one tag per line without leaving blank lines. A condition that cannot be
    evaluated counts as false and is reported in the problems (with the expression);
    an unclosed ``{{#if}}`` or a stray ``{{/if}}`` is left as written and reported.
    SillyTavern's own ``{{if name}}…{{/if}}``, and a ``{{#if …}}`` that is SillyTavern's
    ``{{if}}`` with the keep-whitespace flag (:func:`is_state_condition`), are left
    for the macro engine.
    """
    if "{{" not in text:
        return text, []
    tags = _find_tags(text, variables)
    if not tags:
        return text, []
    problems: list[str] = []
    parts = _build(text, tags, problems)
    return _render(parts, variables, problems), problems


_BARE_NAME = re.compile(r"!?\s*([^\W\d]\w*)")


def is_state_condition(expression: str, variables: Mapping[str, Any]) -> bool:
    """Whether ``{{#if expression}}`` is storyloom's condition on the state, not
    SillyTavern's ``{{if}}`` macro with its keep-whitespace flag (``#``).

    SillyTavern's ``{{#if yes}}`` tests a value: a macro's (``{{#if description}}``), a
    variable's (``{{#if .flag}}``, ``{{#if $x}}``) or the text itself (``yes`` is true).
    So an expression storyloom cannot parse, and a lone word (``!`` allowed) that names
    no chat variable, belong to the macro engine; comparisons, paths, literals beyond
    one word and the chat's own variables are storyloom's."""
    stripped = expression.strip()
    if not stripped or "{{" in stripped:
        return False
    bare = _BARE_NAME.fullmatch(stripped)
    if bare is not None:
        return bare.group(1) in variables
    try:
        ast.parse(_to_python(stripped), mode="eval")
    except (ConditionError, SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return True


def _find_tags(text: str, variables: Mapping[str, Any]) -> list[_Tag]:
    tags: list[_Tag] = []
    for match in _TAG.finditer(text):
        if match.group("if") is not None and not is_state_condition(match.group("if"), variables):
            kind, expression = "st-if", ""
        elif match.group("if") is not None:
            kind, expression = "if", match.group("if")
        elif match.group("elif") is not None:
            kind, expression = "elif", match.group("elif")
        elif match.group("else") is not None:
            kind, expression = "else", ""
        elif match.group("stif") is not None:
            kind, expression = "st-if", ""
        else:
            kind, expression = "end", ""
        start, end = _standalone(text, match.start(), match.end())
        tags.append(_Tag(kind, expression.strip(), start, end, text[start:end]))
    return tags


def _standalone(text: str, start: int, end: int) -> tuple[int, int]:
    """Widen a tag to its whole line when nothing else is on that line."""
    line_start = start
    while line_start > 0 and text[line_start - 1] in " \t":
        line_start -= 1
    if line_start > 0 and text[line_start - 1] != "\n":
        return start, end
    line_end = end
    while line_end < len(text) and text[line_end] in " \t":
        line_end += 1
    if line_end < len(text) and text[line_end] == "\r":
        line_end += 1
    if line_end < len(text) and text[line_end] != "\n":
        return start, end
    if line_end < len(text):
        line_end += 1
    elif line_start == 0:
        return start, end  # the whole text is this tag: nothing to tidy
    return line_start, line_end


def _build(text: str, tags: list[_Tag], problems: list[str]) -> list[_Part]:
    root: list[_Part] = []
    stack: list[_Block] = []
    cursor = 0

    def target() -> list[_Part]:
        return stack[-1].branches[-1][1] if stack else root

    for tag in tags:
        if tag.start < cursor:
            continue
        if tag.start > cursor:
            target().append(text[cursor : tag.start])
        cursor = tag.end
        if tag.kind in ("if", "st-if"):
            block = _Block(opener=tag, ours=tag.kind == "if")
            block.branches.append((tag, []))
            target().append(block)
            stack.append(block)
        elif tag.kind in ("elif", "else"):
            if not stack or (tag.kind == "elif" and not stack[-1].ours):
                problems.append(f"{tag.raw.strip()} without an open {{{{#if}}}}; left as written")
                target().append(tag.raw)
            elif stack[-1].ours and stack[-1].branches[-1][0].kind == "else":
                problems.append(f"{tag.raw.strip()} after {{{{else}}}}; left as written")
                target().append(tag.raw)
            else:
                stack[-1].branches.append((tag, []))
        else:
            if not stack:
                problems.append("{{/if}} without an open {{#if}}; left as written")
                target().append(tag.raw)
            else:
                stack.pop().closer = tag
    if cursor < len(text):
        target().append(text[cursor:])
    for block in stack:
        if block.ours:
            problems.append(
                f"{{{{#if {block.opener.expression}}}}} is never closed with {{{{/if}}}}; "
                "left as written"
            )
    return root


def _render(parts: Sequence[_Part], variables: Mapping[str, Any], problems: list[str]) -> str:
    out: list[str] = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif not part.ours or part.closer is None:
            out.append(_literal(part, variables, problems))
        else:
            out.append(_choose(part, variables, problems))
    return "".join(out)


def _literal(block: _Block, variables: Mapping[str, Any], problems: list[str]) -> str:
    """A block passed through as written (its nested ``{{#if}}`` blocks still resolved)."""
    out = []
    for tag, body in block.branches:
        out.append(tag.raw)
        out.append(_render(body, variables, problems))
    if block.closer is not None:
        out.append(block.closer.raw)
    return "".join(out)


def _choose(block: _Block, variables: Mapping[str, Any], problems: list[str]) -> str:
    for tag, body in block.branches:
        if tag.kind == "else":
            return _render(body, variables, problems)
        try:
            holds = evaluate_condition(tag.expression, variables)
        except ConditionError as exc:
            problems.append(f"{exc}; treated as false")
            holds = False
        if holds:
            return _render(body, variables, problems)
    return ""
