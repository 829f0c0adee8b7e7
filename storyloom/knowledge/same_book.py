"""One book is one book: when two knowledge bases hold the same lore, and which KB here a
card's embedded book is.

SillyTavern writes a book in two shapes: a world file (``worlds/<name>.json``) and a
card's ``character_book``, which it makes from the world when a card is exported. The
two differ in the raw copy of each entry (``extensions.sillytavern``) and in the times
they were written, so the entries' own fingerprint tells them apart; the lore does not.
The SillyTavern move-in, a card's upload and the "Bind a book…" lists all decide with
these functions, so a card brought in any way links to the world it came with instead
of storing a second copy, and the lists show each book once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from storyloom.knowledge.card_knowledge import CHARACTER_DEFINITION, CHARACTER_TAG_PREFIX
from storyloom.knowledge.catalog import LoadedKB
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.sillytavern.character import CharacterDefinition

WorldNamed = Callable[[str], KnowledgeBase | None]
"""The KB of the world a card's ``extensions.world`` names (None: no such world here)."""


def lore_fingerprint(kb: KnowledgeBase) -> str:
    """A hash of a KB's entries as lore: every field but the times they were written and
    SillyTavern's raw copy of the entry (``extensions.sillytavern``), whose shape differs
    between a world file and a card's book made from it."""
    entries = []
    for entry in kb.entries:
        data = entry.model_dump(mode="json", by_alias=True)
        extensions = data.get("extensions")
        if isinstance(extensions, dict):
            extensions.pop("sillytavern", None)
        meta = data.get("management_metadata")
        if isinstance(meta, dict):
            meta.pop("created_at", None)
            meta.pop("updated_at", None)
        entries.append(data)
    return text_digest(entries)


def text_digest(value: Any) -> str:
    """A SHA-256 of ``value`` as canonical JSON (keys sorted)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def book_key(kb: KnowledgeBase) -> str:
    """What makes two KBs one book in a list: their lore; an empty KB is only itself
    (two new, empty books are not the same book)."""
    return f"lore:{lore_fingerprint(kb)}" if kb.entries else f"kb:{kb.kb_id}"


class LoreIndex:
    """The KBs here by their lore (the first KB of each lore wins)."""

    def __init__(self, bases: Iterable[KnowledgeBase] = ()) -> None:
        self._by_lore: dict[str, KnowledgeBase] = {}
        for kb in bases:
            self.add(kb)

    def add(self, kb: KnowledgeBase) -> None:
        if kb.entries:
            self._by_lore.setdefault(lore_fingerprint(kb), kb)

    def find(self, book: KnowledgeBase) -> KnowledgeBase | None:
        """The KB here whose entries are ``book``'s lore, when there is one."""
        if not book.entries:
            return None
        return self._by_lore.get(lore_fingerprint(book))


def card_book_here(
    card: CharacterDefinition | None,
    book: KnowledgeBase | None,
    *,
    world_named: WorldNamed,
    lore: LoreIndex,
) -> KnowledgeBase | None:
    """The KB here that is the card's own book: the world its ``extensions.world`` names,
    else the KB with the same lore (a world file the card was made from, or the card's
    book imported before); None: the book is new here."""
    if book is None:
        return None
    world = card.extensions.get("world") if card is not None else None
    if isinstance(world, str) and world:
        # SillyTavern binds a card to its world by name: the world file is what it
        # reads, the embedded book only the copy the card carries for sharing (the
        # two often differ in a default, as Seraphina's Eldoria does).
        named = world_named(world)
        if named is not None:
            return named
    return lore.find(book)


def bindable_books(bases: Sequence[LoadedKB]) -> list[LoadedKB]:
    """What a "Bind a book…" list offers, in the catalog's order: one entry per distinct
    book (:func:`book_key`; a world wins over a card's copy of it, else the first), and
    neither a card's own book (tagged ``character:<name>``: it is shown under its
    character, and scanned in its chats already) nor a "· character" definition KB of
    an older import (not lore)."""
    chosen: dict[str, LoadedKB] = {}
    for loaded in bases:
        tags = loaded.kb.tags
        if CHARACTER_DEFINITION in tags:
            continue
        key = book_key(loaded.kb)
        if key not in chosen or (_card_copy(chosen[key].kb) and not _card_copy(loaded.kb)):
            chosen[key] = loaded
    kept = {id(b) for b in chosen.values() if not _card_copy(b.kb)}
    return [b for b in bases if id(b) in kept]


def _card_copy(kb: KnowledgeBase) -> bool:
    return any(tag.startswith(CHARACTER_TAG_PREFIX) for tag in kb.tags)
