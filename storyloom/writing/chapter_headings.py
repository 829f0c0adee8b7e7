"""Finding where chapters start in an imported manuscript, whatever its format.

Each reader (Markdown, plain text, DOCX) lists the headings it sees as :class:`Heading`
rows; :func:`split_chapters` then picks the level that splits the book into chapters and cuts
the lines there, so the three formats follow one rule:

- a heading alone at the shallowest level, before any other heading, is the book's title
  (``# Book`` over ``## Chapter`` lines), unless the file names its title another way;
- the chapter level is then the shallowest one used at least twice (parts used once are
  passed over for the chapters under them), else the shallowest one there is;
- text before the first chapter heading, other than the title, becomes an opening chapter
  ("Prologue" / "序章") when it is not blank;
- no heading at all: one chapter holding everything.

Plain-text chapter lines (``Chapter 12: The Storm``, ``CHAPTER XII``, ``第十二章 风暴``,
``楔子``) count as headings one level below any Markdown heading, so a ``# Book`` line over
them is still the title.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import regex

from storyloom.writing.word_count import is_mostly_cjk

# Below the six Markdown/Word heading levels: a plain "Chapter 3" line is a chapter, never a part.
PATTERN_LEVEL = 7
# Longer lines are prose that happens to start like a heading ("Chapter one of my life...").
_MAX_HEADING_CHARS = 100

_NUMBER_WORD = (
    r"(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen"
    r"|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty"
    r"|sixty|seventy|eighty|ninety|hundred|thousand)"
)
_ROMAN = r"(?=[ivxlcdm])m{0,4}(?:cm|cd|d?c{0,3})(?:xc|xl|l?x{0,3})(?:ix|iv|v?i{0,3})"
_ENGLISH = regex.compile(
    rf"(?:chapter|ch\.)\s+(?:\d+|{_ROMAN}|{_NUMBER_WORD}(?:[\s\-]+(?:and[\s\-]+)?{_NUMBER_WORD})*)"
    r"(?:\s*[:.\-–—]\s*\S.*|\s*[:.]?)"
    r"|(?:prologue|epilogue|interlude|afterword)(?:\s*[:.\-–—]\s*\S.*)?",
    regex.IGNORECASE,
)
_CHINESE_NUMERAL = r"[0-9０-９零〇一二三四五六七八九十百千万两壹贰叁肆伍陆柒捌玖拾佰仟]+"
_CHINESE = regex.compile(
    rf"第{_CHINESE_NUMERAL}[章回节](?:[\s:：、.．·\-—]*\S.*)?"
    r"|(?:序章|序言|楔子|引子|尾声|终章|后记)(?:[\s:：、.．·\-—]+\S.*)?"
)
_ATX = regex.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")


@dataclass(frozen=True)
class Heading:
    """A heading from ``line`` to before ``end`` (indexes into the document's lines).

    ``level`` 1 is the top; a Markdown setext heading spans two lines.
    """

    line: int
    level: int
    title: str
    end: int


@dataclass(frozen=True)
class Section:
    """A title and the lines under it (``start`` to ``end``, heading line excluded)."""

    title: str
    start: int
    end: int


@dataclass(frozen=True)
class Split:
    """The book's title (``None``: not found in the text) and its chapter sections."""

    title: str | None
    chapters: list[Section]


def is_chapter_line(line: str) -> bool:
    """Whether a plain line reads as a chapter heading in English or Chinese."""
    text = line.strip()
    if not text or len(text) > _MAX_HEADING_CHARS:
        return False
    return bool(_ENGLISH.fullmatch(text) or _CHINESE.fullmatch(text))


def atx_heading(line: str) -> tuple[int, str] | None:
    """``(level, title)`` of a Markdown ``#`` line in a plain-text file, else ``None``."""
    match = _ATX.fullmatch(line)
    if match is None:
        return None
    return len(match.group(1)), (match.group(2) or "").strip()


def text_headings(lines: Sequence[str]) -> list[Heading]:
    """Chapter lines and ``#`` lines of a plain-text manuscript."""
    found = []
    for index, line in enumerate(lines):
        atx = atx_heading(line)
        if atx is not None:
            found.append(Heading(index, atx[0], atx[1], index + 1))
        elif is_chapter_line(line):
            found.append(Heading(index, PATTERN_LEVEL, line.strip(), index + 1))
    return found


def opening_title(sample: str) -> str:
    """What to call the text before the first chapter heading."""
    return "序章" if is_mostly_cjk(sample) else "Prologue"


def split_chapters(
    lines: Sequence[str],
    headings: Sequence[Heading],
    *,
    fallback_title: str,
    has_title: bool = False,
) -> Split:
    """Cut ``lines`` into chapters at the chapter level of ``headings``.

    ``fallback_title`` names the one chapter of a book without chapter headings (the file
    name); ``has_title``: the file names its title otherwise (a DOCX ``Title`` paragraph),
    so no heading is taken as the title.
    """
    headings = sorted(headings, key=lambda h: h.line)
    title: str | None = None
    rest = list(headings)
    if rest and not has_title:
        top = min(h.level for h in rest)
        first = rest[0]
        alone_at_top = first.level == top and sum(1 for h in rest if h.level == top) == 1
        lone_non_chapter = len(rest) == 1 and first.level < PATTERN_LEVEL
        if alone_at_top and (len(rest) > 1 or lone_non_chapter):
            title = first.title
            rest = rest[1:]
    if not rest:
        start = headings[0].end if title is not None else 0
        whole = Section(title or fallback_title, start, len(lines))
        return Split(title, _non_blank([whole], lines))
    counts = Counter(h.level for h in rest)
    repeated = [level for level, n in counts.items() if n >= 2]
    level = min(repeated) if repeated else min(counts)
    marks = [h for h in rest if h.level == level]
    chapters = []
    opening_start = headings[0].end if title is not None else 0
    if any(line.strip() for line in lines[opening_start : marks[0].line]):
        sample = "\n".join(lines[opening_start : marks[0].line])
        chapters.append(Section(opening_title(sample), opening_start, marks[0].line))
    for mark, after in zip(marks, [*marks[1:], None], strict=True):
        end = after.line if after is not None else len(lines)
        chapters.append(Section(mark.title, mark.end, end))
    return Split(title, chapters)


def _non_blank(sections: list[Section], lines: Sequence[str]) -> list[Section]:
    return [s for s in sections if any(line.strip() for line in lines[s.start : s.end])]


def section_text(lines: Sequence[str], section: Section, separator: str = "\n") -> str:
    """The section's lines joined by ``separator``, without the blank lines around them."""
    body = list(lines[section.start : section.end])
    while body and not body[0].strip():
        body.pop(0)
    while body and not body[-1].strip():
        body.pop()
    return separator.join(body)
