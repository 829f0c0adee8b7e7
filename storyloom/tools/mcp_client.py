"""storyloom as an MCP client: the tools of external MCP servers as storyloom tools.

Each server configured in ``mcp_servers.json`` (see :mod:`storyloom.tools.mcp_config`)
gets one connection, held open by its own background task; its tools join the registry
as source ``mcp:<server>`` with ids ``mcp.<server>.<tool>``, called through the
ToolManager like any other tool (policy, validation, audit).

Failures stay with their server: one that cannot start, answers garbage or dies is
marked ``failed`` with the reason (its tools stay listed: a call reconnects), and every other
server goes on. A failed server is tried again on the next call of one of its tools (or
by :meth:`McpClients.reconnect`); a call that was running when the server died fails
with the reason, and the next call reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED

from storyloom.core.errors import NotFound, StoryloomError, Unavailable
from storyloom.tools.mcp_config import (
    McpConfigProblem,
    ScopedServer,
    load_servers,
    secret_key,
)
from storyloom.tools.tool_definition import ServiceImpl, ToolDefinition, ToolEntry

if TYPE_CHECKING:
    from mcp.client.client import Client

    from storyloom.tools.secret_store import SecretStore
    from storyloom.tools.tool_manager import ToolCallContext, ToolManager

logger = logging.getLogger(__name__)

TOOL_ID_PREFIX = "mcp."
SOURCE_PREFIX = "mcp:"
CONNECT_TIMEOUT_S = 30.0
CLOSE_TIMEOUT_S = 10.0

Status = Literal["connected", "connecting", "failed", "disabled"]


class McpToolError(StoryloomError):
    """The external server ran the tool and reported an error (``isError``)."""


def tool_id(server: str, tool: str) -> str:
    return f"{TOOL_ID_PREFIX}{server}.{tool}"


def split_tool_id(value: str) -> tuple[str, str]:
    """``mcp.<server>.<tool>`` as (server, tool); server names hold no ``.``, tool names may."""
    if not value.startswith(TOOL_ID_PREFIX):
        raise NotFound(f"{value} is not an MCP tool id (mcp.<server>.<tool>)")
    server, dot, tool = value[len(TOOL_ID_PREFIX) :].partition(".")
    if not dot or not server or not tool:
        raise NotFound(f"{value} is not an MCP tool id (mcp.<server>.<tool>)")
    return server, tool


def result_value(result: types.CallToolResult) -> Any:
    """What a storyloom caller gets from an MCP tool result: the structured result when
    the server gives one, else the text (one block: the string; several: joined), else
    the content blocks as JSON."""
    if result.structured_content is not None:
        return result.structured_content
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    if len(texts) == len(result.content):
        return "\n".join(texts)
    return [
        block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content
    ]


def _error_text(result: types.CallToolResult) -> str:
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    return "\n".join(texts) or "the tool reported an error"


@contextlib.asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """Streamable HTTP with the configured headers; the HTTP client closes with it."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def _describe(exc: BaseException) -> str:
    """One line for an exception, unwrapping the exception groups anyio raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class McpClientHost(Protocol):
    """What the clients need of a ToolHost."""

    @property
    def home(self) -> Path: ...

    @property
    def project_dir(self) -> Path | None: ...

    @property
    def secrets(self) -> SecretStore: ...

    @property
    def manager(self) -> ToolManager: ...


@dataclass
class McpServerStatus:
    """One server as the API shows it."""

    name: str
    scope: str
    transport: str
    command: str | None
    args: list[str]
    url: str | None
    env_keys: list[str]
    secret_env_keys: list[str]
    header_keys: list[str]
    timeout_s: float
    enabled: bool
    status: Status
    error: str | None
    tools: list[str]


@dataclass
class _Connection:
    server: ScopedServer
    status: Status = "connecting"
    error: str | None = None
    tools: list[types.Tool] = field(default_factory=list)
    client: Client | None = None
    task: asyncio.Task[None] | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    stop: asyncio.Event = field(default_factory=asyncio.Event)


class McpClients:
    """Every configured external MCP server of one ToolHost (see the module docs)."""

    def __init__(self, host: McpClientHost) -> None:
        self._host = host
        self._connections: dict[str, _Connection] = {}
        self._lock = asyncio.Lock()
        self.problems: list[McpConfigProblem] = []
        self._closed = False
        self._registered: set[str] = set()

    @property
    def _secrets(self) -> SecretStore:
        return self._host.secrets

    # -- configuration ---------------------------------------------------------------------

    def servers(self) -> list[ScopedServer]:
        return [conn.server for conn in self._connections.values()]

    async def start(self) -> None:
        """Read the configuration and connect every enabled server in the background."""
        found, self.problems = load_servers(self._host.project_dir, self._host.home)
        async with self._lock:
            wanted = {server.name: server for server in found}
            for name in list(self._connections):
                if name not in wanted or wanted[name] != self._connections[name].server:
                    await self._stop(self._connections.pop(name))
            for name, server in wanted.items():
                if name not in self._connections:
                    self._connections[name] = self._begin(server)
            self._register(set(wanted))

    def _register(self, names: set[str]) -> None:
        """Each server is one registry source, read afresh whenever the registry is."""
        registry = self._host.manager.registry
        for name in self._registered - names:
            registry.remove_source(f"{SOURCE_PREFIX}{name}")
        for name in names:
            registry.add_source(f"{SOURCE_PREFIX}{name}", functools.partial(self.entries, name))
        self._registered = set(names)

    async def reload(self) -> None:
        """Apply a changed configuration: servers added, removed or changed reconnect."""
        await self.start()

    def _begin(self, server: ScopedServer) -> _Connection:
        conn = _Connection(server)
        if not server.config.enabled:
            conn.status = "disabled"
            conn.ready.set()
            return conn
        conn.task = asyncio.create_task(self._hold(conn), name=f"mcp:{server.name}")
        return conn

    # -- one connection ----------------------------------------------------------------------

    def _target(self, server: ScopedServer) -> Any:
        from mcp.client.stdio import StdioServerParameters

        config = server.config
        if config.transport == "stdio":
            env = dict(config.env)
            for name in config.secret_env:
                value = self._secrets.get(secret_key(config.name, name))
                if value is None:
                    raise Unavailable(
                        f"secret env value {name} of MCP server {config.name} is not set"
                    )
                env[name] = value
            # The server sees PATH and HOME (so `npx`/`uvx` work), never storyloom's own
            # environment (it may hold keys).
            return StdioServerParameters(
                command=config.command or "",
                args=list(config.args),
                env=env,
                cwd=server.cwd(),
            )
        return config.url or ""

    def _http_headers(self, server: ScopedServer) -> dict[str, str]:
        config = server.config
        headers = dict(config.headers)
        for name in config.secret_headers:
            value = self._secrets.get(secret_key(config.name, name))
            if value is None:
                raise Unavailable(f"secret header {name} of MCP server {config.name} is not set")
            headers[name] = value
        return headers

    def _client(self, server: ScopedServer) -> Client:
        from mcp.client.client import Client

        target = self._target(server)
        if server.config.transport == "http":
            return Client(
                _http_transport(target, self._http_headers(server)), mode="legacy", cache=None
            )
        return Client(target, mode="legacy", cache=None)

    async def _hold(self, conn: _Connection) -> None:
        """Open the connection, list its tools, keep it open until told to stop."""
        name = conn.server.name
        try:
            client = self._client(conn.server)
            async with contextlib.AsyncExitStack() as stack:
                async with asyncio.timeout(CONNECT_TIMEOUT_S):
                    await stack.enter_async_context(client)
                    listed = await client.list_tools()
                conn.client = client
                conn.tools = list(listed.tools)
                conn.status, conn.error = "connected", None
                conn.ready.set()
                await conn.stop.wait()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            conn.status, conn.error = "failed", _describe(exc)
            logger.warning("MCP server %s failed: %s", name, conn.error)
        finally:
            conn.client = None
            if conn.status == "connected":
                # The session ended without being asked to (the server closed it).
                conn.status = "failed"
                conn.error = conn.error or "the server closed the connection"
            if conn.stop.is_set() and conn.status == "failed" and conn.error is None:
                conn.status = "disabled"
            conn.ready.set()

    async def _stop(self, conn: _Connection) -> None:
        conn.stop.set()
        if conn.task is not None and not conn.task.done():
            try:
                async with asyncio.timeout(CLOSE_TIMEOUT_S):
                    await asyncio.shield(conn.task)
            except (TimeoutError, Exception):
                conn.task.cancel()
                with contextlib.suppress(BaseException):
                    await conn.task

    async def _restart(self, name: str) -> _Connection:
        async with self._lock:
            old = self._require(name)
            await self._stop(old)
            conn = self._begin(old.server)
            conn.tools = old.tools  # still listed (unavailable) while reconnecting
            self._connections[name] = conn
            return conn

    def _require(self, name: str) -> _Connection:
        conn = self._connections.get(name)
        if conn is None:
            raise NotFound(f"no MCP server named {name}")
        return conn

    # -- what callers use --------------------------------------------------------------------

    async def wait_ready(self, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        """Until every server has connected or failed (tests, the CLI)."""
        async with asyncio.timeout(timeout_s):
            for conn in list(self._connections.values()):
                await conn.ready.wait()

    async def reconnect(self, name: str) -> McpServerStatus:
        """Drop ``name``'s connection and open it again; its status once settled."""
        conn = await self._restart(name)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(conn.server.config.timeout_s + CONNECT_TIMEOUT_S):
                await conn.ready.wait()
        return self._status(conn)

    async def call(self, tool: str, arguments: dict[str, Any], timeout_s: float) -> Any:
        """Call ``mcp.<server>.<tool>``; the result value (see :func:`result_value`).

        Raises :class:`Unavailable` when the server cannot be reached (after one reconnect
        attempt) or the call times out, :class:`McpToolError` when the tool reports an error.
        """
        server, name = split_tool_id(tool)
        conn = self._require(server)
        if conn.status == "disabled":
            raise Unavailable(f"MCP server {server} is disabled")
        await conn.ready.wait()
        if conn.status == "failed" or conn.client is None:
            conn = await self._restart(server)
            await conn.ready.wait()
        client = conn.client
        if conn.status != "connected" or client is None:
            raise Unavailable(f"MCP server {server} is not connected: {conn.error}")
        limit = min(timeout_s, conn.server.config.timeout_s)
        try:
            async with asyncio.timeout(limit):
                result = await client.call_tool(name, arguments)
        except TimeoutError:
            raise Unavailable(
                f"MCP server {server}: {name} did not answer within {limit:g} s"
            ) from None
        except Exception as exc:
            if isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED:
                # The server is gone: this call fails, the next one reconnects.
                conn.status, conn.error = "failed", "the server closed the connection"
                conn.stop.set()
                raise Unavailable(
                    f"MCP server {server} closed the connection during the call; "
                    "the next call reconnects"
                ) from None
            raise McpToolError(f"MCP server {server}: {_describe(exc)}") from None
        if result.is_error:
            raise McpToolError(_error_text(result))
        return result_value(result)

    def entries(self, server: str) -> list[ToolEntry]:
        """The registry entries of ``server``'s tools (the last listing it gave)."""
        conn = self._connections.get(server)
        if conn is None:
            return []
        # A failed server's tools stay callable: the call reconnects (and fails with the
        # reason if the server still cannot be reached). Only a disabled server's are off.
        available = conn.status != "disabled"
        reason = None if available else f"MCP server {server} is disabled"
        return [self._entry(conn, tool, available, reason) for tool in conn.tools]

    def all_entries(self) -> list[ToolEntry]:
        return [entry for name in sorted(self._connections) for entry in self.entries(name)]

    def _entry(
        self, conn: _Connection, tool: types.Tool, available: bool, reason: str | None
    ) -> ToolEntry:
        full_id = tool_id(conn.server.name, tool.name)

        async def run(arguments: dict[str, Any], context: ToolCallContext) -> Any:
            return await self.call(full_id, arguments, context.timeout_s)

        schema = dict(tool.input_schema)
        definition = ToolDefinition.model_construct(
            id=full_id,
            display_name=tool.title or tool.name,
            description=tool.description or "",
            parameters={"type": "object", **schema},
            implementation=ServiceImpl(function=tool.name),
            config_schema=[],
        )
        return ToolEntry(
            definition=definition,
            source=f"{SOURCE_PREFIX}{conn.server.name}",
            available=available,
            unavailable_reason=reason,
            function=run,
            location=str(conn.server.file),
        )

    def status(self) -> list[McpServerStatus]:
        return [self._status(self._connections[name]) for name in sorted(self._connections)]

    def server_status(self, name: str) -> McpServerStatus:
        return self._status(self._require(name))

    def _status(self, conn: _Connection) -> McpServerStatus:
        config = conn.server.config
        return McpServerStatus(
            name=config.name,
            scope=conn.server.scope,
            transport=config.transport,
            command=config.command,
            args=list(config.args),
            url=config.url,
            env_keys=sorted(config.env),
            secret_env_keys=sorted(config.secret_env),
            header_keys=sorted([*config.headers, *config.secret_headers]),
            timeout_s=config.timeout_s,
            enabled=config.enabled,
            status=conn.status,
            error=conn.error,
            tools=[tool_id(config.name, tool.name) for tool in conn.tools],
        )

    async def aclose(self) -> None:
        self._closed = True
        async with self._lock:
            conns = list(self._connections.values())
            self._connections.clear()
            self._register(set())
        await asyncio.gather(*(self._stop(conn) for conn in conns), return_exceptions=True)


def project_folder(scope: str, project_dir: Path | None, home: Path) -> Path:
    """The folder whose ``mcp_servers.json`` holds servers of ``scope``."""
    if scope == "project":
        if project_dir is None:
            raise NotFound("no project: a project server needs a project")
        return project_dir
    return home
