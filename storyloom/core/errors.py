"""Errors shared by every layer.

Each error says what went wrong in words a user can act on. Errors about a file name
the file, the JSON path of the field and the reason, so the user can fix it by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


class StoryloomError(Exception):
    """Base class of every error storyloom raises on purpose."""


@dataclass(frozen=True)
class FieldProblem:
    """One thing wrong with one field of a document."""

    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.field or '(top level)'}: {self.reason}"


def field_path(loc: tuple[int | str, ...] | list[int | str]) -> str:
    """Render a pydantic/jsonschema location as a JSON path such as ``user_llm.parameters[0]``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def problems_from_validation(exc: Any, prefix: str = "") -> list[FieldProblem]:
    """Turn a ``pydantic.ValidationError`` into a list of :class:`FieldProblem`.

    ``prefix`` is where the validated value sits in a larger document (``entries[3]``,
    ``settings``): each field path is put under it.
    """
    problems = []
    for err in exc.errors():
        where = field_path(tuple(err.get("loc", ())))
        if prefix and where:
            where = f"{prefix}{where}" if where.startswith("[") else f"{prefix}.{where}"
        problems.append(FieldProblem(field=where or prefix, reason=clean_reason(err)))
    return problems


def clean_reason(err: Any) -> str:
    """Pydantic's message without the "Value error, " it puts before our validators' words."""
    message = str(err.get("msg", "invalid"))
    return message.removeprefix("Value error, ").removeprefix("Assertion failed, ")


class FileFormatError(StoryloomError):
    """A user file that does not parse or does not match its model.

    Raised before anything is written, so the file on disk is left as it was.
    """

    def __init__(self, path: Path | str, problems: list[FieldProblem]) -> None:
        self.path = Path(path)
        self.problems = problems
        lines = "; ".join(str(p) for p in problems) or "unreadable"
        super().__init__(f"{self.path}: {lines}")


class ConfigurationError(StoryloomError):
    """Something the user must configure is missing or wrong."""
