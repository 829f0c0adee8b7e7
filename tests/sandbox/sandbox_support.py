"""Helpers for sandbox tests: scripts in a read-only mounted folder, and the host's
processes found by a marker in their command line."""

from __future__ import annotations

import os
import textwrap
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from storyloom.sandbox import Mount, SandboxLimits, SandboxRequest, SandboxResult, python_argv
from storyloom.sandbox import run_sandboxed as run_sandboxed
from storyloom.sandbox.spawn import discard_warm

SCRIPTS_INSIDE = "/scripts"


def write_script(folder: Path, name: str, code: str) -> Mount:
    """``code`` (dedented) as ``folder/name``; the folder as a read-only mount at /scripts."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(textwrap.dedent(code), encoding="utf-8")
    return Mount(host=folder, inside=SCRIPTS_INSIDE)


async def run_python_script(
    folder: Path,
    code: str,
    *args: str,
    limits: SandboxLimits | None = None,
    mounts: tuple[Mount, ...] = (),
    network: bool = False,
    stdin: bytes = b"",
) -> SandboxResult:
    """Write ``code`` as a script into ``folder`` (mounted read-only) and run it sandboxed."""
    name = f"script_{uuid.uuid4().hex[:8]}.py"
    scripts = write_script(folder, name, code)
    return await run_sandboxed(
        SandboxRequest(
            argv=python_argv(f"{SCRIPTS_INSIDE}/{name}", *args),
            mounts=(scripts, *mounts),
            network=network,
            stdin=stdin,
            limits=limits or SandboxLimits(),
            name="test",
        )
    )


def new_marker() -> str:
    """A string unique to one test, to find its processes by their command line."""
    return f"storyloom-sandbox-marker-{uuid.uuid4().hex}"


def processes_with(marker: str) -> list[int]:
    """The host's processes whose command line contains ``marker`` (zombies have none)."""
    found = []
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline:
            found.append(int(entry))
    return found


def own_children() -> set[int]:
    """This test process's child processes (zombies included), over all its threads.

    The warm stub kept for the next run (as root) is killed first: it is a child of this
    process by design, not something a run left behind.
    """
    discard_warm()
    children: set[int] = set()
    for task in os.listdir(f"/proc/{os.getpid()}/task"):
        try:
            text = Path(f"/proc/{os.getpid()}/task/{task}/children").read_text()
        except OSError:
            continue
        children.update(int(pid) for pid in text.split())
    return children


@dataclass
class HostHttp:
    """A plain HTTP server on the host's 127.0.0.1, and the paths it was asked for."""

    port: int
    seen: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


HOST_BODY = b"hello from the host"


def alive(pid: int) -> bool:
    """Whether a process with this id exists (a zombie counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def worker_tree(pid: int) -> list[int]:
    """``pid`` and its ancestors up to this process's child: a sandboxed script worker,
    its sandbox's init and bwrap; a plain worker alone."""
    tree = [pid]
    while True:
        status = Path(f"/proc/{tree[-1]}/status").read_text()
        parent = int(status.split("\nPPid:", 1)[1].split()[0])
        if parent == os.getpid():
            return tree
        tree.append(parent)
