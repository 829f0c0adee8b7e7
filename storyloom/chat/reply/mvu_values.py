"""MVU's rules for updates under ``stat_data``: commands, value pairs, structure, Zod schema.

:func:`apply_mvu_ops` applies a turn's ops as :func:`~storyloom.chat.reply.state_ops.apply_ops`
does, one RFC 6902 operation at a time, with what MagVarUpdate adds for paths under
``/stat_data``:

* **value pairs**: a value written ``[value, "description"]`` keeps its description: a
  set, a JSON Patch ``replace`` or a numeric change of the pair's path changes the first
  element (``_.set('理.好感度', 19, 25)`` on ``[19, "desc"]`` gives ``[25, "desc"]``), a
  number stays a number (``"25"`` is stored as 25). Writing a whole new pair replaces it;
* **structure**: in an MVU chat (one whose variables hold :data:`MVU_SCHEMA`, made by
  :func:`mvu_variables` from the ``[InitVar]`` data, as MVU's ``generateSchema`` reads it)
  an object is locked unless its ``$meta`` opened it and an array unless it held
  ``$__META_EXTENSIBLE__$``; ``$meta`` and the marker are taken out of ``stat_data``, and
  the rules follow the data after each update (:func:`structure_of`). With a Zod schema
  the schema alone decides (MVU's Zod mode). A chat without :data:`MVU_SCHEMA` keeps
  storyloom's rules: an object's own ``$meta`` (``extensible``, ``required``,
  ``recursiveExtensible``) is honoured and an object without one takes new keys.
  ``$``-keys themselves cannot be written by a reply;
* **commands**: MVU's ``_.set/_.add/_.assign/_.remove`` lines arrive as ``mvu`` patch
  operations and are resolved here against the state they meet (:func:`_resolve_command`);
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
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, get_args

import jsonpointer
import jsonschema
from pydantic import BaseModel

from storyloom.chat.reply.state_ops import (
    StateOp,
    apply_ops,
    escape_pointer_part,
    parse_number,
    value_at,
)
from storyloom.chat.reply.update_blocks import MVU_COMMAND_OP, MVU_ROOT

MVU_SCHEMA = "$mvu_schema"
"""Where an MVU chat keeps its structure rules (MVU's ``schema``), beside ``stat_data``.
Its presence is what makes a chat follow MVU's structure rules (set by :func:`mvu_variables`
when a chat starts from an ``[InitVar]`` card); a ``$``-key, so no reader shows it."""
EXTENSIBLE_MARKER = "$__META_EXTENSIBLE__$"

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
                return f"MVU: {where}: locked, no key or element is added or removed"
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
    mvu_chat = isinstance(doc.get(MVU_SCHEMA), dict)
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
        for unresolved in _single_ops(op):
            resolved = _resolve_command(doc, unresolved, strict=mvu_chat, locks=validator is None)
            if isinstance(resolved, str):
                outcome.problems.append(resolved)
                continue
            if isinstance(resolved, MvuWarning):
                outcome.warnings.append(resolved)
                continue
            for single in resolved:
                target = _target(single)
                if not _under_stat(target):
                    plain.append(single)
                    flush()
                    continue
                if not (_is_set(single) and _strict_set(doc)):
                    single = _pair_aware(doc, single, target)
                if not mvu_chat:
                    refusal = _meta_refusal(doc, single, target)
                elif validator is None:
                    refusal = _structure_refusal(doc, single, target)
                else:  # as in MVU's Zod mode: the schema decides the structure
                    refusal = _dollar_refusal(single, target)
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
                if mvu_chat:
                    _reconcile(new)
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
    found, current = value_at(doc, parts)
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
            (n for n in range(2, len(parts) + 1) if not value_at(doc, parts[:n])[0]), None
        )
        if missing is None:
            continue
        _, parent = value_at(doc, parts[: missing - 1])
        if isinstance(parent, dict) and _extensible(doc, parts[: missing - 1]) is False:
            return MvuWarning(kind="not_extensible", path=_dotted(parts[:missing]))
    for pointer in removes:
        parts = _parts(pointer)
        if parts is None or len(parts) < 2:
            continue
        parent_found, parent = value_at(doc, parts[:-1])
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
            found, node = value_at(node, [parts[depth - 1]])
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


# -- MVU's command lines --------------------------------------------------------------------


def _resolve_command(
    doc: dict[str, Any], op: StateOp, *, strict: bool, locks: bool
) -> list[StateOp] | str | MvuWarning:
    """An ``mvu`` command (:func:`~storyloom.chat.reply.update_blocks.decode_update_variable`)
    as the plain ops it comes to against ``doc``, or the problem that stops it, as MVU's
    ``updateVariables`` reads each command. ``strict`` (an MVU chat): ``_.set`` needs the
    path to exist, as in MVU; elsewhere it makes it, as storyloom always did."""
    operation = op.patch[0] if op.op == "patch" and op.patch else None
    if not isinstance(operation, dict) or operation.get("op") != MVU_COMMAND_OP:
        return [op]
    command = str(operation.get("command"))
    rel = str(operation.get("path", ""))
    args: list[Any] = list(operation.get("args") or [])
    written = str(operation.get("written", ""))
    path = op.path + rel
    parts = _parts(path)
    if parts is None:
        return f"{written}: {rel!r} is not a path"
    found, current = value_at(doc, parts)
    where = _dotted(parts) or "stat_data"
    if (
        len(parts) == 1
        and not (command == "set" and isinstance(args[0], dict))
        and not (command == "assign" and isinstance(current, dict))
    ):
        return f"{written}: stat_data itself is only replaced by an object"

    def patch(name: str, pointer: str, value: Any = None) -> StateOp:
        operation: dict[str, Any] = {"op": name, "path": pointer[len(op.path) :]}
        if name == "add":
            operation["value"] = value
        return StateOp(op="patch", path=op.path, patch=[operation])

    match command:
        case "set":
            if strict and not found:
                return f"{written}: {where} does not exist (_.set changes a value that is there)"
            return [StateOp(op="set", path=path, value=args[0])]
        case "add":
            if not found:
                return f"{written}: {where} does not exist"
            value = current[0] if is_value_pair(current) else current
            if not args:  # _.modify('path') / _.alter('path'), MVU's older toggle
                if not isinstance(value, bool):
                    return f"{written}: {where} is not a boolean"
                return [StateOp(op="set", path=path, value=not value)]
            delta = args[0]
            if not _is_number(delta):
                return f"{written}: {delta!r} is not a number"
            moment = _date(value)
            if moment is not None:  # MVU adds milliseconds to a date
                later = moment + timedelta(milliseconds=delta)
                return [StateOp(op="set", path=path, value=_iso(later))]
            if not _is_number(value):
                return f"{written}: {where} is not a number or a date"
            return [StateOp(op="add", path=path, value=delta)]
        case "assign":
            if found and current is not None and not isinstance(current, list | dict):
                return f"{written}: {where} holds a {type(current).__name__}, not a collection"
            if not found and not value_at(doc, parts[:-1])[0]:
                return f"{written}: {where} has no parent to hold it"
            if len(args) == 1:
                value = args[0]
                if isinstance(current, list):
                    return [patch("add", path + "/-", value)]
                if isinstance(current, dict):
                    if not isinstance(value, dict):
                        return f"{written}: only an object merges into the object {where}"
                    node = _schema_at(doc.get(MVU_SCHEMA), parts[1:]) if strict and locks else None
                    if node is not None and node.get("extensible") is not True:
                        return MvuWarning(kind="not_extensible", path=where)
                    return [
                        patch("add", path + "/" + escape_pointer_part(str(k)), v)
                        for k, v in _merged(current, value).items()
                    ]
                if isinstance(value, list):
                    return [StateOp(op="set", path=path, value=[value])]
                if isinstance(value, dict):
                    return [StateOp(op="set", path=path, value=value)]
                return f"{written}: only an object or array can start {where}"
            key, value = args
            if isinstance(current, list) and (_is_int(key) or key == "-"):
                at: int | str = "-"
                if _is_int(key) and key != -1 and key <= len(current):
                    at = max(0, len(current) + key) if key < 0 else key
                return [patch("add", f"{path}/{at}", value)]
            if isinstance(current, dict):
                return [patch("add", path + "/" + escape_pointer_part(_key_text(key)), value)]
            if isinstance(current, list):
                return f"{written}: {key!r} is not an index of the array {where}"
            return [StateOp(op="set", path=path, value={_key_text(key): value})]
        case "remove":
            if len(args) == 0:
                if not found:
                    return f"{written}: {where} does not exist"
                return [StateOp(op="remove", path=path)]
            if not found:
                return f"{written}: {where} does not exist"
            target = args[0]
            if isinstance(current, list):
                index = (
                    target
                    if _is_int(target)
                    else next((i for i, item in enumerate(current) if item == target), -1)
                )
                if not 0 <= index < len(current):
                    return f"{written}: {target!r} is not in the array {where}"
                return [StateOp(op="remove", path=f"{path}/{index}")]
            if isinstance(current, dict):
                keys = list(current)
                if _is_int(target):
                    if not 0 <= target < len(keys):
                        return f"{written}: {where} has no key number {target}"
                    name = keys[target]
                else:
                    name = _key_text(target)
                    if name not in current:
                        return f"{written}: {where} has no key {name!r}"
                return [StateOp(op="remove", path=path + "/" + escape_pointer_part(name))]
            return f"{written}: {where} is not an array or object"
    return f"{written}: unknown command"


def _is_set(op: StateOp) -> bool:
    """A set, or a JSON Patch ``replace`` (MVU reads one as ``_.set``)."""
    if op.op == "patch" and op.patch:
        return str(op.patch[0].get("op", "")).lower() == "replace"
    return op.op == "set"


def _strict_set(doc: Mapping[str, Any]) -> bool:
    structure = doc.get(MVU_SCHEMA)
    return isinstance(structure, Mapping) and structure.get("strictSet") is True


def _date(value: Any) -> datetime | None:
    """An ISO date written as text (not a number), as MVU's ``_.add`` reads one; a date
    without a zone is UTC."""
    if not isinstance(value, str) or parse_number(value) is not None:
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _iso(moment: datetime) -> str:
    """As JavaScript's ``toISOString``: UTC, milliseconds, ``Z``."""
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _key_text(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool) or key is None:
        return "true" if key is True else "false" if key is False else "null"
    return str(key)


def _merged(current: dict[str, Any], value: dict[str, Any]) -> dict[str, Any]:
    """The keys of ``current`` that lodash's ``merge`` with ``value`` writes, merged deeply."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        old = current.get(key)
        if isinstance(old, dict) and isinstance(item, dict):
            merged = dict(old)
            merged.update(_merged(old, item))
            out[key] = merged
        else:
            out[key] = item
    return out


# -- MVU's structure rules ------------------------------------------------------------------


def mvu_variables(stat_data: Mapping[str, Any]) -> dict[str, Any]:
    """A new MVU chat's variables from its ``[InitVar]`` data: ``stat_data`` without
    ``$meta`` and ``$__META_EXTENSIBLE__$`` (as MVU removes them once it has read them)
    and the structure rules they said (:data:`MVU_SCHEMA`)."""
    data = copy.deepcopy(dict(stat_data))
    meta = data.get("$meta")
    structure = structure_of(copy.deepcopy(data))
    if isinstance(meta, dict) and meta.get("strictSet") is True:
        structure["strictSet"] = True  # _.set writes a value pair whole, never its [0]
    clean_metadata(data)
    return {"stat_data": data, MVU_SCHEMA: structure}


def keep_structure(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """``after`` (an MVU chat's variables replaced whole, as a frame's ``replaceVariables``
    does) with the chat's structure rules kept where it does not carry them (frames never
    see them), brought up to its ``stat_data``."""
    out = copy.deepcopy(dict(after))
    old = before.get(MVU_SCHEMA)
    if isinstance(old, dict) and MVU_SCHEMA not in out:
        out[MVU_SCHEMA] = copy.deepcopy(old)
        _reconcile(out)
    return out


def structure_of(
    data: Any, old: Mapping[str, Any] | None = None, parent_recursive: bool = False
) -> dict[str, Any]:
    """MVU's schema of ``data`` (which it consumes: ``$meta`` and markers are taken out).
    An object is locked (``extensible: false``) unless its ``$meta`` says ``extensible``
    or ``recursiveExtensible``, or a parent's ``recursiveExtensible`` reaches it; its keys
    are then required unless it is open, with ``$meta.required`` naming more. An array is
    locked unless it holds ``$__META_EXTENSIBLE__$``. Once open, a node stays open
    (``old``: the schema before, whose ``required`` flags also win)."""
    if isinstance(data, list):
        was = old if old is not None and old.get("type") == "array" else {}
        extensible = was.get("extensible") is True
        recursive = was.get("recursiveExtensible") is True or parent_recursive
        if EXTENSIBLE_MARKER in data:
            extensible = True
            data.remove(EXTENSIBLE_MARKER)
        element_old = was.get("elementType")
        return {
            "type": "array",
            "extensible": extensible or parent_recursive,
            "recursiveExtensible": recursive,
            "elementType": structure_of(
                data[0], element_old if isinstance(element_old, Mapping) else None, recursive
            )
            if data
            else {"type": "any"},
        }
    if isinstance(data, dict):
        was = old if old is not None and old.get("type") == "object" else {}
        meta = data.pop("$meta", None)
        meta = meta if isinstance(meta, dict) else {}
        extensible = (
            was.get("extensible") is True
            or meta.get("extensible") is True
            or meta.get("recursiveExtensible") is True
            or parent_recursive
        )
        recursive = (
            was.get("recursiveExtensible") is True
            or parent_recursive
            or meta.get("recursiveExtensible") is True
        )
        if meta.get("extensible") is False:
            extensible = extensible and was.get("extensible") is True
        required = meta.get("required")
        old_props = was.get("properties")
        properties: dict[str, Any] = {}
        for key in list(data):
            if str(key).startswith("$"):
                continue
            child_old = old_props.get(key) if isinstance(old_props, Mapping) else None
            child = structure_of(
                data[key],
                child_old if isinstance(child_old, Mapping) else None,
                extensible and recursive,
            )
            is_required = not extensible
            if isinstance(required, list) and key in required:
                is_required = True
            if isinstance(child_old, Mapping) and isinstance(child_old.get("required"), bool):
                is_required = child_old["required"]
            child["required"] = is_required
            properties[key] = child
        return {
            "type": "object",
            "extensible": extensible,
            "recursiveExtensible": recursive,
            "properties": properties,
        }
    if isinstance(data, bool):
        return {"type": "boolean"}
    if isinstance(data, int | float):
        return {"type": "number"}
    if isinstance(data, str):
        return {"type": "string"}
    return {"type": "any"}


def clean_metadata(data: Any) -> None:
    """``$meta`` and ``$__META_EXTENSIBLE__$`` taken out of ``data``, at every depth."""
    if isinstance(data, list):
        data[:] = [item for item in data if item != EXTENSIBLE_MARKER]
        for item in data:
            clean_metadata(item)
    elif isinstance(data, dict):
        data.pop("$meta", None)
        for item in data.values():
            clean_metadata(item)


def _reconcile(doc: dict[str, Any]) -> None:
    """After an update, the structure follows the data (new keys get rules; a value
    written with its own ``$meta`` or marker opens as it says), as MVU reconciles."""
    stat = doc.get("stat_data")
    old = doc.get(MVU_SCHEMA)
    structure = structure_of(copy.deepcopy(stat), old if isinstance(old, dict) else None)
    if isinstance(old, dict) and old.get("strictSet") is True:
        structure["strictSet"] = True
    doc[MVU_SCHEMA] = structure
    clean_metadata(stat)


def _schema_at(structure: Any, parts: Sequence[str]) -> Mapping[str, Any] | None:
    node: Any = structure
    for part in parts:
        if not isinstance(node, Mapping):
            return None
        if node.get("type") == "array" and part.isdigit():
            node = node.get("elementType")
        elif node.get("type") == "object" and isinstance(node.get("properties"), Mapping):
            node = node["properties"].get(part)
        else:
            return None
    return node if isinstance(node, Mapping) else None


def _dollar_refusal(op: StateOp, target: str) -> MvuWarning | None:
    creates, removes = _writes(op, target)
    for pointer in [*creates, *removes]:
        parts = _parts(pointer)
        if parts is not None and any(part.startswith("$") for part in parts[1:]):
            return MvuWarning(kind="meta", path=_dotted(parts))
    return None


def _structure_refusal(doc: dict[str, Any], op: StateOp, target: str) -> MvuWarning | None:
    """MVU's structure rules (:data:`MVU_SCHEMA`) for one op: a locked object takes no new
    key and loses none of its required ones; a locked array takes and loses no element."""
    dollar = _dollar_refusal(op, target)
    if dollar is not None:
        return dollar
    structure = doc.get(MVU_SCHEMA)
    creates, removes = _writes(op, target)
    if op.op in ("push", "pull"):
        parts = _parts(target)
        found, value = value_at(doc, parts or [])
        if parts and found and isinstance(value, list):
            node = _schema_at(structure, parts[1:])
            if node is not None and node.get("extensible") is not True:
                return MvuWarning(kind="not_extensible", path=_dotted(parts))
        if op.op == "pull":
            return None
    inserting = op.op == "patch" and str((op.patch or [{}])[0].get("op", "")).lower() in (
        "add",
        "copy",
        "move",
    )
    for pointer in creates:
        parts = _parts(pointer)
        if parts is None or len(parts) < 2:
            continue
        missing = next(
            (n for n in range(2, len(parts) + 1) if not value_at(doc, parts[:n])[0]), None
        )
        if missing is None:
            _, parent = value_at(doc, parts[:-1])
            if not (inserting and isinstance(parent, list)):
                continue  # a value that is there is changed: no key is added
            missing = len(parts)
        parent_parts = parts[: missing - 1]
        _, parent = value_at(doc, parent_parts)
        node = _schema_at(structure, parent_parts[1:])
        if node is None or not isinstance(parent, dict | list):
            continue
        if node.get("extensible") is not True:
            return MvuWarning(
                kind="not_extensible",
                path=_dotted(parts[:missing] if isinstance(parent, dict) else parent_parts),
            )
    for pointer in removes:
        parts = _parts(pointer)
        if parts is None or len(parts) < 2:
            continue
        found, parent = value_at(doc, parts[:-1])
        node = _schema_at(structure, parts[1:-1])
        if not found or node is None:
            continue
        if isinstance(parent, list) and node.get("extensible") is not True:
            return MvuWarning(kind="not_extensible", path=_dotted(parts[:-1]))
        if isinstance(parent, dict):
            child = _schema_at(structure, parts[1:])
            if child is not None and child.get("required") is True:
                return MvuWarning(kind="required", path=_dotted(parts))
    return None
