"""A tool's declaration: the ``*.tool.json`` file of seed 003 6.3, and what the registry
keeps about each tool it offers.

Seed 003 names four implementations and leaves open what exactly each one points at;
the :class:`WorkflowImpl`, :class:`NodeImpl`, :class:`ServiceImpl` and
:class:`ScriptImpl` docstrings settle it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from storyloom.core.errors import FieldProblem, FileFormatError, problems_from_validation
from storyloom.tools.config_options import ConfigOption

if TYPE_CHECKING:
    from storyloom.tools.tool_manager import ToolCallContext

TOOL_FILE_SUFFIX = ".tool.json"

_ID = re.compile(r"[^\s\x00-\x1f]+")
_NAMESPACED_ID = re.compile(r"[^\s:\x00-\x1f]+:[^\s\x00-\x1f]+")


def empty_parameters() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


class _Impl(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)


class WorkflowImpl(_Impl):
    """Run a workflow (seed 003 4.1.1). ``workflow`` is a workflow id: first a workflow
    the same plugin ships in its ``workflows/`` folder, else one of the project's
    ``workflows/<id>.json``. Parameters left out of the tool file are the workflow's
    ``interfaceInputs`` (seed 4.4.3); the result is its ``interfaceOutputs`` (one output:
    the value itself)."""

    type: Literal["workflow"] = "workflow"
    workflow: str = Field(min_length=1, description="Workflow id (its file name)")


class NodeImpl(_Impl):
    """Run one node as a micro-workflow (seed 003 4.1.2). ``node`` is a node type such as
    ``text:Template``; ``config`` holds fixed arguments of the node (config fields or
    input slots) the caller cannot change. Parameters left out of the tool file are the
    node's inputs and config fields, less those fixed here."""

    type: Literal["node"] = "node"
    node: str = Field(min_length=1, description="Node type, e.g. text:Template")
    config: dict[str, Any] = Field(default_factory=dict, description="Fixed arguments")


class ServiceImpl(_Impl):
    """Call a Python function (seed 003 4.2). ``function`` names a function the same
    plugin returns from its ``storyloom_tool_functions`` hook; it is called as
    ``function(arguments, context)`` (a plain function runs in a worker thread) and
    returns something JSON can hold. The tool file must declare ``parameters``.
    Built-in tools and plugins written in Python may instead return :class:`ServiceTool`
    objects from ``storyloom_tools``, with no tool file."""

    type: Literal["service"] = "service"
    function: str = Field(min_length=1, description="Name in storyloom_tool_functions")


class ScriptImpl(_Impl):
    """Run an external command in the sandbox (seed 003 4.3, 6.3;
    :mod:`storyloom.tools.script_tool`): the plugin's folder is mounted read-only at
    ``/plugin`` and ``command`` runs in ``/plugin/<cwd>`` (``cwd`` may not leave it) with
    an empty environment, no network unless the plugin declares it and the user granted
    it, and ``timeout`` milliseconds of wall time. stdin holds one JSON line
    ``{"arguments", "config", "tool"}``; stdout ends with one JSON object,
    ``{"result": ...}`` or ``{"error": "..."}``. ``python``/``python3`` is the sandbox's
    interpreter, ``node`` the host's node; a command with a ``/`` is a file of the plugin,
    any other is looked up on ``/usr/local/bin:/usr/bin:/bin``."""

    type: Literal["script"] = "script"
    command: str = Field(min_length=1)
    protocol: Literal["stdio"] = "stdio"
    timeout: int = Field(default=30000, gt=0, description="Milliseconds")
    cwd: str = Field(default=".", description="Relative to the plugin folder")

    @field_validator("cwd")
    @classmethod
    def _inside(cls, value: str) -> str:
        path = Path(value)
        if path.is_absolute() or ".." in path.parts:
            raise ValueError("must be a folder inside the plugin (relative, no '..')")
        return value


Implementation = Annotated[
    WorkflowImpl | NodeImpl | ServiceImpl | ScriptImpl, Field(discriminator="type")
]


class ToolDefinition(BaseModel):
    """One tool: a ``*.tool.json`` file, or what a source (built-ins, workflows, node
    types, MCP) declares in its place. ``parameters`` is a JSON Schema of type object;
    a workflow or node tool may leave it out to have it inferred."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)

    id: str = Field(min_length=1, description="<Namespace>:<name>, unique among all tools")
    display_name: str = Field(default="", alias="displayName")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=empty_parameters)
    implementation: Implementation
    config_schema: list[ConfigOption] = Field(default_factory=list, alias="configSchema")

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not _ID.fullmatch(value):
            raise ValueError("no spaces or control characters")
        return value

    @field_validator("parameters")
    @classmethod
    def _schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value.get("type", "object") != "object":
            raise ValueError("must be a JSON Schema of type object")
        try:
            jsonschema.Draft202012Validator.check_schema(value)
        except jsonschema.SchemaError as exc:
            where = "/".join(str(p) for p in exc.path)
            raise ValueError(f"not a JSON Schema ({where or 'top'}: {exc.message})") from None
        return {"type": "object", **value}

    @model_validator(mode="after")
    def _declared_parameters(self) -> ToolDefinition:
        if isinstance(self.implementation, ServiceImpl | ScriptImpl) and (
            "parameters" not in self.model_fields_set
        ):
            raise ValueError(
                f"parameters: required for a {self.implementation.type} tool "
                "(they cannot be inferred)"
            )
        return self

    @property
    def infers_parameters(self) -> bool:
        """A workflow or node tool whose file leaves ``parameters`` to the registry."""
        return "parameters" not in self.model_fields_set and isinstance(
            self.implementation, WorkflowImpl | NodeImpl
        )


ServiceFunction = Callable[[dict[str, Any], "ToolCallContext"], Any | Awaitable[Any]]


@dataclass(frozen=True)
class ServiceTool:
    """A tool implemented by a Python function, returned from ``storyloom_tools``."""

    definition: ToolDefinition
    function: ServiceFunction

    @classmethod
    def of(
        cls,
        tool_id: str,
        function: ServiceFunction,
        *,
        description: str = "",
        parameters: dict[str, Any] | None = None,
        display_name: str = "",
    ) -> ServiceTool:
        """``function`` as the tool ``tool_id`` (its name after the namespace names the
        function); ``parameters`` default to an object with no properties."""
        definition = ToolDefinition(
            id=tool_id,
            display_name=display_name,
            description=description,
            parameters=parameters or {"type": "object", "properties": {}},
            implementation=ServiceImpl(function=tool_id.split(":", 1)[-1]),
        )
        return cls(definition=definition, function=function)


@dataclass(frozen=True)
class ToolEntry:
    """A tool as the registry offers it.

    ``source`` is ``builtin``, ``plugin:<name>``, ``workflow``, ``node`` or
    ``mcp:<server>``. ``function`` is what a service tool calls (a built-in's, a plugin's
    named function, an MCP client's call); ``workflow_file`` a workflow a plugin ships;
    ``folder`` the plugin's folder; ``location`` where the tool was declared (a file or
    a source name), for messages.
    """

    definition: ToolDefinition
    source: str
    plugin: str | None = None
    available: bool = True
    unavailable_reason: str | None = None
    function: ServiceFunction | None = None
    workflow_file: Path | None = None
    folder: Path | None = None
    location: str | None = None

    @property
    def id(self) -> str:
        return self.definition.id

    @property
    def implementation_type(self) -> str:
        """``workflow``, ``node``, ``service``, ``script`` or ``mcp`` (an MCP server's)."""
        if self.source.startswith("mcp:"):
            return "mcp"
        return self.definition.implementation.type

    @property
    def where(self) -> str:
        return self.location or self.source


def load_tool_file(path: Path) -> ToolDefinition:
    """Read one ``*.tool.json``; :class:`FileFormatError` names the file, each field and
    the reason. A file's id must be ``<Namespace>:<name>``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise FileFormatError(path, [FieldProblem("", f"cannot read: {exc.strerror}")]) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FileFormatError(path, [FieldProblem("", f"not JSON: {exc}")]) from None
    if not isinstance(data, dict):
        raise FileFormatError(path, [FieldProblem("", "must be a JSON object")])
    try:
        definition = ToolDefinition.model_validate(data)
    except ValidationError as exc:
        raise FileFormatError(path, problems_from_validation(exc)) from None
    if not _NAMESPACED_ID.fullmatch(definition.id):
        raise FileFormatError(
            path, [FieldProblem("id", "must be <Namespace>:<name>, e.g. my-plugin:search")]
        )
    return definition
