"""Global variables: the user's, kept in the data directory, seen by every chat.

The service tests run a real pipeline, SQLite turn tree and the scripted HTTP model
server, as tests/chat/test_chat_service.py does.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from storyloom.chat.service.conversations import ChatService
from storyloom.chat.store.global_variables import FILE_NAME, GlobalVariables
from storyloom.chat.store.message import Message
from storyloom.chat.store.turn_tree import TurnTree
from storyloom.core.errors import FileFormatError
from storyloom.store.database import Database
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.chat.conftest import running_chat_service, write_characters

WAIT_S = 10.0
"""Only a guard against a hanging test; nothing depends on how long anything takes."""

CARD: dict[str, Any] = {
    "name": "Seraphina",
    "description": (
        "Visits: {{incglobalvar::visits}}. Last: {{$guest || nobody}}.{{$guest = {{user}}}}"
    ),
    "personality": "Idle for {{idle_duration}}.",
    "first_mes": "Welcome back, {{$guest ?? stranger}}.",
}


# -- the file -----------------------------------------------------------------------------


def test_no_file_yet_means_no_global_variables(tmp_path: Path) -> None:
    assert GlobalVariables.in_home(tmp_path).load() == {}


def test_a_turn_writes_only_what_it_changed_over_what_is_there_now(tmp_path: Path) -> None:
    store = GlobalVariables.in_home(tmp_path)
    store.save_changes({}, {"a": 1, "b": 1})
    before = store.load()
    # another chat's turn finished meanwhile
    store.save_changes(before, {**before, "b": 2, "c": 3})
    assert store.save_changes(before, {"a": 5, "b": 1}) is True
    assert store.load() == {"a": 5, "b": 2, "c": 3}
    assert store.save_changes({"a": 5}, {}) is True
    assert store.load() == {"b": 2, "c": 3}
    assert store.save_changes({"b": 2}, {"b": 2}) is False


def test_a_broken_file_is_refused_with_its_name_and_reason(tmp_path: Path) -> None:
    path = tmp_path / FILE_NAME
    for text, reason in (("{oops", "not JSON"), ("[1, 2]", "JSON object"), (b"\xff", "UTF-8")):
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
        with pytest.raises(FileFormatError) as caught:
            GlobalVariables(path).load()
        assert FILE_NAME in str(caught.value) and reason in str(caught.value)


# -- chats --------------------------------------------------------------------------------


@dataclass
class Harness:
    service: ChatService
    tree: TurnTree
    llm: ReplayLLMServer
    home: Path

    def new_chat(self) -> str:
        return self.service.create_conversation(character_id="sera", user_name="Ann").id

    async def turn(self, conversation_id: str, text: str) -> tuple[Message, str]:
        """The reply to ``text``, and the system prompt the model was sent."""
        self.llm.script(Reply(text="Hello."))
        await self.service.send(conversation_id, text, expected_version=None)
        reply = await asyncio.wait_for(self.service.wait(conversation_id), WAIT_S)
        assert reply is not None and reply.status == "complete", reply
        messages = self.llm.chat_requests[-1]["messages"]
        return reply, "\n".join(m["content"] for m in messages if m["role"] == "system")


@pytest.fixture
async def harness(
    tmp_path: Path, project: Path, db: Database, llm: ReplayLLMServer
) -> AsyncIterator[Harness]:
    write_characters(project, {"sera": CARD})
    home = tmp_path / "home"
    global_variables = GlobalVariables.in_home(home)
    async with running_chat_service(project, db, llm, global_variables=global_variables) as service:
        yield Harness(service, service.tree, llm, home)


async def test_a_global_variable_set_in_one_chat_is_seen_in_another(harness: Harness) -> None:
    first = harness.new_chat()
    _, prompt = await harness.turn(first, "Hi")
    assert "Visits: 1. Last: nobody." in prompt
    saved = json.loads((harness.home / FILE_NAME).read_text(encoding="utf-8"))
    assert saved == {"visits": 1, "guest": "Ann"}
    second = harness.new_chat()
    greeting = harness.tree.active_path(second)[0]
    assert greeting.content == "Welcome back, Ann."
    _, prompt = await harness.turn(second, "Hello again")
    assert "Visits: 2. Last: Ann." in prompt
    assert json.loads((harness.home / FILE_NAME).read_text(encoding="utf-8"))["visits"] == 2
    # the chat's own variables are not touched
    reply = harness.tree.active_path(second)[-1]
    assert harness.tree.state_at(reply.id).variables == {}


async def test_idle_duration_counts_from_the_users_previous_message(harness: Harness) -> None:
    chat = harness.new_chat()
    _, prompt = await harness.turn(chat, "Hi")
    assert "Idle for just now." in prompt  # no earlier message of the user's
    _, prompt = await harness.turn(chat, "Still there?")
    assert re.search(r"Idle for (a few seconds|a minute|\d+ minutes)\.", prompt), prompt


async def test_a_broken_global_variables_file_is_left_alone_and_the_chat_goes_on(
    harness: Harness,
) -> None:
    harness.home.mkdir(parents=True, exist_ok=True)
    path = harness.home / FILE_NAME
    path.write_text("{broken", encoding="utf-8")
    chat = harness.new_chat()
    _, prompt = await harness.turn(chat, "Hi")
    assert "Visits: 1. Last: nobody." in prompt
    assert path.read_text(encoding="utf-8") == "{broken"


async def test_a_messages_global_macros_act_once_in_the_turn_that_answers_it(
    harness: Harness,
) -> None:
    chat = harness.new_chat()
    await harness.turn(chat, "Knock knock.{{incglobalvar::knocks}}")
    await harness.turn(chat, "Anyone?")
    saved = json.loads((harness.home / FILE_NAME).read_text(encoding="utf-8"))
    assert saved["knocks"] == 1 and saved["visits"] == 2
