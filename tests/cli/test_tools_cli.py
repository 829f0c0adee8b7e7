"""``storyloom tools ...`` end to end: a real process, a real home and project."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from storyloom.project.project_file import init_project
from storyloom.store.database import Database
from storyloom.tools.audit_log import AuditLog
from tests.cli.cli_support import storyloom
from tests.tools.tool_support import GREET


def call_tool(
    home: Path, project: Path, tool_id: str, args: str, *more: str
) -> subprocess.CompletedProcess[str]:
    """``storyloom tools call <tool_id> --args <args> *more`` on ``project``."""
    return storyloom(
        "tools", "call", tool_id, "--args", args, *more, "--project", str(project), home=home
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
    done = call_tool(home, project, "workflow:greet", '{"name": "Ann"}')
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Hello, Ann"
    rolled = call_tool(home, project, "chat:RollDice", '{"notation": "3d6"}', "--json")
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
    denied = call_tool(home, project, "chat:RollDice", '{"notation": "d6"}')
    assert denied.returncode == 1
    assert "denied" in denied.stderr and "tool policy" in denied.stderr
    bad = call_tool(home, project, "workflow:greet", '{"nam": "x"}')
    assert bad.returncode == 1
    assert "invalid" in bad.stderr and "'name': required" in bad.stderr
    not_json = call_tool(home, project, "workflow:greet", "{oops")
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
