"""The agent loop end to end: an ``agent:Run`` node in a real workflow run, a real
ToolHost (built-in tools, policy, approvals, audit in SQLite), the model a real HTTP
server (the replay server). Nothing is faked below HTTP."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.tools.agent_support import AgentWorld, agent_world, tam_call, tam_chain

ROLL = tam_call("chat:RollDice", notation="1d20")


@pytest.fixture
async def world(tmp_path: Path, llm: ReplayLLMServer) -> AsyncIterator[AgentWorld]:
    async with agent_world(tmp_path, llm) as made:
        yield made


def results_message(request: dict[str, Any]) -> str:
    """The TAM results fed back: the last message of a request."""
    last = request["messages"][-1]
    assert last["role"] == "user"
    content: str = last["content"]
    return content


async def test_a_tam_turn_calls_the_tool_feeds_the_result_back_and_answers(
    world: AgentWorld, llm: ReplayLLMServer
) -> None:
    world.save_profile(
        tool_ids_inventory=["chat:RollDice"],
        protocol="tam",
        prompt="You are the dungeon master.\n\n{{{system:available_tools}}}",
    )
    round_one = f"Let me roll for you.\n\n{ROLL}"
    llm.script(Reply(text=round_one), Reply(text="A fine roll. The door opens."))
    run = await world.run_agent("Can I open the door?")
    assert run.result.status == "completed", run.result.errors
    assert run.outputs["text"] == "Let me roll for you.\n\nA fine roll. The door opens."
    assert run.streamed == run.outputs["text"]
    (step,) = run.outputs["steps"]
    assert step["tool"] == "chat:RollDice" and step["ok"] and step["decision"] == "allowed"
    assert step["arguments"] == {"notation": "1d20"}
    assert step["step"] == 1 and step["protocol"] == "tam"
    total = step["result"]["total"]
    assert 1 <= total <= 20
    assert run.logged_steps == [step]
    first, second = llm.chat_requests
    system = first["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("You are the dungeon")
    assert "chat:RollDice" in system["content"] and "{{{" not in system["content"]
    assert "tools" not in first
    assert first["messages"][-1] == {"role": "user", "content": "Can I open the door?"}
    assert second["messages"][-2] == {"role": "assistant", "content": round_one}
    fed = results_message(second)
    assert "tool:「始」chat:RollDice「末」" in fed and "status:「始」ok「末」" in fed
    assert f'"total": {total}' in fed
    assert "A fine roll" in run.outputs["raw"] and START_MARK in run.outputs["raw"]
    entries, _ = world.host.audit.list(limit=10, offset=0)
    assert [(e.tool, e.caller.kind, e.caller.name) for e in entries] == [
        ("chat:RollDice", "agent", "dm")
    ]


START_MARK = "<|[REQUEST_TOOL]|>"


async def test_a_tam_profile_without_the_marker_gets_the_docs_and_instructions_appended(
    world: AgentWorld, llm: ReplayLLMServer
) -> None:
    world.save_profile(tool_ids_inventory=["chat:RollDice"], protocol="tam", prompt="Be terse.")
    llm.script(Reply(text="Hello."))
    run = await world.run_agent("hi")
    assert run.outputs["text"] == "Hello." and run.outputs["steps"] == []
    system = llm.chat_requests[0]["messages"][0]["content"]
    assert system.startswith("Be terse.\n\n")
    assert "chat:RollDice" in system and "<|[TOOL_RESULT]|>" in system


async def test_a_failed_step_of_a_chain_skips_the_rest_of_its_block_only(
    world: AgentWorld, llm: ReplayLLMServer
) -> None:
    world.save_profile(tool_ids_inventory=["chat:RollDice"], protocol="tam")
    chain = tam_chain(
        ("chat:RollDice", {"notation": "banana"}), ("chat:RollDice", {"notation": "1d6"})
    )
    other = tam_call("chat:RollDice", notation="1d4")
    llm.script(Reply(text=f"{chain}\n{other}"), Reply(text="Done."))
    run = await world.run_agent("roll")
    steps = run.outputs["steps"]
    assert [(s["decision"], s["ok"]) for s in steps] == [
        ("allowed", False),
        ("skipped", False),
        ("allowed", True),
    ]
    assert "banana" in steps[0]["error"]
    assert [s["index"] for s in steps] == [0, 1, 2]
    fed = results_message(llm.chat_requests[1])
    assert fed.count("<|[TOOL_RESULT]|>") == 3
    assert "status:「始」skipped「末」" in fed and "status:「始」error「末」" in fed
    assert run.outputs["text"] == "Done."
    # The skipped call never reached the manager: two audit rows, not three.
    _, total = world.host.audit.list(limit=10, offset=0)
    assert total == 2


async def test_native_tool_calls_with_arguments_streamed_in_pieces(
    world: AgentWorld, llm: ReplayLLMServer
) -> None:
    world.save_profile(tool_ids_inventory=["chat:RollDice"], protocol="native")
    call = {"name": "chat__RollDice", "arguments": {"notation": "2d6+1"}}
    llm.script(
        Reply(text="Rolling.", tool_calls=[call], tool_argument_chunks=5),
        Reply(text="Seven or so."),
    )
    run = await world.run_agent("roll 2d6+1")
    assert run.result.status == "completed", run.result.errors
    (step,) = run.outputs["steps"]
    assert step["arguments"] == {"notation": "2d6+1"} and step["ok"]
    assert step["protocol"] == "native" and step["callId"] == "call_replay_0"
    first, second = llm.chat_requests
    (offered,) = first["tools"]
    assert offered["function"]["name"] == "chat__RollDice"
    assistant, tool = second["messages"][-2:]
    assert assistant["role"] == "assistant" and assistant["content"] == "Rolling."
    assert assistant["tool_calls"][0]["id"] == "call_replay_0"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"notation": "2d6+1"}
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_replay_0"
    assert json.loads(tool["content"])["total"] == step["result"]["total"]
    assert run.outputs["text"] == "Rolling.\n\nSeven or so."


async def test_a_native_call_of_an_unknown_function_fails_only_its_step(
    world: AgentWorld, llm: ReplayLLMServer
) -> None:
    world.save_profile(tool_ids_inventory=["chat:RollDice"], protocol="native")
    calls: list[dict[str, Any]] = [
        {"name": "no such thing!", "arguments": {}},
        {"name": "chat__RollDice", "arguments": '{"notation": '},
        {"name": "chat__RollDice", "arguments": {"notation": "d8"}},
    ]
    llm.script(Reply(tool_calls=calls), Reply(text="ok"))
    run = await world.run_agent("go")
    decisions = [(s["decision"], s["ok"]) for s in run.outputs["steps"]]
    assert decisions == [("unknown", False), ("invalid", False), ("allowed", True)]
    tool_messages = [m for m in llm.chat_requests[1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == [
        "call_replay_0",
        "call_replay_1",
        "call_replay_2",
    ]
    assert tool_messages[1]["content"].startswith("Error: the arguments are not JSON")


async def test_auto_falls_back_to_tam_when_the_endpoint_refuses_tools_and_remembers(
    world: AgentWorld, llm: ReplayLLMServer
) -> None:
    world.save_profile(tool_ids_inventory=["chat:RollDice"], protocol="auto")
    llm.script(
        Reply(status=400, error_message="tools are not supported"),
        Reply(text=ROLL),
        Reply(text="Rolled."),
    )
    run = await world.run_agent("roll")
    assert run.result.status == "completed", run.result.errors
    assert [s["protocol"] for s in run.outputs["steps"]] == ["tam"]
    refused, tam_round, _ = llm.chat_requests
    assert "tools" in refused and "tools" not in tam_round
    assert "<|[REQUEST_TOOL]|>" in tam_round["messages"][0]["content"]
    llm.script(Reply(text="Hi again."))
    again = await world.run_agent("hello")
    assert again.outputs["text"] == "Hi again."
    assert "tools" not in llm.chat_requests[-1]


async def test_the_step_limit_ends_the_turn(world: AgentWorld, llm: ReplayLLMServer) -> None:
    world.save_profile(tool_ids_inventory=["chat:RollDice"], protocol="tam", max_steps=2)
    llm.script(
        Reply(text=f"One.\n{ROLL}"),
        Reply(text=f"Two.\n{ROLL}"),
        Reply(text="never asked"),
    )
    run = await world.run_agent("keep rolling")
    assert run.result.status == "completed"
    assert len(llm.chat_requests) == 2 and llm.pending == 1
    assert [s["step"] for s in run.outputs["steps"]] == [1, 2]
    assert run.outputs["text"] == "One.\n\nTwo."


async def test_a_denied_tool_is_reported_to_the_model_and_does_not_run(
    world: AgentWorld, llm: ReplayLLMServer
) -> None:
    world.save_profile(
        tool_ids_inventory=["chat:RollDice"],
        protocol="tam",
        policy={"rules": [{"tool": "chat:*", "action": "deny"}], "default": "allow"},
    )
    llm.script(Reply(text=ROLL), Reply(text="No dice, then."))
    run = await world.run_agent("roll")
    (step,) = run.outputs["steps"]
    assert step["decision"] == "denied" and not step["ok"] and step["result"] is None
    assert "status:「始」denied「末」" in results_message(llm.chat_requests[1])
    assert world.asked == []


@pytest.fixture
async def asking_world(tmp_path: Path, llm: ReplayLLMServer) -> AsyncIterator[AgentWorld]:
    """The global policy asks before chat:RollDice."""
    policy = {"rules": [{"tool": "chat:RollDice", "action": "ask"}], "default": "allow"}
    async with agent_world(tmp_path, llm, policy=policy) as made:
        made.save_profile(tool_ids_inventory=["chat:RollDice"], protocol="tam")
        yield made


TWO_ROLLS = tam_chain(("chat:RollDice", {"notation": "d6"}), ("chat:RollDice", {"notation": "d8"}))


async def test_ask_allow_once_asks_before_every_call(
    asking_world: AgentWorld, llm: ReplayLLMServer
) -> None:
    asking_world.answers = ["allow_once", "allow_once"]
    llm.script(Reply(text=TWO_ROLLS), Reply(text="ok"))
    run = await asking_world.run_agent("roll twice")
    assert [s["decision"] for s in run.outputs["steps"]] == ["approved", "approved"]
    assert [a.tool for a in asking_world.asked] == ["chat:RollDice", "chat:RollDice"]
    first = asking_world.asked[0]
    assert first.arguments == {"notation": "d6"} and first.caller == {"kind": "agent", "name": "dm"}
    assert asking_world.host.policy().action("chat:RollDice") == "ask"


async def test_ask_answered_always_is_saved_and_not_asked_again(
    asking_world: AgentWorld, llm: ReplayLLMServer
) -> None:
    asking_world.answers = ["always"]
    llm.script(Reply(text=TWO_ROLLS), Reply(text="ok"))
    run = await asking_world.run_agent("roll twice")
    assert [s["decision"] for s in run.outputs["steps"]] == ["approved", "allowed"]
    assert len(asking_world.asked) == 1
    # Saved for this agent alone: the global policy still asks.
    assert asking_world.host.policy().action("chat:RollDice") == "ask"
    assert {"tool": "chat:RollDice", "action": "allow"} in asking_world.profile_file()["policy"][
        "rules"
    ]
    llm.script(Reply(text=ROLL), Reply(text="ok"))
    again = await asking_world.run_agent("once more")
    assert [s["decision"] for s in again.outputs["steps"]] == ["allowed"]
    assert len(asking_world.asked) == 1


async def test_always_also_lifts_the_ask_of_the_agents_own_rule(
    world: AgentWorld, llm: ReplayLLMServer
) -> None:
    world.save_profile(
        tool_ids_inventory=["chat:RollDice"],
        protocol="tam",
        policy={"rules": [{"tool": "chat:RollDice", "action": "ask"}], "default": "allow"},
    )
    world.answers = ["always"]
    llm.script(Reply(text=TWO_ROLLS), Reply(text="ok"))
    run = await world.run_agent("roll twice")
    assert [s["decision"] for s in run.outputs["steps"]] == ["approved", "allowed"]
    rules = world.profile_file()["policy"]["rules"]
    assert rules == [{"tool": "chat:RollDice", "action": "allow"}]


async def test_ask_answered_deny_fails_the_step(
    asking_world: AgentWorld, llm: ReplayLLMServer
) -> None:
    asking_world.answers = ["deny"]
    llm.script(Reply(text=ROLL), Reply(text="fine"))
    run = await asking_world.run_agent("roll")
    (step,) = run.outputs["steps"]
    assert step["decision"] == "denied" and not step["ok"]
    assert "denied by the person" in step["error"]


async def test_an_unknown_profile_fails_the_node_with_its_name(
    world: AgentWorld, llm: ReplayLLMServer
) -> None:
    run = await world.run_agent("hi", profile="ghost")
    assert run.result.status == "failed"
    assert "ghost" in next(iter(run.result.errors.values()))
    assert llm.chat_requests == []


DELIBERATE: dict[str, Any] = {
    "id": "deliberate",
    "nodes": [
        {"id": "in", "type": "core:GroupInput"},
        {"id": "think", "type": "llm:Chat", "config": {"role": "agent", "prompt": "Your move."}},
        {"id": "out", "type": "core:GroupOutput"},
    ],
    "edges": [
        {"source": "in", "sourceSlot": "messages", "target": "think", "targetSlot": "history"},
        {"source": "think", "sourceSlot": "text", "target": "out", "targetSlot": "text"},
    ],
    "interfaceInputs": {"messages": {"dataFlowType": "MESSAGES", "required": True}},
    "interfaceOutputs": {"text": {"dataFlowType": "STRING"}},
}


async def test_a_deliberation_workflow_answers_each_round_in_tam(
    world: AgentWorld, llm: ReplayLLMServer
) -> None:
    (world.project / "workflows").mkdir(exist_ok=True)
    (world.project / "workflows" / "deliberate.json").write_text(json.dumps(DELIBERATE))
    world.save_profile(tool_ids_inventory=["chat:RollDice"], workflow="deliberate")
    llm.script(Reply(text=f"Hm.\n{ROLL}"), Reply(text="Done."))
    run = await world.run_agent("play")
    assert run.result.status == "completed", run.result.errors
    assert run.outputs["text"] == "Hm.\n\nDone."
    assert [s["protocol"] for s in run.outputs["steps"]] == ["tam"]
    first, second = llm.chat_requests
    assert "tools" not in first
    assert first["messages"][-2:] == [
        {"role": "user", "content": "play"},
        {"role": "user", "content": "Your move."},
    ]
    assert "status:「始」ok「末」" in second["messages"][-2]["content"]
