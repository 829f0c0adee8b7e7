"""Tool documentation for a prompt: what ``{{{system:available_tools}}}`` becomes
(seed 003 7.2, 11.2).

One block per tool in the seed's shape (``Tool ID`` / description / parameter lines,
labels in English or Chinese), sorted by id, then a short TAM example. The text depends
only on the entries given: the same inventory renders byte for byte the same from turn
to turn, so a local server's prompt cache stays warm. No time, no counts that change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from storyloom.tools.tool_definition import ToolEntry

Language = Literal["en", "zh"]

_LABELS: dict[str, dict[str, str]] = {
    "en": {
        "heading": "[Available tools]",
        "description": "Description",
        "parameters": "Parameters",
        "none": "(none)",
        "required": "required",
        "optional": "optional",
        "default": "default",
        "one_of": "one of",
        "usage": "[How to call a tool]",
        "usage_text": (
            "Write a block like this; every value goes between 「始」 and 「末」 exactly as it "
            "is (no escaping). Several calls in order: number them (command1, query1, "
            "command2, ...)."
        ),
        "no_tools": "(no tools are available)",
    },
    "zh": {
        "heading": "[可用工具参考]",
        "description": "描述",
        "parameters": "参数",
        "none": "(无)",
        "required": "required",
        "optional": "optional",
        "default": "默认",
        "one_of": "可选值",
        "usage": "[调用方式]",
        "usage_text": (
            "按下面的格式输出一个块；每个值原样写在「始」与「末」之间，无需转义。"
            "按顺序执行多个调用时加数字后缀（command1、query1、command2……）。"
        ),
        "no_tools": "(没有可用的工具)",
    },
}


def render_tool_docs(entries: Iterable[ToolEntry], language: Language = "en") -> str:
    """The documentation of ``entries`` (the agent's inventory, looked up), sorted by id;
    unavailable tools are left out."""
    labels = _LABELS[language]
    usable = sorted((e for e in entries if e.available), key=lambda e: e.id)
    lines = [labels["heading"]]
    if not usable:
        lines.append(labels["no_tools"])
    for entry in usable:
        lines += _tool_lines(entry, labels)
    if usable:
        lines += ["", labels["usage"], labels["usage_text"], *_example(usable[0])]
    return "\n".join(lines) + "\n"


def _tool_lines(entry: ToolEntry, labels: Mapping[str, str]) -> list[str]:
    definition = entry.definition
    description = " ".join((definition.description or definition.display_name).split())
    lines = [f"- Tool ID: {definition.id}"]
    if description:
        lines.append(f"  - {labels['description']}: {description}")
    properties: Mapping[str, Any] = definition.parameters.get("properties", {})
    required = set(definition.parameters.get("required", []))
    if not properties:
        lines.append(f"  - {labels['parameters']}: {labels['none']}")
        return lines
    lines.append(f"  - {labels['parameters']}:")
    for name, schema in properties.items():
        flag = labels["required"] if name in required else labels["optional"]
        line = f"    - {name} ({_type_of(schema)}, {flag})"
        notes = _notes(schema, labels)
        if notes:
            line += f": {notes}"
        lines.append(line)
    return lines


def _type_of(schema: Any) -> str:
    if not isinstance(schema, Mapping):
        return "any"
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind if k != "null") or "any"
    if kind == "array":
        items = schema.get("items")
        return f"array of {_type_of(items)}" if isinstance(items, Mapping) and items else "array"
    if isinstance(kind, str):
        return kind
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list):
        kinds = [
            _type_of(o) for o in options if not (isinstance(o, Mapping) and o.get("type") == "null")
        ]
        return " | ".join(dict.fromkeys(kinds)) or "any"
    return "any"


def _notes(schema: Any, labels: Mapping[str, str]) -> str:
    if not isinstance(schema, Mapping):
        return ""
    parts = []
    description = " ".join(str(schema.get("description", "")).split())
    if description:
        parts.append(description.rstrip("."))
    if isinstance(schema.get("enum"), list):
        parts.append(f"{labels['one_of']}: " + ", ".join(str(v) for v in schema["enum"]))
    if "default" in schema and schema["default"] is not None:
        parts.append(f"{labels['default']}: {schema['default']}")
    return "; ".join(parts)


def _example(entry: ToolEntry) -> list[str]:
    properties: Mapping[str, Any] = entry.definition.parameters.get("properties", {})
    required = list(entry.definition.parameters.get("required", []))
    shown = required or list(properties)[:1]
    lines = ["<|[REQUEST_TOOL]|>", f"command:「始」{entry.id}「末」"]
    lines += [f"{name}:「始」...「末」" for name in shown]
    lines.append("<|[END_TOOL]|>")
    return lines
