"""Manuscript files in and out: one import point for the server and the CLI.

Reading lives in :mod:`storyloom.writing.manuscript_import`, writing in
:mod:`storyloom.writing.manuscript_export`; the word count both show is
:mod:`storyloom.writing.word_count`.
"""

from __future__ import annotations

from storyloom.writing.manuscript_export import (
    EXPORT_FORMATS,
    ExportBook,
    ExportChapter,
    ExportFormat,
    export_book,
    export_docx,
    export_epub,
    export_file_name,
    export_markdown,
)
from storyloom.writing.manuscript_import import (
    MAX_MANUSCRIPT_BYTES,
    ChapterDraft,
    ManuscriptError,
    ManuscriptFormat,
    ManuscriptPreview,
    parse_manuscript,
)
from storyloom.writing.word_count import count_words

__all__ = [
    "EXPORT_FORMATS",
    "MAX_MANUSCRIPT_BYTES",
    "ChapterDraft",
    "ExportBook",
    "ExportChapter",
    "ExportFormat",
    "ManuscriptError",
    "ManuscriptFormat",
    "ManuscriptPreview",
    "count_words",
    "export_book",
    "export_docx",
    "export_epub",
    "export_file_name",
    "export_markdown",
    "parse_manuscript",
]
