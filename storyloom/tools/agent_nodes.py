"""The ``agent:Run`` node: one tool-using agent turn in a workflow (issue 14 §4).

It hands the prompt (or the messages) to the process's agent host with the agent profile
its config names; the loop deliberates, calls tools, feeds the results back and repeats
(:mod:`storyloom.tools.agent_loop`). The visible text streams as the node's output; every
tool call appears in the run log as ``node:tool-step``; the outputs are the text, the
steps and the raw output of every round.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from storyloom.chat.prompt.shuttle_nodes import MESSAGES
from storyloom.core.errors import StoryloomError
from storyloom.core.plugin_markers import hookimpl
from storyloom.workflow.agent_host import AgentTurnRequest
from storyloom.workflow.node_type import NodeConfig, NodeContext, NodeType, Slot
from storyloom.workflow.slot_types import ARRAY, STRING


class AgentRunError(StoryloomError):
    """The node cannot start the turn (no agent host, no profile, no prompt)."""


class AgentRunConfig(NodeConfig):
    profile: str = Field("", description="The agent profile (agents/<id>.json) to run")


class AgentRun(NodeType[AgentRunConfig]):
    type: ClassVar[str] = "agent:Run"
    display_name: ClassVar[str] = "Agent"
    category: ClassVar[str] = "Agents"
    description: ClassVar[str] = (
        "Runs a tool-using agent turn: the model answers, its tool calls (TAM or native) "
        "run under the profile's policy, the results go back, until it answers without "
        "calls or reaches its step limit. Every call shows in the run log."
    )
    idempotent: ClassVar[bool] = False
    streaming: ClassVar[bool] = True
    inputs: ClassVar[tuple[Slot, ...]] = (
        Slot(
            name="prompt",
            type=STRING,
            required=False,
            default="",
            description="The user's message to the agent",
        ),
        Slot(
            name="messages",
            type=MESSAGES,
            required=False,
            description="Chat messages so far [{role, content}] (the prompt follows them)",
        ),
    )
    outputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="text", type=STRING, description="The agent's answer, tool blocks removed"),
        Slot(name="steps", type=ARRAY, description="Every tool call and its result"),
        Slot(name="raw", type=STRING, description="Every round's output as it came"),
    )

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: AgentRunConfig
    ) -> dict[str, Any]:
        agents = ctx.services.agents
        if agents is None:
            raise AgentRunError("agents are not available here (no tool host in this process)")
        if not config.profile:
            raise AgentRunError("config profile: name the agent profile to run")
        if not agents.has_profile(config.profile):
            raise AgentRunError(f"config profile: no agent profile {config.profile!r}")
        messages = _messages(inputs)
        request = AgentTurnRequest(
            profile_id=config.profile,
            messages=messages,
            turn_key=f"{ctx.run_id}:{ctx.node_id}",
            on_text=ctx.emit,
        )
        outcome = await agents.run_turn(ctx, request)
        return {
            "text": outcome.text,
            "steps": [s.model_dump(mode="json", by_alias=True) for s in outcome.steps],
            "raw": outcome.raw,
        }


def _messages(inputs: dict[str, Any]) -> list[dict[str, Any]]:
    raw = inputs.get("messages")
    messages: list[dict[str, Any]] = []
    if raw is not None:
        if not isinstance(raw, list) or not all(isinstance(m, dict) for m in raw):
            raise AgentRunError(f"input messages: expected a list of messages, got {raw!r}")
        messages = [dict(m) for m in raw]
    prompt = inputs.get("prompt")
    if prompt is not None and not isinstance(prompt, str):
        raise AgentRunError(f"input prompt: expected text, got {prompt!r}")
    if prompt:
        messages.append({"role": "user", "content": prompt})
    if not messages:
        raise AgentRunError("input prompt: give the agent a prompt or messages")
    return messages


NODE_TYPES: tuple[type[NodeType], ...] = (AgentRun,)


@hookimpl
def storyloom_node_types() -> list[type[NodeType]]:
    return list(NODE_TYPES)
