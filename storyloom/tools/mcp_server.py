"""storyloom as an MCP server: its tools and knowledge bases for other MCP hosts.

Built on the SDK's low-level ``Server`` so a tool's ``parameters`` go out as its MCP
``inputSchema`` exactly as written (``$schema``, ``$defs``, ``additionalProperties``...).

What a client sees:

- **Tools**: every enabled, available tool of the ToolManager that the global policy does
  not deny, named with :func:`~storyloom.tools.tool_names.to_mcp_name` (``Plugin:tool`` is
  ``Plugin.tool``). Tools of external MCP servers (``mcp.<server>.<tool>``) are not served
  again: a storyloom connected to itself would call itself in a loop. Every call goes
  through the ToolManager as caller kind ``"mcp"``: same validation, policy and audit log
  as an agent's call. A tool whose policy is ``ask`` is listed, but MCP has no way to ask
  the person at storyloom, so the call is denied with a message saying so; a user who
  wants such a tool callable over MCP adds an ``allow`` rule for it (Tools page, or
  ``tool_policy`` in settings.json).
- **Resources**: each knowledge base the project sees, ``storyloom://kb/<kb id>``, read as
  the KB's JSON (its metadata and entries). A global ``deny`` rule for ``kb:ReadEntry``
  hides them, since reading a resource is reading entries.

``namespace`` serves the tools of one namespace only, under their bare names
(``Plugin:tool`` is ``tool``): for a client that should see one plugin as its own server.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote, unquote

import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from starlette.routing import Route
from starlette.types import ASGIApp

from storyloom import __version__
from storyloom.core.errors import NotFound
from storyloom.tools.tool_names import from_mcp_name, to_mcp_name

if TYPE_CHECKING:
    from storyloom.project.knowledge_service import KnowledgeService
    from storyloom.tools.tool_definition import ToolEntry
    from storyloom.tools.tool_manager import ToolManager
    from storyloom.tools.tool_policy import ToolPolicy


class McpServerHost(Protocol):
    """What the server needs of a ToolHost."""

    @property
    def manager(self) -> ToolManager: ...

    @property
    def knowledge(self) -> KnowledgeService | None: ...

    def policy(self) -> ToolPolicy: ...


KB_URI_PREFIX = "storyloom://kb/"
MCP_SOURCE_PREFIX = "mcp:"
RESOURCE_NOT_FOUND = -32002
SERVER_NAME = "storyloom"
KB_READ_TOOL = "kb:ReadEntry"
INSTRUCTIONS = (
    "storyloom's tools (workflows, knowledge-base tools, plugin tools) and its knowledge "
    "bases as resources. Every call is checked against the user's tool policy and logged."
)


def kb_uri(kb_id: str) -> str:
    return KB_URI_PREFIX + quote(kb_id, safe="")


@dataclass(frozen=True)
class _Naming:
    """Tool ids to MCP names and back, with or without a namespace served bare."""

    namespace: str | None

    def mcp_name(self, tool_id: str) -> str | None:
        if self.namespace is None:
            return to_mcp_name(tool_id)
        prefix = self.namespace + ":"
        if not tool_id.startswith(prefix):
            return None
        full = to_mcp_name(tool_id)
        mapped_prefix = to_mcp_name(prefix + "x")[:-1]
        # An escaped id maps to a name that does not start with the namespace's plain
        # form; serving it bare would not be reversible, so it is served escaped in full.
        return full[len(mapped_prefix) :] if full.startswith(mapped_prefix) else full

    def tool_id(self, name: str) -> str | None:
        """The id listed as ``name``; None when no id maps to it."""
        candidates = [name]
        if self.namespace is not None:
            candidates.insert(0, to_mcp_name(self.namespace + ":x")[:-1] + name)
        for candidate in candidates:
            try:
                tool_id = from_mcp_name(candidate)
                if self.mcp_name(tool_id) == name:
                    return tool_id
            except ValueError:
                continue
        return None


def _servable(entry: ToolEntry, policy: ToolPolicy) -> bool:
    return (
        entry.available
        and not entry.source.startswith(MCP_SOURCE_PREFIX)
        and policy.action(entry.definition.id) != "deny"
    )


def _served(host: McpServerHost, naming: _Naming) -> dict[str, ToolEntry]:
    """The tools a client may see now, by MCP name."""
    policy = host.policy()
    served: dict[str, ToolEntry] = {}
    for entry in host.manager.entries():
        tool_id = entry.definition.id
        if not _servable(entry, policy):
            continue
        try:
            name = naming.mcp_name(tool_id)
        except ValueError:
            continue  # too long for an MCP name: not servable
        if name is not None:
            served[name] = entry
    return served


def _as_tool(name: str, entry: ToolEntry) -> types.Tool:
    definition = entry.definition
    # Clients (and the conformance suite) require a description; an id says something.
    description = definition.description or definition.display_name or definition.id
    return types.Tool(
        name=name,
        title=definition.display_name or None,
        description=description,
        input_schema=dict(definition.parameters) or {"type": "object"},
    )


def _result_content(result: Any) -> types.CallToolResult:
    if isinstance(result, str):
        return types.CallToolResult(content=[types.TextContent(text=result)])
    text = json.dumps(result, ensure_ascii=False, default=str)
    structured = result if isinstance(result, dict) else None
    return types.CallToolResult(
        content=[types.TextContent(text=text)], structured_content=structured
    )


def _error_content(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def _kb_resources_allowed(host: McpServerHost) -> bool:
    return bool(host.policy().action(KB_READ_TOOL) != "deny")


def build_mcp_server(
    host: McpServerHost, *, namespace: str | None = None, caller_name: str = "mcp"
) -> Server[Any]:
    """An MCP server over ``host``'s tools and knowledge bases (see the module docs).

    ``caller_name`` is what the audit log records as the caller (``mcp-stdio``,
    ``mcp-http``); the caller kind is always ``"mcp"``.
    """
    from storyloom.tools.tool_manager import ToolCallContext, ToolCaller

    naming = _Naming(namespace)

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tools = [_as_tool(name, entry) for name, entry in _served(host, naming).items()]
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        # The one tool the name maps back to, not the whole listing: a call stays cheap.
        tool_id = naming.tool_id(params.name)
        entry = host.manager.registry.find(tool_id) if tool_id is not None else None
        if tool_id is None or entry is None or not _servable(entry, host.policy()):
            raise MCPError(types.INVALID_PARAMS, f"unknown tool: {params.name}")
        context = ToolCallContext(
            caller=ToolCaller(kind="mcp", name=caller_name),
            policy=host.policy(),
            approve=None,
        )
        outcome = await host.manager.call(tool_id, dict(params.arguments or {}), context)
        if outcome.ok:
            return _result_content(outcome.result)
        message = outcome.error or f"{tool_id} failed"
        if outcome.decision == "denied" and host.policy().action(tool_id) == "ask":
            message = (
                f"{tool_id} asks for approval before it runs, and an MCP call cannot ask "
                f"the person at storyloom; allow it in storyloom's tool policy to call it "
                f"over MCP ({message})"
            )
        return _error_content(message)

    async def list_resources(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        if host.knowledge is None or not _kb_resources_allowed(host):
            return types.ListResourcesResult(resources=[])
        bases = host.knowledge.snapshot().knowledge.catalog.bases
        resources = [
            types.Resource(
                uri=kb_uri(loaded.kb_id),
                name=loaded.kb.kb_displayName or loaded.kb_id,
                description=loaded.kb.kb_description or None,
                mime_type="application/json",
            )
            for loaded in bases
        ]
        return types.ListResourcesResult(resources=resources)

    async def read_resource(
        ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        knowledge = host.knowledge
        if (
            knowledge is None
            or not uri.startswith(KB_URI_PREFIX)
            or not _kb_resources_allowed(host)
        ):
            raise MCPError(RESOURCE_NOT_FOUND, f"no such resource: {uri}")
        kb_id = unquote(uri[len(KB_URI_PREFIX) :])
        try:
            loaded = knowledge.snapshot().require(kb_id)
        except NotFound:
            raise MCPError(RESOURCE_NOT_FOUND, f"no knowledge base {kb_id}") from None
        text = json.dumps(loaded.kb.model_dump(mode="json"), ensure_ascii=False)
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="application/json", text=text)]
        )

    return Server(
        SERVER_NAME,
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )


async def serve_stdio(host: McpServerHost, *, namespace: str | None = None) -> None:
    """Serve ``host`` over stdin/stdout until the client closes them."""
    from mcp.server.stdio import stdio_server

    server = build_mcp_server(host, namespace=namespace, caller_name="mcp-stdio")
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


def _is_loopback(bind_host: str) -> bool:
    if bind_host == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind_host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class McpHttpApp:
    """The Streamable HTTP endpoint: an ASGI app answering on whatever path it is routed
    at, and the lifespan that must be entered around serving it (once)."""

    app: ASGIApp
    lifespan: Callable[[], contextlib.AbstractAsyncContextManager[None]]

    def route(self, path: str = "/mcp") -> Route:
        """A route for ``path`` itself (a ``Mount`` would redirect ``/mcp`` to ``/mcp/``)."""
        return Route(path, endpoint=self.app)


def mcp_http_app(
    host: McpServerHost, *, bind_host: str = "127.0.0.1", namespace: str | None = None
) -> McpHttpApp:
    """Streamable HTTP for ``host`` (sessions, SSE answers).

    Mount it with ``app.router.routes.append(mcp.route("/mcp"))`` and enter
    ``mcp.lifespan()`` in the application's lifespan. Authentication is the mounting
    app's (TokenAuth). On a loopback ``bind_host`` it also refuses a ``Host``/``Origin``
    that is not loopback (DNS rebinding), whatever the mounting app checks.
    """
    server = build_mcp_server(host, namespace=namespace, caller_name="mcp-http")
    security: TransportSecuritySettings | None = None
    if _is_loopback(bind_host):
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[*(_LOOPBACK_NAMES), *(f"{name}:*" for name in _LOOPBACK_NAMES)],
            allowed_origins=[
                *(f"http://{name}" for name in _LOOPBACK_NAMES),
                *(f"http://{name}:*" for name in _LOOPBACK_NAMES),
            ],
        )
    manager = StreamableHTTPSessionManager(app=server, security_settings=security)

    @contextlib.asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        async with manager.run():
            yield

    return McpHttpApp(app=StreamableHTTPASGIApp(manager), lifespan=lifespan)
