"""A cgroup per sandboxed run: its process limit as root, and its memory where it can.

As root the sandbox's uid maps to kernel uid 0, and the kernel skips RLIMIT_NPROC for
it, so a fork bomb would only be stopped by the host's own limits. A pids cgroup counts
every task of the run whatever its uid. And RLIMIT_AS counts one process at a time: three
processes, each under it, together hold three times as much. A memory cgroup counts the
whole run (every process, its tmpfs pages, its page cache), and the kernel's OOM killer
ends the run when it goes past.

One cgroup is made per run under writable hierarchies (:func:`find_hierarchies`): on
cgroup v1 one folder under ``/sys/fs/cgroup/pids`` and one under
``/sys/fs/cgroup/memory``, on cgroup v2 one folder under our own cgroup when it hands
those controllers to its children. bwrap is started in it (see :meth:`RunCgroup.wrap`),
and it is removed when the run is over. Without a memory hierarchy the run's memory is
limited per process only (RLIMIT_AS/DATA, see launch.py).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")

_counter = itertools.count()
PREFIX = "storyloom-sandbox-"
ENTER_FAILED = "storyloom sandbox: cannot enter the run's cgroup"


@dataclass(frozen=True)
class Hierarchies:
    """Where a run's cgroup folders are made: one per controller (the same on v2)."""

    pids: Path
    memory: Path | None
    """``None``: no memory controller can be had here."""

    def folders(self) -> list[Path]:
        """The distinct parents, pids first."""
        found = [self.pids]
        if self.memory is not None and self.memory != self.pids:
            found.append(self.memory)
        return found


def find_hierarchies() -> Hierarchies | None:
    """Where run cgroups can be made, or ``None`` without a writable pids controller.

    Probed by making and removing a child folder, so a read-only or delegated-away
    hierarchy counts as absent.
    """
    v2 = _own_v2_cgroup()
    if v2 is not None:
        controls = _subtree_controls(v2)
        if "pids" in controls and _can_make_child(v2, "pids.max"):
            memory = v2 if "memory" in controls else None
            return Hierarchies(v2, memory)
    pids = CGROUP_ROOT / "pids"
    if not _can_make_child(pids, "pids.max"):
        return None
    memory = CGROUP_ROOT / "memory"
    return Hierarchies(pids, memory if _can_make_child(memory, "memory.limit_in_bytes") else None)


def _own_v2_cgroup() -> Path | None:
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                own = CGROUP_ROOT / line[3:].lstrip("/")
                if (own / "cgroup.subtree_control").exists():
                    return own
    return None


def _subtree_controls(folder: Path) -> list[str]:
    try:
        return (folder / "cgroup.subtree_control").read_text().split()
    except OSError:
        return []


def _can_make_child(parent: Path, landmark: str) -> bool:
    if not (parent / "cgroup.procs").exists():
        return False
    probe = parent / f"storyloom-probe-{os.getpid()}-{next(_counter)}"
    try:
        probe.mkdir()
    except OSError:
        return False
    try:
        return (probe / landmark).exists()
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()


def remove_stale(hierarchies: Hierarchies) -> None:
    """Remove the empty run cgroups a storyloom process that is gone left behind
    (killed before it could clean up); a live process's are left alone."""
    for hierarchy in hierarchies.folders():
        for folder in hierarchy.glob(f"{PREFIX}*"):
            owner = folder.name.removeprefix(PREFIX).split("-", 1)[0]
            if not owner.isdigit() or _alive(int(owner)):
                continue
            with contextlib.suppress(OSError):
                if not (folder / "cgroup.procs").read_text().strip():
                    folder.rmdir()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunCgroup:
    """One run's cgroup: made with its limits, entered by bwrap, removed after."""

    def __init__(self, hierarchies: Hierarchies, max_pids: int) -> None:
        name = f"{PREFIX}{os.getpid()}-{next(_counter)}"
        self.pids_folder = hierarchies.pids / name
        self.memory_folder = None if hierarchies.memory is None else hierarchies.memory / name
        self.folders = [parent / name for parent in hierarchies.folders()]
        made: list[Path] = []
        try:
            for folder in self.folders:
                folder.mkdir()
                made.append(folder)
            self.set_max(max_pids)
        except OSError:
            for folder in reversed(made):
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise

    def set_max(self, max_pids: int) -> None:
        """Change how many processes (and threads) the cgroup may hold at once."""
        (self.pids_folder / "pids.max").write_text(str(max_pids))

    def set_memory(self, limit_bytes: int) -> None:
        """Limit the whole run's memory (swap included, where swap is counted)."""
        folder = self.memory_folder
        if folder is None:
            return
        if (folder / "memory.max").exists():  # v2
            (folder / "memory.max").write_text(str(limit_bytes))
            with contextlib.suppress(OSError):
                (folder / "memory.swap.max").write_text("0")
            return
        (folder / "memory.limit_in_bytes").write_text(str(limit_bytes))
        with contextlib.suppress(OSError):
            (folder / "memory.memsw.limit_in_bytes").write_text(str(limit_bytes))

    def out_of_memory(self) -> bool:
        """Whether the kernel's OOM killer killed a process of the run for its limit."""
        folder = self.memory_folder
        if folder is None:
            return False
        # v2 counts kills in memory.events, v1 (since 4.13) in memory.oom_control.
        for name in ("memory.events", "memory.oom_control"):
            with contextlib.suppress(OSError):
                for line in (folder / name).read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return value.strip() != "0"
        return False

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` started inside the cgroup: a shell writes its own pid into it, then
        execs ``argv``, so every process ``argv`` makes is counted from the start.

        A ``preexec_fn`` could do the same, but it forces Python to fork (not vfork) a
        large process, which costs more than the sandbox itself. When the shell cannot
        enter the cgroup it says :data:`ENTER_FAILED` on stderr and exits 125.
        """
        procs = [str(folder / "cgroup.procs") for folder in self.folders]
        enter = "; ".join(f'echo $$ > "${index + 1}"' for index in range(len(procs)))
        script = (
            f'{{ {enter}; }} 2>/dev/null || {{ echo "{ENTER_FAILED}" >&2; exit 125; }}; '
            f"shift {len(procs)}; "
            'exec "$@"'
        )
        return ["/bin/sh", "-c", script, "sh", *procs, *argv]

    def pids(self) -> list[int]:
        """The processes in the cgroup now."""
        try:
            text = (self.pids_folder / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(pid) for pid in text.split()]

    def kill_all(self) -> None:
        """SIGKILL every process still in the cgroup."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def remove(self) -> None:
        """Remove the cgroup; OSError (EBUSY) while a process is still in it.

        The caller waits until :meth:`pids` is empty first (asynchronously: a process
        dies some time after SIGKILL), which it nearly always is once bwrap has exited.
        """
        for folder in self.folders:
            with contextlib.suppress(FileNotFoundError):
                folder.rmdir()
