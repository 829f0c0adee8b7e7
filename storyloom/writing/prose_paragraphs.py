"""A chapter's Markdown prose as paragraphs and lines, read as CommonMark reads them.

Authors (and editors that wrap at 80 columns) break lines inside a paragraph: a single
newline there is a *soft* wrap, part of the paragraph, not a line break. A blank line
starts a new paragraph, and a line ending in two spaces or a backslash is a *hard* break,
kept. The EPUB and Word exports render the same paragraphs (the web's chapter view has
the same rule, ``web/src/lib/proseParagraphs.ts``).
"""

from __future__ import annotations

import regex

_BLANK_LINE = regex.compile(r"\n(?:[ \t]*\n)+")
_HARD_BREAK = regex.compile(r"(?: {2,}|\\)$")
# Between two Chinese, Japanese or Korean characters a soft wrap is no space: those
# scripts put none between words.
_WIDE = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\u3000-\u303f\uff00-\uffef]")


def prose_paragraphs(text: str) -> list[list[str]]:
    """Each paragraph of ``text`` as its lines between hard breaks (soft wraps joined)."""
    body = text.replace("\r\n", "\n").replace("\r", "\n").strip("\n")
    paragraphs: list[list[str]] = []
    for block in _BLANK_LINE.split(body):
        if not block.strip():
            continue
        lines: list[str] = []
        current = ""
        for raw in block.split("\n"):
            hard = _HARD_BREAK.search(raw) is not None
            piece = raw.strip() if not hard else raw.rstrip(" \\").strip()
            current = _join(current, piece)
            if hard:
                lines.append(current)
                current = ""
        # A hard break at the end of a paragraph breaks nothing (CommonMark drops it).
        if current or not lines:
            lines.append(current)
        paragraphs.append(lines)
    return paragraphs


def _join(before: str, after: str) -> str:
    if not before:
        return after
    if not after:
        return before
    if _WIDE.match(before[-1]) and _WIDE.match(after[0]):
        return before + after
    return f"{before} {after}"
