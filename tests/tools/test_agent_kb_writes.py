"""An agent deletes and retires knowledge entries (seed 000 §2.2.3) through a real agent
turn: the model (replay server) writes the TAM calls, the profile's KB write globs decide,
and every write bumps the KB's version. The model is the attacker here: it names a KB
outside its write globs and must be refused with the file left as it was."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from storyloom.knowledge.caiu import CAIU, Content, ManagementMetadata
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.project.project_knowledge import add_local_knowledge_base
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.tools.agent_support import AgentWorld, agent_world, tam_call


@pytest.fixture
async def world(tmp_path: Path, llm: ReplayLLMServer) -> AsyncIterator[AgentWorld]:
    async with agent_world(tmp_path, llm) as made:
        entries = [
            CAIU(id="dragon", displayName="Dragon", content=Content(value="It sleeps.")),
        ]
        add_local_knowledge_base(
            made.project, KnowledgeBase(kb_displayName="Lore", entries=entries), name="Lore"
        )
        notes = [
            CAIU(id="draft", displayName="Draft", content=Content(value="A guess.")),
            CAIU(id="rumour", displayName="Rumour", content=Content(value="The inn burned.")),
            CAIU(
                id="index",
                displayName="Index",
                content=Content(value="See the draft."),
                management_metadata=ManagementMetadata(child_ids=["rumour"], related_ids=["draft"]),
            ),
        ]
        add_local_knowledge_base(
            made.project, KnowledgeBase(kb_displayName="Notes", entries=notes), name="Notes"
        )
        assert made.host.knowledge is not None
        made.host.knowledge.reload()
        yield made


def kb_file(world: AgentWorld, name: str) -> dict[str, Any]:
    assert world.host.knowledge is not None
    loaded = world.host.knowledge.snapshot().knowledge.catalog.find(name)[0]
    data: dict[str, Any] = json.loads((loaded.folder / "knowledge.json").read_text())
    return data


async def test_an_agent_deletes_and_retires_entries_only_within_its_write_globs(
    world: AgentWorld, llm: ReplayLLMServer
) -> None:
    world.save_profile(
        tool_ids_inventory=["kb:DeleteEntry", "kb:MarkObsolete"],
        protocol="tam",
        kb_access={"read": ["*"], "write": ["Notes"]},
    )
    lore_before = kb_file(world, "Lore")
    calls = "\n".join(
        [
            tam_call("kb:DeleteEntry", kb="Lore", entry="Dragon"),
            tam_call("kb:MarkObsolete", kb="Lore", entry="dragon", reason="x"),
            tam_call("kb:DeleteEntry", kb="Notes", entry="Draft"),
            tam_call("kb:MarkObsolete", kb="Notes", entry="Rumour", reason="The inn stands."),
        ]
    )
    llm.script(Reply(text=calls), Reply(text="Done."))
    run = await world.run_agent("Tidy the notes.")
    assert run.result.status == "completed", run.result.errors
    steps = run.outputs["steps"]
    assert [(s["tool"], s["ok"]) for s in steps] == [
        ("kb:DeleteEntry", False),
        ("kb:MarkObsolete", False),
        ("kb:DeleteEntry", True),
        ("kb:MarkObsolete", True),
    ]
    assert "may not write to knowledge base 'Lore'" in steps[0]["error"]
    assert "may not write to knowledge base 'Lore'" in steps[1]["error"]
    assert kb_file(world, "Lore") == lore_before

    notes = kb_file(world, "Notes")
    by_id = {e["id"]: e for e in notes["entries"]}
    assert sorted(by_id) == ["index", "rumour"]
    assert by_id["index"]["management_metadata"]["related_ids"] == []
    assert by_id["index"]["management_metadata"]["child_ids"] == ["rumour"]
    rumour = by_id["rumour"]["management_metadata"]
    assert rumour["is_enabled"] is False and "obsolete" in rumour["tags"]
    assert "The inn stands." in rumour["author_notes"]
    assert rumour["source"] == "agent_generated"
    # Two writes, two versions.
    assert notes["kb_version"] == "1.0.2"
    assert steps[2]["result"]["kbVersion"] == "1.0.1"
    assert steps[3]["result"]["kbVersion"] == "1.0.2"
