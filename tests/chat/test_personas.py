"""Personas: the files, the project default, and which persona a turn speaks as.

The turn tests run the real chat service (SQLite turn tree, the real pipeline, the replay
LLM over HTTP) and read the prompt the model was sent."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from storyloom.chat.personalab.personas import Persona, PersonaLibrary, persona_settings
from storyloom.chat.service.conversations import ChatService
from storyloom.chat.store.conversation import ConversationSettings
from storyloom.chat.store.turn_tree import ChatError, TurnTree
from storyloom.core.errors import Conflict, FileFormatError, InvalidInput, NotFound
from storyloom.store.database import Database
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.chat.conftest import running_chat_service, write_characters

WAIT_S = 10.0
"""Only a guard against a hanging test."""
CARD: dict[str, Any] = {
    "name": "Seraphina",
    "description": "A guardian of the forest who knows {{user}}.",
    "first_mes": "Welcome, {{user}}.",
    "alternate_greetings": ["Oh, {{user}}! You woke up.", "Quiet, {{user}}."],
}


@pytest.fixture
def personas(project: Path) -> PersonaLibrary:
    return PersonaLibrary(project)


# -- the files -------------------------------------------------------------------------------


def test_the_first_persona_becomes_the_default_and_ids_come_from_names(
    personas: PersonaLibrary, project: Path
) -> None:
    ann = personas.create(Persona(name="Ann", description="A traveller."))
    bob = personas.create(Persona(name="Ann", description="Another Ann."))
    assert ann.id != bob.id
    assert (project / "presets" / "personas" / f"{ann.id}.json").is_file()
    assert personas.default_id() == ann.id
    personas.set_default(bob.id)
    assert personas.default_id() == bob.id
    personas.delete(bob.id)
    assert personas.default_id() is None
    assert [p.name for p in personas.personas()[0]] == ["Ann"]


def test_a_stale_version_is_a_conflict_and_changes_nothing(personas: PersonaLibrary) -> None:
    ann = personas.create(Persona(name="Ann"))
    opened = personas.version(ann.id)
    personas.update(ann.id, Persona(name="Ann", description="first tab"), expected_version=opened)
    with pytest.raises(Conflict):
        personas.update(
            ann.id, Persona(name="Ann", description="second tab"), expected_version=opened
        )
    assert personas.get(ann.id).description == "first tab"


def test_a_bad_persona_file_names_file_and_field_and_is_listed_as_a_problem(
    personas: PersonaLibrary, project: Path
) -> None:
    folder = project / "presets" / "personas"
    folder.mkdir(parents=True)
    (folder / "broken.json").write_text(json.dumps({"name": ""}), encoding="utf-8")
    with pytest.raises(FileFormatError) as caught:
        personas.get("broken")
    assert "broken.json" in str(caught.value)
    assert caught.value.problems[0].field == "name"
    good, bad = personas.personas()
    assert good == [] and [p.id for p in bad] == ["broken"]
    # A chat that names it still gets a turn: it falls back (here to nothing).
    assert personas.resolve("broken") is None


def test_resolve_takes_the_chats_persona_else_the_default(personas: PersonaLibrary) -> None:
    ann = personas.create(Persona(name="Ann"))
    bob = personas.create(Persona(name="Bob"))
    assert personas.resolve(None) == personas.get(ann.id)
    assert personas.resolve(bob.id) == personas.get(bob.id)
    assert personas.resolve("gone") == personas.get(ann.id)
    settings = persona_settings(ConversationSettings(user_name="User"), personas.get(bob.id))
    assert settings.user_name == "Bob"


def test_an_avatar_replaces_the_previous_one_and_goes_with_the_persona(
    personas: PersonaLibrary, project: Path
) -> None:
    ann = personas.create(Persona(name="Ann"))
    personas.set_avatar(ann.id, b"\x89PNG\r\n\x1a\nxx", "image/png")
    personas.set_avatar(ann.id, b"\xff\xd8\xffxx", "image/jpeg")
    folder = project / "presets" / "personas"
    assert sorted(p.name for p in folder.iterdir() if p.stem == ann.id) == [
        f"{ann.id}.jpg",
        f"{ann.id}.json",
    ]
    personas.delete(ann.id)
    assert not any(p.stem == ann.id for p in folder.iterdir())
    with pytest.raises(NotFound):
        personas.get(ann.id)


def test_ids_that_are_not_file_stems_are_refused(personas: PersonaLibrary) -> None:
    with pytest.raises(ChatError):
        personas.get("../x")


# -- turns -----------------------------------------------------------------------------------


@dataclass
class Harness:
    service: ChatService
    tree: TurnTree
    llm: ReplayLLMServer
    personas: PersonaLibrary

    async def reply(self, conversation_id: str, text: str) -> None:
        self.llm.script(Reply(text="Hm."))
        await self.service.send(conversation_id, text, expected_version=None)
        await asyncio.wait_for(self.service.wait(conversation_id), WAIT_S)

    def prompt(self) -> str:
        messages = self.llm.chat_requests[-1]["messages"]
        return "\n".join(str(m.get("content")) for m in messages)


@pytest.fixture
async def harness(project: Path, db: Database, llm: ReplayLLMServer) -> AsyncIterator[Harness]:
    write_characters(project, {"sera": CARD})
    async with running_chat_service(project, db, llm) as service:
        yield Harness(service, service.tree, llm, PersonaLibrary(project))


async def test_without_personas_the_chats_own_user_name_and_persona_are_used(
    harness: Harness,
) -> None:
    chat = harness.service.create_conversation(
        character_id="sera", user_name="Old", persona="Old's own words."
    )
    assert harness.tree.active_path(chat.id)[0].content == "Welcome, Old."
    await harness.reply(chat.id, "Hi")
    assert "Old's own words." in harness.prompt()
    assert "who knows Old." in harness.prompt()


async def test_the_default_persona_names_the_user_and_describes_them(harness: Harness) -> None:
    harness.personas.create(Persona(name="Ann", description="Ann is a cartographer."))
    chat = harness.service.create_conversation(character_id="sera")
    assert harness.tree.active_path(chat.id)[0].content == "Welcome, Ann."
    await harness.reply(chat.id, "Hi")
    user_message = harness.tree.active_path(chat.id)[-2]
    assert user_message.role == "user" and user_message.name == "Ann"
    assert "Ann is a cartographer." in harness.prompt()
    assert "who knows Ann." in harness.prompt()


async def test_changing_the_chats_persona_holds_from_the_next_turn(harness: Harness) -> None:
    harness.personas.create(Persona(name="Ann", description="Ann is a cartographer."))
    bob = harness.personas.create(Persona(name="Bob", description="Bob is a smith."))
    chat = harness.service.create_conversation(character_id="sera")
    await harness.reply(chat.id, "Hi")
    assert "Ann is a cartographer." in harness.prompt()
    current = harness.tree.conversation(chat.id)
    harness.service.update_conversation(
        chat.id,
        expected_version=current.version,
        settings=current.settings.model_copy(update={"persona_id": bob.id}),
    )
    await harness.reply(chat.id, "Again")
    prompt = harness.prompt()
    assert "Bob is a smith." in prompt and "Ann is a cartographer." not in prompt
    assert "who knows Bob." in prompt
    names = [m.name for m in harness.tree.active_path(chat.id) if m.role == "user"]
    assert names == ["Ann", "Bob"]


async def test_a_new_chat_can_start_with_a_chosen_persona(harness: Harness) -> None:
    harness.personas.create(Persona(name="Ann"))
    bob = harness.personas.create(Persona(name="Bob"))
    chat = harness.service.create_conversation(character_id="sera", persona_id=bob.id)
    assert chat.settings.persona_id == bob.id
    assert harness.tree.active_path(chat.id)[0].content == "Welcome, Bob."
    with pytest.raises(InvalidInput) as caught:
        harness.service.create_conversation(character_id="sera", persona_id="nobody")
    assert [p.field for p in caught.value.problems] == ["persona_id"]


async def test_swiping_the_first_message_shows_each_greeting(harness: Harness) -> None:
    harness.personas.create(Persona(name="Ann"))
    chat = harness.service.create_conversation(character_id="sera")
    first = harness.tree.active_path(chat.id)[0]
    seen = []
    for index in range(3):
        harness.service.swipe(chat.id, first.id, index, expected_version=None)
        seen.append(harness.tree.active_path(chat.id)[0].content)
    assert seen == ["Welcome, Ann.", "Oh, Ann! You woke up.", "Quiet, Ann."]
