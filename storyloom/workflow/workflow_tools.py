"""Workflows and single nodes as agent tools (seed 003 4.4.3 and 4.1.2).

A workflow is a tool named ``workflow:<id>`` whose parameters are its ``interfaceInputs``;
calling it runs the workflow and answers its ``interfaceOutputs`` (one output: the value
itself). Any node type is a tool named ``node:<type>``, run as a micro-workflow
(GroupInput → node → GroupOutput) through the same runner, so it is cached, streamed and
reported like every other run. The tool manager that offers these to agents comes later.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import jsonschema

from storyloom.core.errors import (
    FieldProblem,
    InvalidInput,
    NotFound,
    StoryloomError,
    field_path,
)
from storyloom.workflow import slot_types
from storyloom.workflow.node_registry import NodeRegistry
from storyloom.workflow.node_type import COMBO_OPTION, NodeTypeInfo
from storyloom.workflow.workflow_file import Workflow

if TYPE_CHECKING:
    from storyloom.workflow.runner import RunResult, WorkflowRunner

WORKFLOW_TOOL_PREFIX = "workflow:"
NODE_TOOL_PREFIX = "node:"


class ToolArgumentsInvalid(InvalidInput, ValueError):
    """A tool call's arguments do not fit the tool's parameters; one problem per argument."""

    def __init__(self, tool: str, problems: list[FieldProblem]) -> None:
        self.tool = tool
        lines = "; ".join(f"argument {p.field!r}: {p.reason}" for p in problems)
        super().__init__(f"{tool}: {lines}", problems)


class ToolRunFailed(StoryloomError):
    """The workflow behind a tool did not complete; ``result`` has what it did produce."""

    def __init__(self, tool: str, result: RunResult) -> None:
        self.tool = tool
        self.result = result
        reasons = "; ".join(f"node {node}: {error}" for node, error in result.errors.items())
        super().__init__(f"{tool}: the run {result.status}" + (f" ({reasons})" if reasons else ""))


class UnknownNodeType(NotFound):
    pass


def workflow_tool_schema(workflow: Workflow) -> dict[str, Any]:
    """The tool schema of ``workflow`` by seed 003 4.4.3's mapping."""
    properties: dict[str, Any] = {}
    for name, slot in workflow.interface_inputs.items():
        prop: dict[str, Any] = {}
        json_type = slot_types.json_schema_type(slot.data_flow_type)
        if json_type is not None:
            prop["type"] = json_type
        if slot.description:
            prop["description"] = slot.description
        if COMBO_OPTION in slot.match_categories and slot.config.suggestions:
            prop["enum"] = [s.value for s in slot.config.suggestions]
        properties[name] = prop
    return {
        "name": f"{WORKFLOW_TOOL_PREFIX}{workflow.id}",
        "description": workflow.description,
        "parameters": {
            "type": "object",
            "properties": properties,
            "required": [name for name, slot in workflow.interface_inputs.items() if slot.required],
        },
    }


async def run_workflow_tool(
    runner: WorkflowRunner, workflow: Workflow, arguments: Mapping[str, Any]
) -> Any:
    """Run ``workflow`` as the tool call ``arguments`` asks; its interface outputs, or the
    value itself when it declares one output. Raises :class:`ToolArgumentsInvalid` before
    running and :class:`ToolRunFailed` when the run does not complete."""
    schema = workflow_tool_schema(workflow)
    tool = schema["name"]
    check_arguments(tool, schema["parameters"], arguments)
    inputs: dict[str, Any] = {}
    for name, slot in workflow.interface_inputs.items():
        if name in arguments:
            inputs[name] = _typed(tool, name, arguments[name], slot.data_flow_type)
        elif slot.config.default is not None:
            inputs[name] = slot.config.default
    result = await runner.run(workflow, inputs=inputs)
    if result.status != "completed":
        raise ToolRunFailed(tool, result)
    outputs = dict(result.interface_outputs)
    if len(workflow.interface_outputs) == 1:
        (only,) = workflow.interface_outputs
        return outputs.get(only)
    return outputs


def node_tool_schema(info: NodeTypeInfo) -> dict[str, Any]:
    """A node type as a tool (seed 003 4.1.2): one parameter per input slot, and one per
    config field that is not also an input (its schema from the config model). A
    required input is a required parameter unless a config default stands in for it."""
    fields: dict[str, Any] = info.config_schema.get("properties", {})
    required_fields = set(info.config_schema.get("required", []))
    properties: dict[str, Any] = {}
    required: list[str] = []
    for slot in info.inputs:
        prop = _typed_property(slot.type, slot.description)
        field = fields.get(slot.name)
        if field is not None:
            prop.update(_config_extras(field))
        properties[slot.name] = prop
        if slot.required and (field is None or field.get("default") is None):
            required.append(slot.name)
    for name, field in fields.items():
        if name in properties:
            continue
        properties[name] = _tool_property(_non_null(field))
        if name in required_fields:
            required.append(name)
    return {
        "name": f"{NODE_TOOL_PREFIX}{info.type}",
        "description": info.description,
        "parameters": {"type": "object", "properties": properties, "required": required},
    }


async def run_node_tool(
    runner: WorkflowRunner,
    registry: NodeRegistry,
    node_type: str,
    arguments: Mapping[str, Any],
) -> Any:
    """Run one node of ``node_type`` with ``arguments`` as a micro-workflow: arguments
    naming input slots arrive through GroupInput, the others set the node's config. Its
    outputs come back as a workflow tool's do (one output: the value itself)."""
    found = registry.get(node_type)
    if found is None:
        raise UnknownNodeType(f"{NODE_TOOL_PREFIX}{node_type}: no such node type")
    info = found.info()
    tool = f"{NODE_TOOL_PREFIX}{node_type}"
    if info.dynamic_slots:
        raise UnknownNodeType(
            f"{tool}: its slots depend on its config or workflow; use it inside a workflow "
            "and call that workflow as a tool"
        )
    check_arguments(tool, node_tool_schema(info)["parameters"], arguments)
    slot_by_name = {s.name: s for s in info.inputs}
    interface_inputs: dict[str, Any] = {}
    inputs: dict[str, Any] = {}
    config: dict[str, Any] = {}
    edges: list[dict[str, str]] = []
    for name, value in arguments.items():
        slot = slot_by_name.get(name)
        if slot is None:
            config[name] = value
            continue
        interface_inputs[name] = {"dataFlowType": slot.type, "required": slot.required}
        inputs[name] = _typed(tool, name, value, slot.type)
        edges.append(_edge("input", name, "node", name))
    edges += [_edge("node", s.name, "output", s.name) for s in info.outputs]
    workflow = Workflow.model_validate(
        {
            "id": "node-tool." + node_type.replace(":", "."),
            "name": tool,
            "description": info.description,
            "nodes": [
                {"id": "input", "type": "core:GroupInput"},
                {"id": "node", "type": node_type, "config": config},
                {"id": "output", "type": "core:GroupOutput"},
            ],
            "edges": edges,
            "interfaceInputs": interface_inputs,
            "interfaceOutputs": {s.name: {"dataFlowType": s.type} for s in info.outputs},
        }
    )
    result = await runner.run(workflow, inputs=inputs)
    if result.status != "completed":
        raise ToolRunFailed(tool, result)
    if len(info.outputs) == 1:
        return result.interface_outputs.get(info.outputs[0].name)
    return dict(result.interface_outputs)


def check_arguments(tool: str, parameters: dict[str, Any], arguments: Mapping[str, Any]) -> None:
    """Raise :class:`ToolArgumentsInvalid` listing every argument that breaks
    ``parameters``, unknown ones included (an LLM's made-up argument would otherwise be
    dropped without a word)."""
    problems: list[FieldProblem] = []
    if not isinstance(arguments, Mapping):
        raise ToolArgumentsInvalid(tool, [FieldProblem("", "arguments must be an object")])
    validator = jsonschema.Draft202012Validator(parameters)
    for error in sorted(validator.iter_errors(dict(arguments)), key=lambda e: list(e.path)):
        if error.validator == "additionalProperties" and not error.path:
            continue  # each unknown argument is named below, with the known ones
        if error.validator == "required" and not error.path:
            missing = error.message.split("'")[1] if "'" in error.message else ""
            problems.append(FieldProblem(missing, "required"))
        else:
            problems.append(FieldProblem(field_path(list(error.path)), error.message))
    known = parameters.get("properties", {})
    problems += [
        FieldProblem(name, f"unknown argument (known: {', '.join(known) or 'none'})")
        for name in arguments
        if name not in known
    ]
    if problems:
        raise ToolArgumentsInvalid(tool, problems)


def _typed(tool: str, name: str, value: Any, type_name: str) -> Any:
    try:
        return slot_types.parse_value(value, type_name)
    except ValueError as exc:
        raise ToolArgumentsInvalid(tool, [FieldProblem(name, str(exc))]) from None


def _typed_property(type_name: str, description: str) -> dict[str, Any]:
    prop: dict[str, Any] = {}
    json_type = slot_types.json_schema_type(type_name)
    if json_type is not None:
        prop["type"] = json_type
    if description:
        prop["description"] = description
    return prop


def _config_extras(field: dict[str, Any]) -> dict[str, Any]:
    """Bounds and choices of a config field that is also an input. Only strict choices
    are an ``enum``: suggestions are hints, and the node accepts any value."""
    plain = _non_null(field)
    return {k: plain[k] for k in ("enum", "minimum", "maximum") if k in plain}


def _non_null(field: dict[str, Any]) -> dict[str, Any]:
    """An optional field (``anyOf [X, null]``) as X: a caller leaves it out to leave it
    unset, so a tool's parameters need not offer null."""
    options = field.get("anyOf")
    if not isinstance(options, list):
        return field
    others = [o for o in options if o.get("type") != "null"]
    if len(others) != 1 or len(others) == len(options):
        return field
    rest = {k: v for k, v in field.items() if k != "anyOf"}
    return {**others[0], **rest}


def _tool_property(schema: Any) -> Any:
    """A config field's schema without what only the canvas reads (titles, editor hints)."""
    if isinstance(schema, list):
        return [_tool_property(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" or key.startswith("x-"):
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _tool_property(prop) for name, prop in value.items()}
        elif key in ("default", "enum", "const"):
            out[key] = value
        else:
            out[key] = _tool_property(value)
    return out


def _edge(source: str, source_slot: str, target: str, target_slot: str) -> dict[str, str]:
    return {
        "source": source,
        "sourceSlot": source_slot,
        "target": target,
        "targetSlot": target_slot,
    }
