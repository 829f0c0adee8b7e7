"""Character Card V3 corners in the file formats: decorator blocks, spec_version, PNG assets."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from storyloom.core.errors import FileFormatError
from storyloom.sillytavern.character_card import (
    asset_file,
    parse_card,
    read_png_card,
)
from storyloom.sillytavern.lorebook_decorators import (
    decorator_line,
    join_decorated,
    parse_decorators,
)
from storyloom.sillytavern.png_chunks import read_chunks, replace_text_chunks, text_chunks
from storyloom.testing.st_documents import blank_png, card_document, card_png

CARD = Path("card.json")


# -- decorator blocks ------------------------------------------------------------------


def test_a_decorator_block_is_split_from_the_text_after_it() -> None:
    block = parse_decorators("@@depth 2\n@@role  assistant \n\nThe dragon sleeps.\nMore.")
    assert [(d.primary.name, d.primary.value) for d in block.decorators] == [
        ("depth", "2"),
        ("role", "assistant"),
    ]
    assert block.body == "The dragon sleeps.\nMore."


def test_fallback_lines_belong_to_the_decorator_above_them() -> None:
    block = parse_decorators("@@risu_only 4\n@@@agn_only 4\n@@@activate_only_every 4\n@@depth 1\nx")
    first, second = block.decorators
    assert first.primary.name == "risu_only"
    assert [f.name for f in first.fallbacks] == ["agn_only", "activate_only_every"]
    assert all(f.fallback for f in first.fallbacks)
    assert second.primary.name == "depth" and second.fallbacks == ()


def test_a_fallback_line_opening_the_block_follows_no_decorator() -> None:
    block = parse_decorators("@@@depth 1\n@@activate\ntext")
    assert [line.line for line in block.orphans] == ["@@@depth 1"]
    assert [d.primary.name for d in block.decorators] == ["activate"]


def test_decorator_lines_below_the_text_are_text() -> None:
    content = "The dragon.\n@@depth 2\nstill text"
    block = parse_decorators(content)
    assert not block.has_block
    assert block.body == content


def test_a_content_of_decorators_only_has_no_text() -> None:
    block = parse_decorators("@@activate\n@@depth 0")
    assert block.body == ""
    assert len(block.decorators) == 2


def test_windows_line_ends_do_not_reach_the_values() -> None:
    block = parse_decorators("@@scan_depth 3\r\n@@exclude_keys a, b\r\nText\r\n")
    assert [d.primary.value for d in block.decorators] == ["3", "a, b"]
    assert block.body == "Text\r\n"


def test_decorator_lines_are_written_as_the_spec_shows_them() -> None:
    assert decorator_line("depth", "2") == "@@depth 2"
    assert decorator_line("activate") == "@@activate"
    assert decorator_line("depth", "3", fallback=True) == "@@@depth 3"
    assert join_decorated(["@@depth 2"], "Text") == "@@depth 2\nText"
    assert join_decorated([], "Text") == "Text"


# -- spec_version ----------------------------------------------------------------------


@pytest.mark.parametrize("version", [3.0, 3, "3.0"])
def test_spec_version_as_a_number_or_text_imports_without_warning(version: object) -> None:
    document = card_document(spec="v3")
    document["spec_version"] = version
    parsed = parse_card(document, CARD)
    assert parsed.version == 3
    assert parsed.warnings == []
    assert parsed.raw["spec_version"] == version  # kept as written, for export


@pytest.mark.parametrize("version", ["3.5", "4.0", 4])
def test_a_spec_version_newer_than_known_imports_with_a_warning(version: object) -> None:
    document = card_document(spec="v3")
    document["spec_version"] = version
    parsed = parse_card(document, CARD)
    assert parsed.name == "Aria"
    assert len(parsed.warnings) == 1
    assert f"spec_version {version}" in parsed.warnings[0]
    assert "newer than storyloom knows" in parsed.warnings[0]


def test_an_older_or_unreadable_spec_version_imports_quietly() -> None:
    for version in ("2.9", "draft", None):
        document = card_document(spec="v3")
        document["spec_version"] = version
        assert parse_card(document, CARD).warnings == []


# -- PNG asset chunks --------------------------------------------------------------------


def test_png_asset_chunks_are_read_and_kept_out_of_the_avatar() -> None:
    icon = blank_png(3, 3, (10, 20, 30))
    png = card_png(card_document(spec="v3"), assets={"0": icon, "bg-1": b"\x00binary\xff"})
    card = read_png_card(png, "card.png")
    assert card.assets == {"0": icon, "bg-1": b"\x00binary\xff"}
    keywords = {chunk.keyword for chunk in text_chunks(read_chunks(card.image))}
    assert keywords == set()
    assert card.warnings == []


def test_a_png_asset_chunk_without_base64_or_with_a_path_name_is_skipped() -> None:
    png = card_png(
        card_document(spec="v3"),
        assets={"ok": b"fine", "../escape": b"no"},
    )
    png = replace_text_chunks(png, [("chara-ext-asset_:bad", "***not base64***")])
    card = read_png_card(png, "card.png")
    assert card.assets == {"ok": b"fine"}
    assert any("'chara-ext-asset_:../escape'" in w for w in card.warnings)
    assert any("'chara-ext-asset_:bad' is not base64" in w for w in card.warnings)


def test_the_asset_chunk_prefix_without_colon_is_read_too() -> None:
    png = card_png(card_document(spec="v3"))
    png = replace_text_chunks(png, [("chara-ext-asset_7", base64.b64encode(b"seven").decode())])
    assert read_png_card(png, "card.png").assets == {"7": b"seven"}


def test_embedded_asset_uris_name_the_file_kept_beside_the_character() -> None:
    assert asset_file("__asset:0") == "__asset/0"
    assert asset_file("embeded://assets/icon/images/main.png") == "assets/icon/images/main.png"
    assert asset_file("embedded://x.png") == "x.png"
    assert asset_file("ccdefault:") is None
    assert asset_file("https://example.com/a.png") is None
    assert asset_file("__asset:../../etc") is None


def test_a_png_whose_asset_chunk_is_its_only_text_is_still_no_card() -> None:
    png = replace_text_chunks(blank_png(), [("chara-ext-asset_:0", "AAAA")])
    with pytest.raises(FileFormatError, match="no character card"):
        read_png_card(png, "x.png")
