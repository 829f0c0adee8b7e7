"""The workflow pieces of the server's project: its library, the node registry, one runner.

One runner with one output cache serves every run of the server, so a re-run from the
canvas reuses what an earlier run computed; node history lives in the server's database.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from storyloom.core.settings import Settings
from storyloom.project.knowledge_service import KnowledgeService
from storyloom.store.database import Database
from storyloom.workflow.node_cache import OutputCache
from storyloom.workflow.node_history import NodeHistory
from storyloom.workflow.node_registry import NodeRegistry, default_registry
from storyloom.workflow.node_type import NodeSlots, WorkflowServices
from storyloom.workflow.runner import WorkflowRunner
from storyloom.workflow.validation import WorkflowProblem, graph_problems, validate_workflow
from storyloom.workflow.workflow_file import Workflow, WorkflowLibrary
from storyloom.workflow.workflow_graph import WorkflowGraph


class WorkflowService:
    def __init__(
        self,
        project_dir: Path,
        database: Database,
        *,
        settings: Callable[[], Settings],
        knowledge: KnowledgeService | None = None,
        registry: NodeRegistry | None = None,
    ) -> None:
        self.library = WorkflowLibrary(project_dir)
        self.registry = registry if registry is not None else default_registry()
        self.history = NodeHistory(database)
        self.services = WorkflowServices(
            settings=settings,
            project_dir=project_dir,
            database=database,
            knowledge=knowledge,
            workflows=self.library.load,
        )
        self.runner = WorkflowRunner(
            self.registry, self.services, cache=OutputCache(), history=self.history
        )

    def validate(self, workflow: Workflow) -> list[WorkflowProblem]:
        """Every problem of ``workflow``; sub-workflows are looked up in the library."""
        return validate_workflow(workflow, self.registry, self.library.load)

    def check(self, workflow: Workflow) -> tuple[list[WorkflowProblem], dict[str, NodeSlots]]:
        """Every problem of ``workflow``, and by node id the slots of each node whose type
        works them out from its config (``dynamic_slots``: a sub-workflow's interface), so
        the canvas need not repeat that logic. A node whose slots could not be worked out
        (its workflow is missing) is left out; its problem says why."""
        graph = WorkflowGraph.build(workflow, self.registry, self.library.load)
        slots = {
            node_id: g.slots
            for node_id, g in graph.nodes.items()
            if g.node_type is not None and g.node_type.dynamic_slots and g.slots is not None
        }
        return graph_problems(graph, self.registry), slots
