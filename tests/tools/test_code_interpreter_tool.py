"""``CodeInterpreter:execute`` as a tool: listed with the built-ins, called through the
ToolManager (schema, policy, audit) and from the CLI, with an agent run's scratch kept
in the data directory. Every call runs in the real sandbox."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from storyloom.plugins import node_registry
from storyloom.project.project_file import init_project
from storyloom.sandbox.bwrap import require_sandbox
from storyloom.tools.code_interpreter_tool import TOOL_ID, run_folder_name, run_scratch
from storyloom.tools.tool_host import ToolHost, open_tool_host
from storyloom.tools.tool_manager import ToolCallContext, ToolCaller
from storyloom.tools.tool_policy import ToolPolicy
from tests.cli.cli_support import storyloom

RESULT_KEYS = {
    "language",
    "stdout",
    "stderr",
    "value",
    "files",
    "duration_ms",
    "limit",
    "exit_code",
    "error",
}


@pytest.fixture(autouse=True)
def sandbox_here() -> None:
    # Fails (never skips) where no sandbox can be made: the tool must not run unsandboxed.
    require_sandbox()


@pytest.fixture
async def host(tmp_path: Path) -> AsyncIterator[ToolHost]:
    home = tmp_path / "home"
    home.mkdir()
    # The global policy lets agents run code without asking (the default asks).
    policy = {"rules": [{"tool": "CodeInterpreter:*", "action": "allow"}], "default": "ask"}
    (home / "settings.json").write_text(json.dumps({"tool_policy": policy}))
    project = tmp_path / "project"
    init_project(project)
    opened = open_tool_host(home, project, node_registry=node_registry(entry_points=False))
    try:
        yield opened
    finally:
        await opened.aclose()
        if opened.knowledge is not None:
            await opened.knowledge.aclose()
        opened.database.close()


def agent(run_id: str | None = None) -> ToolCallContext:
    return ToolCallContext(
        caller=ToolCaller("agent", "analyst", run_id),
        policy=ToolPolicy(default="allow"),
        timeout_s=120,
    )


async def call(host: ToolHost, ctx: ToolCallContext, **arguments: Any) -> dict[str, Any]:
    done = await host.manager.call(TOOL_ID, arguments, ctx)
    assert done.ok, done.error
    result: dict[str, Any] = done.result
    return result


async def test_the_tool_is_a_builtin_with_its_parameters(host: ToolHost) -> None:
    entry = host.manager.get(TOOL_ID)
    assert entry.source == "builtin" and entry.available
    parameters = entry.definition.parameters
    assert parameters["required"] == ["language", "code"]
    assert parameters["properties"]["language"]["enum"] == ["python", "javascript", "nodejs"]
    timeout = parameters["properties"]["timeout_s"]
    assert (timeout["minimum"], timeout["maximum"], timeout["default"]) == (1, 60, 10)
    native = host.manager.openai_tools([TOOL_ID])
    assert native[0]["function"]["parameters"] == parameters


async def test_a_call_returns_the_result_object_and_is_audited(host: ToolHost) -> None:
    done = await host.manager.call(
        TOOL_ID, {"language": "python", "code": "print(6*7)\n6*7"}, agent()
    )
    assert done.ok and done.decision == "allowed"
    assert set(done.result) == RESULT_KEYS
    assert (done.result["stdout"], done.result["value"]) == ("42\n", "42")
    assert done.result["error"] is None and done.result["limit"] is None
    entries, total = host.audit.list()
    assert total == 1 and entries[0].tool == TOOL_ID and entries[0].ok


async def test_failing_code_is_a_result_for_the_model_not_a_tool_error(host: ToolHost) -> None:
    broken = await call(host, agent(), language="python", code="x = [1]\nx[5]")
    assert broken["error"] == "IndexError: list index out of range (line 2)"
    looping = await call(host, agent(), language="javascript", code="for (;;) {}", timeout_s=1)
    assert looping["limit"] == "wall_time"
    assert looping["error"] == "stopped: the 1 s wall-time limit"


async def test_bad_arguments_are_refused_before_anything_runs(host: ToolHost) -> None:
    for arguments in (
        {"language": "ruby", "code": "puts 1"},
        {"language": "python", "code": ""},
        {"language": "python", "code": "1", "timeout_s": 61},
        {"language": "python", "code": "1", "timeout_s": 0.5},
        {"code": "1"},
    ):
        done = await host.manager.call(TOOL_ID, arguments, agent())
        assert not done.ok and done.decision == "invalid", arguments


async def test_an_agent_runs_calls_share_a_scratch_in_the_data_directory(
    host: ToolHost,
) -> None:
    run = "9f2c-run:agent-node"
    await call(host, agent(run), language="python", code="open('notes.txt', 'w').write('a')")
    again = await call(
        host,
        agent(run),
        language="python",
        code="text = open('notes.txt').read() + 'b'\nopen('notes.txt', 'w').write(text)\ntext",
    )
    assert again["value"] == "'ab'"
    kept = run_scratch(host.home, run)
    assert kept.parent == host.home / "sandbox" / "runs"
    assert (kept / "current" / "notes.txt").read_text() == "ab"
    # Another run, and a call from no run, start empty and keep nothing.
    other = await call(host, agent("other-run"), language="python", code="import os\nos.listdir()")
    alone = await call(host, agent(), language="python", code="import os\nos.listdir()")
    assert other["value"] == alone["value"] == "[]"
    runs = sorted(p.name for p in (host.home / "sandbox" / "runs").iterdir())
    assert runs == sorted([run_folder_name(run), run_folder_name("other-run")])


async def test_old_run_scratches_are_deleted_when_a_run_keeps_files(host: ToolHost) -> None:
    runs = host.home / "sandbox" / "runs"
    old, recent = run_scratch(host.home, "last-month"), run_scratch(host.home, "yesterday")
    for folder, days in ((old, 30), (recent, 1)):
        (folder / "v-1").mkdir(parents=True)
        past = time.time() - days * 86400
        os.utime(folder, (past, past))
    await call(host, agent("today"), language="python", code="open('x', 'w').write('1')")
    assert sorted(p.name for p in runs.iterdir()) == sorted(
        [run_folder_name("yesterday"), run_folder_name("today")]
    )


def test_run_folder_names_are_safe_and_distinct() -> None:
    names = {run_folder_name(r) for r in ("a:b", "a/b", "a_b", "../..", "")}
    assert len(names) == 5
    assert all("/" not in n and ":" not in n and not n.startswith(".") for n in names)


def test_the_cli_prints_the_result_object(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    project = tmp_path / "project"
    init_project(project)
    done = storyloom(
        "tools",
        "call",
        TOOL_ID,
        "--args",
        '{"language": "python", "code": "print(6*7)"}',
        "--json",
        "--project",
        str(project),
        home=home,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["ok"] and answer["tool"] == TOOL_ID
    assert set(answer["result"]) == RESULT_KEYS
    assert answer["result"]["stdout"] == "42\n" and answer["result"]["exit_code"] == 0


def test_nodejs_runs_node_in_the_sandbox_and_the_schema_tells_the_two_javascripts_apart(
    tmp_path: Path,
) -> None:
    # Before: nodejs was refused as an unknown language; JavaScript was quickjs alone.
    home = tmp_path / "home"
    home.mkdir()
    project = tmp_path / "project"
    init_project(project)
    listed = storyloom("tools", "list", "--json", "--project", str(project), home=home)
    assert listed.returncode == 0, listed.stderr
    (tool,) = [t for t in json.loads(listed.stdout) if t["id"] == TOOL_ID]
    language = tool["parameters"]["properties"]["language"]
    assert language["enum"] == ["python", "javascript", "nodejs"]
    assert "quickjs-ng" in language["description"] and "no npm" in language["description"]
    code = (
        "const crypto = require('crypto');\n"
        "require('fs').writeFileSync('digest.txt', crypto.createHash('sha256')"
        ".update('storyloom').digest('hex'));\n"
        "console.log(process.version.startsWith('v'));\n"
        "Promise.resolve(require('path').join('a', 'b'))"
    )
    ran = storyloom(
        "tools",
        "call",
        TOOL_ID,
        "--args",
        json.dumps({"language": "nodejs", "code": code}),
        "--json",
        "--project",
        str(project),
        home=home,
    )
    assert ran.returncode == 0, ran.stderr
    answer = json.loads(ran.stdout)
    assert answer["ok"], answer
    result = answer["result"]
    assert result["language"] == "nodejs" and result["error"] is None
    assert result["stdout"] == "true\n"
    assert result["value"] == '"a/b"'
    (digest,) = result["files"]
    assert digest["name"] == "digest.txt"
    assert digest["text"] == hashlib.sha256(b"storyloom").hexdigest()
