"""The shuttle nodes: prompt-time rewriting, the invoker, the parser and the state updater,
each through the real workflow runner (the LLM behind real HTTP)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jsonpatch
import pytest

from storyloom.chat.prompt.prompt_ast import apply_prompt_regex, fill_outlets, run_prompt_ast
from storyloom.chat.prompt.shuttle_nodes import (
    LLMInvoker,
    next_state,
    sampling_overrides,
)
from storyloom.chat.prompt.skein import BlockKind, BlockSource, Skein, SkeinBlock
from storyloom.chat.prompt.skein_builder import build_skein
from storyloom.chat.reply.state_ops import StateOp
from storyloom.chat.store.conversation import (
    BackgroundSnapshot,
    CharacterSnapshot,
    ConversationSettings,
)
from storyloom.chat.store.snapshot import ContextSnapshot, HistoryMessage, LoreHit
from storyloom.chat.store.state import ChatState, PlotState
from storyloom.core.settings import Settings
from storyloom.plugins import node_registry
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.workflow.events import NodeStreaming, RunEvent
from storyloom.workflow.node_type import WorkflowServices
from storyloom.workflow.runner import WorkflowRunner
from storyloom.workflow.validation import validate_workflow
from storyloom.workflow.workflow_file import Workflow
from storyloom.workflow.workflow_tools import ToolArgumentsInvalid, ToolRunFailed, run_node_tool

REGISTRY = node_registry(entry_points=False)


def make_snapshot(**changes: Any) -> ContextSnapshot:
    values: dict[str, Any] = {
        "conversation_id": "c",
        "pointer": "m3",
        "history": [
            HistoryMessage(id="m0", role="assistant", content="Welcome to {{char}}'s inn."),
            HistoryMessage(id="m1", role="user", content="I order ale. [ooc: roll]"),
            HistoryMessage(id="m2", role="assistant", content="Here you go. [ooc: 4]"),
            HistoryMessage(id="m3", role="user", content="Thanks! [ooc: tip]"),
        ],
        "state": ChatState(variables={"gold": 5, "mood": "calm"}),
        "character": CharacterSnapshot(
            card={
                "name": "Mara",
                "description": "{{char}} runs the inn. {{setvar::visits::1}}",
                "scenario": "{{user}} enters at {{time}}.",
            }
        ),
        "settings": ConversationSettings(user_name="Finn"),
        "seed": 7,
        "now": "2024-05-01T18:30:00+00:00",
    }
    values.update(changes)
    return ContextSnapshot(**values)


def text_block(block_id: str, content: str, **fields: Any) -> SkeinBlock:
    return SkeinBlock(
        id=block_id,
        kind=fields.pop("kind", BlockKind.CUSTOM),
        content=content,
        source=BlockSource(kind="preset", label=block_id),
        **fields,
    )


def contents(skein: Skein) -> dict[str, str]:
    return {b.id: b.content for b in skein.blocks}


@pytest.fixture
def llm() -> Iterator[ReplayLLMServer]:
    with ReplayLLMServer(models=["user-model", "agent-model"]) as server:
        yield server


def runner_for(llm: ReplayLLMServer | None = None, **user_llm: Any) -> WorkflowRunner:
    url = llm.url if llm is not None else "http://127.0.0.1:9/v1"
    settings = Settings.model_validate(
        {
            "user_llm": {"base_url": url, "model": "user-model", "max_retries": 0, **user_llm},
            "agent_llm": {"base_url": url, "model": "agent-model", "max_retries": 0},
        }
    )
    return WorkflowRunner(REGISTRY, WorkflowServices(settings=lambda: settings))


async def run_node(node_type: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """One node between GroupInput and its outputs; inputs go in untyped (ANY), so a
    value reaches the node exactly as given."""
    workflow = Workflow.model_validate(
        {
            "id": "one",
            "nodes": [{"id": "in", "type": "core:GroupInput"}, {"id": "node", "type": node_type}],
            "edges": [
                {"source": "in", "sourceSlot": name, "target": "node", "targetSlot": name}
                for name in inputs
            ],
            "interfaceInputs": {name: {"dataFlowType": "ANY"} for name in inputs},
        }
    )
    result = await runner_for().run(workflow, inputs=inputs)
    assert result.status == "completed", result.errors
    return result.outputs["node"]


# -- Prompt AST --------------------------------------------------------------------------------


def test_macros_expand_in_prompt_order_and_setvar_lands_in_the_variables() -> None:
    snapshot = make_snapshot()
    out = run_prompt_ast(build_skein(snapshot), snapshot)
    text = contents(out)
    assert text["charDescription"] == "Mara runs the inn. "
    assert text["scenario"] == "Finn enters at 6:30 PM."
    assert text["msg:m0"] == "Welcome to Mara's inn."
    assert text["main"] == "Write Mara's next reply in a fictional chat between Mara and Finn."
    assert out.variables == {"gold": 5, "mood": "calm", "visits": 1}
    assert snapshot.state.variables == {"gold": 5, "mood": "calm"}


def test_variable_macros_in_old_messages_do_not_change_the_state_again() -> None:
    # m1 added a gold coin in the turn that answered it; m3 is being answered now.
    snapshot = make_snapshot(
        history=[
            HistoryMessage(id="m1", role="user", content="Pay. {{addvar::gold::1}}"),
            HistoryMessage(id="m2", role="assistant", content="Gold: {{getvar::gold}}"),
            HistoryMessage(id="m3", role="user", content="Tip. {{addvar::tips::2}}"),
        ]
    )
    out = run_prompt_ast(build_skein(snapshot), snapshot)
    assert out.variables["gold"] == 5
    assert out.variables["tips"] == 2
    assert contents(out)["msg:m2"] == "Gold: 5"


def test_history_macros_can_be_left_alone() -> None:
    snapshot = make_snapshot()
    out = run_prompt_ast(build_skein(snapshot), snapshot, history_macros=False)
    assert contents(out)["msg:m0"] == "Welcome to {{char}}'s inn."


def test_conditions_drop_blocks_and_if_sections_follow_the_variables() -> None:
    snapshot = make_snapshot()
    skein = Skein(
        blocks=[
            text_block("set", "{{setvar::quest::dragon}}Quest begins."),
            text_block("rich", "You are rich.", condition="gold > 100"),
            text_block("poor", "You are poor.", condition="gold < 10"),
            text_block("quest", "{{#if quest == 'dragon'}}Slay it.{{else}}Rest.{{/if}}"),
            text_block("broken", "Kept.", condition="gold >"),
            text_block("orig", "Card: {{original}}", original="preset text"),
        ],
        variables={"gold": 5},
    )
    out = run_prompt_ast(skein, snapshot)
    assert contents(out) == {
        "set": "Quest begins.",
        "poor": "You are poor.",
        "quest": "Slay it.",
        "broken": "Kept.",
        "orig": "Card: preset text",
    }
    assert [(c.id, c.reason) for c in out.cut] == [("rich", "condition 'gold > 100' is false")]
    assert any("broken" in w for w in out.warnings)
    assert out.variables == {"gold": 5, "quest": "dragon"}


def test_outlets_are_filled_from_outlet_lore() -> None:
    hit = LoreHit(
        kb_id="kb", entry_id="w", content="It rains.", placement="outlet", outlet_name="weather"
    )
    snapshot = make_snapshot(
        character=CharacterSnapshot(
            card={"name": "Mara", "description": "Weather: {{outlet::weather}}{{outlet::none}}"}
        ),
        lore=[hit],
    )
    out = run_prompt_ast(build_skein(snapshot), snapshot)
    assert contents(out)["charDescription"] == "Weather: It rains."
    assert fill_outlets("{{OUTLET:: weather }}", {"weather": "x"}) == "x"


def test_random_macros_are_stable_for_one_snapshot() -> None:
    snapshot = make_snapshot(
        character=CharacterSnapshot(card={"name": "Mara", "description": "{{pick::a::b::c::d}}"})
    )
    first = run_prompt_ast(build_skein(snapshot), snapshot)
    again = run_prompt_ast(build_skein(snapshot), snapshot)
    assert contents(first)["charDescription"] == contents(again)["charDescription"]
    assert contents(first)["charDescription"] in {"a", "b", "c", "d"}


# -- Regex Cleaner ------------------------------------------------------------------------------


def test_prompt_only_regex_acts_on_history_by_depth_and_plain_scripts_on_lore() -> None:
    scripts = [
        {
            "scriptName": "hide ooc",
            "findRegex": r"/\s*\[ooc:[^\]]*\]/g",
            "replaceString": "",
            "placement": [1, 2],
            "promptOnly": True,
            "maxDepth": 1,
        },
        {
            "scriptName": "stored",
            "findRegex": "inn",
            "replaceString": "tavern",
            "placement": [1, 2, 5],
        },
        {"scriptName": "broken", "placement": [1]},
    ]
    hit = LoreHit(kb_id="kb", entry_id="x", content="The inn is old.", placement="after_character")
    snapshot = make_snapshot(regex_scripts=scripts, lore=[hit])
    out = apply_prompt_regex(build_skein(snapshot), snapshot)
    text = contents(out)
    assert text["msg:m3"] == "Thanks!"  # depth 0
    assert text["msg:m2"] == "Here you go."  # depth 1
    assert text["msg:m1"] == "I order ale. [ooc: roll]"  # depth 2 > maxDepth
    assert text["msg:m0"] == "Welcome to {{char}}'s inn."  # stored scripts ran at save time
    assert text["lore:kb/x"] == "The tavern is old."  # lore is never stored: both run
    assert any("broken" in w for w in out.warnings)


# -- nodes through the runner ----------------------------------------------------------------


async def test_script_node_without_a_script_passes_the_skein_on() -> None:
    # Scripts that run are tested in tests/chat/test_script_shuttle.py.
    skein = Skein(blocks=[text_block("a", "x")])
    same = await run_node_tool(runner_for(), REGISTRY, "chat:Script", {"skein": skein.as_json()})
    assert same == skein.as_json()


async def test_skein_builder_node_names_a_bad_snapshot_field() -> None:
    bad = make_snapshot().model_dump(mode="json")
    bad["history"][1]["role"] = "narrator"
    with pytest.raises(ToolRunFailed) as caught:
        await run_node_tool(runner_for(), REGISTRY, "chat:SkeinBuilder", {"snapshot": bad})
    assert "input snapshot.history[1].role" in str(caught.value.result.errors)


async def test_skein_builder_node_names_a_bad_prompt_in_its_config() -> None:
    config = {"prompts": [{"identifier": "x", "role": "narrator"}]}
    with pytest.raises(ToolArgumentsInvalid, match=r"argument 'prompts\[0\]\.role'"):
        await run_node_tool(
            runner_for(),
            REGISTRY,
            "chat:SkeinBuilder",
            {"snapshot": make_snapshot().model_dump(mode="json"), **config},
        )
    workflow = Workflow.model_validate(
        {"id": "w", "nodes": [{"id": "b", "type": "chat:SkeinBuilder", "config": config}]}
    )
    (problem,) = [p for p in validate_workflow(workflow, REGISTRY) if p.code == "bad-config"]
    assert problem.field == "nodes.b.config.prompts[0].role"


async def test_token_budget_node_uses_the_context_window_from_settings() -> None:
    snapshot = make_snapshot()
    skein = build_skein(snapshot).as_json()
    roomy = await run_node_tool(runner_for(), REGISTRY, "chat:TokenBudget", {"skein": skein})
    assert roomy["budget"] == 8192 - 1024
    assert roomy["cut"] == []
    assert all(isinstance(b["tokens"], int) for b in roomy["blocks"])
    tight = await run_node_tool(
        runner_for(context_window=1100), REGISTRY, "chat:TokenBudget", {"skein": skein}
    )
    assert tight["budget"] == 76
    assert [c["id"] for c in tight["cut"]][:1] == ["msg:m0"]
    given = await run_node_tool(
        runner_for(),
        REGISTRY,
        "chat:TokenBudget",
        {"skein": skein, "max_context_tokens": 500, "reserve_tokens": 100},
    )
    assert given["budget"] == 400


async def test_weaver_node_gives_messages() -> None:
    snapshot = make_snapshot()
    skein = run_prompt_ast(build_skein(snapshot), snapshot).as_json()
    messages = await run_node_tool(
        runner_for(), REGISTRY, "chat:Weaver", {"skein": skein, "names_behavior": "content"}
    )
    assert messages[0]["role"] == "system"
    assert messages[-1] == {"role": "user", "content": "Finn: Thanks! [ooc: tip]"}


async def test_llm_invoker_streams_and_forwards_sampling_and_is_never_cached(
    llm: ReplayLLMServer,
) -> None:
    llm.script(
        Reply(text="One two three", reasoning="hmm", chunk_delay_s=0.02), Reply(text="Four five")
    )
    workflow = Workflow.model_validate(
        {
            "id": "invoke",
            "nodes": [
                {"id": "in", "type": "core:GroupInput"},
                {
                    "id": "llm",
                    "type": "chat:LLMInvoker",
                    "config": {
                        "temperature": 0.7,
                        "top_p": 0.9,
                        "max_tokens": 64,
                        "frequency_penalty": 0.1,
                        "presence_penalty": 0.2,
                        "stop": ["\nFinn:"],
                        "seed": 11,
                    },
                },
            ],
            "edges": [
                {
                    "source": "in",
                    "sourceSlot": "messages",
                    "target": "llm",
                    "targetSlot": "messages",
                }
            ],
            "interfaceInputs": {"messages": {"dataFlowType": "MESSAGES", "required": True}},
        }
    )
    runner = runner_for(llm)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    events: list[RunEvent] = []
    first = await runner.run(workflow, inputs={"messages": messages}, on_event=events.append)
    assert first.status == "completed", first.errors
    assert first.outputs["llm"] == {
        "text": "One two three",
        "reasoning": "hmm",
        "steps": [],
        "variables": [],
    }
    chunks = [e.chunk for e in events if isinstance(e, NodeStreaming)]
    assert len(chunks) > 1 and "".join(chunks) == "One two three"
    request = llm.chat_requests[-1]
    assert request["messages"] == messages
    assert request["model"] == "user-model"
    assert (request["temperature"], request["top_p"], request["max_tokens"]) == (0.7, 0.9, 64)
    assert (request["frequency_penalty"], request["presence_penalty"]) == (0.1, 0.2)
    assert (request["stop"], request["seed"]) == (["\nFinn:"], 11)

    second = await runner.run(workflow, inputs={"messages": messages})
    assert second.outputs["llm"]["text"] == "Four five"  # a swipe gets a new answer
    assert len(llm.chat_requests) == 2


def test_unset_sampling_values_are_not_sent() -> None:
    config = LLMInvoker.parse_config({"temperature": None, "model": "", "stop": [], "seed": 0})
    assert sampling_overrides(config) == {"seed": 0}


async def test_filament_parser_node_splits_reply_thought_and_updates() -> None:
    raw = (
        "<thought>She is pleased.</thought>"
        '<state_update><add key="gold" value="3"></add></state_update>'
        "<reply>Come again!</reply> [PROGRESS]"
    )
    out = await run_node_tool(
        runner_for(), REGISTRY, "chat:FilamentParser", {"text": raw, "reasoning": "Plan."}
    )
    assert out["reply"] == "Come again!"
    assert out["thought"] == "Plan.\n\nShe is pleased."
    assert out["updates"] == [{"op": "add", "path": "/gold", "value": 3}]
    assert out["progress"] is True
    assert out["problems"] == []
    with pytest.raises(ToolRunFailed) as caught:
        await run_node_tool(
            runner_for(), REGISTRY, "chat:FilamentParser", {"text": "x", "extra_tags": ["a b"]}
        )
    assert "config extra_tags" in str(caught.value.result.errors)


# -- State Updater ----------------------------------------------------------------------------


def test_next_state_applies_macro_variables_then_updates_and_reports_a_patch() -> None:
    snapshot = make_snapshot(
        lore_timed_effects={"sticky": {"kb": {"e": {"start": 1, "end": 3}}}},
    )
    ops = [
        StateOp(op="add", path="/gold", value=3),
        StateOp(op="set", path="/room", value="attic"),
        StateOp(op="sub", path="/mood", value=1),
    ]
    update = next_state(snapshot, ops, variables={"gold": 5, "mood": "calm", "visits": "1"})
    assert update.state.variables == {"gold": 8, "mood": "calm", "visits": "1", "room": "attic"}
    assert update.state.timed_effects.sticky["kb"]["e"].end == 3
    assert len(update.problems) == 1 and "/mood" in update.problems[0]
    old = snapshot.state.as_json()
    assert jsonpatch.apply_patch(old, update.delta) == update.state.as_json()
    assert {"op": "add", "path": "/variables/room", "value": "attic"} in update.delta
    assert snapshot.state.variables == {"gold": 5, "mood": "calm"}


def test_next_state_moves_the_plot_on_progress_and_counts_replies_without() -> None:
    background = BackgroundSnapshot(
        story_outline=[{"index": 1, "content": "Arrive"}, {"index": 2, "content": "Leave"}]
    )
    snapshot = make_snapshot(background=background, state=ChatState(plot=PlotState()))
    moved = next_state(snapshot, [], progressed=True)
    assert moved.state.plot is not None and moved.state.plot.current_plot_index == 2
    stalled = next_state(snapshot, [], progressed=False)
    assert stalled.state.plot is not None and stalled.state.plot.no_update_count == 1
    assert {"op": "replace", "path": "/plot/no_update_count", "value": 1} in stalled.delta
    off = make_snapshot(
        background=background,
        state=ChatState(plot=PlotState()),
        settings=ConversationSettings(director_enabled=False),
    )
    assert next_state(off, [], progressed=True).delta == []


async def test_state_updater_node_reports_parse_and_update_problems_in_order() -> None:
    snapshot = make_snapshot()
    skein = Skein(variables={"gold": 5, "mood": "calm", "visits": "1"})
    out = await run_node(
        "chat:StateUpdater",
        {
            "snapshot": snapshot.model_dump(mode="json"),
            "updates": [{"op": "add", "path": "/gold", "value": 1}, {"op": "explode"}],
            "skein": skein.as_json(),
            "progress": False,
            "parse_problems": ["unclosed <state_update>"],
        },
    )
    assert out["state"]["variables"] == {"gold": 6, "mood": "calm", "visits": "1"}
    assert out["problems"][0] == "unclosed <state_update>"
    assert any("[1]" in p for p in out["problems"][1:])
    assert {"op": "add", "path": "/variables/visits", "value": "1"} in out["delta"]
