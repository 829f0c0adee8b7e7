"""Asking the agent LLM for JSON and holding its answer to a pydantic model.

The asking is :func:`storyloom.llm.structured_output.ask_json`: the model's JSON schema as
``response_format`` where the endpoint takes it, the prompt describing the JSON for those
that do not, one retry told each problem. What still does not fit is
:class:`AgentJsonError` (an ``InvalidInput`` naming each bad field), which callers report
as the failed step's reason: nothing half-parsed is ever written.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, overload

from pydantic import BaseModel

from storyloom.core.errors import FieldProblem
from storyloom.core.settings import ChatEndpoint
from storyloom.llm.errors import JsonAnswerError
from storyloom.llm.structured_output import ask_json

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


class AgentJsonError(JsonAnswerError):
    """The agent model's answer is not the JSON that was asked for."""

    def __init__(self, what: str, problems: Sequence[FieldProblem]) -> None:
        super().__init__(what, problems, who="the agent model")


@overload
async def ask_agent_json(
    endpoint: ChatEndpoint,
    system: str,
    user: str,
    model: type[M],
    *,
    what: str,
    accept: None = None,
) -> M: ...


@overload
async def ask_agent_json(
    endpoint: ChatEndpoint,
    system: str,
    user: str,
    model: type[M],
    *,
    what: str,
    accept: Callable[[M], Awaitable[T]],
) -> T: ...


async def ask_agent_json(
    endpoint: ChatEndpoint,
    system: str,
    user: str,
    model: type[M],
    *,
    what: str,
    accept: Callable[[M], Awaitable[Any]] | None = None,
) -> Any:
    """The agent model's answer as ``model`` (then through ``accept``, when given). LLM
    failures are raised as :class:`~storyloom.llm.errors.LLMError`; an answer that does
    not fit after the retry as :class:`AgentJsonError` (or what ``accept`` raised)."""
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    try:
        return await ask_json(endpoint, messages, model, what=what, accept=accept)
    except AgentJsonError:
        raise
    except JsonAnswerError as exc:
        raise AgentJsonError(what, exc.problems) from None
