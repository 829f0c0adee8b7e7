"""The ToolHost of a command-line process: built from a data directory and a project;
the global policy in settings.json; approvals answered through the broker."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from storyloom.plugins import node_registry
from storyloom.project.project_file import init_project
from storyloom.tools.agent_service import AgentService
from storyloom.tools.mcp_client import McpClients
from storyloom.tools.tool_host import ToolHost, open_tool_host
from storyloom.tools.tool_manager import ToolCallContext, ToolCaller
from storyloom.tools.tool_policy import ToolPolicy


def opened(tmp_path: Path) -> ToolHost:
    home = tmp_path / "home"
    home.mkdir()
    (home / "settings.json").write_text(
        json.dumps(
            {"tool_policy": {"rules": [{"tool": "kb:*", "action": "deny"}], "default": "ask"}}
        )
    )
    project = tmp_path / "project"
    init_project(project)
    return open_tool_host(home, project, node_registry=node_registry(entry_points=False))


async def close(host: ToolHost) -> None:
    await host.aclose()
    if host.knowledge is not None:
        await host.knowledge.aclose()
    host.database.close()


async def test_the_host_reads_and_saves_the_global_policy(tmp_path: Path) -> None:
    host = opened(tmp_path)
    try:
        assert isinstance(host.agents, AgentService) and isinstance(host.mcp, McpClients)
        assert host.policy().action("kb:Query") == "deny"
        assert host.policy().action("chat:RollDice") == "ask"
        host.save_policy(host.policy().with_rule("chat:RollDice", "allow"))
        assert host.policy().action("chat:RollDice") == "allow"
        stored = json.loads((host.home / "settings.json").read_text())["tool_policy"]
        assert {"tool": "chat:RollDice", "action": "allow"} in stored["rules"]
        assert stored["default"] == "ask"
        # The agent's own call is now allowed without anyone being asked.
        ctx = ToolCallContext(
            caller=ToolCaller("agent", "bard"),
            policy=ToolPolicy(default="allow"),
            inventory=("chat:RollDice",),
        )
        result = await host.manager.call("chat:RollDice", {"notation": "d4"}, ctx)
        assert result.decision == "allowed" and result.ok
    finally:
        await close(host)


async def test_an_ask_waits_for_a_person_through_the_broker(tmp_path: Path) -> None:
    host = opened(tmp_path)
    try:
        caller = ToolCaller("agent", "bard", conversation_id="c1")

        async def approve(tool: str, arguments: dict[str, object]) -> str:
            return await host.approvals.request(tool, dict(arguments), caller)

        ctx = ToolCallContext(caller=caller, approve=approve, policy=ToolPolicy(default="allow"))  # type: ignore[arg-type]
        call = asyncio.create_task(host.manager.call("chat:RollDice", {"notation": "d6"}, ctx))
        for _ in range(100):
            if host.approvals.pending():
                break
            await asyncio.sleep(0.01)
        (pending,) = host.approvals.pending()
        assert pending.tool == "chat:RollDice" and pending.arguments == {"notation": "d6"}
        assert not call.done()
        host.approvals.answer(pending.id, "allow_once")
        result = await asyncio.wait_for(call, 10)
        assert result.ok and result.decision == "approved"
        denied = await host.manager.call("kb:Query", {"query": "x"}, ctx)
        assert denied.decision == "denied" and host.approvals.pending() == []
    finally:
        await close(host)
