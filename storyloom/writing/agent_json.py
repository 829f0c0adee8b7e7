"""Asking the agent LLM for JSON and holding its answer to a pydantic model.

Agent models wrap JSON in prose or in a ```json fence more often than not, so the first
JSON object in the answer is taken. Anything that is not that object, or does not match
the model, is :class:`AgentJsonError` (an ``InvalidInput`` naming each bad field), which
callers report as the failed step's reason: nothing half-parsed is ever written.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from storyloom.core.errors import FieldProblem, InvalidInput, problems_from_validation
from storyloom.core.settings import ChatEndpoint
from storyloom.llm.chat import ChatClient

M = TypeVar("M", bound=BaseModel)

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n(.*?)```", re.DOTALL)


class AgentJsonError(InvalidInput):
    """The agent model's answer is not the JSON that was asked for."""

    def __init__(self, what: str, problems: Sequence[FieldProblem]) -> None:
        summary = "; ".join(str(p) for p in problems) or "unreadable"
        super().__init__(f"the agent model's {what} is not valid: {summary}", problems)


def _json_candidates(text: str) -> list[str]:
    """Where the JSON may be: fenced blocks first, then from the first ``{`` on."""
    out = [m.group(1) for m in _FENCE.finditer(text)]
    start = text.find("{")
    if start >= 0:
        out.append(text[start:])
    return out


def _first_object(text: str) -> Any:
    decoder = json.JSONDecoder()
    last_error = "the answer holds no JSON object"
    for candidate in _json_candidates(text):
        stripped = candidate.strip()
        try:
            value, _ = decoder.raw_decode(stripped)
        except json.JSONDecodeError as exc:
            last_error = f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
            continue
        if isinstance(value, dict):
            return value
        last_error = f"expected a JSON object, got {type(value).__name__}"
    raise ValueError(last_error)


def parse_agent_json(text: str, model: type[M], *, what: str) -> M:
    """The first JSON object in ``text`` as ``model``; :class:`AgentJsonError` otherwise."""
    try:
        data = _first_object(text)
    except ValueError as exc:
        raise AgentJsonError(what, [FieldProblem("", str(exc))]) from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise AgentJsonError(what, problems_from_validation(exc)) from None


async def ask_agent_json(
    endpoint: ChatEndpoint, system: str, user: str, model: type[M], *, what: str
) -> M:
    """One completion of the agent model, parsed as ``model``. LLM failures are raised as
    :class:`~storyloom.llm.errors.LLMError`; a malformed answer as :class:`AgentJsonError`."""
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    async with ChatClient(endpoint) as client:
        result = await client.complete(messages)
    return parse_agent_json(result.text, model, what=what)
