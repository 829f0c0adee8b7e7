"""A run's interface inputs: the values given, parsed as their types, or their defaults."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from storyloom.workflow.slot_types import parse_value
from storyloom.workflow.validation import WorkflowInvalid, WorkflowProblem
from storyloom.workflow.workflow_file import Workflow


def resolve_interface_inputs(workflow: Workflow, given: Mapping[str, Any] | None) -> dict[str, Any]:
    """The run's interface input values: given ones parsed as their ``dataFlowType``,
    absent ones from ``config.default``; raises :class:`WorkflowInvalid` listing every
    unknown, missing or mistyped input."""
    given = given or {}
    declared = workflow.interface_inputs
    problems: list[WorkflowProblem] = []
    values: dict[str, Any] = {}
    for name in given:
        if name not in declared:
            problems.append(
                WorkflowProblem(
                    slot=name,
                    code="bad-interface",
                    message=f"workflow {workflow.id!r} has no input {name!r} "
                    f"(inputs: {', '.join(declared) or 'none'})",
                )
            )
    for name, slot in declared.items():
        raw = given.get(name)
        if raw is not None:
            try:
                values[name] = parse_value(raw, slot.data_flow_type)
            except (ValueError, KeyError) as exc:
                problems.append(
                    WorkflowProblem(
                        slot=name,
                        code="bad-interface",
                        message=f"workflow {workflow.id!r} input {name!r}: {exc}",
                    )
                )
        elif slot.config.default is not None:
            values[name] = slot.config.default
        elif slot.required:
            about = f": {slot.description}" if slot.description else ""
            problems.append(
                WorkflowProblem(
                    slot=name,
                    code="missing-input",
                    message=f"workflow {workflow.id!r} needs input {name!r} "
                    f"({slot.data_flow_type}){about}",
                )
            )
    if problems:
        raise WorkflowInvalid(workflow.id, problems)
    return values
