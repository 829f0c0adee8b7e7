"""Starting bwrap for one run: directly, or as root from a warm stub in a fresh pids cgroup.

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
from pathlib import Path

from storyloom.sandbox.bwrap import BWRAP_ENV, GROUP, PASSWD, DataFds, launch_command
from storyloom.sandbox.pids_cgroup import PidsCgroup

# The limit a warm stub's cgroup has until a run sets its own.
STUB_PIDS = 8

OptionsBuilder = Callable[[DataFds], list[str]]
"""bwrap's options for a run, given the fds its data pipes have in bwrap."""


@dataclass
class Spawned:
    """A started bwrap and what must still be written to it (in order, then closed)."""

    process: subprocess.Popen[bytes]
    cgroup: PidsCgroup | None
    feeds: list[tuple[int, bytes]] = field(default_factory=list)


def _data_pipe(content: bytes = b"") -> tuple[int, int]:
    """A pipe; ``content`` (small: it must fit the pipe) already written to it."""
    read, write = os.pipe()
    if content:
        os.write(write, content)
    return read, write


def _popen(argv: list[str], pass_fds: Sequence[int]) -> subprocess.Popen[bytes]:
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

    def __init__(self, bwrap: str, hierarchy: Path) -> None:
        self.cgroup = PidsCgroup(hierarchy, STUB_PIDS)
        args_read, self.args_write = os.pipe()
        request_read, self.request_write = os.pipe()
        passwd_read, passwd_write = _data_pipe(PASSWD.encode())
        group_read, group_write = _data_pipe(GROUP.encode())
        os.close(passwd_write)
        os.close(group_write)
        self.data = DataFds(passwd=passwd_read, group=group_read, request=request_read)
        argv = [bwrap, "--args", str(args_read), "--disable-userns", "--", *launch_command()]
        reads = (args_read, request_read, passwd_read, group_read)
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
_warm: dict[tuple[str, Path], _Stub] = {}


def _take_stub(bwrap: str, hierarchy: Path) -> _Stub:
    with _lock:
        stub = _warm.pop((bwrap, hierarchy), None)
    if stub is not None and stub.alive():
        return stub
    if stub is not None:
        stub.discard()
    return _Stub(bwrap, hierarchy)


def warm_up(bwrap: str, hierarchy: Path) -> None:
    """Start the next run's stub unless one is waiting already."""
    key = (bwrap, hierarchy)
    with _lock:
        if key in _warm:
            return
    try:
        stub = _Stub(bwrap, hierarchy)
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
    hierarchy: Path,
    processes: int,
    build_options: OptionsBuilder,
    request: bytes,
    *,
    fresh: bool = False,
) -> Spawned:
    """Start a run from a warm stub (or a new one) whose cgroup allows ``processes``.

    ``fresh``: always from a new stub, started by the calling thread (bwrap's
    ``--die-with-parent`` follows the thread that started it, and a warm stub's may end
    before a long-lived program should).
    """
    stub = _Stub(bwrap, hierarchy) if fresh else _take_stub(bwrap, hierarchy)
    try:
        stub.cgroup.set_max(processes)
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
    passwd_read, passwd_write = _data_pipe(PASSWD.encode())
    group_read, group_write = _data_pipe(GROUP.encode())
    os.close(passwd_write)
    os.close(group_write)
    data = DataFds(passwd=passwd_read, group=group_read, request=request_read)
    reads = (request_read, passwd_read, group_read)
    try:
        process = _popen([bwrap, *build_options(data), "--", *launch_command()], reads)
    except BaseException:
        os.close(request_write)
        raise
    finally:
        for fd in reads:
            os.close(fd)
    return Spawned(process=process, cgroup=None, feeds=[(request_write, request)])
