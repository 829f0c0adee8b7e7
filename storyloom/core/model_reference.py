"""Markdown reference pages generated from the pydantic models of file formats.

The docs of a file format are derived from its model, so they cannot drift from what the
code accepts: ``storyloom schema NAME --markdown`` prints a page and a test compares it
with the copy in ``docs/reference/``.
"""

from __future__ import annotations

import json
import types
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined


def _type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        parts = [_type_name(a) for a in get_args(annotation) if a is not type(None)]
        optional = type(None) in get_args(annotation)
        return " or ".join(parts) + (" or null" if optional else "")
    if origin is Literal:
        return " \\| ".join(json.dumps(a) for a in get_args(annotation))
    if origin is list:
        (item,) = get_args(annotation) or (Any,)
        return f"list of {_type_name(item)}"
    if origin is dict:
        return "object"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    if annotation is SecretStr:
        return "string (secret)"
    names = {str: "string", int: "integer", float: "number", bool: "boolean"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _constraints(info: FieldInfo) -> str:
    marks = {
        annotated_types.Ge: ("≥", "ge"),
        annotated_types.Gt: (">", "gt"),
        annotated_types.Le: ("≤", "le"),
        annotated_types.Lt: ("<", "lt"),
    }
    out = []
    for item in info.metadata:
        for kind, (sign, attr) in marks.items():
            if isinstance(item, kind):
                out.append(f"{sign} {getattr(item, attr)}")
    return ", ".join(out)


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        factory: Any = info.default_factory
        if isinstance(factory, type) and issubclass(factory, BaseModel):
            return "see below"
        # Factories of plain containers give a fixed value; any other (ids, timestamps)
        # gives a new one each time, so the page says so instead of showing one.
        if factory in (list, dict, set, tuple):
            return f"`{json.dumps(factory())}`"
        return "generated"
    if info.default is PydanticUndefined:
        return "required"
    return f"`{json.dumps(info.default)}`"


def _nested_models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in get_args(annotation):
        found += _nested_models(arg)
    return found


def markdown_reference(model: type[BaseModel], title: str, intro: str) -> str:
    """One page: a table per model, the top one first, nested models after it."""
    lines = [f"# {title}", "", intro.strip(), "", "<!-- generated from the pydantic models -->"]
    queue, seen = [model], set()
    while queue:
        current = queue.pop(0)
        if current in seen:
            continue
        seen.add(current)
        lines += ["", f"## {current.__name__}", ""]
        if current.__doc__:
            # Docstrings use reStructuredText literals; Markdown wants single backticks.
            lines += [" ".join(current.__doc__.split()).replace("``", "`"), ""]
        lines += ["| field | type | default | allowed | meaning |", "|---|---|---|---|---|"]
        for name, info in current.model_fields.items():
            cells = [
                f"`{info.alias or name}`",
                _type_name(info.annotation),
                _default(info),
                _constraints(info),
                (info.description or "").replace("|", "\\|"),
            ]
            lines.append("| " + " | ".join(cells) + " |")
            queue += _nested_models(info.annotation)
        if current.model_config.get("extra") == "allow":
            lines += ["", "Other keys are kept as they are."]
    return "\n".join(lines) + "\n"
