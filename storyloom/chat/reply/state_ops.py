"""State operations: the changes a reply asks of the chat variables, and how they apply.

Filament's ``<state_update>`` tags, an MVU card's ``<JSONPatch>`` and the ``{{setvar}}``
family all end up as a list of :class:`StateOp`; the State Updater applies that list to
``ChatState.variables`` with :func:`apply_ops`. The model writes these ops, so nothing
here may trust them: every op that cannot apply is skipped with a problem that names it
and says why, the others still apply, and the caller's dict is never touched (the state
chain keeps the old state of every turn, so mutating it in place would rewrite history).

Paths are JSON Pointers (RFC 6901) into the variables, kept exactly as written (a key
may start or end with a blank). Models and cards write dotted keys (``stats.hp``, MVU's
``角色.好感度``, ``items[0]``); :func:`key_to_pointer` turns those into pointers, escaping
``~`` and ``/`` inside a key so a key may contain them. Inside an RFC 6902 ``patch``,
paths must be pointers: the dotted form is for ``set``/``add``/... and the tags.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import jsonpatch
import jsonpointer
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from storyloom.core.errors import StoryloomError, problems_from_validation

OpName = Literal["set", "add", "sub", "remove", "push", "pull", "patch"]

_RFC6902_OPS = frozenset({"add", "remove", "replace", "move", "copy", "test"})


class StateOpsError(StoryloomError):
    """A list of state ops (a ``STATE_DELTA`` value) that does not decode."""


class StateOp(BaseModel):
    """One change to the chat variables.

    ``set`` writes ``value`` at ``path`` (missing parent objects are created); ``add`` and
    ``sub`` change a number (a missing value counts as 0, numbers written as strings are
    accepted); ``remove`` deletes; ``push`` appends ``value`` to an array (created when
    missing) and ``pull`` removes every element equal to ``value``; ``patch`` applies the
    RFC 6902 ops in ``patch`` one by one, their paths taken relative to ``path`` (MVU
    cards patch ``/stat_data``; ``""`` is the variables themselves).

    A ``path`` not starting with ``/`` is read as a dotted key and converted.
    """

    model_config = ConfigDict(frozen=True)

    op: OpName
    path: str
    value: Any = None
    patch: list[dict[str, Any]] | None = None

    @field_validator("path", mode="before")
    @classmethod
    def _pointer(cls, value: Any) -> Any:
        if isinstance(value, str) and value and not value.startswith("/"):
            return key_to_pointer(value)
        return value

    @model_validator(mode="after")
    def _patch_needs_ops(self) -> StateOp:
        if self.op == "patch" and self.patch is None:
            raise ValueError("a patch op needs a 'patch' list of RFC 6902 operations")
        return self

    def describe(self) -> str:
        """Short human form for problems and logs: ``add /gold 10``."""
        where = self.path or "/"
        if self.op == "patch":
            return f"patch {where} ({len(self.patch or [])} ops)"
        if self.op == "remove":
            return f"remove {where}"
        return f"{self.op} {where} {_short(self.value)}"


@dataclass
class OpsOutcome:
    """What :func:`apply_ops` did: the new variables, the ops that applied, the problems."""

    variables: dict[str, Any]
    applied: list[StateOp] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class _OpFailed(Exception):
    """Internal: why one op (or one patch operation) could not apply."""


# what jsonpatch raises for an operation that does not fit the document
_PATCH_ERRORS: tuple[type[Exception], ...] = (
    _OpFailed,
    jsonpatch.JsonPatchException,
    jsonpointer.JsonPointerException,
    KeyError,
    IndexError,
    TypeError,
    ValueError,
    AttributeError,
)


# -- keys and values ----------------------------------------------------------------------


def escape_pointer_part(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


def key_to_pointer(key: str) -> str:
    """A key as a model or card writes it → a JSON Pointer.

    ``/a/b`` is already a pointer and kept; ``stats.hp`` → ``/stats/hp``; ``items[0].name``
    → ``/items/0/name``; ``a["x.y"]`` → ``/a/x.y`` (brackets keep dots and spaces);
    ``a/b`` inside a dotted key becomes ``a~1b`` (one key containing a slash). A pointer
    is kept exactly, blanks included (``"/ "`` is the key ``" "``); a dotted key is
    stripped of the blanks around it.
    """
    if key.startswith("/"):
        return key
    key = key.strip()
    if not key or key.startswith("/"):
        return key
    return "".join("/" + escape_pointer_part(part) for part in split_dotted_key(key))


def split_dotted_key(key: str) -> list[str]:
    """``a.b[0]["c d"]`` → ``["a", "b", "0", "c d"]``; empty segments are kept."""
    parts: list[str] = []
    current: list[str] = []
    i, n = 0, len(key)
    pending = True  # a segment has been started (so "a." yields a trailing "")
    while i < n:
        ch = key[i]
        if ch == ".":
            parts.append("".join(current))
            current = []
            pending = True
            i += 1
        elif ch == "[":
            end = _bracket_end(key, i)
            if end < 0:  # an unmatched "[" is part of the key
                current.append(ch)
                i += 1
                continue
            if current:
                parts.append("".join(current))
                current = []
            inner = key[i + 1 : end].strip()
            if len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "\"'":
                inner = inner[1:-1]
            parts.append(inner)
            pending = False
            i = end + 1
            if i < n and key[i] == ".":
                i += 1
                pending = True
        else:
            current.append(ch)
            pending = True
            i += 1
    if current or pending:
        parts.append("".join(current))
    return parts


def _bracket_end(key: str, start: int) -> int:
    quote = ""
    for j in range(start + 1, len(key)):
        ch = key[j]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "]":
            return j
    return -1


def parse_number(value: Any) -> int | float | None:
    """A number, or a string holding one (``"10"``, ``"+5"``, ``"-2.5"``); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        try:
            return int(text)
        except ValueError:
            pass
        try:
            number = float(text)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def parse_value(text: str) -> Any:
    """A value written as text in a tag: JSON when it is JSON (``90``, ``true``, ``[1,2]``,
    ``"90"``), otherwise the text itself, stripped (``Alice``, ``007``)."""
    stripped = text.strip()
    if not stripped:
        return stripped
    first = stripped[0]
    if first in '{["-0123456789tfn':
        try:
            value = json.loads(stripped)
        except (ValueError, RecursionError):
            return stripped
        if isinstance(value, float) and not math.isfinite(value):
            return stripped
        return value
    return stripped


# -- (de)serialising -----------------------------------------------------------------------


def ops_to_json(ops: Iterable[StateOp]) -> list[dict[str, Any]]:
    """The ``STATE_DELTA`` slot value: one plain dict per op (``value`` always present)."""
    out: list[dict[str, Any]] = []
    for op in ops:
        item: dict[str, Any] = {"op": op.op, "path": op.path, "value": op.value}
        if op.patch is not None:
            item["patch"] = op.patch
        out.append(item)
    return out


def ops_from_json(data: Any, problems: list[str] | None = None) -> list[StateOp]:
    """Decode a ``STATE_DELTA`` value.

    Strict by default (raises :class:`StateOpsError` naming each bad entry); with a
    ``problems`` list, bad entries are skipped and described there instead.
    """
    found: list[str] = []
    ops: list[StateOp] = []
    if not isinstance(data, list):
        found.append(f"state ops must be a list, not {type(data).__name__}")
        data = []
    for index, item in enumerate(data):
        if not isinstance(item, dict):
            found.append(f"[{index}]: an op must be an object, not {type(item).__name__}")
            continue
        try:
            ops.append(StateOp.model_validate(item))
        except ValidationError as exc:
            reasons = "; ".join(str(p) for p in problems_from_validation(exc, f"[{index}]"))
            found.append(reasons)
    if found and problems is None:
        raise StateOpsError("bad state ops: " + "; ".join(found))
    if problems is not None:
        problems.extend(found)
    return ops


# -- applying ------------------------------------------------------------------------------


def apply_ops(variables: dict[str, Any], ops: Sequence[StateOp]) -> OpsOutcome:
    """Apply ``ops`` in order to a deep copy of ``variables``. Never raises."""
    doc: dict[str, Any] = copy.deepcopy(variables)
    outcome = OpsOutcome(variables=doc)
    for op in ops:
        try:
            if op.op == "patch":
                applied, patch_problems = _apply_patch(doc, op)
                outcome.problems.extend(patch_problems)
                if applied or not op.patch:
                    outcome.applied.append(op)
                continue
            _APPLIERS[op.op](doc, op)
        except _OpFailed as exc:
            outcome.problems.append(f"{op.describe()}: {exc}")
            continue
        except RecursionError:
            outcome.problems.append(f"{op.describe()}: the value is nested too deeply")
            continue
        outcome.applied.append(op)
    return outcome


def _parts(path: str) -> list[str]:
    try:
        return list(jsonpointer.JsonPointer(path).parts)
    except jsonpointer.JsonPointerException as exc:
        raise _OpFailed(f"bad path: {exc}") from None


def _index(container: list[Any], part: str, *, allow_end: bool) -> int:
    if part == "-" and allow_end:
        return len(container)
    if not part.isdigit() or (len(part) > 1 and part[0] == "0"):
        raise _OpFailed(f"{part!r} is not an index into an array")
    index = int(part)
    if index > len(container) or (index == len(container) and not allow_end):
        raise _OpFailed(f"index {index} is past the end of an array of {len(container)}")
    return index


def _walk(doc: Any, parts: list[str], *, create: bool) -> Any:
    """The container holding ``parts[-1]`` (parents created as objects when ``create``)."""
    node = doc
    for depth, part in enumerate(parts[:-1]):
        where = "/" + "/".join(escape_pointer_part(p) for p in parts[: depth + 1])
        if isinstance(node, dict):
            if part not in node:
                if not create:
                    raise _OpFailed(f"{where} does not exist")
                node[part] = {}
            node = node[part]
        elif isinstance(node, list):
            node = node[_index(node, part, allow_end=False)]
        else:
            parent = "/" + "/".join(escape_pointer_part(p) for p in parts[:depth])
            raise _OpFailed(f"{parent} is a {_kind(node)}, not an object or array")
    return node


def value_at(doc: Any, parts: Sequence[str]) -> tuple[bool, Any]:
    """Whether ``parts`` (a pointer's unescaped parts) lead to a value in ``doc``, and it."""
    node = doc
    for part in parts:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False, None
    return True, node


def _put(doc: dict[str, Any], parts: list[str], value: Any) -> None:
    container = _walk(doc, parts, create=True)
    last = parts[-1]
    if isinstance(container, dict):
        container[last] = value
    elif isinstance(container, list):
        index = _index(container, last, allow_end=True)
        if index == len(container):
            container.append(value)
        else:
            container[index] = value
    else:
        parent = "/" + "/".join(escape_pointer_part(p) for p in parts[:-1])
        raise _OpFailed(f"{parent} is a {_kind(container)}, not an object or array")


def _apply_set(doc: dict[str, Any], op: StateOp) -> None:
    parts = _parts(op.path)
    value = copy.deepcopy(op.value)
    if not parts:
        if not isinstance(value, dict):
            raise _OpFailed("only an object can replace all the variables")
        doc.clear()
        doc.update(value)
        return
    _put(doc, parts, value)


def _apply_number(doc: dict[str, Any], op: StateOp) -> None:
    parts = _parts(op.path)
    if not parts:
        raise _OpFailed("the variables themselves are not a number")
    amount = parse_number(op.value)
    if amount is None:
        raise _OpFailed(f"{_short(op.value)} is not a number")
    found, current = value_at(doc, parts)
    if not found or current is None:
        base: int | float = 0
    else:
        number = parse_number(current)
        if number is None:
            raise _OpFailed(f"the current value {_short(current)} is not a number")
        base = number
    result = base + amount if op.op == "add" else base - amount
    _put(doc, parts, result)


def _apply_remove(doc: dict[str, Any], op: StateOp) -> None:
    parts = _parts(op.path)
    if not parts:
        raise _OpFailed("cannot remove the variables themselves")
    container = _walk(doc, parts, create=False)
    last = parts[-1]
    if isinstance(container, dict):
        if last not in container:
            raise _OpFailed("nothing there to remove")
        del container[last]
    elif isinstance(container, list):
        del container[_index(container, last, allow_end=False)]
    else:
        parent = "/" + "/".join(escape_pointer_part(p) for p in parts[:-1])
        raise _OpFailed(f"{parent} is a {_kind(container)}, not an object or array")


def _apply_push(doc: dict[str, Any], op: StateOp) -> None:
    parts = _parts(op.path)
    found, current = value_at(doc, parts)
    if not found or current is None:
        if not parts:
            raise _OpFailed("the variables themselves are not an array")
        _put(doc, parts, [copy.deepcopy(op.value)])
        return
    if not isinstance(current, list):
        raise _OpFailed(f"the current value is a {_kind(current)}, not an array")
    current.append(copy.deepcopy(op.value))


def _apply_pull(doc: dict[str, Any], op: StateOp) -> None:
    parts = _parts(op.path)
    found, current = value_at(doc, parts)
    if not found:
        raise _OpFailed("there is no array there")
    if not isinstance(current, list):
        raise _OpFailed(f"the current value is a {_kind(current)}, not an array")
    kept = [item for item in current if not _same(item, op.value)]
    if len(kept) == len(current):
        raise _OpFailed(f"{_short(op.value)} is not in the array")
    current[:] = kept


_APPLIERS = {
    "set": _apply_set,
    "add": _apply_number,
    "sub": _apply_number,
    "remove": _apply_remove,
    "push": _apply_push,
    "pull": _apply_pull,
}


def _apply_patch(doc: dict[str, Any], op: StateOp) -> tuple[int, list[str]]:
    """Apply each RFC 6902 operation under ``op.path``: how many applied, and one problem
    per operation that did not."""
    problems: list[str] = []
    applied = 0
    base_parts = _parts(op.path)
    found, base = value_at(doc, base_parts)
    if not found or base is None:
        if base_parts:
            base = {}
            _put(doc, base_parts, base)
        else:
            base = doc
    if not isinstance(base, dict | list):
        return 0, [f"patch {op.path}: the value there is a {_kind(base)}, not an object or array"]
    for number, raw in enumerate(op.patch or [], start=1):
        label = f"patch {op.path or '/'} op {number}"
        try:
            base = _apply_patch_op(base, raw, root=not base_parts)
        except _PATCH_ERRORS as exc:
            problems.append(f"{label} {_describe_patch_op(raw)}: {exc}")
            continue
        applied += 1
        if base_parts:
            _put(doc, base_parts, base)
        else:
            doc.clear()
            doc.update(base)
    return applied, problems


def _apply_patch_op(base: Any, raw: Any, *, root: bool) -> Any:
    """One patch operation applied to ``base``; returns the new base (atomic per op)."""
    if not isinstance(raw, dict):
        raise _OpFailed("an operation must be an object")
    name = raw.get("op")
    if not isinstance(name, str):
        raise _OpFailed("the operation has no 'op'")
    name = name.lower()
    if name == "insert":  # MVU's alias
        name = "add"
    if name == "delta":  # MVU's numeric change
        path = raw.get("path")
        if not isinstance(path, str):
            raise _OpFailed("the operation has no 'path'")
        result = copy.deepcopy(base)
        _apply_number(result, StateOp(op="add", path=path or "", value=raw.get("value")))
        return result
    if name not in _RFC6902_OPS:
        raise _OpFailed(f"unknown operation {name!r}")
    operation = dict(raw, op=name)
    result = jsonpatch.JsonPatch([operation]).apply(base, in_place=False)
    if not isinstance(result, dict | list) or (root and not isinstance(result, dict)):
        raise _OpFailed("the patched value must stay an object")
    return result


def _describe_patch_op(raw: Any) -> str:
    if not isinstance(raw, dict):
        return _short(raw)
    text = f"{raw.get('op')} {raw.get('path')}"
    if "value" in raw:
        text += f" {_short(raw['value'])}"
    return text


def _same(a: Any, b: Any) -> bool:
    if a == b and type(a) is type(b):
        return True
    # "3" pulls 3: values typed into a tag arrive as text or JSON
    number_a, number_b = parse_number(a), parse_number(b)
    if number_a is not None and number_a == number_b:
        return True
    return isinstance(a, str) != isinstance(b, str) and str(a) == str(b)


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if value is None:
        return "null"
    return type(value).__name__


def _short(value: Any, limit: int = 60) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
