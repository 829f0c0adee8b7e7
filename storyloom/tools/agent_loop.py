"""One agent turn: deliberate, parse the calls, dispatch them, feed the results back, repeat.

Each round the model (or the profile's deliberation workflow) answers the messages so far.
Its visible text streams to the caller as it comes (TAM blocks held back by
:class:`~storyloom.tools.tam_stream.TamStreamFilter`); its calls, TAM blocks or native
``tool_calls``, go one by one through the :class:`~storyloom.tools.tool_manager.ToolManager`
(policy, approval, validation, audit, timeout); every call becomes a
:class:`~storyloom.workflow.agent_host.ToolStep`, reported as it ends. The results go back
to the model (TAM: the round's raw output as the assistant's message, then the results in
the TAM result format as the user's; native: the assistant's ``tool_calls`` and one
``tool`` message per call) and the next round starts, until a round makes no call, the
profile's ``max_steps`` rounds have made calls, or the run is stopped.

A call that fails (denied, bad arguments, raised, timed out) fails only its step: the
model reads the error. In a TAM chain (``command1``, ``command2``… of one block) a failed
step skips the rest of that block, and the skipped steps are reported as such. A model
failure after text was shown raises the :class:`~storyloom.llm.errors.LLMError` with
``partial_text`` set to everything shown so far, as a plain LLM call would.

Visible text of the rounds is joined with a blank line; the stream sends exactly the text
the outcome holds (a round's trailing blanks are held until more text follows).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from storyloom.core.errors import NotFound
from storyloom.core.settings import ChatEndpoint
from storyloom.llm.chat import ChatClient
from storyloom.llm.errors import LLMError
from storyloom.tools.agent_profile import AVAILABLE_TOOLS, AgentProfile
from storyloom.tools.tam import parse_tam
from storyloom.tools.tam_stream import TamStreamFilter
from storyloom.tools.tool_manager import (
    ToolCallContext,
    ToolCaller,
    ToolCallResult,
    ToolManager,
    match_arguments,
)
from storyloom.tools.tool_names import BadToolName, from_function_name
from storyloom.workflow.agent_host import (
    AgentOutcome,
    AgentTurnRequest,
    ApprovalDecision,
    ToolStep,
)
from storyloom.workflow.node_type import NodeContext
from storyloom.workflow.tool_results import (
    ToolResultText,
    format_tool_results,
    result_text,
    status_of,
)

CallProtocol = Literal["tam", "native"]

TAM_INSTRUCTION = (
    "Call tools only when you need them, only those listed above, in <|[REQUEST_TOOL]|> "
    "blocks as shown. After your blocks, stop writing: the results come back in "
    "<|[TOOL_RESULT]|> blocks, and you then go on. When you need no tool, just answer."
)
"""Added after the tool documentation when the prompt does not place it itself."""

SKIPPED = "not run: an earlier step of this chain failed"


class NativeToolsRefused(Exception):
    """The endpoint answered 400 to a request with ``tools`` before any text."""

    def __init__(self, error: LLMError) -> None:
        self.error = error
        super().__init__(str(error))


@dataclass
class LoopSetup:
    """What a turn runs with, worked out by the service."""

    profile: AgentProfile
    manager: ToolManager
    endpoint: ChatEndpoint
    protocol: CallProtocol
    tool_docs: str
    """The inventory's documentation (``{{{system:available_tools}}}``)."""
    native_tools: list[dict[str, Any]] = field(default_factory=list)
    """The inventory as OpenAI ``tools`` (native protocol)."""
    fallback_to_tam: bool = False
    """Automatic protocol: a 400 to the first native request means "no tools here"."""
    on_native_refused: Callable[[], None] | None = None
    """Remember that the endpoint refused ``tools`` (the service skips native next time)."""
    approve: Callable[[str, dict[str, Any]], Awaitable[ApprovalDecision]] | None = None
    on_always: Callable[[str], AgentProfile | None] | None = None
    """Save an ``allow`` rule; returns the profile as saved (its policy holds from the
    next call of this turn on)."""
    run_workflow: Callable[[str, Mapping[str, Any]], Awaitable[dict[str, Any]]] | None = None
    """Runs the deliberation workflow (the node's ``ctx.run_workflow``)."""


class _Visible:
    """The visible text of the turn: streamed as it comes, rounds joined by a blank line,
    leading blanks of a round dropped and trailing ones held until more text follows."""

    def __init__(self, on_text: Callable[[str], Awaitable[None]] | None) -> None:
        self._on_text = on_text
        self.rounds: list[str] = []
        self.current = ""
        self._held = ""

    @property
    def text(self) -> str:
        return "\n\n".join([*self.rounds, self.current] if self.current else self.rounds)

    async def feed(self, text: str) -> None:
        if not text:
            return
        if not self.current:
            text = text.lstrip()
            if not text:
                return
        body = self._held + text
        shown = body.rstrip()
        self._held = body[len(shown) :]
        if not shown:
            return
        out = "\n\n" + shown if not self.current and self.rounds else shown
        self.current += shown
        if self._on_text is not None:
            await self._on_text(out)

    def end_round(self) -> None:
        if self.current:
            self.rounds.append(self.current)
        self.current = ""
        self._held = ""


@dataclass
class _Call:
    """One call the model asked for, before it runs."""

    tool: str
    arguments: dict[str, Any]
    block: int
    """Calls of one TAM block share it (a failure skips the rest of the block)."""
    call_id: str | None = None
    problem: str | None = None
    """Set when the call cannot even be tried (unknown function name, bad JSON)."""
    decision: str = "invalid"


@dataclass
class _Round:
    raw: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


class AgentLoop:
    """Runs one agent turn for a node; :meth:`run` it once."""

    def __init__(self, ctx: NodeContext, request: AgentTurnRequest, setup: LoopSetup) -> None:
        self.ctx = ctx
        self.request = request
        self.setup = setup
        self.profile = setup.profile
        self.protocol: CallProtocol = "tam" if setup.profile.workflow else setup.protocol
        self.visible = _Visible(request.on_text)
        self.steps: list[ToolStep] = []
        self.raw: list[str] = []
        self.reasoning: list[str] = []
        self.history: list[dict[str, Any]] = []
        self.run_id = f"{ctx.run_id}:{ctx.node_id}"
        # One context for the whole turn: the manager numbers a turn's calls in it, so
        # the n-th roll of a replayed turn is the n-th roll again.
        self.context = ToolCallContext(
            caller=ToolCaller("agent", self.profile.id, self.run_id, request.conversation_id),
            policy=self.profile.policy,
            kb_access=self.profile.kb_access,
            approve=setup.approve,
            turn_key=request.turn_key,
            variables=request.variables,
            timeout_s=self.profile.call_timeout_s,
            on_always=self._always if setup.on_always is not None else None,
            inventory=tuple(self.profile.tool_ids_inventory),
        )

    # -- the prompt ---------------------------------------------------------------------

    def prompt(self) -> list[dict[str, Any]]:
        """The agent's system message and the request's messages, the tool documentation
        where the marker stands (TAM without a marker: after the system prompt)."""
        docs = self.setup.tool_docs
        messages = [dict(m) for m in self.request.messages]
        system = self.profile.prompt
        marked = AVAILABLE_TOOLS in system
        if marked:
            system = system.replace(AVAILABLE_TOOLS, docs)
        for message in messages:
            content = message.get("content")
            if isinstance(content, str) and AVAILABLE_TOOLS in content:
                message["content"] = content.replace(AVAILABLE_TOOLS, docs)
                marked = True
        if self.protocol == "tam" and not marked:
            system = "\n\n".join(part for part in (system.strip(), docs, TAM_INSTRUCTION) if part)
        if system.strip():
            messages.insert(0, {"role": "system", "content": system})
        return messages

    # -- the turn -----------------------------------------------------------------------

    async def run(self) -> AgentOutcome:
        stopped_by: Literal["reply", "step_limit", "stopped"] = "reply"
        limit = self.profile.max_steps
        async with ChatClient(self.setup.endpoint) as client:
            for step in range(1, limit + 1):
                if self.ctx.cancelled:
                    stopped_by = "stopped"
                    break
                round_ = await self._deliberate(client, step)
                calls = self._calls(round_)
                self.visible.end_round()
                if not calls:
                    break
                self._feed_assistant(round_, calls)
                results = await self._dispatch(step, calls)
                self._feed_results(calls, results)
                if self.ctx.cancelled:
                    stopped_by = "stopped"
                    break
            else:
                stopped_by = "step_limit"
        return AgentOutcome(
            text=self.visible.text,
            reasoning="\n\n".join(r for r in self.reasoning if r),
            steps=self.steps,
            raw="\n\n".join(r for r in self.raw if r),
            stopped_by=stopped_by,
        )

    async def _deliberate(self, client: ChatClient, step: int) -> _Round:
        if self.profile.workflow:
            return await self._deliberate_workflow(self.profile.workflow)
        try:
            return await self._ask_model(client)
        except NativeToolsRefused as refused:
            if step != 1 or not self.setup.fallback_to_tam:
                raise refused.error from None
            self.protocol = "tam"
            round_ = await self._ask_model(client)
            # Remembered only now: a 400 that TAM gets too was not about the tools.
            if self.setup.on_native_refused is not None:
                self.setup.on_native_refused()
            return round_

    async def _ask_model(self, client: ChatClient) -> _Round:
        messages = [*self.prompt(), *self.history]
        overrides = dict(self.request.overrides)
        native = self.protocol == "native"
        if native and self.setup.native_tools:
            overrides["tools"] = self.setup.native_tools
        tam = TamStreamFilter() if not native else None
        shown_before = self.visible.text
        stream = client.stream(messages, **overrides)
        try:
            async with stream:
                async for delta in stream:
                    await self.visible.feed(tam.feed(delta) if tam is not None else delta)
            if tam is not None:
                await self.visible.feed(tam.finish())
        except LLMError as error:
            if (
                native
                and error.kind == "bad_request"
                and not stream.text
                and not self.visible.current
            ):
                raise NativeToolsRefused(error) from error
            error.partial_text = self.visible.text or shown_before
            raise
        raw = stream.text
        self.raw.append(raw)
        self.reasoning.append(stream.reasoning_text)
        return _Round(raw=raw, reasoning=stream.reasoning_text, tool_calls=stream.tool_calls)

    async def _deliberate_workflow(self, workflow_id: str) -> _Round:
        if self.setup.run_workflow is None:
            raise LLMError(
                f"agent profile {self.profile.id!r}: its deliberation workflow "
                f"{workflow_id!r} can only run inside a workflow run",
                kind="not_configured",
            )
        outputs = await self.setup.run_workflow(
            workflow_id, {"messages": [*self.prompt(), *self.history]}
        )
        text = outputs.get("text")
        if not isinstance(text, str):
            texts = [v for v in outputs.values() if isinstance(v, str)]
            text = texts[0] if len(texts) == 1 else ""
        tam = TamStreamFilter()
        await self.visible.feed(tam.feed(text))
        await self.visible.feed(tam.finish())
        self.raw.append(text)
        return _Round(raw=text)

    # -- calls --------------------------------------------------------------------------

    def _calls(self, round_: _Round) -> list[_Call]:
        if self.protocol == "native":
            return [self._native_call(i, c) for i, c in enumerate(round_.tool_calls)]
        parsed = parse_tam(round_.raw)
        return [
            _Call(tool=c.tool, arguments=self._typed(c.tool, c.arguments), block=c.block)
            for c in parsed.calls
        ]

    def _typed(self, tool: str, arguments: dict[str, str]) -> dict[str, Any]:
        """TAM's string values as the tool's parameters declare them (an unknown tool's
        pass through: the manager reports it)."""
        try:
            parameters = self.setup.manager.get(tool).definition.parameters
        except NotFound:
            return dict(arguments)
        return match_arguments(parameters, arguments)

    def _native_call(self, index: int, raw: dict[str, Any]) -> _Call:
        function = raw.get("function") or {}
        name = str(function.get("name") or "")
        call_id = raw.get("id") or f"call_{index}"
        try:
            tool = from_function_name(name)
        except BadToolName:
            return _Call(
                tool=name,
                arguments={},
                block=index,
                call_id=call_id,
                problem=f"no tool is called {name!r}",
                decision="unknown",
            )
        text = function.get("arguments") or "{}"
        problem: str | None = None
        try:
            arguments = json.loads(text)
        except json.JSONDecodeError as exc:
            problem = f"the arguments are not JSON ({exc.msg} at column {exc.colno})"
        else:
            if not isinstance(arguments, dict):
                problem = "the arguments must be a JSON object"
        if problem is not None:
            return _Call(tool=tool, arguments={}, block=index, call_id=call_id, problem=problem)
        return _Call(tool=tool, arguments=arguments, block=index, call_id=call_id)

    async def _dispatch(self, step: int, calls: Sequence[_Call]) -> list[ToolStep]:
        done: list[ToolStep] = []
        failed_blocks: set[int] = set()
        for index, call in enumerate(calls):
            if call.block in failed_blocks and self.protocol == "tam":
                tool_step = self._step(step, index, call, decision="skipped", error=SKIPPED)
            elif call.problem is not None:
                tool_step = self._step(
                    step, index, call, decision=call.decision, error=call.problem
                )
            elif self.ctx.cancelled:
                tool_step = self._step(step, index, call, decision="skipped", error="stopped")
            else:
                result = await self.setup.manager.call(call.tool, call.arguments, self.context)
                tool_step = self._from_result(step, index, call, result)
            if not tool_step.ok:
                failed_blocks.add(call.block)
            done.append(tool_step)
            await self._report(tool_step)
        return done

    def _always(self, tool_id: str) -> None:
        assert self.setup.on_always is not None
        saved = self.setup.on_always(tool_id)
        # The rest of this turn follows the answer even where the profile is not saved.
        self.profile = saved if saved is not None else self.profile.with_allow_rule(tool_id)
        self.context.policy = self.profile.policy

    def _step(self, step: int, index: int, call: _Call, *, decision: str, error: str) -> ToolStep:
        return ToolStep.model_validate(
            {
                "step": step,
                "index": index,
                "tool": call.tool,
                "arguments": call.arguments,
                "callId": call.call_id,
                "protocol": self.protocol,
                "decision": decision,
                "ok": False,
                "error": error,
                "stealth": self.profile.is_stealth(call.tool),
            }
        )

    def _from_result(self, step: int, index: int, call: _Call, result: ToolCallResult) -> ToolStep:
        return ToolStep.model_validate(
            {
                "step": step,
                "index": index,
                "tool": call.tool,
                "arguments": result.arguments if result.arguments is not None else call.arguments,
                "callId": call.call_id,
                "protocol": self.protocol,
                "decision": result.decision,
                "ok": result.ok,
                "result": result.result,
                "error": result.error,
                "durationMs": result.duration_ms,
                "stealth": self.profile.is_stealth(call.tool),
                "auditId": result.audit_id,
            }
        )

    async def _report(self, step: ToolStep) -> None:
        self.steps.append(step)
        self.ctx.report_tool_step(step.model_dump(mode="json", by_alias=True))
        if self.request.on_step is not None:
            await self.request.on_step(step)

    # -- feeding back -------------------------------------------------------------------

    def _feed_assistant(self, round_: _Round, calls: Sequence[_Call]) -> None:
        if self.protocol == "tam":
            self.history.append({"role": "assistant", "content": round_.raw})
            return
        self.history.append(
            {
                "role": "assistant",
                "content": round_.raw or None,
                "tool_calls": [
                    {
                        "id": call.call_id,
                        "type": "function",
                        "function": {
                            "name": (raw.get("function") or {}).get("name", ""),
                            "arguments": (raw.get("function") or {}).get("arguments") or "{}",
                        },
                    }
                    for call, raw in zip(calls, round_.tool_calls, strict=True)
                ],
            }
        )

    def _feed_results(self, calls: Sequence[_Call], steps: Sequence[ToolStep]) -> None:
        if self.protocol == "tam":
            results = [
                ToolResultText(s.tool, status_of(s.ok, s.decision), s.result, s.error, s.index + 1)
                for s in steps
            ]
            self.history.append({"role": "user", "content": format_tool_results(results)})
            return
        for call, step in zip(calls, steps, strict=True):
            content = result_text(step.result) if step.ok else f"Error: {step.error or 'failed'}"
            self.history.append({"role": "tool", "tool_call_id": call.call_id, "content": content})
