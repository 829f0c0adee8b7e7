"""PNG chunks: read them with CRC checks, read and write the text chunks cards live in.

Character cards keep their JSON, base64-encoded, in ``tEXt`` chunks (keyword ``chara``
for V2, ``ccv3`` for V3). Other tools use ``zTXt`` (deflated) and ``iTXt`` (UTF-8, maybe
deflated); they are read too. A file that is not a whole, well-formed PNG is refused with
:class:`PngError` saying why, so a half-downloaded card never imports as something else.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Literal

SIGNATURE = b"\x89PNG\r\n\x1a\n"
TEXT_CHUNK_TYPES = (b"tEXt", b"zTXt", b"iTXt")
# A card's JSON is rarely above a few MB; this bounds what a deflated text chunk may
# expand to, so a crafted chunk cannot exhaust memory.
MAX_INFLATED_TEXT = 64 * 1024 * 1024
_MAX_CHUNK_LENGTH = 2**31 - 1


class PngError(ValueError):
    """The bytes are not a complete, valid PNG (or a text chunk is malformed)."""


@dataclass(frozen=True)
class PngChunk:
    type: bytes
    data: bytes

    def encode(self) -> bytes:
        crc = zlib.crc32(self.type + self.data) & 0xFFFFFFFF
        return struct.pack(">I", len(self.data)) + self.type + self.data + struct.pack(">I", crc)


@dataclass(frozen=True)
class TextChunk:
    """A decoded text chunk: its keyword, its text and which chunk type held it."""

    keyword: str
    text: str
    kind: Literal["tEXt", "zTXt", "iTXt"]


def is_png(data: bytes) -> bool:
    return data.startswith(SIGNATURE)


def read_chunks(data: bytes) -> list[PngChunk]:
    """Every chunk up to ``IEND``, CRCs checked; bytes after ``IEND`` are ignored."""
    if not is_png(data):
        raise PngError("not a PNG file (the 8-byte PNG signature is missing)")
    chunks: list[PngChunk] = []
    offset = len(SIGNATURE)
    while True:
        if offset + 8 > len(data):
            raise PngError(f"truncated: the file ends at byte {len(data)} before the IEND chunk")
        (length,) = struct.unpack_from(">I", data, offset)
        chunk_type = data[offset + 4 : offset + 8]
        if length > _MAX_CHUNK_LENGTH:
            raise PngError(f"chunk at byte {offset} declares an impossible length {length}")
        if not chunk_type.isalpha() or not chunk_type.isascii():
            raise PngError(f"chunk at byte {offset} has an invalid type {chunk_type!r}")
        end = offset + 8 + length + 4
        if end > len(data):
            name = chunk_type.decode("ascii")
            raise PngError(f"truncated: the {name} chunk at byte {offset} runs past the end")
        body = data[offset + 8 : offset + 8 + length]
        (crc,) = struct.unpack_from(">I", data, offset + 8 + length)
        if zlib.crc32(chunk_type + body) & 0xFFFFFFFF != crc:
            name = chunk_type.decode("ascii")
            raise PngError(f"the {name} chunk at byte {offset} is corrupt (CRC mismatch)")
        chunks.append(PngChunk(chunk_type, body))
        offset = end
        if chunk_type == b"IEND":
            break
    if chunks[0].type != b"IHDR":
        raise PngError("the first chunk is not IHDR")
    return chunks


def encode_png(chunks: list[PngChunk]) -> bytes:
    return SIGNATURE + b"".join(chunk.encode() for chunk in chunks)


def _inflate(data: bytes, what: str, limit: int) -> bytes:
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, limit)
    except zlib.error as exc:
        raise PngError(f"{what}: the compressed text is corrupt ({exc})") from None
    if inflater.unconsumed_tail:
        raise PngError(f"{what}: the text expands past {limit} bytes")
    return out


def decode_text_chunk(chunk: PngChunk, max_inflated: int = MAX_INFLATED_TEXT) -> TextChunk:
    """Decode a ``tEXt``, ``zTXt`` or ``iTXt`` chunk."""
    keyword_bytes, sep, rest = chunk.data.partition(b"\0")
    kind = chunk.type.decode("ascii")
    if not sep or not keyword_bytes:
        raise PngError(f"a {kind} chunk has no keyword")
    keyword = keyword_bytes.decode("latin-1")
    what = f"{kind} chunk {keyword!r}"
    if chunk.type == b"tEXt":
        return TextChunk(keyword, rest.decode("latin-1"), "tEXt")
    if chunk.type == b"zTXt":
        if not rest or rest[0] != 0:
            raise PngError(f"{what}: unknown compression method")
        return TextChunk(keyword, _inflate(rest[1:], what, max_inflated).decode("latin-1"), "zTXt")
    if chunk.type == b"iTXt":
        if len(rest) < 2:
            raise PngError(f"{what}: truncated header")
        compressed, method = rest[0], rest[1]
        _language, sep1, rest = rest[2:].partition(b"\0")
        _translated, sep2, text = rest.partition(b"\0")
        if not (sep1 and sep2):
            raise PngError(f"{what}: truncated header")
        if compressed:
            if method != 0:
                raise PngError(f"{what}: unknown compression method")
            text = _inflate(text, what, max_inflated)
        try:
            return TextChunk(keyword, text.decode("utf-8"), "iTXt")
        except UnicodeDecodeError:
            raise PngError(f"{what}: the text is not UTF-8") from None
    raise PngError(f"{kind} is not a text chunk")


def text_chunks(chunks: list[PngChunk]) -> list[TextChunk]:
    return [decode_text_chunk(c) for c in chunks if c.type in TEXT_CHUNK_TYPES]


def text_chunk(keyword: str, text: str) -> PngChunk:
    """A ``tEXt`` chunk; the text must be Latin-1 (a card's base64 always is)."""
    if not 1 <= len(keyword) <= 79:
        raise PngError("a text chunk keyword must be 1 to 79 characters")
    try:
        body = keyword.encode("latin-1") + b"\0" + text.encode("latin-1")
    except UnicodeEncodeError:
        raise PngError(f"text chunk {keyword!r}: tEXt holds Latin-1 text only") from None
    return PngChunk(b"tEXt", body)


def _keyword_of(chunk: PngChunk) -> str:
    return chunk.data.partition(b"\0")[0].decode("latin-1")


def replace_text_chunks(png: bytes, texts: list[tuple[str, str]]) -> bytes:
    """``png`` with every text chunk named like one of ``texts`` (any case) removed and
    ``texts`` added as ``tEXt`` chunks just before ``IEND``, in order."""
    chunks = read_chunks(png)
    names = {keyword.lower() for keyword, _ in texts}
    kept = [
        c for c in chunks if not (c.type in TEXT_CHUNK_TYPES and _keyword_of(c).lower() in names)
    ]
    new = [text_chunk(keyword, text) for keyword, text in texts]
    return encode_png([*kept[:-1], *new, kept[-1]])


def remove_text_chunks(png: bytes, keywords: set[str]) -> bytes:
    """``png`` without the text chunks named ``keywords`` (any case)."""
    names = {k.lower() for k in keywords}
    chunks = read_chunks(png)
    return encode_png(
        [c for c in chunks if not (c.type in TEXT_CHUNK_TYPES and _keyword_of(c).lower() in names)]
    )


def blank_png(width: int = 1, height: int = 1, rgb: tuple[int, int, int] = (128, 96, 160)) -> bytes:
    """A small solid-colour RGB PNG: an avatar for cards made without an image."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    row = b"\0" + bytes(rgb) * width
    pixels = zlib.compress(row * height)
    return encode_png(
        [PngChunk(b"IHDR", header), PngChunk(b"IDAT", pixels), PngChunk(b"IEND", b"")]
    )
