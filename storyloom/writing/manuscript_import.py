"""Reading an existing manuscript (Markdown, plain text, DOCX) into chapters to preview.

:func:`parse_manuscript` never writes anything: it answers a :class:`ManuscriptPreview` the
author edits (retitles, merges, drops chapters) before the book imports it. When it does,
:func:`import_entities` gives the book the characters and places its prose names (found
across the whole manuscript, so a name must recur in the book, not in one chapter). Chapters are cut
at headings by the one rule of :mod:`storyloom.writing.chapter_headings`. A file that cannot
be read raises :class:`ManuscriptError` naming the file and why, never a parser's own error.
"""

from __future__ import annotations

import codecs
import io
import zipfile
from collections.abc import Sequence
from pathlib import PurePath
from typing import Literal

import docx
import regex
from markdown_it import MarkdownIt
from pydantic import BaseModel, ConfigDict

from storyloom.core.errors import FieldProblem, InvalidInput
from storyloom.writing.book_store import BookStore, Resource
from storyloom.writing.chapter_headings import (
    PATTERN_LEVEL,
    Heading,
    Section,
    Split,
    is_chapter_line,
    section_text,
    split_chapters,
    text_headings,
)
from storyloom.writing.prose_reader import discover_entities, found_entity_resources
from storyloom.writing.word_count import count_words

ManuscriptFormat = Literal["markdown", "text", "docx"]

MAX_MANUSCRIPT_BYTES = 50 * 1024 * 1024
# A DOCX is zipped XML; more than this unpacked is a zip bomb, not a novel.
_MAX_UNPACKED_BYTES = 20 * MAX_MANUSCRIPT_BYTES
_EXTENSIONS: dict[str, ManuscriptFormat] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".mdown": "markdown",
    ".mkd": "markdown",
    ".txt": "text",
    ".text": "text",
    ".docx": "docx",
}
_ZIP_MAGIC = b"PK\x03\x04"
# Word's legacy .doc and every password-protected .docx are OLE compound files.
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_MARKDOWN_HEADING = regex.compile(r"(?m)^ {0,3}#{1,6}[ \t]+\S")
# Control characters other than tab, newline, form feed and carriage return: text has none.
_CONTROL = regex.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")
# What zipfile raises on a damaged or unsupported archive (version, method, truncation).
_ZIP_ERRORS = (zipfile.BadZipFile, ValueError, NotImplementedError, EOFError, OSError)
_HEADING_STYLE = regex.compile(r"heading ([1-6])", regex.IGNORECASE)


class ChapterDraft(BaseModel):
    """One chapter found in the file, as the author sees it before importing."""

    model_config = ConfigDict(populate_by_name=True)

    title: str
    text: str
    words: int


class ManuscriptPreview(BaseModel):
    """What importing the file would give: its format, the book's title, the chapters."""

    model_config = ConfigDict(populate_by_name=True)

    format: ManuscriptFormat
    title: str
    chapters: list[ChapterDraft]


class ManuscriptError(InvalidInput):
    """A manuscript file that cannot be read; the message names the file and the reason."""

    def __init__(self, filename: str, reason: str) -> None:
        self.filename = filename
        self.reason = reason
        super().__init__(
            f"cannot import {filename}: {reason}", [FieldProblem("file", f"{filename}: {reason}")]
        )


def parse_manuscript(data: bytes, filename: str) -> ManuscriptPreview:
    """Chapters of a Markdown, plain-text or DOCX manuscript, for the author to check."""
    if len(data) > MAX_MANUSCRIPT_BYTES:
        raise ManuscriptError(
            filename, f"the file is {len(data) / 1024 / 1024:.1f} MB, over the 50 MB limit"
        )
    if not data.strip():
        raise ManuscriptError(filename, "the file is empty")
    fallback = PurePath(filename).stem.strip() or "Untitled"
    fmt = _EXTENSIONS.get(PurePath(filename).suffix.lower())
    if fmt == "docx" or (fmt is None and _looks_like_docx(data)):
        return _parse_docx(data, filename, fallback)
    if data.startswith(_OLE_MAGIC):
        raise ManuscriptError(filename, _OLE_REASON)
    text = decode_text(data, filename)
    if not text.strip():
        raise ManuscriptError(filename, "the file has no text")
    if fmt is None:
        fmt = "markdown" if _MARKDOWN_HEADING.search(text) else "text"
    if fmt == "markdown":
        return _parse_markdown(text, fallback)
    return _parse_text(text, fallback)


_OLE_REASON = (
    "the file is password-protected or in the old Word .doc format; "
    "save it as .docx without a password and import that"
)


def decode_text(data: bytes, filename: str) -> str:
    """The file's text: UTF-8 (with or without BOM), UTF-16 with a BOM, else GB18030."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        candidates = ["utf-16"]
    elif b"\x00" in data:
        raise ManuscriptError(filename, "the file is binary, not text")
    else:
        candidates = ["utf-8-sig", "gb18030"]
    for encoding in candidates:
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        # DOS editors end a file with Ctrl-Z; it is not part of the book.
        text = text.rstrip("\x1a")
        # GB18030 maps much byte soup to some character; control codes give junk away.
        if len(_CONTROL.findall(text)) > len(text) // 100:
            raise ManuscriptError(filename, "the file is binary, not text")
        return text.replace("\r\n", "\n").replace("\r", "\n")
    raise ManuscriptError(filename, "the text is neither UTF-8 nor GB18030; save it as UTF-8")


def _looks_like_docx(data: bytes) -> bool:
    if not data.startswith(_ZIP_MAGIC):
        return False
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return "word/document.xml" in archive.namelist()
    except _ZIP_ERRORS:
        return False


def _preview(
    fmt: ManuscriptFormat, split: Split, lines: list[str], fallback: str, separator: str = "\n"
) -> ManuscriptPreview:
    chapters = []
    for section in split.chapters:
        text = section_text(lines, section, separator)
        chapters.append(ChapterDraft(title=section.title, text=text, words=count_words(text)))
    return ManuscriptPreview(format=fmt, title=split.title or fallback, chapters=chapters)


def _parse_text(text: str, fallback: str) -> ManuscriptPreview:
    lines = text.split("\n")
    headings = text_headings(lines)
    title = _title_line(lines, headings)
    if title is not None:
        lines[title] = ""
    split = split_chapters(lines, headings, fallback_title=fallback)
    if title is not None and split.title is None:
        split = Split(_TITLE_QUOTES.sub("", text.split("\n")[title].strip()), split.chapters)
    return _preview("text", split, lines, fallback)


# Plain-text novels (Chinese ones above all) open with the book's name on a line of its own;
# a line ending a sentence is the start of the story instead.
_MAX_TITLE_LINE = 60
_SENTENCE_END = '.!?。！？…"”’」』'
_TITLE_QUOTES = regex.compile(r"^《|》$")


def _title_line(lines: list[str], headings: list[Heading]) -> int | None:
    """The index of a lone short line before the first chapter heading, else ``None``."""
    if not headings:
        return None
    opening = [i for i in range(headings[0].line) if lines[i].strip()]
    if len(opening) != 1:
        return None
    line = lines[opening[0]].strip()
    if len(line) > _MAX_TITLE_LINE or line.endswith(tuple(_SENTENCE_END)):
        return None
    return opening[0]


_MARKDOWN = MarkdownIt("commonmark")


def _parse_markdown(text: str, fallback: str) -> ManuscriptPreview:
    # The parser splits on "\n" only, as text.split does, so its line numbers index `lines`.
    lines = text.split("\n")
    tokens = _MARKDOWN.parse(text)
    headings: list[Heading] = []
    paragraphs: list[Section] = []
    for index, token in enumerate(tokens):
        # Level 0 only: a heading inside a block quote or list is part of a chapter.
        if token.level != 0 or token.map is None:
            continue
        start, end = token.map
        if token.type == "heading_open":
            title = tokens[index + 1].content.strip()
            headings.append(Heading(start, int(token.tag[1:]), title, end))
        elif token.type == "paragraph_open":
            paragraphs.append(Section("", start, end))
    if len(headings) <= 1:
        # Markdown used only for a title (or not at all): chapters are "Chapter 3" lines.
        headings += [
            Heading(i, PATTERN_LEVEL, lines[i].strip(), i + 1)
            for paragraph in paragraphs
            for i in range(paragraph.start, paragraph.end)
            if is_chapter_line(lines[i])
        ]
    split = split_chapters(lines, headings, fallback_title=fallback)
    return _preview("markdown", split, lines, fallback)


def _parse_docx(data: bytes, filename: str, fallback: str) -> ManuscriptPreview:
    if data.startswith(_OLE_MAGIC):
        raise ManuscriptError(filename, _OLE_REASON)
    if not data.startswith(_ZIP_MAGIC):
        raise ManuscriptError(filename, "the file is not a DOCX document (it is not a zip archive)")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = archive.namelist()
            unpacked = sum(info.file_size for info in archive.infolist())
    except _ZIP_ERRORS as exc:
        raise ManuscriptError(filename, f"the DOCX archive is damaged ({exc})") from exc
    if "word/document.xml" not in names:
        raise ManuscriptError(filename, "the zip archive holds no Word document")
    if unpacked > _MAX_UNPACKED_BYTES:
        raise ManuscriptError(filename, "the DOCX unpacks to more than 1 GB")
    try:
        return _read_docx(data, fallback)
    # python-docx and lxml raise many kinds on a damaged part (KeyError, XMLSyntaxError,
    # ValueError, PackageNotFoundError...); each is the same answer to the author.
    except Exception as exc:
        raise ManuscriptError(filename, f"the DOCX document is damaged ({exc})") from exc


def _read_docx(data: bytes, fallback: str) -> ManuscriptPreview:
    document = docx.Document(io.BytesIO(data))
    lines: list[str] = []
    headings: list[Heading] = []
    title: str | None = None
    for paragraph in document.paragraphs:
        text: str = paragraph.text
        if not text.strip():
            continue
        style = paragraph.style.name if paragraph.style is not None else ""
        if style == "Title" and title is None:
            title = text.strip()
            continue
        level = _HEADING_STYLE.fullmatch(style or "")
        index = len(lines)
        if level is not None:
            headings.append(Heading(index, int(level.group(1)), text.strip(), index + 1))
        elif is_chapter_line(text):
            headings.append(Heading(index, PATTERN_LEVEL, text.strip(), index + 1))
        lines.append(text)
    split = split_chapters(lines, headings, fallback_title=fallback, has_title=title is not None)
    if title is not None:
        split = Split(title, split.chapters)
    return _preview("docx", split, lines, fallback, separator="\n\n")


def import_entities(
    store: BookStore, book_id: str, texts: Sequence[str], first_chapter: int
) -> list[Resource]:
    """Create the characters and places ``texts`` (chapters ``first_chapter``, the next,
    …) name that the book does not know yet by any of their names; each exists from the
    chapter that first names it. Answers the entities created."""
    entities = store.entities(book_id)
    known = {n.casefold() for r in entities for n in (r.title, *r.aliases)}
    known_paths = {r.path for r in entities}
    created = [
        r
        for r in found_entity_resources(
            book_id, discover_entities(texts, first_chapter=first_chapter)
        )
        if r.path not in known_paths
        and not any(n.casefold() in known for n in (r.title, *r.aliases))
    ]
    if created:
        store.commit_chapter_memory(book_id, resources=created)
    return created
