"""``storyloom sandbox check`` as a real process."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path


def sandbox_check(
    home: Path, *args: str, bwrap: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "STORYLOOM_HOME": str(home)}
    if bwrap is not None:
        env["STORYLOOM_BWRAP"] = bwrap
    return subprocess.run(
        [sys.executable, "-m", "storyloom", "sandbox", "check", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=home,
        check=False,
    )


def test_check_reports_an_available_sandbox_and_a_trial_run(
    tmp_path: Path, sandbox_ready: object
) -> None:
    done = sandbox_check(tmp_path)

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("sandbox: available")
    assert "trial: python printed 'ok', exit code 0" in done.stdout


def test_check_as_json_holds_the_status_and_the_trial(
    tmp_path: Path, sandbox_ready: object
) -> None:
    done = sandbox_check(tmp_path, "--json")

    report = json.loads(done.stdout)
    assert report["available"] is True
    assert report["trial"]["stdout"] == "ok"
    assert report["process_limit"] in ("rlimit", "cgroup")


def test_check_exits_1_with_the_reason_and_fix_when_bwrap_cannot_sandbox(tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)

    done = sandbox_check(tmp_path, bwrap=str(fake))

    assert done.returncode == 1
    assert "sandbox: UNAVAILABLE" in done.stdout
    assert "setting up uid map: Permission denied" in done.stdout
    assert "fix: allow unprivileged user namespaces" in done.stdout


def test_check_exits_1_when_the_bwrap_binary_is_missing(tmp_path: Path) -> None:
    done = sandbox_check(tmp_path, "--json", bwrap=str(tmp_path / "missing-bwrap"))

    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["available"] is False
    assert "missing-bwrap" in report["reason"]
    assert report["fix"]
