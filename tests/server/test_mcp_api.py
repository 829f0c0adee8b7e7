"""``/api/mcp/servers`` and the MCP endpoint ``/mcp`` through the real app: external
servers added, listed with their status and tools, reconnected and removed; env values
kept in the secret store and never answered; a server that cannot start is reported and
hides no other; storyloom's own tools served over Streamable HTTP at ``/mcp``."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.client import Client

from storyloom.tools.mcp_config import secret_key
from storyloom.tools.secret_store import SecretStore
from tests.server.conftest import LiveServer

SECRET = "mcp-secret-value-8086"

# A stdio MCP server written with the SDK: `echo` answers its text, `key_hash` the
# SHA-256 of its API_KEY env value (so a test sees the secret arrived without it being
# in any answer).
SERVER = """
import hashlib, os
import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}

async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[
        types.Tool(name=n, description=n, input_schema=SCHEMA) for n in ("echo", "key_hash")
    ])

async def call_tool(ctx, params):
    if params.name == "key_hash":
        digest = hashlib.sha256(os.environ.get("API_KEY", "").encode()).hexdigest()
        return types.CallToolResult(content=[types.TextContent(text=digest)])
    return types.CallToolResult(content=[types.TextContent(text=params.arguments["text"])])

async def main():
    server = Server("echoer", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (r, w):
        await server.run(r, w, server.create_initialization_options())

anyio.run(main)
"""


@pytest.fixture
def server_script(tmp_path: Path) -> Path:
    path = tmp_path / "echo_server.py"
    path.write_text(SERVER, encoding="utf-8")
    return path


def _stdio(script: Path, **fields: Any) -> dict[str, Any]:
    return {"transport": "stdio", "command": sys.executable, "args": [str(script)], **fields}


def _project(live: LiveServer) -> Path:
    return live.home / "projects" / "default"


def test_a_server_added_is_connected_its_tools_callable_and_its_secret_never_answered(
    client: httpx.Client, live_server: LiveServer, server_script: Path
) -> None:
    body = _stdio(server_script, env={"API_KEY": SECRET}, timeoutS=20)
    added = client.put("/api/mcp/servers/echoer", json=body)
    assert added.status_code == 200, added.text
    info = added.json()
    assert info["name"] == "echoer" and info["scope"] == "project"
    assert info["status"] == "connected", info
    assert info["envKeys"] == ["API_KEY"]
    assert info["tools"] == ["mcp.echoer.echo", "mcp.echoer.key_hash"]
    assert SECRET not in added.text

    config_text = (_project(live_server) / "mcp_servers.json").read_text()
    assert SECRET not in config_text
    assert json.loads(config_text)["mcpServers"]["echoer"]["secretEnv"] == ["API_KEY"]
    assert SecretStore(live_server.home).get(secret_key("echoer", "API_KEY")) == SECRET

    listed = client.get("/api/mcp/servers")
    assert [s["name"] for s in listed.json()] == ["echoer"]
    assert SECRET not in listed.text
    client.put("/api/tools/policy", json={"rules": [{"tool": "mcp.*", "action": "allow"}]})
    echo = client.post(
        "/api/tools/call", json={"tool": "mcp.echoer.echo", "arguments": {"text": "hi"}}
    )
    assert echo.json()["result"] == "hi", echo.text
    hashed = client.post("/api/tools/call", json={"tool": "mcp.echoer.key_hash", "arguments": {}})
    assert hashed.json()["result"] == hashlib.sha256(SECRET.encode()).hexdigest()
    tools = {t["id"]: t for t in client.get("/api/tools").json()}
    assert tools["mcp.echoer.echo"]["implementation"] == "mcp"
    assert tools["mcp.echoer.echo"]["source"] == "mcp:echoer"


def test_an_env_value_left_out_is_kept_and_null_removes_it(
    client: httpx.Client, live_server: LiveServer, server_script: Path
) -> None:
    client.put("/api/mcp/servers/echoer", json=_stdio(server_script, env={"API_KEY": SECRET}))
    kept = client.put("/api/mcp/servers/echoer", json=_stdio(server_script, timeoutS=15))
    assert kept.json()["envKeys"] == ["API_KEY"] and kept.json()["timeoutS"] == 15
    assert SecretStore(live_server.home).get(secret_key("echoer", "API_KEY")) == SECRET
    removed = client.put(
        "/api/mcp/servers/echoer", json=_stdio(server_script, env={"API_KEY": None})
    )
    assert removed.json()["envKeys"] == []
    assert SecretStore(live_server.home).get(secret_key("echoer", "API_KEY")) is None


def test_a_server_that_cannot_start_is_failed_and_the_others_go_on(
    client: httpx.Client, live_server: LiveServer, server_script: Path, tmp_path: Path
) -> None:
    client.put("/api/mcp/servers/echoer", json=_stdio(server_script))
    broken = client.put(
        "/api/mcp/servers/broken",
        json={"command": str(tmp_path / "no-such-command"), "scope": "user"},
    )
    assert broken.status_code == 200
    assert broken.json()["status"] == "failed" and broken.json()["error"]
    assert broken.json()["scope"] == "user"
    assert (live_server.home / "mcp_servers.json").is_file()
    statuses = {s["name"]: s["status"] for s in client.get("/api/mcp/servers").json()}
    assert statuses == {"broken": "failed", "echoer": "connected"}
    again = client.post("/api/mcp/servers/broken/reconnect")
    assert again.status_code == 200 and again.json()["status"] == "failed"
    assert client.post("/api/mcp/servers/echoer/reconnect").json()["status"] == "connected"


def test_a_disabled_server_is_listed_without_connecting(
    client: httpx.Client, server_script: Path
) -> None:
    added = client.put("/api/mcp/servers/quiet", json=_stdio(server_script, enabled=False))
    assert added.json()["status"] == "disabled"
    assert added.json()["tools"] == []


def test_delete_removes_the_server_and_its_secrets(
    client: httpx.Client, live_server: LiveServer, server_script: Path
) -> None:
    client.put("/api/mcp/servers/echoer", json=_stdio(server_script, env={"API_KEY": SECRET}))
    assert client.delete("/api/mcp/servers/echoer").status_code == 204
    assert client.get("/api/mcp/servers").json() == []
    assert "echoer" not in (_project(live_server) / "mcp_servers.json").read_text()
    assert SecretStore(live_server.home).get(secret_key("echoer", "API_KEY")) is None
    assert client.delete("/api/mcp/servers/echoer").status_code == 404
    assert client.post("/api/mcp/servers/echoer/reconnect").status_code == 404


def test_bad_server_settings_name_the_field_and_change_nothing(
    client: httpx.Client, live_server: LiveServer
) -> None:
    no_command = client.put("/api/mcp/servers/x", json={"transport": "stdio", "args": []})
    assert no_command.status_code == 422
    assert "command" in no_command.json()["error"]["message"]
    bad_url = client.put("/api/mcp/servers/x", json={"transport": "http", "url": "ftp://host"})
    assert bad_url.status_code == 422
    bad_env = client.put("/api/mcp/servers/x", json={"command": "true", "env": {"NOT A NAME": "v"}})
    assert bad_env.status_code == 422
    assert bad_env.json()["error"]["problems"][0]["field"] == "env"
    other_name = client.put("/api/mcp/servers/x", json={"name": "y", "command": "true"})
    assert other_name.status_code == 422
    assert client.put("/api/mcp/servers/bad.name", json={"command": "true"}).status_code == 422
    assert not (_project(live_server) / "mcp_servers.json").exists()
    assert client.get("/api/mcp/servers").json() == []


async def test_storyloom_serves_its_tools_over_streamable_http_at_mcp(
    live_server: LiveServer,
) -> None:
    async with httpx.AsyncClient(base_url=live_server.url) as api:
        await api.put("/api/tools/policy", json={"rules": [], "default": "allow"})
    async with Client(f"{live_server.url}/mcp", mode="legacy") as mcp:
        names = {tool.name for tool in (await mcp.list_tools()).tools}
        assert "system.get_current_time" in names
        result = await mcp.call_tool("system.get_current_time", {})
        assert not result.is_error
    async with httpx.AsyncClient(base_url=live_server.url) as api:
        audit = (await api.get("/api/tools/audit")).json()["entries"][0]
    assert audit["caller"]["kind"] == "mcp" and audit["tool"] == "system:get_current_time"


def test_the_mcp_endpoint_asks_for_the_token_like_every_route(
    tmp_path: Path, start_server: Any
) -> None:
    token = "mcp-test-token-0123456789"
    live = start_server(tmp_path / "home", token=token)
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
    headers = {"accept": "application/json, text/event-stream"}
    refused = httpx.post(f"{live.url}/mcp", json=initialize, headers=headers)
    assert refused.status_code == 401
    allowed = httpx.post(
        f"{live.url}/mcp",
        json=initialize,
        headers={**headers, "authorization": f"Bearer {token}"},
    )
    assert allowed.status_code == 200, allowed.text
