"""storyloom's MCP client against servers no one here wrote: the reference
``@modelcontextprotocol/server-everything`` over stdio, through a real ToolHost's
ToolManager (policy from settings.json, audit); a server that dies mid-call; servers
that never start."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from storyloom.tools.mcp_client import McpClients
from storyloom.tools.mcp_config import secret_key
from storyloom.tools.tool_host import ToolHost
from storyloom.tools.tool_manager import ToolCallContext, ToolCaller
from tests.tools.mcp_support import (
    EVERYTHING_JS,
    make_tool_host,
    require_npm_package,
    write_servers,
)

# A stdio MCP server written with the SDK: ``echo`` answers, ``die`` kills the process
# in the middle of the call; ``who`` says which start of the process answers.
FRAGILE_SERVER = """
import os, sys, time
import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

STARTED = str(time.time_ns())
SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}

async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[
        types.Tool(name=n, description=n, input_schema=SCHEMA) for n in ("echo", "die", "who")
    ])

async def call_tool(ctx, params):
    if params.name == "die":
        os._exit(3)
    if params.name == "who":
        return types.CallToolResult(content=[types.TextContent(text=STARTED)])
    return types.CallToolResult(content=[types.TextContent(text=params.arguments["text"])])

async def main():
    server = Server("fragile", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (r, w):
        await server.run(r, w, server.create_initialization_options())

anyio.run(main)
"""


def _context(host: ToolHost) -> ToolCallContext:
    return ToolCallContext(caller=ToolCaller(kind="agent", name="test"), policy=host.policy())


@pytest.fixture
async def clients(tmp_path: Path) -> AsyncIterator[tuple[ToolHost, McpClients]]:
    everything = require_npm_package(EVERYTHING_JS)
    fragile = tmp_path / "fragile_server.py"
    fragile.write_text(FRAGILE_SERVER, encoding="utf-8")
    policy = {
        "rules": [
            {"tool": "mcp.*", "action": "allow"},
            {"tool": "mcp.everything.get-env", "action": "deny"},
        ],
        "default": "deny",
    }
    host = make_tool_host(tmp_path, [], policy)
    assert host.project_dir is not None
    write_servers(
        host.home,
        {
            "everything": {"command": "node", "args": [str(everything), "stdio"]},
            "fragile": {"command": sys.executable, "args": [str(fragile)], "timeoutS": 20},
        },
    )
    write_servers(
        host.project_dir,
        {
            "broken": {"command": str(tmp_path / "no-such-command")},
            "keyed": {"command": "node", "args": ["-e", ""], "secretEnv": ["API_KEY"]},
        },
    )
    await host.start()
    await host.mcp.wait_ready()
    try:
        yield host, host.mcp
    finally:
        await host.aclose()
        host.database.close()


async def test_server_everything_tools_are_listed_and_called_through_the_tool_manager(
    clients: tuple[ToolHost, McpClients],
) -> None:
    host, _mcp = clients
    ids = {entry.id: entry for entry in host.manager.entries()}
    assert "mcp.everything.echo" in ids and "mcp.everything.get-sum" in ids
    echo = ids["mcp.everything.echo"]
    assert echo.source == "mcp:everything" and echo.implementation_type == "mcp"
    assert echo.definition.parameters["properties"]["message"]["type"] == "string"

    said = await host.manager.call("mcp.everything.echo", {"message": "hello"}, _context(host))
    assert said.ok, said.error
    assert said.result == "Echo: hello"
    summed = await host.manager.call("mcp.everything.get-sum", {"a": 2, "b": 40}, _context(host))
    assert summed.ok, summed.error
    assert "42" in str(summed.result)

    denied = await host.manager.call("mcp.everything.get-env", {}, _context(host))
    assert not denied.ok and denied.decision == "denied"
    invalid = await host.manager.call("mcp.everything.get-sum", {"a": "x"}, _context(host))
    assert not invalid.ok and invalid.decision == "invalid"

    entries, _ = host.manager.audit.list(limit=10, offset=0)
    assert [e.tool for e in entries][-2:] == ["mcp.everything.get-sum", "mcp.everything.echo"]
    assert entries[-1].caller.kind == "agent"


async def test_a_server_that_cannot_start_is_reported_and_hides_no_other(
    clients: tuple[ToolHost, McpClients],
) -> None:
    host, mcp = clients
    status = {s.name: s for s in mcp.status()}
    assert status["everything"].status == "connected"
    assert status["fragile"].status == "connected"
    assert status["broken"].status == "failed"
    assert status["broken"].error and status["broken"].scope == "project"
    assert status["keyed"].status == "failed"
    assert status["keyed"].error is not None and "API_KEY" in status["keyed"].error
    assert status["keyed"].secret_env_keys == ["API_KEY"]
    ids = {entry.id for entry in host.manager.entries()}
    assert {"mcp.everything.echo", "mcp.fragile.echo"} <= ids


async def test_a_server_dying_mid_call_fails_that_call_only_and_reconnects(
    clients: tuple[ToolHost, McpClients],
) -> None:
    host, mcp = clients
    first = await host.manager.call("mcp.fragile.who", {}, _context(host))
    assert first.ok, first.error

    died = await host.manager.call("mcp.fragile.die", {}, _context(host))
    assert not died.ok
    assert died.error and "fragile" in died.error

    # The other server never noticed.
    other = await host.manager.call("mcp.everything.echo", {"message": "still"}, _context(host))
    assert other.ok and other.result == "Echo: still"

    # The next call starts the server again.
    again = await host.manager.call("mcp.fragile.echo", {"text": "back"}, _context(host))
    assert again.ok, again.error
    assert again.result == "back"
    second = await host.manager.call("mcp.fragile.who", {}, _context(host))
    assert second.ok and second.result != first.result
    assert mcp.server_status("fragile").status == "connected"


async def test_reconnect_restarts_a_server_and_a_set_secret_lets_it_start(
    clients: tuple[ToolHost, McpClients],
) -> None:
    host, mcp = clients
    before = await host.manager.call("mcp.fragile.who", {}, _context(host))
    status = await mcp.reconnect("fragile")
    assert status.status == "connected"
    after = await host.manager.call("mcp.fragile.who", {}, _context(host))
    assert after.ok and after.result != before.result

    host.secrets.set(secret_key("keyed", "API_KEY"), "s3cret")
    keyed = await mcp.reconnect("keyed")
    # The secret is found now; `node -e ""` is no MCP server, so it fails for that reason.
    assert keyed.status == "failed"
    assert keyed.error is not None and "API_KEY" not in keyed.error
