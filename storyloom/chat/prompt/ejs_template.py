"""EJS templates (ST-Prompt-Template) evaluated in the sandboxed script worker.

A turn's templates (its lore entries, card fields; a displayed message) go to the
worker in ONE :func:`~storyloom.sandbox.script_host.run_script` call: the JavaScript
runtime of :file:`ejs_prelude.js` (``getvar``/``setvar``/``incvar``/``decvar`` with
their scopes, ``print``, ``variables``, a small ``_``), then each template compiled by
:mod:`.ejs_compiler`, run in order, each seeing what the ones before it wrote. Text
without ``<%`` never gets here (:func:`has_template`).

A template that fails (syntax, runtime, a limit) keeps its text exactly as written and
says why in :class:`TemplateProblem`: which template, which line of it, what. Its writes
are dropped. A batch stopped by a limit (an endless loop) is run again one template at a
time, so the others still render and the culprit is named.

The scopes, as ST-Prompt-Template names them: ``message``, ``local`` and ``chat`` are
the turn's variables (the chat state); ``global`` the user's global variables;
``character`` the card's Tavern Helper variables (read only); ``cache`` a scratch object
of this batch; ``initial`` the ``[InitialVariables]`` of the card's lore (read only).
``variables`` is all of them merged (message over global over character).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from storyloom.chat.prompt.ejs_compiler import EjsSyntaxError, compile_ejs, has_template
from storyloom.chat.store.template_problem import TemplateOrigin, TemplateProblem
from storyloom.sandbox.script_host import ScriptFailure, ScriptLimits, run_script_blocking

__all__ = [
    "DISPLAY_LIMITS",
    "TEMPLATE_LIMITS",
    "TemplateProblem",
    "TemplateResult",
    "TemplateScopes",
    "TemplateSource",
    "VariableWrite",
    "WorldInfoText",
    "apply_writes",
    "has_template",
    "problem_of",
    "render_templates",
    "render_templates_blocking",
]

TEMPLATE_LIMITS = ScriptLimits(time_ms=500, memory_mb=64)
"""What one turn's batch of templates may use: a card's endless loop costs a turn half a
second (and as much again to find which template it was), never the turn."""

DISPLAY_LIMITS = ScriptLimits(time_ms=200, memory_mb=64)
"""What rendering one displayed message may use (a page view waits for it)."""

TemplateKind = Literal["text", "condition", "initial"]
WriteScope = Literal["message", "global"]


class TemplateSource(BaseModel):
    """One template of a batch: a lore entry's text, a card field, a message, an ``@@if``
    condition (``kind="condition"``: one line of JavaScript, true or false), or an
    ``[InitialVariables]`` entry written as a template (``kind="initial"``: its output
    is a JSON object whose keys fill those the variables lack)."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="What the template is, for its errors: 'lore 阶段指导'")
    text: str
    kind: TemplateKind = "text"
    origin: TemplateOrigin = "lore"
    label: str = Field(default="", description="The entry's title, the field, the message")
    variables: dict[str, Any] | None = Field(
        default=None,
        description="The message scope this template sees instead of the batch's (a chat "
        "message's state); what it writes there goes nowhere",
    )
    message: dict[str, Any] | None = Field(
        default=None, description="The message it is in: id, is_user, is_system"
    )
    seed: int | None = Field(
        default=None, description="Math.random starts again from this for this template"
    )
    shares: str | None = Field(
        default=None,
        description="Templates with the same key share their message scope (a displayed "
        "message and its render entries): what one writes, the next reads",
    )


class VariableWrite(BaseModel):
    """A top-level variable as a template left it (``setvar('a.b', 1)`` writes ``a``)."""

    scope: WriteScope
    key: str
    value: Any = None
    deleted: bool = False


class TemplateResult(BaseModel):
    name: str
    text: str = Field(description="The output; on an error, the text as written")
    value: bool | None = Field(default=None, description="A condition's truth")
    problem: TemplateProblem | None = None
    writes: list[VariableWrite] = Field(default_factory=list)


@dataclass
class TemplateScopes:
    """The variables templates read; ``message`` and ``global_`` are what they write."""

    message: dict[str, Any] = field(default_factory=dict)
    global_: dict[str, Any] = field(default_factory=dict)
    character: dict[str, Any] = field(default_factory=dict)
    initial: dict[str, Any] = field(default_factory=dict)

    def data(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "global": self.global_,
            "character": self.character,
            "initial": self.initial,
        }


@dataclass(frozen=True)
class WorldInfoText:
    """A lore entry a template may read with ``getwi``/``getWorldInfo``."""

    book: str
    """The book's id."""
    book_name: str
    id: str
    title: str
    text: str


WorldInfoOf = Callable[[], Sequence[WorldInfoText]]
"""The entries ``getwi`` reads, asked for only when a template of the batch calls it."""

_WORLD_INFO_CALLS = ("getwi", "getWorldInfo")
CARD_DEFINITION_FIELDS = (
    "name",
    "description",
    "personality",
    "scenario",
    "first_mes",
    "mes_example",
    "system_prompt",
)
"""The card's fields ``getchar``/``getCharData`` give."""


def card_definition(card: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of ``card`` a template reads with ``getchar``: text as written (its
    ``depth_prompt`` the character note's text)."""
    out = {
        name: card.get(name) if isinstance(card.get(name), str) else ""
        for name in CARD_DEFINITION_FIELDS
    }
    extensions = card.get("extensions")
    note = extensions.get("depth_prompt") if isinstance(extensions, Mapping) else None
    prompt = note.get("prompt") if isinstance(note, Mapping) else None
    out["depth_prompt"] = prompt if isinstance(prompt, str) else ""
    return out


def _world_info(entries: Sequence[WorldInfoText], escape: bool) -> list[dict[str, Any]]:
    """The entries for ``getwi``, each with its code compiled (a template) or not."""
    out: list[dict[str, Any]] = []
    for entry in entries:
        item: dict[str, Any] = {
            "book": entry.book,
            "book_name": entry.book_name,
            "id": entry.id,
            "title": entry.title,
            "text": entry.text,
        }
        if has_template(entry.text):
            try:
                item["code"] = compile_ejs(entry.text, escape=escape)
            except EjsSyntaxError as error:
                item["error"] = f"{error.message} (its line {error.line})"
        out.append(item)
    return out


_PRELUDE: str | None = None


def prelude() -> str:
    """The JavaScript runtime (package data, read once)."""
    global _PRELUDE
    if _PRELUDE is None:
        _PRELUDE = (
            resources.files("storyloom.chat.prompt").joinpath("ejs_prelude.js").read_text("utf-8")
        )
    return _PRELUDE


def apply_writes(
    variables: dict[str, Any], writes: Sequence[VariableWrite], scope: WriteScope
) -> None:
    """``writes`` of ``scope`` applied to ``variables`` in place, in order."""
    for write in writes:
        if write.scope != scope:
            continue
        if write.deleted:
            variables.pop(write.key, None)
        else:
            variables[write.key] = copy.deepcopy(write.value)


def problem_of(
    source: TemplateSource, message: str, line: int | None = None, limit: str | None = None
) -> TemplateProblem:
    """Why ``source`` was left as written."""
    return TemplateProblem(
        name=source.name,
        origin=source.origin,
        label=source.label,
        line=line,
        message=message,
        limit=limit,
    )


def _compiled(source: TemplateSource, escape: bool) -> str | TemplateProblem:
    if source.kind == "condition":
        # One line, as ST-Prompt-Template's @@if asks: a newline cannot end it early.
        return "return (" + source.text.replace("\n", " ") + "\n);"
    try:
        return compile_ejs(source.text, escape=escape)
    except EjsSyntaxError as error:
        return problem_of(source, error.message, error.line)


async def render_templates(
    sources: Sequence[TemplateSource],
    scopes: TemplateScopes,
    *,
    names: Mapping[str, str] | None = None,
    message: Mapping[str, Any] | None = None,
    escape: bool = False,
    limits: ScriptLimits = TEMPLATE_LIMITS,
    seed: int = 0,
    card: Mapping[str, Any] | None = None,
    world_info: WorldInfoOf | None = None,
) -> list[TemplateResult]:
    """Each of ``sources`` rendered, in order, in one sandboxed call (the results in the
    same order). ``names``: ``user`` and ``char``; ``message``: the displayed message a
    template is in (``id``, ``is_user``, ``is_system``); ``escape``: ``<%=`` escapes
    HTML (a displayed message); ``seed``: what ``Math.random`` (and ``_.random``) start
    from, so the same turn renders the same text; ``card``: the character card
    ``getchar`` reads; ``world_info``: the entries ``getwi`` reads (asked for only when a
    template calls it). Never raises for what a template does."""
    return await asyncio.to_thread(
        render_templates_blocking,
        sources,
        scopes,
        names=names,
        message=message,
        escape=escape,
        limits=limits,
        seed=seed,
        card=card,
        world_info=world_info,
    )


def render_templates_blocking(
    sources: Sequence[TemplateSource],
    scopes: TemplateScopes,
    *,
    names: Mapping[str, str] | None = None,
    message: Mapping[str, Any] | None = None,
    escape: bool = False,
    limits: ScriptLimits = TEMPLATE_LIMITS,
    seed: int = 0,
    card: Mapping[str, Any] | None = None,
    world_info: WorldInfoOf | None = None,
) -> list[TemplateResult]:
    """:func:`render_templates` in the calling thread (a page view built synchronously)."""
    results: list[TemplateResult | None] = [None] * len(sources)
    batch: list[tuple[int, dict[str, Any]]] = []
    states: list[dict[str, Any]] = []
    shared: dict[str, int] = {}
    for index, source in enumerate(sources):
        if source.kind != "condition" and not has_template(source.text):
            # Not a template: as it is, and no reason to run anything.
            results[index] = TemplateResult(name=source.name, text=source.text)
            continue
        code = _compiled(source, escape)
        if isinstance(code, TemplateProblem):
            results[index] = TemplateResult(name=source.name, text=source.text, problem=code)
        else:
            item: dict[str, Any] = {"name": source.name, "kind": source.kind, "code": code}
            if source.variables is not None:
                if source.shares is not None and source.shares in shared:
                    item["state"] = shared[source.shares]
                else:
                    item["state"] = len(states)
                    states.append(source.variables)
                    if source.shares is not None:
                        shared[source.shares] = item["state"]
            if source.message is not None:
                item["message"] = source.message
            if source.seed is not None:
                item["seed"] = source.seed & 0xFFFFFFFF
            batch.append((index, item))
    if batch:
        context: dict[str, Any] = {
            "names": dict(names or {}),
            "message": dict(message) if message else None,
            "seed": seed & 0xFFFFFFFF,
            "states": states,
            "card": card_definition(card) if card is not None else None,
        }
        if world_info is not None and any(
            call in sources[i].text for i, _ in batch for call in _WORLD_INFO_CALLS
        ):
            context["worldinfo"] = _world_info(world_info(), escape)
        try:
            done = _run(batch, scopes, context, limits)
        except ScriptFailure as failure:
            if failure.limit is None or len(batch) == 1:
                # (a lone template a limit stopped is the culprit: no second run)
                line = failure.line if failure.limit is None else None
                done = [_failed(sources[i], failure.message, line, failure.limit) for i, _ in batch]
            else:
                done = _one_by_one(batch, sources, scopes, context, limits)
        for (index, _), raw in zip(batch, done, strict=True):
            results[index] = _result(sources[index], raw)
    return [r for r in results if r is not None]


def _run(
    batch: Sequence[tuple[int, dict[str, Any]]],
    scopes: TemplateScopes,
    context: dict[str, Any],
    limits: ScriptLimits,
) -> list[dict[str, Any]]:
    data = {**context, "scopes": scopes.data(), "templates": [t for _, t in batch]}
    out = run_script_blocking("javascript", prelude(), data, name="templates", limits=limits)
    results = out.get("results")
    if not isinstance(results, list) or len(results) != len(batch):
        raise ScriptFailure("templates", "the template runtime gave no results")
    return results


def _one_by_one(
    batch: Sequence[tuple[int, dict[str, Any]]],
    sources: Sequence[TemplateSource],
    scopes: TemplateScopes,
    context: dict[str, Any],
    limits: ScriptLimits,
) -> list[dict[str, Any]]:
    """A batch a limit stopped, again one template at a time, each seeing what the ones
    before it wrote: the one that runs away is named, the others render."""
    running = TemplateScopes(
        copy.deepcopy(scopes.message),
        copy.deepcopy(scopes.global_),
        scopes.character,
        scopes.initial,
    )
    done: list[dict[str, Any]] = []
    for index, template in batch:
        try:
            raw = _run([(index, template)], running, context, limits)[0]
        except ScriptFailure as failure:
            # Where a limit stopped it, the engine's line is not reliably the template's.
            line = failure.line if failure.limit is None else None
            raw = _failed(sources[index], failure.message, line, failure.limit)
        done.append(raw)
        # (a template with a message scope of its own writes into that one, not the turn's)
        if not raw.get("error") and "state" not in template:
            writes = [VariableWrite.model_validate(w) for w in raw.get("writes") or []]
            apply_writes(running.message, writes, "message")
            apply_writes(running.global_, writes, "global")
    return done


def _failed(
    source: TemplateSource, message: str, line: int | None, limit: str | None
) -> dict[str, Any]:
    return {"error": message, "line": line, "limit": limit, "output": None, "writes": []}


def _result(source: TemplateSource, raw: Mapping[str, Any]) -> TemplateResult:
    error = raw.get("error")
    if error:
        problem = problem_of(
            source,
            str(error),
            raw.get("line") if isinstance(raw.get("line"), int) else None,
            raw.get("limit") if isinstance(raw.get("limit"), str) else None,
        )
        return TemplateResult(name=source.name, text=source.text, problem=problem)
    output = raw.get("output")
    value = raw.get("value")
    return TemplateResult(
        name=source.name,
        text=output if isinstance(output, str) else "",
        value=value if isinstance(value, bool) else None,
        writes=[VariableWrite.model_validate(w) for w in raw.get("writes") or []],
    )
