"""The update blocks a reply can hold, decoded into :class:`StateOp` values.

Filament (:mod:`.filament`) finds the blocks in the stream; this module reads what is
inside one once it has closed. Three vocabularies:

* ``<state_update>``: op tags ``<set key="hp" value="90"></set>`` (also
  ``<set key="hp">90</set>`` and self-closing ``<set key="hp" value="90"/>``) for
  ``set add sub inc dec remove push pull`` (quotes double or single; ``key`` may be a
  dotted key or a JSON Pointer; values are JSON when they parse as JSON, else text), or a
  JSON object (keys set) or RFC 6902 array;
* MVU's ``<JSONPatch>``: a JSON array of RFC 6902 ops (``replace add remove move copy
  test``, MVU's ``insert`` = add and ``delta`` = numeric add), maybe in a code fence;
* MVU's ``<UpdateVariable>``: ``<JSONPatch>`` blocks and the command lines
  ``_.set/_.add/_.assign/_.remove(...)`` (and their other names), in the order written.
  A command's effect depends on the state (an array or an object, the structure's
  rules), so it is decoded as an ``mvu`` patch operation that
  :func:`storyloom.chat.reply.mvu_values.apply_mvu_ops` resolves; its values are read as
  MVU reads them, unquoted arithmetic computed (:mod:`.mvu_math`).

MVU paths are relative to ``root`` (:data:`MVU_ROOT`, where MVU keeps a card's
variables). A JSON Pointer is kept exactly as written (``"/ "`` is the key ``" "``). In a
``<state_update>`` RFC 6902 array, a path that is not a pointer (``"foo"``) is an error, as
RFC 6901 says; MVU's blocks also take ``a/b`` and dotted paths, as MVU itself reads
them. Models write these blocks by hand, so JSON comments and trailing commas are
forgiven. A decoder never raises on what the model wrote: what it cannot read comes back
as a problem, in words, beside the ops it could.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final, Literal

import yaml

from storyloom.chat.reply.mvu_math import MathError, evaluate
from storyloom.chat.reply.state_ops import (
    StateOp,
    escape_pointer_part,
    key_to_pointer,
    parse_number,
    parse_value,
    split_dotted_key,
)

MVU_ROOT: Final = "/stat_data"
OP_TAGS: Final = ("set", "add", "sub", "inc", "dec", "remove", "push", "pull")


_OP_TAG = re.compile(
    r"<(" + "|".join(OP_TAGS) + r")"
    r"((?:\s+[A-Za-z_:][\w:.\-]*\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s\"'<>=`/]+))*)"
    r"\s*(/?)>"
)
_CLOSE_OP_TAG = re.compile(r"</(?:" + "|".join(OP_TAGS) + r")\s*>")
_ATTR = re.compile(r"([A-Za-z_:][\w:.\-]*)\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s\"'<>=`/]+))")
_KEY_ATTRS = ("key", "path", "name", "var")
_VALUE_OPS: dict[str, Literal["set", "push", "pull"]] = {
    "set": "set",
    "push": "push",
    "pull": "pull",
}


def decode_state_update(content: str) -> tuple[list[StateOp], list[str]]:
    """The ops in a ``<state_update>`` block, and what was wrong with the rest."""
    ops: list[StateOp] = []
    problems: list[str] = []
    leftover: list[str] = []
    pos = 0
    while True:
        m = _OP_TAG.search(content, pos)
        if m is None:
            leftover.append(content[pos:])
            break
        leftover.append(content[pos : m.start()])
        name = m.group(1)
        attrs = _attributes(m.group(2))
        inner = ""
        pos = m.end()
        if not m.group(3):
            closing = f"</{name}>"
            close_at = content.find(closing, pos)
            next_op = _OP_TAG.search(content, pos)
            if close_at >= 0 and (next_op is None or close_at < next_op.start()):
                inner, pos = content[pos:close_at], close_at + len(closing)
            else:  # unclosed op tag: its content runs to the next op tag
                stop = next_op.start() if next_op else len(content)
                inner, pos = content[pos:stop], stop
        op, problem = _op_from_tag(name, attrs, inner, m.group(0))
        if op is not None:
            ops.append(op)
        if problem:
            problems.append(problem)
    rest = _CLOSE_OP_TAG.sub("", "".join(leftover)).strip()
    if rest:
        if rest[0] in "[{":
            more, more_problems = _decode_json_update(
                rest, root="", where="<state_update>", pointers_only=True
            )
            ops.extend(more)
            problems.extend(more_problems)
        else:
            problems.append(f"<state_update>: ignored text outside op tags: {_clip(rest)}")
    return ops, problems


def _attributes(text: str) -> dict[str, str]:
    attrs: dict[str, str] = {}
    for m in _ATTR.finditer(text):
        value = m.group(2) if m.group(2) is not None else m.group(3)
        attrs[m.group(1)] = value if value is not None else m.group(4)
    return attrs


def _op_from_tag(
    name: str, attrs: dict[str, str], inner: str, written: str
) -> tuple[StateOp | None, str | None]:
    key = next((attrs[k] for k in _KEY_ATTRS if k in attrs), None)
    if key is None or not key.strip():
        return None, f"{_clip(written)}: no key attribute"
    path = key_to_pointer(key)
    raw = attrs.get("value")
    if raw is None and inner.strip():
        raw = inner
    if name == "remove":
        return StateOp(op="remove", path=path), None
    if name in ("inc", "dec"):
        amount = parse_number(raw) if raw is not None else 1
        if amount is None:
            return None, f'{_clip(written)}: value "{_clip(raw or "")}" is not a number'
        return StateOp(op="add" if name == "inc" else "sub", path=path, value=amount), None
    if raw is None:
        return None, f"{_clip(written)}: no value"
    if name in ("add", "sub"):
        amount = parse_number(raw)
        if amount is None:
            return None, f'{_clip(written)}: value "{_clip(raw)}" is not a number'
        return StateOp(op=name, path=path, value=amount), None
    return StateOp(op=_VALUE_OPS[name], path=path, value=parse_value(raw)), None


_JSON_PATCH_BLOCK = re.compile(r"<(json_?patch)\b[^>]*>(.*?)(?:</\1\s*>|\Z)", re.I | re.S)
_ANALYSIS_BLOCK = re.compile(
    r"<analysis\b[^>]*>.*?(?:</analysis\s*>|(?=<json_?patch\b)|\Z)", re.I | re.S
)
_MVU_COMMAND = re.compile(r"_\.(set|add|modify|alter|insert|assign|remove|unset|delete)\s*\(")


def decode_update_variable(content: str, root: str = MVU_ROOT) -> tuple[list[StateOp], list[str]]:
    """The ops in an MVU ``<UpdateVariable>`` block: its ``<JSONPatch>`` arrays and
    ``_.set(...)``-style commands, in the order written. ``<Analysis>`` is skipped."""
    found: list[tuple[int, list[StateOp]]] = []
    problems: list[str] = []
    for m in _JSON_PATCH_BLOCK.finditer(content):
        ops, patch_problems = decode_json_patch(m.group(2), root)
        found.append((m.start(), ops))
        problems.extend(patch_problems)

    def blank(m: re.Match[str]) -> str:
        return " " * len(m.group(0))  # keep positions for ordering

    commands_text = _JSON_PATCH_BLOCK.sub(blank, content)
    commands_text = _ANALYSIS_BLOCK.sub(blank, commands_text)
    for at, ops, command_problems in _decode_mvu_commands(commands_text, root):
        found.append((at, ops))
        problems.extend(command_problems)
    found.sort(key=lambda item: item[0])
    all_ops = [op for _, ops in found for op in ops]
    if not found and not problems and content.strip():
        problems.append("<UpdateVariable>: no <JSONPatch> or _.set() commands found")
    return all_ops, problems


def decode_json_patch(content: str, root: str = MVU_ROOT) -> tuple[list[StateOp], list[str]]:
    """A ``<JSONPatch>`` body (a JSON array of RFC 6902 ops, maybe in a code fence)."""
    return _decode_json_update(_strip_fence(content), root=root, where="<JSONPatch>")


def _decode_json_update(
    text: str, *, root: str, where: str, pointers_only: bool = False
) -> tuple[list[StateOp], list[str]]:
    text = text.strip()
    if not text:
        return [], []
    try:
        data = _loads_lenient(text)
    except (ValueError, RecursionError) as exc:
        return [], [f"{where}: not valid JSON ({exc}): {_clip(text)}"]
    if isinstance(data, dict) and "op" not in data:
        # {"hp": 90, "stats.mp": 5}: each key set
        return [
            StateOp(op="set", path=_join(root, _mvu_pointer(k)), value=v) for k, v in data.items()
        ], []
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        return [], [f"{where}: expected a JSON array of operations, got {_clip(text)}"]
    return _patch_ops(data, root=root, where=where, pointers_only=pointers_only)


def _patch_ops(
    data: list[Any], *, root: str, where: str, pointers_only: bool
) -> tuple[list[StateOp], list[str]]:
    """RFC 6902 operations → state ops. ``pointers_only``: paths must be JSON Pointers, as
    RFC 6901 says (``<state_update>``); else MVU's forgiving paths are read too."""
    read_path = _pointer if pointers_only else _mvu_pointer
    ops: list[StateOp] = []
    problems: list[str] = []
    group: list[dict[str, Any]] = []

    def flush() -> None:
        if group:
            ops.append(StateOp(op="patch", path=root, patch=list(group)))
            group.clear()

    for number, item in enumerate(data, start=1):
        label = f"{where} op {number}"
        if not isinstance(item, dict):
            problems.append(
                f"{label}: not an object: {_clip(json.dumps(item, ensure_ascii=False))}"
            )
            continue
        name = item.get("op")
        if not isinstance(name, str):
            problems.append(f"{label}: no 'op'")
            continue
        name = name.strip().lower()
        raw_path = item.get("path", item.get("to"))
        if not isinstance(raw_path, str):
            problems.append(f"{label} ({name}): no 'path'")
            continue
        path = read_path(raw_path)
        if path is None:
            problems.append(f"{label} ({name} {raw_path}): {_NOT_A_POINTER}")
            continue
        if name == "delta":
            amount = parse_number(item.get("value"))
            if amount is None:
                problems.append(
                    f"{label} (delta {raw_path}): value {_clip(repr(item.get('value')))} "
                    "is not a number"
                )
                continue
            flush()
            ops.append(StateOp(op="add", path=_join(root, path), value=amount))
            continue
        if name == "insert":
            name = "add"
        if name not in ("add", "remove", "replace", "move", "copy", "test"):
            problems.append(f"{label}: unknown op {name!r}")
            continue
        operation: dict[str, Any] = {"op": name, "path": path}
        if name in ("add", "replace", "test"):
            if "value" not in item:
                problems.append(f"{label} ({name} {raw_path}): no 'value'")
                continue
            operation["value"] = item["value"]
        if name in ("move", "copy"):
            source = item.get("from")
            if not isinstance(source, str):
                problems.append(f"{label} ({name} {raw_path}): no 'from'")
                continue
            source_path = read_path(source)
            if source_path is None:
                problems.append(f"{label} ({name} from {source}): {_NOT_A_POINTER}")
                continue
            operation["from"] = source_path
        group.append(operation)
    flush()
    return ops, problems


def _decode_mvu_commands(text: str, root: str) -> list[tuple[int, list[StateOp], list[str]]]:
    """MVU's older command lines: ``_.set('a.b', old, new);`` ``_.add('a', 5);`` …"""
    out: list[tuple[int, list[StateOp], list[str]]] = []
    pos = 0
    while True:
        m = _MVU_COMMAND.search(text, pos)
        if m is None:
            return out
        close = _matching_paren(text, m.end())
        if close < 0:
            out.append((m.start(), [], [f"{_clip(text[m.start() :])}: unclosed command"]))
            return out
        pos = close + 1
        written = text[m.start() : pos]
        args = _split_args(text[m.end() : close])
        op, problem = _mvu_command(m.group(1), args, root, written)
        out.append((m.start(), [op] if op else [], [problem] if problem else []))


def _mvu_command(
    name: str, args: list[str], root: str, written: str
) -> tuple[StateOp | None, str | None]:
    """One command line as an ``mvu`` patch operation: what it does depends on the state
    it meets (an array or an object, the structure's rules), so
    :func:`~storyloom.chat.reply.mvu_values.apply_mvu_ops` resolves it there."""
    if not args or not args[0]:
        return None, f"{_clip(written)}: no path"
    command = _COMMAND_ALIASES.get(name, name)
    fewest, most = {"set": (2, 3), "add": (2, 2), "assign": (2, 3), "remove": (1, 2)}[command]
    if name in ("modify", "alter"):
        fewest = 1  # MVU's older names of _.add: with only a path, a boolean is flipped
    if not fewest <= len(args) <= most:
        return None, f"{_clip(written)}: _.{name} takes {_ARITY[command]}"
    try:
        values = [_mvu_value(arg) for arg in args[1:]]
    except MathError as exc:
        return None, f"{_clip(written)}: {exc}"
    if command == "set":
        values = values[-1:]  # _.set(path, old, new): the old value is not checked
    return StateOp(
        op="patch",
        path=root,
        patch=[
            {
                "op": MVU_COMMAND_OP,
                "command": command,
                "path": _mvu_pointer(_unquote(args[0])),
                "args": values,
                "written": _clip(written),
            }
        ],
    ), None


MVU_COMMAND_OP: Final = "mvu"
_COMMAND_ALIASES: Final = {
    "insert": "assign",
    "unset": "remove",
    "delete": "remove",
    "modify": "add",
    "alter": "add",
}
_ARITY: Final = {
    "set": "a path and a value (or a path, the old value and the new)",
    "add": "a path and an amount (_.modify and _.alter: or only a path, to flip a boolean)",
    "assign": "a path and a value, or a path, a key or index and a value",
    "remove": "a path, or a path and a key, index or value",
}


def _matching_paren(text: str, start: int) -> int:
    depth = 1
    quote = ""
    i = start
    n = len(text)
    while i < n:
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _split_args(text: str) -> list[str]:
    args: list[str] = []
    current: list[str] = []
    depth = 0
    quote = ""
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            current.append(ch)
            if ch == "\\" and i + 1 < len(text):
                current.append(text[i + 1])
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'`":
            quote = ch
            current.append(ch)
        elif ch in "([{":
            depth += 1
            current.append(ch)
        elif ch in ")]}":
            depth -= 1
            current.append(ch)
        elif ch == "," and depth == 0:
            args.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
        i += 1
    last = "".join(current).strip()
    if last or args:
        args.append(last)
    return args


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'`":
        return text[1:-1]
    return text


def _mvu_value(text: str) -> Any:
    """A command's value as MVU reads it: JSON; ``undefined`` as null; a JavaScript-style
    array or object literal (``['a', 'b']``); unquoted arithmetic computed
    (:mod:`.mvu_math`, raising :class:`MathError` when it cannot be); else text, its
    quotes taken off (a quoted value is text, never computed)."""
    text = text.strip()
    if text == "undefined":
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        pass
    else:
        if isinstance(value, float) and not math.isfinite(value):
            raise MathError(f"{text}: not a finite number")
        return value
    if (
        len(text) >= 2
        and (text[0], text[-1]) in (("[", "]"), ("{", "}"))
        and not (
            "&" in text or "*" in text  # no YAML anchors: an alias tree can grow without end
        )
    ):
        try:
            # as JSON: YAML's dates and other types become what JSON can hold, or fail
            return json.loads(json.dumps(yaml.safe_load(text), ensure_ascii=False))
        except (yaml.YAMLError, RecursionError, TypeError, ValueError):
            pass
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'`\"":
        return text[1:-1]
    number = evaluate(text)
    return text if number is None else number


_NOT_A_POINTER = 'not a JSON Pointer: a path is "" or starts with "/" (RFC 6901)'


def _pointer(path: str) -> str | None:
    """A JSON Pointer kept exactly as written (``"/ "`` is the key ``" "``); None when
    ``path`` is not one."""
    return path if not path or path.startswith("/") else None


def _mvu_pointer(path: str) -> str:
    """An MVU path: a JSON Pointer (``/a/b``, kept exactly: a key may start or end with a
    space), or, as MVU itself reads it, ``a/b`` without the slash or a dotted path."""
    if path.startswith("/"):
        return path
    path = path.strip()
    if not path or path.startswith("/"):
        return path
    if "/" in path and "." not in path and "[" not in path:
        return "/" + path
    return "".join("/" + escape_pointer_part(part) for part in split_dotted_key(path))


def _join(root: str, pointer: str) -> str:
    return root + pointer


def _strip_fence(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith("```"):
        newline = stripped.find("\n")
        stripped = stripped[newline + 1 :] if newline >= 0 else stripped[3:]
        if stripped.rstrip().endswith("```"):
            stripped = stripped.rstrip()[:-3]
    return stripped


def _loads_lenient(text: str) -> Any:
    """JSON, forgiving what models add: comments and trailing commas."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as first:
        cleaned = _drop_comments_and_trailing_commas(text)
        try:
            return json.loads(cleaned)
        except (ValueError, RecursionError):
            raise first from None


def _drop_comments_and_trailing_commas(text: str) -> str:
    out: list[str] = []
    i = 0
    n = len(text)
    in_string = False
    while i < n:
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if ch == '"':
                in_string = False
            i += 1
            continue
        if ch == '"':
            in_string = True
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        elif ch in "]}":
            # drop a comma (and the whitespace after it) right before a closer
            j = len(out) - 1
            while j >= 0 and out[j].isspace():
                j -= 1
            if j >= 0 and out[j] == ",":
                del out[j]
        out.append(ch)
        i += 1
    return "".join(out)


def _clip(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
