"""Errors shared by every layer, and the four kinds a domain error is one of.

Each error says what went wrong in words a user can act on. Errors about a file name
the file, the JSON path of the field and the reason, so the user can fix it by hand.

A domain error subclasses the kind it is, so a caller (the server, the CLI) can answer
it without knowing the module that raised it:

- :class:`NotFound`: what was asked for does not exist;
- :class:`Conflict`: the request clashes with what is there now (it exists already, it
  changed since it was read, it is in a state that forbids this);
- :class:`InvalidInput`: what the user gave does not fit, each problem naming a field;
- :class:`Unavailable`: something the request needs cannot be reached or is not set up
  (a model endpoint down, a service not configured); the same request may work later.

Any other :class:`StoryloomError` is a request refused as asked; its message says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class StoryloomError(Exception):
    """Base class of every error storyloom raises on purpose."""


class NotFound(StoryloomError, LookupError):
    """What was asked for (a conversation, a knowledge base, a run...) does not exist."""


class Conflict(StoryloomError):
    """The request clashes with what is there now.

    ``version``, when the thing is versioned, is its version now: the caller reloads
    and tries again.
    """

    def __init__(self, message: str, *, version: int | None = None) -> None:
        self.version = version
        super().__init__(message)


class Unavailable(StoryloomError):
    """Something the request needs cannot be reached or is not set up; it may work later."""


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


class InvalidInput(StoryloomError):
    """What the user gave does not fit; ``problems`` names each field and why."""

    def __init__(self, message: str, problems: Sequence[FieldProblem] = ()) -> None:
        self.problems = list(problems)
        super().__init__(message)

    @classmethod
    def of(cls, what: str, problems: Sequence[FieldProblem]) -> InvalidInput:
        """``invalid <what>: <every problem>``."""
        summary = "; ".join(str(p) for p in problems)
        return cls(f"invalid {what}: {summary}" if summary else f"invalid {what}", problems)

    @classmethod
    def from_validation(cls, what: str, exc: Any, prefix: str = "") -> InvalidInput:
        """A ``pydantic.ValidationError`` of ``what``, each field path under ``prefix``."""
        return cls.of(what, problems_from_validation(exc, prefix))


class FileFormatError(InvalidInput):
    """A user file that does not parse or does not match its model.

    Raised before anything is written, so the file on disk is left as it was.
    """

    def __init__(self, path: Path | str, problems: list[FieldProblem]) -> None:
        self.path = Path(path)
        lines = "; ".join(str(p) for p in problems) or "unreadable"
        super().__init__(f"{self.path}: {lines}", problems)


class ConfigurationError(Unavailable):
    """Something the user must configure is missing or wrong."""
