"""The ``chat:Script`` shuttle: the ``ctx`` a script sees, what its changes do to the Skein
(added, removed, edited, reordered blocks; variables), what is refused and how it is
named, real Lua and JavaScript scripts (lupa and quickjs in the script worker) changing
the prompt, the node reading project files without a stale cache, and a failing script
failing the node with its name and line."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest

from storyloom.chat.prompt.default_pipeline import default_pipeline
from storyloom.chat.prompt.script_shuttle import (
    ScriptResultInvalid,
    apply_script_result,
    run_script_shuttle,
    script_context,
)
from storyloom.chat.prompt.skein import BlockKind, BlockSource, Skein, SkeinBlock
from storyloom.chat.prompt.skein_builder import build_skein
from storyloom.chat.store.conversation import CharacterSnapshot, ConversationSettings
from storyloom.chat.store.snapshot import ContextSnapshot, HistoryMessage
from storyloom.chat.store.state import ChatState
from storyloom.plugins import node_registry
from storyloom.project.scripts import ScriptLibrary
from storyloom.sandbox.script_host import ScriptFailure
from storyloom.store.database import Database
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.workflow.node_type import WorkflowServices
from storyloom.workflow.runner import WorkflowRunner
from storyloom.workflow.workflow_file import Workflow, WorkflowLibrary
from tests.chat.conftest import running_chat_service, write_characters

REGISTRY = node_registry(entry_points=False)


def make_snapshot(**changes: Any) -> ContextSnapshot:
    values: dict[str, Any] = {
        "conversation_id": "c",
        "pointer": "m2",
        "history": [
            HistoryMessage(id="m0", role="assistant", content="Welcome to the inn."),
            HistoryMessage(id="m1", role="user", content="An ale, please."),
            HistoryMessage(id="m2", role="assistant", content="Here you go."),
            HistoryMessage(id="m3", role="user", content="Thanks!"),
        ],
        "state": ChatState(variables={"gold": 5, "mood": "calm"}),
        "character": CharacterSnapshot(
            card={"name": "Mara", "description": "Mara runs the inn.", "scenario": "An inn."}
        ),
        "settings": ConversationSettings(user_name="Finn", persona="A traveller."),
        "generation": "swipe",
        "seed": 7,
    }
    values.update(changes)
    return ContextSnapshot(**values)


def block(block_id: str, content: str, **fields: Any) -> SkeinBlock:
    return SkeinBlock(
        id=block_id,
        kind=fields.pop("kind", BlockKind.CUSTOM),
        content=content,
        source=fields.pop("source", BlockSource(kind="preset", id=block_id, label=block_id)),
        **fields,
    )


def small_skein() -> Skein:
    return Skein(
        blocks=[
            block("main", "Be Mara.", kind=BlockKind.SYSTEM, priority=100),
            block("lore:a", "The inn is old.", kind=BlockKind.LORE, tokens=5, group="wi"),
            block("msg:m3", "Thanks!", kind=BlockKind.HISTORY, role="user", message_id="m3"),
            block("note", "Stay in character.", depth=2),
        ],
        variables={"gold": 5, "mood": "calm"},
    )


def applied(before: dict[str, Any], after: dict[str, Any], skein: Skein | None = None) -> Skein:
    return apply_script_result(
        skein or small_skein(), before, after, name="t.lua", language="lua", duration_ms=1.5
    )


def ctx_of(skein: Skein | None = None) -> dict[str, Any]:
    return script_context(skein or small_skein(), make_snapshot())


# -- the ctx ------------------------------------------------------------------------------------


def test_the_context_holds_the_blocks_in_order_the_variables_macros_state_and_turn() -> None:
    snapshot = make_snapshot()
    skein = build_skein(snapshot)
    skein.variables["visits"] = 1  # a macro set it earlier in the turn
    ctx = script_context(skein, snapshot)
    assert [b["id"] for b in ctx["blocks"]] == [b.id for b in skein.blocks]
    first = ctx["blocks"][0]
    assert set(first) == {
        "id",
        "kind",
        "role",
        "content",
        "priority",
        "depth",
        "name",
        "enabled",
        "source",
    }
    assert set(first["source"]) == {"kind", "id", "field", "label"}
    history = [b for b in ctx["blocks"] if b["kind"] == "history"]
    assert [b["content"] for b in history][-1] == "Thanks!"
    assert ctx["variables"] == {"gold": 5, "mood": "calm", "visits": 1}
    assert ctx["macros"]["char"] == "Mara" and ctx["macros"]["user"] == "Finn"
    assert ctx["macros"]["persona"] == "A traveller."
    assert ctx["macros"]["lastUserMessage"] == "Thanks!"
    assert all(isinstance(v, str) for v in ctx["macros"].values())
    assert ctx["state"]["variables"] == {"gold": 5, "mood": "calm"}
    assert ctx["turn"] == {"kind": "swipe", "user_message": "Thanks!"}
    assert ctx["seed"] == 7


def test_without_a_snapshot_the_context_has_the_skein_and_empty_macros_and_state() -> None:
    ctx = script_context(small_skein(), None)
    assert ctx["variables"] == {"gold": 5, "mood": "calm"}
    assert ctx["macros"] == {} and ctx["state"] == {}
    assert ctx["turn"] == {"kind": "normal", "user_message": ""}


# -- applying what the script did -------------------------------------------------------------


def test_an_untouched_context_keeps_the_skein_and_records_the_run() -> None:
    before = ctx_of()
    out = applied(before, {**copy.deepcopy(before), "__output__": "hello\n"})
    assert out.blocks == small_skein().blocks
    assert out.cut == [] and out.variables == {"gold": 5, "mood": "calm"}
    (run,) = out.scripts
    assert run.model_dump() == {
        "name": "t.lua",
        "node": None,
        "language": "lua",
        "duration_ms": 1.5,
        "added": [],
        "removed": [],
        "edited": [],
        "reordered": False,
        "variables": {},
        "output": "hello\n",
    }


def test_a_block_added_by_a_script_is_custom_and_names_the_script_as_its_source() -> None:
    before = ctx_of()
    after = copy.deepcopy(before)
    # A copy of another block: its kind and source are not the new block's.
    copied = {**after["blocks"][0], "id": "weather", "content": "It rains.", "depth": 0}
    after["blocks"].insert(1, copied)
    after["blocks"].append({"id": "tail", "content": "End.", "role": "user"})
    out = applied(before, after)
    assert [b.id for b in out.blocks] == ["main", "weather", "lore:a", "msg:m3", "note", "tail"]
    weather, tail = out.blocks[1], out.blocks[5]
    assert weather.kind is BlockKind.CUSTOM and weather.content == "It rains."
    assert weather.depth == 0 and weather.priority == 100
    assert weather.source.model_dump() == {
        "kind": "script",
        "id": "t.lua",
        "field": None,
        "label": "Script: t.lua",
        "what": "script",
        "values": {"name": "t.lua"},
    }
    assert (tail.role, tail.priority, tail.enabled, tail.depth) == ("user", 50, True, None)
    assert out.scripts[0].added == ["weather", "tail"]
    assert out.scripts[0].reordered is False


def test_a_removed_block_is_listed_as_cut_by_the_script() -> None:
    before = ctx_of()
    after = copy.deepcopy(before)
    after["blocks"] = [b for b in after["blocks"] if b["id"] != "lore:a"]
    out = applied(before, after)
    assert [b.id for b in out.blocks] == ["main", "msg:m3", "note"]
    (cut,) = out.cut
    assert cut.model_dump() == {
        "id": "lore:a",
        "kind": BlockKind.LORE,
        "tokens": 5,
        "reason": "removed by script t.lua",
        "term": "removed_by_script",
        "values": {"name": "t.lua"},
    }
    assert out.scripts[0].removed == ["lore:a"]


def test_an_edited_block_is_marked_and_keeps_what_the_script_could_not_see() -> None:
    before = ctx_of()
    after = copy.deepcopy(before)
    lore = after["blocks"][1]
    lore["content"] = "The inn is very old."
    lore["priority"] = 80.0  # Lua arithmetic gives floats
    lore["unknown"] = "ignored"
    note = after["blocks"][3]
    del note["depth"]  # Lua: a field set to nil is gone
    note["enabled"] = False
    out = applied(before, after)
    edited_lore = out.blocks[1]
    assert edited_lore.content == "The inn is very old." and edited_lore.priority == 80
    assert edited_lore.tokens == 5 and (edited_lore.model_extra or {})["group"] == "wi"
    assert (edited_lore.model_extra or {})["edited_by"] == ["t.lua"]
    assert "unknown" not in (edited_lore.model_extra or {})
    assert out.blocks[3].depth is None and out.blocks[3].enabled is False
    assert out.scripts[0].edited == ["lore:a", "note"]
    assert "edited_by" not in (out.blocks[0].model_extra or {})
    # A second script's edit adds its name.
    again = apply_script_result(
        out,
        script_context(out, None),
        {
            **script_context(out, None),
            "blocks": [
                {**b, "content": b["content"] + "!"} if b["id"] == "lore:a" else b
                for b in script_context(out, None)["blocks"]
            ],
        },
        name="two.js",
        language="javascript",
        duration_ms=1,
    )
    assert (again.blocks[1].model_extra or {})["edited_by"] == ["t.lua", "two.js"]
    assert [r.name for r in again.scripts] == ["t.lua", "two.js"]


def test_reordered_blocks_take_the_scripts_order() -> None:
    before = ctx_of()
    after = copy.deepcopy(before)
    after["blocks"].reverse()
    out = applied(before, after)
    assert [b.id for b in out.blocks] == ["note", "msg:m3", "lore:a", "main"]
    run = out.scripts[0]
    assert run.reordered is True and run.edited == [] and run.added == []


def test_variables_set_changed_and_removed_replace_the_skeins_and_are_recorded() -> None:
    before = ctx_of()
    after = copy.deepcopy(before)
    after["variables"] = {"gold": 7, "weather": "rain"}
    after["state"] = {"variables": {"hacked": True}}  # read-only: ignored
    out = applied(before, after)
    assert out.variables == {"gold": 7, "weather": "rain"}
    assert out.scripts[0].variables == {"gold": 7, "weather": "rain", "mood": None}


@pytest.mark.parametrize(
    ("change", "where", "words"),
    [
        (lambda c: c["blocks"][1].update(role="narrator"), "ctx.blocks[1].role", "narrator"),
        (lambda c: c["blocks"][2].pop("content"), "ctx.blocks[2].content", "expected text"),
        (lambda c: c["blocks"][0].update(content=3), "ctx.blocks[0].content", "got 3"),
        (lambda c: c["blocks"][3].update(id="main"), "ctx.blocks[3].id", "another block"),
        (lambda c: c["blocks"][0].update(id=""), "ctx.blocks[0].id", "not empty"),
        (lambda c: c["blocks"].append({"content": "x"}), "ctx.blocks[4].id", "expected text"),
        (lambda c: c["blocks"][1].update(kind="system"), "ctx.blocks[1].kind", "kind"),
        (
            lambda c: c["blocks"][1]["source"].update(kind="script"),
            "ctx.blocks[1].source.kind",
            "where a block came from",
        ),
        (lambda c: c["blocks"][3].update(depth=-1), "ctx.blocks[3].depth", "0 or more"),
        (lambda c: c["blocks"][0].update(priority="high"), "ctx.blocks[0].priority", "whole"),
        (lambda c: c["blocks"][0].update(priority=1.5), "ctx.blocks[0].priority", "whole"),
        (lambda c: c["blocks"][0].update(enabled="no"), "ctx.blocks[0].enabled", "true or false"),
        (lambda c: c["blocks"].append("text"), "ctx.blocks[4]", "block object"),
        (lambda c: c.update(blocks={"a": 1}), "ctx.blocks", "list of blocks"),
        (lambda c: c.pop("blocks"), "ctx.blocks", "return ctx itself"),
        (lambda c: c.update(variables=[1]), "ctx.variables", "expected an object"),
    ],
)
def test_a_change_that_does_not_fit_is_refused_naming_the_script_block_and_field(
    change: Any, where: str, words: str
) -> None:
    before = ctx_of()
    after = copy.deepcopy(before)
    change(after)
    skein = small_skein()
    with pytest.raises(ScriptResultInvalid) as caught:
        applied(before, after, skein)
    message = str(caught.value)
    assert message.startswith(f"script t.lua: {where}: ")
    assert words in message
    assert caught.value.problems[0].field == where
    assert skein == small_skein()  # nothing applied


# -- real scripts -------------------------------------------------------------------------------

LUA_MOOD = """
-- drop lore, note the mood, and count the turn
local kept = {}
for _, b in ipairs(ctx.blocks) do
  if b.kind ~= "lore" then table.insert(kept, b) end
end
ctx.blocks = kept
ctx.blocks[1].content = ctx.blocks[1].content .. " Mood: " .. ctx.variables.mood .. "."
table.insert(ctx.blocks, 2, {id = "lua-note", role = "system",
  content = ctx.macros.user .. " said: " .. ctx.turn.user_message})
ctx.variables.turns = (ctx.variables.turns or 0) + 1
print("blocks:", #ctx.blocks)
"""

JS_WEATHER = """
const main = ctx.blocks.find(b => b.id === "main");
main.content = main.content.toUpperCase();
ctx.blocks.push({id: "js-weather", role: "user", content: `It rains on ${ctx.macros.char}.`,
                 depth: 0});
ctx.blocks = ctx.blocks.filter(b => b.id !== "note");
ctx.variables.weather = "rain";
delete ctx.variables.gold;
print("done " + ctx.turn.kind);
"""


async def test_a_lua_script_changes_the_prompt_and_the_variables() -> None:
    out = await run_script_shuttle(
        small_skein(), make_snapshot(), language="lua", code=LUA_MOOD, name="mood.lua"
    )
    assert [b.id for b in out.blocks] == ["main", "lua-note", "msg:m3", "note"]
    assert out.blocks[0].content == "Be Mara. Mood: calm."
    assert out.blocks[1].content == "Finn said: Thanks!"
    assert out.blocks[1].source.kind == "script" and out.blocks[1].source.id == "mood.lua"
    # Lua drops nil fields: the untouched note keeps its depth and is not "edited".
    assert out.blocks[3].depth == 2
    assert out.variables == {"gold": 5, "mood": "calm", "turns": 1}
    (run,) = out.scripts
    assert (run.name, run.language) == ("mood.lua", "lua")
    assert run.added == ["lua-note"] and run.removed == ["lore:a"] and run.edited == ["main"]
    assert run.variables == {"turns": 1}
    assert "blocks:" in run.output and "4" in run.output
    assert [c.reason for c in out.cut] == ["removed by script mood.lua"]


async def test_a_javascript_script_changes_the_prompt_and_the_variables() -> None:
    out = await run_script_shuttle(
        small_skein(), make_snapshot(), language="javascript", code=JS_WEATHER, name="weather.js"
    )
    assert [b.id for b in out.blocks] == ["main", "lore:a", "msg:m3", "js-weather"]
    assert out.blocks[0].content == "BE MARA."
    weather = out.blocks[3]
    assert (weather.role, weather.depth, weather.content) == ("user", 0, "It rains on Mara.")
    assert weather.source.label == "Script: weather.js"
    assert out.variables == {"mood": "calm", "weather": "rain"}
    (run,) = out.scripts
    assert run.removed == ["note"] and run.edited == ["main"] and run.added == ["js-weather"]
    assert run.variables == {"weather": "rain", "gold": None}
    assert run.output.strip() == "done swipe"


async def test_a_script_that_returns_a_new_ctx_replaces_it() -> None:
    code = "return {blocks = {{id = 'only', content = 'x'}}, variables = {}}"
    out = await run_script_shuttle(small_skein(), None, language="lua", code=code, name="r.lua")
    assert [b.id for b in out.blocks] == ["only"]
    assert out.variables == {}


async def test_a_script_error_is_a_script_failure_with_its_name_and_line() -> None:
    code = "local x = 1\nlocal y = nil\nreturn y.field\n"
    with pytest.raises(ScriptFailure) as caught:
        await run_script_shuttle(small_skein(), None, language="lua", code=code, name="bad.lua")
    assert caught.value.script == "bad.lua" and caught.value.line == 3
    assert str(caught.value).startswith("script bad.lua: ")


# -- the node ----------------------------------------------------------------------------------


def script_workflow(config: dict[str, Any]) -> Workflow:
    return Workflow.model_validate(
        {
            "id": "one",
            "nodes": [
                {"id": "in", "type": "core:GroupInput"},
                {"id": "script", "type": "chat:Script", "config": config},
            ],
            "edges": [
                {"source": "in", "sourceSlot": n, "target": "script", "targetSlot": n}
                for n in ("skein", "snapshot")
            ],
            "interfaceInputs": {n: {"dataFlowType": "ANY"} for n in ("skein", "snapshot")},
        }
    )


def inputs() -> dict[str, Any]:
    return {"skein": small_skein().as_json(), "snapshot": make_snapshot().model_dump(mode="json")}


async def test_the_node_runs_a_project_file_and_an_edited_file_is_not_served_from_cache(
    project: Path,
) -> None:
    runner = WorkflowRunner(REGISTRY, WorkflowServices(project_dir=project))
    script = project / "scripts" / "tag.lua"
    script.write_text('ctx.blocks[1].content = "one"', encoding="utf-8")
    workflow = script_workflow({"script": "tag.lua"})
    first = await runner.run(workflow, inputs=inputs())
    assert first.status == "completed", first.errors
    assert first.outputs["script"]["skein"]["blocks"][0]["content"] == "one"
    again = await runner.run(workflow, inputs=inputs())
    assert "script" in again.cached  # same file, same inputs: the cache answers
    script.write_text('ctx.blocks[1].content = "two"', encoding="utf-8")
    changed = await runner.run(workflow, inputs=inputs())
    assert "script" in changed.ran
    assert changed.outputs["script"]["skein"]["blocks"][0]["content"] == "two"


async def test_the_node_runs_a_plugins_script_from_the_services_folders(
    project: Path, tmp_path: Path
) -> None:
    plugin = tmp_path / "plugins" / "moods"
    (plugin / "scripts").mkdir(parents=True)
    (plugin / "scripts" / "up.js").write_text(
        "ctx.blocks[0].content += ' (plugin)';", encoding="utf-8"
    )
    services = WorkflowServices(project_dir=project, script_folders=lambda: {"moods": plugin})
    result = await WorkflowRunner(REGISTRY, services).run(
        script_workflow({"script": "moods:up.js"}), inputs=inputs()
    )
    assert result.status == "completed", result.errors
    skein = result.outputs["script"]["skein"]
    assert skein["blocks"][0]["content"] == "Be Mara. (plugin)"
    assert (skein["scripts"][0]["name"], skein["scripts"][0]["node"]) == ("moods:up.js", None)
    assert skein["scripts"][0]["language"] == "javascript"


async def test_inline_code_runs_in_the_configured_language_without_the_snapshot_wired() -> None:
    workflow = Workflow.model_validate(
        {
            "id": "one",
            "nodes": [
                {"id": "in", "type": "core:GroupInput"},
                {
                    "id": "s",
                    "type": "chat:Script",
                    "config": {
                        "language": "lua",
                        "code": "ctx.blocks[1].content = ctx.macros.char\n"
                        'table.insert(ctx.blocks, {id = "mood", content = "calm"})\n'
                        "table.remove(ctx.blocks, 3)",
                    },
                },
            ],
            # A pipeline saved before the Script node had a snapshot input.
            "edges": [
                {"source": "in", "sourceSlot": "skein", "target": "s", "targetSlot": "skein"}
            ],
            "interfaceInputs": {n: {"dataFlowType": "ANY"} for n in ("skein", "snapshot")},
        }
    )
    result = await WorkflowRunner(REGISTRY).run(workflow, inputs=inputs())
    assert result.status == "completed", result.errors
    skein = result.outputs["s"]["skein"]
    assert skein["blocks"][0]["content"] == "Mara"
    # The English name for the CLI and logs; the node beside it, for a page to say
    # "inline" in its language (the run, the block it added, the block it removed).
    assert (skein["scripts"][0]["name"], skein["scripts"][0]["node"]) == ("s (inline)", "s")
    added = next(b for b in skein["blocks"] if b["id"] == "mood")
    assert added["source"]["values"] == {"name": "s (inline)", "node": "s"}
    assert [c["values"] for c in skein["cut"]] == [{"name": "s (inline)", "node": "s"}]
    assert skein["scripts"][0]["removed"] == [skein["cut"][0]["id"]]


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"script": "bad.lua"}, ["script bad.lua", "line 2"]),
        ({"script": "shape.js"}, ["script shape.js: ctx.blocks[0].role"]),
        ({"script": "gone.lua"}, ["config script", "no script named 'gone.lua'"]),
        ({"script": "../x.lua"}, ["config script", "invalid script name"]),
        ({"script": "other:x.lua"}, ["no enabled plugin named 'other'"]),
    ],
)
async def test_a_failing_script_fails_the_node_naming_the_script_and_what_went_wrong(
    project: Path, config: dict[str, Any], words: list[str]
) -> None:
    (project / "scripts" / "bad.lua").write_text("local a = 1\nerror('no ale left')\n")
    (project / "scripts" / "shape.js").write_text("ctx.blocks[0].role = 'narrator';")
    runner = WorkflowRunner(REGISTRY, WorkflowServices(project_dir=project))
    result = await runner.run(script_workflow(config), inputs=inputs())
    assert result.status == "failed"
    error = result.errors["script"]
    for word in words:
        assert word in error


# -- a chat turn --------------------------------------------------------------------------------

CARD = {"name": "Mara", "description": "Mara runs the inn.", "first_mes": "Welcome!"}
WAIT_S = 10.0
"""Only a guard against a hanging test."""

LUA_TURN = """
for _, b in ipairs(ctx.blocks) do
  if b.kind == "history" and b.role == "user" then b.content = b.content .. " (whispered)" end
end
table.insert(ctx.blocks, 1, {id = "lua-rule", content = "Rule from Lua: " .. ctx.macros.char})
ctx.variables.lua_turns = 1
"""

JS_TURN = """
ctx.blocks.push({id: "js-rule", role: "system", content: `Rule from JS for ${ctx.macros.user}`});
ctx.variables.js_turns = 1;
"""


def save_pipeline(project: Path, script: str) -> None:
    """The project's copy of chat-default as ``scripted``, its Script node set to run
    ``script`` from the project's scripts folder."""
    workflow = default_pipeline()
    node = next(n for n in workflow.nodes if n.type == "chat:Script")
    node.config = {"script": script}
    workflow.id = "scripted"
    WorkflowLibrary(project).save(workflow)


async def test_a_chat_turn_runs_a_lua_and_then_a_javascript_script_the_model_and_inspector_see(
    project: Path, db: Database, llm: ReplayLLMServer
) -> None:
    write_characters(project, {"mara": CARD})
    scripts = ScriptLibrary(project)
    scripts.write("whisper.lua", LUA_TURN)
    scripts.write("rule.js", JS_TURN)
    save_pipeline(project, "whisper.lua")
    async with running_chat_service(project, db, llm) as service:
        conversation = service.create_conversation(
            character_id="mara",
            settings=ConversationSettings(pipeline="scripted", user_name="Finn"),
        )
        llm.script(Reply(text="Shh."))
        await service.send(conversation.id, "An ale", expected_version=None)
        first = await asyncio.wait_for(service.wait(conversation.id), WAIT_S)
        assert first is not None and first.status == "complete", first and first.error
        sent = llm.chat_requests[-1]["messages"]
        assert sent[0] == {"role": "system", "content": "Rule from Lua: Mara"}
        assert sent[-1]["content"] == "An ale (whispered)"
        prompt = service.tree.turn_record(first.id).prompt
        assert prompt is not None
        (added,) = [b for b in prompt["blocks"] if b["source"]["kind"] == "script"]
        assert added["id"] == "lua-rule" and added["source"]["id"] == "whisper.lua"
        (edited,) = [b for b in prompt["blocks"] if b.get("edited_by")]
        assert edited["edited_by"] == ["whisper.lua"] and edited["kind"] == "history"
        (run,) = prompt["scripts"]
        assert (run["name"], run["language"], run["added"]) == ("whisper.lua", "lua", ["lua-rule"])
        assert run["edited"] == [edited["id"]] and run["variables"] == {"lua_turns": 1}
        assert service.tree.state_at(first.id).variables["lua_turns"] == 1

        save_pipeline(project, "rule.js")
        llm.script(Reply(text="Of course."))
        version = service.tree.conversation(conversation.id).version
        await service.send(conversation.id, "Another", expected_version=version)
        second = await asyncio.wait_for(service.wait(conversation.id), WAIT_S)
        assert second is not None and second.status == "complete", second and second.error
        sent = llm.chat_requests[-1]["messages"]
        assert {"role": "system", "content": "Rule from JS for Finn"} in sent
        assert not any("Rule from Lua" in str(m["content"]) for m in sent)
        prompt = service.tree.turn_record(second.id).prompt
        assert prompt is not None
        (added,) = [b for b in prompt["blocks"] if b["source"]["kind"] == "script"]
        assert added["id"] == "js-rule" and added["source"]["label"] == "Script: rule.js"
        (run,) = prompt["scripts"]
        assert (run["name"], run["language"], run["added"]) == (
            "rule.js",
            "javascript",
            ["js-rule"],
        )
        assert service.tree.state_at(second.id).variables == {"lua_turns": 1, "js_turns": 1}


async def test_a_failing_script_fails_the_turn_keeps_the_users_message_and_names_the_line(
    project: Path, db: Database, llm: ReplayLLMServer
) -> None:
    write_characters(project, {"mara": CARD})
    ScriptLibrary(project).write("broken.lua", "local a = 1\nerror('the cellar is locked')\n")
    save_pipeline(project, "broken.lua")
    async with running_chat_service(project, db, llm) as service:
        conversation = service.create_conversation(
            character_id="mara", settings=ConversationSettings(pipeline="scripted")
        )
        result = await service.send(conversation.id, "Open the cellar", expected_version=None)
        failed = await asyncio.wait_for(service.wait(conversation.id), WAIT_S)
        assert failed is not None and failed.status == "error" and failed.content == ""
        assert failed.error is not None
        assert "script broken.lua" in failed.error and "the cellar is locked" in failed.error
        assert "line 2" in failed.error
        assert service.tree.message(result.user_message.id).content == "Open the cellar"
        assert llm.chat_requests == []
