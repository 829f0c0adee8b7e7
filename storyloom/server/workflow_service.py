"""The workflow pieces of the server's project: its library, the node registry, one runner.

One runner with one output cache serves every run of the server, so a re-run from the
canvas reuses what an earlier run computed; node history lives in the server's database.

The library the server shows is the project's ``workflows/`` folder plus the built-in
workflows of the layers above the workflow engine (today the chat pipeline,
``chat-default``). A built-in is listed, loaded, validated and run like a file; saving it
writes the project's own copy, which then wins (the chat reads the same file through
:func:`storyloom.chat.prompt.default_pipeline.pipeline_for`); deleting that copy brings the
built-in back, and the built-in itself cannot be deleted (a 409). The canvas shows a
built-in read-only and saves changes as a copy under a new id ("Duplicate to change").
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import Field

from storyloom.chat.prompt.default_pipeline import default_pipeline
from storyloom.chat.prompt.preset_pipeline import import_st_preset, workflow_id_for
from storyloom.chat.store.conversation import DEFAULT_PIPELINE
from storyloom.core.errors import Conflict, FieldProblem, FileFormatError
from storyloom.core.settings import Settings
from storyloom.plugins import default_registry
from storyloom.project.knowledge_service import KnowledgeService
from storyloom.store.database import Database
from storyloom.workflow.node_cache import OutputCache
from storyloom.workflow.node_history import NodeHistory
from storyloom.workflow.node_registry import NodeRegistry
from storyloom.workflow.node_type import NodeSlots, WorkflowServices
from storyloom.workflow.runner import WorkflowRunner
from storyloom.workflow.validation import WorkflowProblem, graph_problems, validate_workflow
from storyloom.workflow.workflow_file import (
    Workflow,
    WorkflowLibrary,
    WorkflowSummary,
    parse_workflow,
)
from storyloom.workflow.workflow_graph import WorkflowGraph, WorkflowNotFound

BUILTIN_WORKFLOWS: Mapping[str, Callable[[], Workflow]] = {DEFAULT_PIPELINE: default_pipeline}
"""Workflows every project has without a file, by id."""


class WorkflowEntry(WorkflowSummary):
    """A workflow as the library lists it."""

    builtin: bool = Field(
        description="Shipped with storyloom, no file in the project yet: saving it writes "
        "the project's own copy, which is then used instead"
    )


class BuiltinWorkflowError(Conflict):
    """The built-in workflow itself was asked to go (only a project's copy can): a 409."""

    def __init__(self, workflow_id: str) -> None:
        self.workflow_id = workflow_id
        super().__init__(
            f"workflow {workflow_id!r} is built in and cannot be deleted; duplicate it to "
            "make a copy of your own to change"
        )


def workflow_not_found(workflow_id: str) -> WorkflowNotFound:
    return WorkflowNotFound(f"no workflow {workflow_id!r} in this project")


class WorkflowExists(Conflict):
    """An import would replace a workflow the project already has."""

    def __init__(self, workflow_id: str) -> None:
        self.workflow_id = workflow_id
        super().__init__(
            f"workflow {workflow_id!r} already exists; give another id, or ask to overwrite it"
        )


class ProjectWorkflows(WorkflowLibrary):
    """The project's workflow files, and the built-ins it has no file for."""

    def __init__(
        self,
        project_dir: Path,
        built_in: Mapping[str, Callable[[], Workflow]] = BUILTIN_WORKFLOWS,
    ) -> None:
        super().__init__(project_dir)
        self.built_in = built_in

    def has_file(self, workflow_id: str) -> bool:
        return super().exists(workflow_id)

    def is_builtin(self, workflow_id: str) -> bool:
        """True when ``workflow_id`` is served from the built-in (no project file)."""
        return workflow_id in self.built_in and not self.has_file(workflow_id)

    def exists(self, workflow_id: str) -> bool:
        return self.has_file(workflow_id) or workflow_id in self.built_in

    def load(self, workflow_id: str) -> Workflow:
        if self.is_builtin(workflow_id):
            return self.built_in[workflow_id]()
        return super().load(workflow_id)

    def require(self, workflow_id: str) -> Workflow:
        """The workflow ``workflow_id``; :class:`WorkflowNotFound` when the project has no
        such workflow, :class:`FileFormatError` for a malformed id or a broken file."""
        if not self.exists(workflow_id):
            self.path(workflow_id)  # a malformed id says so
            raise workflow_not_found(workflow_id)
        return self.load(workflow_id)

    def delete(self, workflow_id: str) -> bool:
        """Delete the project's file; raises :class:`BuiltinWorkflowError` for a built-in
        the project has no copy of."""
        if self.is_builtin(workflow_id):
            raise BuiltinWorkflowError(workflow_id)
        return super().delete(workflow_id)

    def entries(self) -> tuple[builtins.list[WorkflowEntry], builtins.list[FileFormatError]]:
        """Every workflow by id (files, then the built-ins without a file), and the files
        that do not load. A broken file hides its built-in: it is what the chat would
        load, so it is what needs fixing."""
        summaries, broken = super().list()
        entries = [WorkflowEntry(**s.model_dump(), builtin=False) for s in summaries]
        taken = {e.id for e in entries} | {e.path.stem for e in broken}
        for workflow_id, make in self.built_in.items():
            if workflow_id in taken:
                continue
            workflow = make()
            entries.append(
                WorkflowEntry(
                    id=workflow.id,
                    name=workflow.name or workflow.id,
                    description=workflow.description,
                    node_count=len(workflow.nodes),
                    builtin=True,
                )
            )
        entries.sort(key=lambda e: e.id)
        return entries, broken

    def list(self) -> tuple[builtins.list[WorkflowSummary], builtins.list[FileFormatError]]:
        entries, broken = self.entries()
        return builtins.list(entries), broken

    def import_st_preset(
        self,
        data: Any,
        *,
        file_name: str,
        workflow_id: str | None = None,
        name: str | None = None,
        overwrite: bool = False,
    ) -> tuple[Workflow, Path]:
        """Save the chat pipeline of a SillyTavern chat-completion preset (``data``: its
        parsed JSON, from the file ``file_name``) and return it with where it went.

        The id defaults to ``st-<file name>``, the name to the file's stem. Raises
        :class:`FileFormatError` naming ``file_name`` and the field, or
        :class:`WorkflowExists` unless ``overwrite``; nothing is written then.
        """
        stem = Path(file_name).stem or "preset"
        chosen = workflow_id or workflow_id_for(stem)
        parse_workflow({"id": chosen}, file_name)  # a bad or reserved id, named as `id`
        try:
            workflow = import_st_preset(data, name=name or stem, workflow_id=chosen)
        except FileFormatError as exc:
            # Parsed data carries no path of its own: name the file the user gave.
            raise FileFormatError(file_name, exc.problems) from None
        if self.exists(chosen) and not overwrite:
            raise WorkflowExists(chosen)
        return workflow, self.save(workflow)


def read_preset_json(data: bytes, file_name: str) -> Any:
    """The parsed JSON of an uploaded or read preset file; :class:`FileFormatError` names
    the file when it is not UTF-8 JSON."""
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        problem = FieldProblem("", f"not UTF-8 text ({exc.reason})")
        raise FileFormatError(file_name, [problem]) from None
    except json.JSONDecodeError as exc:
        raise FileFormatError(file_name, [FieldProblem("", f"not JSON: {exc}")]) from None


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
        self.library = ProjectWorkflows(project_dir)
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
