"""Manuscript files in and out: chapters found by headings in Markdown, plain text and
DOCX; Markdown, DOCX and EPUB exports that read back as the same chapters; unreadable
files refused with the file's name and the reason.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable

import docx
import pytest
from ebooklib import ITEM_DOCUMENT, epub
from hypothesis import given, settings
from hypothesis import strategies as st

from storyloom.core.errors import InvalidInput
from storyloom.writing.manuscript_io import (
    EXPORT_FORMATS,
    MAX_MANUSCRIPT_BYTES,
    ExportBook,
    ExportChapter,
    ManuscriptPreview,
    count_words,
    export_book,
    export_docx,
    export_epub,
    export_markdown,
    parse_manuscript,
)

CHAPTERS = [
    ExportChapter(title="Chapter 1: The Storm", text="It rained.\n\nThen it *poured*."),
    ExportChapter(title="Chapter 2: After", text="Mud everywhere,\nand silence."),
    ExportChapter(title="Chapter 3: Home", text="She went home."),
]


def make_book(chapters: list[ExportChapter] = CHAPTERS, title: str = "The Long Rain") -> ExportBook:
    return ExportBook(
        title=title, language="en", author="Ann Writer", book_id="b-1", chapters=chapters
    )


def titles_and_texts(preview: ManuscriptPreview) -> list[tuple[str, str]]:
    return [(chapter.title, chapter.text) for chapter in preview.chapters]


def expected(chapters: list[ExportChapter]) -> list[tuple[str, str]]:
    return [(chapter.title, chapter.text) for chapter in chapters]


def docx_bytes(paragraphs: list[tuple[str, str]]) -> bytes:
    """A Word file written by python-docx: ``(style, text)`` per paragraph."""
    document = docx.Document()
    for style, text in paragraphs:
        document.add_paragraph(text, style=style)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


# --- word count ---------------------------------------------------------------------------


def test_word_count_counts_each_cjk_character_as_a_word() -> None:
    assert count_words("他说：“你好。”") == 4
    assert count_words("こんにちは") == 5
    assert count_words("Mixed 中文 text") == 4


def test_word_count_keeps_contractions_hyphens_and_decimals_in_one_word() -> None:
    assert count_words("Don't stop the well-known band, it costs 3.50 now!") == 9
    assert count_words("— ... !!") == 0
    assert count_words("") == 0


def test_word_count_keeps_combining_marks_inside_a_word() -> None:
    assert count_words("हिन्दी भाषा") == 2


# --- Markdown -----------------------------------------------------------------------------


def test_markdown_export_reads_back_as_the_same_chapters() -> None:
    preview = parse_manuscript(export_markdown(make_book()), "rain.md")

    assert preview.format == "markdown"
    assert preview.title == "The Long Rain"
    assert titles_and_texts(preview) == expected(CHAPTERS)
    assert [c.words for c in preview.chapters] == [5, 4, 3]


def test_markdown_chapters_are_the_level_used_for_many_headings() -> None:
    source = "# Book\n\n## Part One\n\n### Ch 1\n\nOne.\n\n### Ch 2\n\nTwo.\n"

    preview = parse_manuscript(source.encode(), "book.md")

    assert preview.title == "Book"
    assert [c.title for c in preview.chapters] == ["Prologue", "Ch 1", "Ch 2"]
    assert preview.chapters[0].text == "## Part One"


def test_markdown_preview_keeps_text_before_the_first_chapter_heading() -> None:
    source = "# Book\n\nAn epigraph, before anything.\n\n## One\n\nFirst.\n\n## Two\n\nSecond.\n"

    preview = parse_manuscript(source.encode(), "book.md")

    assert titles_and_texts(preview) == [
        ("Prologue", "An epigraph, before anything."),
        ("One", "First."),
        ("Two", "Second."),
    ]


def test_markdown_with_headings_all_at_one_level_takes_the_title_from_the_file() -> None:
    source = "# One\nFirst.\n# Two\nSecond.\n"

    preview = parse_manuscript(source.encode(), "my-novel.markdown")

    assert preview.title == "my-novel"
    assert titles_and_texts(preview) == [("One", "First."), ("Two", "Second.")]


def test_markdown_headings_in_code_fences_and_quotes_stay_in_the_chapter() -> None:
    source = "## One\n\n```\n## not a chapter\n```\n\n> ## quoted\n\n## Two\n\nEnd.\n"

    preview = parse_manuscript(source.encode(), "book.md")

    assert [c.title for c in preview.chapters] == ["One", "Two"]
    assert preview.chapters[0].text == "```\n## not a chapter\n```\n\n> ## quoted"


def test_markdown_setext_headings_split_chapters_too() -> None:
    source = "One\n===\n\nFirst.\n\nTwo\n===\n\nSecond.\n"

    preview = parse_manuscript(source.encode(), "book.md")

    assert titles_and_texts(preview) == [("One", "First."), ("Two", "Second.")]


def test_markdown_without_headings_splits_at_chapter_lines() -> None:
    source = "Chapter 1\n\nFirst.\n\nChapter 2\n\nSecond.\n"

    preview = parse_manuscript(source.encode(), "book.md")

    assert titles_and_texts(preview) == [("Chapter 1", "First."), ("Chapter 2", "Second.")]


# --- plain text ---------------------------------------------------------------------------


def test_plain_text_english_chapter_lines_read_back_as_chapters() -> None:
    source = "\n\n".join(f"{c.title}\n\n{c.text}" for c in CHAPTERS)

    preview = parse_manuscript(source.encode("utf-8-sig"), "rain.txt")

    assert preview.format == "text"
    assert preview.title == "rain"
    assert titles_and_texts(preview) == expected(CHAPTERS)


@pytest.mark.parametrize(
    "heading",
    ["CHAPTER XII", "Chapter Twelve", "chapter twenty-one - The Fair", "Chapter 3. Rain"],
)
def test_plain_text_recognises_english_chapter_heading_forms(heading: str) -> None:
    source = f"{heading}\nText one.\nChapter 99\nText two.\n"

    preview = parse_manuscript(source.encode(), "book.txt")

    assert [c.title for c in preview.chapters] == [heading, "Chapter 99"]


def test_plain_text_does_not_take_prose_starting_with_chapter_as_a_heading() -> None:
    source = "Chapter 1\nChapter one of my life was hard, she said.\n"

    preview = parse_manuscript(source.encode(), "book.txt")

    assert titles_and_texts(preview) == [
        ("Chapter 1", "Chapter one of my life was hard, she said.")
    ]


def test_plain_text_detects_chinese_chapter_headings_in_gb18030() -> None:
    source = (
        "《长夜》\n\n楔子\n\n很久以前。\n\n第一章 开端\n\n　　他说：“你好。”\n\n"
        "第12章\n\n雨停了。\n\n第一百零三回 归来\n\n回家。\n\n尾声\n\n完。\n"
    )

    preview = parse_manuscript(source.encode("gb18030"), "changye.txt")

    assert preview.title == "长夜"
    assert titles_and_texts(preview) == [
        ("楔子", "很久以前。"),
        ("第一章 开端", "　　他说：“你好。”"),
        ("第12章", "雨停了。"),
        ("第一百零三回 归来", "回家。"),
        ("尾声", "完。"),
    ]
    assert preview.chapters[1].words == 4


def test_plain_text_prologue_before_chinese_chapters_is_named_in_chinese() -> None:
    source = "这是开头的一段话，写了好几句。还有第二句。\n第一章\n正文。\n第二章\n更多。\n"

    preview = parse_manuscript(source.encode(), "book.txt")

    assert [c.title for c in preview.chapters] == ["序章", "第一章", "第二章"]


def test_plain_text_without_headings_is_one_chapter_named_after_the_file() -> None:
    preview = parse_manuscript(b"Just some prose.\r\n\r\nAnd more.\r\n", "loose-notes.txt")

    assert preview.title == "loose-notes"
    assert titles_and_texts(preview) == [("loose-notes", "Just some prose.\n\nAnd more.")]


def test_plain_text_markdown_style_heading_lines_split_chapters() -> None:
    preview = parse_manuscript(b"# Book\n\n## One\nFirst.\n## Two\nSecond.\n", "book.txt")

    assert preview.title == "Book"
    assert titles_and_texts(preview) == [("One", "First."), ("Two", "Second.")]


# --- DOCX ---------------------------------------------------------------------------------


def test_docx_export_reads_back_as_the_same_chapters() -> None:
    preview = parse_manuscript(export_docx(make_book()), "rain.docx")

    assert preview.format == "docx"
    assert preview.title == "The Long Rain"
    # A single newline is a soft wrap (CommonMark): Word gets one paragraph, one line.
    soft = [c.model_copy(update={"text": c.text.replace(",\nand", ", and")}) for c in CHAPTERS]
    assert titles_and_texts(preview) == expected(soft)


def test_docx_export_keeps_a_hard_line_break() -> None:
    chapter = ExportChapter(
        title="Chapter 1: Sign", text="The sign read:  \nNO BOATS\\\nAFTER DARK"
    )
    preview = parse_manuscript(export_docx(make_book([chapter])), "sign.docx")

    assert titles_and_texts(preview) == [
        ("Chapter 1: Sign", "The sign read:\nNO BOATS\nAFTER DARK")
    ]


def test_docx_export_carries_title_author_and_language() -> None:
    document = docx.Document(io.BytesIO(export_docx(make_book())))

    properties = document.core_properties
    assert (properties.title, properties.author, properties.language) == (
        "The Long Rain",
        "Ann Writer",
        "en",
    )
    styles = [p.style.name for p in document.paragraphs if p.style is not None]
    assert styles[:2] == ["Title", "Heading 1"]


def test_docx_with_heading_1_chapters_splits_at_each_heading() -> None:
    data = docx_bytes(
        [
            ("Title", "Harbour"),
            ("Heading 1", "Arrival"),
            ("Normal", "The ship came in."),
            ("Normal", ""),
            ("Normal", "Gulls."),
            ("Heading 1", "Departure"),
            ("Normal", "It left."),
        ]
    )

    preview = parse_manuscript(data, "harbour.docx")

    assert preview.title == "Harbour"
    assert titles_and_texts(preview) == [
        ("Arrival", "The ship came in.\n\nGulls."),
        ("Departure", "It left."),
    ]


def test_docx_heading_1_used_once_is_the_title_over_heading_2_chapters() -> None:
    data = docx_bytes(
        [
            ("Heading 1", "Harbour"),
            ("Heading 2", "Arrival"),
            ("Normal", "The ship came in."),
            ("Heading 2", "Departure"),
            ("Normal", "It left."),
        ]
    )

    preview = parse_manuscript(data, "harbour.docx")

    assert preview.title == "Harbour"
    assert [c.title for c in preview.chapters] == ["Arrival", "Departure"]


def test_docx_without_heading_styles_splits_at_chapter_lines() -> None:
    data = docx_bytes(
        [
            ("Normal", "第一章 出发"),
            ("Normal", "上路。"),
            ("Normal", "第二章 到达"),
            ("Normal", "到了。"),
        ]
    )

    preview = parse_manuscript(data, "road.docx")

    assert titles_and_texts(preview) == [("第一章 出发", "上路。"), ("第二章 到达", "到了。")]


def test_docx_is_recognised_by_content_when_the_name_has_no_extension() -> None:
    preview = parse_manuscript(export_docx(make_book()), "upload")

    assert preview.format == "docx"
    assert len(preview.chapters) == 3


# --- bad input ----------------------------------------------------------------------------


def _zeroed_middle(data: bytes) -> bytes:
    third = len(data) // 3
    return data[:third] + b"\x00" * 400 + data[third + 400 :]


def _newer_zip_version(data: bytes) -> bytes:
    # zipfile refuses an archive whose "version needed" is beyond what it implements.
    needed = data.index(b"PK\x01\x02") + 6
    return data[:needed] + b"\xfb\x00" + data[needed + 2 :]


@pytest.mark.parametrize(
    "damage",
    [_zeroed_middle, lambda data: data[: len(data) // 2], _newer_zip_version],
    ids=["zeroed-middle", "truncated", "unsupported-zip-version"],
)
def test_corrupt_docx_is_invalid_input_naming_the_file(damage: Callable[[bytes], bytes]) -> None:
    data = damage(export_docx(make_book()))

    with pytest.raises(InvalidInput) as raised:
        parse_manuscript(data, "broken.docx")

    assert "broken.docx" in str(raised.value)
    assert raised.value.problems[0].field == "file"


def test_zip_without_a_word_document_is_invalid_input() -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("hello.txt", "hi")

    with pytest.raises(InvalidInput, match=r"notes\.docx: .*no Word document"):
        parse_manuscript(out.getvalue(), "notes.docx")


def test_encrypted_docx_is_invalid_input_saying_why() -> None:
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(range(256)) * 8

    with pytest.raises(InvalidInput, match=r"secret\.docx: .*password-protected"):
        parse_manuscript(ole, "secret.docx")


@pytest.mark.parametrize("name", ["junk.txt", "junk.md", "junk.bin"])
def test_binary_junk_is_invalid_input_naming_the_file(name: str) -> None:
    junk = b"\x89PNG\r\n\x1a\n" + bytes((i * 37 + 11) % 256 for i in range(4096))

    with pytest.raises(InvalidInput, match=rf"{name.replace('.', '[.]')}: the file is binary"):
        parse_manuscript(junk, name)


def test_undecodable_text_is_invalid_input_asking_for_utf8() -> None:
    with pytest.raises(InvalidInput, match=r"old\.txt: .*neither UTF-8 nor GB18030"):
        parse_manuscript(b"caf\xe9 \xff\xfe text", "old.txt")


@pytest.mark.parametrize("data", [b"", b"  \n\t\n"])
def test_empty_file_is_invalid_input(data: bytes) -> None:
    with pytest.raises(InvalidInput, match=r"empty\.md: the file is empty"):
        parse_manuscript(data, "empty.md")


def test_file_over_50_mb_is_refused_before_reading() -> None:
    with pytest.raises(InvalidInput, match=r"huge\.txt: .*over the 50 MB limit"):
        parse_manuscript(b"a" * (MAX_MANUSCRIPT_BYTES + 1), "huge.txt")


# --- EPUB and export_book -----------------------------------------------------------------


def test_epub_reads_back_with_chapters_in_spine_order_and_escaped_text() -> None:
    chapters = [
        ExportChapter(title="One <&>", text="a < b && c > d\n\nSecond <p>aragraph"),
        ExportChapter(title="Two", text="Plain."),
        ExportChapter(title="", text="Untitled chapter."),
    ]

    book = epub.read_epub(io.BytesIO(export_epub(make_book(chapters))))

    assert book.get_metadata("DC", "identifier")[0][0] == "storyloom:b-1"
    assert book.get_metadata("DC", "title")[0][0] == "The Long Rain"
    assert book.get_metadata("DC", "language")[0][0] == "en"
    assert book.get_metadata("DC", "creator")[0][0] == "Ann Writer"
    spine = [book.get_item_with_id(item_id) for item_id, _ in book.spine]
    documents = [item for item in spine if item.get_type() == ITEM_DOCUMENT]
    bodies = [item.get_content().decode() for item in documents if item.get_id() != "nav"]
    assert len(bodies) == 3
    assert "<h1>One &lt;&amp;&gt;</h1>" in bodies[0]
    assert "<p>a &lt; b &amp;&amp; c &gt; d</p>" in bodies[0]
    assert "<p>Second &lt;p&gt;aragraph</p>" in bodies[0]
    assert "<p>Plain.</p>" in bodies[1]
    assert "<h1>Chapter 3</h1>" in bodies[2]
    assert [link.title for link in book.toc] == ["One <&>", "Two", "Chapter 3"]


def test_epub_export_of_the_same_book_is_byte_identical() -> None:
    assert export_epub(make_book()) == export_epub(make_book())


def test_epub_starts_with_the_stored_mimetype_entry() -> None:
    archive = zipfile.ZipFile(io.BytesIO(export_epub(make_book())))

    first = archive.infolist()[0]
    assert (first.filename, first.compress_type) == ("mimetype", zipfile.ZIP_STORED)
    assert archive.read("mimetype") == b"application/epub+zip"


@pytest.mark.parametrize("fmt", sorted(EXPORT_FORMATS))
def test_export_book_names_the_file_after_the_title_with_its_mime_type(fmt: str) -> None:
    content, filename, mime = export_book(make_book(title="Rain: a/b story"), fmt)

    extension, expected_mime = EXPORT_FORMATS[fmt]
    assert filename == f"Rain- a-b story{extension}"
    assert mime == expected_mime
    assert content


def test_export_book_refuses_an_unknown_format() -> None:
    with pytest.raises(InvalidInput, match="pdf"):
        export_book(make_book(), "pdf")


def test_export_drops_characters_xml_cannot_hold() -> None:
    chapters = [ExportChapter(title="Bell\x07", text="Ding\x00dong")]

    preview = parse_manuscript(export_docx(make_book(chapters)), "bell.docx")

    assert titles_and_texts(preview) == [("Bell", "Dingdong")]


# --- property: Markdown export then import keeps any chapters ------------------------------

_TEXT_CHARS = st.characters(
    codec="utf-8",
    exclude_categories=("Cc", "Cs", "Zl", "Zp"),
    include_characters="\t",
)


def _plain_line(line: str) -> bool:
    """Lines that are prose, not Markdown structure that could start or swallow a heading."""
    stripped = line.strip()
    if not stripped:
        return True
    if stripped[0] in "#`~<>=-":
        return False
    # Indented lines after a blank line are code; keep the strategy to plain paragraphs.
    return not line[0].isspace()


_titles = st.text(_TEXT_CHARS, min_size=1, max_size=40).map(str.strip).filter(bool)
_lines = st.text(_TEXT_CHARS, max_size=60).filter(_plain_line)
_texts = st.lists(_lines, min_size=1, max_size=8).map("\n".join)


def _canonical(text: str) -> str:
    """A chapter's text as import gives it back: no blank lines at either end."""
    lines = text.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.builds(ExportChapter, title=_titles, text=_texts.map(_canonical).filter(bool)),
        min_size=1,
        max_size=6,
    )
)
def test_markdown_export_then_import_preserves_any_chapters(
    chapters: list[ExportChapter],
) -> None:
    preview = parse_manuscript(export_markdown(make_book(chapters)), "book.md")

    assert preview.title == "The Long Rain"
    assert titles_and_texts(preview) == expected(chapters)
