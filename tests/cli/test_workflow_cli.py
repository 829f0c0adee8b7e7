"""``storyloom workflow run`` end to end: a real process over the same tool host as the
server, so ``agent:Run`` calls tools and enabled plugins' hooks apply."""

from __future__ import annotations

import json
from pathlib import Path

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


def test_workflow_run_runs_an_agent_that_calls_a_tool_and_applies_plugin_hooks(
    tmp_path: Path,
) -> None:
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
    with ReplayLLMServer(models=["test-model"]) as llm:
        write_settings(home, llm, {"default": "allow"})
        settings = json.loads((home / "settings.json").read_text(encoding="utf-8"))
        settings["plugins"] = {"enabled": ["asker"]}
        Settings.model_validate(settings)
        (home / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
        roll = tam_call("chat:RollDice", notation="1d20")
        llm.script(Reply(text=f"Rolling.\n\n{roll}"), Reply(text="The door opens."))
        done = storyloom(
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
