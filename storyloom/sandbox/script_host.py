"""Run a Lua or JavaScript script over plain data, contained, within limits.

:func:`run_script` is what the chat pipeline's ``chat:Script`` node calls: the script
sees one global, ``ctx``, a deep copy of the data, changes it (or returns a new one), and
gets back the final ``ctx`` as JSON-able Python. Nothing but data crosses: no host
function or object is reachable from a script, ``print`` is collected into
``"__output__"``.

The scripts run in :mod:`storyloom.sandbox.script_worker`, a separate ``python -I -S``
process, because a library call in C (a backtracking ``string.find``) ignores every
in-engine limit: past ``time_ms`` (plus a short grace) the host kills the worker with
everything it could have started, and the next call gets a fresh worker. At most
:data:`WARM_WORKERS` workers wait between calls; a call finding none idle starts one.

Where the process sandbox works (:func:`worker_isolation` says ``"bubblewrap"``), each
worker is long-lived in a bubblewrap sandbox of its own (:func:`start_sandboxed`): the
namespaces, uid, dropped capabilities, read-only system, minimal environment and no
network of a sandboxed run, with only the worker script and the two engines mounted
(read-only, under ``/worker``), its memory limit and a process limit. Elsewhere
(``"process"``) it is a plain process with an empty environment and its memory limit,
and the Lua and JavaScript runtimes are the only sandbox.

The pool is synchronous and guarded by a thread lock; :func:`run_script` runs each call
in a thread. That keeps the workers independent of any one event loop (the server's, a
test's), and a call's timeout is enforced by the thread even when the awaiting task is
cancelled.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from storyloom.core.errors import InvalidInput, Unavailable
from storyloom.sandbox.bwrap import sandbox_status
from storyloom.sandbox.limits import SandboxLimits
from storyloom.sandbox.process_sandbox import (
    Mount,
    SandboxedProcess,
    SandboxRequest,
    python_argv,
    start_sandboxed,
)

ScriptLanguage = Literal["lua", "javascript"]
ScriptLimitName = Literal["time", "memory", "instructions", "stack"]
WorkerIsolation = Literal["bubblewrap", "process"]

WORKER = Path(__file__).with_name("script_worker.py")
WARM_WORKERS = 2
"""Idle workers kept between calls (the machine this targets has two cores)."""
WORKER_MEMORY_MB = 512
"""RLIMIT_AS of a worker: the interpreter, both engines and one script's data."""
STARTUP_SECONDS = 30.0
"""How long a fresh worker may take to load its engines (a loaded laptop is slow)."""
MAX_REPLY_BYTES = 64 * 1024 * 1024
"""Largest reply line read from a worker; a longer one is refused."""
WORKER_INSIDE = "/worker/script_worker.py"
"""Where a sandboxed worker sees its script; the engines are under :data:`ENGINES_INSIDE`."""
ENGINES_INSIDE = "/worker/lib"
WORKER_PROCESSES = 4
"""A sandboxed worker's process limit: bwrap, its init and the worker (one thread)."""
WORKER_CPU_SECONDS = 100_000_000
"""A sandboxed worker's RLIMIT_CPU, over its whole life: in effect none (a script's time
is limited per call, by the worker and by the host)."""


class ScriptLimits(BaseModel):
    """What one script call may use.

    ``time_ms`` is enforced twice: inside the worker (Lua's instruction hook checks the
    CPU clock; quickjs's interrupt handler) so most runaways end with the worker alive,
    and by the host, which kills the worker a short grace after it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    time_ms: int = Field(default=1000, ge=1, le=60_000)
    """Wall clock per call; past it (plus a grace) the worker is killed and replaced."""
    memory_mb: int = Field(default=32, ge=1, le=256)
    """Lua's allocator limit (lupa ``max_memory``) / the quickjs runtime's memory limit."""
    instructions: int = Field(default=50_000_000, ge=1000)
    """Lua instructions, counted by a hook the script cannot reach (JavaScript: time only)."""
    stack_kb: int = Field(default=512, ge=16, le=8192)
    """quickjs's maximum stack size."""

    def grace_seconds(self) -> float:
        """How long past ``time_ms`` the host waits for the worker's own limit to act."""
        return max(0.2, self.time_ms / 4000)


DEFAULT_LIMITS = ScriptLimits()


class ScriptFailure(InvalidInput):
    """A script that does not parse, fails, returns something that is not JSON, or hits a limit.

    ``limit`` names the limit that stopped it, ``line`` the script's line when known.
    """

    def __init__(
        self,
        script: str,
        message: str,
        *,
        line: int | None = None,
        limit: ScriptLimitName | None = None,
    ) -> None:
        self.script = script
        self.message = message
        self.line = line
        self.limit: ScriptLimitName | None = limit
        text = f"script {script}: {message}"
        if line is not None:
            text += f" (line {line})"
        super().__init__(text)


class WorkerGone(Exception):
    """The worker's pipes closed before a reply: it died (or was killed).

    ``before`` is true when it was gone before it could read the request.
    """

    def __init__(self, *, before: bool) -> None:
        super().__init__("the script worker is gone")
        self.before = before


class WorkerBroken(Unavailable):
    """The worker cannot start: an engine is missing or broken (an installation problem)."""


def worker_isolation() -> WorkerIsolation:
    """What contains the script workers: ``"bubblewrap"`` when the process sandbox works
    here (each worker in a sandbox of its own), else ``"process"`` (a plain process with
    an empty environment; the Lua and JavaScript runtimes are then the only sandbox)."""
    return "bubblewrap" if sandbox_status().available else "process"


def worker_request() -> SandboxRequest:
    """A sandboxed worker: the worker script and the engines, read-only, nothing else."""
    mounts = [Mount(WORKER, WORKER_INSIDE)]
    mounts += [Mount(path, f"{ENGINES_INSIDE}/{path.name}") for path in engine_files()]
    return SandboxRequest(
        argv=python_argv(WORKER_INSIDE, str(WORKER_MEMORY_MB * 1024 * 1024), ENGINES_INSIDE),
        mounts=mounts,
        limits=SandboxLimits(
            cpu_seconds=WORKER_CPU_SECONDS,
            memory_mb=WORKER_MEMORY_MB,
            processes=WORKER_PROCESSES,
            scratch_mb=1,
        ),
        name="script worker",
    )


class Worker:
    """One ``script_worker.py`` process, used by one call at a time.

    In a bubblewrap sandbox of its own when :func:`worker_isolation` says so, else a
    plain process.
    """

    def __init__(self) -> None:
        self.sandboxed: SandboxedProcess | None = None
        if worker_isolation() == "bubblewrap":
            self.sandboxed = start_sandboxed(worker_request())
            self.process = self.sandboxed.process
            self.ready = False
            return
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-I",
                "-S",
                str(WORKER),
                str(WORKER_MEMORY_MB * 1024 * 1024),
                *engine_paths(),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            # Nothing of the server's environment (API keys) reaches the worker.
            env={},
            close_fds=True,
            # Its own process group, so a kill takes anything it could have started.
            start_new_session=True,
        )
        self.ready = False

    def alive(self) -> bool:
        return self.process.poll() is None

    def pid(self) -> int | None:
        """The worker's own process id (in a sandbox: not bwrap's); ``None`` once gone."""
        if self.sandboxed is not None:
            return self.sandboxed.program_pid(STARTUP_SECONDS)
        return self.process.pid

    def exchange(self, request: bytes, timeout: float) -> dict[str, Any] | None:
        """Send one request line and read the reply; ``None`` when ``timeout`` passed first.

        The clock starts once the worker has loaded its engines, so a fresh worker's
        start-up is not counted against the script. Raises :class:`WorkerGone` when the
        worker dies before it answers.
        """
        stdin = self.process.stdin
        assert stdin is not None
        if not self.ready:
            self.wait_ready()
        try:
            stdin.write(request)
            stdin.flush()
        except (BrokenPipeError, ValueError) as error:
            raise WorkerGone(before=True) from error
        line = self.read_line(time.monotonic() + timeout)
        if line is None:
            return None
        reply: dict[str, Any] = json.loads(line)
        return reply

    def wait_ready(self) -> None:
        """Wait for the worker's first line, which says its engines are loaded."""
        line = self.read_line(time.monotonic() + STARTUP_SECONDS, before=True)
        hello = json.loads(line) if line is not None else {}
        if not hello.get("ready"):
            self.kill()
            reason = hello.get("error") or f"it did not start within {STARTUP_SECONDS:.0f} s"
            raise WorkerBroken(f"the script engine cannot start: {reason}")
        self.ready = True

    def read_line(self, deadline: float, *, before: bool = False) -> bytes | None:
        """The worker's next line, or ``None`` at ``deadline``.

        Raises :class:`WorkerGone` at the end of its output (``before``: no request was
        running). A line longer than :data:`MAX_REPLY_BYTES` kills the worker and reads
        as a failure reply.
        """
        stdout = self.process.stdout
        assert stdout is not None
        fd = stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        chunks: list[bytes] = []
        size = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(left * 1000):
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                self.process.wait()
                raise WorkerGone(before=before)
            chunks.append(chunk)
            size += len(chunk)
            if chunk.endswith(b"\n"):
                return b"".join(chunks)
            if size > MAX_REPLY_BYTES:
                self.kill()
                too_big = f"the result is larger than {MAX_REPLY_BYTES // (1024 * 1024)} MB"
                reply = {"ok": False, "message": too_big, "line": None, "limit": None}
                return json.dumps(reply).encode()

    def kill(self) -> None:
        """End the worker and everything it could have started; wait for it."""
        if self.sandboxed is not None:
            self.sandboxed.kill()
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()

    def close(self) -> None:
        """Ask the worker to end (it exits at the end of its input), else kill it."""
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=1)
        self.kill()


_ENGINE_FILES: list[Path] | None = None


def engine_files() -> list[Path]:
    """The ``lupa`` package folder and the ``_quickjs`` extension file.

    Found without importing either, so the server pays nothing until a script runs.
    """
    global _ENGINE_FILES
    if _ENGINE_FILES is None:
        files: list[Path] = []
        for module in ("lupa", "_quickjs"):
            spec = importlib.util.find_spec(module)
            if spec is None or spec.origin is None:
                raise RuntimeError(f"{module} is not installed; the script engine needs it")
            origin = Path(spec.origin)
            files.append(origin.parent if origin.name == "__init__.py" else origin)
        _ENGINE_FILES = files
    return _ENGINE_FILES


def engine_paths() -> list[str]:
    """The folders holding ``lupa`` and ``_quickjs``: a plain worker's only ``sys.path``."""
    paths: list[str] = []
    for path in engine_files():
        if str(path.parent) not in paths:
            paths.append(str(path.parent))
    return paths


class WorkerPool:
    """At most ``size`` idle workers; every call checks one out, so one call per worker."""

    def __init__(self, size: int = WARM_WORKERS) -> None:
        self.size = size
        self.idle: list[Worker] = []
        self.lock = threading.Lock()

    def take(self) -> Worker:
        with self.lock:
            while self.idle:
                worker = self.idle.pop()
                if worker.alive():
                    return worker
                worker.kill()
        return Worker()

    def give_back(self, worker: Worker) -> None:
        with self.lock:
            if len(self.idle) < self.size and worker.alive():
                self.idle.append(worker)
                return
        worker.close()

    def replace(self, worker: Worker) -> None:
        """Kill ``worker`` and start a fresh one in its place, warming while it waits."""
        worker.kill()
        self.give_back(Worker())

    def call(self, request: bytes, timeout: float) -> dict[str, Any] | None:
        """One request's reply, or ``None`` when the worker ran past ``timeout`` (killed).

        A worker found dead before it took the request is replaced and the request sent
        once more; one that dies while running it is reported.
        """
        for attempt in range(2):
            worker = self.take()
            try:
                reply = worker.exchange(request, timeout)
            except WorkerGone as gone:
                self.replace(worker)
                if gone.before and attempt == 0:
                    continue
                return worker_death(worker.process.returncode)
            if reply is None:
                self.replace(worker)
                return None
            self.give_back(worker)
            return reply
        raise AssertionError("unreachable")

    def close(self) -> None:
        with self.lock:
            workers, self.idle = self.idle, []
        for worker in workers:
            worker.kill()


def worker_death(returncode: int | None) -> dict[str, Any]:
    """The reply for a worker that died while running a script."""
    if returncode == -signal.SIGALRM:
        # The worker's own backstop: the script ran far past its time limit.
        return {"ok": False, "message": "", "line": None, "limit": "time"}
    how = f"signal {-returncode}" if returncode and returncode < 0 else f"exit code {returncode}"
    message = f"the script engine's worker process stopped unexpectedly ({how})"
    return {"ok": False, "message": message, "line": None, "limit": None}


_POOL = WorkerPool()
atexit.register(_POOL.close)


def close_script_workers() -> None:
    """End the idle workers (the server's shutdown; tests). Later calls start new ones."""
    _POOL.close()


def idle_worker_pids() -> list[int]:
    """The process ids of the workers waiting now, the next to be used last (diagnostics).

    A sandboxed worker's is the worker's own, as the host sees it (not bwrap's).
    """
    with _POOL.lock:
        workers = list(_POOL.idle)
    return [pid for pid in (worker.pid() for worker in workers) if pid is not None]


def limit_message(limit: ScriptLimitName, limits: ScriptLimits) -> str:
    if limit == "time":
        return f"stopped by the time limit ({limits.time_ms} ms)"
    if limit == "memory":
        return f"stopped by the memory limit ({limits.memory_mb} MB)"
    if limit == "instructions":
        return f"stopped by the instruction limit ({limits.instructions:,} instructions)"
    return f"stopped by the stack limit ({limits.stack_kb} KB)"


def _run_in_worker(
    language: ScriptLanguage, code: str, data: dict[str, Any], name: str, limits: ScriptLimits
) -> dict[str, Any]:
    """:func:`run_script`'s work, in the calling thread: blocks until a worker answers."""
    if language not in ("lua", "javascript"):
        raise ScriptFailure(name, f"unknown script language {language!r} (lua or javascript)")
    header = json.dumps(
        {"language": language, "code": code, "name": name, "limits": limits.model_dump()},
        ensure_ascii=True,
    )
    try:
        # ASCII and no indent: the text has no newline, so it travels as one line.
        data_text = json.dumps(data, ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ScriptFailure(name, f"the data given to the script is not JSON: {error}") from None
    request = f"{header}\n{data_text}\n".encode("ascii")
    reply = _POOL.call(request, limits.time_ms / 1000 + limits.grace_seconds())
    if reply is None:
        raise ScriptFailure(name, limit_message("time", limits), limit="time")
    if not reply["ok"]:
        limit = reply["limit"]
        message = reply["message"] or limit_message(limit, limits)
        raise ScriptFailure(name, message, line=reply["line"], limit=limit)
    result: dict[str, Any] = reply["result"]
    if reply["output"]:
        result["__output__"] = reply["output"]
    return result


def run_script_blocking(
    language: ScriptLanguage,
    code: str,
    data: dict[str, Any],
    *,
    name: str,
    limits: ScriptLimits = DEFAULT_LIMITS,
) -> dict[str, Any]:
    """:func:`run_script` in the calling thread, for a caller that is not async (or is
    already in a worker thread): blocks until the worker answers, at most the time limit
    and its grace."""
    return _run_in_worker(language, code, data, name, limits)


async def run_script(
    language: ScriptLanguage,
    code: str,
    data: dict[str, Any],
    *,
    name: str,
    limits: ScriptLimits = DEFAULT_LIMITS,
) -> dict[str, Any]:
    """Run ``code`` with the global ``ctx`` = a deep copy of ``data``; the final ``ctx``.

    The script changes ``ctx`` in place, assigns a new one, or returns a new
    table/object, which replaces it. The result is JSON-able Python; ``"__output__"``
    holds what the script printed (at most 16 KB), when it printed anything. ``name``
    names the script in messages (and is Lua's chunk name).

    What a script has, in a fresh Lua state or JavaScript context per call (nothing one
    call changes reaches the next):

    - Lua 5.4: the base functions (no ``load``, ``dofile``, ``require``,
      ``collectgarbage``; ``setmetatable`` refuses ``__gc``), ``coroutine``, ``math``
      (``math.random`` seeded from ``data["seed"]``, else 0), ``string`` (no ``dump``),
      ``table``, ``utf8`` and ``print``. No ``debug``, ``os``, ``io``, ``package``.
    - JavaScript (quickjs-ng): the language's built-ins, ``print`` and ``console.log``;
      no modules, no timers, no host functions. Promise jobs run before ``ctx`` is read.

    How values come back: null in the data is nil in Lua. A Lua table whose keys are
    exactly 1..n is a list; an empty table is a list where the input had a list, else an
    object; where the input had a list, positive integer keys make a list with null in
    the holes; any other table is an object (integer keys as strings); keys the input
    had as null and the script left nil come back as null. In JavaScript a property set
    to undefined is left out. Functions, dates, class instances, NaN, cycles and the
    like are refused, naming where they are (``ctx.blocks[2].hook``).

    Raises :class:`ScriptFailure` for a syntax or runtime error (message and line), a
    result that is not JSON data, or a limit (``limit`` says which: ``instructions``
    and ``time`` for runaways, ``memory``, ``stack`` for JavaScript recursion).
    """
    return await asyncio.to_thread(_run_in_worker, language, code, data, name, limits)
