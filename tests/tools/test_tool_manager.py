"""The ToolManager end to end: real registry, runner, workflows and SQLite audit log."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from storyloom.tools.tool_manager import ToolCallContext, ToolCaller, match_arguments
from tests.tools.tool_support import GREET, Tools, make_tools, rules, service_tool

ECHO_PARAMS = {
    "type": "object",
    "properties": {"text": {"type": "string"}, "times": {"type": "integer"}},
    "required": ["text"],
}


def echo(arguments: dict[str, Any], ctx: ToolCallContext) -> dict[str, Any]:
    return {"echo": arguments["text"] * arguments.get("times", 1)}


async def boom(arguments: dict[str, Any], ctx: ToolCallContext) -> None:
    raise RuntimeError("the disk is on fire")


SLOW_CANCELLED: list[bool] = []


async def slow(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        SLOW_CANCELLED.append(True)
        raise
    return "never"


@dataclass
class Point:
    x: int
    y: int


def point(arguments: dict[str, Any], ctx: ToolCallContext) -> Point:
    return Point(1, 2)


@pytest.fixture
def tools(tmp_path: Path) -> Tools:
    return make_tools(
        tmp_path,
        [
            service_tool("test:echo", echo, ECHO_PARAMS, "Echo text"),
            service_tool("test:boom", boom),
            service_tool("test:slow", slow),
            service_tool("test:point", point),
        ],
    )


async def test_an_allowed_call_runs_and_is_audited(tools: Tools) -> None:
    result = await tools.manager.call("test:echo", {"text": "ab", "times": 2}, tools.context())
    assert result.ok and result.decision == "allowed"
    assert result.result == {"echo": "abab"}
    entries, total = tools.audit.list()
    assert total == 1
    row = entries[0]
    assert row.id == result.audit_id
    assert (row.tool, row.caller.kind, row.caller.name) == ("test:echo", "agent", "test-agent")
    assert row.arguments == {"text": "ab", "times": 2}
    assert row.result == {"echo": "abab"} and row.ok and row.decision == "allowed"


async def test_bad_arguments_are_refused_with_every_problem_and_audited(tools: Tools) -> None:
    result = await tools.manager.call("test:echo", {"times": "x", "loud": True}, tools.context())
    assert not result.ok and result.decision == "invalid"
    assert result.error is not None
    for words in ("'text': required", "'times'", "'loud': unknown argument"):
        assert words in result.error
    assert tools.audit.list()[0][0].decision == "invalid"


async def test_an_unknown_tool_is_a_readable_result(tools: Tools) -> None:
    result = await tools.manager.call("test:nope", {}, tools.context())
    assert (result.ok, result.decision) == (False, "unknown")
    assert "no tool 'test:nope'" in (result.error or "")


async def test_a_tool_that_raises_fails_only_its_call(tools: Tools) -> None:
    result = await tools.manager.call("test:boom", {}, tools.context())
    assert not result.ok and result.decision == "allowed"
    assert result.error == "RuntimeError: the disk is on fire"
    again = await tools.manager.call("test:echo", {"text": "x"}, tools.context())
    assert again.ok


async def test_a_tool_that_takes_too_long_times_out(tools: Tools) -> None:
    SLOW_CANCELLED.clear()
    result = await tools.manager.call("test:slow", {}, tools.context(timeout_s=0.2))
    # The call ended by stopping the tool at its timeout, not by waiting it out.
    assert SLOW_CANCELLED == [True]
    assert not result.ok and "timed out after 0.2 s" in (result.error or "")
    assert tools.audit.list()[0][0].error == result.error


async def test_a_cancelled_call_is_audited_and_cancels(tools: Tools) -> None:
    task = asyncio.create_task(tools.manager.call("test:slow", {}, tools.context()))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    row = tools.audit.list()[0][0]
    assert (row.tool, row.ok, row.error) == ("test:slow", False, "cancelled")


async def test_results_are_made_json(tools: Tools) -> None:
    result = await tools.manager.call("test:point", {}, tools.context())
    assert result.result == {"x": 1, "y": 2}


async def test_deny_rules_of_either_policy_deny(tools: Tools) -> None:
    tools.policy = rules("allow", **{"test:*": "deny"})
    result = await tools.manager.call("test:echo", {"text": "x"}, tools.context(kind="user"))
    assert (result.ok, result.decision) == (False, "denied")
    assert "denied by the tool policy" in (result.error or "")
    tools.policy = rules("allow")
    agent_policy = rules("allow", **{"test:echo": "deny"})
    result = await tools.manager.call(
        "test:echo", {"text": "x"}, tools.context(policy=agent_policy)
    )
    assert result.decision == "denied"


async def test_ask_without_anyone_to_ask_allows_people_and_denies_agents(tools: Tools) -> None:
    tools.policy = rules("ask")
    for kind in ("user", "cli", "api"):
        result = await tools.manager.call("test:echo", {"text": "x"}, tools.context(kind=kind))
        assert (result.ok, result.decision) == (True, "allowed"), kind
    for kind in ("agent", "mcp"):
        result = await tools.manager.call("test:echo", {"text": "x"}, tools.context(kind=kind))
        assert (result.ok, result.decision) == (False, "denied"), kind
        assert "nobody to ask" in (result.error or "")


async def test_ask_is_answered_by_the_approver(tools: Tools) -> None:
    tools.policy = rules("ask")
    asked: list[tuple[str, dict[str, Any]]] = []
    saved: list[str] = []

    def approver(answer: str) -> Any:
        async def approve(tool: str, arguments: dict[str, Any]) -> Any:
            asked.append((tool, arguments))
            return answer

        return approve

    ctx = tools.context(approve=approver("allow_once"))
    result = await tools.manager.call("test:echo", {"text": "x"}, ctx)
    assert (result.ok, result.decision) == (True, "approved")
    assert asked == [("test:echo", {"text": "x"})]
    ctx = tools.context(approve=approver("deny"))
    result = await tools.manager.call("test:echo", {"text": "x"}, ctx)
    assert (result.ok, result.decision) == (False, "denied")
    ctx = tools.context(approve=approver("always"), on_always=saved.append)
    result = await tools.manager.call("test:echo", {"text": "x"}, ctx)
    assert result.decision == "approved" and saved == ["test:echo"]


async def test_the_before_call_hook_may_tighten_but_never_loosen(tools: Tools) -> None:
    answers: list[Any] = []

    class Relay:
        def storyloom_tool_before_call(
            self, tool_id: str, arguments: dict[str, Any], action: str
        ) -> list[Any]:
            return list(answers)

    tools.manager.hooks = Relay
    answers[:] = ["allow"]
    tools.policy = rules("deny")
    result = await tools.manager.call("test:echo", {"text": "x"}, tools.context(kind="user"))
    assert result.decision == "denied"
    tools.policy = rules("allow")
    answers[:] = [None, "deny"]
    result = await tools.manager.call("test:echo", {"text": "x"}, tools.context(kind="user"))
    assert result.decision == "denied"


async def test_a_project_workflow_is_a_tool_run_by_the_runner(tools: Tools) -> None:
    tools.write_workflow(GREET)
    entry = tools.manager.get("workflow:greet")
    assert entry.source == "workflow" and entry.implementation_type == "workflow"
    result = await tools.manager.call("workflow:greet", {"name": "Ann"}, tools.context())
    assert result.ok, result.error
    assert result.result == "Hello, Ann"


async def test_a_node_type_is_a_tool(tools: Tools) -> None:
    result = await tools.manager.call(
        "node:core:RegexApplicator",
        {"text": "a-b-c", "pattern": "-", "replacement": "+"},
        tools.context(),
    )
    assert result.ok, result.error
    assert result.result["text"] == "a+b+c"


async def test_a_deleted_workflow_is_no_longer_callable(tools: Tools) -> None:
    path = tools.write_workflow(GREET)
    assert tools.manager.get("workflow:greet")
    path.unlink()
    result = await tools.manager.call("workflow:greet", {"name": "Ann"}, tools.context())
    assert result.decision == "unknown"


async def test_a_plain_function_runs_off_the_event_loop(tools: Tools) -> None:
    seen: list[bool] = []

    def where(arguments: dict[str, Any], ctx: ToolCallContext) -> str:
        seen.append(threading.current_thread() is threading.main_thread())
        return "ok"

    tools.extra.append(service_tool("test:where", where))
    tools.registry.invalidate()
    result = await tools.manager.call("test:where", {}, tools.context())
    assert result.ok and seen == [False]


def test_openai_tools_map_names_and_skip_unknown_ids(tools: Tools) -> None:
    out = tools.manager.openai_tools(["test:echo", "test:missing"])
    assert out == [
        {
            "type": "function",
            "function": {
                "name": "test__echo",
                "description": "Echo text",
                "parameters": ECHO_PARAMS,
            },
        }
    ]


def test_tam_arguments_match_keys_loosely_and_parse_non_strings() -> None:
    assert match_arguments(ECHO_PARAMS, {"Text": "hi", "TIMES": "3"}) == {"text": "hi", "times": 3}
    assert match_arguments(ECHO_PARAMS, {"te_xt": "3", "other": "x"}) == {"text": "3", "other": "x"}


def test_audit_keeps_big_results_cut(tools: Tools) -> None:
    big = "x" * 100_000
    audit_id = tools.audit.record(
        caller_kind="user",
        caller_name="me",
        tool="t:x",
        arguments={},
        decision="allowed",
        ok=True,
        result=big,
    )
    row = tools.audit.get(audit_id)
    assert row is not None and isinstance(row.result, str)
    assert len(row.result.encode()) < 66_000 and "truncated" in row.result
    entries, total = tools.audit.list(tool="t:x")
    assert total == 1 and entries[0].id == audit_id
    assert tools.audit.list(tool="t:other") == ([], 0)


def test_caller_ids_reach_the_audit_row(tools: Tools) -> None:
    ctx = ToolCallContext(caller=ToolCaller("agent", "bard", run_id="r1", conversation_id="c1"))
    result = asyncio.run(tools.manager.call("test:echo", {"text": "x"}, ctx))
    row = tools.audit.get(result.audit_id or 0)
    assert row is not None and (row.run_id, row.conversation_id) == ("r1", "c1")
