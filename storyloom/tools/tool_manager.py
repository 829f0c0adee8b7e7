"""The ToolManager: the one way any caller (an agent, a person on the Tools page or the
CLI, an MCP client, the API) runs a tool (seed 003 12).

A call goes: find the tool → an agent's call outside its ``tool_ids_inventory`` is
refused here, whatever any policy says → check the arguments against its
``parameters`` → the policy's action (the global policy combined with the caller's,
strictest wins, except that the caller's own explicit allow answers a global ask; the
``storyloom_tool_before_call`` hook may only make it stricter) → ``ask`` is answered by
a person through ``context.approve``, or, with nobody to ask, counts as allowed for a
person's own call (user, cli, api) and as denied for an agent's or an MCP client's →
dispatch by implementation within ``context.timeout_s`` → one audit row → a
:class:`ToolCallResult`. A tool that fails, times out or is refused is a result with
``ok=False`` and an error the model can read, never an exception.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import to_jsonable_python

from storyloom.core.errors import NotFound, StoryloomError
from storyloom.tools.audit_log import AuditLog
from storyloom.tools.tool_definition import NodeImpl, ScriptImpl, ServiceImpl, ToolEntry
from storyloom.tools.tool_names import to_function_name
from storyloom.tools.tool_policy import (
    STRICTNESS,
    KbAccess,
    PolicyAction,
    ToolPolicy,
    caller_action,
    strictest,
)
from storyloom.tools.tool_registry import ToolRegistry
from storyloom.workflow.agent_host import ApprovalDecision, CallDecision, ChatVariables
from storyloom.workflow.workflow_file import load_workflow_file
from storyloom.workflow.workflow_tools import (
    ToolArgumentsInvalid,
    check_arguments,
    run_node_tool,
    run_workflow_tool,
)

if TYPE_CHECKING:
    from storyloom.project.knowledge_service import KnowledgeService
    from storyloom.workflow.runner import WorkflowRunner
    from storyloom.workflow.workflow_file import Workflow

log = logging.getLogger(__name__)

CallerKind = Literal["agent", "user", "cli", "mcp", "api"]
PERSON_CALLERS: frozenset[str] = frozenset({"user", "cli", "api"})
"""Callers whose own call is the approval an ``ask`` rule wants."""


@dataclass(frozen=True)
class ToolCaller:
    kind: CallerKind
    name: str
    run_id: str | None = None
    conversation_id: str | None = None


@dataclass
class ToolCallContext:
    """Who calls, under which policy, and what the tools may reach.

    ``approve`` answers ``ask`` rules (None: allowed for user/cli/api callers, denied
    for agent/mcp). ``turn_key`` seeds what must replay on a swipe (``chat:RollDice``);
    ``variables`` are the turn's chat variables (None outside a chat). ``on_always``
    saves an allow rule when a person answers "always". ``knowledge`` is filled by the
    ToolManager for the KB tools; ``counters`` numbers calls within one turn (reuse the
    context across a turn's calls so the n-th roll stays the n-th roll).
    """

    caller: ToolCaller
    policy: ToolPolicy = field(default_factory=ToolPolicy)
    kb_access: KbAccess = field(default_factory=KbAccess)
    approve: Callable[[str, dict[str, Any]], Awaitable[ApprovalDecision]] | None = None
    turn_key: str = ""
    variables: ChatVariables | None = None
    timeout_s: float = 30.0
    on_always: Callable[[str], None] | None = None
    inventory: tuple[str, ...] | None = None
    """An agent's ``tool_ids_inventory``: only these tools may run, whatever the policy
    says, and a call outside it is refused before any rule is asked (so never put to a
    person). ``None``: no inventory (a person, the CLI, the API, an MCP client)."""
    knowledge: KnowledgeService | None = None
    counters: dict[str, int] = field(default_factory=dict)

    def next_ordinal(self, name: str) -> int:
        """1 for the first ``name`` of this context, then 2, 3..."""
        self.counters[name] = self.counters.get(name, 0) + 1
        return self.counters[name]


class ToolCallResult(BaseModel):
    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    decision: CallDecision
    ok: bool
    result: Any = None
    error: str | None = None
    duration_ms: float = Field(0.0, alias="durationMs")
    audit_id: int | None = Field(None, alias="auditId")


class _Refused(Exception):
    def __init__(self, decision: CallDecision, error: str) -> None:
        self.decision: CallDecision = decision
        self.error = error
        super().__init__(error)


def _check_inventory(tool_id: str, context: ToolCallContext) -> None:
    inventory = context.inventory
    if inventory is None or tool_id in inventory:
        return
    listed = ", ".join(inventory) if inventory else "no tools"
    raise _Refused(
        "denied",
        f"{tool_id}: not in agent {context.caller.name!r}'s tool inventory "
        f"(tool_ids_inventory), which lists {listed}",
    )


class ToolManager:
    def __init__(
        self,
        registry: ToolRegistry,
        audit: AuditLog,
        runner: WorkflowRunner,
        *,
        policy: Callable[[], ToolPolicy] = ToolPolicy,
        hooks: Callable[[], Any] | None = None,
        knowledge: KnowledgeService | None = None,
    ) -> None:
        """``policy``: the global policy, read at each call; ``hooks``: the plugins' hook
        relay, read at each call (it changes when plugins are enabled)."""
        self.registry = registry
        self.audit = audit
        self.runner = runner
        self.policy = policy
        self.hooks = hooks
        self.knowledge = knowledge

    def entries(self) -> list[ToolEntry]:
        return self.registry.entries()

    def get(self, tool_id: str) -> ToolEntry:
        return self.registry.get(tool_id)

    def openai_tools(self, ids: list[str]) -> list[dict[str, Any]]:
        """The native ``tools`` parameter for ``ids``, names mapped by
        :func:`~storyloom.tools.tool_names.to_function_name`. Tools that do not exist or
        cannot run now are left out (the model could only fail with them)."""
        tools: list[dict[str, Any]] = []
        for tool_id in ids:
            entry = self.registry.find(tool_id)
            if entry is None or not entry.available:
                continue
            tools.append(
                {
                    "type": "function",
                    "function": {
                        "name": to_function_name(tool_id),
                        "description": entry.definition.description,
                        "parameters": entry.definition.parameters,
                    },
                }
            )
        return tools

    def action(self, tool_id: str, arguments: Mapping[str, Any], policy: ToolPolicy) -> str:
        """The policy's answer for this call: global and ``policy`` combined
        (:func:`~storyloom.tools.tool_policy.caller_action`), then the
        hooks, which may only tighten it."""
        action: PolicyAction = caller_action(self.policy(), policy, tool_id)
        relay = self.hooks() if self.hooks is not None else None
        hook = getattr(relay, "storyloom_tool_before_call", None) if relay is not None else None
        if hook is None:
            return action
        try:
            answers = hook(tool_id=tool_id, arguments=dict(arguments), action=action)
        except Exception as exc:  # a broken hook must not open a door
            log.warning("storyloom_tool_before_call failed for %s: %s", tool_id, exc)
            return "deny"
        tighter = [a for a in answers or [] if isinstance(a, str) and a in STRICTNESS]
        return strictest([action, *tighter])

    async def call(
        self, tool_id: str, arguments: Mapping[str, Any], context: ToolCallContext
    ) -> ToolCallResult:
        """Run one call through policy, dispatch and audit; never raises for a tool's
        failure (a cancelled caller still gets ``CancelledError``, after the audit)."""
        started = time.perf_counter()
        args = dict(arguments) if isinstance(arguments, Mapping) else {}
        decision: CallDecision = "allowed"
        try:
            entry = self._find(tool_id)
            _check_inventory(tool_id, context)
            try:
                check_arguments(tool_id, entry.definition.parameters, arguments)
            except ToolArgumentsInvalid as exc:
                raise _Refused("invalid", str(exc)) from None
            decision = await self._decide(tool_id, args, context)
            result = await asyncio.wait_for(
                self._dispatch(entry, args, self._with_services(context)), context.timeout_s
            )
            result = _jsonable(result)
        except _Refused as refused:
            return self._finish(
                tool_id, args, context, refused.decision, started, None, refused.error
            )
        except TimeoutError:
            error = f"{tool_id}: timed out after {context.timeout_s:g} s"
            return self._finish(tool_id, args, context, decision, started, None, error)
        except asyncio.CancelledError:
            self._finish(tool_id, args, context, decision, started, None, "cancelled")
            raise
        except Exception as exc:
            return self._finish(tool_id, args, context, decision, started, None, _reason(exc))
        return self._finish(tool_id, args, context, decision, started, result, None, ok=True)

    def _find(self, tool_id: str) -> ToolEntry:
        try:
            entry = self.registry.get(tool_id)
        except NotFound:
            raise _Refused("unknown", f"no tool {tool_id!r}") from None
        if not entry.available:
            reason = entry.unavailable_reason or "it cannot run now"
            raise _Refused("unknown", f"tool {tool_id!r} is not available: {reason}")
        return entry

    async def _decide(
        self, tool_id: str, arguments: dict[str, Any], context: ToolCallContext
    ) -> CallDecision:
        action = self.action(tool_id, arguments, context.policy)
        if action == "deny":
            raise _Refused("denied", f"{tool_id}: denied by the tool policy")
        if action == "allow":
            return "allowed"
        if context.approve is None:
            if context.caller.kind in PERSON_CALLERS:
                return "allowed"
            raise _Refused(
                "denied", f"{tool_id}: needs a person's approval and there is nobody to ask"
            )
        try:
            answer = await context.approve(tool_id, dict(arguments))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise _Refused("denied", f"{tool_id}: approval failed ({_reason(exc)})") from None
        if answer == "deny":
            raise _Refused("denied", f"{tool_id}: denied by the person asked")
        if answer == "always" and context.on_always is not None:
            context.on_always(tool_id)
        return "approved"

    def _with_services(self, context: ToolCallContext) -> ToolCallContext:
        if context.knowledge is not None or self.knowledge is None:
            return context
        # Shallow: the counters stay shared with the caller's context.
        return replace(context, knowledge=self.knowledge)

    async def _dispatch(
        self, entry: ToolEntry, arguments: dict[str, Any], context: ToolCallContext
    ) -> Any:
        impl = entry.definition.implementation
        if entry.function is not None:
            return await _call_function(entry, arguments, context)
        if isinstance(impl, ServiceImpl | ScriptImpl):
            raise StoryloomError(f"{entry.id}: nothing runs this {impl.type} tool")
        if isinstance(impl, NodeImpl):
            return await run_node_tool(
                self.runner, self.registry.node_registry, impl.node, {**arguments, **impl.config}
            )
        return await run_workflow_tool(self.runner, self._workflow(entry), arguments)

    def _workflow(self, entry: ToolEntry) -> Workflow:
        impl = entry.definition.implementation
        workflow_id = getattr(impl, "workflow", "")
        if entry.workflow_file is not None:
            workflow = load_workflow_file(entry.workflow_file)
            return workflow.model_copy(update={"id": workflow_id})
        library = self.registry.workflows
        if library is None or not library.exists(workflow_id):
            raise NotFound(f"{entry.id}: workflow {workflow_id!r} is gone")
        return library.load(workflow_id)

    def _finish(
        self,
        tool_id: str,
        arguments: dict[str, Any],
        context: ToolCallContext,
        decision: CallDecision,
        started: float,
        result: Any,
        error: str | None,
        *,
        ok: bool = False,
    ) -> ToolCallResult:
        duration_ms = (time.perf_counter() - started) * 1000
        caller = context.caller
        audit_id: int | None
        try:
            audit_id = self.audit.record(
                caller_kind=caller.kind,
                caller_name=caller.name,
                tool=tool_id,
                arguments=arguments,
                decision=decision,
                ok=ok,
                result=result,
                error=error,
                duration_ms=duration_ms,
                run_id=caller.run_id,
                conversation_id=caller.conversation_id,
            )
        except Exception as exc:  # the call happened; a full disk must not hide its result
            log.error("could not write the audit row of %s: %s", tool_id, exc)
            audit_id = None
        return ToolCallResult(
            tool=tool_id,
            arguments=arguments,
            decision=decision,
            ok=ok,
            result=result,
            error=error,
            duration_ms=duration_ms,
            audit_id=audit_id,
        )


async def _call_function(
    entry: ToolEntry, arguments: dict[str, Any], context: ToolCallContext
) -> Any:
    function = entry.function
    assert function is not None
    if inspect.iscoroutinefunction(function):
        result = await function(arguments, context)
    else:
        # A plain function may block (files, network); it runs in a worker thread. A
        # timeout abandons the thread, which Python cannot stop.
        result = await asyncio.to_thread(function, arguments, context)
    if inspect.isawaitable(result):
        result = await result
    return result


def _jsonable(value: Any) -> Any:
    try:
        plain = to_jsonable_python(value)
        json.dumps(plain)
    except (TypeError, ValueError) as exc:
        raise StoryloomError(f"the tool's result is not JSON ({exc})") from None
    return plain


def _reason(exc: BaseException) -> str:
    if isinstance(exc, StoryloomError):
        return str(exc)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def match_arguments(parameters: Mapping[str, Any], raw: Mapping[str, str]) -> dict[str, Any]:
    """TAM arguments (strings, keys as the model wrote them) for a tool's ``parameters``:
    keys matched case- and underscore-insensitively; values parsed as JSON where the
    parameter is not a string (``"3"`` → 3, ``"true"`` → true). Keys that match nothing
    and values that do not parse pass through, for the schema check to report."""
    properties: Mapping[str, Any] = parameters.get("properties", {})

    def fold(key: str) -> str:
        return key.replace("_", "").replace("-", "").casefold()

    by_fold = {fold(name): name for name in properties}
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = key if key in properties else by_fold.get(fold(key), key)
        out[name] = _typed_value(properties.get(name, {}), value)
    return out


def _typed_value(schema: Any, value: Any) -> Any:
    if not isinstance(value, str) or not isinstance(schema, Mapping):
        return value
    kinds = schema.get("type")
    kinds = {kinds} if isinstance(kinds, str) else set(kinds or ())
    if not kinds or "string" in kinds:
        return value
    try:
        return json.loads(value.strip())
    except ValueError:
        return value
