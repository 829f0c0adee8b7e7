"""storyloom's MCP server seen through the SDK's own client: in memory and over loopback
HTTP; names mapped both ways, the policy applied, calls audited, KBs as resources."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError

from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.tools.mcp_server import build_mcp_server, kb_uri, mcp_http_app
from storyloom.tools.tool_names import from_mcp_name, to_mcp_name
from tests.tools.mcp_support import McpTestHost, make_host, serve_mcp
from tests.tools.tool_support import service_tool

SCHEMA_2020 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"n": {"type": "integer", "minimum": 0}},
    "properties": {"a": {"$ref": "#/$defs/n"}, "b": {"$ref": "#/$defs/n"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}

# Plain ids, an id holding '.', one holding CJK characters: each must round-trip.
TOOL_IDS = ["demo:add", "demo:echo", "demo:v1.2.echo", "demo:掷骰", "demo:boom", "demo:secret"]


def _echo(arguments: dict[str, Any], _context: Any) -> Any:
    return arguments.get("text", "")


def _add(arguments: dict[str, Any], _context: Any) -> Any:
    return {"sum": arguments["a"] + arguments["b"]}


def _boom(_arguments: dict[str, Any], _context: Any) -> Any:
    raise RuntimeError("the tool broke")


TEXT_PARAMS = {"type": "object", "properties": {"text": {"type": "string"}}}


@pytest.fixture
def host(tmp_path: Path) -> McpTestHost:
    tools = [
        service_tool("demo:add", _add, description="Add two numbers", parameters=SCHEMA_2020),
        service_tool("demo:echo", _echo, description="Echo text", parameters=TEXT_PARAMS),
        service_tool("demo:v1.2.echo", _echo, description="Echo, v1.2", parameters=TEXT_PARAMS),
        service_tool("demo:掷骰", _echo, parameters=TEXT_PARAMS),
        service_tool("demo:boom", _boom, description="Always fails"),
        service_tool("demo:secret", _echo, description="Hidden by policy"),
    ]
    built = make_host(tmp_path, tools)
    # Denied tools (every node type here, and demo:secret) are not listed.
    built.set_policy("deny", **{"demo:*": "allow", "demo:secret": "deny", "kb:*": "allow"})
    kb = KnowledgeBase(
        kb_id="kb-lore",
        kb_displayName="Lore",
        kb_description="World facts",
        entries=[CAIU.model_validate({"id": "e1", "content": {"text": "Dragons sleep."}})],
    )
    built.knowledge.create(kb, "local")
    return built


async def _check_session(client: Client, host: McpTestHost) -> None:
    listed = await client.list_tools()
    names = {tool.name for tool in listed.tools}
    expected = {to_mcp_name(tool_id) for tool_id in TOOL_IDS if tool_id != "demo:secret"}
    assert names == expected
    assert {from_mcp_name(name) for name in names} == set(TOOL_IDS) - {"demo:secret"}
    add = next(tool for tool in listed.tools if tool.name == "demo.add")
    assert add.input_schema == SCHEMA_2020  # kept as written, keywords and all

    # A name with an escape goes out and comes back to the same tool.
    for tool_id in ("demo:v1.2.echo", "demo:掷骰"):
        result = await client.call_tool(to_mcp_name(tool_id), {"text": f"via {tool_id}"})
        assert not result.is_error
        assert result.content[0] == types.TextContent(text=f"via {tool_id}")

    summed = await client.call_tool("demo.add", {"a": 2, "b": 3})
    assert not summed.is_error
    assert summed.structured_content == {"sum": 5}
    assert json.loads(summed.content[0].text) == {"sum": 5}  # type: ignore[union-attr]

    failed = await client.call_tool("demo.boom", {})
    assert failed.is_error
    assert "the tool broke" in failed.content[0].text  # type: ignore[union-attr]

    invalid = await client.call_tool("demo.add", {"a": "two", "b": 3})
    assert invalid.is_error

    with pytest.raises(MCPError, match="unknown tool"):
        await client.call_tool("demo.secret", {})

    entries, _total = host.manager.audit.list(limit=50, offset=0)
    callers = {(entry.caller.kind, entry.tool) for entry in entries}
    assert ("mcp", "demo:add") in callers
    assert ("mcp", "demo:v1.2.echo") in callers


async def test_tools_round_trip_through_an_sdk_client_in_memory(host: McpTestHost) -> None:
    server = build_mcp_server(host)
    async with Client(server, mode="legacy") as client:
        await _check_session(client, host)


async def test_tools_round_trip_through_an_sdk_client_over_http(host: McpTestHost) -> None:
    with serve_mcp(mcp_http_app(host)) as url:
        async with Client(url, mode="legacy") as client:
            await _check_session(client, host)


async def test_an_ask_tool_is_listed_but_its_call_says_how_to_allow_it(host: McpTestHost) -> None:
    host.set_policy("deny", **{"demo:*": "allow", "demo:echo": "ask"})
    async with Client(build_mcp_server(host), mode="legacy") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "demo.echo" in names
        result = await client.call_tool("demo.echo", {"text": "hi"})
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert "approval" in text and "allow it in storyloom's tool policy" in text
    entries, _ = host.manager.audit.list(limit=5, offset=0)
    assert entries[0].tool == "demo:echo" and entries[0].decision == "denied"


async def test_a_namespace_is_served_under_bare_names(host: McpTestHost) -> None:
    server = build_mcp_server(host, namespace="demo")
    async with Client(server, mode="legacy") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"add", "echo", "boom"} <= names
        assert "demo.add" not in names
        result = await client.call_tool("add", {"a": 1, "b": 1})
    assert result.structured_content == {"sum": 2}


async def test_knowledge_bases_are_resources(host: McpTestHost) -> None:
    async with Client(build_mcp_server(host), mode="legacy") as client:
        resources = (await client.list_resources()).resources
        assert [(r.uri, r.name) for r in resources] == [(kb_uri("kb-lore"), "Lore")]
        read = await client.read_resource(kb_uri("kb-lore"))
        content = read.contents[0]
        assert isinstance(content, types.TextResourceContents)
        kb = json.loads(content.text)
        assert kb["kb_id"] == "kb-lore"
        assert kb["entries"][0]["content"]["text"] == "Dragons sleep."
        with pytest.raises(MCPError, match="no knowledge base"):
            await client.read_resource(kb_uri("kb-missing"))
        host.set_policy("allow", **{"kb:*": "deny"})
        assert (await client.list_resources()).resources == []


async def test_storyloom_mcp_serve_speaks_mcp_on_stdio(tmp_path: Path) -> None:
    from mcp.client.stdio import StdioServerParameters

    from storyloom.project.project_file import init_project

    home = tmp_path / "home"
    home.mkdir()
    project = tmp_path / "project"
    init_project(project)
    policy = {
        "rules": [{"tool": "system:*", "action": "allow"}, {"tool": "node:*", "action": "deny"}]
    }
    (home / "settings.json").write_text(json.dumps({"tool_policy": policy}), encoding="utf-8")
    command = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "storyloom",
            "mcp",
            "serve",
            "--data-dir",
            str(home),
            "--project",
            str(project),
        ],
    )
    async with Client(command, mode="legacy") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "system.get_current_time" in names
        assert not any(name.startswith("node.") for name in names)
        result = await client.call_tool("system.get_current_time", {})
        assert not result.is_error, result.content
    from storyloom.store.database import Database
    from storyloom.tools.audit_log import AuditLog

    database = Database.in_home(home)
    try:
        entries, _ = AuditLog(database).list(limit=5)
    finally:
        database.close()
    assert entries[0].tool == "system:get_current_time"
    assert (entries[0].caller.kind, entries[0].caller.name) == ("mcp", "mcp-stdio")
