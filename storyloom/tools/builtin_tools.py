"""The built-in service tools, provided through ``storyloom_tools`` as a plugin would.

- ``system:get_current_time``: the time now, in a named time zone or the machine's.
- ``kb:Query``, ``kb:ReadEntry``, ``kb:CreateEntry``, ``kb:UpdateEntry``,
  ``kb:MarkObsolete``, ``kb:DeleteEntry``: the project's knowledge, within the caller's
  :class:`~storyloom.tools.tool_policy.KbAccess`. An entry an agent writes carries
  ``management_metadata.source = "agent_generated"``, and every agent write bumps the
  KB's ``kb_version`` (seed 000 §2.2.3, "管理版本"): its last number goes up by one.
- ``chat:RollDice``: dice such as ``2d6+1``. Within a turn the n-th roll is seeded by
  sha256(turn key, n, notation), so swiping a turn replays the same rolls; a reroll is
  a new turn key. Without a turn key the roll is random.
- ``chat:GetVariable`` / ``chat:SetVariable``: the turn's chat variables (the state
  chain); a write is applied with the reply's own state changes.

Each tool's ``parameters`` is the JSON Schema of a pydantic model here.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import re
from datetime import UTC, datetime
from typing import Any, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from storyloom.core.errors import InvalidInput, NotFound, StoryloomError, Unavailable
from storyloom.core.plugin_markers import hookimpl
from storyloom.knowledge.caiu import CAIU, ActivationCriteria, Content, ManagementMetadata
from storyloom.knowledge.catalog import LoadedKB
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.tools.tool_definition import (
    ServiceFunction,
    ServiceTool,
)
from storyloom.tools.tool_manager import ToolCallContext

AGENT_SOURCE = "agent_generated"
ENTRY_TEXT_MAX = 4000
DICE_MAX_COUNT = 100
DICE_MAX_SIDES = 1000
DICE_MAX_TERMS = 10

M = TypeVar("M", bound=BaseModel)


class KbRefused(StoryloomError):
    """The caller's KB scopes do not cover this knowledge base."""


def parameters_of(model: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON Schema without pydantic's titles (noise in a prompt)."""
    schema: dict[str, Any] = _untitled(model.model_json_schema())
    return schema


def _untitled(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_untitled(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _untitled(prop) for name, prop in value.items()}
        else:
            out[key] = _untitled(value)
    return out


def _args(model: type[M], arguments: dict[str, Any]) -> M:
    return model.model_validate(arguments)


def _tool(
    tool_id: str, name: str, description: str, params: type[BaseModel], fn: ServiceFunction
) -> ServiceTool:
    return ServiceTool.of(
        tool_id, fn, description=description, parameters=parameters_of(params), display_name=name
    )


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- system --------------------------------------------------------------------------


class CurrentTimeParams(_Params):
    timezone: str | None = Field(
        default=None, description="IANA time zone such as Asia/Shanghai; default: the server's"
    )


def get_current_time(arguments: dict[str, Any], ctx: ToolCallContext) -> dict[str, Any]:
    params = _args(CurrentTimeParams, arguments)
    if params.timezone:
        try:
            zone = ZoneInfo(params.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise InvalidInput(
                f"unknown time zone {params.timezone!r} (use an IANA name such as Europe/Paris)"
            ) from None
        now = datetime.now(zone)
        name = params.timezone
    else:
        now = datetime.now(UTC).astimezone()
        name = now.tzname() or "local"
    return {
        "iso": now.isoformat(timespec="seconds"),
        "timezone": name,
        "weekday": now.strftime("%A"),
    }


# -- knowledge -----------------------------------------------------------------------


class QueryParams(_Params):
    query: str = Field(min_length=1, description="What to look for, in words")
    kb: list[str] | None = Field(
        default=None, description="Knowledge bases (ids or names) to search; default: all"
    )
    top_k: int = Field(default=5, ge=1, le=20, description="How many entries to return")


class ReadEntryParams(_Params):
    kb: str = Field(min_length=1, description="Knowledge base id or name")
    entry: str = Field(min_length=1, description="Entry id or display name")


class CreateEntryParams(_Params):
    kb: str = Field(min_length=1, description="Knowledge base id or name")
    name: str = Field(min_length=1, description="Display name of the new entry")
    content: str = Field(description="The entry's text")
    keywords: list[str] = Field(
        default_factory=list, description="Keywords that bring the entry into a prompt"
    )
    tags: list[str] = Field(default_factory=list)


class UpdateEntryParams(_Params):
    kb: str = Field(min_length=1, description="Knowledge base id or name")
    entry: str = Field(min_length=1, description="Entry id or display name")
    content: str | None = Field(default=None, description="New text; unset keeps it")
    name: str | None = Field(default=None, description="New display name; unset keeps it")
    keywords: list[str] | None = Field(default=None, description="New keywords; unset keeps them")
    tags: list[str] | None = Field(default=None, description="New tags; unset keeps them")


class MarkObsoleteParams(_Params):
    kb: str = Field(min_length=1, description="Knowledge base id or name")
    entry: str = Field(min_length=1, description="Entry id or display name")
    reason: str = Field(default="", description="Why the entry no longer holds")


class DeleteEntryParams(_Params):
    kb: str = Field(min_length=1, description="Knowledge base id or name")
    entry: str = Field(min_length=1, description="Entry id or display name")


OBSOLETE_TAG = "obsolete"
"""Tag ``kb:MarkObsolete`` adds; the entry is also switched off, so no prompt gets it."""


def _names(loaded: LoadedKB) -> list[str]:
    return [loaded.kb_id, loaded.kb.kb_displayName, *loaded.aliases, *loaded.reference_ids]


def _label(loaded: LoadedKB) -> str:
    return loaded.kb.kb_displayName or loaded.kb_id


def _knowledge(ctx: ToolCallContext) -> Any:
    if ctx.knowledge is None:
        raise Unavailable("no project is open: the knowledge tools need one")
    return ctx.knowledge


def _find_kb(ctx: ToolCallContext, key: str, *, write: bool) -> LoadedKB:
    catalog = _knowledge(ctx).snapshot().knowledge.catalog
    found: list[LoadedKB] = catalog.find(key)
    if not found:
        readable = [_label(b) for b in catalog.bases if ctx.kb_access.can_read(_names(b))]
        raise NotFound(f"no knowledge base {key!r} (readable: {', '.join(readable) or 'none'})")
    if len(found) > 1:
        ids = ", ".join(b.kb_id for b in found)
        raise InvalidInput(f"{key!r} names {len(found)} knowledge bases ({ids}); use an id")
    loaded = found[0]
    allowed = ctx.kb_access.can_write if write else ctx.kb_access.can_read
    if not allowed(_names(loaded)):
        verb = "write to" if write else "read"
        raise KbRefused(f"this caller may not {verb} knowledge base {_label(loaded)!r}")
    return loaded


def _find_entry(loaded: LoadedKB, key: str) -> CAIU:
    entry = loaded.kb.entry(key)
    if entry is not None:
        return entry
    named = [e for e in loaded.kb.entries if e.displayName == key]
    if len(named) == 1:
        return named[0]
    if named:
        ids = ", ".join(e.id for e in named)
        raise InvalidInput(f"{len(named)} entries are named {key!r} ({ids}); use an id")
    raise NotFound(f"no entry {key!r} in knowledge base {_label(loaded)!r}")


def _entry_view(loaded: LoadedKB, entry: CAIU, limit: int | None = None) -> dict[str, Any]:
    text = entry.text
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    return {
        "kb": loaded.kb_id,
        "kbName": _label(loaded),
        "id": entry.id,
        "name": entry.displayName or "",
        "content": text,
        "keywords": list(entry.activation_criteria.keywords),
        "tags": list(entry.management_metadata.tags),
        "enabled": entry.management_metadata.is_enabled,
        "source": entry.management_metadata.source,
        "kbVersion": loaded.kb.kb_version,
    }


async def kb_query(arguments: dict[str, Any], ctx: ToolCallContext) -> dict[str, Any]:
    params = _args(QueryParams, arguments)
    knowledge = _knowledge(ctx)
    if params.kb:
        kbs = [await asyncio.to_thread(_find_kb, ctx, key, write=False) for key in params.kb]
    else:
        every = await asyncio.to_thread(knowledge.project_kbs, None)
        kbs = [b for b in every if ctx.kb_access.can_read(_names(b))]
    if not kbs:
        return {"hits": [], "note": "no knowledge base this caller may read"}
    hits, problems = await knowledge.search(params.query, kbs, params.top_k)
    by_id = {b.kb_id: b for b in kbs}
    out = []
    for hit in hits:
        loaded = by_id.get(hit.kb_id)
        entry = loaded.kb.entry(hit.entry_id) if loaded is not None else None
        if loaded is None or entry is None:
            continue
        view = _entry_view(loaded, entry, ENTRY_TEXT_MAX)
        view["score"] = round(hit.score, 6)
        out.append(view)
    result: dict[str, Any] = {"hits": out}
    if problems:
        result["problems"] = problems
    return result


def kb_read_entry(arguments: dict[str, Any], ctx: ToolCallContext) -> dict[str, Any]:
    params = _args(ReadEntryParams, arguments)
    loaded = _find_kb(ctx, params.kb, write=False)
    return _entry_view(loaded, _find_entry(loaded, params.entry))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def kb_create_entry(arguments: dict[str, Any], ctx: ToolCallContext) -> dict[str, Any]:
    """A new entry; within a chat turn, the same call replayed by a swipe (same turn, same
    place among the turn's writes, same arguments) answers the entry it wrote the first
    time instead of writing it again."""
    params = _args(CreateEntryParams, arguments)
    knowledge = _knowledge(ctx)
    loaded = _find_kb(ctx, params.kb, write=True)
    write_key = _write_key(ctx, params)
    if write_key is not None:
        for existing in loaded.kb.entries:
            if _storyloom_extension(existing).get(TOOL_WRITE) == write_key:
                return {**_entry_view(loaded, existing), "replayed": True}
    try:
        entry = CAIU(
            displayName=params.name,
            content=Content(value=params.content),
            activation_criteria=ActivationCriteria(keywords=params.keywords),
            management_metadata=ManagementMetadata(
                tags=params.tags, source=AGENT_SOURCE, created_at=_now(), updated_at=_now()
            ),
            extensions={"storyloom": {TOOL_WRITE: write_key}} if write_key else {},
        )
    except ValidationError as exc:
        raise InvalidInput.from_validation("entry", exc) from None
    kb = loaded.kb.model_copy(deep=True)
    kb.entries.append(entry)
    saved = knowledge.replace(_versioned(kb))
    return _entry_view(saved, entry)


TOOL_WRITE = "tool_write"
"""Key, in an entry's ``extensions.storyloom``, of the turn's call that wrote it."""


def _write_key(ctx: ToolCallContext, params: CreateEntryParams) -> str | None:
    if not ctx.turn_key:
        return None
    ordinal = ctx.next_ordinal("kb:CreateEntry")
    call = params.model_dump_json()
    return hashlib.sha256(f"{ctx.turn_key}\x1f{ordinal}\x1f{call}".encode()).hexdigest()[:32]


def _storyloom_extension(entry: CAIU) -> dict[str, Any]:
    ours = entry.extensions.get("storyloom")
    return ours if isinstance(ours, dict) else {}


def kb_update_entry(arguments: dict[str, Any], ctx: ToolCallContext) -> dict[str, Any]:
    params = _args(UpdateEntryParams, arguments)
    knowledge = _knowledge(ctx)
    loaded = _find_kb(ctx, params.kb, write=True)
    kb = loaded.kb.model_copy(deep=True)
    entry = _find_entry(LoadedKB(kb=kb, folder=loaded.folder, scope=loaded.scope), params.entry)
    if params.content is not None:
        entry.content.value = params.content
    if params.name is not None:
        entry.displayName = params.name
    if params.keywords is not None:
        entry.activation_criteria.keywords = params.keywords
    if params.tags is not None:
        entry.management_metadata.tags = params.tags
    entry.management_metadata.source = AGENT_SOURCE
    entry.management_metadata.updated_at = _now()
    saved = knowledge.replace(_revalidated(_versioned(kb)))
    return _entry_view(saved, entry)


def kb_mark_obsolete(arguments: dict[str, Any], ctx: ToolCallContext) -> dict[str, Any]:
    """The entry is kept (its history stays readable) but switched off and tagged
    ``obsolete``; the reason goes into its author notes."""
    params = _args(MarkObsoleteParams, arguments)
    knowledge = _knowledge(ctx)
    loaded = _find_kb(ctx, params.kb, write=True)
    kb = loaded.kb.model_copy(deep=True)
    entry = _find_entry(LoadedKB(kb=kb, folder=loaded.folder, scope=loaded.scope), params.entry)
    meta = entry.management_metadata
    meta.is_enabled = False
    if OBSOLETE_TAG not in meta.tags:
        meta.tags = [*meta.tags, OBSOLETE_TAG]
    if params.reason:
        note = f"Obsolete ({_now()}): {params.reason}"
        meta.author_notes = f"{meta.author_notes}\n{note}" if meta.author_notes else note
    meta.source = AGENT_SOURCE
    meta.updated_at = _now()
    saved = knowledge.replace(_revalidated(_versioned(kb)))
    return _entry_view(saved, entry)


def kb_delete_entry(arguments: dict[str, Any], ctx: ToolCallContext) -> dict[str, Any]:
    """The entry is removed, and with it every other entry's link to it (``child_ids``,
    ``related_ids``), so nothing points at an entry that is gone."""
    params = _args(DeleteEntryParams, arguments)
    knowledge = _knowledge(ctx)
    loaded = _find_kb(ctx, params.kb, write=True)
    kb = loaded.kb.model_copy(deep=True)
    entry = _find_entry(LoadedKB(kb=kb, folder=loaded.folder, scope=loaded.scope), params.entry)
    kb.entries = [e for e in kb.entries if e.id != entry.id]
    for other in kb.entries:
        meta = other.management_metadata
        meta.child_ids = [i for i in meta.child_ids if i != entry.id]
        meta.related_ids = [i for i in meta.related_ids if i != entry.id]
    saved = knowledge.replace(_revalidated(_versioned(kb)))
    return {
        "kb": saved.kb_id,
        "kbName": _label(saved),
        "deleted": entry.id,
        "name": entry.displayName or "",
        "kbVersion": saved.kb.kb_version,
    }


_TRAILING_NUMBER = re.compile(r"(\d+)(\D*)$")


def bumped_version(version: str) -> str:
    """``1.0.0`` → ``1.0.1``; ``v3`` → ``v4``; a version without a number gets ``.1``."""
    match = _TRAILING_NUMBER.search(version)
    if match is None:
        return f"{version}.1" if version else "1"
    number = str(int(match.group(1)) + 1)
    return f"{version[: match.start(1)]}{number}{match.group(2)}"


def _versioned(kb: KnowledgeBase) -> KnowledgeBase:
    kb.kb_version = bumped_version(kb.kb_version)
    return kb


def _revalidated(kb: KnowledgeBase) -> KnowledgeBase:
    """The edited KB validated again: a name with '/' fails here, not at the next load."""
    try:
        return KnowledgeBase.model_validate(kb.model_dump(mode="json", by_alias=True))
    except ValidationError as exc:
        raise InvalidInput.from_validation("entry", exc) from None


# -- chat ----------------------------------------------------------------------------


class RollDiceParams(_Params):
    notation: str = Field(
        min_length=1, description="Dice such as 2d6+1, d20 or 3d6-2 (at most 100 dice)"
    )


class GetVariableParams(_Params):
    name: str = Field(min_length=1, description="Variable name; dots reach inside: stats.hp")


class SetVariableParams(_Params):
    name: str = Field(min_length=1, description="Variable name; dots reach inside: stats.hp")
    value: Any = Field(description="New value (any JSON)")


_DICE_TERM = re.compile(r"\s*([+-])?\s*(?:(\d*)\s*[dD]\s*(\d+)|(\d+))\s*")


def parse_dice(notation: str) -> list[tuple[int, int, int]]:
    """``(sign, count, sides)`` per term; a constant is ``(sign, value, 0)``."""
    terms: list[tuple[int, int, int]] = []
    position = 0
    while position < len(notation):
        match = _DICE_TERM.match(notation, position)
        if match is None or match.end() == position or (terms and not match.group(1)):
            raise InvalidInput(f"{notation!r} is not dice notation (write e.g. 2d6+1)")
        sign = -1 if match.group(1) == "-" else 1
        if match.group(3) is not None:
            count = int(match.group(2) or 1)
            sides = int(match.group(3))
            if not 1 <= count <= DICE_MAX_COUNT or not 2 <= sides <= DICE_MAX_SIDES:
                raise InvalidInput(
                    f"{notation!r}: 1 to {DICE_MAX_COUNT} dice of 2 to {DICE_MAX_SIDES} sides"
                )
            terms.append((sign, count, sides))
        else:
            terms.append((sign, int(match.group(4)), 0))
        position = match.end()
    if not any(sides for _, _, sides in terms) or len(terms) > DICE_MAX_TERMS:
        raise InvalidInput(f"{notation!r}: needs at least one die and at most 10 terms")
    return terms


def roll_dice(arguments: dict[str, Any], ctx: ToolCallContext) -> dict[str, Any]:
    params = _args(RollDiceParams, arguments)
    terms = parse_dice(params.notation)
    ordinal = ctx.next_ordinal("chat:RollDice")
    if ctx.turn_key:
        seed = hashlib.sha256(f"{ctx.turn_key}\x1f{ordinal}\x1f{params.notation}".encode()).digest()
        rng = random.Random(int.from_bytes(seed[:8], "big"))
    else:
        rng = random.Random()
    rolls: list[list[int]] = []
    total = 0
    modifier = 0
    for sign, count, sides in terms:
        if sides == 0:
            modifier += sign * count
            continue
        dice = [rng.randint(1, sides) for _ in range(count)]
        rolls.append(dice)
        total += sign * sum(dice)
    return {
        "notation": params.notation,
        "rolls": rolls,
        "modifier": modifier,
        "total": total + modifier,
    }


def _variables(ctx: ToolCallContext) -> Any:
    if ctx.variables is None:
        raise Unavailable("no chat: chat variables exist only in a conversation's turn")
    return ctx.variables


def get_variable(arguments: dict[str, Any], ctx: ToolCallContext) -> dict[str, Any]:
    params = _args(GetVariableParams, arguments)
    return {"name": params.name, "value": _variables(ctx).get(params.name)}


def set_variable(arguments: dict[str, Any], ctx: ToolCallContext) -> dict[str, Any]:
    params = _args(SetVariableParams, arguments)
    _variables(ctx).set(params.name, params.value)
    return {"name": params.name, "value": params.value}


BUILTIN_TOOLS: tuple[ServiceTool, ...] = (
    _tool(
        "system:get_current_time",
        "Current time",
        "The current date and time (ISO 8601) in a time zone.",
        CurrentTimeParams,
        get_current_time,
    ),
    _tool(
        "kb:Query",
        "Search knowledge",
        "Search the knowledge bases by keywords and meaning; the best entries first.",
        QueryParams,
        kb_query,
    ),
    _tool(
        "kb:ReadEntry",
        "Read a knowledge entry",
        "Read one entry of a knowledge base, whole.",
        ReadEntryParams,
        kb_read_entry,
    ),
    _tool(
        "kb:CreateEntry",
        "Create a knowledge entry",
        "Add an entry to a knowledge base (marked as written by an agent).",
        CreateEntryParams,
        kb_create_entry,
    ),
    _tool(
        "kb:UpdateEntry",
        "Update a knowledge entry",
        "Change an entry's text, name, keywords or tags; what is not given stays.",
        UpdateEntryParams,
        kb_update_entry,
    ),
    _tool(
        "kb:MarkObsolete",
        "Mark a knowledge entry obsolete",
        "Switch an entry off and tag it obsolete (it is kept; give the reason).",
        MarkObsoleteParams,
        kb_mark_obsolete,
    ),
    _tool(
        "kb:DeleteEntry",
        "Delete a knowledge entry",
        "Remove an entry from a knowledge base for good.",
        DeleteEntryParams,
        kb_delete_entry,
    ),
    _tool(
        "chat:RollDice",
        "Roll dice",
        "Roll dice in standard notation (2d6+1); a swipe of the turn rolls the same.",
        RollDiceParams,
        roll_dice,
    ),
    _tool(
        "chat:GetVariable",
        "Get a chat variable",
        "Read a variable of this chat.",
        GetVariableParams,
        get_variable,
    ),
    _tool(
        "chat:SetVariable",
        "Set a chat variable",
        "Set a variable of this chat; it is kept with this turn.",
        SetVariableParams,
        set_variable,
    ),
)


@hookimpl
def storyloom_tools() -> list[ServiceTool]:
    return list(BUILTIN_TOOLS)
