"""Which of a book's entities a text names: titles and aliases, any script.

Role A's intent analysis without an agent LLM (seed 002 意图分析): the entities a scene
is about are the ones its prompt and outline name. One Aho-Corasick automaton holds
every name of every entity, so matching costs one pass over the text however many
entities the book has. Latin names must stand as whole words ("Ann" is not found in
"Anna"); Chinese names have no word boundaries and match anywhere. Where names overlap
the longest wins ("Lin Feng" over "Lin").
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from storyloom.writing.book_store import Resource

# pyahocorasick ships no type information; loading it this way keeps mypy strict quiet.
ahocorasick: Any = importlib.import_module("ahocorasick")

MAX_NAME_CHARS = 200
"""Longer "names" are not names (and pyahocorasick's C code dislikes huge keys)."""


@dataclass(frozen=True)
class EntityMention:
    start: int
    end: int
    """Exclusive end offset in the (case-folded) text."""
    name: str
    paths: tuple[str, ...]
    """Every entity that goes by ``name`` (an alias two entities share names both)."""


def _word_char(ch: str) -> bool:
    return ch.isascii() and ch.isalnum()


class EntityMatcher:
    """Finds entity names in text. Built once per set of entities (immutable)."""

    def __init__(self, entities: Iterable[Resource]) -> None:
        by_name: dict[str, list[str]] = {}
        for entity in sorted(entities, key=lambda r: r.path):
            for name in (entity.title, *entity.aliases):
                key = name.strip().casefold()
                if not 2 <= len(key) <= MAX_NAME_CHARS:
                    continue  # one letter or one character would match everywhere
                owners = by_name.setdefault(key, [])
                if entity.path not in owners:
                    owners.append(entity.path)
        self._automaton: Any = None
        if by_name:
            automaton = ahocorasick.Automaton()
            for key, owners in sorted(by_name.items()):
                automaton.add_word(key, (key, tuple(owners)))
            automaton.make_automaton()
            self._automaton = automaton

    def mentions(self, text: str) -> list[EntityMention]:
        """Non-overlapping name occurrences, in text order; the longest name wins."""
        if self._automaton is None or not text:
            return []
        folded = text.casefold()
        found: list[EntityMention] = []
        for end, (key, owners) in self._automaton.iter(folded):
            start = end - len(key) + 1
            if _word_char(key[0]) and start > 0 and _word_char(folded[start - 1]):
                continue
            if _word_char(key[-1]) and end + 1 < len(folded) and _word_char(folded[end + 1]):
                continue
            found.append(EntityMention(start, end + 1, key, owners))
        found.sort(key=lambda m: (m.start, -(m.end - m.start), m.name))
        kept: list[EntityMention] = []
        reach = -1
        for mention in found:
            if mention.start >= reach:
                kept.append(mention)
                reach = mention.end
        return kept

    def match(self, text: str) -> list[str]:
        """The entities ``text`` names, in order of first mention."""
        out: dict[str, None] = {}
        for mention in self.mentions(text):
            for path in mention.paths:
                out.setdefault(path, None)
        return list(out)

    def names_in(self, texts: Sequence[str]) -> frozenset[str]:
        """Every entity any of ``texts`` names."""
        return frozenset(path for text in texts for path in self.match(text))
