"""What the agent tests share: a real ToolHost (as the CLI opens it) over a data folder
and a project in a temporary folder, its models answered by the replay server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storyloom.core.settings import ChatEndpoint, Settings, SettingsStore, ToolPolicySettings
from storyloom.plugins import node_registry
from storyloom.project.project_file import init_project
from storyloom.testing.replay_server import ReplayLLMServer
from storyloom.tools.agent_profile import AgentProfile
from storyloom.tools.approvals import PendingApproval
from storyloom.tools.tool_host import ToolHost, open_tool_host
from storyloom.workflow.agent_host import ApprovalDecision
from storyloom.workflow.events import NodeStreaming, NodeToolStep, RunEvent
from storyloom.workflow.runner import RunResult
from storyloom.workflow.workflow_file import Workflow

START = "<|[REQUEST_TOOL]|>"
END = "<|[END_TOOL]|>"


def tam_call(tool: str, **arguments: str) -> str:
    """One TAM block calling ``tool``."""
    lines = [START, f"command:「始」{tool}「末」"]
    lines += [f"{key}:「始」{value}「末」" for key, value in arguments.items()]
    return "\n".join([*lines, END])


def tam_chain(*calls: tuple[str, dict[str, str]]) -> str:
    """One chained TAM block: command1, command2…"""
    lines = [START]
    for number, (tool, arguments) in enumerate(calls, start=1):
        lines.append(f"command{number}:「始」{tool}「末」")
        lines += [f"{key}{number}:「始」{value}「末」" for key, value in arguments.items()]
    return "\n".join([*lines, END])


def agent_workflow(profile: str) -> dict[str, Any]:
    """prompt → agent:Run(profile) → text, steps, raw."""

    def edge(source: str, target: str) -> dict[str, str]:
        s_node, s_slot = source.split(".")
        t_node, t_slot = target.split(".")
        return {"source": s_node, "sourceSlot": s_slot, "target": t_node, "targetSlot": t_slot}

    return {
        "id": "ask-agent",
        "nodes": [
            {"id": "in", "type": "core:GroupInput"},
            {"id": "agent", "type": "agent:Run", "config": {"profile": profile}},
            {"id": "out", "type": "core:GroupOutput"},
        ],
        "edges": [
            edge("in.prompt", "agent.prompt"),
            edge("agent.text", "out.text"),
            edge("agent.steps", "out.steps"),
            edge("agent.raw", "out.raw"),
        ],
        "interfaceInputs": {"prompt": {"dataFlowType": "STRING", "required": True}},
        "interfaceOutputs": {
            "text": {"dataFlowType": "STRING"},
            "steps": {"dataFlowType": "ARRAY"},
            "raw": {"dataFlowType": "STRING"},
        },
    }


@dataclass
class AgentRun:
    result: RunResult
    events: list[RunEvent]

    @property
    def outputs(self) -> dict[str, Any]:
        return self.result.interface_outputs

    @property
    def streamed(self) -> str:
        return "".join(e.chunk for e in self.events if isinstance(e, NodeStreaming))

    @property
    def logged_steps(self) -> list[dict[str, Any]]:
        return [e.step for e in self.events if isinstance(e, NodeToolStep)]


@dataclass
class AgentWorld:
    home: Path
    project: Path
    host: ToolHost
    llm: ReplayLLMServer
    asked: list[PendingApproval] = field(default_factory=list)
    answers: list[ApprovalDecision] = field(default_factory=list)
    """What the person answers to each ``ask``, in order (none left: nobody answers)."""

    def save_profile(self, **fields: Any) -> AgentProfile:
        data: dict[str, Any] = {"id": "dm", "name": "Dungeon master", **fields}
        library = self.host.agents.library
        assert library is not None
        return library.save(data)

    def profile_file(self, agent_id: str = "dm") -> dict[str, Any]:
        data: dict[str, Any] = json.loads(
            (self.project / "agents" / f"{agent_id}.json").read_text(encoding="utf-8")
        )
        return data

    def _on_approval(self, approval: PendingApproval) -> None:
        self.asked.append(approval)
        if self.answers:
            self.host.approvals.answer(approval.id, self.answers.pop(0))

    async def run_agent(self, prompt: str, profile: str = "dm") -> AgentRun:
        events: list[RunEvent] = []
        workflow = Workflow.model_validate(agent_workflow(profile))
        result = await self.host.runner.run(
            workflow, inputs={"prompt": prompt}, on_event=events.append
        )
        return AgentRun(result, events)


def write_settings(home: Path, llm: ReplayLLMServer, policy: dict[str, Any]) -> None:
    endpoint = ChatEndpoint(
        base_url=llm.url, model="test-model", max_retries=0, timeout_s=10, connect_timeout_s=5
    )
    SettingsStore(home).save(
        Settings(
            user_llm=endpoint,
            agent_llm=endpoint,
            tool_policy=ToolPolicySettings.model_validate(policy),
        )
    )


@asynccontextmanager
async def agent_world(
    tmp_path: Path, llm: ReplayLLMServer, *, policy: dict[str, Any] | None = None
) -> AsyncIterator[AgentWorld]:
    """A tool host over ``tmp_path`` whose global policy is ``policy`` (default: allow
    everything), answered by ``llm``."""
    home = tmp_path / "home"
    project = tmp_path / "project"
    init_project(project)
    write_settings(home, llm, policy or {"default": "allow"})
    host = open_tool_host(home, project, node_registry=node_registry(entry_points=False))
    world = AgentWorld(home, project, host, llm)
    host.approvals.on_request = world._on_approval
    try:
        yield world
    finally:
        await host.aclose()
        host.database.close()
