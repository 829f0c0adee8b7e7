"""Run one program in a fresh bubblewrap sandbox, within limits, and say how it ended.

:func:`run_sandboxed` builds the sandbox (see :mod:`storyloom.sandbox.bwrap` for what it
holds), starts bwrap (:mod:`storyloom.sandbox.spawn`) with the in-sandbox launcher
(:mod:`storyloom.sandbox.launch`) that sets the resource limits and becomes the program,
feeds stdin, collects stdout and stderr up to their caps, and enforces the wall clock.
It never runs anything unsandboxed: where no sandbox can be made it raises
:class:`SandboxUnavailable`. :func:`start_sandboxed` starts a long-lived program in the
same kind of sandbox and hands back its pipes (:class:`SandboxedProcess`).

The pipes and the exit are watched on the running event loop directly (non-blocking
fds, a pidfd), not through ``asyncio.subprocess``, because the warm stub a run starts
from was made outside any particular event loop.

The process tree: bwrap (in its own process group) -> the pid namespace's init (bwrap
again) -> the program. Killing that init makes the kernel kill every process in the
namespace, and bwrap exits only once its init is gone, so when bwrap has been reaped no
process of the run is left; as root the run's pids cgroup is also checked empty.

Which limit stopped a run (``SandboxResult.limit``):

- ``wall_time``, ``output``: this module killed it, so these are certain;
- ``cpu_time``: killed by SIGXCPU, or by a SIGKILL nobody here sent after at least
  ``cpu_seconds`` had passed (RLIMIT_CPU's hard limit, a second after the soft one);
- ``file_size``: killed by SIGXFSZ (a C program past RLIMIT_FSIZE), or failed with
  "File too large" (EFBIG) in stderr (Python ignores SIGXFSZ and raises instead);
- ``memory``: where the run has a memory cgroup, the kernel's OOM killer killed one of
  its processes for the cgroup's limit and the run did not exit 0; else (and also) it
  failed with a known out-of-memory message in the end of stderr
  ("MemoryError", "Cannot allocate memory", "out of memory", "bad_alloc", V8's "heap
  limit"); allocation failure has no signal of its own, so this is a heuristic.

bwrap reports a program killed by signal N as exit code 128+N; such codes are read as
that signal (a program that itself exits 129..192 is misread as signalled).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from storyloom.core.errors import InvalidInput
from storyloom.sandbox.bwrap import (
    SANDBOX_PATH,
    DataFds,
    SandboxUnavailable,
    base_interpreter,
    bwrap_options,
    require_sandbox,
    sandbox_status,
)
from storyloom.sandbox.limits import LimitName, SandboxLimits
from storyloom.sandbox.run_cgroup import (
    ENTER_FAILED,
    Hierarchies,
    RunCgroup,
    find_hierarchies,
    remove_stale,
)
from storyloom.sandbox.spawn import Spawned, spawn_direct, spawn_in_cgroup, warm_up

PYTHON_INSIDE: str = base_interpreter()
"""The sandbox's Python: the host's base interpreter, bound read-only at the same path."""

MIB = 1024 * 1024
READ_CHUNK = 64 * 1024
# After a kill, how long to wait for bwrap to report its init gone before killing its
# whole process group (and the cgroup) as well.
REAP_GRACE_SECONDS = 5.0
MEMORY_MARKERS = (
    "MemoryError",
    "Cannot allocate memory",
    "out of memory",
    "bad_alloc",
    "heap limit",
)
FILE_SIZE_MARKERS = ("File too large",)
MARKER_TAIL_CHARS = 4096
# Where a request's mounts may not go: the sandbox's own folders, and the trees whose
# read-only covers (/proc/sys) and devices must stay as built.
RESERVED_INSIDE = ("/", "/tmp", "/scratch")
RESERVED_TREES = ("/proc", "/dev", "/sandbox")


def python_argv(*args: str) -> list[str]:
    """``[PYTHON_INSIDE, "-I", "-S", *args]``: the sandbox's Python, isolated, no site."""
    return [PYTHON_INSIDE, "-I", "-S", *args]


@dataclass(frozen=True)
class Mount:
    """A host file or folder visible inside the sandbox, always read-only.

    Nothing on the host is ever writable from a sandbox; output goes to stdout or is
    read back from ``/scratch`` by the program itself.
    """

    host: Path
    inside: str


@dataclass(frozen=True)
class SandboxRequest:
    """One program to run sandboxed, and what it may see and use."""

    argv: Sequence[str]
    """The command, paths as seen inside; ``argv[0]`` is looked up on the sandbox's PATH."""
    mounts: Sequence[Mount] = ()
    """Read-only mounts beyond the system ones."""
    stdin: bytes = b""
    cwd: str = "/scratch"
    network: bool = False
    """True: share the host's network, with its resolver and certificate files. The
    program then also reaches the host's loopback services and abstract unix sockets:
    only for code the user granted the network to."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Added to the minimal environment (PATH, HOME=/scratch, TMPDIR=/tmp, LANG=C.UTF-8)."""
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    name: str = ""
    """Who runs it, for messages: "tool BilibiliFetch:getSubtitle", "CodeInterpreter"."""
    address_space_limit: bool | None = None
    """How ``limits.memory_mb`` is set: None decides by the program (RLIMIT_AS for the
    sandbox's Python, RLIMIT_DATA for any other); False is RLIMIT_DATA even for Python,
    for a Python that starts a JIT runtime (the CodeInterpreter's ``nodejs``: V8 reserves
    address space it never touches, which RLIMIT_AS would refuse)."""


class SandboxResult(BaseModel):
    """How a sandboxed run ended, and what it wrote."""

    exit_code: int | None
    """The program's exit code; ``None`` when a signal killed it."""
    signal: int | None
    stdout: str
    """Decoded as UTF-8 (bad bytes replaced), at most ``output_kb``."""
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    duration_ms: float
    limit: LimitName | None
    """Which limit stopped it, if one did (see the module's notes on how it is told)."""
    limit_value: str = ""
    """The limit's setting in words ("10 s", "1024 KB"), for :meth:`describe`."""

    @property
    def ok(self) -> bool:
        """Exit code 0 and no limit hit."""
        return self.exit_code == 0 and self.limit is None

    def describe(self) -> str:
        """How it ended, in words: "exit code 1", "stopped by the wall_time limit (10 s)"."""
        if self.limit is not None:
            value = f" ({self.limit_value})" if self.limit_value else ""
            return f"stopped by the {self.limit} limit{value}"
        if self.signal is not None:
            try:
                name = signal.Signals(self.signal).name
            except ValueError:
                name = f"signal {self.signal}"
            return f"killed by {name}"
        return f"exit code {self.exit_code}"


async def run_sandboxed(request: SandboxRequest) -> SandboxResult:
    """Run ``request`` in a fresh sandbox and wait until every process of it is gone.

    Raises :class:`SandboxUnavailable` when no sandbox can be made here (never runs the
    program unsandboxed) and :class:`InvalidInput` for a bad request (a mount whose host
    path is missing, a relative path). Cancelling the call kills the whole run first.
    """
    require_sandbox()
    _check(request)
    run = _Run(request)
    return await run.execute()


class SandboxedProcess:
    """A long-lived program in its own sandbox, started by :func:`start_sandboxed`.

    ``stdin`` and ``stdout`` are the program's pipes (``stderr`` too; it should write
    little there, or the pipe fills once nobody reads it). Nothing enforces the request's
    ``wall_seconds`` or ``output_kb``: the owner decides when to :meth:`kill` it.
    """

    def __init__(self, request: SandboxRequest, spawned: Spawned) -> None:
        self.request = request
        self.process: subprocess.Popen[bytes] = spawned.process
        self._cgroup = spawned.cgroup
        self._program: int | None = None
        assert self.process.stdin and self.process.stdout and self.process.stderr
        self.stdin = self.process.stdin
        self.stdout = self.process.stdout
        self.stderr = self.process.stderr

    def alive(self) -> bool:
        """Whether bwrap (and so the sandbox) is still running."""
        return self.process.poll() is None

    def program_pid(self, timeout: float = 10.0) -> int | None:
        """The program's process id as the host sees it (bwrap's init's child), waiting
        up to ``timeout`` while the sandbox is being built; ``None`` once it is gone."""
        if self._program is None:
            deadline = time.monotonic() + timeout
            delay = 0.001
            while self.alive():
                programs = [pid for init in _children(self.process.pid) for pid in _children(init)]
                if programs:
                    self._program = programs[0]
                    break
                if time.monotonic() > deadline:
                    return None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
        return self._program

    def kill(self) -> None:
        """Kill every process of the sandbox and wait until none is left (blocking)."""
        process = self.process
        if process.poll() is None:
            inits = _children(process.pid)
            for init in inits:
                # The namespace's init: the kernel takes every process in it along.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(init, signal.SIGKILL)
            try:
                process.wait(timeout=REAP_GRACE_SECONDS if inits else 0)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
                if self._cgroup is not None:
                    self._cgroup.kill_all()
                process.wait()
        for stream in (self.stdin, self.stdout, self.stderr):
            with contextlib.suppress(OSError):
                stream.close()
        cgroup, self._cgroup = self._cgroup, None
        if cgroup is not None:
            deadline = time.monotonic() + REAP_GRACE_SECONDS
            while cgroup.pids() and time.monotonic() < deadline:
                cgroup.kill_all()
                time.sleep(0.001)
            # Should it still be busy, it is left to remove_stale.
            with contextlib.suppress(OSError):
                cgroup.remove()


def start_sandboxed(request: SandboxRequest) -> SandboxedProcess:
    """Start ``request`` in a fresh sandbox, as :func:`run_sandboxed` builds it, and
    return at once with its pipes; ``request.stdin`` is ignored (write to ``stdin``).

    For a long-lived program (the script worker): the same namespaces, mounts and
    resource limits as a run (``cpu_seconds`` counts over its whole life), with no
    wall clock or output cap. Blocking (it only starts bwrap: a few milliseconds).
    Raises as :func:`run_sandboxed` does.

    bwrap's ``--die-with-parent`` kills the sandbox when the *thread* that started it
    ends, so bwrap is started from a thread of this module's that lives as long as the
    process, never from the caller's (often a short-lived worker thread).
    """
    require_sandbox()
    _check(request)
    return _starter().submit(_start, request).result()


_starter_executor: concurrent.futures.ThreadPoolExecutor | None = None
_starter_lock = threading.Lock()


def _starter() -> concurrent.futures.ThreadPoolExecutor:
    """The one thread that starts long-lived sandboxes (made on first use)."""
    global _starter_executor
    with _starter_lock:
        if _starter_executor is None:
            _starter_executor = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix="storyloom-sandbox-start"
            )
        return _starter_executor


def _forget_starter() -> None:
    # A forked child has none of its parent's threads.
    global _starter_executor, _starter_lock
    _starter_executor = None
    _starter_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_starter)


def _start(request: SandboxRequest) -> SandboxedProcess:
    spawned = _Run(request).spawn(fresh=True)
    sandboxed = SandboxedProcess(request, spawned)
    feeds = spawned.feeds
    try:
        while feeds:
            fd, data = feeds.pop(0)
            try:
                # Small (the options, the launcher's request): each fits its pipe.
                os.write(fd, data)
            finally:
                os.close(fd)
    except BaseException:
        for fd, _ in feeds:
            with contextlib.suppress(OSError):
                os.close(fd)
        sandboxed.kill()
        raise
    return sandboxed


def _check(request: SandboxRequest) -> None:
    if not request.argv:
        raise InvalidInput(f"{_who(request)}: nothing to run (empty argv)")
    if not request.cwd.startswith("/"):
        raise InvalidInput(
            f"{_who(request)}: the working directory {request.cwd!r} is not absolute"
        )
    for mount in request.mounts:
        if not _mountable_at(mount.inside):
            raise InvalidInput(
                f"{_who(request)}: cannot mount at {mount.inside!r} (an absolute path is needed, "
                f"not {', '.join(RESERVED_INSIDE)} nor anything under {', '.join(RESERVED_TREES)})"
            )
        if not mount.host.exists():
            raise InvalidInput(f"{_who(request)}: the path to mount, {mount.host}, does not exist")


def _mountable_at(inside: str) -> bool:
    if not inside.startswith("/") or ".." in Path(inside).parts:
        return False
    normal = os.path.normpath(inside)
    if normal in RESERVED_INSIDE:
        return False
    return not any(normal == tree or normal.startswith(tree + "/") for tree in RESERVED_TREES)


def _who(request: SandboxRequest) -> str:
    return request.name or "sandboxed run"


def _limits_value(limit: LimitName, limits: SandboxLimits) -> str:
    return {
        "wall_time": f"{limits.wall_seconds:g} s",
        "cpu_time": f"{limits.cpu_seconds} s of CPU",
        "memory": f"{limits.memory_mb} MB",
        "output": f"{limits.output_kb} KB",
        "file_size": f"{limits.file_size_mb} MB per file",
    }[limit]


@functools.cache
def _cgroup_hierarchy() -> Hierarchies:
    found = find_hierarchies()
    if found is None:
        raise SandboxUnavailable("no writable pids cgroup to limit the sandbox's processes as root")
    remove_stale(found)
    return found


class _Capture:
    """One output stream, kept up to its cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.chunks: list[bytes] = []
        self.size = 0
        self.truncated = False

    def add(self, chunk: bytes) -> bool:
        """Keep what fits; False once the stream went past its cap."""
        room = self.cap - self.size
        if len(chunk) > room:
            if room > 0:
                self.chunks.append(chunk[:room])
                self.size += room
            self.truncated = True
            return False
        self.chunks.append(chunk)
        self.size += len(chunk)
        return True

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", errors="replace")


class _Run:
    """One sandboxed run: start, supervise, kill, reap, classify."""

    def __init__(self, request: SandboxRequest) -> None:
        self.request = request
        self.limits = request.limits
        self.killed_for: LimitName | None = None
        self.killed = False
        self.process: subprocess.Popen[bytes] | None = None
        self.cgroup: RunCgroup | None = None
        self.out_of_memory = False
        cap = self.limits.output_kb * 1024
        self.out = _Capture(cap)
        self.err = _Capture(cap)

    def options(self, data: DataFds) -> list[str]:
        """bwrap's options for this run, its data pipes at ``data``."""
        env = {
            "PATH": SANDBOX_PATH,
            "HOME": "/scratch",
            "TMPDIR": "/tmp",
            "LANG": "C.UTF-8",
            **self.request.env,
        }
        return bwrap_options(
            network=self.request.network,
            mounts=[(str(m.host), m.inside) for m in self.request.mounts],
            env=env,
            cwd=self.request.cwd,
            scratch_bytes=self.limits.scratch_mb * MIB,
            data=data,
        )

    def launcher_request(self) -> bytes:
        """``/sandbox/request``: the launcher's limits, then the program's argv."""
        limits = self.limits
        python = _is_python(self.request.argv)
        address_space = self.request.address_space_limit
        if address_space is None:
            address_space = python
        # The launcher's own compact format (it avoids importing json; see launch.py).
        launcher = ",".join(
            [
                f"cpu={limits.cpu_seconds}",
                f"memory={limits.memory_mb * MIB}",
                f"kind={'as' if address_space else 'data'}",
                f"nproc={limits.processes}",
                f"fsize={limits.file_size_mb * MIB}",
                f"nofile={limits.open_files}",
                f"python={int(python)}",
            ]
        )
        return b"\0".join(os.fsencode(part) for part in [launcher, *self.request.argv])

    def spawn(self, *, fresh: bool = False) -> Spawned:
        status = sandbox_status()
        assert status.bwrap is not None
        try:
            if status.process_limit == "cgroup":
                return spawn_in_cgroup(
                    status.bwrap,
                    _cgroup_hierarchy(),
                    self.limits.processes,
                    self.limits.memory_mb * MIB,
                    self.options,
                    self.launcher_request(),
                    fresh=fresh,
                )
            return spawn_direct(status.bwrap, self.options, self.launcher_request())
        except OSError as exc:
            raise SandboxUnavailable(
                f"{_who(self.request)}: bwrap could not be started in a fresh sandbox: {exc}; "
                "`storyloom sandbox check` says more"
            ) from exc

    async def execute(self) -> SandboxResult:
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        spawned = self.spawn()
        self.process = process = spawned.process
        self.cgroup = spawned.cgroup
        if spawned.cgroup is not None:
            status = sandbox_status()
            assert status.bwrap is not None
            loop.call_soon(warm_up, status.bwrap, _cgroup_hierarchy())
        assert process.stdin and process.stdout and process.stderr
        stdin = process.stdin
        work = asyncio.gather(
            _feed_all(loop, spawned.feeds),
            _write_all(loop, stdin.fileno(), self.request.stdin, stdin.close),
            _read_all(loop, process.stdout.fileno(), self.out, lambda: self._kill("output")),
            _read_all(loop, process.stderr.fileno(), self.err, lambda: self._kill("output")),
            _wait_exit(process),
        )
        try:
            try:
                await asyncio.wait_for(asyncio.shield(work), timeout=self.limits.wall_seconds)
            except TimeoutError:
                self._kill("wall_time")
                await self._reap(work)
        except BaseException:
            # Cancelled (or something broke): no process of the run may outlive the call.
            self._kill(None)
            with contextlib.suppress(BaseException):
                await self._reap(work)
            raise
        finally:
            await self._finish(spawned)
        duration_ms = (time.perf_counter() - started) * 1000
        if process.returncode == 125 and ENTER_FAILED in self.err.text():
            raise SandboxUnavailable(
                f"{_who(self.request)}: cannot start bwrap in its pids cgroup "
                f"({self.err.text().strip()}); run storyloom as a normal user, or give it a "
                "writable pids cgroup"
            )
        return self._result(process.returncode, duration_ms)

    async def _finish(self, spawned: Spawned) -> None:
        """Close what is left open and remove the run's cgroup once it is empty."""
        assert self.process is not None
        for fd, _ in spawned.feeds:
            with contextlib.suppress(OSError):
                os.close(fd)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        if self.process.returncode is None:
            # Only reached if reaping itself failed: do not leave bwrap behind.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            await asyncio.to_thread(self.process.wait)
        if self.cgroup is not None:
            await self._empty_cgroup(self.cgroup)

    def _kill(self, reason: LimitName | None) -> None:
        """Kill the run: its namespace's init (which takes every process in it along)."""
        if self.killed or self.process is None or self.process.returncode is not None:
            return
        self.killed = True
        self.killed_for = reason
        pid = self.process.pid
        inits = _children(pid)
        if not inits:
            # bwrap has not made its namespace yet; its process group is all there is.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            return
        for init in inits:
            with contextlib.suppress(ProcessLookupError):
                os.kill(init, signal.SIGKILL)

    async def _reap(self, work: asyncio.Future[Any]) -> None:
        """Wait for bwrap to exit (it does once its init is gone) and the pipes to close."""
        try:
            await asyncio.wait_for(asyncio.shield(work), timeout=REAP_GRACE_SECONDS)
        except TimeoutError:
            assert self.process is not None
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            if self.cgroup is not None:
                self.cgroup.kill_all()
            await work

    async def _empty_cgroup(self, cgroup: RunCgroup) -> None:
        self.out_of_memory = cgroup.out_of_memory()
        delay = 0.001
        deadline = time.monotonic() + REAP_GRACE_SECONDS
        while cgroup.pids() and time.monotonic() < deadline:
            cgroup.kill_all()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)
        # Should it still be busy, it is left to remove_stale; the run's result stands.
        with contextlib.suppress(OSError):
            cgroup.remove()

    def _result(self, returncode: int | None, duration_ms: float) -> SandboxResult:
        code, sig = _decode_status(returncode)
        stderr = self.err.text()
        limit = self.killed_for if self.killed else None
        if limit is None and not self.killed:
            limit = self._classify(code, sig, stderr, duration_ms)
        return SandboxResult(
            exit_code=code,
            signal=sig,
            stdout=self.out.text(),
            stderr=stderr,
            stdout_truncated=self.out.truncated,
            stderr_truncated=self.err.truncated,
            duration_ms=duration_ms,
            limit=limit,
            limit_value=_limits_value(limit, self.limits) if limit is not None else "",
        )

    def _classify(
        self, code: int | None, sig: int | None, stderr: str, duration_ms: float
    ) -> LimitName | None:
        if self.out_of_memory and code != 0:
            # The kernel killed a process of the run for the cgroup's limit.
            return "memory"
        if sig == signal.SIGXCPU:
            return "cpu_time"
        if sig == signal.SIGKILL and duration_ms >= self.limits.cpu_seconds * 1000:
            return "cpu_time"
        if sig == signal.SIGXFSZ:
            return "file_size"
        if code == 0:
            return None
        tail = stderr[-MARKER_TAIL_CHARS:]
        if any(marker in tail for marker in MEMORY_MARKERS):
            return "memory"
        if code is not None and any(marker in tail for marker in FILE_SIZE_MARKERS):
            return "file_size"
        return None


# --- pipes and exit, on the event loop ------------------------------------------------------


async def _wait_ready(loop: asyncio.AbstractEventLoop, fd: int, writable: bool = False) -> None:
    ready = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    if writable:
        loop.add_writer(fd, wake)
    else:
        loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        if writable:
            loop.remove_writer(fd)
        else:
            loop.remove_reader(fd)


async def _read_all(
    loop: asyncio.AbstractEventLoop, fd: int, capture: _Capture, over: Callable[[], None]
) -> None:
    """Read ``fd`` to its end into ``capture``; ``over`` once it goes past its cap."""
    os.set_blocking(fd, False)
    while True:
        try:
            chunk = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            await _wait_ready(loop, fd)
            continue
        except OSError:
            return
        if not chunk:
            return
        if not capture.truncated and not capture.add(chunk):
            over()


async def _write_all(
    loop: asyncio.AbstractEventLoop, fd: int, data: bytes, close: Callable[[], None]
) -> None:
    """Write ``data`` to ``fd`` (the reader may go away first: fine), then ``close``."""
    try:
        os.set_blocking(fd, False)
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                await _wait_ready(loop, fd, writable=True)
            except OSError:  # EPIPE: the program exited or closed its stdin
                return
    finally:
        with contextlib.suppress(OSError):
            close()


async def _feed_all(loop: asyncio.AbstractEventLoop, feeds: list[tuple[int, bytes]]) -> None:
    """Write each pipe's bytes in turn (bwrap reads them in this order) and close it."""
    while feeds:
        # Taken off the list first: whoever closes a fd must be the only one to.
        fd, data = feeds.pop(0)
        await _write_all(loop, fd, data, functools.partial(os.close, fd))


async def _wait_exit(process: subprocess.Popen[bytes]) -> int:
    """Wait until ``process`` exits (a pidfd on the loop; polling where there is none)."""
    loop = asyncio.get_running_loop()
    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):
        pidfd = None
    if pidfd is not None:
        try:
            while process.poll() is None:
                await _wait_ready(loop, pidfd)
        finally:
            os.close(pidfd)
    else:
        delay = 0.001
        while process.poll() is None:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)
    return process.wait()


def _is_python(argv: Sequence[str]) -> bool:
    """Whether ``argv`` runs the sandbox's own Python (then the launcher runs it in-process)."""
    first = argv[0]
    return first == PYTHON_INSIDE or (
        first.startswith("/") and os.path.realpath(first) == PYTHON_INSIDE
    )


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in text.split()]


def _decode_status(returncode: int | None) -> tuple[int | None, int | None]:
    """(exit code, signal) of the program from bwrap's exit status."""
    if returncode is None:
        return None, None
    if returncode < 0:  # bwrap itself was killed
        return None, -returncode
    if 128 < returncode <= 128 + 64:
        return None, returncode - 128
    return returncode, None
