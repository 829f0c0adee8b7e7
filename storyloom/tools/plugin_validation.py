"""``storyloom plugin validate DIR``: everything wrong with one plugin folder, before
anyone enables it.

The manifest is read as discovery reads it; the plugin's Python is imported (checking
a plugin means running it: this is the author's own check, not enabling it anywhere)
into a throwaway registry, then unloaded; each ``*.tool.json`` is read and matched to
what it names (the node type, the service function, a workflow the plugin ships); each
workflow is checked against the node types the plugin adds to the built-ins.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from storyloom.core.errors import FileFormatError
from storyloom.core.settings import Settings
from storyloom.tools.plugin_host import PluginHost
from storyloom.tools.plugin_loader import FoundPlugin, PluginProblem, read_plugin
from storyloom.tools.tool_definition import NodeImpl, ServiceImpl, WorkflowImpl, load_tool_file
from storyloom.workflow.node_registry import NodeRegistry
from storyloom.workflow.validation import validate_workflow
from storyloom.workflow.workflow_file import Workflow, load_workflow_file
from storyloom.workflow.workflow_graph import WorkflowNotFound


@dataclasses.dataclass
class PluginCheck:
    folder: Path
    plugin: FoundPlugin | None
    node_types: list[str]
    tools: list[str]
    workflows: list[str]
    problems: list[PluginProblem]

    @property
    def ok(self) -> bool:
        return self.plugin is not None and not self.problems


def validate_plugin(folder: Path, builtin_nodes: NodeRegistry, home: Path) -> PluginCheck:
    """Every problem of the plugin in ``folder``. ``builtin_nodes`` holds the node types
    the plugin may use besides its own; it is copied, never changed."""
    problems: list[PluginProblem] = []
    found = read_plugin(folder, "project", Settings(), problems)
    if found is None:
        return PluginCheck(folder, None, [], [], [], problems)
    plugin = dataclasses.replace(found, enabled=True)
    registry = builtin_nodes.copy()
    host = PluginHost(
        None,
        home,
        Settings,
        registry,
        discover=lambda settings: ([plugin], []),
    )
    try:
        problems += host.problems
        node_types = host.node_types_of(plugin.name)
        workflows = _check_workflows(plugin, registry, problems)
        tools = _check_tools(plugin, host, registry, workflows, problems)
    finally:
        host.close()
    return PluginCheck(folder, plugin, node_types, tools, sorted(workflows), problems)


def _problem(plugin: FoundPlugin, file: Path, field: str, reason: str) -> PluginProblem:
    return PluginProblem(folder=str(plugin.folder), file=str(file), field=field, reason=reason)


def _check_workflows(
    plugin: FoundPlugin, registry: NodeRegistry, problems: list[PluginProblem]
) -> dict[str, Workflow]:
    workflows: dict[str, Workflow] = {}
    files: dict[str, Path] = {}
    for path in plugin.workflow_files:
        try:
            workflow = load_workflow_file(path)
        except FileFormatError as exc:
            problems += [_problem(plugin, path, p.field, p.reason) for p in exc.problems]
            continue
        if workflow.id != path.stem:
            problems.append(
                _problem(plugin, path, "id", f"{workflow.id!r} differs from the file name")
            )
            continue
        workflows[workflow.id] = workflow
        files[workflow.id] = path

    def load(workflow_id: str) -> Workflow:
        if workflow_id not in workflows:
            raise WorkflowNotFound(f"the plugin ships no workflow {workflow_id!r}")
        return workflows[workflow_id]

    for workflow_id, workflow in workflows.items():
        for problem in validate_workflow(workflow, registry, load):
            where = ".".join(p for p in (problem.node_id, problem.slot or problem.field) if p)
            problems.append(
                _problem(plugin, files[workflow_id], where or "", f"[{problem.code}] {problem}")
            )
    return workflows


def _check_tools(
    plugin: FoundPlugin,
    host: PluginHost,
    registry: NodeRegistry,
    workflows: dict[str, Workflow],
    problems: list[PluginProblem],
) -> list[str]:
    functions = host.tool_functions(plugin.name)
    seen: dict[str, Path] = {}
    for path in plugin.tool_files:
        try:
            definition = load_tool_file(path)
        except FileFormatError as exc:
            problems += [_problem(plugin, path, p.field, p.reason) for p in exc.problems]
            continue
        if definition.id in seen:
            problems.append(
                _problem(
                    plugin,
                    path,
                    "id",
                    f"{definition.id!r} is also declared in {seen[definition.id]}",
                )
            )
            continue
        seen[definition.id] = path
        impl = definition.implementation
        if isinstance(impl, NodeImpl) and impl.node not in registry:
            problems.append(
                _problem(plugin, path, "implementation.node", f"no node type {impl.node!r}")
            )
        elif isinstance(impl, ServiceImpl) and impl.function not in functions:
            known = ", ".join(sorted(functions)) or "none"
            problems.append(
                _problem(
                    plugin,
                    path,
                    "implementation.function",
                    f"storyloom_tool_functions returns no {impl.function!r} (it returns: {known})",
                )
            )
        elif isinstance(impl, WorkflowImpl) and impl.workflow not in workflows:
            # A project workflow of that id may exist where the plugin is used; say so.
            problems.append(
                _problem(
                    plugin,
                    path,
                    "implementation.workflow",
                    f"the plugin ships no workflow {impl.workflow!r}; it works only in a "
                    "project that has one",
                )
            )
    return sorted(seen)
