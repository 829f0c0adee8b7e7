"""A chat turn whose character answers as an agent: the real chat service and pipeline,
a real ToolHost (built-in tools, policy, audit in SQLite) and the replay server as the
model. One turn is one assistant message with its tool calls folded inside it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from storyloom.chat.service.conversations import ChatService
from storyloom.chat.service.reply_run import ChatEvent, StreamDelta, ToolStepAdded
from storyloom.chat.store.conversation import ConversationSettings
from storyloom.chat.store.message import Message
from storyloom.chat.store.turn_tree import TurnTree
from storyloom.core.settings import SettingsStore
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.chat.conftest import write_characters
from tests.tools.agent_support import AgentWorld, agent_world, tam_call

WAIT_S = 10.0
CARD: dict[str, Any] = {"name": "Seraphina", "description": "A forest guardian."}
ROLL = tam_call("chat:RollDice", notation="10d1000")
SET_MOOD = tam_call("chat:SetVariable", name="mood", value="hopeful")


@pytest.fixture
def llm() -> Iterator[ReplayLLMServer]:
    with ReplayLLMServer(models=["test-model"]) as server:
        yield server


@dataclass
class Chat:
    world: AgentWorld
    service: ChatService
    tree: TurnTree
    llm: ReplayLLMServer
    events: list[ChatEvent] = field(default_factory=list)

    def new_chat(self, **settings: Any) -> str:
        settings.setdefault("agent_profile", "dm")
        conversation = self.service.create_conversation(
            character_id="sera", settings=ConversationSettings(**settings)
        )
        return conversation.id

    async def send(self, conversation_id: str, text: str) -> Message:
        await self.service.send(conversation_id, text, expected_version=None)
        return await self.finished(conversation_id)

    async def finished(self, conversation_id: str) -> Message:
        message = await asyncio.wait_for(self.service.wait(conversation_id), WAIT_S)
        assert message is not None
        return message

    async def swipe(self, conversation_id: str, message: Message, **options: Any) -> Message:
        await self.service.generate(conversation_id, kind="swipe", message_id=message.id, **options)
        return await self.finished(conversation_id)


@pytest.fixture
async def chat(tmp_path: Path, llm: ReplayLLMServer) -> AsyncIterator[Chat]:
    async with agent_world(tmp_path, llm) as world:
        world.save_profile(
            tool_ids_inventory=["chat:RollDice", "chat:SetVariable"],
            protocol="tam",
            prompt="You run the game.\n\n{{{system:available_tools}}}",
        )
        write_characters(world.project, {"sera": CARD})
        events: list[ChatEvent] = []
        host = world.host
        tree = TurnTree(host.database)
        service = ChatService(
            tree, host.runner, host.runner.services, project_id="p", publish=events.append
        )
        try:
            yield Chat(world, service, tree, llm, events)
        finally:
            await service.aclose()


def rolls(message: Message) -> list[int]:
    steps = message.extra["tool_steps"]
    roll = next(s for s in steps if s["tool"] == "chat:RollDice")
    return [die for group in roll["result"]["rolls"] for die in group]


async def test_an_agent_turn_is_one_assistant_message_with_its_tool_steps(chat: Chat) -> None:
    conversation_id = chat.new_chat()
    chat.llm.script(
        Reply(text=f"The die tumbles.\n\n{ROLL}\n{SET_MOOD}"),
        Reply(text="Fortune smiles on you."),
    )
    reply = await chat.send(conversation_id, "I try the door.")
    assert reply.status == "complete", reply.error
    assert reply.content == "The die tumbles.\n\nFortune smiles on you."
    (user,) = [m for m in chat.tree.active_path(conversation_id) if m.role == "user"]
    assert [m.id for m in chat.tree.children(conversation_id, user.id)] == [reply.id]
    steps = reply.extra["tool_steps"]
    assert [(s["tool"], s["ok"]) for s in steps] == [
        ("chat:RollDice", True),
        ("chat:SetVariable", True),
    ]
    live = [e for e in chat.events if isinstance(e, ToolStepAdded)]
    assert [e.step for e in live] == steps and {e.message_id for e in live} == {reply.id}
    streamed = "".join(
        e.text for e in chat.events if isinstance(e, StreamDelta) and e.message_id == reply.id
    )
    assert streamed == reply.content
    assert chat.tree.state_at(reply.id).variables["mood"] == "hopeful"
    system = chat.llm.chat_requests[0]["messages"][0]["content"]
    assert system.startswith("You run the game.") and "chat:SetVariable" in system


async def test_a_swipe_replays_the_same_roll_and_a_reroll_rolls_again(chat: Chat) -> None:
    conversation_id = chat.new_chat()
    chat.llm.script(Reply(text=ROLL), Reply(text="First."))
    first = await chat.send(conversation_id, "Roll.")
    chat.llm.script(Reply(text=ROLL), Reply(text="Second."))
    swiped = await chat.swipe(conversation_id, first)
    assert swiped.id != first.id and swiped.content == "Second."
    assert rolls(swiped) == rolls(first)
    chat.llm.script(Reply(text=ROLL), Reply(text="Third."))
    rerolled = await chat.swipe(conversation_id, first, reroll=True)
    assert rolls(rerolled) != rolls(first)
    assert len(rolls(rerolled)) == 10


async def test_later_prompts_show_tool_results_but_not_the_stealth_ones(chat: Chat) -> None:
    chat.world.save_profile(
        tool_ids_inventory=["chat:RollDice", "chat:SetVariable"],
        protocol="tam",
        stealth_tools=["chat:Roll*"],
    )
    conversation_id = chat.new_chat()
    chat.llm.script(Reply(text=f"{ROLL}\n{SET_MOOD}"), Reply(text="The mood lifts."))
    await chat.send(conversation_id, "Roll and cheer up.")
    chat.llm.script(Reply(text="Onward."))
    await chat.send(conversation_id, "Go on.")
    history = chat.llm.chat_requests[-1]["messages"]
    earlier = next(m for m in history if m["role"] == "assistant" and "lifts" in m["content"])
    assert "tool:「始」chat:SetVariable「末」" in earlier["content"]
    assert "chat:RollDice" not in earlier["content"]
    assert earlier["content"].endswith("\n\nThe mood lifts.")


async def test_a_model_failure_mid_turn_keeps_the_text_and_the_steps(chat: Chat) -> None:
    conversation_id = chat.new_chat()
    chat.llm.script(
        Reply(text=f"Rolling.\n\n{ROLL}"),
        Reply(text="The door creaks open slowly", error_after_chunks=2),
    )
    reply = await chat.send(conversation_id, "Open it.")
    assert reply.status == "partial"
    assert reply.content == "Rolling.\n\nThe door"
    assert reply.error
    assert [s["tool"] for s in reply.extra["tool_steps"]] == ["chat:RollDice"]


async def test_a_cards_agent_profile_runs_only_once_the_user_confirms_it(chat: Chat) -> None:
    write_characters_again(chat)
    suggested = chat.new_chat(agent_profile=None)
    chat.llm.script(Reply(text="Hello."))
    await chat.send(suggested, "Hi.")
    assert "You run the game." not in str(chat.llm.chat_requests[-1]["messages"])
    consents = chat.service.agent_consents
    assert consents is not None
    consents.answer("sera", "dm")
    chat.llm.script(Reply(text="Hello again."))
    await chat.send(suggested, "Hi.")
    assert chat.llm.chat_requests[-1]["messages"][0]["content"].startswith("You run the game.")
    without = chat.new_chat(agent_profile="")
    chat.llm.script(Reply(text="Hello."))
    await chat.send(without, "Hi.")
    assert "You run the game." not in str(chat.llm.chat_requests[-1]["messages"])
    consents.answer("sera", None)
    chat.llm.script(Reply(text="Plain."))
    await chat.send(suggested, "Hi.")
    assert "You run the game." not in str(chat.llm.chat_requests[-1]["messages"])


def write_characters_again(chat: Chat) -> None:
    card = {**CARD, "extensions": {"storyloom": {"agent_profile": "dm"}}}
    path = chat.world.project / "presets" / "characters" / "sera.json"
    path.write_text(json.dumps(card), encoding="utf-8")


async def test_a_chat_naming_a_missing_agent_profile_fails_the_turn_and_says_why(
    chat: Chat,
) -> None:
    conversation_id = chat.new_chat(agent_profile="gone")
    chat.llm.script(Reply(text="A reply without the agent's tools."))
    reply = await chat.send(conversation_id, "Roll for me.")
    assert reply.status == "error"
    assert reply.error is not None and "agent profile 'gone' does not exist" in reply.error
    assert chat.llm.chat_requests == []
    assert reply.parent_id is not None
    assert chat.tree.message(reply.parent_id).content == "Roll for me."


async def test_an_agent_profile_on_a_text_completion_connection_is_a_clear_error(
    chat: Chat,
) -> None:
    store = SettingsStore(chat.world.home)
    settings = store.load().effective
    # The profile answers on the agent model (its model_role): that connection is a text API.
    text = settings.agent_llm.model_copy(update={"api": "llamacpp"})
    store.save(settings.model_copy(update={"agent_llm": text}))
    host = chat.world.host
    host.save_policy(host.policy())  # the host reads settings.json again after its writes
    conversation_id = chat.new_chat()
    reply = await chat.send(conversation_id, "I try the door.")
    assert reply.status == "error"
    assert reply.error is not None
    assert "agent profile 'dm' calls tools" in reply.error
    assert "uses 'llamacpp'" in reply.error
    assert not chat.llm.completion_requests and not chat.llm.chat_requests
