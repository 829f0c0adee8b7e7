"""A person in the loop: the run pauses on ``node:needs-human`` until ``human:decision``
(seed 002) says approve, edit or retry."""

from __future__ import annotations

import json
from typing import Annotated, Any, ClassVar

from pydantic import Field

from storyloom.core.errors import StoryloomError
from storyloom.core.plugin_markers import hookimpl
from storyloom.workflow.node_type import (
    TEXTAREA,
    NodeConfig,
    NodeContext,
    NodeExpansion,
    NodeType,
    Slot,
)
from storyloom.workflow.slot_types import INTEGER, STRING


class HumanDecisionRefused(StoryloomError):
    """The person's answer cannot be carried out (a retry past the limit, an empty edit)."""


DEFAULT_REASON = "Review this output before the workflow goes on"


class HumanDecisionConfig(NodeConfig):
    reason: Annotated[str, TEXTAREA] = Field(
        DEFAULT_REASON, description="What the user is asked to check (shown with the value)"
    )
    max_retries: int = Field(
        3,
        ge=0,
        le=20,
        description="How many times the user may ask for the value to be regenerated",
    )


class HumanDecisionNode(NodeType[HumanDecisionConfig]):
    """Shows ``value`` to the user and waits for their decision.

    approve → ``value`` goes on as it is; edit → the user's ``editedOutput`` goes on instead;
    retry → the nodes feeding ``value`` run again (bypassing the cache) and the new value is
    shown, at most ``max_retries`` times; after that only approve and edit are offered.
    """

    type: ClassVar[str] = "core:HumanDecision"
    display_name: ClassVar[str] = "Human decision"
    category: ClassVar[str] = "Human"
    description: ClassVar[str] = (
        "Pause the run until a person approves the value, edits it, or asks for it to be "
        "generated again."
    )
    # A person's answer is not a function of the inputs: never cache it.
    idempotent: ClassVar[bool] = False
    inputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="value", type=STRING, description="The output to review"),
    )
    outputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="value", type=STRING, description="The approved or edited value"),
        Slot(name="decision", type=STRING, description="approve or edit: how it was accepted"),
        Slot(name="retries", type=INTEGER, description="How many times it was regenerated"),
    )

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: HumanDecisionConfig
    ) -> dict[str, Any] | NodeExpansion:
        reason = config.reason or DEFAULT_REASON
        max_retries = config.max_retries
        value = _text(inputs.get("value"))
        retries = 0
        while True:
            options = ("approve", "retry", "edit") if retries < max_retries else ("approve", "edit")
            answer = await ctx.request_human(reason, value, options)
            if answer.decision == "approve":
                return {"value": value, "decision": "approve", "retries": retries}
            if answer.decision == "edit":
                if answer.edited_output is None:
                    raise HumanDecisionRefused("an edit decision needs editedOutput (the new text)")
                return {"value": answer.edited_output, "decision": "edit", "retries": retries}
            if retries >= max_retries:
                raise HumanDecisionRefused(
                    f"retry refused, the value was already regenerated "
                    f"{retries} time(s) (max_retries = {max_retries}); approve or edit it"
                )
            retries += 1
            value = _text((await ctx.rerun_inputs()).get("value"))


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


@hookimpl
def storyloom_node_types() -> list[type[NodeType]]:
    return [HumanDecisionNode]
