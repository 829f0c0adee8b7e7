"""SillyTavern lore books: the world-info file and the book embedded in a card.

Two forms of the same book:

- a world-info file (``data/<user>/worlds/*.json``): ``{"entries": {"<uid>": entry}}``
  plus optional book fields (``name``, ``description``, ``originalData``...), each entry
  as in :mod:`.world_info_entry`;
- a card-embedded book (``data.character_book``): ``{"name", "entries": [entry...]}``
  in the Character Card V2 entry shape (:mod:`.character_book`).

``originalData``: a world-info file made from a card book carries that book, as it was
imported, in ``originalData``. SillyTavern reads only ``entries`` when it loads such a
file and rebuilds a card's book from ``entries`` when it exports the card; its attempt
to keep ``originalData`` in step matches entries by ``uid``, which card-book entries do
not have, so in practice ``originalData`` goes stale.

This module checks the shape of a book and holds SillyTavern's rules for its entries'
uids; what a book becomes in storyloom is :mod:`storyloom.knowledge.st_world_info`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from storyloom.core.errors import FieldProblem, FileFormatError

BookFormat = Literal["world_info", "character_book"]
WORLD_INFO: BookFormat = "world_info"
CHARACTER_BOOK: BookFormat = "character_book"


def world_info_entries(data: Any, path: Path) -> dict[str, Any] | list[Any]:
    """The ``entries`` of a parsed world-info file: an object keyed by uid, or a list when
    the file is a card book saved on its own (a "lorebook" download).

    Raises :class:`FileFormatError` when ``data`` is not a world-info file.
    """
    if not isinstance(data, dict) or "entries" not in data:
        raise FileFormatError(path, [FieldProblem("entries", "missing: not a world info file")])
    entries = data["entries"]
    if not isinstance(entries, dict | list):
        reason = f"must be an object of entries keyed by uid, not {type(entries).__name__}"
        raise FileFormatError(path, [FieldProblem("entries", reason)])
    return entries


def character_book_entries(book: Any, path: Path, field: str = "data.character_book") -> list[Any]:
    """The ``entries`` of a card's book (none when it has no ``entries``).

    ``field`` is where the book sits in the file, for the problems of a
    :class:`FileFormatError` raised when the book or its entries have the wrong shape.
    """
    if not isinstance(book, dict):
        raise FileFormatError(path, [FieldProblem(field, "must be an object")])
    entries = book.get("entries", [])
    if not isinstance(entries, list):
        prefix = f"{field}." if field else ""
        raise FileFormatError(path, [FieldProblem(f"{prefix}entries", "must be a list")])
    return entries


def is_book_entry(raw: Mapping[str, Any]) -> bool:
    """Whether an entry has the card-book shape rather than the world-info one."""
    if "key" in raw or "uid" in raw:
        return False
    return "keys" in raw or "insertion_order" in raw or "enabled" in raw


def int_uid(value: Any) -> int | None:
    """A uid (or a key of ``entries``) as a number; None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


class UidAllocator:
    """SillyTavern's rule for a new entry: the smallest unused non-negative uid."""

    def __init__(self, taken: Iterable[Any]) -> None:
        self._taken = {n for n in (int_uid(v) for v in taken) if n is not None}

    def take(self) -> int:
        uid = 0
        while uid in self._taken:
            uid += 1
        self._taken.add(uid)
        return uid


def ordered_book(book: Mapping[str, Any], key_order: Any, entries: Any) -> dict[str, Any]:
    """A copy of ``book``'s fields with ``entries``, in ``key_order`` (a file's own order,
    so a book written back diffs cleanly against the one read); unlisted keys follow."""
    order = [k for k in key_order if isinstance(k, str)] if isinstance(key_order, list) else []
    if "entries" not in order:
        order.insert(0, "entries")
    out: dict[str, Any] = {}
    for key in order:
        if key == "entries":
            out["entries"] = entries
        elif key in book:
            out[key] = copy.deepcopy(book[key])
    for key, value in book.items():
        if key not in out:
            out[key] = copy.deepcopy(value)
    return out
