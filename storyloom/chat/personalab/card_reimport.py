"""A card that is already a character here: the same card again, or a changed one.

A character imported from a card keeps the card's JSON (``source_card``), so the very
same card is found by a hash of that JSON; a card of the same name with other JSON is the
same character changed. Importing either must not silently make a second character
(``Seraphina_2``): the upload asks the user (:class:`CardExists`), and a changed card can
update the character as a new version of it (:func:`update_from_card`), as the
SillyTavern move-in updates a card that changed in the user's folder.

Every door that imports a card (the Characters page, the Knowledge page, a chat's or a
group's import, ``storyloom kb import``) hands :class:`CardReimport` to the import, so one
piece of code decides: ``on_conflict`` ``ask`` (the default) stops at :class:`CardExists`
with nothing written, ``update`` makes the card a new version of the character here and
``keep_both`` a second character (``<name>_2``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, assert_never

from storyloom.chat.personalab.library import PresetLibrary
from storyloom.core.errors import Conflict
from storyloom.knowledge.card_knowledge import character_tag
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.same_book import text_digest
from storyloom.sillytavern.character import CharacterDefinition

CardSameness = Literal["identical", "changed"]
OnConflict = Literal["ask", "update", "keep_both"]


def card_digest(card: CharacterDefinition) -> str | None:
    """A hash of the card JSON a character was imported from (None: made here)."""
    return text_digest(card.source_card) if card.source_card is not None else None


def cards_here(library: PresetLibrary) -> dict[str, str]:
    """The characters here made from a card, by :func:`card_digest` (first id wins)."""
    found: dict[str, str] = {}
    for listing in library.characters():
        if listing.error is None:
            digest = card_digest(library.character(listing.id))
            if digest is not None:
                found.setdefault(digest, listing.id)
    return found


@dataclass(frozen=True)
class CardMatch:
    """The character here that a card is: the same card, or the same name changed."""

    sameness: CardSameness
    character_id: str
    name: str


def character_of_card(library: PresetLibrary, card: CharacterDefinition) -> CardMatch | None:
    """The character here that ``card`` is, when there is one."""
    digest = card_digest(card)
    same = cards_here(library).get(digest) if digest is not None else None
    if same is not None:
        return CardMatch("identical", same, library.character(same).name)
    wanted = card.name.strip().casefold()
    named = sorted(
        listing.id
        for listing in library.characters()
        if listing.error is None and listing.name.strip().casefold() == wanted
    )
    if not named:
        return None
    return CardMatch("changed", named[0], library.character(named[0]).name)


class CardExists(Conflict):
    """The card uploaded is a character here already; nothing was written. The user picks:
    open it, update it (a changed card), keep both, or cancel."""

    def __init__(self, match: CardMatch) -> None:
        self.match = match
        what = "this very card" if match.sameness == "identical" else "a card of this name"
        super().__init__(
            f"{what} is in your library already as {match.name!r} ({match.character_id}); "
            "import it again with on_conflict=update or on_conflict=keep_both"
        )


def update_from_card(
    library: PresetLibrary,
    character_id: str,
    card: CharacterDefinition,
    *,
    card_books: Sequence[str] = (),
    also_bound: Sequence[str] = (),
    unbound: Sequence[str] = (),
    tags: Sequence[str] | None = None,
) -> str:
    """The character's fields replaced by the card's, as a new version of it (its id,
    avatar and conversations stay; conversations keep the copy they started with);
    returns the new version. Its books: ``card_books`` (the card's own book here), the
    books it was bound to but ``unbound`` (the card's old book, which its new one
    replaces), then ``also_bound``."""
    old = library.character(character_id)
    kept = [k for k in old.knowledge_bases if k not in unbound]
    kbs = list(dict.fromkeys([*card_books, *kept, *also_bound]))
    new = card.model_copy(
        update={"knowledge_bases": kbs, "tags": list(tags if tags is not None else card.tags)}
    )
    return library.update_character(character_id, new, expected_version=None)


def card_target(
    library: PresetLibrary, card: CharacterDefinition, on_conflict: OnConflict
) -> str | None:
    """The character here that an imported ``card`` becomes a new version of (None: a
    new character); with ``ask``, a card that is a character here is :class:`CardExists`."""
    found = character_of_card(library, card)
    if found is None:
        return None
    match on_conflict:
        case "ask":
            raise CardExists(found)
        case "update":
            return found.character_id
        case "keep_both":
            return None
        case _:
            assert_never(on_conflict)


@dataclass(frozen=True)
class CardReimport:
    """The import's :class:`~storyloom.project.knowledge_import.CardHome`: the user's
    ``on_conflict`` for a card that is a character of ``library`` already."""

    library: PresetLibrary
    on_conflict: OnConflict = "ask"

    def place(self, card: CharacterDefinition) -> str | None:
        return card_target(self.library, card, self.on_conflict)

    def update(
        self,
        character_id: str,
        card: CharacterDefinition,
        book_id: str | None,
        existing: Sequence[KnowledgeBase],
    ) -> None:
        """The card's book replaces the book the old card brought (the KB tagged with the
        character's name); the character keeps its other books and its own tags."""
        old = self.library.character(character_id)
        unbound: list[str] = []
        if book_id is not None:
            tag = character_tag(old.name)
            unbound = [kb.kb_id for kb in existing if tag in kb.tags and kb.kb_id != book_id]
        update_from_card(
            self.library,
            character_id,
            card,
            card_books=[book_id] if book_id is not None else [],
            unbound=unbound,
            tags=list(dict.fromkeys([*card.tags, *old.tags])),
        )
