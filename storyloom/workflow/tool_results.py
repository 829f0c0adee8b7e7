"""The text a model reads of tool results, in the TAM result format.

One implementation for two readers: the agent loop feeds a round's results back to the
model with it (``storyloom.tools.tam.format_tam_results`` calls this), and the chat
renders the tool steps of earlier assistant messages with it, before their reply text, so
a later turn's prompt shows what the tools answered the way the model saw it then. It
lives here, below both the chat and the tools layers, so neither keeps a copy.

One block per call, values between ``「始」`` and ``「末」`` verbatim (the format is
documented with TAM in :mod:`storyloom.tools.tam`)::

    <|[TOOL_RESULT]|>
    tool:「始」chat:RollDice「末」
    step:「始」1「末」
    status:「始」ok「末」                 (ok, error, denied or skipped)
    result:「始」{"total": 14}「末」     (error:「始」…「末」 when not ok)
    <|[END_TOOL_RESULT]|>

A string result is written verbatim; anything else as compact JSON (non-ASCII kept).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_core import to_jsonable_python

REQUEST_START = "<|[REQUEST_TOOL]|>"
"""Opens a TAM call (storyloom.tools.tam); a text without it holds no call."""
RESULT_START = "<|[TOOL_RESULT]|>"
RESULT_END = "<|[END_TOOL_RESULT]|>"
OPEN = "「始」"
CLOSE = "「末」"

ResultStatus = Literal["ok", "error", "denied", "skipped"]

_DEFAULT_REASON: dict[str, str] = {
    "error": "the call failed",
    "denied": "the call was denied",
    "skipped": "an earlier step of this block failed",
}


@dataclass(frozen=True)
class ToolResultText:
    """One call's outcome as the model reads it."""

    tool: str
    status: ResultStatus
    result: Any = None
    error: str | None = None
    step: int | None = None


def status_of(ok: bool, decision: str) -> ResultStatus:
    """The result status of a call that ended ``ok`` with ``decision``."""
    if ok:
        return "ok"
    if decision in ("denied", "skipped"):
        return "denied" if decision == "denied" else "skipped"
    return "error"


def result_text(result: Any) -> str:
    """A result as the model reads it: text verbatim, anything else as compact JSON."""
    if isinstance(result, str):
        return result
    return json.dumps(to_jsonable_python(result, fallback=str), ensure_ascii=False)


def format_tool_results(results: Sequence[ToolResultText]) -> str:
    """The blocks of ``results``, in order, one per call."""
    blocks: list[str] = []
    for item in results:
        lines = [RESULT_START, f"tool:{OPEN}{item.tool}{CLOSE}"]
        if item.step is not None:
            lines.append(f"step:{OPEN}{item.step}{CLOSE}")
        lines.append(f"status:{OPEN}{item.status}{CLOSE}")
        if item.status == "ok":
            lines.append(f"result:{OPEN}{result_text(item.result)}{CLOSE}")
        else:
            reason = item.error or _DEFAULT_REASON[item.status]
            lines.append(f"error:{OPEN}{reason}{CLOSE}")
        lines.append(RESULT_END)
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


def format_tool_steps(steps: Sequence[Any]) -> str:
    """Stored tool steps (``ToolStep`` JSON, as in ``extra["tool_steps"]``) that are not
    stealth, as the model read their results; a step that does not look like one is
    left out."""
    results: list[ToolResultText] = []
    for step in steps:
        if not isinstance(step, dict) or step.get("stealth") or not step.get("tool"):
            continue
        ok = bool(step.get("ok"))
        index = step.get("index")
        results.append(
            ToolResultText(
                tool=str(step["tool"]),
                status=status_of(ok, str(step.get("decision") or "")),
                result=step.get("result"),
                error=step.get("error"),
                step=index + 1 if isinstance(index, int) else None,
            )
        )
    return format_tool_results(results)
