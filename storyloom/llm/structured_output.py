"""Asking a model for JSON that fits a pydantic model, held to it by the server where it can.

:func:`response_format` turns a pydantic model into OpenAI's ``response_format``
``{"type": "json_schema", ...}``, which llama.cpp (as a grammar), vLLM, Ollama's
OpenAI-compatible endpoint and OpenAI take: the schema has every ``$ref`` inlined (llama.cpp's
grammar converter and OpenAI's strict mode want no ``$defs``), ``additionalProperties: false``
on every object with named properties that does not say otherwise, the required fields
as pydantic has them (a field with a default stays optional: the Role B builder places a
node that comes without ``position`` itself). ``strict`` is set only where OpenAI's strict
mode takes the schema as it is: every property required, no free-form object, only the
keywords it knows.

:func:`ask_json` sends it where the endpoint supports it. An endpoint that answers 400
naming ``response_format``/``json_schema``, or that answers with something other than a
JSON object although one was asked for, does not support it: that is remembered in this
process per base URL and model (:data:`SCHEMA_SUPPORT`, shared by every caller), as native
tool calls are, and the request goes again without it, the prompt describing the JSON as
before. The answer is validated; an invalid one gets ONE more request, the model told each
problem by field; if that fails too, :class:`~storyloom.llm.errors.JsonAnswerError` names
the problems. Text-completion APIs (``endpoint.api != "chat"``) are asked in prose only.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar, overload

from pydantic import BaseModel, ValidationError

from storyloom.core.errors import FieldProblem, InvalidInput, problems_from_validation
from storyloom.core.settings import ChatEndpoint
from storyloom.llm.chat import ChatClient, ChatResult
from storyloom.llm.errors import JsonAnswerError, LLMError

__all__ = [
    "SCHEMA_SUPPORT",
    "SchemaSupport",
    "ask_json",
    "first_json_object",
    "json_schema_of",
    "parse_json_answer",
    "refuses_response_format",
    "response_format",
]

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n(.*?)```", re.DOTALL)
_NAME = re.compile(r"[^A-Za-z0-9_-]")
# What OpenAI's strict mode accepts; a schema using anything else is sent with strict off.
_STRICT_KEYWORDS = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "enum", "const",
        "anyOf", "description", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
        "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
    }
)  # fmt: skip
# Titles repeat the property names: they cost tokens where the server shows the schema to
# the model, and say nothing.
_DROPPED = frozenset({"title"})
_REFUSAL_WORDS = ("response_format", "response format", "json_schema", "json schema")


# -- the schema ------------------------------------------------------------------------


def json_schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema as servers take it: refs inlined, objects closed, titles
    left out."""
    schema = model.model_json_schema(by_alias=True, mode="validation")
    definitions: dict[str, Any] = schema.pop("$defs", {})
    shaped: dict[str, Any] = _shape(schema, definitions, ())
    return shaped


def _shape(node: Any, definitions: Mapping[str, Any], seen: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_shape(item, definitions, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref.removeprefix("#/$defs/")
        if name in seen:
            # A model that contains itself has no finite inlined schema.
            raise ValueError(f"{name} refers to itself: it cannot be sent as a json_schema")
        target = {**definitions[name], **{k: v for k, v in node.items() if k != "$ref"}}
        return _shape(target, definitions, (*seen, name))
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key == "properties" and isinstance(value, dict):
            # Property names are data here, never keywords: only their schemas are shaped.
            out[key] = {name: _shape(sub, definitions, seen) for name, sub in value.items()}
        else:
            out[key] = _shape(value, definitions, seen)
    if isinstance(out.get("properties"), dict):
        out.setdefault("additionalProperties", False)
    return out


def _strict_ok(node: Any) -> bool:
    if isinstance(node, list):
        return all(_strict_ok(item) for item in node)
    if not isinstance(node, dict):
        return True
    if any(key not in _STRICT_KEYWORDS for key in node):
        return False
    if node.get("type") == "object":
        if node.get("additionalProperties") is not False:
            return False  # a free-form object (dict[str, Any]) has no strict form
        if set(node.get("required", ())) != set(node.get("properties", {})):
            return False
    for key, value in node.items():
        if key == "properties":
            if not all(_strict_ok(sub) for sub in value.values()):
                return False
        elif key in ("items", "anyOf") and not _strict_ok(value):
            return False
    return True


def response_format(model: type[BaseModel], *, name: str | None = None) -> dict[str, Any]:
    """The ``response_format`` that asks for ``model``'s JSON (see :func:`json_schema_of`)."""
    schema = json_schema_of(model)
    label = _NAME.sub("_", name or model.__name__).strip("_")[:64] or "answer"
    return {
        "type": "json_schema",
        "json_schema": {"name": label, "strict": _strict_ok(schema), "schema": schema},
    }


# -- which endpoints take it ---------------------------------------------------------------


class SchemaSupport:
    """The endpoints (base URL, model) that refused or ignored a json_schema response format.

    Kept in process, not in the settings: a server upgraded or swapped behind the same URL
    is asked again after a restart.
    """

    def __init__(self) -> None:
        self._refused: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def allows(self, base_url: str, model: str) -> bool:
        with self._lock:
            return (base_url, model) not in self._refused

    def refuse(self, base_url: str, model: str) -> None:
        with self._lock:
            self._refused.add((base_url, model))


SCHEMA_SUPPORT = SchemaSupport()
"""The memory every caller of :func:`ask_json` shares."""


def refuses_response_format(error: LLMError) -> bool:
    """Whether a failed request was refused for its ``response_format`` (a 4xx naming it)."""
    if error.kind != "bad_request":
        return False
    said = str(error).casefold()
    return any(word in said for word in _REFUSAL_WORDS)


# -- reading the answer --------------------------------------------------------------------


def _candidates(text: str) -> list[str]:
    """Where the JSON may be: fenced blocks first, then from the first ``{`` on."""
    out = [m.group(1) for m in _FENCE.finditer(text)]
    start = text.find("{")
    if start >= 0:
        out.append(text[start:])
    return out


def first_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in ``text`` (models wrap it in prose or a code fence more often
    than not); ``ValueError`` saying why there is none."""
    decoder = json.JSONDecoder()
    last_error = "the answer holds no JSON object"
    for candidate in _candidates(text):
        try:
            value, _ = decoder.raw_decode(candidate.strip())
        except json.JSONDecodeError as exc:
            last_error = f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
            continue
        if isinstance(value, dict):
            return value
        last_error = f"expected a JSON object, got {type(value).__name__}"
    raise ValueError(last_error)


def parse_json_answer(
    text: str,
    model: type[M],
    *,
    what: str,
    parse: Callable[[str], Any] = first_json_object,
) -> M:
    """``text`` as ``model``: :class:`JsonAnswerError` naming each problem otherwise.

    ``parse`` finds the JSON value in the text (the first object by default; a caller
    whose models answer in looser shapes reads them there)."""
    try:
        data = parse(text)
    except ValueError as exc:
        raise JsonAnswerError(what, [FieldProblem("", str(exc))]) from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise JsonAnswerError(what, problems_from_validation(exc)) from None


def _problems_message(error: InvalidInput) -> str:
    problems = error.problems or [FieldProblem("", str(error))]
    lines = "\n".join(f"- {problem}" for problem in problems)
    return (
        "That answer cannot be used:\n"
        f"{lines}\n"
        "Answer again with the whole JSON only, fixing each of these problems."
    )


# -- asking --------------------------------------------------------------------------------


@overload
async def ask_json(
    target: ChatClient | ChatEndpoint,
    messages: Sequence[Mapping[str, Any]],
    model: type[M],
    *,
    what: str,
    accept: None = None,
    parse: Callable[[str], Any] = ...,
    support: SchemaSupport = ...,
    **overrides: Any,
) -> M: ...


@overload
async def ask_json(
    target: ChatClient | ChatEndpoint,
    messages: Sequence[Mapping[str, Any]],
    model: type[M],
    *,
    what: str,
    accept: Callable[[M], Awaitable[T]],
    parse: Callable[[str], Any] = ...,
    support: SchemaSupport = ...,
    **overrides: Any,
) -> T: ...


async def ask_json(
    target: ChatClient | ChatEndpoint,
    messages: Sequence[Mapping[str, Any]],
    model: type[M],
    *,
    what: str,
    accept: Callable[[M], Awaitable[Any]] | None = None,
    parse: Callable[[str], Any] = first_json_object,
    support: SchemaSupport = SCHEMA_SUPPORT,
    **overrides: Any,
) -> Any:
    """Ask for ``model``'s JSON and return it validated (see the module's text).

    ``accept`` (async) checks, and may convert, a valid answer further; an
    :class:`~storyloom.core.errors.InvalidInput` it raises counts as a problem of the
    answer, retried once like a schema problem and then raised as it is. ``overrides``
    go to :meth:`ChatClient.complete`. Failures of the endpoint are
    :class:`~storyloom.llm.errors.LLMError`; an answer that does not fit twice is
    :class:`~storyloom.llm.errors.JsonAnswerError` (or what ``accept`` raised).
    """
    if isinstance(target, ChatClient):
        return await _ask(target, messages, model, what, accept, parse, support, overrides)
    async with ChatClient(target) as client:
        return await _ask(client, messages, model, what, accept, parse, support, overrides)


async def _ask(
    client: ChatClient,
    messages: Sequence[Mapping[str, Any]],
    model: type[M],
    what: str,
    accept: Callable[[M], Awaitable[Any]] | None,
    parse: Callable[[str], Any],
    support: SchemaSupport,
    overrides: Mapping[str, Any],
) -> Any:
    endpoint = client.endpoint
    key = (endpoint.base_url, str(overrides.get("model") or endpoint.model))
    schema = response_format(model) if endpoint.api == "chat" and support.allows(*key) else None
    conversation = [dict(m) for m in messages]
    for attempt in (1, 2):
        result, schema = await _complete(client, conversation, overrides, schema, support, key)
        try:
            value = parse_json_answer(result.text, model, what=what, parse=parse)
            return await accept(value) if accept is not None else value
        except InvalidInput as problem:
            if attempt == 2:
                raise
            conversation += [
                {"role": "assistant", "content": result.text},
                {"role": "user", "content": _problems_message(problem)},
            ]
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


async def _complete(
    client: ChatClient,
    messages: list[dict[str, Any]],
    overrides: Mapping[str, Any],
    schema: dict[str, Any] | None,
    support: SchemaSupport,
    key: tuple[str, str],
) -> tuple[ChatResult, dict[str, Any] | None]:
    """One answer, and the response format still to send (None once refused)."""
    if schema is None:
        return await client.complete(messages, **overrides), None
    try:
        result = await client.complete(messages, **{**overrides, "response_format": schema})
    except LLMError as error:
        if not refuses_response_format(error):
            raise
        support.refuse(*key)
        return await client.complete(messages, **overrides), None
    if not result.text.lstrip().startswith("{"):
        # A server that held the answer to the schema starts it with the object itself:
        # this one ignored the format (the answer is still read, as prose would be).
        support.refuse(*key)
        return result, None
    return result, schema
