"""The built-in tools through the ToolManager: time, the knowledge tools within their KB
scopes, dice that replay with the turn, chat variables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from storyloom.core.errors import InvalidInput
from storyloom.knowledge.caiu import CAIU, Content
from storyloom.tools.builtin_tools import bumped_version, parse_dice
from tests.tools.tool_support import Tools, kb_access, make_tools


@pytest.fixture
def tools(tmp_path: Path) -> Tools:
    made = make_tools(tmp_path)
    made.add_kb(
        "Lore",
        [
            CAIU(
                id="dragon",
                displayName="Dragon",
                content=Content(value="The red dragon sleeps under Ember Hill."),
            ),
            CAIU(
                id="inn", displayName="Inn", content=Content(value="The Gilded Goose serves cider.")
            ),
        ],
    )
    made.add_kb("Notes", [])
    return made


def kb_file(tools: Tools, name: str) -> dict[str, Any]:
    loaded = tools.knowledge.snapshot().knowledge.catalog.find(name)[0]
    data: dict[str, Any] = json.loads((loaded.folder / "knowledge.json").read_text())
    return data


async def test_current_time_in_a_named_zone(tools: Tools) -> None:
    result = await tools.manager.call(
        "system:get_current_time", {"timezone": "Asia/Shanghai"}, tools.context()
    )
    assert result.ok and result.result["iso"].endswith("+08:00")
    bad = await tools.manager.call(
        "system:get_current_time", {"timezone": "Mars/Base"}, tools.context()
    )
    assert not bad.ok and "unknown time zone 'Mars/Base'" in (bad.error or "")


async def test_query_finds_entries_by_keywords(tools: Tools) -> None:
    result = await tools.manager.call("kb:Query", {"query": "dragon Ember Hill"}, tools.context())
    assert result.ok, result.error
    hits = result.result["hits"]
    assert hits and hits[0]["id"] == "dragon" and hits[0]["kbName"] == "Lore"


async def test_query_and_read_keep_to_the_readable_kbs(tools: Tools) -> None:
    ctx = tools.context(kb_access=kb_access(read=["Notes"]))
    result = await tools.manager.call("kb:Query", {"query": "dragon"}, ctx)
    assert result.ok and result.result["hits"] == []
    refused = await tools.manager.call("kb:ReadEntry", {"kb": "Lore", "entry": "Dragon"}, ctx)
    assert not refused.ok and "may not read knowledge base 'Lore'" in (refused.error or "")
    read = await tools.manager.call(
        "kb:ReadEntry", {"kb": "Lore", "entry": "Dragon"}, tools.context()
    )
    assert read.ok and read.result["content"].startswith("The red dragon")


async def test_writes_need_a_write_scope_and_leave_the_file_alone_without(tools: Tools) -> None:
    before = kb_file(tools, "Lore")
    args = {"kb": "Lore", "name": "Wyvern", "content": "A small cousin."}
    refused = await tools.manager.call("kb:CreateEntry", args, tools.context())
    assert not refused.ok and "may not write to knowledge base 'Lore'" in (refused.error or "")
    assert kb_file(tools, "Lore") == before
    ctx = tools.context(kb_access=kb_access(write=["Notes"]))
    refused = await tools.manager.call("kb:CreateEntry", args, ctx)
    assert not refused.ok


async def test_agent_written_entries_are_marked_agent_generated(tools: Tools) -> None:
    ctx = tools.context(kb_access=kb_access(write=["Lore"]))
    created = await tools.manager.call(
        "kb:CreateEntry",
        {"kb": "Lore", "name": "Wyvern", "content": "A small cousin.", "keywords": ["wyvern"]},
        ctx,
    )
    assert created.ok, created.error
    stored = [e for e in kb_file(tools, "Lore")["entries"] if e["displayName"] == "Wyvern"]
    assert len(stored) == 1
    assert stored[0]["management_metadata"]["source"] == "agent_generated"
    assert stored[0]["activation_criteria"]["keywords"] == ["wyvern"]
    updated = await tools.manager.call(
        "kb:UpdateEntry", {"kb": "Lore", "entry": "Inn", "content": "Closed."}, ctx
    )
    assert updated.ok, updated.error
    inn = next(e for e in kb_file(tools, "Lore")["entries"] if e["id"] == "inn")
    assert inn["content"]["value"] == "Closed."
    assert inn["management_metadata"]["source"] == "agent_generated"


async def test_a_swiped_turn_replays_its_entry_writes_instead_of_writing_them_again(
    tools: Tools,
) -> None:
    wyvern = {"kb": "Lore", "name": "Wyvern", "content": "A small cousin."}

    async def turn(turn_key: str, *calls: dict[str, Any]) -> list[Any]:
        ctx = tools.context(turn_key=turn_key, kb_access=kb_access(write=["Lore"]))
        results = [await tools.manager.call("kb:CreateEntry", call, ctx) for call in calls]
        assert all(r.ok for r in results), [r.error for r in results]
        return [r.result for r in results]

    def wyverns() -> list[dict[str, Any]]:
        return [e for e in kb_file(tools, "Lore")["entries"] if e["displayName"] == "Wyvern"]

    (first,) = await turn("conv-1:msg-7", wyvern)
    assert "replayed" not in first
    (again,) = await turn("conv-1:msg-7", wyvern)  # the swipe
    assert again["replayed"] and again["id"] == first["id"]
    assert len(wyverns()) == 1
    # Other words, a reroll, or a second identical write within one turn: new entries.
    await turn("conv-1:msg-7", {**wyvern, "content": "A large cousin."})
    await turn("conv-1:msg-7:msg-9", wyvern)
    await turn("conv-2:msg-1", wyvern, wyvern)
    assert len(wyverns()) == 5
    # Outside a chat turn (the Tools page, the CLI) every call writes.
    ctx = tools.context(kb_access=kb_access(write=["Lore"]))
    await tools.manager.call("kb:CreateEntry", wyvern, ctx)
    await tools.manager.call("kb:CreateEntry", wyvern, ctx)
    assert len(wyverns()) == 7


async def test_a_bad_entry_name_changes_nothing(tools: Tools) -> None:
    before = kb_file(tools, "Lore")
    ctx = tools.context(kb_access=kb_access(write=["*"]))
    result = await tools.manager.call(
        "kb:UpdateEntry", {"kb": "Lore", "entry": "Inn", "name": "a/b"}, ctx
    )
    assert not result.ok and "'/'" in (result.error or "")
    assert kb_file(tools, "Lore") == before


async def test_the_same_turn_key_replays_the_same_rolls(tools: Tools) -> None:
    async def rolls(turn_key: str) -> list[Any]:
        ctx = tools.context(turn_key=turn_key)
        out = []
        for notation in ("2d6+1", "2d6+1", "d20"):
            result = await tools.manager.call("chat:RollDice", {"notation": notation}, ctx)
            assert result.ok, result.error
            out.append(result.result)
        return out

    first = await rolls("conv-1/msg-7/swipe")
    assert first == await rolls("conv-1/msg-7/swipe")
    others = [await rolls(f"reroll-{n}") for n in range(5)]
    assert any(o != first for o in others)
    # The second 2d6+1 of a turn is its own roll, not a copy of the first.
    assert any(o[0] != o[1] for o in [first, *others])
    assert first[0]["total"] == sum(first[0]["rolls"][0]) + 1
    assert all(1 <= die <= 6 for die in first[0]["rolls"][0])


def test_dice_notation_is_checked() -> None:
    assert parse_dice("2d6+1") == [(1, 2, 6), (1, 1, 0)]
    assert parse_dice("d20 - 2") == [(1, 1, 20), (-1, 2, 0)]
    for bad in ("2d", "hello", "5", "1000d6", "2d6 3"):
        with pytest.raises(InvalidInput):
            parse_dice(bad)


class Vars:
    def __init__(self) -> None:
        self.data: dict[str, Any] = {"hp": 10}

    def get(self, path: str) -> Any:
        return self.data.get(path)

    def set(self, path: str, value: Any) -> None:
        self.data[path] = value


async def test_chat_variables_need_a_chat(tools: Tools) -> None:
    result = await tools.manager.call("chat:GetVariable", {"name": "hp"}, tools.context())
    assert not result.ok and "no chat" in (result.error or "")
    variables = Vars()
    ctx = tools.context(variables=variables)
    got = await tools.manager.call("chat:GetVariable", {"name": "hp"}, ctx)
    assert got.result == {"name": "hp", "value": 10}
    set_ = await tools.manager.call(
        "chat:SetVariable", {"name": "gold", "value": {"coins": 3}}, ctx
    )
    assert set_.ok and variables.data["gold"] == {"coins": 3}


def test_builtin_parameters_come_from_pydantic_without_titles(tools: Tools) -> None:
    params = tools.manager.get("kb:CreateEntry").definition.parameters
    assert params["required"] == ["kb", "name", "content"]
    assert "title" not in params and "title" not in params["properties"]["name"]


async def test_every_agent_write_bumps_the_kb_version(tools: Tools) -> None:
    ctx = tools.context(kb_access=kb_access(write=["Lore"]))
    assert kb_file(tools, "Lore")["kb_version"] == "1.0.0"
    created = await tools.manager.call(
        "kb:CreateEntry", {"kb": "Lore", "name": "Wyvern", "content": "Small."}, ctx
    )
    assert created.ok and created.result["kbVersion"] == "1.0.1"
    await tools.manager.call("kb:UpdateEntry", {"kb": "Lore", "entry": "Inn", "content": "-"}, ctx)
    await tools.manager.call("kb:MarkObsolete", {"kb": "Lore", "entry": "Inn"}, ctx)
    deleted = await tools.manager.call("kb:DeleteEntry", {"kb": "Lore", "entry": "Wyvern"}, ctx)
    assert deleted.ok, deleted.error
    assert deleted.result["deleted"] == created.result["id"]
    assert kb_file(tools, "Lore")["kb_version"] == "1.0.4"
    missing = await tools.manager.call("kb:DeleteEntry", {"kb": "Lore", "entry": "Wyvern"}, ctx)
    assert not missing.ok and "no entry 'Wyvern'" in (missing.error or "")
    assert kb_file(tools, "Lore")["kb_version"] == "1.0.4"


def test_versions_bump_their_last_number() -> None:
    assert bumped_version("1.0.0") == "1.0.1"
    assert bumped_version("2.9") == "2.10"
    assert bumped_version("v3-beta") == "v4-beta"
    assert bumped_version("draft") == "draft.1"
    assert bumped_version("") == "1"
