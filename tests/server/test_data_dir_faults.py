"""A broken data directory: ``serve``, ``doctor`` and ``kb import`` through the real CLI.

Each fault is one line saying what is wrong and how to fix it, never a traceback. The
tests run as root, which writes anywhere, so "not writable" is a path under a regular file.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from storyloom.project.project_file import init_project

REPO = Path(__file__).resolve().parents[2]
WORLD_INFO = REPO / "tests" / "fixtures" / "sillytavern" / "world_info_lanternfall_2024.json"


def _settings_is_a_folder(tmp: Path) -> Path:
    (tmp / "home" / "settings.json").mkdir(parents=True)
    return tmp / "home"


def _database_is_a_folder(tmp: Path) -> Path:
    (tmp / "home" / "storyloom.sqlite3").mkdir(parents=True)
    return tmp / "home"


def _database_is_not_a_database(tmp: Path) -> Path:
    (tmp / "home").mkdir()
    (tmp / "home" / "storyloom.sqlite3").write_bytes(b"not a database at all" * 100)
    return tmp / "home"


def _data_dir_is_a_file(tmp: Path) -> Path:
    (tmp / "home").write_text("a file")
    return tmp / "home"


def _data_dir_cannot_be_created(tmp: Path) -> Path:
    (tmp / "file").write_text("a file")
    return tmp / "file" / "home"


# fault -> (make it, the check doctor fails, a word of the fix)
FAULTS: dict[str, tuple[Callable[[Path], Path], str, str]] = {
    "settings.json is a folder": (_settings_is_a_folder, "settings", "move"),
    "storyloom.sqlite3 is a folder": (_database_is_a_folder, "database", "move"),
    "storyloom.sqlite3 is not a database": (_database_is_not_a_database, "database", "move"),
    "the data directory is a file": (_data_dir_is_a_file, "data directory", "--home"),
    "the data directory is under a file": (_data_dir_cannot_be_created, "data directory", "--home"),
}


def run_cli(*args: str, home: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home.parent), "STORYLOOM_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "storyloom", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=REPO,
    )


def assert_no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    both = result.stdout + result.stderr
    assert "Traceback" not in both and "╭" not in both and "Error:" not in both, both


@pytest.mark.parametrize("fault", FAULTS)
def test_serve_refuses_a_broken_data_directory_in_one_line(tmp_path: Path, fault: str) -> None:
    make, _, fix = FAULTS[fault]
    home = make(tmp_path)
    try:
        result = run_cli("serve", "--port", "0", home=home, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"serve started despite: {fault}")
    assert result.returncode == 1
    assert_no_traceback(result)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("storyloom: "), result.stderr
    assert fix in lines[0]


@pytest.mark.parametrize("fault", FAULTS)
def test_doctor_reports_a_broken_data_directory_as_a_failure_with_a_fix(
    tmp_path: Path, fault: str
) -> None:
    make, check, fix = FAULTS[fault]
    home = make(tmp_path)
    result = run_cli("doctor", home=home)
    assert result.returncode == 1
    assert_no_traceback(result)
    lines = result.stdout.splitlines()
    failed = [i for i, line in enumerate(lines) if line.startswith(f"[FAIL] {check}:")]
    assert failed, result.stdout
    assert lines[failed[0] + 1].strip().startswith("fix:") and fix in lines[failed[0] + 1]


@pytest.mark.parametrize("fault", FAULTS)
def test_kb_import_into_a_broken_data_directory_is_one_clear_line(
    tmp_path: Path, fault: str
) -> None:
    make, _, fix = FAULTS[fault]
    home = make(tmp_path)
    project = tmp_path / "project"
    init_project(project)
    result = run_cli("kb", "import", str(WORLD_INFO), "--project", str(project), home=home)
    assert result.returncode == 1
    assert_no_traceback(result)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("storyloom: "), result.stderr
    assert fix in lines[0]
