"""Everything the tools of one process need, assembled once: for the server, the CLI and
``storyloom mcp serve``.

A :class:`ToolHost` holds the plugin host, the secret store, the tool registry and
manager, the audit log, the pending approvals, the agent service and the MCP clients.
:func:`open_tool_host` builds one (and the database, settings, knowledge service and
workflow runner under it) for a command-line process; the server builds its own parts
and hands them in.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from storyloom.core.settings import Settings, SettingsStore, ToolPolicySettings
from storyloom.llm.instruct import TemplateLibrary
from storyloom.tools import builtin_tools
from storyloom.tools.agent_service import AgentService
from storyloom.tools.approvals import ApprovalBroker
from storyloom.tools.audit_log import AuditLog
from storyloom.tools.code_interpreter_tool import CodeInterpreterTools
from storyloom.tools.mcp_client import McpClients
from storyloom.tools.plugin_host import PluginHost
from storyloom.tools.secret_store import SecretStore
from storyloom.tools.tool_manager import ToolManager
from storyloom.tools.tool_policy import ToolPolicy, policy_from_settings
from storyloom.tools.tool_registry import ToolRegistry
from storyloom.workflow.node_registry import NodeRegistry
from storyloom.workflow.workflow_file import WorkflowLibrary

if TYPE_CHECKING:
    from storyloom.project.knowledge_service import KnowledgeService
    from storyloom.store.database import Database
    from storyloom.workflow.runner import WorkflowRunner


def builtin_tool_plugins(home: Path) -> list[Any]:
    """storyloom's own ``storyloom_tools`` implementations, registered first with every
    plugin host: the built-in service tools, and the CodeInterpreter, which keeps its
    per-run scratch folders under ``home``."""
    return [builtin_tools, CodeInterpreterTools(home)]


class ToolHost:
    def __init__(
        self,
        *,
        home: Path,
        project_dir: Path | None,
        database: Database,
        settings: Callable[[], Settings],
        settings_store: SettingsStore | None,
        workflows: WorkflowLibrary | None,
        runner: WorkflowRunner,
        node_registry: NodeRegistry,
        knowledge: KnowledgeService | None,
        plugins: PluginHost | None,
        secrets: SecretStore | None = None,
        settings_saved: Callable[[], None] | None = None,
        owns_plugins: bool = False,
    ) -> None:
        """``settings_saved`` is called after the host writes settings.json (the policy),
        for a process that keeps the settings in memory. ``owns_plugins``: :meth:`aclose`
        unloads the plugins too (the host made them)."""
        self.home = home
        self.project_dir = project_dir
        self.database = database
        self.settings = settings
        self.settings_store = settings_store
        self.workflows = workflows
        self.runner = runner
        self.node_registry = node_registry
        self.knowledge = knowledge
        self.plugins = plugins
        self.secrets = secrets if secrets is not None else SecretStore(home)
        self._settings_saved = settings_saved
        self._owns_plugins = owns_plugins
        self.audit = AuditLog(database)
        self.approvals = ApprovalBroker()
        own = builtin_tool_plugins(home)
        self.registry = ToolRegistry(
            node_registry=node_registry,
            plugins=plugins,
            workflows=workflows,
            builtin=lambda: [tool for plugin in own for tool in plugin.storyloom_tools()],
        )
        self.manager = ToolManager(
            self.registry,
            self.audit,
            runner,
            policy=self.policy,
            hooks=self._hooks,
            knowledge=knowledge,
        )
        self.agents: AgentService = AgentService(self)
        self.mcp: McpClients = McpClients(self)

    def _hooks(self) -> Any:
        return self.plugins.hook if self.plugins is not None else None

    def policy(self) -> ToolPolicy:
        """The global policy (settings' ``tool_policy``), read afresh."""
        return policy_from_settings(self.settings())

    def save_policy(self, policy: ToolPolicy) -> ToolPolicy:
        """Write ``policy`` as the global one into settings.json."""
        if self.settings_store is None:
            raise RuntimeError("this process has no settings store to write the policy to")
        stored = self.settings_store.read_file()
        updated = stored.model_copy(
            update={"tool_policy": ToolPolicySettings.model_validate(policy.model_dump())}
        )
        self.settings_store.save(updated)
        if self._settings_saved is not None:
            self._settings_saved()
        return policy

    async def start(self) -> None:
        """Connect the configured MCP servers (in the background)."""
        await self.mcp.start()

    async def aclose(self) -> None:
        self.approvals.deny_all()
        await self.mcp.aclose()
        if self._owns_plugins and self.plugins is not None:
            self.plugins.close()


class _CachedSettings:
    """Settings read once, read again after this process writes them."""

    def __init__(self, store: SettingsStore) -> None:
        self.store = store
        self.value = store.load().effective

    def __call__(self) -> Settings:
        return self.value

    def reload(self) -> None:
        self.value = self.store.load().effective


def open_tool_host(
    home: Path,
    project_dir: Path | None,
    *,
    node_registry: NodeRegistry,
    database: Database | None = None,
) -> ToolHost:
    """A tool host for a command-line process over the data directory ``home`` and the
    project (None: no project, so no workflows and no knowledge). ``node_registry`` is
    the process's node types (``storyloom.plugins.node_registry()``); enabled plugins'
    node types are added to it. Close with :meth:`ToolHost.aclose`, then the database."""
    from storyloom.project.knowledge_service import KnowledgeService
    from storyloom.store.database import Database
    from storyloom.workflow.node_history import NodeHistory
    from storyloom.workflow.node_type import WorkflowServices
    from storyloom.workflow.runner import WorkflowRunner

    store = SettingsStore(home)
    settings = _CachedSettings(store)
    database = database if database is not None else Database.in_home(home)
    knowledge = (
        KnowledgeService(home, project_dir, settings=settings, database=database)
        if project_dir is not None
        else None
    )
    library = WorkflowLibrary(project_dir) if project_dir is not None else None
    plugins = PluginHost(
        project_dir, home, settings, node_registry, builtins=builtin_tool_plugins(home)
    )
    services = WorkflowServices(
        settings=settings,
        project_dir=project_dir,
        database=database,
        knowledge=knowledge,
        workflows=library.load if library is not None else None,
        hooks=plugins.hook,
        script_folders=plugins.enabled_folders,
        prompt_templates=TemplateLibrary(home),
    )
    runner = WorkflowRunner(node_registry, services, history=NodeHistory(database))
    host = ToolHost(
        home=home,
        project_dir=project_dir,
        database=database,
        settings=settings,
        settings_store=store,
        workflows=library,
        runner=runner,
        node_registry=node_registry,
        knowledge=knowledge,
        plugins=plugins,
        settings_saved=settings.reload,
        owns_plugins=True,
    )
    services.agents = host.agents
    return host
