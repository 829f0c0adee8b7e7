"""MVU's rules for updates under ``stat_data``: value pairs, ``$meta`` and the Zod schema.

:func:`apply_mvu_ops` applies a turn's ops as :func:`~storyloom.chat.reply.state_ops.apply_ops`
does, one RFC 6902 operation at a time, with what MagVarUpdate adds for paths under
``/stat_data``:

* **value pairs**: a value written ``[value, "description"]`` keeps its description: a
  set, a JSON Patch ``replace`` or a numeric change of the pair's path changes the first
  element (``_.set('理.好感度', 19, 25)`` on ``[19, "desc"]`` gives ``[25, "desc"]``), a
  number stays a number (``"25"`` is stored as 25). Writing a whole new pair replaces it;
* **``$meta``** on an object: ``extensible: false`` refuses a key the object does not have
  (and then every key it has is required, as in MVU); ``required: [keys]`` refuses
  removing those keys; ``recursiveExtensible`` passes ``extensible`` down to every object
  below. An object without ``$meta`` (or an inherited one) takes new keys, as storyloom
  always did. ``$``-keys themselves cannot be written by a reply. Unlike MVU, ``$meta``
  stays in the state (the macros leave ``$``-keys out of what the model reads);
* **the schema** (the card's Zod schema as JSON Schema, :mod:`storyloom.sillytavern.mvu_zod`):
  after each operation ``x-coerce`` values are converted and ``x-catch`` ones fall back
  (as Zod parses), and an operation that makes ``stat_data`` break the schema where it
  did not before is refused.

A refused operation leaves the state as it was and becomes an :class:`MvuWarning`, which
the turn stores on the message (``extra.mvu_warnings``) for the page to show in the
reader's language.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import jsonpointer
import jsonschema
from pydantic import BaseModel

from storyloom.chat.reply.state_ops import (
    StateOp,
    apply_ops,
    parse_number,
)
from storyloom.chat.reply.update_blocks import MVU_ROOT

MvuWarningKind = Literal["not_extensible", "required", "meta", "schema", "updater"]
MVU_WARNING_KINDS: frozenset[str] = frozenset(get_args(MvuWarningKind))


class MvuWarning(BaseModel):
    """An MVU update that was refused (or, ``updater``, the separate updater's call that
    failed: ``detail`` says why). ``path`` is dotted, under ``stat_data``
    (``理.好感度``); a ``schema`` warning names the broken ``rule`` (JSON Schema keyword:
    ``maximum``, ``enum``, ``type``...), what it ``expected`` and the validator's words."""

    kind: MvuWarningKind
    path: str
    rule: str = ""
    expected: Any = None
    detail: str = ""

    def text(self) -> str:
        """In words, for logs and the turn's plain problems list."""
        where = self.path or "stat_data"
        match self.kind:
            case "not_extensible":
                return f"MVU: {where}: the object takes no new keys ($meta.extensible is false)"
            case "required":
                return f"MVU: {where}: a required key cannot be removed"
            case "meta":
                return f"MVU: {where}: $-keys are not written by replies"
            case "schema":
                return f"MVU: {where}: breaks the card's schema ({self.rule}): {self.detail}"
            case "updater":
                return f"MVU: the separate updater failed, the state is the reply's: {self.detail}"


@dataclass
class MvuOutcome:
    variables: dict[str, Any]
    applied: list[StateOp] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    warnings: list[MvuWarning] = field(default_factory=list)


def is_value_pair(value: Any) -> bool:
    """MVU's ``[value, "description"]`` (the value not itself a list)."""
    return (
        isinstance(value, list)
        and len(value) == 2
        and isinstance(value[1], str)
        and not isinstance(value[0], list)
    )


# -- applying -------------------------------------------------------------------------------


def apply_mvu_ops(
    variables: Mapping[str, Any],
    ops: Sequence[StateOp],
    schema: Mapping[str, Any] | None = None,
) -> MvuOutcome:
    """``ops`` applied to a copy of ``variables`` with MVU's rules under ``stat_data``."""
    doc: dict[str, Any] = copy.deepcopy(dict(variables))
    outcome = MvuOutcome(variables=doc)
    validator = _validator(schema)
    plain: list[StateOp] = []  # ops outside stat_data, applied together as before

    def flush() -> None:
        nonlocal doc
        if plain:
            result = apply_ops(doc, plain)
            outcome.problems.extend(result.problems)
            outcome.applied.extend(result.applied)
            doc = result.variables
            plain.clear()

    for op in ops:
        if not _touches_stat(op):
            plain.append(op)
            continue
        flush()
        for single in _single_ops(op):
            target = _target(single)
            if not _under_stat(target):
                plain.append(single)
                flush()
                continue
            single = _pair_aware(doc, single, target)
            refusal = _meta_refusal(doc, single, target)
            if refusal is not None:
                outcome.warnings.append(refusal)
                continue
            result = apply_ops(doc, [single])
            outcome.problems.extend(result.problems)
            if not result.applied:
                continue
            new = result.variables
            if validator is not None and isinstance(new.get("stat_data"), dict):
                stat = conform(schema or {}, new["stat_data"])
                broken = _new_errors(validator, doc.get("stat_data"), stat)
                if broken is not None:
                    outcome.warnings.append(broken)
                    continue
                new["stat_data"] = stat
            doc = new
            outcome.applied.append(single)
    flush()
    outcome.variables = doc
    return outcome


def _touches_stat(op: StateOp) -> bool:
    """Whether ``op`` writes anywhere under ``stat_data`` (or replaces the variables)."""
    if op.op != "patch":
        return _under_stat(op.path) or not op.path
    if _under_stat(op.path):
        return True
    return (
        any(
            isinstance(o, dict)
            and isinstance(o.get("path"), str)
            and _under_stat(op.path + o["path"])
            for o in op.patch or []
        )
        or not op.path
    )


def _single_ops(op: StateOp) -> Iterator[StateOp]:
    """A patch op as one op per RFC 6902 operation (each is refused or kept on its own)."""
    if op.op != "patch" or not op.patch or len(op.patch) == 1:
        yield op
        return
    for operation in op.patch:
        yield StateOp(op="patch", path=op.path, patch=[operation])


def _target(op: StateOp) -> str:
    """The absolute pointer an op writes (a patch: its one operation's path)."""
    if op.op == "patch" and op.patch:
        inner = op.patch[0].get("path") if isinstance(op.patch[0], dict) else None
        return op.path + inner if isinstance(inner, str) else op.path
    return op.path


def _under_stat(pointer: str) -> bool:
    return pointer == MVU_ROOT or pointer.startswith(MVU_ROOT + "/")


def _parts(pointer: str) -> list[str] | None:
    try:
        return list(jsonpointer.JsonPointer(pointer).parts)
    except jsonpointer.JsonPointerException:
        return None


def _lookup(doc: Any, parts: Sequence[str]) -> tuple[bool, Any]:
    node = doc
    for part in parts:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False, None
    return True, node


def _as_old_type(old: Any, new: Any) -> Any:
    """MVU keeps a number a number: ``"25"`` written over 19 is stored as 25."""
    if isinstance(old, int | float) and not isinstance(old, bool) and isinstance(new, str):
        number = parse_number(new)
        return new if number is None else number
    return new


def _pair_aware(doc: dict[str, Any], op: StateOp, target: str) -> StateOp:
    """``op`` rewritten to change a value pair's first element, where it targets a pair."""
    parts = _parts(target)
    if parts is None:
        return op
    found, current = _lookup(doc, parts)
    if not found or not is_value_pair(current):
        return op
    if op.op == "set" and not is_value_pair(op.value):
        return op.model_copy(
            update={"path": target + "/0", "value": _as_old_type(current[0], op.value)}
        )
    if op.op in ("add", "sub"):
        return op.model_copy(update={"path": target + "/0"})
    if op.op == "patch" and op.patch:
        operation = dict(op.patch[0])
        name = str(operation.get("op", "")).lower()
        if name == "replace" and not is_value_pair(operation.get("value")):
            operation["path"] = str(operation["path"]) + "/0"
            operation["value"] = _as_old_type(current[0], operation.get("value"))
            return op.model_copy(update={"patch": [operation]})
        if name == "delta":
            operation["path"] = str(operation["path"]) + "/0"
            return op.model_copy(update={"patch": [operation]})
    return op


def _writes(op: StateOp, target: str) -> tuple[list[str], list[str]]:
    """(pointers an op may create, pointers it removes)."""
    if op.op == "remove":
        return [], [target]
    if op.op == "patch" and op.patch:
        operation = op.patch[0]
        name = str(operation.get("op", "")).lower()
        source = operation.get("from")
        source_abs = op.path + source if isinstance(source, str) else None
        if name == "remove":
            return [], [target]
        if name == "move" and source_abs is not None:
            return [target], [source_abs]
        if name == "test":
            return [], []
        return [target], []
    return [target], []


def _meta_refusal(doc: dict[str, Any], op: StateOp, target: str) -> MvuWarning | None:
    creates, removes = _writes(op, target)
    for pointer in [*creates, *removes]:
        parts = _parts(pointer)
        if parts is not None and any(part.startswith("$") for part in parts[1:]):
            return MvuWarning(kind="meta", path=_dotted(parts))
    for pointer in creates:
        parts = _parts(pointer)
        if parts is None or len(parts) < 2:
            continue
        # the first key the op would add (a set makes missing parents too)
        missing = next(
            (n for n in range(2, len(parts) + 1) if not _lookup(doc, parts[:n])[0]), None
        )
        if missing is None:
            continue
        _, parent = _lookup(doc, parts[: missing - 1])
        if isinstance(parent, dict) and _extensible(doc, parts[: missing - 1]) is False:
            return MvuWarning(kind="not_extensible", path=_dotted(parts[:missing]))
    for pointer in removes:
        parts = _parts(pointer)
        if parts is None or len(parts) < 2:
            continue
        parent_found, parent = _lookup(doc, parts[:-1])
        if not (parent_found and isinstance(parent, dict)):
            continue
        meta = parent.get("$meta")
        required = meta.get("required") if isinstance(meta, dict) else None
        if (isinstance(required, list) and parts[-1] in required) or _extensible(
            doc, parts[:-1]
        ) is False:
            return MvuWarning(kind="required", path=_dotted(parts))
    return None


def _extensible(doc: dict[str, Any], parts: Sequence[str]) -> bool | None:
    """Whether the object at ``parts`` takes new keys: its ``$meta.extensible``, else its
    own or the nearest ``recursiveExtensible`` above it; None when nothing says (then it
    does, as storyloom always let it)."""
    inherited: bool | None = None
    node: Any = doc
    for depth in range(len(parts) + 1):
        if depth > 0:
            found, node = _lookup(node, [parts[depth - 1]])
            if not found:
                return inherited
        meta = node.get("$meta") if isinstance(node, dict) else None
        if not isinstance(meta, dict):
            continue
        recursive = meta.get("recursiveExtensible")
        if depth == len(parts):
            own = meta.get("extensible")
            if isinstance(own, bool):
                return own
            return recursive if isinstance(recursive, bool) else inherited
        if isinstance(recursive, bool):
            inherited = recursive
    return inherited


def _dotted(parts: Sequence[str]) -> str:
    """``["stat_data", "理", "好感度"]`` → ``理.好感度``."""
    inner = parts[1:] if parts and parts[0] == "stat_data" else parts
    return ".".join(inner)


# -- the schema -----------------------------------------------------------------------------


def _validator(schema: Mapping[str, Any] | None) -> jsonschema.protocols.Validator | None:
    if not schema:
        return None
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(dict(schema))


def _errors(validator: jsonschema.protocols.Validator, data: Any) -> dict[tuple[Any, ...], Any]:
    found: dict[tuple[Any, ...], Any] = {}
    for error in validator.iter_errors(data):
        # by where and which rule: a value that was already wrong may change and stay wrong
        found.setdefault((tuple(error.absolute_path), error.validator), error)
    return found


def _new_errors(
    validator: jsonschema.protocols.Validator, before: Any, after: Any
) -> MvuWarning | None:
    """The first schema error ``after`` has that ``before`` had not, as a warning."""
    old = _errors(validator, before) if isinstance(before, dict) else {}
    for key, error in _errors(validator, after).items():
        if key in old:
            continue
        path = [str(p) for p in error.absolute_path]
        return MvuWarning(
            kind="schema",
            path=".".join(path),
            rule=str(error.validator),
            expected=_plain(error.validator_value),
            detail=error.message,
        )
    return None


def _plain(value: Any) -> Any:
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return None  # a sub-schema: the rule's name says enough


def conform(schema: Mapping[str, Any], data: Any) -> Any:
    """``data`` as Zod's parse leaves it: ``x-coerce`` values converted (``"5"`` → 5 for
    ``z.coerce.number()``), ``x-catch`` values that do not fit replaced by the fallback."""
    value = _coerce(schema.get("x-coerce"), data)
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        out: dict[str, Any] = {}
        for key, item in value.items():
            sub: Any = props.get(key) if isinstance(props, Mapping) else None
            if sub is None and isinstance(extra, Mapping):
                sub = extra
            out[key] = conform(sub, item) if isinstance(sub, Mapping) else item
        value = out
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        value = [conform(schema["items"], item) for item in value]
    if "x-catch" in schema:
        validator = _validator(schema)
        if validator is not None and not validator.is_valid(value):
            return copy.deepcopy(schema["x-catch"])
    return value


def _coerce(kind: Any, value: Any) -> Any:
    if kind == "number" and isinstance(value, str | bool):
        number = parse_number(value) if isinstance(value, str) else int(value)
        return value if number is None else number
    if kind == "string" and isinstance(value, int | float | bool) and value is not None:
        return ("true" if value else "false") if isinstance(value, bool) else str(value)
    if kind == "boolean" and isinstance(value, str | int | float):
        return bool(value)
    return value


def with_defaults(schema: Mapping[str, Any], data: Any) -> Any:
    """``data`` with the schema's ``default``s (Zod's ``default``/``prefault``) filled in
    where a property is missing, at every depth, and then conformed (:func:`conform`)."""
    return conform(schema, _fill(schema, data))


def _fill(schema: Mapping[str, Any], data: Any) -> Any:
    props = schema.get("properties")
    if not isinstance(data, dict) or not isinstance(props, Mapping):
        return data
    out = dict(data)
    for key, sub in props.items():
        if not isinstance(sub, Mapping):
            continue
        if key not in out and "default" in sub:
            out[key] = copy.deepcopy(sub["default"])
        if key in out:
            out[key] = _fill(sub, out[key])
    return out
