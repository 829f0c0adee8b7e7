"""Script tools (seed 003 4.3, 6.3): a plugin's ``implementation.type: "script"`` tool run
as a command inside the sandbox (:mod:`storyloom.sandbox`), never in the server.

The protocol (``docs/tools.md`` §6.2 has complete examples):

- the plugin's folder is mounted read-only at ``/plugin``; the command runs in
  ``/plugin/<cwd>`` with an empty environment (``PATH``, ``HOME=/scratch``, ``TMPDIR``,
  ``LANG`` only), a writable ``/scratch`` that is thrown away afterwards, and no
  network unless the plugin declares ``permissions.network`` *and* the user granted it
  when enabling the plugin;
- stdin holds one JSON line: ``{"arguments": {...}, "config": {...}, "tool": "<id>"}``,
  where ``config`` holds the tool's ``configSchema`` values and the plugin's
  ``configOptions`` values by their short names (secrets decrypted);
- stdout holds the answer: one JSON object ``{"result": <any JSON>}`` or
  ``{"error": "<message>"}``. Either the whole of stdout is that object (it may span
  lines), or its last non-empty line is (earlier lines are log lines and go nowhere);
  stderr goes nowhere either, except that its last lines are quoted when the command
  fails.

``command`` is split like a shell would (no shell runs it): ``python``/``python3`` is the
sandbox's own interpreter (run isolated: no site-packages), ``node`` is the host's node
bound read-only, a command with a ``/`` is a file inside the plugin folder (relative to
``cwd``), any other name is looked up on :data:`SYSTEM_PATH`. Every failure (a command
that is missing, a limit hit, a non-zero exit, output that is not the protocol's, an
``error`` the script returned) is a :class:`ScriptToolError` naming the tool: the
ToolManager turns it into a failed call, and the server and the turn go on.
"""

from __future__ import annotations

import json
import math
import os
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from storyloom.core.errors import StoryloomError
from storyloom.sandbox.bwrap import SANDBOX_PATH, SandboxStatus, in_system_dirs, sandbox_status
from storyloom.sandbox.limits import SandboxLimits
from storyloom.sandbox.node_binary import NODE_COMMAND, NodeMissing, find_node
from storyloom.sandbox.process_sandbox import (
    Mount,
    SandboxRequest,
    SandboxResult,
    python_argv,
    run_sandboxed,
)
from storyloom.tools.tool_definition import ScriptImpl, ToolDefinition, ToolEntry

if TYPE_CHECKING:
    from storyloom.tools.plugin_host import PluginHost
    from storyloom.tools.tool_manager import ToolCallContext

PLUGIN_INSIDE = "/plugin"
SYSTEM_PATH: tuple[str, ...] = tuple(SANDBOX_PATH.split(":"))
"""Where a bare command name is looked up (these folders are in every sandbox)."""
PYTHON_COMMANDS = frozenset({"python", "python3"})
_SHOWN_STDOUT = 200
_STDERR_LINES = 10
_STDERR_CHARS = 2000


class ScriptToolError(StoryloomError):
    """A script tool that could not run or whose run failed; the message starts with
    ``tool <id>:`` and says what went wrong."""

    def __init__(self, tool: str, message: str) -> None:
        self.tool = tool
        self.detail = message
        super().__init__(f"tool {tool}: {message}")


@dataclass(frozen=True)
class ResolvedCommand:
    """A script tool's command as the sandbox runs it: ``argv`` as seen inside, and the
    host files it needs beyond the plugin folder and the system folders."""

    argv: list[str]
    mounts: tuple[Mount, ...] = ()


def resolve_command(tool: str, impl: ScriptImpl, folder: Path) -> ResolvedCommand:
    """``impl.command`` split and its program found; :class:`ScriptToolError` when it
    does not parse or the program does not exist."""
    try:
        words = shlex.split(impl.command)
    except ValueError as exc:
        raise ScriptToolError(tool, f"cannot parse command {impl.command!r}: {exc}") from None
    if not words:
        raise ScriptToolError(tool, "command is empty")
    program, rest = words[0], words[1:]
    if program in PYTHON_COMMANDS:
        return ResolvedCommand(python_argv(*rest))
    if program == NODE_COMMAND:
        return _node(tool, rest)
    if "/" in program:
        return ResolvedCommand([_plugin_program(tool, impl, folder, program), *rest])
    for directory in SYSTEM_PATH:
        candidate = Path(directory) / program
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return ResolvedCommand([str(candidate), *rest])
    raise ScriptToolError(
        tool, f"command {program!r} is not installed (looked in {', '.join(SYSTEM_PATH)})"
    )


def _node(tool: str, rest: list[str]) -> ResolvedCommand:
    try:
        node = find_node()
    except NodeMissing as exc:
        raise ScriptToolError(tool, str(exc)) from None
    return ResolvedCommand([node.path, *rest], node.mounts)


def _plugin_program(tool: str, impl: ScriptImpl, folder: Path, program: str) -> str:
    """A program of the plugin (``./run.sh``, ``bin/tool``) as its path inside."""
    if program.startswith("/"):
        path = Path(program)
        if in_system_dirs(os.path.realpath(path)) and path.is_file():
            return program
        raise ScriptToolError(
            tool,
            f"command {program!r} is not inside the plugin folder nor in {', '.join(SYSTEM_PATH)}",
        )
    root = folder.resolve()
    host = (root / impl.cwd / program).resolve()
    if not host.is_relative_to(root):
        raise ScriptToolError(tool, f"command {program!r} leaves the plugin folder")
    if not host.is_file():
        raise ScriptToolError(tool, f"command {program!r} is not a file of the plugin ({host})")
    if not os.access(host, os.X_OK):
        raise ScriptToolError(tool, f"command {program!r} is not executable (chmod +x {host})")
    return str(PurePosixPath(PLUGIN_INSIDE) / host.relative_to(root).as_posix())


def _inside_cwd(impl: ScriptImpl) -> str:
    return str(PurePosixPath(PLUGIN_INSIDE) / PurePosixPath(impl.cwd))


@dataclass(frozen=True)
class ScriptTool:
    """One script tool ready to run. ``config`` and ``network`` are read at each call, so
    a value changed in Settings → Extensions, or a network grant withdrawn, applies to the
    next call without a rebuild."""

    tool_id: str
    impl: ScriptImpl
    folder: Path
    config: Callable[[], dict[str, Any]]
    network: Callable[[], bool]
    limits: SandboxLimits = field(default_factory=SandboxLimits)

    async def call(self, arguments: dict[str, Any], context: ToolCallContext) -> Any:
        """The service function: run the command once and return its ``result``."""
        command = resolve_command(self.tool_id, self.impl, self.folder)
        cwd = (self.folder / self.impl.cwd).resolve()
        if not cwd.is_dir() or not cwd.is_relative_to(self.folder.resolve()):
            raise ScriptToolError(
                self.tool_id, f"cwd {self.impl.cwd!r} is not a folder of the plugin"
            )
        request = request_line(arguments, self.config(), self.tool_id)
        wall = min(self.impl.timeout / 1000, context.timeout_s)
        limits = self.limits.model_copy(
            update={"wall_seconds": wall, "cpu_seconds": max(1, math.ceil(wall))}
        )
        result = await run_sandboxed(
            SandboxRequest(
                argv=command.argv,
                mounts=(Mount(host=self.folder.resolve(), inside=PLUGIN_INSIDE), *command.mounts),
                stdin=(request + "\n").encode("utf-8"),
                cwd=_inside_cwd(self.impl),
                network=self.network(),
                limits=limits,
                name=f"tool {self.tool_id}",
            )
        )
        return read_reply(self.tool_id, result, limits)


def read_reply(tool: str, run: SandboxResult, limits: SandboxLimits) -> Any:
    """The ``result`` of a finished run, or :class:`ScriptToolError` saying what went
    wrong: a limit, a reply that is an ``error``, a non-zero exit, or stdout that does
    not follow the protocol."""
    if run.limit is not None:
        raise ScriptToolError(tool, _limit_message(run, limits))
    reply, problem = parse_stdout(run.stdout)
    if isinstance(reply, dict) and reply.get("error") is not None:
        error = reply["error"]
        raise ScriptToolError(tool, error if isinstance(error, str) else json.dumps(error))
    if run.exit_code != 0:
        failed = f"the command failed ({run.describe()})"
        raise ScriptToolError(tool, f"{failed}{_stderr_tail(run.stderr)}")
    if problem is not None:
        raise ScriptToolError(tool, f"{problem}{_stderr_tail(run.stderr)}")
    assert isinstance(reply, dict)
    return reply.get("result")


def parse_stdout(stdout: str) -> tuple[Any, str | None]:
    """``(reply object, None)``, or ``(None, why stdout is not one)``."""
    text = stdout.strip()
    if not text:
        return None, (
            'printed nothing on stdout; a script tool prints one JSON object, {"result": ...} '
            'or {"error": "..."}'
        )
    candidates = [text]
    last = text.splitlines()[-1].strip()
    if last != text:
        candidates.append(last)
    for candidate in candidates:
        try:
            reply = json.loads(candidate)
        except ValueError:
            continue
        if not isinstance(reply, dict):
            return None, f"printed JSON that is not an object: {_shown(candidate)}"
        if "result" not in reply and "error" not in reply:
            return None, (
                f'printed a JSON object with neither "result" nor "error": {_shown(candidate)}'
            )
        return reply, None
    return None, (
        "printed something that is not JSON (the last line of stdout must be "
        f'{{"result": ...}} or {{"error": "..."}}): {_shown(text)}'
    )


def _shown(text: str) -> str:
    return repr(text[:_SHOWN_STDOUT] + ("…" if len(text) > _SHOWN_STDOUT else ""))


def _stderr_tail(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()][-_STDERR_LINES:]
    if not lines:
        return ""
    tail = "\n".join(lines)[-_STDERR_CHARS:]
    return f"; stderr ends with:\n{tail}"


def _size(kb: int) -> str:
    return f"{kb // 1024} MB" if kb % 1024 == 0 else f"{kb} KB"


def _limit_message(run: SandboxResult, limits: SandboxLimits) -> str:
    if run.limit == "output":
        stream = "stderr" if run.stderr_truncated and not run.stdout_truncated else "stdout"
        return f"wrote more than {_size(limits.output_kb)} to {stream}; stopped"
    if run.limit == "wall_time":
        return f"did not finish within {limits.wall_seconds:g} s; stopped"
    if run.limit == "cpu_time":
        return f"used more than {limits.cpu_seconds} s of CPU time; stopped"
    if run.limit == "memory":
        return f"ran out of memory (the limit is {limits.memory_mb} MB){_stderr_tail(run.stderr)}"
    if run.limit == "file_size":
        return f"wrote a file larger than {limits.file_size_mb} MB; stopped"
    return run.describe()


# -- binding a plugin's declared tool ----------------------------------------------------


def plugin_config(plugins: PluginHost, plugin: str, definition: ToolDefinition) -> dict[str, Any]:
    """What a script tool gets as ``config``: the values of its own ``configSchema``
    options and of its plugin's ``configOptions``, by short name (a plugin option wins a
    clash, as in :meth:`PluginHost.option_values`); secrets decrypted."""
    values = plugins.option_values(plugin)
    manifest = plugins.plugin(plugin).manifest
    names = [o.name for o in definition.config_schema] + [o.name for o in manifest.config_options]
    return {name: values.get(name) for name in dict.fromkeys(names)}


def network_granted(plugins: PluginHost, plugin: str) -> bool:
    """True only for a plugin that declares ``permissions.network`` and whose network
    the user granted when enabling it."""
    found = plugins.plugin(plugin)
    return found.manifest.permissions.network and found.network_granted


def bind_script_tool(
    entry: ToolEntry, plugins: PluginHost, status: SandboxStatus | None = None
) -> ToolEntry:
    """A plugin's script tool with the function that runs it, or unavailable and why:
    the sandbox cannot start on this machine (the tool never runs unsandboxed), or its
    command is not there. ``status``: the sandbox's (default: probed once per process)."""
    impl = entry.definition.implementation
    assert isinstance(impl, ScriptImpl) and entry.plugin is not None and entry.folder is not None
    status = status if status is not None else sandbox_status()
    if not status.available:
        reason = f"script tools run only in the sandbox, which cannot start here: {status.reason}"
        if status.fix:
            reason += f". {status.fix}"
        return replace(entry, available=False, unavailable_reason=reason)
    try:
        resolve_command(entry.id, impl, entry.folder)
    except ScriptToolError as exc:
        # The ToolManager and the Tools page name the tool already.
        return replace(entry, available=False, unavailable_reason=exc.detail)
    plugin, definition = entry.plugin, entry.definition
    tool = ScriptTool(
        tool_id=entry.id,
        impl=impl,
        folder=entry.folder,
        config=lambda: plugin_config(plugins, plugin, definition),
        network=lambda: network_granted(plugins, plugin),
    )
    return replace(entry, function=tool.call)


def request_line(arguments: Mapping[str, Any], config: Mapping[str, Any], tool: str) -> str:
    """The one line a script tool reads on stdin (without its newline)."""
    return json.dumps(
        {"arguments": dict(arguments), "config": dict(config), "tool": tool}, ensure_ascii=False
    )
