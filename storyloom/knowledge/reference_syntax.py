"""The syntax of dynamic references ``{{{...}}}`` (seed 000, 2.2.4).

A reference body is ``[QUALIFIER:]PATH`` or ``[QUALIFIER:]tag:TAG``:

- ``QUALIFIER`` is everything before the first ``:``: a ``kb_id``, a project alias or a KB
  display name (looked up with :meth:`KnowledgeCatalog.find`), or ``this`` for the KB that
  holds the text. A body that starts with ``tag:`` is always the tag form, never a KB
  named "tag".
- ``PATH`` is segments joined by ``/``; each segment is ``id=ENTRY_ID`` or a display name.
  Each segment after the first is looked up among the previous entry's ``child_ids``.

The ``system:`` namespace is reserved: ``{{{system:available_tools}}}`` and any other
``{{{system:...}}}`` is never a reference (not even to a KB named "system"); it is left
verbatim for whoever fills it (the agent loop puts the tool documentation there).

Whitespace around the qualifier, ``tag:`` values and segments is not significant. A body
never spans lines and never contains ``{{{`` or ``}}}``; ``{{name}}`` variables are
another syntax (:mod:`storyloom.knowledge.variables`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from storyloom.core.errors import StoryloomError

OPEN = "{{{"
CLOSE = "}}}"
THIS_KB = "this"
TAG_PREFIX = "tag:"
SYSTEM_PREFIX = "system:"
ID_PREFIX = "id="

_REFERENCE = re.compile(r"\{\{\{((?:(?!\{\{\{|\}\}\})[^\n])+?)\}\}\}")


class ReferenceSyntaxError(StoryloomError):
    """A ``{{{...}}}`` body that is not a valid reference."""

    def __init__(self, body: str, reason: str) -> None:
        self.body = body
        self.reason = reason
        super().__init__(f"{OPEN}{body}{CLOSE}: {reason}")


@dataclass(frozen=True)
class Segment:
    """One step of a reference path: an entry id or a display name."""

    kind: Literal["id", "name"]
    value: str

    def __str__(self) -> str:
        return f"{ID_PREFIX}{self.value}" if self.kind == "id" else self.value


@dataclass(frozen=True)
class ReferenceTarget:
    """A parsed reference body.

    ``kb`` is the qualifier as written (None: the current KB; ``this`` is normalised to
    None). Exactly one of ``tag`` and ``path`` is set.
    """

    raw: str
    kb: str | None = None
    tag: str | None = None
    path: tuple[Segment, ...] = ()

    @property
    def is_tag(self) -> bool:
        return self.tag is not None

    def unqualified(self) -> str:
        """The body without its KB qualifier, normalised."""
        if self.tag is not None:
            return f"{TAG_PREFIX}{self.tag}"
        return "/".join(str(segment) for segment in self.path)


@dataclass(frozen=True)
class ReferenceSpan:
    """A ``{{{...}}}`` found in a text: where it is, the body as written, and its parse.

    ``target`` is None when the body does not parse; ``error`` then says why.
    """

    start: int
    end: int
    raw: str
    target: ReferenceTarget | None
    error: str | None = None


def _segment(body: str, text: str) -> Segment:
    text = text.strip()
    if not text:
        raise ReferenceSyntaxError(body, "empty path segment (check the '/' separators)")
    if text.startswith(ID_PREFIX):
        entry_id = text[len(ID_PREFIX) :].strip()
        if not entry_id:
            raise ReferenceSyntaxError(body, "'id=' needs an entry id after it")
        return Segment("id", entry_id)
    return Segment("name", text)


def parse_path(body: str, text: str) -> tuple[Segment, ...]:
    return tuple(_segment(body, part) for part in text.split("/"))


def parse_reference(body: str, *, qualified: bool = True) -> ReferenceTarget:
    """Parse a reference body (the text between ``{{{`` and ``}}}``).

    With ``qualified=False`` a ``:`` is part of the name, for display names that contain
    one (the resolver retries that way when the qualifier names no KB).
    """
    text = body.strip()
    if not text:
        raise ReferenceSyntaxError(body, "empty reference")
    kb: str | None = None
    if text.startswith(TAG_PREFIX):
        rest = text
    elif qualified and ":" in text:
        qualifier, rest = text.split(":", 1)
        kb = qualifier.strip() or None
        if kb is None:
            raise ReferenceSyntaxError(body, "nothing before ':' (expected a knowledge base)")
        if kb == THIS_KB:
            kb = None
        rest = rest.strip()
    else:
        rest = text
    if rest.startswith(TAG_PREFIX):
        tag = rest[len(TAG_PREFIX) :].strip()
        if not tag:
            raise ReferenceSyntaxError(body, "'tag:' needs a tag after it")
        return ReferenceTarget(raw=body, kb=kb, tag=tag)
    if not rest:
        raise ReferenceSyntaxError(body, "nothing after ':' (expected an entry name or id=)")
    return ReferenceTarget(raw=body, kb=kb, path=parse_path(body, rest))


def iter_references(text: str) -> Iterator[ReferenceSpan]:
    """Every ``{{{...}}}`` in ``text``, left to right, parsed or with the parse error;
    ``{{{system:...}}}`` is not a reference and is skipped."""
    for match in _REFERENCE.finditer(text):
        raw = match.group(1)
        if raw.strip().startswith(SYSTEM_PREFIX):
            continue
        try:
            target: ReferenceTarget | None = parse_reference(raw)
            error = None
        except ReferenceSyntaxError as exc:
            target, error = None, exc.reason
        yield ReferenceSpan(match.start(), match.end(), raw, target, error)


def find_references(text: str) -> list[ReferenceSpan]:
    return list(iter_references(text))


def format_reference(path: str, kb: str | None = None) -> str:
    """The ``{{{...}}}`` text for a path (already joined with ``/``) and a qualifier."""
    return f"{OPEN}{kb}:{path}{CLOSE}" if kb else f"{OPEN}{path}{CLOSE}"
