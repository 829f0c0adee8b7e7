"""What a node type declares, and what a running node may ask of the runner.

A node type is a class: typed input and output slots with descriptions, a config model
(a pydantic model: defaults, bounds, choices, editor hints), a version (part of the cache
key: bump it when the node's behaviour changes), whether it is idempotent (same inputs →
same outputs, so its output may be cached) and whether it streams. Its ``run`` receives
the input values by slot name and the validated config model, and returns its outputs by
slot name. The config model is the one schema of a node's config: validation, the
workflow JSON Schema, a node tool's parameters and the canvas's form all come from it.

An input left unconnected whose name is also a config field takes the config value, so a
value can be typed on the node or wired from elsewhere (ComfyUI's widget-to-input).
"""

from __future__ import annotations

import builtins
import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, Protocol, cast, get_args

from pydantic import BaseModel, ConfigDict, Field, GetJsonSchemaHandler, ValidationError
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, ErrorDetails
from typing_extensions import TypeVar

from storyloom.core.errors import field_path
from storyloom.workflow.slot_types import ANY

# Suggestion is re-exported: node modules declare config suggestions with it.
from storyloom.workflow.workflow_file import Suggestion as Suggestion
from storyloom.workflow.workflow_file import Workflow, WorkflowNode

if TYPE_CHECKING:
    from storyloom.core.settings import Settings
    from storyloom.llm.instruct import TemplateLibrary
    from storyloom.project.knowledge_service import KnowledgeService
    from storyloom.store.database import Database
    from storyloom.workflow.agent_host import AgentHost

T = TypeVar("T")


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, frozen=True)


class Slot(_Model):
    """One typed input or output."""

    name: str
    type: str = ANY
    description: str = ""
    required: bool = Field(default=True, description="Inputs only: must be connected or set")
    lazy: bool = Field(
        default=False,
        description="Inputs only: computed only when the node asks for it (see check_lazy)",
    )
    default: Any = None


class NodeConfig(BaseModel):
    """Base of every node type's config model: the values typed on the node, by name.

    Unknown names are refused (a typo in a hand-written file would otherwise be a setting
    that silently does nothing) and values are checked strictly (``"3"`` is not an
    integer), as a JSON file states them. Extra editor hints go in ``Annotated``:
    :class:`Widget` and :class:`Suggestions`.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


# Defaults to Any so that ``NodeType`` alone (the registry's view) accepts every node type.
ConfigT = TypeVar("ConfigT", bound=NodeConfig, default=Any)

WidgetName = Literal["textarea", "json", "kb", "workflow", "code"]


class Widget:
    """``Annotated`` marker: the editor a field needs when its type does not say it
    (``x-widget`` in the config schema)."""

    def __init__(self, name: WidgetName) -> None:
        self.name = name

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        out = handler(schema)
        out["x-widget"] = self.name
        return out


TEXTAREA = Widget("textarea")
JSON_EDITOR = Widget("json")
KB_PICKER = Widget("kb")
WORKFLOW_PICKER = Widget("workflow")
CODE = Widget("code")
"""A code editor; its language is the sibling ``language`` field's value."""


class Suggestions:
    """``Annotated`` marker: values offered for a field. On a ``Literal`` field they label
    its choices; on any other they are hints (``ComboOption``), and other values pass."""

    def __init__(self, *items: Suggestion | Any) -> None:
        self.items = tuple(i if isinstance(i, Suggestion) else Suggestion(value=i) for i in items)

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        out = handler(schema)
        out["x-suggestions"] = [s.model_dump(mode="json", exclude_none=True) for s in self.items]
        out["x-match-categories"] = [COMBO_OPTION]
        return out


COMBO_OPTION = "ComboOption"


class NodeTypeInfo(_Model):
    """A node type as the canvas and the API see it."""

    type: str
    display_name: str = Field(alias="displayName")
    category: str
    description: str
    version: int
    idempotent: bool
    streaming: bool
    dynamic_slots: bool = Field(
        alias="dynamicSlots", description="Slots depend on the config or the workflow"
    )
    inputs: list[Slot]
    outputs: list[Slot]
    config_schema: dict[str, Any] = Field(
        alias="configSchema",
        description="JSON Schema (an object, `$ref`s inlined) of the node's config, with "
        "`x-widget`, `x-suggestions` and `x-match-categories` as editor hints",
    )


@dataclass(frozen=True)
class NodeSlots:
    inputs: tuple[Slot, ...]
    outputs: tuple[Slot, ...]
    _by_name: tuple[dict[str, Slot], dict[str, Slot]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Validation and planning look slots up once per edge.
        by_name = ({s.name: s for s in self.inputs}, {s.name: s for s in self.outputs})
        object.__setattr__(self, "_by_name", by_name)

    def input(self, name: str) -> Slot | None:
        return self._by_name[0].get(name)

    def output(self, name: str) -> Slot | None:
        return self._by_name[1].get(name)


class SlotEnvironment(Protocol):
    """What a node type may consult to work out slots that depend on more than its type."""

    @property
    def workflow(self) -> Workflow: ...

    def load_workflow(self, workflow_id: str) -> Workflow:
        """Another workflow of the project; raises ``FileFormatError`` when it is missing."""
        ...


class HumanDecision(_Model):
    """The answer to ``node:needs-human`` (seed 002 ``human:decision``)."""

    decision: Literal["approve", "retry", "edit"]
    edited_output: str | None = Field(default=None, alias="editedOutput")
    choice: int | None = Field(
        default=None, description="With candidates offered: the index of the one approved"
    )


class ContextSource(_Model):
    """Where a piece of a node's context came from (seed 002 provenance)."""

    uri: str
    reason: str = ""
    level: Literal["L0", "L1", "L2"] = "L2"
    version: int | None = Field(
        default=None,
        description="The version of that level that was read: with uri and "
        "level it rebuilds the injected text exactly",
    )


NoteValue = str | int | list[str] | None


class EvaluationNote(_Model):
    """A sentence an evaluator made (not a model's words) as a term and its values, for a
    page to say in its own language; the English stays in ``reason`` / ``detail``."""

    term: str
    values: dict[str, NoteValue] = Field(default_factory=dict)


class EvaluationCheck(_Model):
    dimension: str
    passed: bool
    detail: str = ""
    findings: list[EvaluationNote] = Field(
        default_factory=list, description="What the check found, each as a term and values"
    )


class Evaluation(_Model):
    decision: Literal["approve", "retry", "flag-human"]
    confidence: float = 1.0
    reason: str = ""
    reason_note: EvaluationNote | None = Field(
        default=None, description="``reason`` as a term and values, when an evaluator made it"
    )
    checks: list[EvaluationCheck] = Field(default_factory=list)


@dataclass
class NodeExpansion:
    """Returned by ``run`` instead of outputs: run this subgraph, then take its outputs.

    ``nodes`` and ``edges`` use ids local to the expansion (the runner prefixes them);
    ``inputs`` feeds expansion inputs from the expanding node's input values
    (``{(node_id, slot): value}``); ``outputs`` maps each output slot of the expanding
    node to ``(node_id, slot)`` inside the expansion.
    """

    workflow: Workflow
    outputs: dict[str, tuple[str, str]]
    inputs: dict[tuple[str, str], Any] = field(default_factory=dict)


@dataclass
class WorkflowServices:
    """What nodes may use from outside the graph; every part is optional."""

    settings: Callable[[], Settings] | None = None
    project_dir: Path | None = None
    database: Database | None = None
    knowledge: KnowledgeService | None = None
    workflows: Callable[[str], Workflow] | None = None
    agents: AgentHost | None = None
    """Runs tool-using agent turns (the tools layer's; absent, nodes run without tools)."""
    hooks: Any = None
    """The plugins' pluggy hook relay (``PluginManager.hook``); None: no plugin hooks."""
    script_folders: Callable[[], Mapping[str, Path]] | None = None
    """The enabled plugins' folders by plugin name, whose ``scripts/`` a ``chat:Script``
    node may run (``<plugin>:<file>``); set by whoever knows the plugins (the tools
    layer, the server). None: only the project's scripts."""
    prompt_templates: TemplateLibrary | None = None
    """The instruct and context templates (built in, and those imported into the data
    directory) that text-completion prompts are formatted with. None: the built-ins."""

    def require_settings(self) -> Settings:
        if self.settings is None:
            from storyloom.core.settings import Settings

            return Settings()
        return self.settings()


class NodeContext(Protocol):
    """The running node's handle on its run. Implemented by the runner."""

    @property
    def node_id(self) -> str: ...

    @property
    def run_id(self) -> str: ...

    @property
    def services(self) -> WorkflowServices: ...

    @property
    def interface_inputs(self) -> Mapping[str, Any]:
        """The values the run was started with (what GroupInput hands out)."""
        ...

    @property
    def cancelled(self) -> bool: ...

    def raise_if_cancelled(self) -> None:
        """Raise ``asyncio.CancelledError`` when the run is being cancelled."""
        ...

    async def emit(self, chunk: str) -> None:
        """Send a piece of streamed text (``node:streaming``)."""
        ...

    def report_iteration(
        self,
        iteration: int,
        total: int,
        kind: Literal["recursive", "evolutionary"],
        candidate_count: int | None = None,
    ) -> None:
        """Send ``node:iteration``."""
        ...

    def report_tool_step(self, step: Mapping[str, Any]) -> None:
        """Send ``node:tool-step``: one tool call of an agent turn (a ``ToolStep`` as JSON),
        for the run log."""
        ...

    async def request_human(
        self,
        reason: str,
        output_preview: str,
        options: Sequence[str] = ("approve", "retry", "edit"),
        candidates: Sequence[str] | None = None,
    ) -> HumanDecision:
        """Send ``node:needs-human`` and wait for the user's ``human:decision``.

        With ``candidates`` the user picks one (``choice``), as in evolutionary selection.
        """
        ...

    async def rerun_inputs(self) -> dict[str, Any]:
        """Run this node's upstream again, bypassing the cache, and return the fresh input
        values (what a human's ``retry`` asks for)."""
        ...

    async def run_workflow(
        self, workflow: Workflow | str, inputs: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Run another workflow (by id or given whole) through its interface, as a child
        of this run (same services, cache, cancellation; its node events are forwarded
        with node ids ``<this node>/<child node>``); returns its interface outputs."""
        ...

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """Run CPU-heavy or blocking ``fn(*args)`` off the event loop."""
        ...

    def add_context_source(self, source: ContextSource) -> None: ...

    def set_evaluation(self, evaluation: Evaluation) -> None: ...


class NodeType(Generic[ConfigT]):
    """Base of every node type. Subclasses set the class attributes and ``run``; the
    config model is the type argument: ``class Echo(NodeType[EchoConfig])``."""

    type: ClassVar[str]
    display_name: ClassVar[str]
    category: ClassVar[str] = "General"
    description: ClassVar[str] = ""
    version: ClassVar[int] = 1
    idempotent: ClassVar[bool] = True
    streaming: ClassVar[bool] = False
    dynamic_slots: ClassVar[bool] = False
    reads_run_inputs: ClassVar[bool] = False
    """The node reads ``ctx.interface_inputs`` (GroupInput): they go into its cache key."""
    inputs: ClassVar[tuple[Slot, ...]] = ()
    outputs: ClassVar[tuple[Slot, ...]] = ()
    config_model: ClassVar[builtins.type[NodeConfig]] = NodeConfig
    """Taken from the type argument; set it by hand only on a class that has none."""
    _static_slots: ClassVar[NodeSlots | None] = None
    _defaults: ClassVar[dict[str, Any] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in cls.__dict__.get("__orig_bases__", ()):
            (arg, *_) = get_args(base) or (None,)
            if isinstance(arg, builtins.type) and issubclass(arg, NodeConfig):
                cls.config_model = arg

    def slots(self, node: WorkflowNode, env: SlotEnvironment) -> NodeSlots:
        """The node's slots; override when they depend on its config or the workflow
        (GroupInput's outputs are the workflow's ``interfaceInputs``)."""
        return self.static_slots()

    @classmethod
    def static_slots(cls) -> NodeSlots:
        """The declared slots, built once per class (every node of a type shares them)."""
        built = cls.__dict__.get("_static_slots")
        if built is None:
            built = NodeSlots(cls.inputs, cls.outputs)
            cls._static_slots = built
        return built

    def fingerprint(self, config: ConfigT, services: WorkflowServices) -> str | None:
        """What decides the output besides the inputs and the config, if anything: the
        model an LLM node calls, the file a sub-workflow node runs. It joins the node's
        cache key (asked once per run), so changing it re-runs the node."""
        return None

    def check_lazy(self, available: Mapping[str, Any], config: ConfigT) -> list[str]:
        """Names of lazy inputs still needed given the inputs computed so far.

        Called before ``run`` and again each time a requested lazy input arrives; the
        node runs once this returns an empty list. Default: no lazy input is needed.
        """
        return []

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: ConfigT
    ) -> dict[str, Any] | NodeExpansion:
        raise NotImplementedError

    @classmethod
    def config_names(cls) -> tuple[str, ...]:
        return tuple(cls.config_model.model_fields)

    @classmethod
    def parse_config(cls, config: Mapping[str, Any]) -> ConfigT:
        """The validated config of a node; raises ``pydantic.ValidationError``.

        A null value means "not set": the field's default applies, as it always has for
        files the canvas wrote when a field was cleared."""
        values = {k: v for k, v in config.items() if v is not None}
        return cast(ConfigT, cls.config_model.model_validate(values))

    @classmethod
    def lenient_config(cls, config: Mapping[str, Any]) -> ConfigT | None:
        """The config with each invalid field at its default, for ``slots``: they are
        worked out before the run, and a bad value elsewhere (validation reports it)
        should not hide the slots. None when a required field is missing or invalid."""
        try:
            return cls.parse_config(config)
        except ValidationError as exc:
            bad = {error["loc"][0] for error in exc.errors() if error["loc"]}
        try:
            return cls.parse_config({k: v for k, v in config.items() if k not in bad})
        except ValidationError:
            return None

    @classmethod
    def config_problems(cls, config: Mapping[str, Any]) -> list[tuple[str, str]]:
        """``(field path, reason)`` for every config value that breaks the config model."""
        try:
            cls.parse_config(config)
        except ValidationError as exc:
            known = ", ".join(cls.config_names()) or "none"
            return [_config_problem(error, known) for error in exc.errors()]
        return []

    @classmethod
    def config_defaults(cls) -> dict[str, Any]:
        """The default of every config field that has one (a fresh copy)."""
        defaults = cls.__dict__.get("_defaults")
        if defaults is None:
            defaults = {
                name: f.get_default(call_default_factory=True)
                for name, f in cls.config_model.model_fields.items()
                if not f.is_required()
            }
            cls._defaults = defaults
        return copy.deepcopy(defaults)

    @classmethod
    def config_schema(cls) -> dict[str, Any]:
        """The config model as the canvas and tools read it: a JSON Schema object with
        every ``$ref`` inlined."""
        schema = cls.config_model.model_json_schema()
        defs = schema.pop("$defs", {})
        schema.pop("title", None)
        inlined: dict[str, Any] = _inline_refs(schema, defs)
        inlined.setdefault("properties", {})
        inlined.setdefault("required", [])
        return inlined

    @classmethod
    def info(cls) -> NodeTypeInfo:
        return NodeTypeInfo(
            type=cls.type,
            display_name=cls.display_name,
            category=cls.category,
            description=cls.description,
            version=cls.version,
            idempotent=cls.idempotent,
            streaming=cls.streaming,
            dynamic_slots=cls.dynamic_slots,
            inputs=list(cls.inputs),
            outputs=list(cls.outputs),
            config_schema=cls.config_schema(),
        )


def _inline_refs(schema: Any, defs: Mapping[str, Any]) -> Any:
    """``schema`` with each ``#/$defs/Name`` replaced by the definition (keys beside the
    ``$ref`` win), so a renderer needs no reference lookup. Config models do not recurse."""
    if isinstance(schema, list):
        return [_inline_refs(item, defs) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _inline_refs(v, defs) for k, v in schema.items() if k != "$ref"}
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = _inline_refs(defs[ref.removeprefix("#/$defs/")], defs)
        out = {**target, **out}
    # pydantic wraps a described model field as ``allOf: [{$ref}]``.
    all_of = out.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
        out = {**all_of[0], **{k: v for k, v in out.items() if k != "allOf"}}
    return out


def _config_problem(error: ErrorDetails, known: str) -> tuple[str, str]:
    path = field_path(list(error["loc"]))
    value = error.get("input")
    ctx = error.get("ctx", {})
    kind = error["type"]
    if kind == "extra_forbidden":
        return path, f"unknown config field (known: {known})"
    if kind == "missing":
        return path, "required"
    if kind in ("greater_than_equal", "greater_than"):
        bound = ctx.get("ge", ctx.get("gt"))
        return path, f"{value!r} is below the minimum {bound!r}"
    if kind in ("less_than_equal", "less_than"):
        bound = ctx.get("le", ctx.get("lt"))
        return path, f"{value!r} is above the maximum {bound!r}"
    if kind == "literal_error":
        return path, f"{value!r} is not one of {ctx.get('expected', '')}"
    return path, f"{error['msg'][0].lower()}{error['msg'][1:]}, got {value!r}"
