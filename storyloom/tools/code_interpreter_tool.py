"""The built-in tool ``CodeInterpreter:execute``: run Python, JavaScript or Node.js in the
sandbox.

The result is a :class:`~storyloom.sandbox.code_interpreter.CodeRunResult` as a JSON
object. A failure of the code (an exception, a syntax error, a limit) is a normal result
with ``error`` set, so the model reads it and tries again; a missing sandbox fails the
call (code never runs unsandboxed).

A call made within an agent run (the caller's ``run_id`` set) shares one scratch folder
with the run's other calls: it persists in ``<data dir>/sandbox/runs/<run>/``, written by
storyloom from the run's report, never by the sandbox; a run's folder untouched for
:data:`RUN_SCRATCH_DAYS` days is deleted. Any other call starts with an empty scratch that
is gone afterwards.

The tool needs the data directory, which a call's context does not carry, so it is
provided by a :class:`CodeInterpreterTools` object made for one data directory and
registered with the plugin host next to the other built-in tools.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import shutil
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from storyloom.core.plugin_markers import hookimpl
from storyloom.sandbox.code_interpreter import DEFAULT_LIMITS, CodeLanguage, execute_code
from storyloom.tools.builtin_tools import parameters_of
from storyloom.tools.tool_definition import ServiceTool
from storyloom.tools.tool_manager import ToolCallContext

TOOL_ID = "CodeInterpreter:execute"
RUNS_FOLDER = ("sandbox", "runs")
RUN_SCRATCH_DAYS = 7
"""A run's scratch untouched this long is deleted (the next kept scratch's call does it)."""
DEFAULT_TIMEOUT_S = 10.0
MAX_TIMEOUT_S = 60.0

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


LANGUAGE_DESCRIPTION = (
    "python (standard library only); javascript: quickjs-ng (ES2023), fast to start, no "
    "require, process, fs or Buffer; nodejs: Node.js with its built-in modules through "
    "require (fs, path, crypto, ...), no npm packages, no network. console.log prints."
)
"""Seed 003 §4.3 names Node.js: ``nodejs`` is the machine's node in the sandbox;
``javascript`` is quickjs-ng, which starts in milliseconds (docs/tools.md §6.3)."""


class CodeInterpreterParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    language: CodeLanguage = Field(description=LANGUAGE_DESCRIPTION)
    code: str = Field(
        min_length=1,
        description=(
            "The program. Python: the value of a final expression is returned, as in a "
            "notebook. JavaScript and Node.js: the script's completion value (Node.js: a "
            "promise is awaited); console.log prints."
        ),
    )
    timeout_s: float = Field(
        default=DEFAULT_TIMEOUT_S,
        ge=1,
        le=MAX_TIMEOUT_S,
        description="Seconds the code may run (wall clock)",
    )


def run_folder_name(run_id: str) -> str:
    """A folder name for ``run_id``: its safe characters, plus a hash so two ids that
    differ only in unsafe characters never share a folder."""
    readable = _UNSAFE.sub("_", run_id).strip("._")[:64] or "run"
    digest = hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{readable}-{digest}"


def run_scratch(home: Path, run_id: str) -> Path:
    """Where the scratch of the agent run ``run_id`` persists."""
    return home.joinpath(*RUNS_FOLDER, run_folder_name(run_id))


def prune_run_scratches(runs: Path, *, keep: Path, max_age_s: float) -> None:
    """Delete the run scratch folders under ``runs`` untouched for ``max_age_s`` (each
    call that keeps files touches its run's folder), all but ``keep``."""
    if not runs.is_dir():
        return
    oldest = time.time() - max_age_s
    for folder in runs.iterdir():
        try:
            stale = folder != keep and folder.lstat().st_mtime < oldest
        except OSError:
            continue
        if stale:
            shutil.rmtree(folder, ignore_errors=True)


def code_interpreter_tool(home: Path | None) -> ServiceTool:
    """The tool, keeping per-run scratch folders under ``home`` (None: never kept)."""

    async def execute(arguments: dict[str, Any], ctx: ToolCallContext) -> dict[str, Any]:
        params = CodeInterpreterParams.model_validate(arguments)
        run_id = ctx.caller.run_id
        scratch = run_scratch(home, run_id) if home is not None and run_id else None
        if scratch is not None:
            await asyncio.to_thread(
                prune_run_scratches,
                scratch.parent,
                keep=scratch,
                max_age_s=RUN_SCRATCH_DAYS * 86400,
            )
        limits = DEFAULT_LIMITS.model_copy(
            update={
                "wall_seconds": params.timeout_s,
                # A busy loop meets the wall-time limit first; threads may meet this one.
                "cpu_seconds": math.ceil(params.timeout_s) + 1,
            }
        )
        result = await execute_code(
            params.language, params.code, scratch=scratch, limits=limits, name=TOOL_ID
        )
        return result.model_dump(mode="json")

    return ServiceTool.of(
        TOOL_ID,
        execute,
        description=(
            "Run Python, JavaScript (quickjs-ng) or Node.js (built-in modules, no npm) in an "
            "isolated sandbox (no network, no host files) "
            "and get stdout, stderr, the value of the last expression, the files written "
            "to the working folder and any error with its line. Within one agent run the "
            "working folder persists between calls."
        ),
        parameters=parameters_of(CodeInterpreterParams),
        display_name="Code interpreter",
    )


class CodeInterpreterTools:
    """``storyloom_tools`` for one data directory: register an instance with the plugin
    host beside :mod:`storyloom.tools.builtin_tools`."""

    def __init__(self, home: Path | None) -> None:
        self.home = home
        self.tool = code_interpreter_tool(home)

    @hookimpl
    def storyloom_tools(self) -> list[ServiceTool]:
        return [self.tool]
