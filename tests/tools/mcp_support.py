"""What the MCP tests share: a tool host over a real ToolManager (registry, audit log in
SQLite, workflow runner, knowledge service), the npm packages `make test` installs, and a
uvicorn server on a free loopback port (``storyloom.testing.loopback``)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.types import ASGIApp

from storyloom.core.plugin_markers import hookimpl
from storyloom.core.settings import Settings
from storyloom.plugins import node_registry
from storyloom.project.knowledge_service import KnowledgeService
from storyloom.store.database import Database
from storyloom.testing.loopback import serve_in_thread
from storyloom.tools.audit_log import AuditLog
from storyloom.tools.mcp_server import McpHttpApp
from storyloom.tools.secret_store import SecretStore
from storyloom.tools.tool_definition import ServiceTool
from storyloom.tools.tool_host import ToolHost
from storyloom.tools.tool_manager import ToolManager
from storyloom.tools.tool_policy import PolicyRule, ToolPolicy
from storyloom.tools.tool_registry import ToolRegistry
from storyloom.workflow.node_type import WorkflowServices
from storyloom.workflow.runner import WorkflowRunner

MCP_NPM = Path(__file__).resolve().parent / "mcp_npm"
NODE_MODULES = MCP_NPM / "node_modules"
CONFORMANCE_JS = NODE_MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
EVERYTHING_JS = NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
NODE20_SHIM = MCP_NPM / "node20-register.mjs"


def require_npm_package(path: Path) -> Path:
    """``path`` inside tests/tools/mcp_npm/node_modules; a failure (never a skip) saying how
    to install it when it is missing."""
    if not path.is_file():
        raise AssertionError(
            f"{path} is missing: run `make test` (or `cd {MCP_NPM} && npm ci`) to install the "
            "pinned MCP packages"
        )
    return path


@dataclass
class McpTestHost:
    """The parts of a ToolHost the MCP code uses, assembled from the real pieces."""

    home: Path
    project_dir: Path
    database: Database
    knowledge: KnowledgeService
    manager: ToolManager
    secrets: SecretStore
    rules: list[PolicyRule] = field(default_factory=list)
    default: str = "allow"

    def policy(self) -> ToolPolicy:
        return ToolPolicy.model_validate({"rules": self.rules, "default": self.default})

    def set_policy(self, default: str, **rules: str) -> None:
        self.default = default
        self.rules = [PolicyRule(tool=glob, action=action) for glob, action in rules.items()]


def make_host(tmp_path: Path, tools: list[ServiceTool]) -> McpTestHost:
    from storyloom.project.project_file import init_project

    home = tmp_path / "home"
    home.mkdir(parents=True, exist_ok=True)
    project = tmp_path / "project"
    init_project(project)
    settings = Settings()
    database = Database(tmp_path / "db" / "storyloom.sqlite3")
    knowledge = KnowledgeService(home, project, settings=lambda: settings, database=database)
    services = WorkflowServices(
        settings=lambda: settings, project_dir=project, database=database, knowledge=knowledge
    )
    nodes = node_registry(entry_points=False)
    runner = WorkflowRunner(nodes, services)
    registry = ToolRegistry(node_registry=nodes, builtin=lambda: list(tools))
    host: McpTestHost
    manager = ToolManager(
        registry, AuditLog(database), runner, policy=lambda: host.policy(), knowledge=knowledge
    )
    host = McpTestHost(
        home=home,
        project_dir=project,
        database=database,
        knowledge=knowledge,
        manager=manager,
        secrets=SecretStore(home),
    )
    return host


@contextlib.contextmanager
def serve_mcp(mcp: McpHttpApp, path: str = "/mcp") -> Iterator[str]:
    """``mcp`` on a free loopback port in a uvicorn thread; yields its URL."""
    app: ASGIApp = Starlette(routes=[mcp.route(path)], lifespan=lambda _app: mcp.lifespan())
    with serve_in_thread(app) as base_url:
        yield base_url + path


def write_servers(folder: Path, servers: dict[str, dict[str, Any]]) -> None:
    (folder / "mcp_servers.json").write_text(json.dumps({"mcpServers": servers}), "utf-8")


class ToolProvider:
    """A hook implementation giving ``tools`` through ``storyloom_tools``, registered on the
    real PluginHost (what a plugin's Python module does)."""

    def __init__(self, tools: list[ServiceTool]) -> None:
        self.tools = tools

    @hookimpl
    def storyloom_tools(self) -> list[ServiceTool]:
        return list(self.tools)


def make_tool_host(tmp_path: Path, tools: list[ServiceTool], policy: dict[str, Any]) -> ToolHost:
    """A real ToolHost over a new project, ``tools`` provided through the plugin hook and
    ``policy`` as settings.json's ``tool_policy``."""
    from storyloom.core.settings import SettingsStore
    from storyloom.project.project_file import init_project
    from storyloom.tools.plugin_host import PluginHost

    home = tmp_path / "home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "settings.json").write_text(json.dumps({"tool_policy": policy}), encoding="utf-8")
    project = tmp_path / "project"
    init_project(project)
    store = SettingsStore(home)
    settings = store.load().effective
    database = Database.in_home(home)
    knowledge = KnowledgeService(home, project, settings=lambda: settings, database=database)
    nodes = node_registry(entry_points=False)
    plugins = PluginHost(project, home, lambda: settings, nodes, builtins=[ToolProvider(tools)])
    services = WorkflowServices(
        settings=lambda: settings, project_dir=project, database=database, knowledge=knowledge
    )
    return ToolHost(
        home=home,
        project_dir=project,
        database=database,
        settings=lambda: settings,
        settings_store=store,
        workflows=None,
        runner=WorkflowRunner(nodes, services),
        node_registry=nodes,
        knowledge=knowledge,
        plugins=plugins,
    )
