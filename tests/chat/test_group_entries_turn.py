"""Group entries in a chat turn, against the scripted server (seed 000 2.2.1): a group
sends its children's texts in ``child_ids`` order inside its own prefix and suffix, never
its editor-only content, and an empty ``group_container`` sends nothing at all."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from storyloom.chat.service.conversations import ChatService
from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.project.knowledge_service import KnowledgeService
from storyloom.project.project_file import init_project
from storyloom.project.project_knowledge import add_local_knowledge_base
from storyloom.store.database import Database
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.chat.conftest import llm_settings, running_chat_service, write_characters


def entry(entry_id: str, content: str, constant: bool = False, **fields: Any) -> CAIU:
    return CAIU.model_validate(
        {
            "id": entry_id,
            "displayName": entry_id,
            "content": {"value": content},
            "activation_criteria": {"constant": constant},
            **fields,
        }
    )


def wrapped(tag: str) -> dict[str, Any]:
    return {
        "prefix": {"text": f"<{tag}>", "is_enabled": True},
        "suffix": {"text": f"</{tag}>", "is_enabled": True},
    }


BOOK = KnowledgeBase(
    kb_id="kb_groups",
    kb_displayName="Groups",
    entries=[
        entry(
            "night",
            "NIGHT-EDITOR-NOTE",
            constant=True,
            usage_metadata=wrapped("night"),
            management_metadata={"child_ids": ["tide", "wraith"]},
        ),
        entry("wraith", "WRAITH-LORE"),
        entry("tide", "TIDE-LORE"),
        entry(
            "shelf",
            "SHELF-EDITOR-NOTE",
            constant=True,
            entry_type="group_container",
            usage_metadata=wrapped("shelf"),
        ),
    ],
)


@pytest.fixture
async def service(tmp_path: Path, llm: ReplayLLMServer) -> AsyncIterator[ChatService]:
    project = tmp_path / "project"
    init_project(project)
    write_characters(project, {"keeper": {"name": "Keeper", "knowledge_bases": ["kb_groups"]}})
    add_local_knowledge_base(project, BOOK)
    database = Database(tmp_path / "storyloom.sqlite3")
    settings = llm_settings(llm)
    knowledge = KnowledgeService(
        tmp_path / "home", project, settings=lambda: settings, database=database
    )
    try:
        async with running_chat_service(project, database, llm, knowledge=knowledge) as chats:
            yield chats
    finally:
        await knowledge.aclose()
        database.close()


async def test_groups_send_their_children_and_an_empty_container_sends_nothing(
    service: ChatService, llm: ReplayLLMServer
) -> None:
    chat = service.create_conversation(character_id="keeper")
    llm.script(Reply(text="Yes."))
    await service.send(chat.id, "Tell me of the night.", expected_version=None)
    assert await service.wait(chat.id) is not None
    sent = "\n".join(str(m["content"]) for m in llm.chat_requests[-1]["messages"])
    assert "<night>TIDE-LORE\nWRAITH-LORE</night>" in sent
    assert "EDITOR-NOTE" not in sent
    assert "<shelf>" not in sent and "</shelf>" not in sent
