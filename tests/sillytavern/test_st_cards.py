"""Character card files read on their own: CHARX archives and PNG chunks that are refused."""

from __future__ import annotations

import io
import stat
import zipfile

import pytest

from storyloom.core.errors import FileFormatError
from storyloom.sillytavern.character_card import read_png_card
from storyloom.sillytavern.charx import CharxLimits, read_charx
from storyloom.testing.st_documents import card_document, card_png


def _zip(members: list[tuple[zipfile.ZipInfo | str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for info, data in members:
            archive.writestr(info, data)
    return buffer.getvalue()


def test_charx_with_an_absolute_member_is_refused() -> None:
    data = _zip([("card.json", b"{}"), ("/etc/passwd", b"x")])
    with pytest.raises(FileFormatError, match="absolute"):
        read_charx(data, "a.charx")


def test_charx_with_a_symlink_member_is_refused() -> None:
    link = zipfile.ZipInfo("assets/link")
    link.create_system = 3
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    data = _zip([("card.json", b"{}"), (link, b"/etc/passwd")])
    with pytest.raises(FileFormatError, match="symbolic link"):
        read_charx(data, "a.charx")


def test_charx_zip_bomb_is_refused() -> None:
    data = _zip([("card.json", b"{}"), ("assets/bomb.bin", b"\0" * (8 * 1024 * 1024))])
    with pytest.raises(FileFormatError, match="zip bomb"):
        read_charx(data, "a.charx")


def test_charx_member_over_the_size_limit_is_refused() -> None:
    data = _zip([("card.json", b"{}"), ("assets/big.bin", bytes(range(256)) * 64)])
    with pytest.raises(FileFormatError, match="limit"):
        read_charx(data, "a.charx", CharxLimits(max_member_bytes=1000))


def test_charx_without_card_json_is_refused() -> None:
    with pytest.raises(FileFormatError, match=r"card\.json"):
        read_charx(_zip([("other.json", b"{}")]), "a.charx")


def test_png_with_a_corrupt_chunk_is_refused() -> None:
    png = bytearray(card_png(card_document()))
    png[45] ^= 0xFF  # inside the IDAT data, after its length and type
    with pytest.raises(FileFormatError, match="CRC"):
        read_png_card(bytes(png), "bad.png")
