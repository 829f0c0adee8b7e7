"""``executeToolCalls`` on a workflow (seed 003 §7.3): the TAM blocks in its text outputs
run after the run, through the real tool host, as the agent ``workflow:<id>``: the global
policy, approvals and audit of every agent call. Off by default."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from storyloom.plugins import node_registry
from storyloom.testing.replay_server import ReplayLLMServer
from storyloom.workflow.events import NodeToolStep, RunEvent
from storyloom.workflow.runner import RunResult, WorkflowRunner
from storyloom.workflow.workflow_file import Workflow
from tests.tools.agent_support import AgentWorld, agent_world, tam_call

ROLL = tam_call("chat:RollDice", notation="1d20")


def echo_workflow(**settings: Any) -> Workflow:
    """prompt → text, unchanged: what the run's output holds is what was put in."""
    return Workflow.model_validate(
        {
            "id": "echo",
            "nodes": [
                {"id": "in", "type": "core:GroupInput"},
                {"id": "out", "type": "core:GroupOutput"},
            ],
            "edges": [
                {"source": "in", "sourceSlot": "prompt", "target": "out", "targetSlot": "text"}
            ],
            "interfaceInputs": {"prompt": {"dataFlowType": "STRING", "required": True}},
            "interfaceOutputs": {"text": {"dataFlowType": "STRING"}},
            **settings,
        }
    )


async def run(world: AgentWorld, workflow: Workflow, prompt: str) -> tuple[RunResult, list[Any]]:
    events: list[RunEvent] = []
    result = await world.host.runner.run(
        workflow, inputs={"prompt": prompt}, on_event=events.append
    )
    return result, [e.step for e in events if isinstance(e, NodeToolStep)]


@pytest.fixture
async def world(tmp_path: Path, llm: ReplayLLMServer) -> AsyncIterator[AgentWorld]:
    async with agent_world(tmp_path, llm) as made:
        yield made


async def test_tool_calls_in_a_workflows_output_run_when_the_workflow_asks(
    world: AgentWorld,
) -> None:
    result, steps = await run(
        world, echo_workflow(executeToolCalls=True), f"The die says:\n\n{ROLL}"
    )
    assert result.status == "completed", result.errors
    assert result.interface_outputs["text"] == "The die says:"
    (step,) = steps
    assert step["tool"] == "chat:RollDice" and step["ok"] and 1 <= step["result"]["total"] <= 20
    entries, _ = world.host.audit.list(limit=10, offset=0)
    assert [(e.tool, e.caller.kind, e.caller.name) for e in entries] == [
        ("chat:RollDice", "agent", "workflow:echo")
    ]


async def test_by_default_a_workflows_output_is_only_text(world: AgentWorld) -> None:
    assert echo_workflow().execute_tool_calls is False
    result, steps = await run(world, echo_workflow(), ROLL)
    assert result.interface_outputs["text"] == ROLL and steps == []
    assert world.host.audit.list(limit=10, offset=0)[0] == []


async def test_the_global_policy_and_approvals_hold_for_output_calls(
    tmp_path: Path, llm: ReplayLLMServer
) -> None:
    policy = {"rules": [{"tool": "chat:RollDice", "action": "ask"}], "default": "deny"}
    async with agent_world(tmp_path, llm, policy=policy) as world:
        world.answers = ["deny"]
        text = f"{ROLL}\n{tam_call('system:get_current_time')}"
        result, steps = await run(world, echo_workflow(executeToolCalls=True), text)
        assert result.status == "completed", result.errors
        assert [(s["tool"], s["decision"]) for s in steps] == [
            ("chat:RollDice", "denied"),
            ("system:get_current_time", "denied"),
        ]
        (asked,) = world.asked
        assert asked.tool == "chat:RollDice" and asked.caller["name"] == "workflow:echo"


async def test_without_a_tool_host_a_run_with_output_calls_fails_naming_the_output() -> None:
    runner = WorkflowRunner(node_registry(entry_points=False))
    result = await runner.run(echo_workflow(executeToolCalls=True), inputs={"prompt": ROLL})
    assert result.status == "failed"
    assert "output 'text' holds tool calls" in result.errors["out"], result.errors
    assert "no tool host" in result.errors["out"]
    quiet = await runner.run(echo_workflow(executeToolCalls=True), inputs={"prompt": "plain"})
    assert quiet.status == "completed" and quiet.interface_outputs["text"] == "plain"
