"""Node types by name, collected through the ``storyloom_node_types`` hook.

Which plugins there are is decided at start-up (:mod:`storyloom.plugins`): the built-in node
modules are registered exactly as a third-party plugin is.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import ModuleType
from typing import Any

import pluggy

from storyloom.core.errors import Conflict
from storyloom.core.plugin_markers import PROJECT
from storyloom.workflow import hookspecs
from storyloom.workflow.node_type import NodeType, NodeTypeInfo
from storyloom.workflow.workflow_file import workflow_schema


class NodeTypeConflict(Conflict):
    pass


class NodeTypeRefused(Conflict):
    """A ``storyloom_nodemanager_before_register`` hook answered False."""


class NodeRegistry:
    def __init__(self, node_types: Iterable[type[NodeType]] = ()) -> None:
        self._types: dict[str, NodeType] = {}
        self.hooks: Any = None
        """The plugins' hook relay, set by the plugin host once plugins load: from then
        on each new node type is announced to ``storyloom_nodemanager_before_register``."""
        self.generation = 0
        """Changes whenever a type is added or removed (prepared graphs are stale then)."""
        for cls in node_types:
            self.register(cls)

    def register(self, cls: type[NodeType]) -> None:
        existing = self._types.get(cls.type)
        if existing is not None and type(existing) is not cls:
            raise NodeTypeConflict(
                f"node type {cls.type!r} is registered twice: by "
                f"{type(existing).__module__}.{type(existing).__qualname__} and by "
                f"{cls.__module__}.{cls.__qualname__}"
            )
        if existing is None and self.hooks is not None:
            ask = getattr(self.hooks, "storyloom_nodemanager_before_register", None)
            answers = ask(node_type=cls) if ask is not None else []
            if any(answer is False for answer in answers):
                raise NodeTypeRefused(f"node type {cls.type!r} was refused by a plugin hook")
        self._types[cls.type] = cls()
        self.generation += 1

    def unregister(self, type_name: str) -> bool:
        """Remove a node type (a plugin was disabled); False when it was not there."""
        if self._types.pop(type_name, None) is None:
            return False
        self.generation += 1
        return True

    def copy(self) -> NodeRegistry:
        """A registry with the same node types, to add to without changing this one."""
        other = NodeRegistry()
        other._types = dict(self._types)
        return other

    def get(self, type_name: str) -> NodeType | None:
        return self._types.get(type_name)

    def __contains__(self, type_name: object) -> bool:
        return type_name in self._types

    def names(self) -> list[str]:
        return sorted(self._types)

    def infos(self) -> list[NodeTypeInfo]:
        return [self._types[name].info() for name in self.names()]

    def workflow_schema(self) -> dict[str, Any]:
        """The JSON Schema of workflow files, each node's ``config`` checked against its
        type's config model (``if type is X then config is X's``)."""
        schema = workflow_schema()
        node = schema["$defs"]["WorkflowNode"]
        node["allOf"] = [
            {
                "if": {"properties": {"type": {"const": name}}, "required": ["type"]},
                "then": {"properties": {"config": self._types[name].config_schema()}},
            }
            for name in self.names()
        ]
        return schema

    @classmethod
    def from_plugins(
        cls, plugins: Iterable[ModuleType | object] = (), *, entry_points: bool = True
    ) -> NodeRegistry:
        """The node types of the given plugin objects (modules or instances) and, unless
        disabled, of every installed package's ``storyloom`` entry point."""
        manager = pluggy.PluginManager(PROJECT)
        manager.add_hookspecs(hookspecs)
        for plugin in plugins:
            manager.register(plugin)
        if entry_points:
            manager.load_setuptools_entrypoints(PROJECT)
        registry = cls()
        for provided in manager.hook.storyloom_node_types():
            for node_type in provided:
                registry.register(node_type)
        return registry
