"""``/api/plugins``: the plugins of the project and of the user, turning them on and off,
and the web assets of the enabled ones (seed 003 §15.1.3).

``GET /api/plugins`` is the seed's list of ``ExtensionInfo``: what the web app loads, for
enabled plugins only. ``GET /api/plugins/installed`` is what the Tools page shows before
the user trusts a plugin: every plugin found, what it declares, its risk, and the plugins
that could not be read (folder, file, field, reason). A plugin's Python runs in the
server, so a plugin found is off until enabled here; one that declares wraps or overrides
of core components is enabled only with ``grantOverrides`` (a 409 says which:
``wrap:ui:X``, ``ui:X``); one
that declares ``permissions.network`` gets it only with ``grantNetwork``; a high-risk one
(Python inside the server, overrides) only with ``acceptRisk: "high"`` (a 409 names the
risk and its reasons).

``GET /plugins/{name}/{path}`` serves an enabled plugin's web folder; any other name, a
disabled plugin, or a path that leaves the folder is a 404.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse
from pydantic import BaseModel, ConfigDict, Field

from storyloom.core.errors import Conflict, FileFormatError, NotFound
from storyloom.server.api_errors import error_responses
from storyloom.server.state import ServerState, server_state
from storyloom.tools.plugin_host import PluginHost
from storyloom.tools.plugin_loader import FoundPlugin, PluginProblem, Risk
from storyloom.tools.plugin_manifest import ExtensionInfo
from storyloom.tools.tool_definition import load_tool_file
from storyloom.workflow.workflow_file import load_workflow_file

router = APIRouter(prefix="/api/plugins", tags=["plugins"])
static_router = APIRouter()

_ERRORS = error_responses(404, 409, 422)


class _Camel(BaseModel):
    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)


class UiDeclares(_Camel):
    wrap: list[str] = Field(default_factory=list)
    inject: list[str] = Field(default_factory=list)
    override: list[str] = Field(default_factory=list)


class PluginDeclares(_Camel):
    """What a plugin brings and asks for, as its folder and ``plugin.yaml`` say."""

    nodes: list[str] = Field(
        default_factory=list,
        description="Node types it registered (enabled); before its code has run, its node "
        "module files",
    )
    tools: list[str] = Field(default_factory=list, description="Tool ids of its *.tool.json")
    workflows: list[str] = Field(default_factory=list, description="Workflow ids it ships")
    hooks: list[str] = Field(default_factory=list, description="hook:<server|client>:...")
    ui: UiDeclares = Field(default_factory=UiDeclares)
    network: bool = Field(
        default=False, description="Its script tools ask to connect to other machines"
    )


class PluginInfo(_Camel):
    """One installed plugin: enabled or not, what it declares and how risky it is."""

    name: str
    display_name: str = Field(alias="displayName")
    version: str
    description: str
    folder: str
    origin: Literal["project", "user"]
    enabled: bool
    risk: Risk
    risk_reasons: list[str] = Field(alias="riskReasons")
    declares: PluginDeclares
    granted: list[str] = Field(description="Override permissions the user granted")
    network_granted: bool = Field(
        default=False,
        alias="networkGranted",
        description="It declares network access and the user granted it when enabling",
    )


class InstalledPlugins(_Camel):
    plugins: list[PluginInfo]
    problems: list[PluginProblem] = Field(
        description="Plugins (or parts of them) that could not be loaded, and why"
    )


class EnableRequest(_Camel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    grant_overrides: bool = Field(
        default=False,
        alias="grantOverrides",
        description="Grant the wraps and overrides of core components it declares (exactly those)",
    )
    grant_network: bool = Field(
        default=False,
        alias="grantNetwork",
        description="Let its script tools connect to other machines (when it declares "
        "permissions.network); without it they run with no network",
    )
    accept_risk: Risk | None = Field(
        default=None,
        alias="acceptRisk",
        description="The risk the user accepted, by name: a high-risk plugin (Python inside "
        'the server, or overrides of core parts) is enabled only with "high" (else a 409 '
        "naming the risk and its reasons)",
    )


class OverridesNotGranted(Conflict):
    """A plugin that wraps or replaces core parts was asked to be enabled without granting
    it."""

    def __init__(self, plugin: str, overrides: list[str]) -> None:
        super().__init__(
            f"plugin {plugin!r} wraps or replaces core parts ({', '.join(overrides)}); "
            "enable it with "
            "grantOverrides true to grant these permissions"
        )


def _plugins(state: ServerState) -> PluginHost:
    return state.plugins


def _tool_ids(paths: tuple[Path, ...]) -> list[str]:
    ids = []
    for path in paths:
        try:
            ids.append(load_tool_file(path).id)
        except FileFormatError:
            continue  # reported among the plugin's problems by the registry
    return ids


def _workflow_ids(paths: tuple[Path, ...]) -> list[str]:
    ids = []
    for path in paths:
        try:
            ids.append(load_workflow_file(path).id)
        except (FileFormatError, OSError):
            continue
    return ids


def plugin_info(host: PluginHost, plugin: FoundPlugin) -> PluginInfo:
    manifest = plugin.manifest
    permissions = manifest.permissions
    nodes = host.node_types_of(plugin.name) if plugin.enabled else []
    if not nodes:
        nodes = [str(p.relative_to(plugin.folder)) for p in plugin.node_modules]
    declares = PluginDeclares(
        nodes=nodes,
        tools=_tool_ids(plugin.tool_files),
        workflows=_workflow_ids(plugin.workflow_files),
        hooks=list(permissions.hooks),
        ui=UiDeclares(
            wrap=list(permissions.ui.wrap),
            inject=list(permissions.ui.inject),
            override=list(permissions.ui.override),
        ),
        network=permissions.network,
    )
    return PluginInfo(
        name=plugin.name,
        display_name=manifest.title,
        version=manifest.version,
        description=manifest.description,
        folder=str(plugin.folder),
        origin=plugin.origin,
        enabled=plugin.enabled,
        risk=plugin.risk,
        risk_reasons=list(plugin.risk_reasons),
        declares=declares,
        granted=list(plugin.granted),
        network_granted=plugin.network_granted,
    )


@router.get("", response_model=list[ExtensionInfo])
async def list_extensions(request: Request) -> list[ExtensionInfo]:
    """The enabled plugins as the web app loads them (seed §15.1.1 ``ExtensionInfo``)."""
    return _plugins(server_state(request)).extension_infos()


@router.get("/installed", response_model=InstalledPlugins)
async def list_installed(request: Request) -> InstalledPlugins:
    """Every plugin found (enabled or not) and every problem met reading them."""
    # On the event loop (async), like enabling: loading plugins is never concurrent.
    state = server_state(request)
    host = _plugins(state)
    host.reload()  # a plugin folder added or edited since is seen now
    return InstalledPlugins(
        plugins=[plugin_info(host, p) for p in host.plugins],
        problems=[*host.problems, *_tool_problems(state, host.plugins)],
    )


def _tool_problems(state: ServerState, plugins: list[FoundPlugin]) -> list[PluginProblem]:
    """The registry's problems with the tools plugins declare (a ``*.tool.json`` that
    does not validate, an id taken by another tool), as problems of those plugins."""
    folders = [(p.folder, str(p.folder)) for p in plugins]
    problems = []
    for problem in state.tools.registry.problems():
        where = Path(problem.where)
        folder = next((text for path, text in folders if where.is_relative_to(path)), None)
        if folder is not None:
            field = f"tool {problem.tool}" if problem.tool else ""
            problems.append(
                PluginProblem(folder=folder, file=problem.where, field=field, reason=problem.reason)
            )
    return problems


@router.post("/{name}/enable", response_model=PluginInfo, responses=_ERRORS)
async def enable_plugin(
    request: Request, name: str, body: EnableRequest | None = None
) -> PluginInfo:
    """Turn the plugin on: its Python is imported, its node types, tools and hooks
    registered. Wraps and overrides it declares need ``grantOverrides`` (else a 409); network
    access it declares is given only with ``grantNetwork`` (else its script tools run
    without a network)."""
    body = body or EnableRequest()
    return await _set_enabled(
        server_state(request),
        name,
        True,
        body.grant_overrides,
        body.grant_network,
        body.accept_risk,
    )


@router.post("/{name}/disable", response_model=PluginInfo, responses=_ERRORS)
async def disable_plugin(request: Request, name: str) -> PluginInfo:
    """Turn the plugin off: its node types, tools and hooks go; grants are withdrawn."""
    return await _set_enabled(server_state(request), name, False, False)


async def _set_enabled(
    state: ServerState,
    name: str,
    enabled: bool,
    grant: bool,
    grant_network: bool = False,
    accept_risk: Risk | None = None,
) -> PluginInfo:
    host = _plugins(state)
    async with state.settings_lock:
        host.reload()
        plugin = host.plugin(name)
        overrides = plugin.manifest.permissions.grants()
        if enabled and overrides and not grant:
            raise OverridesNotGranted(name, overrides)
        found = host.set_enabled(
            state.settings_store,
            name,
            enabled,
            grant_overrides=grant,
            grant_network=grant_network,
            accept_risk=accept_risk,
            how='enable it with acceptRisk "high" to accept it',
        )
        state.reload_settings()
    state.tools.registry.invalidate()
    return plugin_info(host, found)


def _static_file(state: ServerState, name: str, path: str) -> Path:
    folder = _plugins(state).static_dir(name)
    if folder is None:
        raise NotFound(f"no enabled plugin {name!r} with web assets")
    parts = path.split("/")
    if not path or "\0" in path or any(len(p.encode("utf-8", "replace")) > 255 for p in parts):
        raise NotFound(f"no file {path!r} in plugin {name!r}")
    candidate = (folder / path).resolve()
    if not candidate.is_relative_to(folder) or not candidate.is_file():
        raise NotFound(f"no file {path!r} in plugin {name!r}")
    return candidate


@static_router.get("/plugins/{name}/{path:path}", include_in_schema=False)
def plugin_asset(request: Request, name: str, path: str) -> FileResponse:
    """A file of an enabled plugin's web folder; anything else is a 404."""
    return FileResponse(_static_file(server_state(request), name, path))
