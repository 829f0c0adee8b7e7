"""The knowledge bases one project can see, and how a KB name is looked up.

A cross-KB reference or a node's KB selector names a KB by the project's reference id,
by ``kb_id``, or by a display name. Lookup goes tier by tier and stops at the first tier
that matches anything: reference id, then ``kb_id``, then the project's aliases (the
``name`` of a ``knowledgeBaseReferences`` item), then ``kb_displayName`` of every visible
KB. Several matches in a tier are returned together; the caller reports the ambiguity.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.knowledge_base import KnowledgeBase

Scope = Literal["local", "global"]


@dataclass
class LoadedKB:
    """A KB as loaded for a project: the file's content and where it came from."""

    kb: KnowledgeBase
    folder: Path
    scope: Scope
    reference_ids: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()

    @property
    def kb_id(self) -> str:
        return self.kb.kb_id


@dataclass
class KnowledgeCatalog:
    """Every KB a project sees, in the order of its ``knowledgeBaseReferences``."""

    bases: list[LoadedKB] = field(default_factory=list)

    @classmethod
    def of(cls, kbs: Iterable[KnowledgeBase], scope: Scope = "local") -> KnowledgeCatalog:
        """A catalog of in-memory KBs (tests, the activation test panel)."""
        return cls([LoadedKB(kb=kb, folder=Path(), scope=scope) for kb in kbs])

    def get(self, kb_id: str) -> LoadedKB | None:
        for loaded in self.bases:
            if loaded.kb_id == kb_id:
                return loaded
        return None

    def knowledge_bases(self) -> list[KnowledgeBase]:
        return [loaded.kb for loaded in self.bases]

    def find(self, key: str) -> list[LoadedKB]:
        """KBs named ``key``: the first non-empty tier of the lookup order above."""
        tiers: Sequence[list[LoadedKB]] = (
            [b for b in self.bases if key in b.reference_ids],
            [b for b in self.bases if b.kb_id == key],
            [b for b in self.bases if key in b.aliases],
            [b for b in self.bases if b.kb.kb_displayName == key],
        )
        for tier in tiers:
            if tier:
                return tier
        return []

    def entries(self) -> Iterable[tuple[KnowledgeBase, CAIU]]:
        for loaded in self.bases:
            for entry in loaded.kb.entries:
                yield loaded.kb, entry
