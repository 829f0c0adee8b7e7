"""``/api/tools``: the registry, calling a tool as the person at the browser, the audit
log, the global policy and the approvals that wait for an answer (seed 003 §11.1).

A call from the Tools page is the user's own: an ``ask`` rule counts as the approval it
wants, a ``deny`` rule still denies. A refused or failed call is an answer (200) with its
``decision`` and ``error``, like every caller gets from the ToolManager; only a tool id
that names no tool is a 404.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from storyloom.core.settings import SettingsUpdate, ToolPolicySettings
from storyloom.server.api_errors import error_responses
from storyloom.server.settings_api import save_settings
from storyloom.server.state import ServerState, server_state
from storyloom.tools.approvals import PendingApproval
from storyloom.tools.audit_log import AuditEntry
from storyloom.tools.config_options import ConfigOption
from storyloom.tools.text_tool_calls import TextToolCalls, run_text_tool_calls
from storyloom.tools.tool_definition import ToolEntry
from storyloom.tools.tool_manager import ToolCallContext, ToolCaller, ToolCallResult
from storyloom.tools.tool_policy import PolicyAction, PolicyRule, ToolPolicy
from storyloom.workflow.agent_host import ApprovalDecision

router = APIRouter(prefix="/api/tools", tags=["tools"])

TAM_CALLER = "tam-endpoint"
"""The caller name the audit log shows for calls sent as text to ``POST /api/tools/tam``."""

USER_CALLER = "tools-page"
"""The caller name the audit log shows for a call tried from the Tools page."""


class _Camel(BaseModel):
    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)


class ToolInfo(_Camel):
    """One tool as the Tools page lists it."""

    id: str
    display_name: str = Field(alias="displayName")
    description: str
    parameters: dict[str, Any] = Field(description="JSON Schema (type object) of the arguments")
    implementation: str = Field(description="workflow, node, service, script or mcp")
    source: str = Field(description="builtin, plugin:<name>, workflow, node or mcp:<server>")
    plugin: str | None = None
    available: bool
    unavailable_reason: str | None = Field(default=None, alias="unavailableReason")
    config_schema: list[ConfigOption] = Field(default_factory=list, alias="configSchema")

    @classmethod
    def of(cls, entry: ToolEntry) -> ToolInfo:
        definition = entry.definition
        return cls(
            id=definition.id,
            display_name=definition.display_name or definition.id,
            description=definition.description,
            parameters=definition.parameters,
            implementation=entry.implementation_type,
            source=entry.source,
            plugin=entry.plugin,
            available=entry.available,
            unavailable_reason=entry.unavailable_reason,
            config_schema=list(definition.config_schema),
        )


class ToolCallRequest(_Camel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    tool: str = Field(min_length=1, description="The tool id")
    arguments: dict[str, Any] = Field(default_factory=dict)


class TamTextRequest(_Camel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    text: str = Field(description="Text holding <|[REQUEST_TOOL]|> blocks")


class AuditPage(_Camel):
    entries: list[AuditEntry]
    total: int = Field(description="How many calls the filter keeps, over all pages")


class PolicyView(_Camel):
    """The global tool policy: rules by tool-id glob (the strictest matching rule wins),
    and what a tool no rule matches gets."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    rules: list[PolicyRule] = Field(default_factory=list)
    default: PolicyAction = "ask"


class ApprovalAnswer(_Camel):
    model_config = ConfigDict(extra="forbid")

    decision: ApprovalDecision


def _host(request: Request) -> Any:
    return server_state(request).tools


@router.get("", response_model=list[ToolInfo])
async def list_tools(request: Request) -> list[ToolInfo]:
    """Every registered tool, available or not (with the reason)."""
    # On the event loop (async): the registry asks the plugins, which load there.
    return [ToolInfo.of(entry) for entry in _host(request).manager.entries()]


@router.post("/call", response_model=ToolCallResult, responses=error_responses(404, 422))
async def call_tool(request: Request, body: ToolCallRequest) -> ToolCallResult:
    """Run one tool as the user: ``ask`` counts as allowed, ``deny`` answers decision
    ``denied``; arguments that fail the schema answer decision ``invalid``."""
    host = _host(request)
    host.manager.get(body.tool)  # an id that names no tool is a 404, not a refused call
    context = ToolCallContext(caller=ToolCaller(kind="user", name=USER_CALLER))
    result: ToolCallResult = await host.manager.call(body.tool, body.arguments, context)
    return result


@router.post("/tam", response_model=TextToolCalls, responses=error_responses(422))
async def call_tools_in_text(request: Request, body: TamTextRequest) -> TextToolCalls:
    """Run the TAM blocks in ``text`` (seed 003 §12.2) as an ``api`` caller: the global
    policy decides (``ask`` counts as allowed, as for every api caller; ``deny`` denies),
    and each call is audited."""
    host = _host(request)
    context = ToolCallContext(caller=ToolCaller(kind="api", name=TAM_CALLER))
    return await run_text_tool_calls(host.manager, body.text, context)


@router.get("/audit", response_model=AuditPage)
def list_audit(
    request: Request,
    limit: int = Query(50, ge=1, le=500),
    offset: int = Query(0, ge=0, le=2**62),
    tool: str | None = Query(None, description="Only this tool's calls"),
) -> AuditPage:
    """Calls newest first, with who made them and what came of them."""
    entries, total = _host(request).audit.list(limit=limit, offset=offset, tool=tool or None)
    return AuditPage(entries=entries, total=total)


@router.get("/policy", response_model=PolicyView)
def get_policy(request: Request) -> PolicyView:
    policy: ToolPolicy = _host(request).policy()
    return PolicyView(rules=policy.rules, default=policy.default)


@router.put("/policy", response_model=PolicyView, responses=error_responses(422))
async def put_policy(request: Request, body: PolicyView) -> PolicyView:
    """Replace the global policy (kept in settings.json as ``tool_policy``)."""
    state = server_state(request)
    policy = ToolPolicy(rules=body.rules, default=body.default)
    await _save_policy(state, policy)
    saved: ToolPolicy = state.tools.policy()
    return PolicyView(rules=saved.rules, default=saved.default)


async def _save_policy(state: ServerState, policy: ToolPolicy) -> None:
    update = SettingsUpdate(tool_policy=ToolPolicySettings.model_validate(policy.model_dump()))
    async with state.settings_lock:
        save_settings(state, state.loaded.from_file.with_update(update))


@router.get("/approvals", response_model=list[PendingApproval])
def list_approvals(request: Request) -> list[PendingApproval]:
    """Tool calls waiting for a person's answer, oldest first."""
    pending: list[PendingApproval] = _host(request).approvals.pending()
    return pending


@router.post("/approvals/{approval_id}", status_code=204, responses=error_responses(404, 422))
async def answer_approval(request: Request, approval_id: str, body: ApprovalAnswer) -> Response:
    """Answer a waiting call; 404 when nothing waits under ``approval_id`` (answered
    already, or its run ended)."""
    # On the event loop (async): the answer is published to every tab through the hub.
    _host(request).approvals.answer(approval_id, body.decision)
    return Response(status_code=204)
