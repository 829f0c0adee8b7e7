"""PNG chunk reading and writing with the standard library only."""

from __future__ import annotations

import struct
import zlib

import pytest

from storyloom.sillytavern.png_chunks import (
    PngChunk,
    PngError,
    blank_png,
    decode_text_chunk,
    encode_png,
    read_chunks,
    remove_text_chunks,
    replace_text_chunks,
    text_chunk,
    text_chunks,
)


def test_blank_png_is_signature_ihdr_idat_iend_with_valid_crcs() -> None:
    chunks = read_chunks(blank_png(5, 3))
    assert [c.type for c in chunks] == [b"IHDR", b"IDAT", b"IEND"]
    assert struct.unpack(">II", chunks[0].data[:8]) == (5, 3)


def test_chunks_encode_back_to_the_same_bytes() -> None:
    png = replace_text_chunks(blank_png(), [("chara", "abc")])
    assert encode_png(read_chunks(png)) == png


def test_text_chunks_of_all_three_kinds_are_decoded() -> None:
    ztxt = PngChunk(b"zTXt", b"ztext\0\0" + zlib.compress(b"squeezed"))
    itxt = PngChunk(b"iTXt", b"itext\0\0\0en\0Titel\0" + "Grüße 你好".encode())
    itxt_z = PngChunk(b"iTXt", b"itextz\0\x01\0\0\0" + zlib.compress("压缩".encode()))
    chunks = read_chunks(blank_png())
    png = encode_png([chunks[0], text_chunk("plain", "Tëxt"), ztxt, itxt, itxt_z, *chunks[1:]])
    texts = {t.keyword: (t.text, t.kind) for t in text_chunks(read_chunks(png))}
    assert texts == {
        "plain": ("Tëxt", "tEXt"),
        "ztext": ("squeezed", "zTXt"),
        "itext": ("Grüße 你好", "iTXt"),
        "itextz": ("压缩", "iTXt"),
    }


def test_replace_puts_new_text_before_iend_and_drops_same_named_chunks_in_any_case() -> None:
    png = replace_text_chunks(blank_png(), [("CHARA", "old"), ("Comment", "keep")])
    png = replace_text_chunks(png, [("chara", "new")])
    chunks = read_chunks(png)
    assert [(t.keyword, t.text) for t in text_chunks(chunks)] == [
        ("Comment", "keep"),
        ("chara", "new"),
    ]
    assert chunks[-1].type == b"IEND"
    assert text_chunks(read_chunks(remove_text_chunks(png, {"Chara"}))) == [text_chunks(chunks)[0]]


def test_missing_signature_is_refused() -> None:
    with pytest.raises(PngError, match="signature"):
        read_chunks(b"GIF89a....")


def test_file_cut_inside_a_chunk_is_refused_as_truncated() -> None:
    with pytest.raises(PngError, match="truncated"):
        read_chunks(blank_png()[:30])


def test_file_without_iend_is_refused_as_truncated() -> None:
    png = blank_png()
    with pytest.raises(PngError, match="truncated"):
        read_chunks(png[:-12])


def test_crc_mismatch_is_refused() -> None:
    png = bytearray(blank_png())
    png[-5] ^= 1  # the last byte of IEND's CRC
    with pytest.raises(PngError, match="CRC"):
        read_chunks(bytes(png))


def test_deflated_text_expanding_past_the_limit_is_refused() -> None:
    bomb = PngChunk(b"zTXt", b"bomb\0\0" + zlib.compress(b"a" * 100_000))
    assert decode_text_chunk(bomb).text == "a" * 100_000
    with pytest.raises(PngError, match="expands"):
        decode_text_chunk(bomb, max_inflated=1000)


def test_text_chunk_refuses_non_latin1_text() -> None:
    with pytest.raises(PngError, match="Latin-1"):
        text_chunk("chara", "你好")
