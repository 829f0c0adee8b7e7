"""An MVU card's Zod schema (``registerMvuSchema``) as a JSON Schema for ``stat_data``.

Cards built on MVU's Zod helper (StageDog's ``mvu_zod``) ship a Tavern Helper script that
imports ``registerMvuSchema`` from a CDN, builds ``Schema = z.object({...})`` and
registers it inside ``$(() => ...)``. storyloom never fetches the CDN: the script runs
in the quickjs sandbox (:func:`~storyloom.sandbox.script_host.run_script_blocking`) with its
``import`` lines and ``export`` keywords taken out, beside a ``z`` written here that
builds a JSON Schema instead of a validator, a ``registerMvuSchema`` that keeps what it is
given, and a ``$`` that calls its function at once. What comes back is the schema.

The ``z`` covers the common subset: ``object`` (``passthrough``/``strict``/``loose``),
``string``, ``number``, ``boolean``, ``enum``, ``literal``, ``array``, ``record``,
``union``, ``any``/``unknown``, ``tuple``, ``nullable``/``optional``, ``min``/``max``/
``int``/``nonnegative``/``positive``, ``default``/``prefault`` (JSON Schema ``default``,
filled into the starting state), ``coerce`` (``x-coerce``: a value of another type is
converted first, as Zod does), ``catch`` (``x-catch``: a value that does not fit becomes
it), ``describe`` (``description``) and ``transform``/``refine``/``check`` (kept as
written but not run: their code is the card's, and a value is checked by the shape
alone). Any other method is an error naming it. Schemas (and scripts' failures, but for
hitting a limit) are computed once per script text (:data:`_CACHE`), not per turn.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from storyloom.core.errors import InvalidInput
from storyloom.sandbox.script_host import ScriptFailure, ScriptLimits, run_script_blocking
from storyloom.sillytavern.tavern_helper import helper_scripts


class ZodSchemaError(InvalidInput):
    """A card's Zod schema script that does not run or does not register a schema."""


_Z_SHIM = Path(__file__).with_name("mvu_zod_shim.js").read_text(encoding="utf-8")
_Z_FINISH = (
    "\n;if (!__registered.length) { throw new Error('the script registers no schema "
    "(registerMvuSchema was not called)'); }\n"
    "ctx.schema = __registered[__registered.length - 1]._js;\n"
)
# The card's code starts on the shim's last line, so its line numbers stay its own.
_SHIM_LINE = " ".join(line.strip() for line in _Z_SHIM.splitlines()) + " "
assert "//" not in _Z_SHIM.replace("://", ""), "a line comment would swallow the card's code"

_IMPORT = re.compile(r"^[ \t]*import\b[^\n]*$", re.M)
_EXPORT = re.compile(r"^([ \t]*)export\s+(?:default\s+)?", re.M)

_LIMITS = ScriptLimits(time_ms=2000, memory_mb=64)
_CACHE: dict[str, dict[str, Any] | str] = {}
"""Script text hash → its schema, or why it has none (text)."""
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 64


def schema_script(card: Mapping[str, Any]) -> str | None:
    """The code of the card's enabled Zod schema script (the last one), if it has one."""
    scripts = [s for s in helper_scripts(card).of_kind("mvu_schema") if s.enabled]
    return scripts[-1].content if scripts else None


def zod_json_schema(code: str, *, name: str = "Zod schema") -> dict[str, Any]:
    """The JSON Schema that the Zod script ``code`` registers (cached by its text).

    Raises :class:`ZodSchemaError` naming the script, the line and the reason."""
    key = hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest()
    with _CACHE_LOCK:
        cached = _CACHE.get(key)
    if isinstance(cached, str):  # a script that failed fails the same way again
        raise ZodSchemaError(cached)
    if cached is not None:
        return cached
    body = _EXPORT.sub(r"\1", _IMPORT.sub("", code))
    # the shim names the card's line where an unknown method was called
    lines = f"var __zodLines = {body.count(chr(10)) + 1}; "
    try:
        result = run_script_blocking(
            "javascript", lines + _SHIM_LINE + body + _Z_FINISH, {}, name=name, limits=_LIMITS
        )
    except ScriptFailure as exc:
        message = exc.message.removeprefix("Error: ")
        named = " (line " in message
        where = f" (line {exc.line})" if exc.line is not None and not named else ""
        if exc.limit is not None:  # a loaded machine may pass next time: not remembered
            raise ZodSchemaError(f"{name}{where}: {message}") from None
        _remember(key, f"{name}{where}: {message}")
        raise ZodSchemaError(f"{name}{where}: {message}") from None
    schema = result.get("schema")
    if not isinstance(schema, dict):
        _remember(key, f"{name}: registerMvuSchema was given something that is not a schema")
        raise ZodSchemaError(f"{name}: registerMvuSchema was given something that is not a schema")
    _remember(key, schema)
    return schema


def _remember(key: str, outcome: dict[str, Any] | str) -> None:
    """Keep a script's schema, or the reason it has none, for the next turn."""
    with _CACHE_LOCK:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = outcome


def card_state_schema(card: Mapping[str, Any]) -> dict[str, Any] | None:
    """The JSON Schema for ``stat_data`` that ``card``'s Zod script registers; None when
    it has none. Raises :class:`ZodSchemaError` when the script fails."""
    code = schema_script(card)
    return None if code is None else zod_json_schema(code)
