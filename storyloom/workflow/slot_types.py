"""The data types that flow between slots, and which of them may feed which.

The six JSON types come from seed 003 (``dataFlowType``); domain types name values whose
shape matters to the nodes that use them (``MESSAGES`` is a list of chat messages, not any
list). A domain type flows into its JSON base type; some pairs convert on the way (an
integer into a float slot, anything into a string slot as text). ``ANY`` connects both ways.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic_core import to_jsonable_python

STRING = "STRING"
INTEGER = "INTEGER"
FLOAT = "FLOAT"
BOOLEAN = "BOOLEAN"
OBJECT = "OBJECT"
ARRAY = "ARRAY"
ANY = "ANY"

JSON_TYPES = (STRING, INTEGER, FLOAT, BOOLEAN, OBJECT, ARRAY)


@dataclass(frozen=True)
class DomainType:
    name: str
    base: str
    description: str


DOMAIN_TYPES: dict[str, DomainType] = {
    t.name: t
    for t in (
        DomainType("MESSAGES", ARRAY, "chat messages: [{role, content}]"),
        DomainType("KB_ENTRIES", ARRAY, "knowledge entries with their KB id"),
        DomainType("LORE_HITS", ARRAY, "activated or retrieved entries with reasons and scores"),
        DomainType("EMBEDDING", OBJECT, "one vector with its model id: {model, vector}"),
        DomainType("SKEIN", OBJECT, "the structured prompt of the chat pipeline"),
        DomainType("STATE_DELTA", ARRAY, "the state ops of one chat turn (a list)"),
    )
}

ALL_TYPES = (*JSON_TYPES, *DOMAIN_TYPES, ANY)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(to_jsonable_python(value), ensure_ascii=False)


def _identity(value: Any) -> Any:
    return value


def _to_float(value: Any) -> float:
    return float(value)


# (source, target) → how a value changes crossing that edge. Only lossless or
# obviously-meant conversions; STRING → INTEGER and the like would fail at run time.
CONVERSIONS: dict[tuple[str, str], Callable[[Any], Any]] = {
    (INTEGER, FLOAT): _to_float,
    (INTEGER, STRING): _as_text,
    (FLOAT, STRING): _as_text,
    (BOOLEAN, STRING): _as_text,
    (OBJECT, STRING): _as_text,
    (ARRAY, STRING): _as_text,
}
for _domain in DOMAIN_TYPES.values():
    CONVERSIONS[(_domain.name, _domain.base)] = _identity
    CONVERSIONS[(_domain.name, STRING)] = _as_text


def is_known_type(name: str) -> bool:
    return name in ALL_TYPES


def can_connect(source: str, target: str) -> bool:
    """Whether an output of type ``source`` may feed an input of type ``target``."""
    if source == target or ANY in (source, target):
        return True
    return (source, target) in CONVERSIONS


def convert(value: Any, source: str, target: str) -> Any:
    """``value`` of type ``source`` as the ``target`` slot expects it."""
    if source == target or ANY in (source, target) or value is None:
        return value
    return CONVERSIONS[(source, target)](value)


def parse_value(raw: Any, type_name: str) -> Any:
    """A value given from outside (CLI ``--input``, a tool call) checked as ``type_name``.

    Strings are parsed for non-string types (``"3"`` for an INTEGER, JSON text for an
    OBJECT), so command-line input works; a value that does not fit raises ``ValueError``
    saying what was expected.
    """
    base = DOMAIN_TYPES[type_name].base if type_name in DOMAIN_TYPES else type_name
    if base in (ANY, STRING):
        if base == STRING and not isinstance(raw, str):
            raise ValueError(f"expected text, got {type(raw).__name__}")
        return raw
    value = raw
    if isinstance(raw, str):
        text = raw.strip()
        if base == BOOLEAN and text.lower() in ("true", "false", "yes", "no", "1", "0"):
            return text.lower() in ("true", "yes", "1")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            raise ValueError(f"expected {base}, got {raw!r}") from None
    checks: dict[str, Callable[[Any], bool]] = {
        INTEGER: lambda v: isinstance(v, int) and not isinstance(v, bool),
        FLOAT: lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        BOOLEAN: lambda v: isinstance(v, bool),
        OBJECT: lambda v: isinstance(v, dict),
        ARRAY: lambda v: isinstance(v, list),
    }
    if not checks[base](value):
        raise ValueError(f"expected {base}, got {raw!r}")
    return float(value) if base == FLOAT else value


JSON_SCHEMA_TYPES = {
    STRING: "string",
    INTEGER: "integer",
    FLOAT: "number",
    BOOLEAN: "boolean",
    OBJECT: "object",
    ARRAY: "array",
}


def json_schema_type(type_name: str) -> str | None:
    """The JSON Schema ``type`` of a slot type (seed 003 4.4.3); ``None`` for ``ANY``."""
    base = DOMAIN_TYPES[type_name].base if type_name in DOMAIN_TYPES else type_name
    return JSON_SCHEMA_TYPES.get(base)
