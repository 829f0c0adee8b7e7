"""Chat backgrounds: images shown behind a chat (SillyTavern's Backgrounds).

The images live in the data directory's ``backgrounds/`` folder, shared by every project
as SillyTavern shares them between chats; a chat names its own in
``ConversationSettings.background`` (SillyTavern's ``chat_metadata.custom_background``,
read by :func:`background_from_chat_metadata`).

A name comes from a browser or a stranger's folder, so it is only ever a plain file name
in that folder: no separators, no ``..``, no hidden file, no link; and a file goes out
only when its bytes are an image (:func:`~storyloom.core.image_kind.image_type`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from storyloom.core.atomic_io import atomic_write_bytes
from storyloom.core.errors import FieldProblem, InvalidInput, NotFound
from storyloom.core.image_kind import image_type

BACKGROUNDS_DIR = "backgrounds"
MAX_NAME_BYTES = 200
_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".gif", ".webp"})
_CSS_URL = re.compile(r"""^\s*url\(\s*(["']?)(.*?)\1\s*\)\s*$""", re.DOTALL)


def check_background_name(name: str) -> str:
    """``name`` when it is a plain image file name; :class:`InvalidInput` otherwise."""
    bad = (
        not name
        or name != name.strip()
        or any(c in name for c in "/\\\0:")
        or name.startswith(".")
        or any(ord(c) < 32 for c in name)
        or len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES
        or Path(name).suffix.lower() not in _SUFFIXES
    )
    if bad:
        reason = (
            f"{name!r} is not a background's file name (a plain .png, .jpg, .gif or .webp "
            "name, without folders)"
        )
        raise InvalidInput(f"background: {reason}", [FieldProblem("name", reason)])
    return name


class ChatBackgrounds:
    """The images in ``<home>/backgrounds``."""

    def __init__(self, home: Path) -> None:
        self.folder = home / BACKGROUNDS_DIR

    def names(self) -> list[str]:
        """The images' file names, sorted (files that are not images are left out)."""
        if not self.folder.is_dir():
            return []
        return sorted(
            p.name
            for p in self.folder.iterdir()
            if p.suffix.lower() in _SUFFIXES
            and not p.name.startswith(".")
            and p.is_file()
            and not p.is_symlink()
        )

    def path(self, name: str) -> Path:
        """The file called ``name``; :class:`NotFound` when there is none, or it is a link
        (which could point anywhere)."""
        path = self.folder / check_background_name(name)
        if path.is_symlink() or not path.is_file():
            raise NotFound(f"no background {name!r}")
        return path

    def read(self, name: str) -> tuple[bytes, str]:
        """The image's bytes and media type; :class:`NotFound` when it is not an image."""
        data = self.path(name).read_bytes()
        media_type = image_type(data)
        if media_type is None:
            raise NotFound(f"background {name!r} is not a PNG, JPEG, GIF or WebP image")
        return data, media_type

    def save(self, name: str, data: bytes) -> bool:
        """Store ``data`` (an image, checked by content) as ``name``; returns whether
        anything changed (the same image again writes nothing)."""
        check_background_name(name)
        media_type = image_type(data)
        if media_type is None:
            reason = "not a PNG, JPEG, GIF or WebP image"
            raise InvalidInput(f"{name}: {reason}", [FieldProblem("file", reason)])
        path = self.folder / name
        if path.is_symlink():
            raise InvalidInput(f"{name}: a link is there; it is left alone")
        if path.is_file() and path.read_bytes() == data:
            return False
        atomic_write_bytes(path, data)
        return True


def import_st_backgrounds(folder: Path, home: Path) -> int:
    """Copy the images of a SillyTavern ``backgrounds/`` folder into ``<home>/backgrounds``
    under their own names. Files that are not images by content (SillyTavern also keeps
    videos there), links and odd names are left out. Returns how many images were added
    or changed: a second run returns 0."""
    if not folder.is_dir():
        return 0
    backgrounds = ChatBackgrounds(home)
    changed = 0
    for path in sorted(folder.iterdir()):
        if path.is_symlink() or not path.is_file():
            continue
        try:
            name = check_background_name(path.name)
            data = path.read_bytes()
            if image_type(data) is None:
                continue
            changed += backgrounds.save(name, data)
        except (InvalidInput, OSError):
            continue
    return changed


def background_from_chat_metadata(metadata: Mapping[str, Any]) -> str | None:
    """The background a SillyTavern chat shows: ``chat_metadata.custom_background``
    (``url("backgrounds/<encoded name>")``) as the file name in ``backgrounds/``; None when
    the chat has none, or names an image outside that folder (a web address)."""
    value = metadata.get("custom_background")
    if not isinstance(value, str):
        return None
    match = _CSS_URL.match(value)
    url = match.group(2) if match else value.strip()
    url = unquote(url).replace("\\", "/")
    prefix, _, name = url.lstrip("/").rpartition("/")
    if prefix.rstrip("/").rsplit("/", 1)[-1] != BACKGROUNDS_DIR:
        return None
    try:
        return check_background_name(name)
    except InvalidInput:
        return None


def chat_metadata_background(name: str) -> str:
    """``chat_metadata.custom_background`` for a chat showing the image ``name``, as
    SillyTavern writes it (``url("backgrounds/<name, URI-encoded>")``)."""
    return f'url("{BACKGROUNDS_DIR}/{quote(check_background_name(name), safe="")}")'


def export_st_backgrounds(home: Path, folder: Path) -> int:
    """Copy the images of ``<home>/backgrounds`` into a SillyTavern ``backgrounds/``
    folder; returns how many."""
    backgrounds = ChatBackgrounds(home)
    names = backgrounds.names()
    for name in names:
        atomic_write_bytes(folder / name, backgrounds.path(name).read_bytes())
    return len(names)
