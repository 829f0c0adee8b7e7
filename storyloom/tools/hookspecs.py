"""Hooks of the tools layer: what a plugin's Python modules may implement besides node
types (``storyloom_node_types``, in :mod:`storyloom.workflow.hookspecs`).

A plugin implements a hook by defining a function of the same name marked with
``storyloom.core.plugin_markers.hookimpl`` in one of its ``nodes/*.py`` modules. It may
take fewer arguments than the spec lists (pluggy passes only those it names).

Two kinds of hooks:

- *providers* need no permission: ``storyloom_tools`` and ``storyloom_tool_functions``
  add tools;
- *server hooks* run inside storyloom's own work and need the matching permission in
  ``plugin.yaml`` (``permissions.hooks``): a module implementing one its plugin did not
  declare is not registered at all, and the plugin shows the problem.

A hook that raises fails what it was called for (the settings save, the tool call) and
nothing else; providers that raise are reported and skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from storyloom.core.plugin_markers import hookspec
from storyloom.tools.config_options import OptionValues
from storyloom.tools.tool_definition import ServiceTool


@hookspec
def storyloom_tools() -> list[ServiceTool]:  # type: ignore[empty-body]
    """Return tools implemented in Python, each a :class:`ServiceTool` (a
    :class:`ToolDefinition` with ``implementation: {type: service, function: <name>}`` and
    the function itself), with no ``*.tool.json`` file.

    The function is called as ``function(arguments, context)``: ``arguments`` validated
    against the definition's ``parameters``, ``context`` the
    :class:`~storyloom.tools.tool_manager.ToolCallContext` (who calls, the policy). It
    may be ``async``; a plain function runs in a worker thread. Return anything JSON can
    hold; raise to fail the call with your message. Ids are ``<plugin>:<name>``.
    """


@hookspec
def storyloom_tool_functions(  # type: ignore[empty-body]
    options: OptionValues,
) -> dict[str, Callable[..., Any]]:
    """Return the functions this plugin's ``*.tool.json`` files name in
    ``implementation: {"type": "service", "function": "<name>"}``, by that name.

    Called for one plugin at a time with ``options``, the plugin's ``configOptions``
    values (``options.get("greeting")``: the value set in Settings → Extensions, else its
    ``defaultValue``; secret options decrypted). Read options when the tool is called, not
    when this hook runs, so a changed setting counts at once. Each function is called as
    ``function(arguments, context)`` like a :func:`storyloom_tools` function.
    """


@hookspec
def storyloom_settings_before_save(settings: dict[str, Any]) -> None:
    """Called before settings are saved (permission ``hook:server:settings:before-save``).

    ``settings`` is the whole ``settings.json`` about to be written, API keys removed (a
    copy: changing it changes nothing). Raise
    :class:`~storyloom.core.errors.InvalidInput` with field problems to refuse the save;
    the user sees your reasons and nothing is written.
    """


@hookspec
def storyloom_chat_after_turn(conversation_id: str, message: dict[str, Any]) -> None:
    """Called when a chat turn has finished (permission ``hook:server:chat:after-turn``).

    ``message`` is the assistant message the turn produced, as ``GET`` of the
    conversation returns it (with ``extra.tool_steps`` when tools were called). Called
    after the message is stored; what the hook does cannot change the turn, and an error
    it raises is logged, not shown in the chat.
    """


@hookspec
def storyloom_tool_before_call(tool_id: str, arguments: dict[str, Any], action: str) -> str | None:
    """Called before every tool call (permission ``hook:server:tool:before-call``).

    ``action`` is what the policy decided: ``allow``, ``ask`` or ``deny``. Return
    ``"ask"`` or ``"deny"`` to make it stricter, or None to leave it. A hook can only
    tighten: an answer looser than the policy's (``allow`` where the policy asks) is
    ignored, and the strictest answer of all plugins wins. ``arguments`` is a copy.
    """
