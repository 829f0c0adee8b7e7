"""Mnemosyne's context snapshot on a real turn tree (SQLite) and a real project's lore."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from storyloom.chat.personalab.library import PresetLibrary, SummaryPoint, SummaryPreset
from storyloom.chat.personalab.summaries import SummaryIndex
from storyloom.chat.service.mnemosyne import build_snapshot, snapshot_seed
from storyloom.chat.service.reply_run import inspector_record, inspector_view
from storyloom.chat.store.conversation import (
    BackgroundSnapshot,
    CharacterSnapshot,
    Conversation,
    ConversationSettings,
    RagScope,
)
from storyloom.chat.store.state import ChatState
from storyloom.chat.store.turn_tree import TurnTree
from storyloom.core.settings import EmbeddingEndpoint, Settings
from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.card_knowledge import character_tag
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.timed_effects import TimedEffectsState
from storyloom.llm.embeddings import OpenAIEmbeddings
from storyloom.project.knowledge_service import KnowledgeService
from storyloom.project.project_file import init_project, load_project, save_project
from storyloom.project.project_knowledge import add_local_knowledge_base
from storyloom.store.database import Database
from storyloom.testing.replay_server import ReplayLLMServer


def keyed(entry_id: str, text: str, keys: list[str], **criteria: Any) -> CAIU:
    return CAIU.model_validate(
        {
            "id": entry_id,
            "displayName": entry_id.title(),
            "content": {"value": text},
            "activation_criteria": {"keywords": keys, **criteria},
        }
    )


LORE = KnowledgeBase(
    kb_id="kb_lore",
    kb_displayName="Lore",
    entries=[
        keyed("dragon", "Ember is a red dragon.", ["dragon"], sticky=3),
        keyed("bread", "Mira bakes bread.", ["bread"]),
        keyed("gated", "Only at night.", ["night"], trigger_probability=0),
    ],
)
CARD = {
    "name": "Seraphina",
    "description": "A guardian of the forest.",
    "first_mes": "Hello, {{user}}.",
    "extensions": {
        "regex_scripts": [
            {"scriptName": "stars", "findRegex": "/\\*/g", "replaceString": "", "placement": [2]}
        ]
    },
}


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    db = Database(tmp_path / "storyloom.sqlite3")
    yield db
    db.close()


@pytest.fixture
def tree(database: Database) -> TurnTree:
    return TurnTree(database)


@pytest.fixture
async def knowledge(tmp_path: Path, database: Database) -> AsyncIterator[KnowledgeService]:
    root = tmp_path / "project"
    init_project(root)
    add_local_knowledge_base(root, LORE.model_copy(deep=True))
    # A KB is in a chat only through a scope: this one is global (on in every chat).
    project = load_project(root)
    project.globalKnowledgeBases = [LORE.kb_id]
    save_project(root, project)
    settings = Settings()
    service = KnowledgeService(
        tmp_path / "home", root, settings=lambda: settings, database=database
    )
    yield service
    await service.aclose()


@dataclass
class Chat:
    tree: TurnTree
    conversation_id: str

    @property
    def conversation(self) -> Conversation:
        return self.tree.conversation(self.conversation_id)

    def say(self, role: str, text: str, *, parent: str | None = None, **fields: Any) -> str:
        parent_id = parent if parent is not None else self.conversation.pointer
        message = self.tree.add_message(
            self.conversation_id,
            parent_id=parent_id,
            role=role,  # type: ignore[arg-type]
            content=text,
            **fields,
        )
        return message.id


def new_chat(tree: TurnTree, **fields: Any) -> Chat:
    conversation = tree.create_conversation(
        project_id="p", title="t", character=CharacterSnapshot(card=CARD), **fields
    )
    return Chat(tree, conversation.id)


async def test_snapshot_holds_the_chain_the_state_and_the_lore_at_the_pointer(
    tree: TurnTree, knowledge: KnowledgeService
) -> None:
    chat = new_chat(tree)
    first = chat.say("assistant", "Welcome.")
    chat.say("user", "Is there a dragon here at night?", state=ChatState(variables={"hp": 10}))
    off_branch = chat.say("user", "I want bread.", parent=first)
    tree.set_pointer(chat.conversation_id, tree.children(chat.conversation_id, first)[0].id)
    pointer = chat.conversation.pointer
    snapshot = await build_snapshot(tree, chat.conversation, pointer, knowledge=knowledge)
    assert [m.content for m in snapshot.history] == ["Welcome.", "Is there a dragon here at night?"]
    assert off_branch not in {m.id for m in snapshot.history}
    assert snapshot.pointer == pointer
    assert snapshot.state.variables == {"hp": 10}
    assert [hit.entry_id for hit in snapshot.lore] == ["dragon"]
    assert snapshot.lore[0].content == "Ember is a red dragon."
    activated = {r.entry_id: r for r in snapshot.lore_report if r.activated}
    assert set(activated) == {"dragon"}
    assert any("dragon" in r["detail"] for r in activated["dragon"].reasons)
    dropped = [r for r in snapshot.lore_records() if not r.activated]
    assert [r.entry_id for r in dropped] == ["gated"]
    assert [r["rule"] for r in dropped[0].reasons] == ["probability"]
    # The sticky timer starts at this turn, for the state after it.
    assert snapshot.lore_timed_effects["sticky"]["kb_lore"]["dragon"]["start"] == 2
    assert snapshot.character.card["name"] == "Seraphina"
    assert snapshot.now and snapshot.seed > 0


async def test_the_same_stored_data_gives_the_same_snapshot(
    tree: TurnTree, knowledge: KnowledgeService
) -> None:
    chat = new_chat(tree)
    chat.say("assistant", "Welcome.")
    chat.say("user", "A dragon!")
    pointer = chat.conversation.pointer
    one = await build_snapshot(tree, chat.conversation, pointer, knowledge=knowledge)
    two = await build_snapshot(tree, chat.conversation, pointer, knowledge=knowledge)
    assert one == two
    assert one.fingerprint == two.fingerprint
    chat.say("assistant", "Ember lands.")
    three = await build_snapshot(
        tree, chat.conversation, chat.conversation.pointer, knowledge=knowledge
    )
    assert three.fingerprint != one.fingerprint
    # Going back to the old pointer gives the old snapshot again: nothing was lost.
    again = await build_snapshot(tree, chat.conversation, pointer, knowledge=knowledge)
    assert again.fingerprint == one.fingerprint


async def test_sticky_lore_comes_from_the_state_of_the_branch(
    tree: TurnTree, knowledge: KnowledgeService
) -> None:
    chat = new_chat(tree)
    greeting = chat.say("assistant", "Welcome.")
    chat.say("user", "A dragon!")
    first = await build_snapshot(
        tree, chat.conversation, chat.conversation.pointer, knowledge=knowledge
    )
    assert [h.entry_id for h in first.lore] == ["dragon"]
    # The reply stores the timers the scan returned (the pipeline's StateUpdater does).
    timed = TimedEffectsState.model_validate(first.lore_timed_effects)
    chat.say("assistant", "It is asleep.", state=ChatState(timed_effects=timed))
    chat.say("user", "Let us walk on.")
    later = await build_snapshot(
        tree, chat.conversation, chat.conversation.pointer, knowledge=knowledge
    )
    assert [h.entry_id for h in later.lore] == ["dragon"]
    sticky = next(r for r in later.lore_report if r.entry_id == "dragon")
    assert any(r["rule"] == "sticky" for r in sticky.reasons)
    # Another branch from the greeting never met the dragon: no sticky entry there.
    chat.say("user", "Let us walk on.", parent=greeting)
    branch = await build_snapshot(
        tree, chat.conversation, chat.conversation.pointer, knowledge=knowledge
    )
    assert branch.lore == []


async def test_without_knowledge_the_snapshot_has_no_lore(tree: TurnTree) -> None:
    chat = new_chat(tree)
    chat.say("user", "A dragon!")
    snapshot = await build_snapshot(
        tree, chat.conversation, chat.conversation.pointer, knowledge=None
    )
    assert snapshot.lore == [] and snapshot.lore_report == []
    assert [m.content for m in snapshot.history] == ["A dragon!"]


async def test_an_empty_chat_has_an_empty_snapshot(tree: TurnTree) -> None:
    chat = new_chat(tree)
    snapshot = await build_snapshot(tree, chat.conversation, None, knowledge=None)
    assert snapshot.history == [] and snapshot.pointer is None
    assert snapshot.state == ChatState()


async def test_a_failed_reply_without_text_is_not_part_of_the_history(tree: TurnTree) -> None:
    chat = new_chat(tree)
    chat.say("user", "Hello?")
    chat.say("assistant", "", status="error", error="the endpoint answered 500")
    snapshot = await build_snapshot(
        tree, chat.conversation, chat.conversation.pointer, knowledge=None
    )
    assert [m.content for m in snapshot.history] == ["Hello?"]


async def test_regex_scripts_are_in_the_snapshot_only_when_allowed(tree: TurnTree) -> None:
    chat = new_chat(tree)
    chat.say("user", "Hi")
    refused = await build_snapshot(
        tree, chat.conversation, chat.conversation.pointer, knowledge=None
    )
    assert refused.regex_scripts == []
    settings = ConversationSettings(allow_regex_scripts=True)
    tree.update_conversation(chat.conversation_id, settings=settings)
    allowed = await build_snapshot(
        tree, chat.conversation, chat.conversation.pointer, knowledge=None
    )
    assert [s["scriptName"] for s in allowed.regex_scripts] == ["stars"]


async def test_a_story_outline_starts_the_plot_at_its_first_point(tree: TurnTree) -> None:
    background = BackgroundSnapshot(
        name="Quest", story_outline=[{"index": 1, "content": "Meet"}, {"index": 2, "content": "Go"}]
    )
    chat = new_chat(tree, background=background)
    chat.say("user", "Hi")
    snapshot = await build_snapshot(
        tree, chat.conversation, chat.conversation.pointer, knowledge=None
    )
    assert snapshot.state.plot is not None
    assert snapshot.state.plot.current_plot_index == 1
    assert snapshot.background == background
    plain = new_chat(tree)
    plain.say("user", "Hi")
    without = await build_snapshot(
        tree, plain.conversation, plain.conversation.pointer, knowledge=None
    )
    assert without.state.plot is None


@pytest.fixture
def llm() -> Iterator[ReplayLLMServer]:
    with ReplayLLMServer(models=["embed"]) as server:
        yield server


async def test_memories_are_retrieved_within_the_conversations_scope(
    tree: TurnTree, database: Database, llm: ReplayLLMServer
) -> None:
    index = SummaryIndex(
        database,
        OpenAIEmbeddings(
            EmbeddingEndpoint(provider="openai", base_url=llm.url, model="embed", max_retries=0)
        ),
    )
    chat, other = new_chat(tree), new_chat(tree)
    await index.index(
        chat.conversation_id, [SummaryPoint(index=1, content="The baker sings.")], "s1"
    )
    await index.index(
        other.conversation_id, [SummaryPoint(index=1, content="The bard sings.")], "s2"
    )
    chat.say("user", "The bard sings.")
    own = await build_snapshot(
        tree, chat.conversation, chat.conversation.pointer, knowledge=None, summaries=index
    )
    assert [hit.content for hit in own.rag] == ["The baker sings."]
    related = ConversationSettings(
        rag_scope=RagScope(mode="related", related_conversations=[other.conversation_id])
    )
    tree.update_conversation(chat.conversation_id, settings=related)
    wider = await build_snapshot(
        tree, chat.conversation, chat.conversation.pointer, knowledge=None, summaries=index
    )
    assert wider.rag[0].content == "The bard sings."  # the same text: the nearest
    assert {hit.content for hit in wider.rag} == {"The baker sings.", "The bard sings."}


async def test_the_summaries_a_conversation_started_from_are_in_the_snapshot(
    tree: TurnTree, tmp_path: Path
) -> None:
    presets = PresetLibrary(tmp_path / "project")
    saved = presets.save_summary(
        SummaryPreset(summaries=[SummaryPoint(index=1, content="They met."),
                                 SummaryPoint(index=2, content="They fought.")])
    )  # fmt: skip
    chat = new_chat(tree, settings=ConversationSettings(summaries=[saved.summary_id, "gone"]))
    chat.say("user", "Hi")
    snapshot = await build_snapshot(
        tree, chat.conversation, chat.conversation.pointer, knowledge=None, presets=presets
    )
    assert snapshot.summaries == ["They met.", "They fought."]


def test_each_reply_after_one_pointer_gets_its_own_seed() -> None:
    first = snapshot_seed("c", "m1", "reply-a")
    assert first == snapshot_seed("c", "m1", "reply-a")
    assert first != snapshot_seed("c", "m1", "reply-b")


async def test_another_characters_book_is_not_scanned(
    tree: TurnTree, knowledge: KnowledgeService
) -> None:
    for name in ("Seraphina", "Ash"):
        book = KnowledgeBase(
            kb_displayName=f"{name}'s Lorebook",
            tags=[character_tag(name)],
            entries=[keyed(f"{name.lower()}-home", f"{name} lives by the lake.", ["lake"])],
        )
        add_local_knowledge_base(knowledge.project_dir, book)
    knowledge.reload()
    chat = new_chat(tree)
    chat.say("user", "Shall we walk to the lake?")
    snapshot = await build_snapshot(
        tree, chat.conversation, chat.conversation.pointer, knowledge=knowledge
    )
    assert [hit.entry_id for hit in snapshot.lore] == ["seraphina-home"]


async def test_a_cut_entry_keeps_what_cut_it_and_the_tokens_it_needed_not_where_it_matched(
    tmp_path: Path, tree: TurnTree, database: Database
) -> None:
    # A big book over its budget cuts most of its matches in every turn: the snapshot
    # keeps each cut entry as a compact row (book, entry, title, tokens needed, the rule
    # that cut it), never the words of where its keys matched (issue 13 §1b).
    root = tmp_path / "big"
    init_project(root)
    crowd = KnowledgeBase(
        kb_id="kb_crowd",
        kb_displayName="Crowd",
        entries=[keyed(f"e{i}", "word " * 30, ["dragon"]) for i in range(40)],
    )
    add_local_knowledge_base(root, crowd)
    project = load_project(root)
    project.globalKnowledgeBases = [crowd.kb_id]
    project.activationSettings = project.activationSettings.model_copy(update={"budget_cap": 100})
    save_project(root, project)
    settings = Settings()
    service = KnowledgeService(
        tmp_path / "home", root, settings=lambda: settings, database=database
    )
    try:
        chat = new_chat(tree)
        chat.say("user", "A dragon!")
        snapshot = await build_snapshot(
            tree, chat.conversation, chat.conversation.pointer, knowledge=service
        )
    finally:
        await service.aclose()
    assert 0 < len(snapshot.lore) < 40
    assert all(r.activated for r in snapshot.lore_report)
    assert len(snapshot.lore_dropped) == 40 - len(snapshot.lore)
    cut = snapshot.lore_records()[len(snapshot.lore) :]
    assert {r.kb_name for r in cut} == {"Crowd"} and {r.scope for r in cut} == {"global"}
    assert all(r.tokens >= 30 for r in cut)
    assert all([x["rule"] for x in r.reasons] == ["budget"] for r in cut)
    assert all(x["outcome"] == "dropped" for r in cut for x in r.reasons)
    # The inspector builds the cut entries' records when it reads the stored prompt.
    view = inspector_view(json.loads(json.dumps(inspector_record(None, None, snapshot))), {})
    assert "lore_dropped" not in view
    shown = [r for r in view["lore"] if not r["activated"]]
    assert [r["entry_id"] for r in shown] == [r.entry_id for r in cut]
    assert shown[0]["kb_name"] == "Crowd" and shown[0]["reasons"][0]["rule"] == "budget"


def test_a_prompt_stored_before_compact_rows_still_shows_its_dropped_lore() -> None:
    old = {
        "blocks": [],
        "messages": [],
        "lore": [{"kb_id": "kb", "entry_id": "e", "activated": False, "reasons": []}],
    }
    assert inspector_view(old, {})["lore"] == old["lore"]


async def test_lore_reasons_number_messages_by_their_place_in_the_chat_past_hidden_ones(
    tree: TurnTree, knowledge: KnowledgeService
) -> None:
    chat = new_chat(tree)
    chat.say("user", "A dragon!")  # 0
    chat.say("assistant", "Something private.", extra={"hidden": True})  # 1, not in the prompt
    chat.say("user", "Go on.")  # 2
    snapshot = await build_snapshot(
        tree, chat.conversation, chat.conversation.pointer, knowledge=knowledge
    )
    assert [m.number for m in snapshot.history] == [0, 2]
    [dragon] = [r for r in snapshot.lore_report if r.entry_id == "dragon"]
    said = " ".join(r["detail"] for r in dragon.reasons)
    # The block list calls it "Message 0": so do the reasons (not "message 1").
    assert "message 0" in said and "message 1" not in said
