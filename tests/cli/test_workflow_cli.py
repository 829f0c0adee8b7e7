"""``storyloom workflow run`` end to end: a real process over the same tool host as the
server, so ``agent:Run`` calls tools and enabled plugins' hooks apply."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from storyloom.core.settings import Settings
from storyloom.project.project_file import init_project
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.tools.agent_profile import AgentLibrary
from tests.cli.cli_support import storyloom
from tests.tools.agent_support import agent_workflow, tam_call, write_settings
from tests.tools.plugin_support import write_plugin

HOOK_MODULE = """
from typing import Any

from storyloom.core.plugin_markers import hookimpl


@hookimpl
def storyloom_workflow_before_execute(workflow: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    return {**inputs, "prompt": inputs["prompt"] + " (asked through the hook)"}
"""


def agent_project(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(home, project, workflow file): the agent ``dm`` may roll dice; plugin ``asker``
    (enabled by :func:`settings_for`) rewrites the prompt before every run."""
    home = tmp_path / "home"
    project = tmp_path / "project"
    init_project(project)
    AgentLibrary(project).save(
        {
            "id": "dm",
            "name": "Dungeon master",
            "tool_ids_inventory": ["chat:RollDice"],
            "protocol": "tam",
            "prompt": "You are the dungeon master.\n\n{{{system:available_tools}}}",
        }
    )
    write_plugin(
        project / "plugins",
        "asker",
        {"permissions": {"hooks": ["hook:server:workflow:before-execute"]}},
        {"nodes/asker.py": HOOK_MODULE},
    )
    workflow = project / "workflows" / "ask-agent.json"
    workflow.parent.mkdir(parents=True, exist_ok=True)
    workflow.write_text(json.dumps(agent_workflow("dm")), encoding="utf-8")
    return home, project, workflow


def settings_for(home: Path, llm: ReplayLLMServer, policy: dict[str, Any]) -> None:
    write_settings(home, llm, policy)
    settings = json.loads((home / "settings.json").read_text(encoding="utf-8"))
    settings["plugins"] = {"enabled": ["asker"]}
    Settings.model_validate(settings)
    (home / "settings.json").write_text(json.dumps(settings), encoding="utf-8")


def run_agent(home: Path, project: Path, workflow: Path) -> subprocess.CompletedProcess[str]:
    return storyloom(
        "workflow",
        "run",
        str(workflow),
        "--project",
        str(project),
        "-i",
        "prompt=Can I open the door?",
        "--json",
        home=home,
    )


ROLL = tam_call("chat:RollDice", notation="1d20")


def test_workflow_run_runs_an_agent_that_calls_a_tool_and_applies_plugin_hooks(
    tmp_path: Path,
) -> None:
    home, project, workflow = agent_project(tmp_path)
    with ReplayLLMServer(models=["test-model"]) as llm:
        settings_for(home, llm, {"default": "allow"})
        llm.script(Reply(text=f"Rolling.\n\n{ROLL}"), Reply(text="The door opens."))
        done = run_agent(home, project, workflow)
        requests = llm.chat_requests
    assert done.returncode == 0, done.stderr + done.stdout
    report = json.loads(done.stdout)
    assert report["status"] == "completed", report["errors"]
    outputs = report["interfaceOutputs"]
    assert outputs["text"] == "Rolling.\n\nThe door opens."
    (step,) = outputs["steps"]
    assert step["tool"] == "chat:RollDice" and step["ok"] and step["decision"] == "allowed"
    assert 1 <= step["result"]["total"] <= 20
    first = requests[0]
    assert first["messages"][-1] == {
        "role": "user",
        "content": "Can I open the door? (asked through the hook)",
    }


def test_a_tool_that_asks_is_refused_in_the_command_line_instead_of_waiting(
    tmp_path: Path,
) -> None:
    home, project, workflow = agent_project(tmp_path)
    with ReplayLLMServer(models=["test-model"]) as llm:
        settings_for(home, llm, {"default": "ask"})
        llm.script(Reply(text=f"Rolling.\n\n{ROLL}"), Reply(text="No roll, then."))
        done = run_agent(home, project, workflow)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "chat:RollDice needs approval (policy ask); refused" in done.stderr
    (step,) = json.loads(done.stdout)["interfaceOutputs"]["steps"]
    assert step["tool"] == "chat:RollDice" and not step["ok"]
