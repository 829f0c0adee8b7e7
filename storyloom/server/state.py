"""What one running server holds: its data directory, settings, database and project."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from starlette.requests import HTTPConnection

from storyloom.chat.personalab.library import PresetLibrary
from storyloom.chat.personalab.summaries import SummaryIndex
from storyloom.chat.service.conversations import ChatService
from storyloom.chat.service.lore_scope import bind_legacy_books
from storyloom.chat.service.reply_run import ChatEvent, TurnDone
from storyloom.chat.store.global_variables import GlobalVariables
from storyloom.chat.store.regex_library import GlobalRegexScripts
from storyloom.chat.store.turn_tree import TurnTree
from storyloom.core.settings import LoadedSettings, Settings, SettingsStore
from storyloom.knowledge.catalog import KnowledgeCatalog
from storyloom.knowledge.embedding_jobs import EmbeddingProgress
from storyloom.llm.instruct import TemplateLibrary
from storyloom.llm.local_model import LocalModels
from storyloom.plugins import node_registry as fresh_node_registry
from storyloom.project.knowledge_service import KnowledgeService
from storyloom.project.project_file import DEFAULT_PROJECT, PROJECT_FILE, init_project, load_project
from storyloom.server.chat_views import single_view
from storyloom.server.chat_ws import ChatSubscriptions
from storyloom.server.protocol import (
    EmbeddingProgressMessage,
    ToolApprovalNeededMessage,
    ToolApprovalResolvedMessage,
)
from storyloom.server.workflow_runs import RunManager
from storyloom.server.workflow_service import WorkflowService
from storyloom.server.ws_hub import WebSocketHub
from storyloom.store.database import Database
from storyloom.tools.approvals import PendingApproval
from storyloom.tools.plugin_host import PluginHost
from storyloom.tools.tool_host import ToolHost, builtin_tool_plugins
from storyloom.workflow.agent_host import ApprovalDecision
from storyloom.workflow.node_cache import OutputCache
from storyloom.workflow.node_registry import NodeRegistry
from storyloom.workflow.runner import WorkflowRunner
from storyloom.writing.curation import CurationEvent
from storyloom.writing.studio import WritingStudio

logger = logging.getLogger(__name__)


@dataclass
class ServerState:
    home: Path
    settings_store: SettingsStore
    loaded: LoadedSettings
    database: Database
    project_dir: Path
    token: str | None = None
    node_registry: NodeRegistry | None = None
    run_local_models: bool = True
    """Start the local models the settings want: the user's .gguf files and, with no user
    model set up, the embedded demo model."""
    """Node types of the workflows (default: built-ins and installed plugins, in a
    registry of this server's own, which its enabled plugins add their node types to)."""
    settings_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    knowledge: KnowledgeService = field(init=False)
    hub: WebSocketHub = field(default_factory=WebSocketHub)
    workflows: WorkflowService = field(init=False)
    workflow_runs: RunManager = field(init=False)
    turn_tree: TurnTree = field(init=False)
    chat_subscriptions: ChatSubscriptions = field(init=False)
    chat: ChatService = field(init=False)
    plugins: PluginHost = field(init=False)
    tools: ToolHost = field(init=False)
    writing: WritingStudio = field(init=False)
    local_models: LocalModels = field(init=False)
    templates: TemplateLibrary = field(init=False)
    """The instruct and context templates (built in, and imported into the data directory)."""

    def __post_init__(self) -> None:
        self.local_models = LocalModels(log_dir=self.home / "logs", embedded=self.run_local_models)
        self.templates = TemplateLibrary(self.home)
        self._local_sync = threading.Lock()
        if self.node_registry is None:
            self.node_registry = fresh_node_registry()
        # The service reads the settings in force at each call: a saved change applies.
        self.knowledge = KnowledgeService(
            self.home, self.project_dir, settings=lambda: self.settings, database=self.database
        )
        self.knowledge.jobs.subscribe(self._publish_embedding_progress)
        # Cards imported before books were bound: their own book becomes a binding.
        bind_legacy_books(PresetLibrary(self.project_dir), self._catalog)
        self.workflows = WorkflowService(
            self.project_dir,
            self.database,
            settings=lambda: self.settings,
            knowledge=self.knowledge,
            registry=self.node_registry,
        )
        # One registry for the workflows, the chat and the plugins: enabling a plugin adds
        # its node types where every runner sees them.
        self.plugins = plugins = PluginHost(
            self.project_dir,
            self.home,
            lambda: self.settings,
            self.node_registry,
            builtins=builtin_tool_plugins(self.home),
        )
        self.tools = ToolHost(
            home=self.home,
            project_dir=self.project_dir,
            database=self.database,
            settings=lambda: self.settings,
            settings_store=self.settings_store,
            workflows=self.workflows.library,
            runner=self.workflows.runner,
            node_registry=self.node_registry,
            knowledge=self.knowledge,
            plugins=plugins,
            settings_saved=self.reload_settings,
        )
        self.tools.approvals.on_request = self._publish_approval
        self.tools.approvals.on_resolved = self._publish_approval_resolved
        # The chat runner below shares these services: agent turns and hooks reach both.
        self.workflows.services.agents = self.tools.agents
        self.workflows.services.hooks = plugins.hook
        # The enabled plugins' scripts/ folders, for chat:Script and /api/scripts.
        self.workflows.services.script_folders = plugins.enabled_folders
        # Text-completion prompts use the templates imported into the data directory too.
        self.workflows.services.prompt_templates = self.templates
        self.workflow_runs = RunManager(self.workflows, self.hub)
        self.turn_tree = TurnTree(self.database)
        # A reply cut off by a killed server is kept as it was flushed, marked partial.
        self.turn_tree.recover_interrupted()
        # The chat service is made below; a message is shown only once it exists.
        self.chat_subscriptions = ChatSubscriptions(
            self.hub, self.turn_tree, lambda conversation: self.chat.display_sources(conversation)
        )
        # Chat turns get their own runner: no node history rows per turn, own cache.
        chat_runner = WorkflowRunner(
            self.workflows.registry, self.workflows.services, cache=OutputCache()
        )
        self.chat = ChatService(
            self.turn_tree,
            chat_runner,
            self.workflows.services,
            project_id=load_project(self.project_dir).id,
            publish=self._publish_chat,
            summaries=self._summary_index,
            global_variables=GlobalVariables.in_home(self.home),
            global_regex=GlobalRegexScripts.in_home(self.home),
        )
        # Curation events go to every tab: each shows the book's memory catching up.
        self.writing = WritingStudio(
            self.database,
            self.project_dir,
            settings=lambda: self.settings,
            knowledge=self.knowledge,
            publish=self._publish_writing,
            project_id=load_project(self.project_dir).id,
            registry=self.workflows.registry,
            load_workflow=self.workflows.library.require,
            save_workflow=self.workflows.library.save,
        )

    def _publish_writing(self, message: CurationEvent) -> None:
        self.hub.publish(message)

    def _publish_chat(self, event: ChatEvent) -> None:
        self.chat_subscriptions.publish(event)
        if isinstance(event, TurnDone):
            self._after_turn(event)

    def _after_turn(self, event: TurnDone) -> None:
        """``storyloom_chat_after_turn`` of the enabled plugins; what they do cannot
        change the turn, so a failure is logged and the chat goes on."""
        hook = self.plugins.hook.storyloom_chat_after_turn
        if not hook.get_hookimpls():
            return
        try:
            stored = self.turn_tree.message(event.message_id)
            view = single_view(self.turn_tree, stored, self.chat.display_sources)
            message = view.model_dump(mode="json", by_alias=True)
            hook(conversation_id=event.conversation_id, message=message)
        except Exception:
            logger.exception("storyloom_chat_after_turn failed for %s", event.message_id)

    def _publish_approval(self, approval: PendingApproval) -> None:
        self.hub.publish(ToolApprovalNeededMessage(approval=approval))

    def _publish_approval_resolved(self, approval_id: str, decision: ApprovalDecision) -> None:
        self.hub.publish(ToolApprovalResolvedMessage(id=approval_id, decision=decision))

    def _catalog(self) -> KnowledgeCatalog:
        return self.knowledge.snapshot().knowledge.catalog

    def _summary_index(self) -> SummaryIndex:
        """Retrieval over event summaries with the embedding model in force now."""
        return SummaryIndex(self.database, self.knowledge.embedding_provider())

    def _publish_embedding_progress(self, progress: EmbeddingProgress) -> None:
        self.hub.publish(
            EmbeddingProgressMessage(
                kb_id=progress.kb_id,
                model_id=progress.model_id,
                state=progress.state,
                done=progress.done,
                total=progress.total,
                error=progress.error,
            )
        )

    @classmethod
    def open(
        cls,
        home: Path,
        *,
        token: str | None = None,
        environ: Mapping[str, str] | None = None,
        project_dir: Path | None = None,
        node_registry: NodeRegistry | None = None,
        local_models: bool = True,
    ) -> ServerState:
        """Open the data directory; ``project_dir`` (default ``<home>/projects/default``)
        is created as an empty project when it has no ``project.json``."""
        store = SettingsStore(home, environ)
        project = (project_dir or home / DEFAULT_PROJECT).expanduser().resolve()
        if not (project / PROJECT_FILE).exists():
            init_project(project)
        return cls(
            home,
            store,
            store.load(),
            Database.in_home(home),
            project,
            token,
            node_registry,
            local_models,
        )

    @property
    def settings(self) -> Settings:
        """The settings in force: the saved ones, with each role that runs a local model
        pointing at it while it runs, and each text-completion role carrying its instruct
        and context templates."""
        effective = self.local_models.apply(self.loaded.effective)
        return self.templates.resolve_settings(effective)

    @property
    def configured_settings(self) -> Settings:
        """The settings as the user set them (what Settings shows and saves)."""
        return self.loaded.effective

    def reload_settings(self) -> None:
        self.loaded = self.settings_store.load()
        self.start_local_models()

    def start_local_models(self) -> threading.Thread | None:
        """Start (or stop) the local models the settings want, in the background:
        loading one takes from a second to minutes, and the server answers meanwhile."""
        if not self.run_local_models:
            return None

        def sync() -> None:
            with self._local_sync:
                self.local_models.sync(self.loaded.effective)

        thread = threading.Thread(target=sync, name="storyloom-local-models", daemon=True)
        thread.start()
        return thread


def server_state(connection: HTTPConnection) -> ServerState:
    """The state of the server a request or WebSocket came to (``create_app`` sets it)."""
    state: ServerState = connection.app.state.storyloom
    return state
