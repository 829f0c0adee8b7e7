"""``storyloom ...`` run as a real process on a data directory, for the CLI tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# The checkout these tests belong to: its storyloom is the one under test (a worktree's,
# not only the installed one).
_SOURCE = str(Path(__file__).resolve().parents[2])


def storyloom(
    *args: str, home: Path, cwd: Path | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m storyloom *args`` with ``home`` as its data directory (and HOME), in
    ``cwd`` (default: ``home``), ``stdin`` fed to it."""
    return subprocess.run(
        [sys.executable, "-m", "storyloom", *args],
        capture_output=True,
        text=True,
        input=stdin,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(home),
            "STORYLOOM_HOME": str(home),
            "PYTHONPATH": _SOURCE,
        },
        timeout=120,
        cwd=cwd if cwd is not None else home,
    )
