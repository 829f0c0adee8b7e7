"""Agent profiles on disk: <project>/agents/<id>.json, validated, written atomically."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from storyloom.core.errors import FileFormatError, InvalidInput, NotFound
from storyloom.tools.agent_profile import AgentLibrary, AgentProfile


def profile(**fields: object) -> AgentProfile:
    data: dict[str, object] = {"id": "dm", "name": "Dungeon master", **fields}
    return AgentProfile.model_validate(data)


def test_a_saved_profile_reads_back_with_the_seed_field_names(tmp_path: Path) -> None:
    library = AgentLibrary(tmp_path)
    library.save(profile(tool_ids_inventory=["chat:RollDice", "kb:Query"], max_steps=3))
    stored = json.loads((tmp_path / "agents" / "dm.json").read_text(encoding="utf-8"))
    assert stored["tool_ids_inventory"] == ["chat:RollDice", "kb:Query"]
    assert stored["protocol"] == "auto" and stored["model_role"] == "agent"
    again = library.get("dm")
    assert again.max_steps == 3 and again.tool_ids_inventory == ["chat:RollDice", "kb:Query"]
    assert [p.id for p in library.list()] == ["dm"]


def test_a_profile_that_does_not_validate_is_refused_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    library = AgentLibrary(tmp_path)
    with pytest.raises(InvalidInput) as caught:
        library.save({"id": "dm", "name": "DM", "max_steps": 0, "protocol": "smoke"})
    fields = {p.field for p in caught.value.problems}
    assert fields == {"max_steps", "protocol"}
    assert not (tmp_path / "agents").exists()


def test_a_broken_file_names_the_file_the_field_and_the_reason(tmp_path: Path) -> None:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "bad.json").write_text('{"id": "bad", "name": "B", "max_steps": "many"}')
    (folder / "notjson.json").write_text("{nope")
    AgentLibrary(tmp_path).save(profile())
    with pytest.raises(FileFormatError) as caught:
        AgentLibrary(tmp_path).get("bad")
    assert caught.value.path == folder / "bad.json"
    assert [p.field for p in caught.value.problems] == ["max_steps"]
    good, bad = AgentLibrary(tmp_path).scan()
    assert [p.id for p in good] == ["dm"]
    assert {b.id: b.problems[0]["field"] for b in bad} == {"bad": "max_steps", "notjson": ""}
    assert "not valid JSON" in next(b for b in bad if b.id == "notjson").problems[0]["reason"]


def test_a_file_whose_id_is_not_its_name_is_a_problem(tmp_path: Path) -> None:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "one.json").write_text(json.dumps({"id": "two", "name": "T"}))
    with pytest.raises(FileFormatError) as caught:
        AgentLibrary(tmp_path).get("one")
    assert caught.value.problems[0].field == "id"


def test_ids_that_are_not_plain_file_stems_are_refused(tmp_path: Path) -> None:
    library = AgentLibrary(tmp_path)
    for bad in ("../escape", "a/b", ".hidden", "", "x" * 65):
        with pytest.raises(InvalidInput):
            library.path(bad)
        assert not library.exists(bad)


def test_always_adds_an_allow_rule_to_the_saved_profile_keeping_other_edits(
    tmp_path: Path,
) -> None:
    library = AgentLibrary(tmp_path)
    library.save(
        profile(policy={"rules": [{"tool": "kb:CreateEntry", "action": "ask"}], "default": "allow"})
    )
    library.save(library.get("dm").model_copy(update={"description": "edited meanwhile"}))
    saved = library.allow_always("dm", "kb:CreateEntry")
    again = library.get("dm")
    assert again == saved
    assert again.description == "edited meanwhile"
    assert [(r.tool, r.action) for r in again.policy.rules] == [("kb:CreateEntry", "allow")]
    assert again.policy.action("kb:CreateEntry") == "allow"


def test_delete_removes_the_file_and_a_missing_profile_is_not_found(tmp_path: Path) -> None:
    library = AgentLibrary(tmp_path)
    library.save(profile())
    library.delete("dm")
    assert library.list() == []
    with pytest.raises(NotFound):
        library.get("dm")
    with pytest.raises(NotFound):
        library.delete("dm")


def test_stealth_globs_pick_the_tools_kept_out_of_later_prompts() -> None:
    agent = profile(stealth_tools=["chat:Roll*"])
    assert agent.is_stealth("chat:RollDice")
    assert not agent.is_stealth("kb:Query")
