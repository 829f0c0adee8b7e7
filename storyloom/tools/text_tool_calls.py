"""Tool calls written as text outside an agent turn (seed 003 §7.3, §12.2): TAM blocks
in a piece of text are run through the ToolManager, under the same policy, approvals
and audit as an agent's calls.

``POST /api/tools/tam`` hands text here. Like the agent loop, a failed step of a chained
block skips the rest of that block (decision ``skipped``); other blocks still run. A
block with a problem runs none of its calls and stays in ``text`` (see
:mod:`storyloom.tools.tam`).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from storyloom.core.errors import NotFound
from storyloom.tools.tam import TamProblem, TamResult, format_tam_results, parse_tam
from storyloom.tools.tool_manager import (
    ToolCallContext,
    ToolCallResult,
    ToolManager,
    match_arguments,
)
from storyloom.workflow.tool_results import status_of

SKIPPED = "skipped: an earlier step of its chain failed"


class TextToolCalls(BaseModel):
    """What became of the calls in a piece of text."""

    text: str = Field(description="The text with every executed block removed")
    results: list[ToolCallResult] = Field(
        default_factory=list, description="One per call, in execution order"
    )
    problems: list[TamProblem] = Field(
        default_factory=list, description="Blocks that did not run, and why"
    )
    feedback: str = Field(
        default="", description="The results as a model reads them (<|[TOOL_RESULT]|> blocks)"
    )


async def run_text_tool_calls(
    manager: ToolManager, text: str, context: ToolCallContext
) -> TextToolCalls:
    """Run the TAM calls in ``text`` in order as ``context``'s caller."""
    parsed = parse_tam(text)
    results: list[ToolCallResult] = []
    for block in parsed.blocks():
        failed = False
        for call in block:
            if failed:
                results.append(
                    ToolCallResult(
                        tool=call.tool,
                        arguments=dict(call.arguments),
                        decision="skipped",
                        ok=False,
                        error=SKIPPED,
                    )
                )
                continue
            try:
                parameters = manager.get(call.tool).definition.parameters
                arguments = match_arguments(parameters, call.arguments)
            except NotFound:
                arguments = dict(call.arguments)  # the manager reports the unknown tool
            result = await manager.call(call.tool, arguments, context)
            results.append(result)
            failed = not result.ok
    feedback = (
        format_tam_results(
            [
                TamResult(r.tool, status_of(r.ok, r.decision), r.result, r.error, step)
                for step, r in enumerate(results, start=1)
            ]
        )
        if results
        else ""
    )
    return TextToolCalls(
        text=parsed.text, results=results, problems=parsed.problems, feedback=feedback
    )
