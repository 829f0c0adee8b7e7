"""Asking an LLM: one chat completion, streamed token by token to the run's listeners."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from storyloom.core.plugin_markers import hookimpl
from storyloom.core.settings import ChatEndpoint
from storyloom.llm.chat import ChatClient
from storyloom.workflow.node_type import (
    ConfigField,
    NodeContext,
    NodeExpansion,
    NodeType,
    Slot,
    Suggestion,
    WorkflowServices,
)
from storyloom.workflow.slot_types import FLOAT, INTEGER, STRING

LLM_ROLES = ("user", "agent")
_OVERRIDES = ("model", "temperature", "max_tokens")


ROLE_FIELD = ConfigField(
    name="role",
    description="Which configured model answers: the user's (roleplay, writing) or "
    "the agent's (tools, planning)",
    default="user",
    strict=True,
    suggestions=(
        Suggestion(value="user", label="User model"),
        Suggestion(value="agent", label="Agent model"),
    ),
)
"""The config field of every node that asks an LLM: which configured model."""


class Chat(NodeType):
    """One chat completion against the user's or the agent's LLM (settings.json).

    Idempotent on purpose: the cache key covers the prompt, system text, history and every
    config value, and paying for a second, differently sampled answer to an unchanged
    prompt each time anything else in the workflow is edited is what a cache is there to
    avoid. A fresh answer comes from changing an input, a human ``retry`` (which bypasses
    the cache) or unfreezing and re-running. The endpoint (URL, model, parameters) is the
    node's fingerprint, so switching models in settings re-runs it.
    """

    type: ClassVar[str] = "llm:Chat"
    display_name: ClassVar[str] = "LLM chat"
    category: ClassVar[str] = "LLM"
    description: ClassVar[str] = (
        "Send a prompt (with an optional system text and history) to the user or agent "
        "model and stream the answer."
    )
    idempotent: ClassVar[bool] = True
    streaming: ClassVar[bool] = True
    inputs: ClassVar[tuple[Slot, ...]] = (
        Slot(
            name="prompt",
            type=STRING,
            description="The user message; the config value when unconnected",
        ),
        Slot(
            name="system",
            type=STRING,
            required=False,
            description="A system message sent first; the config value when unconnected",
        ),
        Slot(
            name="history",
            type="MESSAGES",
            required=False,
            description="Earlier messages [{role, content}] sent between system and prompt",
        ),
    )
    outputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="text", type=STRING, description="The model's answer"),
        Slot(
            name="messages",
            type="MESSAGES",
            description="The history with the prompt and the answer appended",
        ),
    )
    config: ClassVar[tuple[ConfigField, ...]] = (
        ConfigField(
            name="prompt",
            description="The prompt, used when the prompt input is not connected",
            widget="textarea",
        ),
        ConfigField(
            name="system",
            description="The system message, used when the system input is not connected",
            widget="textarea",
        ),
        ROLE_FIELD,
        ConfigField(name="model", description="Another model on the same endpoint (optional)"),
        ConfigField(
            name="temperature",
            type=FLOAT,
            description="Sampling temperature for this node (optional)",
            minimum=0,
            maximum=2,
        ),
        ConfigField(
            name="max_tokens",
            type=INTEGER,
            description="Longest answer in tokens for this node (optional)",
            minimum=1,
        ),
    )

    def fingerprint(self, config: Mapping[str, Any], services: WorkflowServices) -> str | None:
        endpoint = endpoint_for_role(config, services)
        # The key is never part of it: it changes who pays, not what is answered.
        return endpoint.model_dump_json(include={"base_url", "model", "parameters"})

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: dict[str, Any]
    ) -> dict[str, Any] | NodeExpansion:
        endpoint = endpoint_for_role(config, ctx.services)
        prompt = inputs.get("prompt", config.get("prompt")) or ""
        system = inputs.get("system", config.get("system"))
        history = [dict(m) for m in inputs.get("history") or []]
        user = {"role": "user", "content": str(prompt)}
        messages = [*history, user]
        if system:
            messages.insert(0, {"role": "system", "content": str(system)})
        overrides = {k: config[k] for k in _OVERRIDES if config.get(k) not in (None, "")}
        # An LLMError propagates as is: it says what went wrong and carries partial_text.
        async with ChatClient(endpoint) as client, client.stream(messages, **overrides) as stream:
            async for delta in stream:
                await ctx.emit(delta)
            text = stream.text
        return {"text": text, "messages": [*history, user, {"role": "assistant", "content": text}]}


def endpoint_for_role(config: Mapping[str, Any], services: WorkflowServices) -> ChatEndpoint:
    """The endpoint a node's ``role`` config names (see :data:`ROLE_FIELD`)."""
    settings = services.require_settings()
    return settings.agent_llm if config.get("role") == "agent" else settings.user_llm


@hookimpl
def storyloom_node_types() -> list[type[NodeType]]:
    return [Chat]
