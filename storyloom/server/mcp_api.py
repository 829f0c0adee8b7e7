"""``/api/mcp/servers``: the external MCP servers storyloom connects to, their status and
their tools (``mcp.<server>.<tool>``).

Env values sent with ``PUT`` are kept in the encrypted secret store, never in
``mcp_servers.json`` and never sent back: a server lists only its env names
(``envKeys``). In a ``PUT`` an env name with a value sets it, one with ``null`` removes
it, and one left out keeps what is stored. ``scope`` says which file holds the server:
the project's ``mcp_servers.json`` or the data directory's (a project's server hides the
user's server of the same name). A change reconnects the server; the answer is its
status once it has connected or failed.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from fastapi import APIRouter, Path, Request, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from storyloom.core.errors import FieldProblem, InvalidInput, NotFound
from storyloom.server.api_errors import error_responses
from storyloom.server.state import ServerState, server_state
from storyloom.tools.mcp_client import McpServerStatus, project_folder
from storyloom.tools.mcp_config import (
    SERVER_NAME_PATTERN,
    McpServerConfig,
    ScopedServer,
    config_file,
    load_servers,
    read_servers_file,
    remove_server,
    save_server,
    secret_key,
)

router = APIRouter(prefix="/api/mcp/servers", tags=["mcp"])

_ERRORS = error_responses(404, 422)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

ServerName = Path(pattern=SERVER_NAME_PATTERN, description="Letters, digits, '-' and '_'")


class _Camel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, serialize_by_alias=True
    )


class McpServerInfo(_Camel):
    """One configured server, how it is reached, and how it is doing."""

    name: str
    scope: Literal["project", "user"]
    transport: Literal["stdio", "http"]
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    url: str | None = None
    env_keys: list[str] = Field(
        default_factory=list, description="Names of its env values (values are never sent)"
    )
    timeout_s: float
    enabled: bool
    status: Literal["connected", "connecting", "failed", "disabled"]
    error: str | None = None
    tools: list[str] = Field(default_factory=list, description="Its tool ids, mcp.<server>.<tool>")

    @classmethod
    def of(cls, status: McpServerStatus) -> McpServerInfo:
        return cls(
            name=status.name,
            scope=status.scope,
            transport=status.transport,
            command=status.command,
            args=status.args,
            url=status.url,
            env_keys=sorted({*status.env_keys, *status.secret_env_keys}),
            timeout_s=status.timeout_s,
            enabled=status.enabled,
            status=status.status,
            error=status.error,
            tools=status.tools,
        )


class McpServerUpdate(_Camel):
    """A server to create or change (``PUT /api/mcp/servers/{name}``)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    name: str | None = Field(default=None, description="If given, the name in the path")
    scope: Literal["project", "user"] = "project"
    transport: Literal["stdio", "http"] | None = Field(
        default=None, description="Left out: http when url is set, else stdio"
    )
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    url: str | None = None
    env: dict[str, str | None] = Field(
        default_factory=dict,
        description="Env values to store (secret), null to remove one; names left out keep "
        "their stored value",
    )
    timeout_s: float = Field(default=30.0, gt=0, le=3600)
    enabled: bool = True

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str | None]) -> dict[str, str | None]:
        for name in value:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not an environment variable name")
        return value


def _clients(state: ServerState) -> Any:
    return state.tools.mcp


@router.get("", response_model=list[McpServerInfo])
def list_servers(request: Request) -> list[McpServerInfo]:
    return [McpServerInfo.of(s) for s in _clients(server_state(request)).status()]


@router.put("/{name}", response_model=McpServerInfo, responses=_ERRORS)
async def put_server(
    request: Request, body: McpServerUpdate, name: str = ServerName
) -> McpServerInfo:
    """Create or change the server ``name`` in the file of ``scope``; it reconnects."""
    state = server_state(request)
    if body.name is not None and body.name != name:
        reason = f"is {body.name!r}, but the server saved is {name!r}"
        raise InvalidInput.of("MCP server", [FieldProblem("name", reason)])
    folder = project_folder(body.scope, state.project_dir, state.home)
    before = read_servers_file(config_file(folder)).mcp_servers.get(name)
    config = _config(name, body, before)
    secrets = state.tools.secrets
    for key, value in body.env.items():
        secrets.set(secret_key(name, key), value)
    save_server(folder, config)
    clients = _clients(state)
    await clients.reload()
    status: McpServerStatus = await clients.reconnect(name)
    return McpServerInfo.of(status)


def _config(name: str, body: McpServerUpdate, before: McpServerConfig | None) -> McpServerConfig:
    """The server's new configuration: ``body`` over what the file held (its cwd and
    headers, which this API does not edit, are kept)."""
    plain = dict(before.env) if before is not None else {}
    secret = set(before.secret_env) if before is not None else set()
    for key, value in body.env.items():
        plain.pop(key, None)
        if value is None:
            secret.discard(key)
        else:
            secret.add(key)
    data: dict[str, Any] = {
        "name": name,
        "type": body.transport,
        "command": body.command,
        "args": body.args,
        "url": body.url,
        "env": plain,
        "secret_env": sorted(secret),
        "timeout_s": body.timeout_s,
        "enabled": body.enabled,
    }
    if before is not None:
        data |= {
            "cwd": before.cwd,
            "headers": before.headers,
            "secret_headers": before.secret_headers,
        }
    try:
        return McpServerConfig.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput.from_validation("MCP server", exc) from None


def _configured(state: ServerState, name: str) -> ScopedServer:
    found, _ = load_servers(state.project_dir, state.home)
    for server in found:
        if server.name == name:
            return server
    raise NotFound(f"no MCP server named {name}")


@router.delete("/{name}", status_code=204, responses=_ERRORS)
async def delete_server(request: Request, name: str = ServerName) -> Response:
    """Remove the server (from the file that defines it) and its stored secrets."""
    state = server_state(request)
    server = _configured(state, name)
    remove_server(project_folder(server.scope, state.project_dir, state.home), name)
    for key in [*server.config.secret_env, *server.config.secret_headers]:
        state.tools.secrets.set(secret_key(name, key), None)
    await _clients(state).reload()
    return Response(status_code=204)


@router.post("/{name}/reconnect", response_model=McpServerInfo, responses=_ERRORS)
async def reconnect_server(request: Request, name: str = ServerName) -> McpServerInfo:
    """Drop the connection and open it again; the status once it settled."""
    status: McpServerStatus = await _clients(server_state(request)).reconnect(name)
    return McpServerInfo.of(status)
