"""``storyloom tools ...`` end to end: a real process, a real home and project."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from storyloom.project.project_file import init_project
from storyloom.store.database import Database
from storyloom.tools.audit_log import AuditLog
from tests.tools.tool_support import GREET


def storyloom(*args: str, home: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "storyloom", *args],
        capture_output=True,
        text=True,
        input=stdin,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home), "STORYLOOM_HOME": str(home)},
        timeout=120,
        cwd=home,
    )


def setup(tmp_path: Path, policy: dict[str, Any] | None = None) -> tuple[Path, Path]:
    home = tmp_path / "home"
    home.mkdir()
    if policy is not None:
        (home / "settings.json").write_text(json.dumps({"tool_policy": policy}))
    project = tmp_path / "project"
    init_project(project)
    (project / "workflows").mkdir(exist_ok=True)
    (project / "workflows" / "greet.json").write_text(json.dumps(GREET))
    return home, project


def test_list_shows_every_source_as_json(tmp_path: Path) -> None:
    home, project = setup(tmp_path)
    done = storyloom("tools", "list", "--json", "--project", str(project), home=home)
    assert done.returncode == 0, done.stderr
    tools = {t["id"]: t for t in json.loads(done.stdout)}
    assert (
        tools["kb:Query"]["implementation"] == "service"
        and tools["kb:Query"]["source"] == "builtin"
    )
    assert tools["workflow:greet"]["parameters"]["required"] == ["name"]
    assert tools["node:core:RegexApplicator"]["available"] is True
    plain = storyloom("tools", "list", "--project", str(project), home=home)
    assert "chat:RollDice  (service, builtin)" in plain.stdout


def test_call_runs_through_policy_and_audit(tmp_path: Path) -> None:
    home, project = setup(tmp_path)  # the default policy: ask, which a person's call passes
    done = storyloom(
        "tools",
        "call",
        "workflow:greet",
        "--args",
        '{"name": "Ann"}',
        "--project",
        str(project),
        home=home,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Hello, Ann"
    rolled = storyloom(
        "tools",
        "call",
        "chat:RollDice",
        "--args",
        '{"notation": "3d6"}',
        "--json",
        "--project",
        str(project),
        home=home,
    )
    assert rolled.returncode == 0, rolled.stderr
    result = json.loads(rolled.stdout)
    assert result["ok"] and result["decision"] == "allowed" and 3 <= result["result"]["total"] <= 18
    database = Database.in_home(home)
    try:
        entries, total = AuditLog(database).list()
    finally:
        database.close()
    assert total == 2
    assert [(e.tool, e.caller.kind) for e in entries] == [
        ("chat:RollDice", "cli"),
        ("workflow:greet", "cli"),
    ]
    assert entries[0].id == result["auditId"]


def test_call_exits_nonzero_when_denied_or_invalid(tmp_path: Path) -> None:
    home, project = setup(
        tmp_path, {"rules": [{"tool": "chat:*", "action": "deny"}], "default": "ask"}
    )
    denied = storyloom(
        "tools",
        "call",
        "chat:RollDice",
        "--args",
        '{"notation": "d6"}',
        "--project",
        str(project),
        home=home,
    )
    assert denied.returncode == 1
    assert "denied" in denied.stderr and "tool policy" in denied.stderr
    bad = storyloom(
        "tools",
        "call",
        "workflow:greet",
        "--args",
        '{"nam": "x"}',
        "--project",
        str(project),
        home=home,
    )
    assert bad.returncode == 1
    assert "invalid" in bad.stderr and "'name': required" in bad.stderr
    not_json = storyloom(
        "tools", "call", "workflow:greet", "--args", "{oops", "--project", str(project), home=home
    )
    assert not_json.returncode == 1 and "--args is not JSON" in not_json.stderr


def test_parse_prints_the_calls_as_the_issue_specifies(tmp_path: Path) -> None:
    output = (
        "I will roll.\n<|[REQUEST_TOOL]|>\ncommand:「始」chat:RollDice「末」\n"
        "notation:「始」2d6+1「末」\n<|[END_TOOL]|>\nDone."
    )
    done = storyloom("tools", "parse", "--json", home=tmp_path, stdin=output)
    assert done.returncode == 0, done.stderr
    parsed = json.loads(done.stdout)
    assert set(parsed) == {"calls", "text", "problems"}
    assert parsed["calls"] == [
        {"tool": "chat:RollDice", "arguments": {"notation": "2d6+1"}, "step": 1}
    ]
    assert "REQUEST_TOOL" not in parsed["text"] and "I will roll." in parsed["text"]
    file = tmp_path / "out.txt"
    file.write_text(output, encoding="utf-8")
    plain = storyloom("tools", "parse", str(file), home=tmp_path)
    assert "step 1: chat:RollDice" in plain.stdout and "notation: 2d6+1" in plain.stdout
