"""Hooks of the workflow layer. Built-in nodes use them exactly as a plugin does."""

from __future__ import annotations

from storyloom.core.plugin_markers import hookspec
from storyloom.workflow.node_type import NodeType


@hookspec
def storyloom_node_types() -> list[type[NodeType]]:  # type: ignore[empty-body]
    """Return the node types this plugin provides.

    Each is a :class:`~storyloom.workflow.node_type.NodeType` subclass with a ``type``
    that is unique across all plugins; prefix it with the plugin's name
    (``myplugin:Upper``). A second plugin registering the same ``type`` is an error.
    """
