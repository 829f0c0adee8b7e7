"""A pids cgroup per sandboxed run: the process limit when storyloom runs as root.

As root the sandbox's uid maps to kernel uid 0, and the kernel skips RLIMIT_NPROC for
it, so a fork bomb would only be stopped by the host's own limits. A pids cgroup counts
every task of the run whatever its uid. One is made per run under a writable pids
hierarchy (cgroup v1 ``/sys/fs/cgroup/pids``, or on cgroup v2 our own cgroup when it
hands the pids controller to its children), bwrap is started in it (see
:meth:`PidsCgroup.wrap`), and it is removed when the run is over.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")

_counter = itertools.count()
PREFIX = "storyloom-sandbox-"
ENTER_FAILED = "storyloom sandbox: cannot enter the pids cgroup"


def pids_hierarchy() -> Path | None:
    """The folder a run's pids cgroup can be made in, or ``None`` when there is none.

    Probed by making and removing a child folder, so a read-only or delegated-away
    hierarchy counts as absent.
    """
    for candidate in _candidates():
        probe = candidate / f"storyloom-probe-{os.getpid()}-{next(_counter)}"
        try:
            probe.mkdir()
        except OSError:
            continue
        try:
            if (probe / "pids.max").exists():
                return candidate
        finally:
            with contextlib.suppress(OSError):
                probe.rmdir()
    return None


def _candidates() -> list[Path]:
    found: list[Path] = []
    v1 = CGROUP_ROOT / "pids"
    if (v1 / "cgroup.procs").exists():
        found.append(v1)
    # cgroup v2: our own cgroup, if its children get the pids controller.
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                own = CGROUP_ROOT / line[3:].lstrip("/")
                control = own / "cgroup.subtree_control"
                if control.exists() and "pids" in control.read_text().split():
                    found.append(own)
    return found


def remove_stale(hierarchy: Path) -> None:
    """Remove the empty run cgroups a storyloom process that is gone left behind
    (killed before it could clean up); a live process's are left alone."""
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


class PidsCgroup:
    """One run's pids cgroup: made with its limit, entered by bwrap, removed after."""

    def __init__(self, hierarchy: Path, max_pids: int) -> None:
        self.path = hierarchy / f"{PREFIX}{os.getpid()}-{next(_counter)}"
        self.path.mkdir()
        try:
            (self.path / "pids.max").write_text(str(max_pids))
        except OSError:
            self.path.rmdir()
            raise

    def set_max(self, max_pids: int) -> None:
        """Change how many processes (and threads) the cgroup may hold at once."""
        (self.path / "pids.max").write_text(str(max_pids))

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` started inside the cgroup: a shell writes its own pid into it, then
        execs ``argv``, so every process ``argv`` makes is counted from the start.

        A ``preexec_fn`` could do the same, but it forces Python to fork (not vfork) a
        large process, which costs more than the sandbox itself. When the shell cannot
        enter the cgroup it says :data:`ENTER_FAILED` on stderr and exits 125.
        """
        script = (
            f'{{ echo $$ > "$0"; }} 2>/dev/null || {{ echo "{ENTER_FAILED} $0" >&2; exit 125; }}'
        )
        return ["/bin/sh", "-c", script + '; exec "$@"', str(self.path / "cgroup.procs"), *argv]

    def pids(self) -> list[int]:
        """The processes in the cgroup now."""
        try:
            text = (self.path / "cgroup.procs").read_text()
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
        with contextlib.suppress(FileNotFoundError):
            self.path.rmdir()
