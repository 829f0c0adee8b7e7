"""CHARX: a zip holding ``card.json`` (a V3 card) and the files its assets point to.

A V3 asset whose ``uri`` is ``embeded://<path>`` (the spec's spelling) names a member of
the zip. Reading is defensive, since a card is a file from strangers: members with
absolute paths, drive letters, ``..`` segments or symlink modes refuse the archive, as do
encrypted members, too many members, a member or a total past the size limits, and a
member that expands more than :attr:`CharxLimits.max_ratio` times (a zip bomb). Sizes
are checked while decompressing, not trusted from the headers.
"""

from __future__ import annotations

import io
import json
import stat
import zipfile
import zlib
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storyloom.core.errors import FieldProblem, FileFormatError
from storyloom.sillytavern.untrusted_json import UntrustedJsonError, loads_untrusted

CARD_MEMBER = "card.json"
EMBEDDED_PREFIXES = ("embeded://", "embedded://")
_READ_BLOCK = 1 << 16
# Longest file name (one path segment) common file systems take, and a whole member name.
MAX_SEGMENT_BYTES = 255
MAX_NAME_BYTES = 1024
#: What reading one member of a hostile zip can raise: a corrupt deflate stream
#: (``zlib.error``), a bad CRC or header (``BadZipFile``), a truncated member
#: (``EOFError``), an encrypted one (``RuntimeError``), an unsupported compression method
#: or zip version (``NotImplementedError``), an empty or odd one (``ValueError``, ``OSError``).
ZIP_MEMBER_ERRORS: tuple[type[Exception], ...] = (
    zipfile.BadZipFile,
    zlib.error,
    EOFError,
    OSError,
    ValueError,
    RuntimeError,
    NotImplementedError,
)
#: What opening a hostile zip can raise (a version too new is found here already).
ZIP_OPEN_ERRORS: tuple[type[Exception], ...] = (zipfile.LargeZipFile, *ZIP_MEMBER_ERRORS)


@dataclass(frozen=True)
class CharxLimits:
    max_members: int = 2000
    max_member_bytes: int = 64 * 1024 * 1024
    max_total_bytes: int = 512 * 1024 * 1024
    max_ratio: float = 200.0
    # Small members compress absurdly well when they are runs of one byte; the ratio
    # check starts above this size.
    ratio_floor_bytes: int = 1024 * 1024


@dataclass
class CharxContents:
    card: Any
    files: dict[str, bytes]
    warnings: list[str] = field(default_factory=list)

    def asset(self, uri: str) -> bytes | None:
        """The bytes an ``embeded://`` asset uri points to, if the archive holds them."""
        for prefix in EMBEDDED_PREFIXES:
            if uri.startswith(prefix):
                return self.files.get(uri.removeprefix(prefix).lstrip("/"))
        return None


def is_zip(data: bytes) -> bool:
    return data[:4] in (b"PK\x03\x04", b"PK\x05\x06")


def _unsafe_name(name: str) -> str | None:
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return "is an absolute path"
    if ".." in parts:
        return "climbs out of the archive with '..'"
    if "\0" in name:
        return "has a NUL character in its name"
    return None


def _check_member(info: zipfile.ZipInfo, limits: CharxLimits) -> str | None:
    reason = _unsafe_name(info.filename)
    if reason:
        return reason
    mode = info.external_attr >> 16
    if info.create_system == 3 and stat.S_ISLNK(mode):
        return "is a symbolic link"
    if info.flag_bits & 0x1:
        return "is encrypted"
    if info.file_size > limits.max_member_bytes:
        return f"expands to {info.file_size} bytes (limit {limits.max_member_bytes})"
    if info.file_size > limits.ratio_floor_bytes and info.file_size > limits.max_ratio * max(
        info.compress_size, 1
    ):
        return f"compresses {info.file_size / max(info.compress_size, 1):.0f}:1 (a zip bomb?)"
    return None


def _read_member(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, limits: CharxLimits, budget: int
) -> bytes:
    cap = min(limits.max_member_bytes, budget)
    out = bytearray()
    with archive.open(info) as handle:
        while True:
            block = handle.read(_READ_BLOCK)
            if not block:
                break
            out += block
            if len(out) > cap:
                raise ValueError(f"expands past {cap} bytes")
            if len(out) > limits.ratio_floor_bytes and len(out) > limits.max_ratio * max(
                info.compress_size, 1
            ):
                raise ValueError("expands far more than its compressed size (a zip bomb?)")
    return bytes(out)


def member_layout_problems(names: Collection[str]) -> list[tuple[str, str]]:
    """(name, reason) for member names that could not all be written as files: a member
    that is also another's folder (``assets/x`` and ``assets/x/y``), empty or ``.``
    segments, and names past what file systems take (:data:`MAX_SEGMENT_BYTES` a
    segment, :data:`MAX_NAME_BYTES` in all). Checked before anything is written, so an
    import fails whole. ``names`` are file members (no trailing ``/``)."""
    problems: list[tuple[str, str]] = []
    present = set(names)
    for name in names:
        segments = name.split("/")
        if any(segment in ("", ".") for segment in segments):
            problems.append((name, "has an empty or '.' path segment"))
        elif len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
            problems.append((name[:80], f"name longer than {MAX_NAME_BYTES} bytes"))
        elif any(len(s.encode("utf-8", "surrogatepass")) > MAX_SEGMENT_BYTES for s in segments):
            reason = f"a name segment is longer than {MAX_SEGMENT_BYTES} bytes"
            problems.append((name[:80], reason))
        for end in range(1, len(segments)):
            folder = "/".join(segments[:end])
            if folder in present:
                problems.append((name[:80], f"sits inside {folder!r}, which is a file"))
                break
    return problems


def read_charx(data: bytes, path: Path | str, limits: CharxLimits | None = None) -> CharxContents:
    """The card and files of a CHARX archive, or :class:`FileFormatError` saying why not."""
    path = Path(path)
    limits = limits or CharxLimits()
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except ZIP_OPEN_ERRORS as exc:
        raise FileFormatError(path, [FieldProblem("zip", f"not a readable zip: {exc}")]) from None
    with archive:
        members = archive.infolist()
        if len(members) > limits.max_members:
            too_many = f"has {len(members)} members (limit {limits.max_members})"
            raise FileFormatError(path, [FieldProblem("zip", too_many)])
        problems = [
            FieldProblem(f"zip:{info.filename}", reason)
            for info in members
            if (reason := _check_member(info, limits))
        ]
        if problems:
            raise FileFormatError(path, problems)
        files: dict[str, bytes] = {}
        budget = limits.max_total_bytes
        for info in members:
            if info.is_dir():
                continue
            name = info.filename.replace("\\", "/").removeprefix("./")
            try:
                content = _read_member(archive, info, limits, budget)
            except ZIP_MEMBER_ERRORS as exc:
                raise FileFormatError(
                    path, [FieldProblem(f"zip:{info.filename}", f"unreadable: {exc}")]
                ) from None
            budget -= len(content)
            files[name] = content
    layout = member_layout_problems(list(files))
    if layout:
        raise FileFormatError(path, [FieldProblem(f"zip:{n}", r) for n, r in layout])
    if CARD_MEMBER not in files:
        raise FileFormatError(path, [FieldProblem(f"zip:{CARD_MEMBER}", "missing")])
    try:
        card = loads_untrusted(files[CARD_MEMBER])
    except UntrustedJsonError as exc:
        where = f"zip:{CARD_MEMBER}" + (f":{exc.where}" if exc.where else "")
        raise FileFormatError(path, [FieldProblem(where, exc.reason)]) from None
    return CharxContents(card=card, files=files)


def build_charx(card: Any, files: dict[str, bytes] | None = None) -> bytes:
    """A CHARX archive of ``card`` (written as ``card.json``) and ``files`` by path."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(CARD_MEMBER, json.dumps(card, ensure_ascii=False, indent=2))
        for name, content in (files or {}).items():
            if _unsafe_name(name):
                raise ValueError(f"{name!r} is not a safe path inside the archive")
            archive.writestr(name, content)
    return buffer.getvalue()
