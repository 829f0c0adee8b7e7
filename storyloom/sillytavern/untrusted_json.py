"""JSON from a file a stranger made: parsed with limits, or refused with a reason.

Every importer reads its JSON here, so each hostile shape gets the same answer, a
:class:`UntrustedJsonError` (a ``ValueError``) that the caller turns into its
:class:`FileFormatError` naming the file and the field:

- nesting deeper than :data:`MAX_DEPTH` (real SillyTavern files nest under 20; deep
  nesting otherwise fails later in recursive code: validation, serialisation, writes);
- an integer of more than :data:`MAX_INT_DIGITS` digits (no real count or id has them,
  and Python refuses to turn very long ones back into text);
- ``NaN``, ``Infinity`` and numbers too large for a float (they are not JSON, and break
  arithmetic and the JSON written back);
- a lone UTF-16 surrogate (``"\\ud800"``) in any string or key: it cannot be written as
  UTF-8, so the file, the turn tree or the search index would fail half-way.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_DEPTH = 100
MAX_INT_DIGITS = 100


class UntrustedJsonError(ValueError):
    """Why a JSON text is refused; ``where`` is the JSON path of the value, if known."""

    def __init__(self, reason: str, where: str = "") -> None:
        self.reason = reason
        self.where = where
        super().__init__(f"{where}: {reason}" if where else reason)


class JsonSyntaxError(UntrustedJsonError):
    """The text is not JSON at all (as opposed to JSON past a limit)."""


def _parse_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise UntrustedJsonError(f"an integer of {digits} digits (limit {MAX_INT_DIGITS})")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise UntrustedJsonError(f"the number {text[:40]} is too large")
    return value


def _parse_constant(name: str) -> Any:
    raise UntrustedJsonError(f"{name} is not a number JSON allows")


def has_lone_surrogate(text: str) -> bool:
    """True when ``text`` holds a UTF-16 surrogate on its own (not writable as UTF-8)."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


Crumb = tuple[Any, str | int] | None
"""Where a value sits, as (parent crumb, key): built cheaply, rendered only on error."""


def _render(crumb: Crumb, base: str) -> str:
    parts: list[str | int] = []
    while crumb is not None:
        crumb, part = crumb
        parts.append(part)
    where = base
    for part in reversed(parts):
        if isinstance(part, int):
            where = f"{where}[{part}]"
        else:
            where = f"{where}.{part}" if where else part
    return where


def check_untrusted(value: Any, base: str = "", *, strings: bool = True) -> None:
    """Refuse nesting past :data:`MAX_DEPTH`, NaN or infinity and (``strings``) lone
    surrogates anywhere in ``value``.

    Iterative, so a deep value cannot exhaust the stack while it is being checked.
    """
    stack: list[tuple[Any, int, Crumb]] = [(value, 0, None)]
    while stack:
        item, depth, crumb = stack.pop()
        if isinstance(item, str):
            if has_lone_surrogate(item):
                raise UntrustedJsonError(
                    "holds a lone UTF-16 surrogate (broken text)", _render(crumb, base)
                )
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                raise UntrustedJsonError(
                    "NaN or infinity is not a number JSON allows", _render(crumb, base)
                )
            continue
        if not isinstance(item, dict | list):
            continue
        if depth >= MAX_DEPTH:
            raise UntrustedJsonError(f"nested deeper than {MAX_DEPTH} levels", _render(crumb, base))
        if isinstance(item, dict):
            for key, child in item.items():
                if strings and isinstance(key, str) and has_lone_surrogate(key):
                    where = _render(crumb, base)
                    raise UntrustedJsonError("a key holds a lone UTF-16 surrogate", where)
                if isinstance(child, dict | list | float) or (strings and isinstance(child, str)):
                    stack.append((child, depth + 1, (crumb, str(key))))
        else:
            for index, child in enumerate(item):
                if isinstance(child, dict | list | float) or (strings and isinstance(child, str)):
                    stack.append((child, depth + 1, (crumb, index)))


_DECODER = json.JSONDecoder(
    parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant
)
"""One decoder for every parse (``json.loads`` with hooks builds one per call)."""


def loads_untrusted(text: str | bytes) -> Any:
    """Parse JSON text (bytes are read as UTF-8, a BOM allowed) within the limits above.

    Raises :class:`UntrustedJsonError` with the reason (and, where known, the path).
    """
    raw_surrogates = False
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise UntrustedJsonError("not UTF-8 text") from None
    else:
        raw_surrogates = has_lone_surrogate(text)
    try:
        if text.startswith("\ufeff"):  # as json.loads refuses it
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise JsonSyntaxError(
            f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise UntrustedJsonError(f"nested deeper than {MAX_DEPTH} levels") from None
    # Only a text with a surrogate escape (or a raw surrogate) can hold one: the others
    # skip the look at every string, the costly part of the check.
    escaped = "\\ud" in text or "\\uD" in text
    if raw_surrogates or escaped or not _shallow(text):
        check_untrusted(value, strings=raw_surrogates or escaped)
    return value


def _shallow(text: str) -> bool:
    """True when the value parsed from ``text`` cannot nest past :data:`MAX_DEPTH`: every
    level opens with a bracket, so a text with fewer brackets (in strings or not) cannot
    reach it. NaN and infinity never come out of a parse (the decoder refuses them), so
    such a value needs no walk at all: a chat's line, parsed thousands of times, skips it."""
    return text.count("{") + text.count("[") <= MAX_DEPTH
