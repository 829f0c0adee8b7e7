"""Who refers to a knowledge base: what deleting it would touch, and forgetting it after.

A KB is named by the project's global list, by chats (chat lore), by characters (their
bound books, or by tag for a card imported before bindings), by personas, and by the
``{{{KB:...}}}`` references in other KBs' entries. Deleting one that something names is
asked first (SillyTavern deletes a world silently and leaves the names dangling); once
the user agrees, :func:`forget_kb` takes the kb_id out of the chats, characters and
personas, so none of them names a KB that is gone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from storyloom.chat.service.lore_scope import tagged_books
from storyloom.core.errors import StoryloomError

if TYPE_CHECKING:
    from storyloom.chat.personalab.library import PresetLibrary
    from storyloom.chat.personalab.personas import PersonaLibrary
    from storyloom.chat.service.conversations import ChatService
    from storyloom.project.knowledge_service import KnowledgeService

ReferrerKind = Literal["global", "chat", "character", "persona", "knowledge_base"]


@dataclass(frozen=True)
class Referrer:
    """One thing that names the KB: its kind, id and name (as the user knows it)."""

    kind: ReferrerKind
    id: str
    name: str


def _character_refers(
    presets: PresetLibrary, character_id: str, kb_id: str, knowledge: KnowledgeService
) -> bool:
    try:
        preset = presets.character(character_id)
    except (StoryloomError, OSError):
        return False
    if "knowledge_bases" in preset.model_fields_set:
        return kb_id in preset.knowledge_bases
    return kb_id in tagged_books(knowledge.snapshot().knowledge.catalog, preset.name)


def kb_referrers(
    kb_id: str,
    *,
    knowledge: KnowledgeService,
    chat: ChatService,
    presets: PresetLibrary,
    personas: PersonaLibrary,
) -> list[Referrer]:
    """Everything in the project that names ``kb_id`` (:class:`NotFound` when no KB has
    it)."""
    snap = knowledge.snapshot()
    snap.require(kb_id)
    found: list[Referrer] = []
    if kb_id in snap.knowledge.project.globalKnowledgeBases:
        found.append(Referrer("global", "", "the project's global list"))
    tree = chat.tree
    for summary in tree.conversations(chat.project_id):
        conversation = tree.conversation(summary.id)
        if kb_id in conversation.settings.knowledge_bases:
            found.append(Referrer("chat", summary.id, summary.title or summary.id))
    for listing in presets.characters():
        if listing.error is None and _character_refers(presets, listing.id, kb_id, knowledge):
            found.append(Referrer("character", listing.id, listing.name))
    for persona in personas.personas()[0]:
        if persona.knowledge_base == kb_id:
            found.append(Referrer("persona", persona.id, persona.name))
    resolver = knowledge.resolver()
    for loaded in snap.knowledge.catalog.bases:
        if loaded.kb_id == kb_id:
            continue
        if any(
            t.kb_id == kb_id
            for entry in loaded.kb.entries
            if "{{{" in entry.text
            for check in resolver.check(loaded.kb_id, entry.text, entry_id=entry.id)
            for t in check.targets
        ):
            found.append(Referrer("knowledge_base", loaded.kb_id, loaded.kb.display_name))
    return found


def forget_kb(
    kb_id: str,
    referrers: list[Referrer],
    *,
    chat: ChatService,
    presets: PresetLibrary,
    personas: PersonaLibrary,
) -> None:
    """Take ``kb_id`` out of the chats, characters and personas among ``referrers`` (the
    global list and other KBs' references are not this layer's: the KB service drops the
    former, and a reference to a KB that is gone shows as a reference error)."""
    for ref in referrers:
        if ref.kind == "chat":
            conversation = chat.tree.conversation(ref.id)
            kept = [k for k in conversation.settings.knowledge_bases if k != kb_id]
            settings = conversation.settings.model_copy(update={"knowledge_bases": kept})
            chat.update_conversation(ref.id, expected_version=None, settings=settings)
        elif ref.kind == "character":
            preset = presets.character(ref.id)
            preset.knowledge_bases = [k for k in preset.knowledge_bases if k != kb_id]
            presets.save_character(ref.id, preset)
        elif ref.kind == "persona":
            persona = personas.get(ref.id).model_copy(update={"knowledge_base": None})
            personas.update(ref.id, persona, expected_version=None)
