"""The built-in plugins, wired together at start-up by the server and the CLI.

Each built-in package registers its nodes through the same pluggy hook a third-party plugin
implements (``storyloom_node_types``); this module, at the top of the layers, is the one
place that knows them all. Installed packages add theirs through the ``storyloom``
setuptools entry point group.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import ModuleType

from storyloom.chat.prompt import shuttle_nodes
from storyloom.tools import agent_nodes
from storyloom.workflow import nodes as workflow_nodes
from storyloom.workflow.node_registry import NodeRegistry
from storyloom.writing import writing_nodes

BUILTIN_PLUGINS: tuple[ModuleType, ...] = (
    *workflow_nodes.PLUGINS,
    shuttle_nodes,
    agent_nodes,
    writing_nodes,
)


def node_registry(
    extra: Iterable[ModuleType | object] = (), *, entry_points: bool = True
) -> NodeRegistry:
    """Every built-in node type, those of ``extra`` plugin objects, and (unless disabled)
    those of installed packages."""
    return NodeRegistry.from_plugins([*BUILTIN_PLUGINS, *extra], entry_points=entry_points)


_default: NodeRegistry | None = None


def default_registry() -> NodeRegistry:
    """The registry of this process (built-ins and installed plugins), built once."""
    global _default
    if _default is None:
        _default = node_registry()
    return _default
