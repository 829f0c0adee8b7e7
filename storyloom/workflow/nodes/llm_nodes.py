"""Asking an LLM: one chat completion, streamed token by token to the run's listeners."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from storyloom.core.plugin_markers import hookimpl
from storyloom.core.settings import ChatEndpoint
from storyloom.llm.chat import ChatClient
from storyloom.workflow.node_type import (
    TEXTAREA,
    NodeConfig,
    NodeContext,
    NodeExpansion,
    NodeType,
    Slot,
    Suggestion,
    Suggestions,
    WorkflowServices,
)
from storyloom.workflow.slot_types import STRING

LlmRole = Annotated[
    Literal["user", "agent"],
    Suggestions(
        Suggestion(value="user", label="User model"),
        Suggestion(value="agent", label="Agent model"),
    ),
    Field(
        description="Which configured model answers: the user's (roleplay, writing) or "
        "the agent's (tools, planning)"
    ),
]
"""The config field of every node that asks an LLM: which configured model."""


class ChatConfig(NodeConfig):
    prompt: Annotated[str | None, TEXTAREA] = Field(
        None, description="The prompt, used when the prompt input is not connected"
    )
    system: Annotated[str | None, TEXTAREA] = Field(
        None, description="The system message, used when the system input is not connected"
    )
    role: LlmRole = "user"
    model: str | None = Field(None, description="Another model on the same endpoint (optional)")
    temperature: float | None = Field(
        None, ge=0, le=2, description="Sampling temperature for this node (optional)"
    )
    max_tokens: int | None = Field(
        None, ge=1, description="Longest answer in tokens for this node (optional)"
    )


class Chat(NodeType[ChatConfig]):
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

    def fingerprint(self, config: ChatConfig, services: WorkflowServices) -> str | None:
        endpoint = endpoint_for_role(config.role, services)
        # The key is never part of it: it changes who pays, not what is answered.
        return endpoint.model_dump_json(include={"base_url", "model", "parameters"})

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: ChatConfig
    ) -> dict[str, Any] | NodeExpansion:
        endpoint = endpoint_for_role(config.role, ctx.services)
        prompt = inputs.get("prompt", config.prompt) or ""
        system = inputs.get("system", config.system)
        history = [dict(m) for m in inputs.get("history") or []]
        user = {"role": "user", "content": str(prompt)}
        messages = [*history, user]
        if system:
            messages.insert(0, {"role": "system", "content": str(system)})
        overrides = config.model_dump(
            include={"model", "temperature", "max_tokens"}, exclude_none=True
        )
        if overrides.get("model") == "":
            del overrides["model"]
        # An LLMError propagates as is: it says what went wrong and carries partial_text.
        async with ChatClient(endpoint) as client, client.stream(messages, **overrides) as stream:
            async for delta in stream:
                await ctx.emit(delta)
            text = stream.text
        return {"text": text, "messages": [*history, user, {"role": "assistant", "content": text}]}


def endpoint_for_role(role: str, services: WorkflowServices) -> ChatEndpoint:
    """The endpoint a node's ``role`` config names (see :data:`LlmRole`); a node that
    knows of a chosen connection asks ``Settings.endpoint_for`` instead."""
    return services.require_settings().endpoint_for(role)


@hookimpl
def storyloom_node_types() -> list[type[NodeType]]:
    return [Chat]
