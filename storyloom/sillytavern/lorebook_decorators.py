"""Character Card V3 decorators: the ``@@name value`` lines at the top of a lorebook entry.

An entry's ``content`` may open with decorator lines (SPEC_V3, "Decorators")::

    @@depth 2
    @@@instruct_depth 2
    @@role assistant

    The text that goes into the prompt.

A ``@@@`` line is a fallback of the decorator line above it: it counts only when the
application does not support that decorator (or ignores its value), and a chain of them is
tried top to bottom. The block ends at the first line that does not start with ``@@``;
the blank lines after it are not part of the text, as the spec asks.

As in SillyTavern's ``parseDecorators``, only a block at the very top of the content counts
(a ``@@`` line further down is text). Unlike SillyTavern, whose parser keeps the whole
content when every line is a decorator, such an entry has empty text here.

This module reads and writes the block; what each decorator means to storyloom is decided
in :mod:`storyloom.knowledge.st_decorators`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DecoratorLine:
    """One ``@@`` (or ``@@@``) line: its name (without the ``@``s), value and text."""

    name: str
    value: str
    line: str
    fallback: bool

    @property
    def label(self) -> str:
        return ("@@@" if self.fallback else "@@") + self.name


@dataclass(frozen=True)
class Decorator:
    """A decorator line and the ``@@@`` fallback lines right after it, in order."""

    primary: DecoratorLine
    fallbacks: tuple[DecoratorLine, ...] = ()

    @property
    def choices(self) -> tuple[DecoratorLine, ...]:
        return (self.primary, *self.fallbacks)


@dataclass(frozen=True)
class DecoratedContent:
    """An entry's content split into its decorator block and the text after it."""

    decorators: tuple[Decorator, ...] = ()
    body: str = ""
    #: The fallback lines that follow no decorator (the block opens with ``@@@``).
    orphans: tuple[DecoratorLine, ...] = field(default=())

    @property
    def has_block(self) -> bool:
        return bool(self.decorators or self.orphans)


def _line(text: str) -> DecoratorLine:
    bare = text.rstrip("\r")
    fallback = bare.startswith("@@@")
    rest = bare[3:] if fallback else bare[2:]
    name, _, value = rest.partition(" ")
    if "\t" in name:
        name, _, more = name.partition("\t")
        value = f"{more} {value}"
    return DecoratorLine(name=name.lower(), value=value.strip(), line=bare, fallback=fallback)


def parse_decorators(content: str) -> DecoratedContent:
    """The decorator block at the top of ``content`` and the text after it."""
    lines = content.split("\n")
    start = 0
    while start < len(lines) and not lines[start].strip():
        start += 1
    if start >= len(lines) or not lines[start].startswith("@@"):
        return DecoratedContent(body=content)
    decorators: list[Decorator] = []
    orphans: list[DecoratorLine] = []
    end = start
    while end < len(lines) and lines[end].startswith("@@"):
        parsed = _line(lines[end])
        if not parsed.fallback:
            decorators.append(Decorator(parsed))
        elif decorators:
            last = decorators[-1]
            decorators[-1] = Decorator(last.primary, (*last.fallbacks, parsed))
        else:
            orphans.append(parsed)
        end += 1
    while end < len(lines) and not lines[end].strip():
        end += 1
    return DecoratedContent(tuple(decorators), "\n".join(lines[end:]), tuple(orphans))


def decorator_line(name: str, value: str = "", *, fallback: bool = False) -> str:
    """A decorator line as the spec writes one: ``@@name value``."""
    prefix = "@@@" if fallback else "@@"
    return f"{prefix}{name} {value}".rstrip() if value else f"{prefix}{name}"


def join_decorated(lines: list[str], body: str) -> str:
    """Content made of decorator ``lines`` and the ``body`` text, with one line between."""
    if not lines:
        return body
    # A text that itself opens with "@@" is kept apart by a blank line, which ends a block.
    gap = "\n\n" if body.startswith("@@") else "\n"
    return "\n".join(lines) + gap + body
