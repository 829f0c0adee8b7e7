"""What the ToolManager tests share: a real registry, runner, audit log in SQLite and
knowledge service over a project in a temporary folder."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storyloom.core.settings import Settings
from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.plugins import node_registry
from storyloom.project.knowledge_service import KnowledgeService
from storyloom.project.project_file import init_project
from storyloom.project.project_knowledge import add_local_knowledge_base
from storyloom.store.database import Database
from storyloom.tools.audit_log import AuditLog
from storyloom.tools.builtin_tools import BUILTIN_TOOLS
from storyloom.tools.tool_definition import ServiceTool
from storyloom.tools.tool_manager import ToolCallContext, ToolCaller, ToolManager
from storyloom.tools.tool_policy import KbAccess, ToolPolicy
from storyloom.tools.tool_registry import ToolRegistry
from storyloom.workflow.node_type import WorkflowServices
from storyloom.workflow.runner import WorkflowRunner
from storyloom.workflow.workflow_file import WorkflowLibrary


def edge(spec: str) -> dict[str, str]:
    source, target = (part.strip() for part in spec.split(">"))
    s_node, s_slot = source.split(".")
    t_node, t_slot = target.split(".")
    return {"source": s_node, "sourceSlot": s_slot, "target": t_node, "targetSlot": t_slot}


# A workflow with an interface: greet(name) -> "Hello, <name>" through a real regex node.
GREET: dict[str, Any] = {
    "id": "greet",
    "description": "Greet someone by name",
    "interfaceInputs": {"name": {"dataFlowType": "STRING", "required": True}},
    "interfaceOutputs": {"greeting": {"dataFlowType": "STRING"}},
    "nodes": [
        {"id": "in", "type": "core:GroupInput"},
        {
            "id": "t",
            "type": "core:RegexApplicator",
            "config": {"pattern": "^", "replacement": "Hello, "},
        },
        {"id": "out", "type": "core:GroupOutput"},
    ],
    "edges": [edge("in.name > t.text"), edge("t.text > out.greeting")],
}


def service_tool(
    tool_id: str,
    function: Callable[..., Any],
    parameters: dict[str, Any] | None = None,
    description: str = "",
) -> ServiceTool:
    return ServiceTool.of(tool_id, function, description=description, parameters=parameters)


@dataclass
class Tools:
    home: Path
    project: Path
    database: Database
    knowledge: KnowledgeService
    registry: ToolRegistry
    manager: ToolManager
    audit: AuditLog
    extra: list[ServiceTool]
    policy: ToolPolicy = field(default_factory=lambda: ToolPolicy(default="allow"))

    def write_workflow(self, data: dict[str, Any]) -> Path:
        path = self.project / "workflows" / f"{data['id']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data))
        return path

    def add_kb(self, name: str, entries: list[CAIU]) -> KnowledgeBase:
        kb = KnowledgeBase(kb_displayName=name, entries=entries)
        add_local_knowledge_base(self.project, kb, name=name)
        self.knowledge.reload()
        return kb

    def context(
        self, kind: str = "agent", *, policy: ToolPolicy | None = None, **more: Any
    ) -> ToolCallContext:
        return ToolCallContext(
            caller=ToolCaller(kind=kind, name=f"test-{kind}"),  # type: ignore[arg-type]
            policy=policy or ToolPolicy(default="allow"),
            **more,
        )


def make_tools(tmp_path: Path, extra: list[ServiceTool] | None = None) -> Tools:
    home = tmp_path / "home"
    home.mkdir(parents=True, exist_ok=True)
    project = tmp_path / "project"
    init_project(project)
    settings = Settings()
    database = Database(tmp_path / "db" / "storyloom.sqlite3")
    knowledge = KnowledgeService(home, project, settings=lambda: settings, database=database)
    library = WorkflowLibrary(project)
    services = WorkflowServices(
        settings=lambda: settings,
        project_dir=project,
        database=database,
        knowledge=knowledge,
        workflows=library.load,
    )
    nodes = node_registry(entry_points=False)
    runner = WorkflowRunner(nodes, services)
    tools = list(extra or [])
    registry = ToolRegistry(
        node_registry=nodes, workflows=library, builtin=lambda: [*BUILTIN_TOOLS, *tools]
    )
    audit = AuditLog(database)
    holder: list[Tools] = []
    manager = ToolManager(
        registry, audit, runner, policy=lambda: holder[0].policy, knowledge=knowledge
    )
    made = Tools(home, project, database, knowledge, registry, manager, audit, tools)
    holder.append(made)
    return made


def rules(default: str = "allow", **by_glob: str) -> ToolPolicy:
    return ToolPolicy.model_validate(
        {"rules": [{"tool": g, "action": a} for g, a in by_glob.items()], "default": default}
    )


def kb_access(read: list[str] | None = None, write: list[str] | None = None) -> KbAccess:
    return KbAccess(read=read if read is not None else ["*"], write=write or [])
