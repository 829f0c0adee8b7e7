"""Starting bwrap for one run: directly, or as root from a warm stub in a fresh cgroup.

A run's bwrap gets its options and what to run through pipes, so the command line is the
same for every run: ``bwrap --args FD --disable-userns -- python -I -S
/sandbox/launch.py``. bwrap reads its options from the ``--args`` pipe first, then copies
``/sandbox/request`` (the launcher's limits and the program's argv), ``/etc/passwd`` and
``/etc/group`` from three more pipes while it builds the sandbox.

As root, the process limit is a pids cgroup per run, and moving a process into a cgroup
(v1) waits for an RCU grace period: about 10 ms, a third of a sandbox's start. So one
stub is kept warm: a bwrap that already moved itself into its own fresh cgroup and is
blocked reading its options. A run takes it, sets the cgroup's limit, writes the options;
the next stub is started meanwhile.

A stub whose options never come (storyloom died) reads an empty ``--args``; the
``--disable-userns`` on its command line then fails ("requires --unshare-user") before
anything runs, so a stub can never run the launcher outside a sandbox.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from storyloom.sandbox.bwrap import BWRAP_ENV, DataFds, launch_command, open_data_fds
from storyloom.sandbox.run_cgroup import Hierarchies, RunCgroup
from storyloom.sandbox.seccomp import host_arch

# The limit a warm stub's cgroup has until a run sets its own.
STUB_PIDS = 8

OptionsBuilder = Callable[[DataFds], list[str]]
"""bwrap's options for a run, given the fds its data pipes have in bwrap."""


@dataclass
class Spawned:
    """A started bwrap and what must still be written to it (in order, then closed)."""

    process: subprocess.Popen[bytes]
    cgroup: RunCgroup | None
    feeds: list[tuple[int, bytes]] = field(default_factory=list)


_keyring_joined = threading.local()
KEYCTL_JOIN_SESSION_KEYRING = 1


def _fresh_session_keyring() -> None:
    """Give the calling thread (and so every bwrap it starts) a new, empty session keyring.

    A session keyring is part of a thread's credentials and children inherit it; the one
    storyloom was started with holds the user's keys. Inside the sandbox the keyring
    syscalls are refused anyway (see seccomp.py): this is the second wall. Once per
    thread; where the call itself is refused (a container's own filter) nothing changes.
    """
    if getattr(_keyring_joined, "done", False):
        return
    _keyring_joined.done = True
    arch = host_arch()
    if arch is None:
        return
    import ctypes  # only here: the import costs milliseconds, once per thread

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall(ctypes.c_long(arch.numbers["keyctl"]), KEYCTL_JOIN_SESSION_KEYRING, None)


def _popen(argv: list[str], pass_fds: Sequence[int]) -> subprocess.Popen[bytes]:
    _fresh_session_keyring()
    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=BWRAP_ENV,
        start_new_session=True,
        pass_fds=tuple(pass_fds),
    )


def _options_bytes(options: Sequence[str]) -> bytes:
    return b"".join(os.fsencode(option) + b"\0" for option in options)


class _Stub:
    """A bwrap in its own fresh pids cgroup, blocked reading its options."""

    def __init__(self, bwrap: str, hierarchies: Hierarchies) -> None:
        self.cgroup = RunCgroup(hierarchies, STUB_PIDS)
        args_read, self.args_write = os.pipe()
        request_read, self.request_write = os.pipe()
        self.data = open_data_fds(request_read)
        argv = [bwrap, "--args", str(args_read), "--disable-userns", "--", *launch_command()]
        reads = (args_read, *self.data.all())
        try:
            self.process = _popen(self.cgroup.wrap(argv), reads)
        except BaseException:
            self._close_writes()
            self.cgroup.remove()
            raise
        finally:
            for fd in reads:
                os.close(fd)

    def alive(self) -> bool:
        return self.process.poll() is None

    def _close_writes(self) -> None:
        for fd in (self.args_write, self.request_write):
            with contextlib.suppress(OSError):
                os.close(fd)

    def discard(self) -> None:
        """Kill the stub (before its pipes close, so it never reads empty options)."""
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait()
        self._close_writes()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        self.cgroup.kill_all()
        with contextlib.suppress(OSError):
            self.cgroup.remove()


_lock = threading.Lock()
_warm: dict[tuple[str, Hierarchies], _Stub] = {}


def _take_stub(bwrap: str, hierarchies: Hierarchies) -> _Stub:
    with _lock:
        stub = _warm.pop((bwrap, hierarchies), None)
    if stub is not None and stub.alive():
        return stub
    if stub is not None:
        stub.discard()
    return _Stub(bwrap, hierarchies)


def warm_up(bwrap: str, hierarchies: Hierarchies) -> None:
    """Start the next run's stub unless one is waiting already."""
    key = (bwrap, hierarchies)
    with _lock:
        if key in _warm:
            return
    try:
        stub = _Stub(bwrap, hierarchies)
    except OSError:
        return  # the next run starts its own and reports what fails
    with _lock:
        if key not in _warm:
            _warm[key] = stub
            return
    stub.discard()


def _forget_warm() -> None:
    # A forked child shares the stubs' pipes with its parent: they are the parent's.
    global _lock
    _lock = threading.Lock()
    _warm.clear()


os.register_at_fork(after_in_child=_forget_warm)


@atexit.register
def discard_warm() -> None:
    """Kill the waiting stubs (at exit; a test may call it to see only its own processes)."""
    with _lock:
        stubs = list(_warm.values())
        _warm.clear()
    for stub in stubs:
        stub.discard()


def spawn_in_cgroup(
    bwrap: str,
    hierarchies: Hierarchies,
    processes: int,
    memory_bytes: int,
    build_options: OptionsBuilder,
    request: bytes,
    *,
    fresh: bool = False,
) -> Spawned:
    """Start a run from a warm stub (or a new one) whose cgroup allows ``processes``
    and, where it has a memory controller, ``memory_bytes`` for the whole run.

    ``fresh``: always from a new stub, started by the calling thread (bwrap's
    ``--die-with-parent`` follows the thread that started it, and a warm stub's may end
    before a long-lived program should).
    """
    stub = _Stub(bwrap, hierarchies) if fresh else _take_stub(bwrap, hierarchies)
    try:
        stub.cgroup.set_max(processes)
        stub.cgroup.set_memory(memory_bytes)
        options = _options_bytes(build_options(stub.data))
    except BaseException:
        stub.discard()
        raise
    return Spawned(
        process=stub.process,
        cgroup=stub.cgroup,
        feeds=[(stub.args_write, options), (stub.request_write, request)],
    )


def spawn_direct(bwrap: str, build_options: OptionsBuilder, request: bytes) -> Spawned:
    """Start a run's bwrap with its options on the command line (no cgroup to enter)."""
    request_read, request_write = os.pipe()
    data = open_data_fds(request_read)
    reads = data.all()
    try:
        process = _popen([bwrap, *build_options(data), "--", *launch_command()], reads)
    except BaseException:
        os.close(request_write)
        raise
    finally:
        for fd in reads:
            os.close(fd)
    return Spawned(process=process, cgroup=None, feeds=[(request_write, request)])
