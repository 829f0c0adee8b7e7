"""The registry over real sources: built-ins, an enabled plugin (its tool files, its
functions, its workflows), project workflows, node types and run-time sources; one id
namespace, problems named with their places."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from storyloom.core.settings import Settings
from storyloom.tools import builtin_tools
from storyloom.tools.plugin_host import PluginHost
from storyloom.tools.plugin_scaffold import write_example_plugin
from storyloom.tools.tool_definition import ToolEntry
from storyloom.tools.tool_registry import ToolProblem
from tests.tools.plugin_support import HOSTS
from tests.tools.tool_support import GREET, Tools, make_tools, service_tool

NAME = "demo"


def with_plugin(tmp_path: Path, *, enabled: bool = True) -> tuple[Tools, Path]:
    tools = make_tools(tmp_path)
    folder = tools.project / "plugins" / NAME
    write_example_plugin(folder, NAME)
    settings = Settings.model_validate({"plugins": {"enabled": [NAME] if enabled else []}})
    host = PluginHost(
        tools.project,
        tools.home,
        lambda: settings,
        tools.registry.node_registry,
        builtins=[builtin_tools],
    )
    HOSTS.append(host)
    tools.registry.plugins = host
    tools.manager.hooks = lambda: host.hook
    return tools, folder


def write_tool(folder: Path, file: str, data: dict[str, Any] | str) -> Path:
    path = folder / "tools" / file
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def by_id(tools: Tools) -> dict[str, ToolEntry]:
    # The plugin host finds new files when it reloads (the server does on changes).
    assert tools.registry.plugins is not None
    tools.registry.plugins.reload()
    return {entry.id: entry for entry in tools.registry.entries()}


async def test_an_enabled_plugin_offers_its_tools_and_workflows(tmp_path: Path) -> None:
    tools, _ = with_plugin(tmp_path)
    found = by_id(tools)
    assert found["demo:shout"].source == "plugin:demo" and found["demo:shout"].available
    assert found["demo:greet"].implementation_type == "service"
    assert found["workflow:demo_shout"].plugin == "demo"
    assert found["node:demo:Shout"].source == "node"
    assert found["kb:Query"].source == "builtin"
    ctx = tools.context()
    greet = await tools.manager.call("demo:greet", {"name": "Ann"}, ctx)
    assert (greet.ok, greet.result) == (True, "Hello, Ann")
    shout = await tools.manager.call("demo:shout", {"text": "hey"}, ctx)
    assert (shout.ok, shout.result) == (True, "HEY!"), shout.error
    flow = await tools.manager.call("workflow:demo_shout", {"text": "hey"}, ctx)
    assert (flow.ok, flow.result) == (True, "HEY!"), flow.error


def test_a_disabled_plugin_offers_nothing(tmp_path: Path) -> None:
    tools, _ = with_plugin(tmp_path, enabled=False)
    found = by_id(tools)
    assert not any(tool_id.startswith("demo:") or "demo_" in tool_id for tool_id in found)
    assert "kb:Query" in found


def test_sources_come_in_order_and_ids_sorted_within_each(tmp_path: Path) -> None:
    tools, _ = with_plugin(tmp_path)
    tools.write_workflow(GREET)
    sources = [entry.source for entry in tools.registry.entries()]
    rank = {"builtin": 0, "plugin:demo": 1, "workflow": 2, "node": 3}
    assert [rank[s] for s in sources] == sorted(rank[s] for s in sources)
    builtin_ids = [e.id for e in tools.registry.entries() if e.source == "builtin"]
    assert builtin_ids == sorted(builtin_ids)
    assert [e.id for e in tools.registry.entries()] == [e.id for e in tools.registry.entries()]


def test_an_id_declared_twice_keeps_the_first_and_names_both_places(tmp_path: Path) -> None:
    tools, folder = with_plugin(tmp_path)
    clash = write_tool(
        folder,
        "clash.tool.json",
        {
            "id": "kb:Query",
            "parameters": {"type": "object"},
            "implementation": {"type": "service", "function": "greet"},
        },
    )
    tools.write_workflow({**GREET, "id": "demo_shout"})
    found = by_id(tools)
    assert found["kb:Query"].source == "builtin"
    assert found["workflow:demo_shout"].source == "plugin:demo"
    problems = tools.registry.problems()
    twice = {p.tool: p for p in problems if p.tool}
    assert str(clash) in twice["kb:Query"].reason and "built-in tools" in twice["kb:Query"].reason
    project_file = str(tools.project / "workflows" / "demo_shout.json")
    assert twice["workflow:demo_shout"].where == project_file


def test_broken_files_are_problems_and_the_rest_still_works(tmp_path: Path) -> None:
    tools, folder = with_plugin(tmp_path)
    bad = write_tool(
        folder, "bad.tool.json", {"id": "demo:bad", "implementation": {"type": "service"}}
    )
    write_tool(folder, "worse.tool.json", "{not json")
    by_id(tools)
    problems = [p for p in tools.registry.problems() if p.where == str(bad)]
    assert problems and "implementation.service.function" in problems[0].reason
    assert any(
        p.where.endswith("worse.tool.json") and "not JSON" in p.reason
        for p in tools.registry.problems()
    )
    assert by_id(tools)["demo:greet"].available


async def test_a_workflow_tool_whose_workflow_is_gone_is_unavailable_with_the_reason(
    tmp_path: Path,
) -> None:
    tools, folder = with_plugin(tmp_path)
    write_tool(
        folder,
        "gone.tool.json",
        {"id": "demo:gone", "implementation": {"type": "workflow", "workflow": "nowhere"}},
    )
    write_tool(
        folder,
        "greet2.tool.json",
        {"id": "demo:hello", "implementation": {"type": "workflow", "workflow": "greet"}},
    )
    tools.write_workflow(GREET)
    found = by_id(tools)
    assert not found["demo:gone"].available
    assert "workflow 'nowhere' is gone" in (found["demo:gone"].unavailable_reason or "")
    result = await tools.manager.call("demo:gone", {}, tools.context())
    assert result.decision == "unknown" and "is gone" in (result.error or "")
    # A workflow tool without parameters takes the workflow's interface.
    hello = found["demo:hello"]
    assert hello.available and hello.definition.parameters["required"] == ["name"]
    ran = await tools.manager.call("demo:hello", {"name": "Bo"}, tools.context())
    assert (ran.ok, ran.result) == (True, "Hello, Bo"), ran.error


def test_a_script_tool_is_bound_to_the_sandbox_unless_its_command_is_missing(
    tmp_path: Path,
) -> None:
    tools, folder = with_plugin(tmp_path)
    for name, command in (("script", "python x.py"), ("bun", "bun x.ts")):
        write_tool(
            folder,
            f"{name}.tool.json",
            {
                "id": f"demo:{name}",
                "parameters": {"type": "object"},
                "implementation": {"type": "script", "command": command},
            },
        )
    found = by_id(tools)
    assert found["demo:script"].available and found["demo:script"].function is not None
    assert not found["demo:bun"].available
    assert "command 'bun' is not installed" in (found["demo:bun"].unavailable_reason or "")


def test_a_service_tool_naming_no_function_is_unavailable(tmp_path: Path) -> None:
    tools, folder = with_plugin(tmp_path)
    write_tool(
        folder,
        "ghost.tool.json",
        {
            "id": "demo:ghost",
            "parameters": {"type": "object"},
            "implementation": {"type": "service", "function": "ghost"},
        },
    )
    entry = by_id(tools)["demo:ghost"]
    assert not entry.available and "'ghost'" in (entry.unavailable_reason or "")


async def test_runtime_sources_come_last_and_a_failing_one_hides_nothing(tmp_path: Path) -> None:
    tools, _ = with_plugin(tmp_path)

    def mcp_tools() -> list[ToolEntry]:
        tool = service_tool("mcp.srv.echo", lambda args, ctx: args, {"type": "object"})
        clash = service_tool("kb:Query", lambda args, ctx: "mine")
        return [
            ToolEntry(tool.definition, "mcp:srv", function=tool.function),
            ToolEntry(clash.definition, "mcp:srv", function=clash.function),
        ]

    def broken() -> list[ToolEntry]:
        raise ConnectionError("server died")

    tools.registry.add_source("mcp:srv", mcp_tools)
    tools.registry.add_source("mcp:dead", broken)
    entries = tools.registry.entries()
    assert entries[-1].id == "mcp.srv.echo" and entries[-1].implementation_type == "mcp"
    assert by_id(tools)["kb:Query"].source == "builtin"
    assert (
        ToolProblem("mcp:dead", "could not list its tools: server died")
        in tools.registry.problems()
    )
    result = await tools.manager.call("mcp.srv.echo", {}, tools.context())
    assert result.ok and result.result == {}
    tools.registry.remove_source("mcp:srv")
    assert "mcp.srv.echo" not in by_id(tools)


def test_node_types_with_dynamic_slots_are_not_tools(tmp_path: Path) -> None:
    tools = make_tools(tmp_path)
    found = {entry.id: entry for entry in tools.registry.entries()}
    assert "node:core:RegexApplicator" in found
    assert "node:core:GroupInput" not in found and "node:core:SubWorkflow" not in found


async def test_a_plugins_before_call_hook_can_deny_but_not_allow(tmp_path: Path) -> None:
    tools = make_tools(tmp_path)
    folder = tools.project / "plugins" / NAME
    write_example_plugin(folder, NAME)
    manifest = folder / "plugin.yaml"
    manifest.write_text(
        manifest.read_text().replace("hooks: []", "hooks: [hook:server:tool:before-call]")
    )
    with (folder / "nodes" / "demo.py").open("a") as module:
        module.write(
            "\n\n@hookimpl\n"
            "def storyloom_tool_before_call(tool_id: str, arguments: Any, action: str) -> Any:\n"
            "    return 'deny' if tool_id == 'demo:greet' else 'allow'\n"
        )
    settings = Settings.model_validate({"plugins": {"enabled": [NAME]}})
    host = PluginHost(tools.project, tools.home, lambda: settings, tools.registry.node_registry)
    HOSTS.append(host)
    tools.registry.plugins = host
    tools.manager.hooks = lambda: host.hook
    assert not [p for p in host.problems if p.folder.endswith(NAME)]
    denied = await tools.manager.call("demo:greet", {"name": "x"}, tools.context(kind="user"))
    assert denied.decision == "denied"
    tools.policy = tools.policy.model_copy(update={"default": "deny"})
    still = await tools.manager.call("demo:shout", {"text": "x"}, tools.context(kind="user"))
    assert still.decision == "denied"
