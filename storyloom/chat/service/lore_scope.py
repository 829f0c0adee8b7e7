"""Which knowledge bases a chat turn scans, and why: SillyTavern's four lore sources.

A knowledge base (KB) is in a chat's prompt only through one of these scopes:

- ``global``: the project's ``globalKnowledgeBases`` (SillyTavern's active world list),
  on in every chat of the project;
- ``character``: the books bound to the speaking character, ``knowledge_bases`` of its
  character file (``presets/characters/<id>.json``, the one the conversation's snapshot
  came from), else of the snapshot's copy of the card when that file is gone;
- ``persona``: the book bound to the persona the chat speaks as;
- ``chat``: the chat's own ``ConversationSettings.knowledge_bases``.

A KB whose ``enabled`` is false is never scanned; a kb_id that names no KB is reported,
not fatal. A KB bound through several scopes is scanned once, under the first of
global, chat, persona, character: SillyTavern likewise skips a character's, the chat's
or the persona's book when it is already global, and the persona's when it is the chat's.

Migration: a character file written before books could be bound (it has no
``knowledge_bases`` key) counts as bound to the KBs tagged ``character:<name>``, which is
how imports marked a card's own book; its "· character" definition KB is not lore and is
left out. :func:`bind_legacy_books` writes that list into such files once (the server does
it when it opens a project), so the character editor shows the binding and a save keeps it.

:meth:`LoreScope.ranks` orders the books for the scan and the budget as SillyTavern's
``getSortedEntries`` does: chat lore first, then persona lore, then global and character
lore by the insertion strategy (one list by priority, character first or global first).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from storyloom.chat.store.conversation import CharacterSnapshot, ConversationSettings
from storyloom.core.atomic_io import atomic_write_text
from storyloom.core.errors import StoryloomError
from storyloom.knowledge.activation_settings import InsertionStrategy
from storyloom.knowledge.card_knowledge import CHARACTER_DEFINITION, character_tag
from storyloom.knowledge.catalog import KnowledgeCatalog, LoadedKB

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from storyloom.chat.personalab.library import PresetLibrary
    from storyloom.chat.personalab.personas import PersonaLibrary

LoreScopeName = Literal["global", "character", "persona", "chat"]
SCOPE_PRECEDENCE: tuple[LoreScopeName, ...] = ("global", "chat", "persona", "character")
"""Which scope a KB bound several ways is counted under."""
SCAN_ORDER: tuple[LoreScopeName, ...] = ("chat", "persona", "global", "character")
"""The order books are handed to the scan: ties in priority keep it."""


@dataclass(frozen=True)
class Binding:
    """One kb_id named by one scope."""

    kb_id: str
    scope: LoreScopeName
    via: str = ""
    """The character's or persona's name ("" for global and chat)."""
    legacy: bool = False
    """A character's book found by its ``character:<name>`` tag, not a binding."""


@dataclass(frozen=True)
class ScopedKB:
    """A KB a chat scans (or would, were it enabled), with the scope that brings it in."""

    loaded: LoadedKB
    scope: LoreScopeName
    reason: str
    via: str = ""
    legacy: bool = False

    @property
    def kb_id(self) -> str:
        return self.loaded.kb_id

    @property
    def name(self) -> str:
        return self.loaded.kb.display_name


@dataclass
class LoreScope:
    """The KBs of one turn: ``active`` in scan order, ``disabled`` ones bound but off, and
    ``problems`` (bindings naming no KB)."""

    active: list[ScopedKB] = field(default_factory=list)
    disabled: list[ScopedKB] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def kbs(self) -> list[LoadedKB]:
        return [s.loaded for s in self.active]

    def get(self, kb_id: str) -> ScopedKB | None:
        return next((s for s in self.active if s.kb_id == kb_id), None)

    def ranks(self, strategy: InsertionStrategy) -> dict[str, int]:
        """Per kb_id, the group its entries are sorted in before priority (lower first)."""
        group: dict[LoreScopeName, int] = {
            "chat": 0,
            "persona": 1,
            "global": 2 + (strategy == "character_first"),
            "character": 2 + (strategy == "global_first"),
        }
        return {s.kb_id: group[s.scope] for s in self.active}


def reason_of(binding: Binding) -> str:
    """Why a KB is in the chat, in words (the API's ``reason``; the web app words it from
    ``scope`` and ``via`` in the user's language)."""
    if binding.scope == "global":
        return "in the project's global list: on in every chat"
    if binding.scope == "chat":
        return "bound to this chat"
    if binding.scope == "persona":
        return f"bound to the persona {binding.via}"
    if binding.legacy:
        return f"the card's own book of {binding.via} (tagged {character_tag(binding.via)})"
    return f"bound to the character {binding.via}"


def resolve_scope(catalog: KnowledgeCatalog, bindings: Sequence[Binding]) -> LoreScope:
    """The KBs ``bindings`` bring in: each once, under its first scope in
    :data:`SCOPE_PRECEDENCE`, in :data:`SCAN_ORDER`."""
    chosen: dict[str, Binding] = {}
    scope = LoreScope()
    for name in SCOPE_PRECEDENCE:
        for binding in bindings:
            if binding.scope != name or binding.kb_id in chosen:
                continue
            if catalog.get(binding.kb_id) is None:
                scope.problems.append(
                    f"{reason_of(binding)}: no knowledge base has kb_id {binding.kb_id}"
                )
                continue
            chosen[binding.kb_id] = binding
    for name in SCAN_ORDER:
        for binding in chosen.values():
            if binding.scope != name:
                continue
            loaded = catalog.get(binding.kb_id)
            assert loaded is not None
            scoped = ScopedKB(loaded, name, reason_of(binding), binding.via, binding.legacy)
            (scope.active if loaded.kb.enabled else scope.disabled).append(scoped)
    return scope


def tagged_books(catalog: KnowledgeCatalog, name: str) -> list[str]:
    """The KBs an import tagged as ``name``'s own book (not its definition KB)."""
    tag = character_tag(name)
    return [
        b.kb_id for b in catalog.bases if tag in b.kb.tags and CHARACTER_DEFINITION not in b.kb.tags
    ]


def character_bindings(
    catalog: KnowledgeCatalog, character: CharacterSnapshot, presets: PresetLibrary | None
) -> list[Binding]:
    """The books bound to ``character``: its live file's, else the snapshot card's, else
    (a file from before bindings) the books tagged with its name."""
    name = character.text("name")
    bound: list[str] | None = None
    live_file = False
    if presets is not None and character.source_preset:
        try:
            live = presets.character(character.source_preset)
        except (StoryloomError, OSError):
            live = None
        if live is not None:
            live_file = True
            name = live.name or name
            if "knowledge_bases" in live.model_fields_set:
                bound = list(live.knowledge_bases)
    if bound is None and not live_file:
        card_value = character.card.get("knowledge_bases")
        if isinstance(card_value, list) and card_value:
            bound = [kb for kb in card_value if isinstance(kb, str)]
    if bound is not None:
        return [Binding(kb_id, "character", name) for kb_id in bound]
    if not name:
        return []
    return [Binding(kb_id, "character", name, legacy=True) for kb_id in tagged_books(catalog, name)]


def persona_binding(
    settings: ConversationSettings, personas: PersonaLibrary | None
) -> list[Binding]:
    """The book of the persona the chat speaks as (its own, else the default), if any."""
    if personas is None:
        return []
    persona = personas.resolve(settings.persona_id)
    if persona is None or not persona.knowledge_base:
        return []
    return [Binding(persona.knowledge_base, "persona", persona.name)]


def chat_lore_scope(
    catalog: KnowledgeCatalog,
    global_ids: Sequence[str],
    settings: ConversationSettings,
    character: CharacterSnapshot,
    *,
    presets: PresetLibrary | None = None,
    personas: PersonaLibrary | None = None,
) -> LoreScope:
    """The KBs one turn of a chat scans, spoken by ``character``."""
    bindings = [
        *(Binding(kb_id, "global") for kb_id in global_ids),
        *(Binding(kb_id, "chat") for kb_id in settings.knowledge_bases),
        *persona_binding(settings, personas),
        *character_bindings(catalog, character, presets),
    ]
    return resolve_scope(catalog, bindings)


def bind_legacy_books(presets: PresetLibrary, catalog: Callable[[], KnowledgeCatalog]) -> list[str]:
    """Write ``knowledge_bases`` into each character file that has none, as the books
    tagged with its name (:func:`tagged_books`); returns the ids of the files changed.

    Only that key is added (the rest of the file is written back as it was read), and
    only where a tagged book exists; a file that does not read is left alone. The
    catalog is loaded only when some file needs it."""
    folder = presets.folder("characters")
    if not folder.is_dir():
        return []
    legacy: list[tuple[Path, dict[str, Any]]] = []
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "knowledge_bases" not in data:
            legacy.append((path, data))
    if not legacy:
        return []
    try:
        known = catalog()
    except (StoryloomError, OSError) as exc:
        logger.info("character books not bound: %s", exc)
        return []
    changed: list[str] = []
    for path, data in legacy:
        name = data.get("name")
        books = tagged_books(known, name) if isinstance(name, str) and name else []
        if not books:
            continue
        data["knowledge_bases"] = books
        try:
            atomic_write_text(path, json.dumps(data, ensure_ascii=False, indent=2) + "\n")
        except OSError as exc:
            logger.info("character books of %s not bound: %s", path, exc)
            continue
        changed.append(path.stem)
    return changed
