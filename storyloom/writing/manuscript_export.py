"""Writing the book out as Markdown, DOCX or EPUB, with the ecosystem's libraries.

Each writer takes an :class:`ExportBook` (the caller reads the chapters' current text from
the book) and answers the file's bytes. Markdown and DOCX read back through
:func:`storyloom.writing.manuscript_import.parse_manuscript` into the same chapters, so an
exported book can be imported again. EPUB output is deterministic: the same book gives the
same bytes (fixed zip timestamps and modification date unless one is given).
"""

from __future__ import annotations

import html
import io
import zipfile
from datetime import UTC, datetime
from typing import Literal

import docx
import regex
from ebooklib import epub
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from storyloom.core.errors import FieldProblem, InvalidInput
from storyloom.writing.prose_paragraphs import prose_paragraphs

ExportFormat = Literal["markdown", "docx", "epub"]

_DOCX_MIME = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
EXPORT_FORMATS: dict[str, tuple[str, str]] = {
    "markdown": (".md", "text/markdown"),
    "docx": (".docx", _DOCX_MIME),
    "epub": (".epub", "application/epub+zip"),
}

# EPUB requires a modification date; a fixed one keeps the same book's bytes the same.
_FIXED_MODIFIED = datetime(2000, 1, 1, tzinfo=UTC)
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
# XML 1.0 forbids these; Word and EPUB readers would reject the whole file for one of them.
_NOT_XML = regex.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\p{Cs}]")
_FILE_NAME_UNSAFE = regex.compile(r'[\x00-\x1f\x7f/\\:*?"<>|]+')


class ExportChapter(BaseModel):
    """A chapter as exported: its title and its Markdown text (paragraphs split by blank
    lines, soft wraps joined: see :mod:`storyloom.writing.prose_paragraphs`)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    title: str
    text: str


class ExportBook(BaseModel):
    """Everything an export needs; ``modified`` dates the EPUB (default: a fixed date)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    title: str
    language: str
    author: str = ""
    book_id: str
    chapters: list[ExportChapter]
    modified: datetime | None = None


def export_markdown(book: ExportBook) -> bytes:
    """``# Title``, then ``## Chapter title`` and the chapter's text for each chapter."""
    parts = [f"# {_markdown_heading(book.title)}\n"]
    for chapter in book.chapters:
        parts.append(f"\n## {_markdown_heading(chapter.title)}\n")
        body = _strip_blank_lines(_unix_newlines(chapter.text))
        if body:
            parts.append(f"\n{body}\n")
    return "".join(parts).encode("utf-8")


def export_docx(book: ExportBook) -> bytes:
    """A Word document: a Title paragraph, a Heading 1 and body paragraphs per chapter."""
    document = docx.Document()
    properties = document.core_properties
    properties.title = _xml_safe(book.title)
    properties.author = _xml_safe(book.author)
    properties.language = _xml_safe(book.language)
    document.add_heading(_xml_safe(_one_line(book.title)), 0)
    for number, chapter in enumerate(book.chapters, start=1):
        document.add_heading(_xml_safe(_chapter_title(chapter, number)), 1)
        for lines in prose_paragraphs(chapter.text):
            paragraph = document.add_paragraph()
            for index, line in enumerate(lines):
                run = paragraph.add_run(_xml_safe(line))
                if index < len(lines) - 1:
                    run.add_break()
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def export_epub(book: ExportBook) -> bytes:
    """An EPUB 3 book: one XHTML file per chapter, navigation document, NCX table of contents."""
    language = book.language or "en"
    ebook = epub.EpubBook()
    ebook.set_identifier(f"storyloom:{book.book_id}")
    ebook.set_title(_xml_safe(_one_line(book.title)))
    ebook.set_language(language)
    if book.author:
        ebook.add_author(_xml_safe(book.author))
    items = []
    for number, chapter in enumerate(book.chapters, start=1):
        title = _xml_safe(_chapter_title(chapter, number))
        name = f"chapter-{number:04d}"
        item = epub.EpubHtml(uid=name, title=title, file_name=f"{name}.xhtml", lang=language)
        paragraphs = "".join(
            f"<p>{'<br/>'.join(_escape(line) for line in lines)}</p>"
            for lines in prose_paragraphs(chapter.text)
        )
        item.content = f"<h1>{_escape(title)}</h1>{paragraphs}"
        ebook.add_item(item)
        items.append(item)
    ebook.toc = items
    ebook.add_item(epub.EpubNcx())
    ebook.add_item(epub.EpubNav())
    ebook.spine = ["nav", *items]
    out = io.BytesIO()
    options = {"mtime": book.modified or _FIXED_MODIFIED, "raise_exceptions": True}
    epub.write_epub(out, ebook, options)
    return _fixed_zip_times(out.getvalue())


def export_book(book: ExportBook, fmt: str) -> tuple[bytes, str, str]:
    """``(content, file name, MIME type)`` of ``book`` in ``fmt`` (a key of EXPORT_FORMATS)."""
    if fmt not in EXPORT_FORMATS:
        known = ", ".join(EXPORT_FORMATS)
        raise InvalidInput.of(
            "export format", [FieldProblem("format", f"{fmt!r} is not one of {known}")]
        )
    extension, mime = EXPORT_FORMATS[fmt]
    writers = {"markdown": export_markdown, "docx": export_docx, "epub": export_epub}
    return writers[fmt](book), export_file_name(book.title, extension), mime


def export_file_name(title: str, extension: str) -> str:
    """A file name from the book's title, keeping its script, without path characters."""
    stem = _FILE_NAME_UNSAFE.sub("-", _one_line(title)).strip(" .-")[:100].strip()
    return f"{stem or 'book'}{extension}"


def _unix_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _one_line(text: str) -> str:
    return " ".join(_unix_newlines(text).split("\n")).strip()


def _markdown_heading(title: str) -> str:
    text = _one_line(title)
    # A trailing "#" would be read as the heading's closing sequence and dropped:
    # an explicit closing sequence after it keeps it.
    return f"{text} #" if text.endswith("#") else text


def _chapter_title(chapter: ExportChapter, number: int) -> str:
    return _one_line(chapter.title) or f"Chapter {number}"


def _strip_blank_lines(text: str) -> str:
    lines = text.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines)


def _xml_safe(text: str) -> str:
    return _NOT_XML.sub("", text)


def _escape(text: str) -> str:
    return html.escape(_xml_safe(text), quote=False)


def _fixed_zip_times(data: bytes) -> bytes:
    # zipfile stamps every entry with the time of writing; rewrite with a fixed stamp,
    # keeping the order (mimetype first, stored) that EPUB readers require.
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(data)) as source,
        zipfile.ZipFile(out, "w") as target,
    ):
        for info in source.infolist():
            entry = zipfile.ZipInfo(info.filename, date_time=_ZIP_EPOCH)
            entry.compress_type = info.compress_type
            entry.external_attr = info.external_attr
            target.writestr(entry, source.read(info.filename))
    return out.getvalue()
