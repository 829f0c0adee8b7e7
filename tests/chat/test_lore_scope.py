"""Which knowledge bases a chat scans (global, character, persona, chat) and in what order
the insertion strategy puts them, on real files: a project, character files, personas."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storyloom.chat.personalab.library import PresetLibrary, character_snapshot
from storyloom.chat.personalab.personas import Persona, PersonaLibrary
from storyloom.chat.service.lore_scope import (
    SCOPE_PRECEDENCE,
    Binding,
    LoreScopeName,
    bind_legacy_books,
    chat_lore_scope,
    resolve_scope,
)
from storyloom.chat.service.mnemosyne import build_snapshot
from storyloom.chat.store.conversation import CharacterSnapshot, ConversationSettings
from storyloom.chat.store.turn_tree import TurnTree
from storyloom.core.settings import Settings
from storyloom.knowledge.activation import ActivationEngine, ActivationRequest, ScanMessage
from storyloom.knowledge.activation_settings import ActivationSettings
from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.card_knowledge import character_tag
from storyloom.knowledge.catalog import KnowledgeCatalog
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.project.knowledge_service import KnowledgeService
from storyloom.project.project_file import load_project, save_project
from storyloom.project.project_knowledge import add_local_knowledge_base
from storyloom.sillytavern.character import CharacterDefinition
from storyloom.store.database import Database


def entry(entry_id: str, text: str, keys: list[str], **criteria: Any) -> CAIU:
    return CAIU.model_validate(
        {
            "id": entry_id,
            "displayName": entry_id,
            "content": {"value": text},
            "activation_criteria": {"keywords": keys, **criteria},
        }
    )


def book(kb_id: str, *entries: CAIU, name: str = "", **fields: Any) -> KnowledgeBase:
    return KnowledgeBase(kb_id=kb_id, kb_displayName=name or kb_id, entries=list(entries), **fields)


def lake_book(kb_id: str, **fields: Any) -> KnowledgeBase:
    return book(kb_id, entry(f"{kb_id}-lake", f"{kb_id} knows the lake.", ["lake"]), **fields)


NOW = datetime(2026, 1, 1, tzinfo=UTC)
SERAPHINA = CharacterDefinition(name="Seraphina", description="A guardian of the forest.")


def ids(scope: Any) -> list[tuple[str, str]]:
    return [(s.kb_id, s.scope) for s in scope.active]


# -- resolving scopes (files) -------------------------------------------------------------


def test_an_unbound_book_is_in_no_chat_and_each_scope_brings_its_own(project: Path) -> None:
    catalog = KnowledgeCatalog.of(
        [lake_book(k) for k in ("kb_world", "kb_mine", "kb_qin", "kb_card", "kb_me")]
    )
    presets = PresetLibrary(project)
    character_id = presets.save_character(
        None, SERAPHINA.model_copy(update={"knowledge_bases": ["kb_card"]})
    )
    personas = PersonaLibrary(project)
    me = personas.create(Persona(name="Ren", knowledge_base="kb_me"))
    snapshot = character_snapshot(character_id, presets.character(character_id), NOW)
    scope = chat_lore_scope(
        catalog,
        ["kb_world"],
        ConversationSettings(knowledge_bases=["kb_mine"], persona_id=me.id),
        snapshot,
        presets=presets,
        personas=personas,
    )
    # Chat lore first, then the persona's, then global and character lore; kb_qin
    # (imported, bound to nothing) is in no chat.
    assert ids(scope) == [
        ("kb_mine", "chat"),
        ("kb_me", "persona"),
        ("kb_world", "global"),
        ("kb_card", "character"),
    ]
    reasons = {s.kb_id: s.reason for s in scope.active}
    assert reasons["kb_card"] == "bound to the character Seraphina"
    assert reasons["kb_me"] == "bound to the persona Ren"
    assert scope.problems == []


def test_the_live_character_file_wins_over_the_snapshot_and_the_snapshot_stands_in_when_it_is_gone(
    project: Path,
) -> None:
    catalog = KnowledgeCatalog.of([lake_book("kb_old"), lake_book("kb_new")])
    presets = PresetLibrary(project)
    bound = SERAPHINA.model_copy(update={"knowledge_bases": ["kb_old"]})
    character_id = presets.save_character(None, bound)
    snapshot = character_snapshot(character_id, presets.character(character_id), NOW)
    # The user binds another book to the character after the chat began.
    presets.save_character(
        character_id, SERAPHINA.model_copy(update={"knowledge_bases": ["kb_new"]})
    )
    live = chat_lore_scope(catalog, [], ConversationSettings(), snapshot, presets=presets)
    assert ids(live) == [("kb_new", "character")]
    presets.delete("characters", character_id)
    gone = chat_lore_scope(catalog, [], ConversationSettings(), snapshot, presets=presets)
    assert ids(gone) == [("kb_old", "character")]


def test_a_card_imported_before_bindings_keeps_its_own_book_by_tag(project: Path) -> None:
    tag = character_tag("Seraphina")
    catalog = KnowledgeCatalog.of(
        [
            lake_book("kb_book", tags=[tag]),
            lake_book("kb_definitions", tags=["character_definition", tag]),
            lake_book("kb_ash", tags=[character_tag("Ash")]),
        ]
    )
    presets = PresetLibrary(project)
    path = presets.path("characters", "seraphina")
    path.parent.mkdir(parents=True, exist_ok=True)
    # A file written before bindings: no knowledge_bases key at all.
    path.write_text('{"name": "Seraphina"}', encoding="utf-8")
    snapshot = CharacterSnapshot(source_preset="seraphina", card={"name": "Seraphina"})
    scope = chat_lore_scope(catalog, [], ConversationSettings(), snapshot, presets=presets)
    assert ids(scope) == [("kb_book", "character")]
    assert scope.active[0].legacy
    # Once the character says which books are its own, the tag no longer counts.
    presets.save_character("seraphina", SERAPHINA.model_copy(update={"knowledge_bases": []}))
    assert (
        chat_lore_scope(catalog, [], ConversationSettings(), snapshot, presets=presets).active == []
    )


def test_opening_an_old_project_writes_the_tagged_book_into_the_character_file(
    project: Path,
) -> None:
    tag = character_tag("Seraphina")
    catalog = KnowledgeCatalog.of(
        [lake_book("kb_book", tags=[tag]), lake_book("kb_defs", tags=["character_definition", tag])]
    )
    folder = PresetLibrary(project).folder("characters")
    folder.mkdir(parents=True)
    old = {"name": "Seraphina", "first_mes": "Hello.", "tavern_helper": {"kept": True}}
    (folder / "seraphina.json").write_text(json.dumps(old), encoding="utf-8")
    (folder / "ash.json").write_text(json.dumps({"name": "Ash"}), encoding="utf-8")
    (folder / "bound.json").write_text(
        json.dumps({"name": "Seraphina", "knowledge_bases": []}), encoding="utf-8"
    )
    (folder / "broken.json").write_text("{", encoding="utf-8")
    loads: list[int] = []

    def load() -> KnowledgeCatalog:
        loads.append(1)
        return catalog

    assert bind_legacy_books(PresetLibrary(project), load) == ["seraphina"]
    assert json.loads((folder / "seraphina.json").read_text("utf-8")) == {
        **old,
        "knowledge_bases": ["kb_book"],
    }
    # No tagged book, an explicit (even empty) list, a broken file: left as they were.
    assert json.loads((folder / "ash.json").read_text("utf-8")) == {"name": "Ash"}
    assert json.loads((folder / "bound.json").read_text("utf-8"))["knowledge_bases"] == []
    assert (folder / "broken.json").read_text("utf-8") == "{"
    # Once written, nothing is left to do: the catalog is not even loaded again.
    (folder / "ash.json").write_text(json.dumps({"name": "Ash", "knowledge_bases": []}), "utf-8")
    assert bind_legacy_books(PresetLibrary(project), load) == [] and len(loads) == 1


def test_a_disabled_book_is_never_scanned_and_a_missing_one_is_reported() -> None:
    catalog = KnowledgeCatalog.of([lake_book("kb_off", enabled=False), lake_book("kb_on")])
    settings = ConversationSettings(knowledge_bases=["kb_off", "kb_on", "kb_gone"])
    scope = chat_lore_scope(catalog, ["kb_off"], settings, CharacterSnapshot())
    assert ids(scope) == [("kb_on", "chat")]
    assert [(s.kb_id, s.scope) for s in scope.disabled] == [("kb_off", "global")]
    assert scope.problems == ["bound to this chat: no knowledge base has kb_id kb_gone"]


scopes = st.sampled_from(SCOPE_PRECEDENCE)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]), scopes), max_size=12))
def test_a_book_bound_several_ways_is_scanned_once_under_its_first_scope(
    bound: list[tuple[str, LoreScopeName]],
) -> None:
    catalog = KnowledgeCatalog.of([lake_book(k) for k in "abcd"])
    scope = resolve_scope(catalog, [Binding(k, s, "X") for k, s in bound])
    got = ids(scope)
    assert sorted(k for k, _ in got) == sorted({k for k, _ in bound})
    for kb_id, name in got:
        named = [s for k, s in bound if k == kb_id]
        assert name == min(named, key=SCOPE_PRECEDENCE.index)
    order = ("chat", "persona", "global", "character")
    assert [order.index(s) for _, s in got] == sorted(order.index(s) for _, s in got)


# -- the insertion strategy ---------------------------------------------------------------

GLOBAL = book("kb_global", entry("g", "global lore words here", [], constant=True))
CHARACTER = book("kb_char", entry("c", "character lore words here", [], constant=True))
CHAT = book("kb_chat", entry("h", "chat lore words here", [], constant=True, priority=0))


def scan(strategy: str, cap: int) -> tuple[list[str], list[str]]:
    catalog = KnowledgeCatalog.of([GLOBAL, CHARACTER, CHAT])
    scope = resolve_scope(
        catalog,
        [
            Binding("kb_global", "global"),
            Binding("kb_char", "character", "Seraphina"),
            Binding("kb_chat", "chat"),
        ],
    )
    settings = ActivationSettings(budget_cap=cap, insertion_strategy=strategy)
    engine = ActivationEngine(
        [b.kb for b in scope.kbs()],
        settings,
        count_tokens=lambda text: len(text.split()),
        kb_rank=scope.ranks(settings.insertion_strategy),
    )
    result = engine.activate(ActivationRequest(messages=[ScanMessage("User", "hello")]))
    return [a.entry_id for a in result.activated], [d.entry_id for d in result.dropped]


@pytest.mark.parametrize(
    ("strategy", "kept", "cut"),
    [("character_first", "c", "g"), ("global_first", "g", "c"), ("evenly", "g", "c")],
)
def test_the_insertion_strategy_decides_which_scope_reaches_the_budget_first(
    strategy: str, kept: str, cut: str
) -> None:
    # Room for two of the three four-word entries (10 tokens): chat lore comes first, then
    # the strategy's scope ("evenly" keeps global before character on equal priority,
    # as SillyTavern's one sorted list does).
    activated, dropped = scan(strategy, cap=10)
    assert sorted(activated) == sorted(["h", kept])
    assert dropped == [cut]


def test_with_room_for_all_the_strategy_only_breaks_ties_in_the_insertion_order() -> None:
    # Insertion order is ascending priority, ties in reverse activation order: the entry
    # scanned first sits closest to the end of the prompt.
    assert scan("character_first", cap=0)[0] == ["g", "c", "h"]
    assert scan("global_first", cap=0)[0] == ["c", "g", "h"]


# -- the snapshot names each entry's book and scope ---------------------------------------


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    db = Database(tmp_path / "storyloom.sqlite3")
    yield db
    db.close()


@pytest.fixture
async def knowledge(
    tmp_path: Path, project: Path, database: Database
) -> AsyncIterator[KnowledgeService]:
    add_local_knowledge_base(project, lake_book("kb_card", name="Seraphina's Lorebook"))
    add_local_knowledge_base(project, lake_book("kb_qin", name="Qin History"))
    settings = Settings()
    service = KnowledgeService(
        tmp_path / "home", project, settings=lambda: settings, database=database
    )
    yield service
    await service.aclose()


async def test_the_snapshot_scans_only_the_chats_books_and_names_them(
    database: Database, project: Path, knowledge: KnowledgeService
) -> None:
    presets = PresetLibrary(project)
    character_id = presets.save_character(
        None, SERAPHINA.model_copy(update={"knowledge_bases": ["kb_card"]})
    )
    tree = TurnTree(database)
    conversation = tree.create_conversation(
        project_id="p",
        title="t",
        character=character_snapshot(character_id, presets.character(character_id), NOW),
    )
    message = tree.add_message(conversation.id, parent_id=None, role="user", content="The lake?")
    conversation = tree.conversation(conversation.id)
    snapshot = await build_snapshot(
        tree, conversation, message.id, knowledge=knowledge, presets=presets
    )
    assert [(h.kb_name, h.scope) for h in snapshot.lore] == [("Seraphina's Lorebook", "character")]
    assert [(r.kb_name, r.scope) for r in snapshot.lore_report] == [
        ("Seraphina's Lorebook", "character")
    ]
    # The user binds the history book to this chat: it is in the next turn.
    settings = conversation.settings.model_copy(update={"knowledge_bases": ["kb_qin"]})
    conversation = tree.update_conversation(conversation.id, settings=settings)
    again = await build_snapshot(
        tree, conversation, message.id, knowledge=knowledge, presets=presets
    )
    # Equal priority: chat lore is scanned first, so it sits last (nearest the chat).
    assert [(h.kb_name, h.scope) for h in again.lore] == [
        ("Seraphina's Lorebook", "character"),
        ("Qin History", "chat"),
    ]
    # The project's global list puts it in every chat; switching it off takes it out.
    project_file = load_project(project)
    project_file.globalKnowledgeBases = ["kb_qin"]
    save_project(project, project_file)
    knowledge.update_base("kb_card", enabled=False)
    last = await build_snapshot(
        tree, conversation, message.id, knowledge=knowledge, presets=presets
    )
    assert [(h.kb_name, h.scope) for h in last.lore] == [("Qin History", "global")]
