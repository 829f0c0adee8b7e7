"""Agent turns for nodes: the :class:`~storyloom.workflow.agent_host.AgentHost` of a process.

The :class:`~storyloom.tools.tool_host.ToolHost` makes one :class:`AgentService`; the
server and the CLI put it in ``WorkflowServices.agents``, where the chat's LLM Invoker
and the ``agent:Run`` node find it. A turn reads the agent's profile afresh (an edit on
the Tools page holds from the next turn), documents exactly its inventory, picks the
protocol and runs the :class:`~storyloom.tools.agent_loop.AgentLoop`. Only the
inventory's tools run (a call outside it is refused before any rule, see
:class:`~storyloom.tools.tool_manager.ToolCallContext`); ``ask`` rules are put to a
person through the host's approval broker, and an "always" answer is saved as an
``allow`` rule in that agent's profile alone: it lifts the global ``ask`` for this agent
(:func:`~storyloom.tools.tool_policy.caller_action`), and no other agent inherits it.

The automatic protocol is native tool calls unless the endpoint refused them: the first
request of a turn carries ``tools``; a 400 answer before any text makes that turn go on
with TAM, and if TAM then works the endpoint (base URL and model) is remembered for the
life of the process, so later turns start with TAM (see ``docs/decisions.md``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from storyloom.core.errors import ConfigurationError, NotFound, StoryloomError
from storyloom.core.settings import ChatEndpoint
from storyloom.tools.agent_loop import AgentLoop, CallProtocol, LoopSetup
from storyloom.tools.agent_profile import AgentLibrary, AgentProfile
from storyloom.tools.approvals import ApprovalBroker
from storyloom.tools.text_tool_calls import run_text_tool_calls
from storyloom.tools.tool_docs import render_tool_docs
from storyloom.tools.tool_manager import ToolCallContext, ToolCaller, ToolManager
from storyloom.tools.tool_policy import ToolPolicy
from storyloom.workflow.agent_host import (
    AgentOutcome,
    AgentTurnRequest,
    ApprovalDecision,
    TextCallsOutcome,
    ToolStep,
)
from storyloom.workflow.node_type import NodeContext, WorkflowServices


class AgentToolHost(Protocol):
    """What a turn uses of the :class:`~storyloom.tools.tool_host.ToolHost`."""

    @property
    def project_dir(self) -> Path | None: ...

    @property
    def manager(self) -> ToolManager: ...

    @property
    def approvals(self) -> ApprovalBroker: ...

    def policy(self) -> ToolPolicy: ...


class AgentService:
    """Runs agent turns with the tools of one ``ToolHost``."""

    def __init__(self, host: AgentToolHost) -> None:
        self.host = host
        self.library = AgentLibrary(host.project_dir) if host.project_dir is not None else None
        self._no_native: set[tuple[str, str]] = set()
        """Endpoints (base URL, model) that answered 400 to ``tools``."""

    def has_profile(self, profile_id: str) -> bool:
        return self.library is not None and self.library.exists(profile_id)

    def profile(self, profile_id: str) -> AgentProfile:
        if self.library is None:
            raise NotFound(f"no agent profile {profile_id!r}: no project is open")
        return self.library.get(profile_id)

    def tool_docs(self, profile: AgentProfile) -> str:
        """``{{{system:available_tools}}}`` for ``profile``: its inventory's documentation,
        in inventory order, tools that do not exist left out."""
        manager = self.host.manager
        entries = []
        for tool_id in dict.fromkeys(profile.tool_ids_inventory):
            try:
                entries.append(manager.get(tool_id))
            except NotFound:
                continue
        return render_tool_docs(entries)

    async def run_text_calls(self, text: str, *, run_id: str, workflow_id: str) -> TextCallsOutcome:
        """A workflow's output calls as an agent's (caller ``workflow:<id>``): the global
        policy decides with no profile of its own (an ``ask`` waits for a person), the
        KB tools may read but not write, and every call is audited."""
        caller = ToolCaller("agent", f"workflow:{workflow_id}", run_id)
        broker = self.host.approvals

        async def approve(tool_id: str, arguments: dict[str, Any]) -> ApprovalDecision:
            return await broker.request(tool_id, arguments, caller)

        context = ToolCallContext(
            caller=caller, policy=ToolPolicy(default="allow"), approve=approve
        )
        done = await run_text_tool_calls(self.host.manager, text, context)
        steps = [
            ToolStep.model_validate(
                {
                    "step": 1,
                    "index": index,
                    "tool": r.tool,
                    "arguments": r.arguments,
                    "decision": r.decision,
                    "ok": r.ok,
                    "result": r.result,
                    "error": r.error,
                    "durationMs": r.duration_ms,
                    "auditId": r.audit_id,
                }
            )
            for index, r in enumerate(done.results)
        ]
        return TextCallsOutcome(text=done.text, steps=steps)

    async def run_turn(self, ctx: NodeContext, request: AgentTurnRequest) -> AgentOutcome:
        profile = self.profile(request.profile_id)
        endpoint = profile_endpoint(profile, request, ctx.services)
        if endpoint.api != "chat":
            # Tool calls need a chat API: a prompt string has no tools to call.
            raise ConfigurationError(
                f"agent profile {profile.id!r} calls tools, which needs a chat-completion "
                f"API; the connection it answers on uses {endpoint.api!r}: pick the chat API "
                "for it in Settings, or no agent profile in the chat's settings"
            )
        key = (endpoint.base_url, str(request.overrides.get("model") or endpoint.model))
        protocol: CallProtocol = "tam" if profile.protocol == "tam" else "native"
        if profile.protocol == "auto" and key in self._no_native:
            protocol = "tam"
        caller = ToolCaller(
            "agent", profile.id, f"{ctx.run_id}:{ctx.node_id}", request.conversation_id
        )
        broker = self.host.approvals

        async def approve(tool_id: str, arguments: dict[str, Any]) -> ApprovalDecision:
            return await broker.request(tool_id, arguments, caller)

        def on_always(tool_id: str) -> AgentProfile | None:
            # Saved for this agent only: one agent's "always" is no other agent's.
            if self.library is None or profile.policy.explicit(tool_id) == "allow":
                return None
            try:
                return self.library.allow_always(profile.id, tool_id)
            except (StoryloomError, OSError):
                # The profile went (or broke) meanwhile: the answer holds for this turn.
                return None

        setup = LoopSetup(
            profile=profile,
            manager=self.host.manager,
            endpoint=endpoint,
            protocol=protocol,
            tool_docs=self.tool_docs(profile),
            native_tools=(
                self.host.manager.openai_tools(list(profile.tool_ids_inventory))
                if protocol == "native"
                else []
            ),
            fallback_to_tam=profile.protocol == "auto",
            on_native_refused=lambda: self._no_native.add(key),
            approve=approve,
            on_always=on_always,
            run_workflow=ctx.run_workflow,
        )
        return await AgentLoop(ctx, request, setup).run()


def profile_endpoint(
    profile: AgentProfile, request: AgentTurnRequest, services: WorkflowServices
) -> ChatEndpoint:
    """The endpoint an agent turn talks to: the profile's own connection, else (for a
    profile on the user model) the connection the chat picked, else its role's model."""
    settings = services.require_settings()
    if profile.connection:
        return settings.endpoint_for(
            profile.model_role,
            profile.connection,
            chosen_in=f"the agent profile {profile.id!r}",
        )
    if profile.model_role == "user" and request.connection:
        return settings.endpoint_for(
            "user", request.connection, chosen_in=request.connection_chosen_in
        )
    return settings.endpoint_for(profile.model_role)
