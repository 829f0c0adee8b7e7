"""Group chats end to end: SQLite turn tree, the real chat pipeline, a real HTTP LLM (the
scripted OpenAI-compatible server). Each reply must be written with its speaker's card."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from storyloom.chat.service.conversations import ChatService
from storyloom.chat.service.group_chat import choose_speaker
from storyloom.chat.store.group import GroupMember, GroupSettings
from storyloom.chat.store.group_members import member_snapshots
from storyloom.chat.store.message import Message
from storyloom.chat.store.st_group_chat import import_st_group_chat
from storyloom.chat.store.turn_tree import ChatError, TurnTree
from storyloom.core.errors import InvalidInput
from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.project.knowledge_service import KnowledgeService
from storyloom.project.project_file import init_project
from storyloom.project.project_knowledge import add_local_knowledge_base
from storyloom.sillytavern.chat_log import parse_chat_jsonl
from storyloom.sillytavern.group_file import parse_group_file
from storyloom.store.database import Database
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.testing.st_documents import chat_message, group_chat_jsonl, group_document
from tests.chat.conftest import llm_settings, running_chat_service, write_characters

WAIT_S = 10.0
"""Only a guard against a hanging test."""

CARDS: dict[str, dict[str, Any]] = {
    "sera": {
        "name": "Seraphina",
        "description": "SERA-CARD: a guardian of the forest.",
        "first_mes": "I am {{char}}.",
        "extensions": {"talkativeness": "0"},
    },
    "kai": {
        "name": "Kai",
        "description": "KAI-CARD: a storm mage.",
        "first_mes": "{{char}} here.",
        "extensions": {"talkativeness": "0"},
    },
    "mei": {
        "name": "Mei",
        "description": "MEI-CARD: a quiet archer.",
        "first_mes": "Mei nods at {{user}}.",
        "extensions": {"talkativeness": "0"},
    },
    "ren": {"name": "Ren", "description": "REN-CARD: a late arrival.", "first_mes": "Hi."},
}


@dataclass
class Harness:
    service: ChatService
    tree: TurnTree
    llm: ReplayLLMServer

    async def finished(self, conversation_id: str) -> Message:
        message = await asyncio.wait_for(self.service.wait(conversation_id), WAIT_S)
        assert message is not None
        return message

    def sent_system_text(self) -> str:
        """Every system message of the last request the LLM received, joined."""
        messages = self.llm.chat_requests[-1]["messages"]
        return "\n".join(m["content"] for m in messages if m["role"] == "system")


@asynccontextmanager
async def running_harness(
    tmp_path: Path,
    llm: ReplayLLMServer,
    *,
    with_lore: bool = False,
    changes: dict[str, dict[str, Any]] | None = None,
) -> AsyncIterator[Harness]:
    """The chat service over a project with the four cards; ``with_lore``: a knowledge
    service too, with a book bound to Kai only (entry "KAI-LORE", key "lake")."""
    project = tmp_path / "project"
    init_project(project)
    cards = {cid: {**card, **(changes or {}).get(cid, {})} for cid, card in CARDS.items()}
    if with_lore:
        cards["kai"] = {**cards["kai"], "knowledge_bases": ["kb_kai"]}
    write_characters(project, cards)
    database = Database(tmp_path / "storyloom.sqlite3")
    settings = llm_settings(llm)
    knowledge: KnowledgeService | None = None
    if with_lore:
        lore = CAIU.model_validate(
            {
                "id": "kai-lake",
                "displayName": "kai-lake",
                "content": {"value": "KAI-LORE: storms gather over the lake."},
                "activation_criteria": {"keywords": ["lake"]},
            }
        )
        book = KnowledgeBase(kb_id="kb_kai", kb_displayName="Kai's book", entries=[lore])
        add_local_knowledge_base(project, book)
        knowledge = KnowledgeService(
            tmp_path / "home", project, settings=lambda: settings, database=database
        )
    try:
        async with running_chat_service(project, database, llm, knowledge=knowledge) as service:
            yield Harness(service, service.tree, llm)
    finally:
        if knowledge is not None:
            await knowledge.aclose()
        database.close()


@pytest.fixture
async def harness(tmp_path: Path, llm: ReplayLLMServer) -> AsyncIterator[Harness]:
    async with running_harness(tmp_path, llm) as running:
        yield running


def speaker(message: Message) -> str:
    return str(message.extra["speaker"]["id"])


async def test_a_group_chat_opens_with_each_members_greeting_in_list_order(
    harness: Harness,
) -> None:
    chat = harness.service.create_group_conversation(["sera", "kai", "mei"])
    path = harness.tree.active_path(chat.id)
    assert [(m.name, m.content) for m in path] == [
        ("Seraphina", "I am Seraphina."),
        ("Kai", "Kai here."),
        ("Mei", "Mei nods at User."),
    ]
    assert [speaker(m) for m in path] == ["sera", "kai", "mei"]
    assert chat.title == "Seraphina, Kai, Mei"
    assert set(member_snapshots(chat)) == {"sera", "kai", "mei"}


async def test_the_mentioned_member_answers_with_their_own_card(harness: Harness) -> None:
    chat = harness.service.create_group_conversation(["sera", "kai", "mei"])
    harness.llm.script(Reply(text="The storm answers."))
    sent = await harness.service.send(chat.id, "Kai, what do you see?", expected_version=None)
    assert sent.assistant_message is not None
    reply = await harness.finished(chat.id)
    assert reply.status == "complete"
    assert (reply.name, speaker(reply)) == ("Kai", "kai")
    system = harness.sent_system_text()
    assert "KAI-CARD" in system
    assert "SERA-CARD" not in system and "MEI-CARD" not in system


async def test_a_reply_naming_a_member_makes_them_speak_next(harness: Harness) -> None:
    chat = harness.service.create_group_conversation(["sera", "kai", "mei"])
    harness.llm.script(Reply(text="I will ask Mei about it."))
    await harness.service.generate_as(chat.id, "sera")
    first = await harness.finished(chat.id)
    assert speaker(first) == "sera"
    harness.llm.script(Reply(text="Mei draws her bow."))
    await harness.service.generate_as(chat.id)
    second = await harness.finished(chat.id)
    assert speaker(second) == "mei"
    assert "MEI-CARD" in harness.sent_system_text()


async def test_joined_cards_put_every_unmuted_members_card_in_the_prompt(
    harness: Harness,
) -> None:
    settings = GroupSettings(
        generation_mode="append",
        join_prefix="[<FIELDNAME> of {{char}}]",
        members=[GroupMember(character_id="mei", muted=True)],
    )
    chat = harness.service.create_group_conversation(["sera", "kai", "mei"], group=settings)
    harness.llm.script(Reply(text="Hm."))
    await harness.service.generate_as(chat.id, "kai")
    reply = await harness.finished(chat.id)
    assert speaker(reply) == "kai"
    system = harness.sent_system_text()
    assert "[Description of Seraphina]\nSERA-CARD" in system
    assert "[Description of Kai]\nKAI-CARD" in system
    assert "MEI-CARD" not in system  # muted and not speaking
    # append_disabled joins the muted member's card too.
    group = chat.settings.group
    assert group is not None
    current = harness.tree.conversation(chat.id)
    harness.service.update_group(
        chat.id,
        group.model_copy(update={"generation_mode": "append_disabled"}),
        expected_version=current.version,
    )
    harness.llm.script(Reply(text="Hm again."))
    await harness.service.generate_as(chat.id, "kai")
    await harness.finished(chat.id)
    assert "[Description of Mei]\nMEI-CARD" in harness.sent_system_text()


async def test_a_swipe_is_rewritten_by_the_same_speaker(harness: Harness) -> None:
    chat = harness.service.create_group_conversation(["sera", "kai", "mei"])
    harness.llm.script(Reply(text="Thunder."))
    await harness.service.generate_as(chat.id, "kai")
    first = await harness.finished(chat.id)
    harness.llm.script(Reply(text="Lightning."))
    await harness.service.generate(chat.id, kind="swipe", message_id=first.id)
    swiped = await harness.finished(chat.id)
    assert swiped.parent_id == first.parent_id and swiped.id != first.id
    assert speaker(swiped) == "kai"
    assert "KAI-CARD" in harness.sent_system_text()
    harness.llm.script(Reply(text="And rain."))
    await harness.service.generate(chat.id, kind="continue", message_id=swiped.id)
    continued = await harness.finished(chat.id)
    assert continued.content.startswith("Lightning.") and speaker(continued) == "kai"


async def test_manual_order_leaves_the_users_message_unanswered_until_a_pick(
    harness: Harness,
) -> None:
    manual = GroupSettings(activation_strategy="manual")
    chat = harness.service.create_group_conversation(["sera", "kai"], group=manual)
    sent = await harness.service.send(chat.id, "Hello, Seraphina.", expected_version=None)
    assert sent.assistant_message is None
    assert not harness.service.running(chat.id)
    harness.llm.script(Reply(text="Kai waves."))
    message = await harness.service.generate_as(chat.id, "kai")
    assert message.parent_id == sent.user_message.id
    assert speaker(await harness.finished(chat.id)) == "kai"


async def test_a_muted_member_speaks_only_when_picked(harness: Harness) -> None:
    muted = GroupSettings(members=[GroupMember(character_id="kai", muted=True)])
    chat = harness.service.create_group_conversation(["sera", "kai"], group=muted)
    # Kai's greeting is left out: muted members do not open the chat.
    assert [m.name for m in harness.tree.active_path(chat.id)] == ["Seraphina"]
    harness.llm.script(Reply(text="..."))
    await harness.service.send(chat.id, "Kai? Are you there?", expected_version=None)
    assert speaker(await harness.finished(chat.id)) == "sera"
    harness.llm.script(Reply(text="Fine, I am."))
    await harness.service.generate_as(chat.id, "kai")
    assert speaker(await harness.finished(chat.id)) == "kai"


async def test_a_member_who_joins_later_has_their_card_copied(harness: Harness) -> None:
    chat = harness.service.create_group_conversation(["sera", "kai"])
    group = chat.settings.group
    assert group is not None
    members = [*group.members, GroupMember(character_id="ren")]
    updated = harness.service.update_group(
        chat.id, group.model_copy(update={"members": members}), expected_version=chat.version
    )
    assert member_snapshots(updated)["ren"].card["name"] == "Ren"
    harness.llm.script(Reply(text="Ren arrives."))
    await harness.service.generate_as(chat.id, "ren")
    assert speaker(await harness.finished(chat.id)) == "ren"
    assert "REN-CARD" in harness.sent_system_text()


async def test_bad_groups_are_refused_and_change_nothing(harness: Harness) -> None:
    with pytest.raises(InvalidInput):
        harness.service.create_group_conversation(["sera"])
    chat = harness.service.create_group_conversation(["sera", "kai"])
    group = chat.settings.group
    assert group is not None
    twice = [*group.members, GroupMember(character_id="sera")]
    with pytest.raises(InvalidInput):
        harness.service.update_group(
            chat.id, group.model_copy(update={"members": twice}), expected_version=chat.version
        )
    with pytest.raises(InvalidInput):
        await harness.service.generate_as(chat.id, "nobody")
    assert harness.tree.conversation(chat.id).version == chat.version
    one = harness.service.create_conversation(character_id="sera")
    with pytest.raises(ChatError):
        await harness.service.generate_as(one.id, "sera")


async def test_each_speaker_brings_their_own_lore(tmp_path: Path, llm: ReplayLLMServer) -> None:
    async with running_harness(tmp_path, llm, with_lore=True) as harness:
        chat = harness.service.create_group_conversation(["sera", "kai"])
        harness.llm.script(Reply(text="The lake is calm."))
        await harness.service.send(
            chat.id, "What about the lake, Seraphina?", expected_version=None
        )
        assert speaker(await harness.finished(chat.id)) == "sera"
        sent = json.dumps(harness.llm.chat_requests[-1]["messages"])
        assert "KAI-LORE" not in sent  # Kai's book is bound to Kai, not to the chat
        harness.llm.script(Reply(text="Not for long."))
        await harness.service.generate_as(chat.id, "kai")
        reply = await harness.finished(chat.id)
        assert speaker(reply) == "kai"
        assert "KAI-LORE" in json.dumps(harness.llm.chat_requests[-1]["messages"])
        # The inspector names the book and the character scope it came through.
        record = harness.tree.turn_record(reply.id).prompt
        assert isinstance(record, dict)
        lore = [r for r in record["lore"] if r.get("activated")]
        assert [(r["kb_name"], r["scope"]) for r in lore] == [("Kai's book", "character")]


def test_an_imported_sillytavern_group_chat_knows_who_spoke(tree: TurnTree) -> None:
    group = parse_group_file(
        json.dumps(group_document(["Ann.png", "Dora.png"], activation_strategy=1)), "g.json"
    )
    lines = [
        chat_message("User", "Hi both", is_user=True),
        chat_message("Ann", "Hello!", original_avatar="Ann.png"),
    ]
    log = parse_chat_jsonl(group_chat_jsonl(lines), "g.jsonl")
    imported, warnings = import_st_group_chat(tree, log, group, project_id="p")
    conversation = tree.conversation(imported.conversation_id)
    assert conversation.title == "The Party"
    group_settings = conversation.settings.group
    assert group_settings is not None
    assert [m.character_id for m in group_settings.members] == ["Ann.png", "Dora.png"]
    assert member_snapshots(conversation)["Dora.png"].card == {"name": "Dora"}
    assert len(warnings) == 2  # no card for either member
    # Ann's reply is known as Ann's by its original_avatar: list order asks Dora next.
    assert choose_speaker(tree, conversation, conversation.pointer) == "Dora.png"


async def settled(harness: Harness, conversation_id: str, messages: int) -> list[Message]:
    """The active path once it has ``messages`` messages and nothing is being written."""
    for _ in range(int(WAIT_S / 0.02)):
        path = harness.tree.active_path(conversation_id)
        idle = not harness.service.running(conversation_id)
        if len(path) >= messages and idle and all(m.status != "streaming" for m in path):
            return path
        await asyncio.sleep(0.02)
    raise AssertionError("the group did not finish answering")


async def test_in_list_order_every_member_answers_the_users_message_in_turn(
    harness: Harness,
) -> None:
    chat = harness.service.create_group_conversation(
        ["sera", "kai", "mei"], group=GroupSettings(activation_strategy="list")
    )
    harness.llm.script(Reply(text="One."), Reply(text="Two."), Reply(text="Three."))
    await harness.service.send(chat.id, "Good morning, all.", expected_version=None)
    path = await settled(harness, chat.id, 7)
    replies = path[4:]
    assert [(speaker(m), m.content) for m in replies] == [
        ("sera", "One."),
        ("kai", "Two."),
        ("mei", "Three."),
    ]
    cards = [
        "\n".join(m["content"] for m in r["messages"] if m["role"] == "system")
        for r in harness.llm.chat_requests[-3:]
    ]
    assert ["SERA-CARD" in c for c in cards] == [True, False, False]
    assert ["KAI-CARD" in c for c in cards] == [False, True, False]
    assert ["MEI-CARD" in c for c in cards] == [False, False, True]


async def test_stopping_a_reply_ends_the_groups_round(harness: Harness) -> None:
    chat = harness.service.create_group_conversation(
        ["sera", "kai", "mei"], group=GroupSettings(activation_strategy="list")
    )
    harness.llm.script(Reply(text="I will talk for a long time", hold_after_chunks=2))
    sent = await harness.service.send(chat.id, "Hello.", expected_version=None)
    assert sent.assistant_message is not None
    reply_id = sent.assistant_message.id
    for _ in range(int(WAIT_S / 0.01)):
        if harness.tree.message(reply_id).content:
            break
        await asyncio.sleep(0.01)
    stopped = await harness.service.stop(chat.id)
    assert stopped is not None and stopped.status == "partial"
    # The rest of the round (Kai, then Mei) sees the stop and starts nothing.
    await asyncio.gather(*harness.service._rounds)
    assert not harness.service.running(chat.id)
    path = harness.tree.active_path(chat.id)
    assert len(path) == 5 and speaker(path[-1]) == "sera"


async def test_each_members_other_greetings_are_swipes_of_their_greeting(
    tmp_path: Path, llm: ReplayLLMServer
) -> None:
    changes = {
        "sera": {"alternate_greetings": ["{{char}} waves."], "group_only_greetings": ["All here?"]},
        "kai": {"alternate_greetings": ["Storms, {{user}}."]},
    }
    async with running_harness(tmp_path, llm, changes=changes) as harness:
        chat = harness.service.create_group_conversation(["sera", "kai", "mei"])
        path = harness.tree.active_path(chat.id)
        # The chat opens on each member's first message, as before.
        assert [m.content for m in path] == ["I am Seraphina.", "Kai here.", "Mei nods at User."]
        sera_swipes = harness.tree.children(chat.id, None)
        assert [m.content for m in sera_swipes] == [
            "I am Seraphina.",
            "Seraphina waves.",
            "All here?",
        ]
        assert {speaker(m) for m in sera_swipes} == {"sera"}
        kai_swipes = harness.tree.children(chat.id, path[0].id)
        assert [(m.name, m.content) for m in kai_swipes] == [
            ("Kai", "Kai here."),
            ("Kai", "Storms, User."),
        ]
        assert [m.content for m in harness.tree.children(chat.id, path[1].id)] == [
            "Mei nods at User."
        ]


async def test_joined_cards_put_every_members_character_note_in_the_prompt(
    tmp_path: Path, llm: ReplayLLMServer
) -> None:
    def note(text: str) -> dict[str, Any]:
        return {"extensions": {"depth_prompt": {"prompt": text, "depth": 1, "role": "system"}}}

    changes = {
        "sera": note("SERA-NOTE: {{char}} guards."),
        "kai": note("KAI-NOTE: {{char}} broods."),
        "mei": note("MEI-NOTE: muted."),
    }
    async with running_harness(tmp_path, llm, changes=changes) as harness:
        joined = GroupSettings(
            generation_mode="append", members=[GroupMember(character_id="mei", muted=True)]
        )
        chat = harness.service.create_group_conversation(["sera", "kai", "mei"], group=joined)
        harness.llm.script(Reply(text="Hm."))
        await harness.service.generate_as(chat.id, "kai")
        await harness.finished(chat.id)
        system = harness.sent_system_text()
        assert "SERA-NOTE: Seraphina guards." in system
        assert "KAI-NOTE: Kai broods." in system
        assert "MEI-NOTE" not in system  # muted and not speaking
        # Swap mode: the speaker's own note only.
        swapped = GroupSettings(generation_mode="swap")
        other = harness.service.create_group_conversation(["sera", "kai"], group=swapped)
        harness.llm.script(Reply(text="Hm."))
        await harness.service.generate_as(other.id, "kai")
        await harness.finished(other.id)
        system = harness.sent_system_text()
        assert "KAI-NOTE: Kai broods." in system and "SERA-NOTE" not in system
