"""A user's Lua or JavaScript script over the Skein (the ``chat:Script`` shuttle, Clotho's
Jacquard plugins): the prompt goes in as plain data, the script changes it, and the node
checks and applies what changed, recording it for the prompt inspector.

The script sees one global ``ctx`` (:func:`script_context`)::

    ctx = {
      "blocks": [{id, kind, role, content, priority, depth, name, enabled,
                  source: {kind, id, field, label}}, ...],   # prompt order
      "variables": {...},   # the chat variables as of now (the Skein's over the state's)
      "macros": {"char": ..., "user": ..., "persona": ..., ...},  # plain strings
      "state": {...},       # the chat state before the turn
      "turn": {"kind": "normal|swipe|continue|impersonate", "user_message": "..."},
      "seed": 7,            # the turn's seed (Lua's math.random starts from it)
    }

and changes it in place (or returns a new one). :func:`apply_script_result` then reads
only ``blocks`` and ``variables`` (``macros``, ``state``, ``turn`` and ``seed`` are for reading;
changes to them are ignored), block by block, matched by ``id``:

- a block whose id was not there before is **added**: it needs a string ``content``;
  ``role`` (default ``system``), ``priority`` (default 50), ``depth``, ``name`` and
  ``enabled`` are taken when given; it is always of kind ``custom`` with the script as
  its source (``{kind: "script", id: <script name>, label: "Script: <name>"}``), whatever
  ``kind`` or ``source`` it carries (a block copied from another one is fine);
- a block that is gone is **removed**, and listed in the Skein's ``cut`` with the reason
  ``removed by script <name>``;
- a block whose ``content``, ``role``, ``enabled``, ``priority``, ``depth`` or ``name``
  changed is **edited**: it gets ``edited_by: [<script name>, ...]``. Its ``kind`` and
  ``source`` cannot change (the inspector would name a wrong origin); a missing
  ``depth`` or ``name`` means null (Lua drops nil fields), a missing ``role``,
  ``priority`` or ``enabled`` means unchanged. Other keys a script adds are ignored, and
  what a block carries that ``ctx`` does not show (tokens, group, condition...) is kept;
- the blocks' new order is the prompt's order (**reordered** when the kept blocks
  changed their order);
- ``variables`` replaces the chat variables: the keys set or changed, and those removed
  (as null), are recorded. Like variables set by macros, they flow on to the state.

Anything else is refused with :class:`ScriptResultInvalid`, naming the script, the block
index and the field (``script mood.lua: ctx.blocks[3].role: ...``), and the Skein is left
as it came. Each run adds a :class:`~storyloom.chat.prompt.skein.ScriptRun` to the Skein's
``scripts``: what it added, removed, edited and set, its time and what it printed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, cast, get_args

from storyloom.chat.prompt.prompt_ast import macro_context
from storyloom.chat.prompt.skein import (
    BlockKind,
    BlockRole,
    BlockSource,
    CutBlock,
    ScriptRun,
    Skein,
    SkeinBlock,
)
from storyloom.chat.store.snapshot import ContextSnapshot
from storyloom.core.errors import FieldProblem, InvalidInput
from storyloom.sandbox.script_host import ScriptLanguage, ScriptLimits, run_script

__all__ = [
    "EDITABLE_FIELDS",
    "ScriptResultInvalid",
    "apply_script_result",
    "run_script_shuttle",
    "script_context",
]

OUTPUT_KEY = "__output__"
EDITABLE_FIELDS = ("content", "role", "enabled", "priority", "depth", "name")
"""The block fields a script may change."""
_ROLES: tuple[str, ...] = get_args(BlockRole)
_SOURCE_FIELDS = ("kind", "id", "field", "label")


class ScriptResultInvalid(InvalidInput):
    """A script left ``ctx`` in a shape the node cannot apply; names the script, the place
    (``ctx.blocks[2].role``) and what is wrong."""

    def __init__(self, script: str, where: str, reason: str) -> None:
        self.script = script
        self.where = where
        super().__init__(f"script {script}: {where}: {reason}", [FieldProblem(where, reason)])


# -- what the script sees -----------------------------------------------------------------


def _block_data(block: SkeinBlock) -> dict[str, Any]:
    source = block.source
    return {
        "id": block.id,
        "kind": block.kind.value,
        "role": block.role,
        "content": block.content,
        "priority": block.priority,
        "depth": block.depth,
        "name": block.name,
        "enabled": block.enabled,
        "source": {
            "kind": source.kind,
            "id": source.id,
            "field": source.field,
            "label": source.label,
        },
    }


def _macros(snapshot: ContextSnapshot) -> dict[str, str]:
    context = macro_context(snapshot, {})
    values = {
        "char": context.char,
        "user": context.user,
        "description": context.description,
        "personality": context.personality,
        "scenario": context.scenario,
        "persona": context.persona,
        **context.extra,
    }
    return {key: str(value) for key, value in values.items()}


def _user_message(snapshot: ContextSnapshot) -> str:
    for message in reversed(snapshot.history):
        if message.role == "user":
            return message.content
    return ""


def script_context(skein: Skein, snapshot: ContextSnapshot | None) -> dict[str, Any]:
    """The plain-data ``ctx`` a script runs on (see the module docstring). Without a
    snapshot (a Script node outside a chat turn) ``macros`` and ``state`` are empty."""
    variables = dict(snapshot.state.variables) if snapshot is not None else {}
    variables.update(skein.variables)
    return {
        "blocks": [_block_data(block) for block in skein.blocks],
        "variables": variables,
        "macros": _macros(snapshot) if snapshot is not None else {},
        "state": snapshot.state.as_json() if snapshot is not None else {},
        "turn": {
            "kind": snapshot.generation if snapshot is not None else "normal",
            "user_message": _user_message(snapshot) if snapshot is not None else "",
        },
        # Lua's math.random is seeded from it: the same turn draws the same numbers.
        "seed": snapshot.seed if snapshot is not None else 0,
    }


# -- what the script did ----------------------------------------------------------------------


class _Checker:
    """Reads one block of the result, naming the script and the place in each error."""

    def __init__(self, script: str, index: int, item: Mapping[str, Any]) -> None:
        self.script = script
        self.where = f"ctx.blocks[{index}]"
        self.item = item

    def fail(self, field: str, reason: str) -> ScriptResultInvalid:
        return ScriptResultInvalid(self.script, f"{self.where}.{field}", reason)

    def string(self, field: str, *, nullable: bool = False) -> str | None:
        value = self.item.get(field)
        if value is None and nullable:
            return None
        if not isinstance(value, str):
            wanted = "text or null" if nullable else "text"
            raise self.fail(field, f"expected {wanted}, got {_shown(value)}")
        return value

    def integer(self, field: str, *, nullable: bool = False, minimum: int | None = None) -> Any:
        value = self.item.get(field)
        if value is None and nullable:
            return None
        # Lua has one number type for a script's arithmetic: 2.0 is the integer 2.
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            wanted = "a whole number or null" if nullable else "a whole number"
            raise self.fail(field, f"expected {wanted}, got {_shown(value)}")
        if minimum is not None and value < minimum:
            raise self.fail(field, f"must be {minimum} or more, got {value}")
        return value

    def role(self) -> str:
        value = self.item.get("role")
        if value not in _ROLES:
            raise self.fail("role", f"expected one of {', '.join(_ROLES)}, got {_shown(value)}")
        return cast(str, value)

    def boolean(self, field: str) -> bool:
        value = self.item.get(field)
        if not isinstance(value, bool):
            raise self.fail(field, f"expected true or false, got {_shown(value)}")
        return value

    def fields(self, old: SkeinBlock | None) -> dict[str, Any]:
        """The editable fields as the script left them (missing: see the docstring)."""
        item = self.item
        return {
            "content": self.string("content"),
            "role": self.role() if "role" in item else (old.role if old else "system"),
            "enabled": self.boolean("enabled")
            if "enabled" in item
            else (old.enabled if old else True),
            "priority": (
                self.integer("priority") if "priority" in item else (old.priority if old else 50)
            ),
            "depth": self.integer("depth", nullable=True, minimum=0),
            "name": self.string("name", nullable=True),
        }

    def unchanged_origin(self, old: SkeinBlock) -> None:
        if "kind" in self.item and self.item["kind"] != old.kind.value:
            raise self.fail(
                "kind",
                f"a script cannot change a block's kind (was {old.kind.value!r}); "
                "remove the block and add a new one instead",
            )
        source = self.item.get("source", None)
        if "source" not in self.item:
            return
        if not isinstance(source, Mapping):
            raise self.fail("source", f"expected an object, got {_shown(source)}")
        before = _block_data(old)["source"]
        for key in _SOURCE_FIELDS:
            if source.get(key) != before[key]:
                raise self.fail(
                    f"source.{key}",
                    f"a script cannot change where a block came from (was {before[key]!r})",
                )


def _shown(value: Any) -> str:
    if value is None:
        return "null (or nothing)"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def apply_script_result(
    skein: Skein,
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    *,
    name: str,
    language: ScriptLanguage,
    duration_ms: float,
    node: str | None = None,
) -> Skein:
    """``skein`` with what the script changed between ``before`` (the ``ctx`` it was
    given) and ``after`` (the ``ctx`` it left) applied, and the run recorded in
    ``scripts``. ``node``: the workflow node whose own code ran (None: a script file),
    named beside ``name`` so a page can say "inline" in its language. Raises
    :class:`ScriptResultInvalid`; ``skein`` itself is not changed."""
    said: dict[str, str] = {"name": name} if node is None else {"name": name, "node": node}
    raw_blocks = after.get("blocks")
    if not isinstance(raw_blocks, list):
        raise ScriptResultInvalid(
            name,
            "ctx.blocks",
            f"expected a list of blocks, got {_shown(raw_blocks)} (a script that returns a "
            "value replaces ctx: return ctx itself, or change it in place)",
        )
    raw_variables = after.get("variables")
    if not isinstance(raw_variables, Mapping):
        raise ScriptResultInvalid(
            name, "ctx.variables", f"expected an object, got {_shown(raw_variables)}"
        )
    old_by_id = {block.id: block for block in skein.blocks}
    given = before.get("blocks")
    shown_by_id = {
        item["id"]: item
        for item in (given if isinstance(given, list) else [])
        if isinstance(item, Mapping) and isinstance(item.get("id"), str)
    }
    blocks: list[SkeinBlock] = []
    seen: set[str] = set()
    added: list[str] = []
    edited: list[str] = []
    for index, item in enumerate(raw_blocks):
        if not isinstance(item, Mapping):
            raise ScriptResultInvalid(
                name, f"ctx.blocks[{index}]", f"expected a block object, got {_shown(item)}"
            )
        check = _Checker(name, index, item)
        block_id = check.string("id")
        assert block_id is not None
        if not block_id:
            raise check.fail("id", "a block needs an id that is not empty")
        if block_id in seen:
            raise check.fail("id", f"another block has the id {block_id!r} already")
        seen.add(block_id)
        old = old_by_id.get(block_id)
        if old is not None and shown_by_id.get(block_id) == item:
            blocks.append(old)  # untouched, the common case: nothing to check
            continue
        values = check.fields(old)
        if old is None:
            blocks.append(
                SkeinBlock(
                    id=block_id,
                    kind=BlockKind.CUSTOM,
                    source=BlockSource.of("script", "script", id=name, **said),
                    **values,
                )
            )
            added.append(block_id)
            continue
        check.unchanged_origin(old)
        changes = {k: v for k, v in values.items() if getattr(old, k) != v}
        if not changes:
            blocks.append(old)
            continue
        editors = list((old.model_extra or {}).get("edited_by") or [])
        if name not in editors:
            editors.append(name)
        block = old.model_copy(update=changes)
        # Extra fields live in __pydantic_extra__, which model_copy(update=) leaves alone.
        extra = dict(block.__pydantic_extra__ or {})
        extra["edited_by"] = editors
        block.__pydantic_extra__ = extra
        blocks.append(block)
        edited.append(block_id)

    removed = [block for block in skein.blocks if block.id not in seen]
    kept_before = [block.id for block in skein.blocks if block.id in seen]
    kept_after = [block.id for block in blocks if block.id in old_by_id]

    old_variables = before.get("variables")
    old_variables = old_variables if isinstance(old_variables, Mapping) else {}
    variables = dict(raw_variables)
    changed: dict[str, Any] = {
        key: value
        for key, value in variables.items()
        if key not in old_variables or old_variables[key] != value
    }
    changed.update({key: None for key in old_variables if key not in variables})

    output = after.get(OUTPUT_KEY)
    cut = [
        *skein.cut,
        *(
            CutBlock(
                id=block.id,
                kind=block.kind,
                tokens=block.tokens or 0,
                reason=f"removed by script {name}",
                term="removed_by_script",
                values=dict(said),
            )
            for block in removed
        ),
    ]
    run = ScriptRun(
        name=name,
        node=node,
        language=language,
        duration_ms=round(duration_ms, 3),
        added=added,
        removed=[block.id for block in removed],
        edited=edited,
        reordered=kept_before != kept_after,
        variables=changed,
        output=output if isinstance(output, str) else "",
    )
    # A shallow copy with new lists where something changed: a deep copy of the whole
    # Skein cost more than the rest of this function (the fields left are not changed).
    out = skein.model_copy(
        update={
            "blocks": blocks,
            "variables": variables,
            "cut": cut,
            "scripts": [*skein.scripts, run],
        }
    )
    return out


async def run_script_shuttle(
    skein: Skein,
    snapshot: ContextSnapshot | None,
    *,
    language: ScriptLanguage,
    code: str,
    name: str,
    limits: ScriptLimits | None = None,
    node: str | None = None,
) -> Skein:
    """Run ``code`` on ``skein`` (and the turn's ``snapshot``) and apply what it changed.

    A script that fails or hits a limit raises
    :class:`~storyloom.sandbox.script_host.ScriptFailure` (its message and line); one
    whose result does not fit raises :class:`ScriptResultInvalid`."""
    before = script_context(skein, snapshot)
    started = time.perf_counter()
    after = await run_script(
        language, code, before, name=name, limits=limits if limits is not None else ScriptLimits()
    )
    duration_ms = (time.perf_counter() - started) * 1000
    return apply_script_result(
        skein, before, after, name=name, language=language, duration_ms=duration_ms, node=node
    )
