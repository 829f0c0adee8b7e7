"""Fixtures shared by the chat tests: a migrated database and a turn tree over it, a new
project and its presets, the scripted model server, and a chat service over a project of
character cards."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from storyloom.chat.personalab.library import PresetLibrary
from storyloom.chat.service.conversations import ChatService
from storyloom.chat.store.turn_tree import TurnTree
from storyloom.core.settings import ChatEndpoint, Settings
from storyloom.plugins import node_registry
from storyloom.project.knowledge_import import import_knowledge_file
from storyloom.project.knowledge_service import KnowledgeService
from storyloom.project.project_file import init_project
from storyloom.store.database import Database
from storyloom.testing.replay_server import ReplayLLMServer
from storyloom.workflow.node_type import WorkflowServices
from storyloom.workflow.runner import WorkflowRunner

ST_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sillytavern"


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    """A migrated database in its own folder, so ``tmp_path`` holds only what a test writes."""
    database = Database(tmp_path / "db" / "chat.sqlite3")
    yield database
    database.close()


@pytest.fixture
def tree(db: Database) -> TurnTree:
    return TurnTree(db)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A new, empty project."""
    root = tmp_path / "project"
    init_project(root)
    return root


@pytest.fixture
def library(project: Path) -> PresetLibrary:
    return PresetLibrary(project)


def import_card(project: Path, name: str) -> str:
    """Import the SillyTavern card ``tests/fixtures/sillytavern/<name>``; its preset id."""
    summary = import_knowledge_file(
        ST_FIXTURES / name, project_dir=project, global_folder=project.parent / "global"
    )
    assert summary.character_file is not None
    return Path(summary.character_file).stem


@pytest.fixture
def llm() -> Iterator[ReplayLLMServer]:
    """The scripted OpenAI-compatible server, serving "test-model"."""
    with ReplayLLMServer(models=["test-model"]) as server:
        yield server


def write_characters(project: Path, cards: Mapping[str, dict[str, Any]]) -> None:
    """``cards`` (id → card) as the project's character presets."""
    characters = project / "presets" / "characters"
    characters.mkdir(parents=True)
    for character_id, card in cards.items():
        (characters / f"{character_id}.json").write_text(json.dumps(card), encoding="utf-8")


def llm_settings(llm: ReplayLLMServer) -> Settings:
    """``llm``'s "test-model" as the user and the agent model, tried once."""
    endpoint = ChatEndpoint(
        base_url=llm.url, model="test-model", max_retries=0, timeout_s=10, connect_timeout_s=5
    )
    return Settings(user_llm=endpoint, agent_llm=endpoint)


@asynccontextmanager
async def running_chat_service(
    project: Path,
    database: Database,
    llm: ReplayLLMServer,
    *,
    knowledge: KnowledgeService | None = None,
    **options: Any,
) -> AsyncIterator[ChatService]:
    """The chat service of ``project`` with the built-in pipeline, answered by ``llm``;
    ``options`` go to :class:`ChatService` (``publish``, ``global_variables``…). Its turns
    are awaited when the block ends."""
    settings = llm_settings(llm)
    services = WorkflowServices(
        settings=lambda: settings, project_dir=project, database=database, knowledge=knowledge
    )
    runner = WorkflowRunner(node_registry(entry_points=False), services)
    service = ChatService(TurnTree(database), runner, services, project_id="p", **options)
    try:
        yield service
    finally:
        await service.aclose()
