"""The corpus MVU card's EJS entry 阶段指导, rendered in a chat at the card's initial state:
the 磨合期 block, and none of the template's code."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from storyloom.chat.store.snapshot import ContextSnapshot
from storyloom.project.knowledge_import import import_knowledge_file
from storyloom.project.knowledge_service import KnowledgeService
from storyloom.project.project_file import init_project
from storyloom.store.database import Database
from storyloom.testing.replay_server import ReplayLLMServer
from tests.chat.conftest import llm_settings, running_chat_service

MVU_CARD = "zh_card_ai_v3json_mvu_27entries.json"
STATUS_BAR_CARD = "zh_card_aozora_ri_mvu_statusbar_v2+v3.png"


async def first_snapshot(tmp_path: Path, card: Path) -> ContextSnapshot:
    """The snapshot of the first turn of a new chat with ``card`` (imported with its book)."""
    project = tmp_path / "project"
    init_project(project)
    summary = import_knowledge_file(card, project_dir=project, global_folder=tmp_path / "global")
    assert summary.character_file is not None
    database = Database(tmp_path / "storyloom.sqlite3")
    with ReplayLLMServer(models=["test-model"]) as llm:
        settings = llm_settings(llm)
        knowledge = KnowledgeService(
            tmp_path / "home", project, settings=lambda: settings, database=database
        )
        try:
            async with running_chat_service(project, database, llm, knowledge=knowledge) as chat:
                conversation = chat.create_conversation(
                    character_id=Path(summary.character_file).stem
                )
                return await chat.snapshot(conversation, conversation.pointer)
        finally:
            await knowledge.aclose()
            database.close()


async def test_the_phase_guide_renders_its_first_phase_at_the_initial_state(
    tmp_path: Path, corpus_sample: Callable[[str], Path]
) -> None:
    snapshot = await first_snapshot(tmp_path, corpus_sample(MVU_CARD))
    guide = next(h for h in snapshot.lore if h.title == "阶段指导")
    text = guide.content.strip()
    assert text.startswith("磨合期:")
    assert "损友成型:" not in text and "<%" not in text and "getvar" not in text
    assert not [p for p in snapshot.template_problems if "阶段指导" in p.name]


async def test_the_status_bar_cards_templates_render_at_its_initial_state(
    tmp_path: Path, corpus_sample: Callable[[str], Path]
) -> None:
    snapshot = await first_snapshot(tmp_path, corpus_sample(STATUS_BAR_CARD))
    assert snapshot.template_problems == []
    assert not [h for h in snapshot.lore if "<%" in h.content]
