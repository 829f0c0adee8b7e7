"""The CodeInterpreter: run a piece of Python, JavaScript or Node.js in the sandbox and say
what it printed, what its last expression was, which files it wrote and what stopped it.

One call is one sandboxed run of :mod:`storyloom.sandbox.interpreter_runner` (the
sandbox's Python, ``-I -S``; ``javascript`` through the ``_quickjs`` extension mounted
read-only; ``nodejs`` as the host's Node.js, bound read-only and started by the runner
with :data:`NODE_BOOT_HOST`, under RLIMIT_DATA instead of RLIMIT_AS). A failure of the
code itself (an exception, a syntax error, a limit) is a
normal :class:`CodeRunResult` with ``error`` set, for the model to read and fix; only a
missing sandbox raises (:class:`~storyloom.sandbox.bwrap.SandboxUnavailable`): code never
runs unsandboxed.

A scratch folder may persist between calls (one agent run's calls share it): the host
folder given as ``scratch`` holds the files of the last call, mounted read-only into
the next one and copied into its ``/scratch``. After the call the host writes the
files the runner reported into a new version folder and swaps a ``current`` symlink to
it, so a crash leaves the old files or the new ones, never a mix. Nothing of the host
is ever writable from the sandbox; the report is untrusted data and every name in it is
checked before a byte is written.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import importlib.util
import marshal
import math
import os
import shutil
import tempfile
import uuid
import weakref
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from storyloom.core.errors import InvalidInput, Unavailable
from storyloom.sandbox.limits import LimitName, SandboxLimits
from storyloom.sandbox.node_binary import NodeBinary, NodeMissing, find_node
from storyloom.sandbox.process_sandbox import (
    Mount,
    SandboxRequest,
    SandboxResult,
    python_argv,
    run_sandboxed,
)

CodeLanguage = Literal["python", "javascript", "nodejs"]
LANGUAGES: tuple[CodeLanguage, ...] = ("python", "javascript", "nodejs")

RUNNER_HOST = Path(__file__).with_name("interpreter_runner.py")
RUNNER_INSIDE = "/interpreter/runner.py"
PYLIB_INSIDE = "/interpreter/pylib"
SEED_INSIDE = "/interpreter/seed"
NODE_BOOT_HOST = Path(__file__).with_name("node_boot.js")
NODE_BOOT_INSIDE = "/interpreter/node_boot.js"

DEFAULT_LIMITS = SandboxLimits(
    wall_seconds=10.0, cpu_seconds=11, memory_mb=512, scratch_mb=32, output_kb=64
)
"""A call's limits unless told otherwise. ``wall_seconds`` is the code's own time;
``output_kb`` caps what of the code's stdout and of its stderr is kept (the rest is cut,
the code runs on)."""

REPORT_GRACE_S = 5.0
"""Sandbox time beyond the code's: starting, restoring the scratch, the report."""
INLINE_TOTAL_KB = 64
"""What the runner inlines of small text files, in all (its ``INLINE_TOTAL``)."""
PERSIST_FILES_MAX = 500
# Caps on a persisted file's name: PATH_MAX, and a depth far past any real scratch.
NAME_BYTES_MAX = 4096
NAME_DEPTH_MAX = 64
CURRENT = "current"
VERSION_PREFIX = "v-"
STDERR_TAIL = 4000


class ScratchFile(BaseModel):
    """A file the code left in its scratch folder; ``text`` when small UTF-8 text."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(description="Path relative to the scratch folder")
    size: int = Field(ge=0, description="Bytes")
    text: str | None = Field(default=None, description="The content, for small text files")


class CodeRunResult(BaseModel):
    """What one piece of code did. ``error`` set means it failed (an exception with its
    line, a syntax error, or a limit that stopped it); ``limit`` names that limit."""

    language: CodeLanguage
    stdout: str = ""
    stderr: str = ""
    value: str | None = Field(
        default=None,
        description="repr (Python) or JSON (JavaScript, Node.js) of the last expression, if any",
    )
    files: list[ScratchFile] = Field(default_factory=list)
    duration_ms: float = 0.0
    limit: LimitName | None = None
    exit_code: int | None = None
    error: str | None = None


class _Content(BaseModel):
    name: str
    data: str


class _Report(BaseModel):
    """The runner's last line (JSON, untrusted), as the host accepts it."""

    model_config = ConfigDict(extra="ignore")

    stdout: str = ""
    stderr: str = ""
    value: str | None = None
    error: str | None = None
    exit_code: int | None = None
    limit: LimitName | None = None
    files: list[ScratchFile] = Field(default_factory=list)
    contents: list[_Content] | None = None


_scratch_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()


async def execute_code(
    language: CodeLanguage,
    code: str,
    *,
    scratch: Path | None = None,
    limits: SandboxLimits | None = None,
    name: str = "CodeInterpreter",
) -> CodeRunResult:
    """Run ``code`` in a fresh sandbox within ``limits`` (default :data:`DEFAULT_LIMITS`).

    ``scratch``: a host folder that keeps the scratch between calls (created when
    missing); ``None``: a fresh, empty scratch that is gone after the call. Calls on the
    same folder take turns. Raises :class:`SandboxUnavailable` when no sandbox can be
    made, :class:`InvalidInput` for an unknown language.
    """
    if language not in LANGUAGES:
        raise InvalidInput(
            f"{name}: unknown language {language!r} (use python, javascript or nodejs)"
        )
    limits = limits or DEFAULT_LIMITS
    if scratch is None:
        return await _execute(language, code, None, limits, name)
    key = str(scratch)
    lock = _scratch_locks.get(key)
    if lock is None:
        lock = _scratch_locks[key] = asyncio.Lock()
    async with lock:
        return await _execute(language, code, scratch, limits, name)


async def _execute(
    language: CodeLanguage,
    code: str,
    scratch: Path | None,
    limits: SandboxLimits,
    name: str,
) -> CodeRunResult:
    persist = scratch is not None
    seed = _current_version(scratch) if scratch is not None else None
    mounts = [Mount(RUNNER_HOST, RUNNER_INSIDE)]
    node_path = ""
    if language == "javascript":
        mounts.append(_quickjs_mount())
    elif language == "nodejs":
        node = _node()
        node_path = node.path
        mounts += [*node.mounts, Mount(NODE_BOOT_HOST, NODE_BOOT_INSIDE)]
    if seed is not None:
        mounts.append(Mount(seed, SEED_INSIDE))
    request = {
        "language": language,
        "code": code,
        "timeout_s": limits.wall_seconds,
        "output_bytes": limits.output_kb * 1024,
        "js_memory_mb": _js_memory_mb(limits),
        "node": node_path,
        "seed": seed is not None,
        "persist": persist,
    }
    sandbox_limits = limits.model_copy(
        update={
            "wall_seconds": limits.wall_seconds + REPORT_GRACE_S,
            "output_kb": _report_kb(limits, persist=persist),
        }
    )
    result = await run_sandboxed(
        SandboxRequest(
            argv=python_argv(RUNNER_INSIDE),
            mounts=mounts,
            # marshal: the runner reads it without importing json (milliseconds per call);
            # the same interpreter writes and reads it, and only the host writes it.
            stdin=marshal.dumps(request),
            limits=sandbox_limits,
            name=name,
            address_space_limit=False if language == "nodejs" else None,
        )
    )
    report = _parse_report(result)
    if report is None:
        return _without_report(language, result, limits)
    limit = result.limit or report.limit
    error = _limit_error(limit, limits, language, report.error) if limit else report.error
    saved = True
    if scratch is not None and report.contents is not None:
        try:
            await asyncio.to_thread(_save_scratch, scratch, report.contents, limits)
        except (ScratchNotSaved, OSError, RecursionError, ValueError) as exc:
            # What the code printed stands; its files are not kept (the scratch stays as
            # it was before the call).
            saved = False
            error = f"the scratch was not saved: {_cause(exc)}"
    return CodeRunResult(
        language=language,
        stdout=report.stdout,
        stderr=report.stderr,
        value=report.value if saved else None,
        files=report.files if saved else [],
        duration_ms=result.duration_ms,
        limit=limit,
        exit_code=report.exit_code,
        error=error,
    )


def _cause(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "a reported file name is nested too deep to write"
    return str(exc) or type(exc).__name__


def _js_memory_mb(limits: SandboxLimits) -> int:
    # The JavaScript heap (quickjs's, or V8's old space) gets half the process's memory;
    # the interpreter needs the rest.
    return max(16, limits.memory_mb // 2)


def _report_kb(limits: SandboxLimits, *, persist: bool) -> int:
    """The sandbox's stdout cap: room for the whole report. JSON may escape a byte of
    output into six; persisted files come base64-encoded (4 bytes per 3)."""
    texts = 6 * (2 * limits.output_kb + INLINE_TOTAL_KB) + 128
    if not persist:
        return texts
    return texts + math.ceil(limits.scratch_mb * 1024 * 4 / 3) + 256


def _node() -> NodeBinary:
    try:
        return find_node()
    except NodeMissing as exc:
        raise Unavailable(f"nodejs needs Node.js on the machine storyloom runs on: {exc}") from None


def _quickjs_mount() -> Mount:
    spec = importlib.util.find_spec("_quickjs")
    if spec is None or spec.origin is None:
        raise Unavailable(
            "JavaScript needs the quickjs-ng package (its _quickjs extension); reinstall "
            "storyloom's dependencies"
        )
    origin = Path(spec.origin)
    return Mount(origin, f"{PYLIB_INSIDE}/{origin.name}")


def _parse_report(result: SandboxResult) -> _Report | None:
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    if not lines or result.stdout_truncated:
        return None
    try:
        return _Report.model_validate_json(lines[-1])
    except ValidationError:
        return None


def _without_report(
    language: CodeLanguage, result: SandboxResult, limits: SandboxLimits
) -> CodeRunResult:
    """The runner was stopped (or stopped itself) before it could report."""
    if result.limit == "output":
        error = "stopped: the code's files and output were too large to report"
    elif result.limit is not None:
        error = _limit_error(result.limit, limits, language, None)
    else:
        error = f"the interpreter ended without a report ({result.describe()})"
    return CodeRunResult(
        language=language,
        stderr=result.stderr[-STDERR_TAIL:],
        duration_ms=result.duration_ms,
        limit=result.limit,
        exit_code=result.exit_code,
        error=error,
    )


def _limit_error(
    limit: LimitName, limits: SandboxLimits, language: CodeLanguage, error: str | None
) -> str:
    memory_mb = limits.memory_mb if language == "python" else _js_memory_mb(limits)
    what = {
        "wall_time": f"the {limits.wall_seconds:g} s wall-time limit",
        "cpu_time": f"the {limits.cpu_seconds} s CPU-time limit",
        "memory": f"the {memory_mb} MB memory limit",
        "output": f"the {limits.output_kb} KB output limit",
        "file_size": f"the {limits.file_size_mb} MB file-size limit",
    }[limit]
    return f"stopped: {what}" + (f"; {error}" if error else "")


# -- the persistent scratch ----------------------------------------------------------------


def _current_version(folder: Path) -> Path | None:
    """The version folder holding the last call's files, if any."""
    link = folder / CURRENT
    if not link.is_symlink():
        return None
    target = link.resolve()
    return target if target.is_dir() and target.parent == folder.resolve() else None


class ScratchNotSaved(Exception):
    """A reported file the scratch cannot hold; the message names it and why."""


def _safe_name(name: str) -> PurePosixPath | None:
    """``name`` as a relative path that stays inside the folder, or None.

    Raises :class:`ScratchNotSaved` past the caps on a name (the runner only reports what
    a real tmpfs held, so only a forged report has such names).
    """
    if not name or "\x00" in name or "\\" in name:
        return None
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError:
        return None
    shown = repr(name[:60] + ("…" if len(name) > 60 else ""))
    if len(encoded) > NAME_BYTES_MAX:
        raise ScratchNotSaved(
            f"the file name {shown} is {len(encoded):,} bytes long (at most {NAME_BYTES_MAX:,})"
        )
    path = PurePosixPath(name)
    if len(path.parts) > NAME_DEPTH_MAX:
        raise ScratchNotSaved(
            f"the file {shown} is {len(path.parts):,} folders deep (at most {NAME_DEPTH_MAX})"
        )
    if path.is_absolute() or any(part in ("", ".", "..") for part in path.parts):
        return None
    return path


def _save_scratch(folder: Path, contents: list[_Content], limits: SandboxLimits) -> None:
    """Write the reported files as the folder's new version, then drop the old ones."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    version = Path(tempfile.mkdtemp(prefix=VERSION_PREFIX, dir=folder))
    budget = limits.scratch_mb * 1024 * 1024
    try:
        for item in contents[:PERSIST_FILES_MAX]:
            relative = _safe_name(item.name)
            if relative is None:
                continue
            try:
                data = base64.b64decode(item.data, validate=True)
            except (binascii.Error, ValueError):
                continue
            budget -= len(data)
            if budget < 0:
                break
            target = version.joinpath(*relative.parts)
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            except OSError:  # a clash such as file "a" and file "a/b"
                continue
        link = folder / f".{CURRENT}-{uuid.uuid4().hex}"
        os.symlink(version.name, link)
        os.replace(link, folder / CURRENT)
    except BaseException:
        shutil.rmtree(version, ignore_errors=True)
        raise
    for old in folder.iterdir():
        if old.name != version.name and old.name != CURRENT:
            if old.is_symlink() or old.is_file():
                with contextlib.suppress(OSError):
                    old.unlink()
            else:
                shutil.rmtree(old, ignore_errors=True)
