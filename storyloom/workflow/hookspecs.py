"""Hooks of the workflow layer. Built-in nodes use them exactly as a plugin does."""

from __future__ import annotations

from typing import Any

from storyloom.core.plugin_markers import hookspec
from storyloom.workflow.node_type import NodeType
from storyloom.workflow.workflow_file import Workflow


@hookspec
def storyloom_node_types() -> list[type[NodeType]]:  # type: ignore[empty-body]
    """Return the node types this plugin provides.

    Each is a :class:`~storyloom.workflow.node_type.NodeType` subclass with a ``type``
    that is unique across all plugins; prefix it with the plugin's name
    (``myplugin:Upper``). A second plugin registering the same ``type`` is an error.
    """


@hookspec
def storyloom_workflow_before_execute(
    workflow: Workflow, inputs: dict[str, Any]
) -> dict[str, Any] | None:
    """Called before a workflow run starts (permission ``hook:server:workflow:before-execute``).

    ``workflow`` is the workflow about to run (read it, do not change it); ``inputs`` are
    the values it was started with, by interface input name (a copy: changing it changes
    nothing). Return a new dict of inputs to run it with instead, or None to leave them.
    When several plugins return inputs, the first answer pluggy collects is used (the
    plugin registered last). Raise an error to refuse the run: the caller sees it.
    Called once per run: workflows a node runs inside it (sub-workflow nodes) are not
    announced, while a ``workflow:`` tool call is a run of its own and is.
    """


@hookspec
def storyloom_nodemanager_before_register(
    node_type: type[NodeType],
) -> bool | None:
    """Called before a plugin's node type is registered (permission
    ``hook:server:nodemanager:before-register``).

    ``node_type`` is the :class:`~storyloom.workflow.node_type.NodeType` subclass about to
    be registered; its ``type`` is the name workflows use. Return False to refuse it (it is
    reported as a problem of the plugin that provides it and not registered); True or None
    lets it through. The built-in node types are registered before plugins load and are
    not announced.
    """
