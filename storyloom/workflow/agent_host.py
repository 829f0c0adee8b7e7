"""What a node needs from the tools layer to run a tool-using agent turn.

The agent loop, the ToolManager and agent profiles live in ``storyloom.tools``, above the
chat and the workflow layers; a chat pipeline's LLM Invoker still has to run an agent
turn when the character has an agent profile. It does so through :class:`AgentHost`,
which the server (or the CLI) puts in :attr:`WorkflowServices.agents
<storyloom.workflow.node_type.WorkflowServices>`: the protocol sits here, the
implementation above.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from storyloom.workflow.node_type import NodeContext

ApprovalDecision = Literal["allow_once", "always", "deny"]
"""A person's answer to an ``ask`` rule: run it this time, allow the tool from now on
(an ``allow`` rule is saved), or refuse it."""

CallDecision = Literal["allowed", "approved", "denied", "invalid", "unknown", "skipped"]
"""What became of a call before it ran: allowed by policy, approved by a person, denied
(by policy, a hook or a person), its arguments failed the schema, no such tool, or not
tried because an earlier step of its TAM chain failed."""


class ToolStep(BaseModel):
    """One tool call of an agent turn and its outcome, as stored in the assistant
    message's ``extra["tool_steps"]`` and sent as ``chat:tool-step``."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    step: int = Field(description="The model round (1-based) the call was made in")
    index: int = Field(0, description="Order of the call within its round (0-based)")
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    call_id: str | None = Field(None, alias="callId", description="Native tool_call id")
    protocol: Literal["tam", "native"] = "tam"
    decision: CallDecision = "allowed"
    ok: bool = False
    result: Any = None
    error: str | None = None
    duration_ms: float = Field(0.0, alias="durationMs")
    stealth: bool = Field(
        False, description="Kept out of later prompts (SillyTavern's stealth tools)"
    )
    audit_id: int | None = Field(None, alias="auditId")


class ChatVariables(Protocol):
    """The turn's chat variables (the state chain), as chat tools read and write them.
    Writes are collected and applied by the State Updater with the reply's own."""

    def get(self, path: str) -> Any: ...

    def set(self, path: str, value: Any) -> None: ...


@dataclass
class AgentTurnRequest:
    """One agent turn asked for by a node: the prompt and what the tools may see."""

    profile_id: str
    messages: list[dict[str, Any]]
    overrides: dict[str, Any] = field(default_factory=dict)
    """Sampling values the node sends instead of the endpoint's."""
    turn_key: str = ""
    """Seeds what must replay on a swipe (``chat:RollDice``): the same key, the same roll."""
    conversation_id: str | None = None
    variables: ChatVariables | None = None
    on_text: Callable[[str], Awaitable[None]] | None = None
    """Visible text as it streams (tool blocks held back)."""
    on_step: Callable[[ToolStep], Awaitable[None]] | None = None
    connection: str | None = None
    """The connection the chat picked (used when the profile runs on the user model and
    names no connection of its own)."""
    connection_chosen_in: str = ""


@dataclass
class AgentOutcome:
    text: str
    """What the user reads: the model's text outside tool calls, over all rounds."""
    reasoning: str = ""
    steps: list[ToolStep] = field(default_factory=list)
    raw: str = ""
    """Every round's raw output, joined (tool blocks included)."""
    stopped_by: Literal["reply", "step_limit", "stopped"] = "reply"


@dataclass
class TextCallsOutcome:
    text: str
    """The output with every executed block removed."""
    steps: list[ToolStep] = field(default_factory=list)


class AgentHost(Protocol):
    """Runs agent turns for nodes; implemented by ``storyloom.tools``."""

    async def run_turn(self, ctx: NodeContext, request: AgentTurnRequest) -> AgentOutcome: ...

    def has_profile(self, profile_id: str) -> bool: ...

    async def run_text_calls(self, text: str, *, run_id: str, workflow_id: str) -> TextCallsOutcome:
        """Run the TAM blocks in a workflow's output ``text`` (``executeToolCalls``)."""
        ...
