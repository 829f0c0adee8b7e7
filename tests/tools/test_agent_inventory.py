"""An agent runs only the tools its profile's ``tool_ids_inventory`` lists, whatever the
model names and whatever the global policy allows; and a person's "always" for one
agent is that agent's alone. Each case is the attack that worked before: a reply naming
a tool outside the inventory ran it, and one "always" opened the tool to every agent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.tools.agent_support import AgentWorld, agent_world, tam_call

OUTSIDE = ("CodeInterpreter:execute", "kb:CreateEntry")


@pytest.fixture
async def allowing(tmp_path: Path, llm: ReplayLLMServer) -> AsyncIterator[AgentWorld]:
    """The global policy allows every tool."""
    async with agent_world(tmp_path, llm, policy={"default": "allow"}) as made:
        made.save_profile(tool_ids_inventory=["chat:RollDice"], protocol="tam")
        yield made


@pytest.fixture
async def asking(tmp_path: Path, llm: ReplayLLMServer) -> AsyncIterator[AgentWorld]:
    """The global policy as shipped: ask before every tool."""
    async with agent_world(tmp_path, llm, policy={"default": "ask"}) as made:
        made.save_profile(tool_ids_inventory=["chat:RollDice"], protocol="tam")
        yield made


def _audited(world: AgentWorld) -> list[tuple[str, str]]:
    entries, _ = world.host.audit.list(limit=50, offset=0)
    return [(entry.tool, entry.decision) for entry in entries]


ARGUMENTS: dict[str, dict[str, str]] = {
    "CodeInterpreter:execute": {"language": "python", "code": "print('ran')"},
    "kb:CreateEntry": {"kb": "notes", "title": "planted", "content": "x"},
}


@pytest.mark.parametrize("tool", OUTSIDE)
async def test_a_tam_call_outside_the_inventory_is_refused_though_the_policy_allows_it(
    allowing: AgentWorld, llm: ReplayLLMServer, tool: str
) -> None:
    llm.script(Reply(text=tam_call(tool, **ARGUMENTS[tool])), Reply(text="done"))
    run = await allowing.run_agent("do it")
    (step,) = run.outputs["steps"]
    assert step["decision"] == "denied" and not step["ok"], step
    assert "not in agent 'dm''s tool inventory" in step["error"]
    # The model reads the refusal as the call's result.
    assert "tool inventory" in llm.chat_requests[1]["messages"][-1]["content"]
    assert _audited(allowing) == [(tool, "denied")]


async def test_a_native_call_outside_the_inventory_is_refused(
    allowing: AgentWorld, llm: ReplayLLMServer
) -> None:
    allowing.save_profile(tool_ids_inventory=["chat:RollDice"], protocol="native")
    call: dict[str, Any] = {
        "name": "CodeInterpreter__execute",
        "arguments": ARGUMENTS["CodeInterpreter:execute"],
    }
    llm.script(Reply(tool_calls=[call]), Reply(text="done"))
    run = await allowing.run_agent("do it")
    (step,) = run.outputs["steps"]
    assert not step["ok"] and step["decision"] in ("denied", "unknown"), step
    assert ("CodeInterpreter:execute", "allowed") not in _audited(allowing)


async def test_under_ask_a_call_outside_the_inventory_is_refused_not_put_to_the_person(
    asking: AgentWorld, llm: ReplayLLMServer
) -> None:
    asking.answers = ["always"]
    code = ARGUMENTS["CodeInterpreter:execute"]
    llm.script(Reply(text=tam_call("CodeInterpreter:execute", **code)), Reply(text="done"))
    run = await asking.run_agent("do it")
    (step,) = run.outputs["steps"]
    assert step["decision"] == "denied" and "tool inventory" in step["error"]
    assert asking.asked == []


async def test_always_for_one_agent_is_saved_in_its_profile_and_no_other_agent_inherits_it(
    asking: AgentWorld, llm: ReplayLLMServer
) -> None:
    library = asking.host.agents.library
    assert library is not None
    library.save(
        {"id": "rogue", "name": "Rogue", "tool_ids_inventory": ["chat:RollDice"], "protocol": "tam"}
    )
    asking.answers = ["always"]
    llm.script(Reply(text=tam_call("chat:RollDice", notation="d6")), Reply(text="ok"))
    first = await asking.run_agent("roll")
    assert [s["decision"] for s in first.outputs["steps"]] == ["approved"]
    assert asking.host.policy().action("chat:RollDice") == "ask"
    rules = asking.profile_file()["policy"]["rules"]
    assert {"tool": "chat:RollDice", "action": "allow"} in rules
    # The same agent is not asked again ...
    llm.script(Reply(text=tam_call("chat:RollDice", notation="d6")), Reply(text="ok"))
    again = await asking.run_agent("roll")
    assert [s["decision"] for s in again.outputs["steps"]] == ["allowed"]
    assert len(asking.asked) == 1
    # ... and another agent still is (the person says no this time).
    asking.answers = ["deny"]
    llm.script(Reply(text=tam_call("chat:RollDice", notation="d6")), Reply(text="ok"))
    other = await asking.run_agent("roll", profile="rogue")
    assert len(asking.asked) == 2 and asking.asked[1].caller["name"] == "rogue"
    assert [s["decision"] for s in other.outputs["steps"]] == ["denied"]
