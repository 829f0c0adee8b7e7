"""The workflow file: nodes with config by name, edges slot → slot, and its interface.

Stored as ``<project>/workflows/<id>.json``. Field names follow seed 003 (``interfaceInputs``,
``dataFlowType``, ``matchCategories``); unknown fields are kept so a file written by a newer
storyloom or another tool survives a load/save here. Node config is a mapping by name,
never a list by position (ComfyUI's ``widgets_values`` breaks when a node gains a widget).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from storyloom.core.atomic_io import atomic_write_text
from storyloom.core.errors import FieldProblem, FileFormatError, problems_from_validation

WORKFLOWS_DIR = "workflows"
WORKFLOW_SUFFIX = ".json"
FORMAT_VERSION = 1
RESERVED_IDS = frozenset({"schema", "node-types", "validate"})
# Checked with fullmatch: `$` would also match before a final newline ("x\n").
_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Position(_Open):
    x: float = Field(default=0.0, description="Canvas coordinate, left to right")
    y: float = Field(default=0.0, description="Canvas coordinate, top to bottom")


class WorkflowNode(_Open):
    """One node: its type, its config by name, where it sits on the canvas."""

    id: str = Field(min_length=1, max_length=128, description="Unique within the workflow")
    type: str = Field(min_length=1, description="Registered node type, e.g. `core:TextTemplate`")
    label: str | None = Field(default=None, description="Shown instead of the type's name")
    config: dict[str, Any] = Field(
        default_factory=dict, description="Config values by field name (never by position)"
    )
    position: Position = Field(default_factory=Position, description="Where the canvas draws it")


class WorkflowEdge(_Open):
    """Output ``sourceSlot`` of node ``source`` feeds input ``targetSlot`` of ``target``."""

    id: str | None = Field(default=None, description="Optional; the canvas sets one")
    source: str = Field(description="Id of the node whose output is used")
    source_slot: str = Field(alias="sourceSlot", description="Output slot name on `source`")
    target: str = Field(description="Id of the node that receives the value")
    target_slot: str = Field(alias="targetSlot", description="Input slot name on `target`")


class Suggestion(_Open):
    value: Any = Field(description="A value offered to the user (an `enum` member as a tool)")
    label: str | None = Field(default=None, description="Shown instead of the value")


class InterfaceSlotConfig(_Open):
    default: Any = Field(default=None, description="Used when the caller gives no value")
    suggestions: list[Suggestion] = Field(
        default_factory=list, description="Offered values; with `ComboOption` the only ones"
    )


class InterfaceSlot(_Open):
    """One input or output of a workflow seen from outside (seed 003 4.4.3)."""

    description: str = Field(default="", description="Told to the user and to an LLM caller")
    data_flow_type: str = Field(
        default="STRING",
        alias="dataFlowType",
        description="STRING, INTEGER, FLOAT, BOOLEAN, OBJECT, ARRAY, ANY or a domain type",
    )
    required: bool = Field(default=False, description="The caller must give a value")
    match_categories: list[str] = Field(
        default_factory=list,
        alias="matchCategories",
        description="`ComboOption`: the value must be one of the suggestions",
    )
    config: InterfaceSlotConfig = Field(default_factory=InterfaceSlotConfig)


class Workflow(_Open):
    id: str = Field(description="File name without `.json`; the `<id>` of `workflow:<id>`")
    name: str = Field(default="", description="Shown in lists; the id when empty")
    description: str = Field(
        default="", description="What it does; the tool description when used as a tool"
    )
    format_version: int = Field(
        default=FORMAT_VERSION, alias="formatVersion", description="Version of this layout"
    )
    nodes: list[WorkflowNode] = Field(default_factory=list)
    edges: list[WorkflowEdge] = Field(default_factory=list)
    interface_inputs: dict[str, InterfaceSlot] = Field(
        default_factory=dict,
        alias="interfaceInputs",
        description="Inputs by name: GroupInput's outputs, a tool's parameters",
    )
    interface_outputs: dict[str, InterfaceSlot] = Field(
        default_factory=dict,
        alias="interfaceOutputs",
        description="Outputs by name: GroupOutput's inputs, a tool's result",
    )
    execute_tool_calls: bool = Field(
        default=False,
        alias="executeToolCalls",
        description=(
            "Run the <|[REQUEST_TOOL]|> blocks in the text outputs once the run completes "
            "(seed 003 §7.3), as an agent's calls: the global policy, approvals, audit"
        ),
    )

    @field_validator("id")
    @classmethod
    def _file_safe(cls, value: str) -> str:
        if not _ID.fullmatch(value):
            raise ValueError(
                "use letters, digits, `_`, `.` or `-` (at most 128, not starting with `.`"
                " or `-`): the id is the file name"
            )
        if value in RESERVED_IDS:
            raise ValueError(
                f"{value!r} is reserved (it names an API route: /api/workflows/{value});"
                " pick another id"
            )
        return value

    def node(self, node_id: str) -> WorkflowNode | None:
        for node in self.nodes:
            if node.id == node_id:
                return node
        return None

    def to_json(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        if not self.execute_tool_calls:
            # Written only when on: a file saved before the setting existed stays as it was.
            del data["executeToolCalls"]
        return data


class WorkflowSummary(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    id: str
    name: str
    description: str
    node_count: int = Field(alias="nodeCount")


def workflow_schema() -> dict[str, Any]:
    """The JSON Schema the editor and other tools validate workflow files against."""
    return Workflow.model_json_schema(by_alias=True)


def parse_workflow(data: Any, source: Path | str = "workflow") -> Workflow:
    """A :class:`Workflow` from parsed JSON; :class:`FileFormatError` names every bad field."""
    try:
        return Workflow.model_validate(data)
    except ValidationError as exc:
        raise FileFormatError(source, problems_from_validation(exc)) from None


def load_workflow_file(path: Path) -> Workflow:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileFormatError(path, [FieldProblem("", "no such file")]) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FileFormatError(path, [FieldProblem("", f"not JSON: {exc}")]) from None
    return parse_workflow(data, path)


def save_workflow_file(path: Path, workflow: Workflow) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(workflow.to_json(), ensure_ascii=False, indent=2) + "\n")
    return path


class WorkflowLibrary:
    """The workflows of one project folder, by id (the file name)."""

    def __init__(self, project_dir: Path) -> None:
        self.folder = project_dir / WORKFLOWS_DIR

    def path(self, workflow_id: str) -> Path:
        if not _ID.fullmatch(workflow_id):
            raise FileFormatError(
                self.folder / workflow_id, [FieldProblem("id", "not a valid workflow id")]
            )
        return self.folder / f"{workflow_id}{WORKFLOW_SUFFIX}"

    def exists(self, workflow_id: str) -> bool:
        return _ID.fullmatch(workflow_id) is not None and self.path(workflow_id).is_file()

    def load(self, workflow_id: str) -> Workflow:
        workflow = load_workflow_file(self.path(workflow_id))
        if workflow.id != workflow_id:
            # The file name wins: it is what `workflow:<id>` and references point at.
            workflow = workflow.model_copy(update={"id": workflow_id})
        return workflow

    def save(self, workflow: Workflow) -> Path:
        return save_workflow_file(self.path(workflow.id), workflow)

    def delete(self, workflow_id: str) -> bool:
        path = self.path(workflow_id)
        if not path.is_file():
            return False
        path.unlink()
        return True

    def list(self) -> tuple[list[WorkflowSummary], list[FileFormatError]]:
        """Every readable workflow, and the files that are not (each with its problems)."""
        summaries: list[WorkflowSummary] = []
        broken: list[FileFormatError] = []
        if not self.folder.is_dir():
            return summaries, broken
        for path in sorted(self.folder.glob(f"*{WORKFLOW_SUFFIX}")):
            try:
                workflow = self.load(path.stem)
            except FileFormatError as exc:
                broken.append(exc)
                continue
            summaries.append(
                WorkflowSummary(
                    id=workflow.id,
                    name=workflow.name or workflow.id,
                    description=workflow.description,
                    node_count=len(workflow.nodes),
                )
            )
        return summaries, broken
