"""Choosing and joining values: Switch computes only the branch it takes, Merge joins
branches that may or may not have produced a value."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field

from storyloom.core.plugin_markers import hookimpl
from storyloom.knowledge.variables import render_value
from storyloom.workflow.node_type import (
    NodeConfig,
    NodeContext,
    NodeExpansion,
    NodeType,
    Slot,
)
from storyloom.workflow.slot_types import ANY, BOOLEAN


class Switch(NodeType):
    """Passes on one of two values by a condition. Both branches are lazy: the runner
    computes only the chosen one, so an expensive LLM branch not taken costs nothing."""

    type: ClassVar[str] = "core:Switch"
    display_name: ClassVar[str] = "Switch"
    category: ClassVar[str] = "Flow"
    description: ClassVar[str] = (
        "Pass on one value or the other by a condition; only the chosen branch is computed."
    )
    inputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="condition", type=BOOLEAN, description="Which branch to take"),
        Slot(
            name="on_true",
            type=ANY,
            required=False,
            lazy=True,
            description="The value when the condition is true (computed only then)",
        ),
        Slot(
            name="on_false",
            type=ANY,
            required=False,
            lazy=True,
            description="The value when the condition is false (computed only then)",
        ),
    )
    outputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="value", type=ANY, description="The chosen branch's value"),
    )

    def check_lazy(self, available: Mapping[str, Any], config: NodeConfig) -> list[str]:
        chosen = _branch(available.get("condition"))
        return [] if chosen in available else [chosen]

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: NodeConfig
    ) -> dict[str, Any] | NodeExpansion:
        return {"value": inputs.get(_branch(inputs.get("condition")))}


def _branch(condition: Any) -> str:
    return "on_true" if bool(condition) else "on_false"


MergeMode = Literal["first-present", "concat", "list"]
_MERGE_INPUTS = ("first", "second", "third")


class MergeConfig(NodeConfig):
    mode: MergeMode = Field(
        "first-present",
        description="first-present: the first value given; concat: lists joined into one "
        "list, anything else joined as text; list: the values given, as a list",
    )
    separator: str = Field("\n", description="With concat of text: put between the values")


class Merge(NodeType[MergeConfig]):
    """Joins up to three optional values. A value counts as present when it is not null,
    so the outputs of branches that did not run (or produced nothing) are skipped."""

    type: ClassVar[str] = "core:Merge"
    display_name: ClassVar[str] = "Merge"
    category: ClassVar[str] = "Flow"
    description: ClassVar[str] = (
        "Join up to three values: the first one present, all of them as text, or a list."
    )
    inputs: ClassVar[tuple[Slot, ...]] = tuple(
        Slot(name=name, type=ANY, required=False, description=f"The {name} value (optional)")
        for name in _MERGE_INPUTS
    )
    outputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="value", type=ANY, description="The merged value"),
    )

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: MergeConfig
    ) -> dict[str, Any] | NodeExpansion:
        present = [inputs[name] for name in _MERGE_INPUTS if inputs.get(name) is not None]
        mode = config.mode
        if mode == "list":
            return {"value": present}
        if mode == "concat":
            if present and all(isinstance(v, list) for v in present):
                return {"value": [item for value in present for item in value]}
            return {"value": config.separator.join(render_value(v) for v in present)}
        return {"value": present[0] if present else None}


@hookimpl
def storyloom_node_types() -> list[type[NodeType]]:
    return [Switch, Merge]
