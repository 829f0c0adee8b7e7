"""Every tool from every source, in one id namespace (seed 003 7.1).

Sources, in the order they win a clash: built-in service tools (``storyloom_tools``),
enabled plugins (their ``*.tool.json`` files, their ``storyloom_tools`` and the
workflows they ship), the project's workflows that have an interface, every node type
whose slots do not depend on its config, then sources added at run time
(:meth:`ToolRegistry.add_source`, the MCP clients). An id declared twice is a
:class:`ToolProblem` naming both places; the first one is kept, so the outcome never
depends on file-system order.

A tool that is declared but cannot run (its workflow is gone, its function is not
registered, a script tool whose command is missing or on a machine where the sandbox
cannot start) is listed with ``available=False`` and
the reason, so the Tools page can say why.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from storyloom.core.errors import FileFormatError, NotFound
from storyloom.tools.script_tool import bind_script_tool
from storyloom.tools.tool_definition import (
    NodeImpl,
    ScriptImpl,
    ServiceImpl,
    ServiceTool,
    ToolDefinition,
    ToolEntry,
    WorkflowImpl,
    load_tool_file,
)
from storyloom.workflow.node_registry import NodeRegistry
from storyloom.workflow.workflow_file import (
    WORKFLOW_SUFFIX,
    Workflow,
    WorkflowLibrary,
    load_workflow_file,
)
from storyloom.workflow.workflow_tools import node_tool_schema, workflow_tool_schema

if TYPE_CHECKING:
    from storyloom.tools.plugin_host import PluginHost

BUILTIN_SOURCE = "builtin"
WORKFLOW_SOURCE = "workflow"
NODE_SOURCE = "node"

ToolProvider = Callable[[], list[ToolEntry]]


@dataclass(frozen=True)
class ToolProblem:
    """A tool that could not be offered as declared: a file that does not validate, an
    id declared twice (``where`` names the place that lost)."""

    where: str
    reason: str
    tool: str | None = None


def has_interface(workflow: Workflow) -> bool:
    return bool(workflow.interface_inputs or workflow.interface_outputs)


def workflow_definition(workflow: Workflow) -> ToolDefinition:
    schema = workflow_tool_schema(workflow)
    return ToolDefinition(
        id=schema["name"],
        display_name=workflow.name or workflow.id,
        description=schema["description"],
        parameters=schema["parameters"],
        implementation=WorkflowImpl(workflow=workflow.id),
    )


def _plugin_source(name: str) -> str:
    return f"plugin:{name}"


_Built = tuple[list[ToolEntry], list[ToolProblem], dict[str, ToolEntry]]


class ToolRegistry:
    """The tools of one process. Built again when a workflow file, the plugins or the
    node types change; cheap to ask otherwise."""

    def __init__(
        self,
        *,
        node_registry: NodeRegistry,
        plugins: PluginHost | None = None,
        workflows: WorkflowLibrary | None = None,
        builtin: Callable[[], list[ServiceTool]] | None = None,
    ) -> None:
        """``builtin``: the built-in service tools, offered whether or not the plugin
        host registered them as a ``storyloom_tools`` implementation."""
        self.node_registry = node_registry
        self.plugins = plugins
        self.workflows = workflows
        self._builtin = builtin
        self._sources: dict[str, ToolProvider] = {}
        self._lock = threading.Lock()
        self._cache: tuple[Any, _Built] | None = None

    def add_source(self, name: str, provider: ToolProvider) -> None:
        """Tools listed by ``provider`` each time the registry is read (after all others)."""
        with self._lock:
            self._sources[name] = provider

    def remove_source(self, name: str) -> None:
        with self._lock:
            self._sources.pop(name, None)

    def invalidate(self) -> None:
        """Build again on the next read (a change the file times do not show)."""
        with self._lock:
            self._cache = None

    def entries(self) -> list[ToolEntry]:
        """Every tool, in source order, then by id within a source."""
        return self._build()[0]

    def problems(self) -> list[ToolProblem]:
        return self._build()[1]

    def get(self, tool_id: str) -> ToolEntry:
        entry = self.find(tool_id)
        if entry is None:
            raise NotFound(f"no tool {tool_id!r}")
        return entry

    def find(self, tool_id: str) -> ToolEntry | None:
        # Every call looks one tool up: the static tools win any clash, so only an id
        # they lack asks the runtime sources, and nothing is de-duplicated again.
        static = self._static()[2]
        entry = static.get(tool_id)
        if entry is not None:
            return entry
        return self._build()[2].get(tool_id)

    # -- building ------------------------------------------------------------------------

    def _fingerprint(self) -> Any:
        files: list[Path] = []
        if self.workflows is not None and self.workflows.folder.is_dir():
            files.append(self.workflows.folder)
            files.extend(sorted(self.workflows.folder.glob(f"*{WORKFLOW_SUFFIX}")))
        plugin_key: tuple[Any, ...] = ()
        if self.plugins is not None:
            enabled = self.plugins.enabled_plugins()
            plugin_key = tuple((p.manifest.name, str(p.folder)) for p in enabled)
            for plugin in enabled:
                files.extend(plugin.tool_files)
                files.extend(plugin.workflow_files)
        stats = []
        for path in files:
            try:
                st = os.stat(path)
                stats.append((str(path), st.st_mtime_ns, st.st_size))
            except OSError:
                stats.append((str(path), -1, -1))
        return (tuple(stats), plugin_key, tuple(self.node_registry.names()))

    def _static(self) -> _Built:
        """The tools of files, plugins and node types, built again when they change."""
        key = self._fingerprint()
        with self._lock:
            cached = self._cache
        if cached is not None and cached[0] == key:
            return cached[1]
        built = _deduplicated(*self._static_entries())
        with self._lock:
            self._cache = (key, built)
        return built

    def _build(self) -> _Built:
        static, static_problems, _ = self._static()
        with self._lock:
            sources = list(self._sources.items())
        dynamic: list[ToolEntry] = []
        problems = list(static_problems)
        for name, provider in sources:
            try:
                dynamic.extend(sorted(provider(), key=lambda e: e.id))
            except Exception as exc:  # one failing source must not hide the others
                problems.append(ToolProblem(name, f"could not list its tools: {exc}"))
        return _deduplicated([*static, *dynamic], problems)

    def _static_entries(self) -> tuple[list[ToolEntry], list[ToolProblem]]:
        problems: list[ToolProblem] = []
        entries: list[ToolEntry] = []
        entries += sorted(self._service_entries(builtin=True), key=lambda e: e.id)
        entries += self._plugin_entries(problems)
        entries += self._workflow_entries(problems)
        entries += self._node_entries()
        return entries, problems

    def _service_entries(self, *, builtin: bool) -> list[ToolEntry]:
        """Tools from ``storyloom_tools``: the built-ins' (``builtin=True``) or the
        enabled plugins' (``builtin=False``)."""
        found: list[tuple[str | None, ServiceTool]] = []
        if self.plugins is not None:
            found = [
                (owner, tool)
                for owner, tool in self.plugins.service_tools_by_plugin()
                if (owner is None) == builtin
            ]
        if builtin and self._builtin is not None:
            seen = {tool.definition.id for _, tool in found}
            found += [(None, t) for t in self._builtin() if t.definition.id not in seen]
        return [
            ToolEntry(
                definition=tool.definition,
                source=_plugin_source(owner) if owner else BUILTIN_SOURCE,
                plugin=owner,
                function=tool.function,
                location=f"storyloom_tools of plugin {owner}" if owner else "built-in tools",
            )
            for owner, tool in found
        ]

    def _plugin_entries(self, problems: list[ToolProblem]) -> list[ToolEntry]:
        if self.plugins is None:
            return []
        entries: list[ToolEntry] = []
        from_hooks = self._service_entries(builtin=False)
        for plugin in sorted(self.plugins.enabled_plugins(), key=lambda p: p.manifest.name):
            name = plugin.manifest.name
            shipped = self._plugin_workflows(plugin.workflow_files, problems)
            functions = self.plugins.tool_functions(name)
            declared: list[ToolEntry] = []
            for path in sorted(plugin.tool_files):
                try:
                    definition = load_tool_file(path)
                except FileFormatError as exc:
                    problems.append(ToolProblem(str(path), str(exc)))
                    continue
                entry = ToolEntry(
                    definition=definition,
                    source=_plugin_source(name),
                    plugin=name,
                    folder=plugin.folder,
                    location=str(path),
                )
                declared.append(self._resolved(entry, shipped, functions))
            entries += sorted(declared, key=lambda e: e.id)
            entries += sorted((e for e in from_hooks if e.plugin == name), key=lambda e: e.id)
            entries += [
                ToolEntry(
                    definition=workflow_definition(workflow),
                    source=_plugin_source(name),
                    plugin=name,
                    workflow_file=path,
                    folder=plugin.folder,
                    location=str(path),
                )
                for workflow, path in shipped.values()
                if has_interface(workflow)
            ]
        return entries

    @staticmethod
    def _plugin_workflows(
        files: Iterable[Path], problems: list[ToolProblem]
    ) -> dict[str, tuple[Workflow, Path]]:
        shipped: dict[str, tuple[Workflow, Path]] = {}
        for path in sorted(files):
            try:
                workflow = load_workflow_file(path)
            except FileFormatError as exc:
                problems.append(ToolProblem(str(path), str(exc)))
                continue
            workflow_id = path.name.removesuffix(WORKFLOW_SUFFIX)
            if workflow.id != workflow_id:
                # The file name wins, as in a project's workflows/.
                workflow = workflow.model_copy(update={"id": workflow_id})
            shipped[workflow_id] = (workflow, path)
        return shipped

    def _resolved(
        self,
        entry: ToolEntry,
        shipped: dict[str, tuple[Workflow, Path]],
        functions: dict[str, Callable[..., Any]],
    ) -> ToolEntry:
        """A plugin's declared tool, bound to what runs it, or unavailable and why."""
        definition = entry.definition
        impl = definition.implementation
        if isinstance(impl, ScriptImpl):
            assert self.plugins is not None  # only plugins declare script tools
            return bind_script_tool(entry, self.plugins)
        if isinstance(impl, ServiceImpl):
            function = functions.get(impl.function)
            if function is None:
                reason = (
                    f"function {impl.function!r} is not returned by the plugin's "
                    "storyloom_tool_functions"
                )
                return replace(entry, available=False, unavailable_reason=reason)
            return replace(entry, function=function)
        if isinstance(impl, WorkflowImpl):
            workflow_file: Path | None = None
            if impl.workflow in shipped:
                workflow, workflow_file = shipped[impl.workflow]
            else:
                try:
                    workflow = self._project_workflow(impl.workflow)
                except (FileFormatError, NotFound) as exc:
                    return replace(entry, available=False, unavailable_reason=str(exc))
            if definition.infers_parameters:
                parameters = workflow_tool_schema(workflow)["parameters"]
                definition = definition.model_copy(update={"parameters": parameters})
            return replace(entry, definition=definition, workflow_file=workflow_file)
        assert isinstance(impl, NodeImpl)
        found = self.node_registry.get(impl.node)
        if found is None:
            reason = f"no node type {impl.node!r} (is the plugin that provides it enabled?)"
            return replace(entry, available=False, unavailable_reason=reason)
        info = found.info()
        if info.dynamic_slots:
            reason = f"node type {impl.node!r} has slots that depend on its config"
            return replace(entry, available=False, unavailable_reason=reason)
        if definition.infers_parameters:
            parameters = dict(node_tool_schema(info)["parameters"])
            fixed = set(impl.config)
            parameters["properties"] = {
                k: v for k, v in parameters["properties"].items() if k not in fixed
            }
            parameters["required"] = [r for r in parameters["required"] if r not in fixed]
            definition = definition.model_copy(update={"parameters": parameters})
        return replace(entry, definition=definition)

    def _project_workflow(self, workflow_id: str) -> Workflow:
        if self.workflows is None or not self.workflows.exists(workflow_id):
            raise NotFound(
                f"workflow {workflow_id!r} is gone (neither in the plugin's workflows/ "
                "nor in the project's)"
            )
        return self.workflows.load(workflow_id)

    def _workflow_entries(self, problems: list[ToolProblem]) -> list[ToolEntry]:
        if self.workflows is None or not self.workflows.folder.is_dir():
            return []
        entries: list[ToolEntry] = []
        for path in sorted(self.workflows.folder.glob(f"*{WORKFLOW_SUFFIX}")):
            workflow_id = path.name.removesuffix(WORKFLOW_SUFFIX)
            try:
                workflow = self.workflows.load(workflow_id)
            except FileFormatError as exc:
                problems.append(ToolProblem(str(path), str(exc)))
                continue
            if has_interface(workflow):
                entries.append(
                    ToolEntry(
                        definition=workflow_definition(workflow),
                        source=WORKFLOW_SOURCE,
                        location=str(path),
                    )
                )
        return entries

    def _node_entries(self) -> list[ToolEntry]:
        entries: list[ToolEntry] = []
        for info in self.node_registry.infos():
            if info.dynamic_slots:
                continue
            schema = node_tool_schema(info)
            entries.append(
                ToolEntry(
                    definition=ToolDefinition(
                        id=schema["name"],
                        display_name=info.display_name,
                        description=schema["description"],
                        parameters=schema["parameters"],
                        implementation=NodeImpl(node=info.type),
                    ),
                    source=NODE_SOURCE,
                    location=f"node type {info.type}",
                )
            )
        return sorted(entries, key=lambda e: e.id)


def _deduplicated(entries: list[ToolEntry], problems: list[ToolProblem]) -> _Built:
    kept: dict[str, ToolEntry] = {}
    for entry in entries:
        first = kept.get(entry.id)
        if first is None:
            kept[entry.id] = entry
            continue
        problems.append(
            ToolProblem(
                entry.where,
                f"tool id {entry.id!r} is declared twice: by {first.where} and by "
                f"{entry.where}; the first is used",
                tool=entry.id,
            )
        )
    return list(kept.values()), problems, kept
