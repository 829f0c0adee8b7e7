"""An entry's image in its KB folder (seed 000 section 2.2: ``content.path`` under ``media/``).

An uploaded image is stored by what it is (PNG, JPEG, GIF or WebP, found from its bytes),
named for its entry and its content so that a replaced image never reaches a browser
from its cache, and written atomically; the entry's ``content`` then names it. Reading
it back serves only what is an image by its bytes, whatever the entry's ``path`` says.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from storyloom.core.atomic_io import atomic_write_bytes
from storyloom.core.errors import FieldProblem, InvalidInput, NotFound
from storyloom.core.image_kind import IMAGE_SUFFIXES, image_type
from storyloom.knowledge.caiu import CAIU, Content
from storyloom.knowledge.knowledge_base import MEDIA_DIR, KnowledgeBase

MAX_MEDIA_BYTES = 10 * 1024 * 1024
"""The largest image an entry takes: one image goes into a prompt whole, and vision
endpoints refuse much larger ones (OpenAI's limit is 20 MB)."""


class EntryHasNoMedia(NotFound):
    """The entry names no media file, or its file is missing or no image."""


def _entry(kb: KnowledgeBase, entry_id: str) -> CAIU:
    found = next((e for e in kb.entries if e.id == entry_id), None)
    if found is None:
        raise NotFound(f"knowledge base {kb.kb_id} has no entry {entry_id}")
    return found


def _safe_stem(entry_id: str) -> str:
    """The entry id as a file-name part: anything but letters, digits, ``_`` and ``-``
    becomes ``_`` (an id is free text in a file written by hand)."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "_-") else "_" for c in entry_id)[:80]


def media_file(folder: Path, entry: CAIU) -> Path | None:
    """The entry's media file inside ``folder`` (None: the entry names none, or names one
    outside the folder)."""
    path = entry.content.path
    if not path:
        return None
    target = (folder / path).resolve()
    if not target.is_relative_to(folder.resolve()):
        return None
    return target


def store_entry_image(
    kb: KnowledgeBase, folder: Path, entry_id: str, data: bytes, filename: str
) -> tuple[KnowledgeBase, Path | None]:
    """``kb`` with entry ``entry_id`` showing the image ``data`` (uploaded as
    ``filename``), written into ``folder/media/``, and the entry's previous image (one
    this function wrote) to delete once the caller saved that KB: a crash in between
    leaves a spare file, never an entry naming a deleted one. The entry's text
    (``content.value``) stays: it is what a model without vision is sent."""
    entry = _entry(kb, entry_id)
    media_type = image_type(data)
    if media_type is None:
        raise InvalidInput(
            f"{filename}: not a PNG, JPEG, GIF or WebP image",
            [FieldProblem("file", "not a PNG, JPEG, GIF or WebP image (by its bytes)")],
        )
    if len(data) > MAX_MEDIA_BYTES:
        raise InvalidInput(
            f"{filename}: an entry's image is at most {MAX_MEDIA_BYTES // (1024 * 1024)} MB",
            [FieldProblem("file", f"larger than {MAX_MEDIA_BYTES} bytes")],
        )
    stem = _safe_stem(entry.id)
    digest = hashlib.sha256(data).hexdigest()[:16]
    relative = f"{MEDIA_DIR}/{stem}-{digest}{IMAGE_SUFFIXES[media_type]}"
    atomic_write_bytes(folder / relative, data)
    old = _stored_image(folder, entry)
    stale = old if old is not None and old != (folder / relative).resolve() else None
    content = entry.content.model_copy(update={"path": relative, "mime_type": media_type})
    return _with_content(kb, entry, content), stale


def remove_entry_image(
    kb: KnowledgeBase, folder: Path, entry_id: str
) -> tuple[KnowledgeBase, Path | None]:
    """``kb`` with entry ``entry_id`` showing no image (its text stays), and the file to
    delete once that KB is saved: the image :func:`store_entry_image` wrote for it (a
    file the entry names that storyloom did not write is left on disk).
    :class:`EntryHasNoMedia` when the entry names none."""
    entry = _entry(kb, entry_id)
    if not entry.content.path:
        raise EntryHasNoMedia(f"entry {entry_id} of {kb.kb_id} has no media file")
    # The text that stood in for the image is the entry's content again.
    content = entry.content.model_copy(update={"path": None, "mime_type": "text/plain"})
    return _with_content(kb, entry, content), _stored_image(folder, entry)


def _stored_image(folder: Path, entry: CAIU) -> Path | None:
    """The entry's image file if :func:`store_entry_image` wrote it (named for the entry,
    in ``media/``)."""
    path = media_file(folder, entry)
    if (
        path is not None
        and path.name.startswith(f"{_safe_stem(entry.id)}-")
        and path.parent == (folder / MEDIA_DIR).resolve()
    ):
        return path
    return None


def _with_content(kb: KnowledgeBase, entry: CAIU, content: Content) -> KnowledgeBase:
    updated = entry.model_copy(update={"content": content})
    entries = [updated if e.id == entry.id else e for e in kb.entries]
    return kb.model_copy(update={"entries": entries})


def read_entry_image(kb: KnowledgeBase, folder: Path, entry_id: str) -> tuple[bytes, str]:
    """The bytes and media type of entry ``entry_id``'s image; :class:`EntryHasNoMedia`
    when it names none, its file is missing, or the file is not an image."""
    entry = _entry(kb, entry_id)
    path = media_file(folder, entry)
    if path is None:
        raise EntryHasNoMedia(f"entry {entry_id} of {kb.kb_id} has no media file")
    try:
        data = path.read_bytes()
    except OSError:
        raise EntryHasNoMedia(
            f"entry {entry_id} of {kb.kb_id}: its media file {entry.content.path} is missing"
        ) from None
    media_type = image_type(data)
    if media_type is None:
        raise EntryHasNoMedia(
            f"entry {entry_id} of {kb.kb_id}: {entry.content.path} is not an image"
        )
    return data, media_type
