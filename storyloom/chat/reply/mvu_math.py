"""The arithmetic MVU evaluates in an unquoted command value (``_.set('a', 10, 10 + 2)``,
``_.add('hp', math.pow(2, 3))``), read without ``eval``.

MVU hands an unquoted value to mathjs; storyloom reads the same small language from
Python's own parse tree and walks a whitelist: numbers, ``+ - * / % **`` (and mathjs's
``^`` for a power), unary signs, parentheses, ``math.``/``Math.`` ``pow sqrt abs min max
round floor ceil`` (also written bare, as mathjs takes them) and ``math.PI``/``math.E``.
Sizes and exponents are bounded so a reply cannot make the server compute for long.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from typing import Final

MAX_TEXT: Final = 200
MAX_NODES: Final = 64
MAX_EXPONENT: Final = 64
MAX_MAGNITUDE: Final = 1e300

_FUNCTIONS: Final[dict[str, Callable[..., float]]] = {
    "pow": lambda a, b: _power(a, b),
    "sqrt": lambda a: math.sqrt(a),
    "abs": lambda a: abs(a),
    "min": lambda *a: min(a),
    "max": lambda *a: max(a),
    "round": lambda a: math.floor(a + 0.5),  # JavaScript's Math.round: halves go up
    "floor": lambda a: math.floor(a),
    "ceil": lambda a: math.ceil(a),
}
_CONSTANTS: Final = {"PI": math.pi, "pi": math.pi, "E": math.e, "e": math.e}
_MODULES: Final = ("math", "Math")


class MathError(ValueError):
    """An arithmetic value that reads as arithmetic but cannot be computed (``1 / 0``,
    an unknown ``math.`` function, a power too large)."""


def evaluate(text: str) -> int | float | None:
    """The number ``text`` computes to; None when it is not arithmetic at all (then MVU
    keeps it as text). Raises :class:`MathError` when it is arithmetic that fails."""
    text = text.strip()
    if not text or len(text) > MAX_TEXT:
        return None  # too long to be a value MVU computes: kept as text
    if not any(c.isdigit() for c in text) and not any(f"{m}." in text for m in _MODULES):
        return None
    try:
        tree = ast.parse(text.replace("^", "**"), mode="eval")
    except (SyntaxError, ValueError, RecursionError):
        return None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise MathError(f"{text}: too long an expression")
    if not _is_arithmetic(tree.body):
        if _names_math(tree.body):
            raise MathError(f"{text}: only {', '.join(_FUNCTIONS)}, PI and E are computed")
        return None
    try:
        value = _eval(tree.body)
    except (ArithmeticError, ValueError, TypeError) as exc:
        raise MathError(f"{text}: {exc}") from None
    if isinstance(value, float):
        if not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
            raise MathError(f"{text}: the result is not a finite number")
        value = float(f"{value:.12g}")  # as MVU rounds to 12 significant digits
        if value.is_integer() and abs(value) < 2**53:
            return int(value)
    elif abs(value) > MAX_MAGNITUDE:
        raise MathError(f"{text}: the result is too large")
    return value


def _is_arithmetic(node: ast.AST) -> bool:
    match node:
        case ast.Constant(value=v):
            return isinstance(v, int | float) and not isinstance(v, bool)
        case ast.UnaryOp(op=ast.USub() | ast.UAdd(), operand=operand):
            return _is_arithmetic(operand)
        case ast.BinOp(
            op=ast.Add() | ast.Sub() | ast.Mult() | ast.Div() | ast.Mod() | ast.Pow(),
            left=left,
            right=right,
        ):
            return _is_arithmetic(left) and _is_arithmetic(right)
        case ast.Attribute(value=ast.Name(id=module), attr=attr):
            return module in _MODULES and attr in _CONSTANTS and attr.isupper()
        case ast.Call(func=func, args=args, keywords=[]):
            name = _function_name(func)
            return name in _FUNCTIONS and bool(args) and all(_is_arithmetic(a) for a in args)
    return False


def _function_name(func: ast.AST) -> str | None:
    match func:
        case ast.Name(id=name):
            return name
        case ast.Attribute(value=ast.Name(id=module), attr=attr) if module in _MODULES:
            return attr
    return None


def _names_math(node: ast.AST) -> bool:
    """Whether the expression reaches for ``math.``/``Math.`` (then a failure is a
    problem, not a plain word)."""
    return any(
        isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in _MODULES
        for n in ast.walk(node)
    )


def _power(base: float, exponent: float) -> float:
    if abs(exponent) > MAX_EXPONENT:
        raise ValueError(f"exponent {exponent} is over {MAX_EXPONENT}")
    if base == 0 and exponent < 0:
        raise ZeroDivisionError("0 to a negative power")
    if base < 0 and not float(exponent).is_integer():
        raise ValueError("a negative number to a fractional power")
    return math.pow(base, exponent)


def _eval(node: ast.AST) -> float:
    match node:
        case ast.Constant(value=v) if isinstance(v, int | float):
            return v
        case ast.UnaryOp(op=ast.USub(), operand=operand):
            return -_eval(operand)
        case ast.UnaryOp(operand=operand):
            return _eval(operand)
        case ast.Attribute(attr=attr):
            return _CONSTANTS[attr]
        case ast.Call(func=func, args=args):
            name = _function_name(func)
            assert name is not None
            return float(_FUNCTIONS[name](*(_eval(a) for a in args)))
        case ast.BinOp(op=op, left=left, right=right):
            a, b = _eval(left), _eval(right)
            match op:
                case ast.Add():
                    return a + b
                case ast.Sub():
                    return a - b
                case ast.Mult():
                    return a * b
                case ast.Div():
                    return a / b
                case ast.Mod():
                    return math.fmod(a, b)  # JavaScript's %: the sign of the dividend
                case _:
                    return _power(a, b)
    raise ValueError(f"cannot compute {ast.dump(node)}")
