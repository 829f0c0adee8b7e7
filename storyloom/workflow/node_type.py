"""What a node type declares, and what a running node may ask of the runner.

A node type is a class: typed input and output slots with descriptions, config fields
with defaults, bounds and suggestions (``ComboOption``), a version (part of the cache
key: bump it when the node's behaviour changes), whether it is idempotent (same inputs →
same outputs, so its output may be cached) and whether it streams. Its ``run`` receives
the input values and the config by name and returns its outputs by slot name.

An input left unconnected whose name is also a config field takes the config value, so a
value can be typed on the node or wired from elsewhere (ComfyUI's widget-to-input).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from storyloom.workflow.slot_types import ANY, BOOLEAN, FLOAT, INTEGER, OBJECT, STRING

# Suggestion is re-exported: node modules declare config suggestions with it.
from storyloom.workflow.workflow_file import Suggestion as Suggestion
from storyloom.workflow.workflow_file import Workflow, WorkflowNode

if TYPE_CHECKING:
    from storyloom.core.settings import Settings
    from storyloom.project.knowledge_service import KnowledgeService
    from storyloom.store.database import Database

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


Widget = Literal["text", "textarea", "number", "checkbox", "select", "json", "kb", "workflow"]


class ConfigField(_Model):
    """One config value, edited in the node's side panel."""

    name: str
    type: str = STRING
    description: str = ""
    default: Any = None
    required: bool = False
    minimum: float | None = None
    maximum: float | None = None
    suggestions: tuple[Suggestion, ...] = ()
    strict: bool = Field(
        default=False, description="With suggestions: only a suggested value is valid"
    )
    widget: Widget | None = Field(default=None, description="Editor hint; derived when unset")

    def editor(self) -> Widget:
        if self.widget:
            return self.widget
        if self.suggestions and self.strict:
            return "select"
        if self.type in (STRING, ANY):
            return "text"
        return _EDITORS.get(self.type, "json")


_EDITORS: dict[str, Widget] = {INTEGER: "number", FLOAT: "number", BOOLEAN: "checkbox"}


class ConfigFieldInfo(ConfigField):
    """A config field as the API sends it: the editor worked out, ``ComboOption`` marked."""

    match_categories: list[str] = Field(default_factory=list, alias="matchCategories")


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
    config: list[ConfigFieldInfo]


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


class EvaluationCheck(_Model):
    dimension: str
    passed: bool
    detail: str = ""


class Evaluation(_Model):
    decision: Literal["approve", "retry", "flag-human"]
    confidence: float = 1.0
    reason: str = ""
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


class NodeType:
    """Base class of every node type. Subclasses set the class attributes and ``run``."""

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
    config: ClassVar[tuple[ConfigField, ...]] = ()
    _static_slots: ClassVar[NodeSlots | None] = None
    _defaults: ClassVar[dict[str, Any] | None] = None

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

    def fingerprint(self, config: Mapping[str, Any], services: WorkflowServices) -> str | None:
        """What decides the output besides the inputs and the config, if anything: the
        model an LLM node calls, the file a sub-workflow node runs. It joins the node's
        cache key (asked once per run), so changing it re-runs the node."""
        return None

    def check_lazy(self, available: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
        """Names of lazy inputs still needed given the inputs computed so far.

        Called before ``run`` and again each time a requested lazy input arrives; the
        node runs once this returns an empty list. Default: no lazy input is needed.
        """
        return []

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: dict[str, Any]
    ) -> dict[str, Any] | NodeExpansion:
        raise NotImplementedError

    def config_field(self, name: str) -> ConfigField | None:
        return next((f for f in self.config if f.name == name), None)

    def config_with_defaults(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """``config`` over the declared defaults. Defaults are shared between nodes, so a
        node must not change its config values in place (nor its inputs)."""
        defaults = type(self).__dict__.get("_defaults")
        if defaults is None:
            defaults = {f.name: f.default for f in self.config}
            type(self)._defaults = defaults
        return {**defaults, **config}

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
            config=[
                ConfigFieldInfo(
                    **f.model_dump(exclude={"widget"}),
                    widget=f.editor(),
                    match_categories=["ComboOption"] if f.suggestions else [],
                )
                for f in cls.config
            ],
        )


def check_config(fields: Sequence[ConfigField], config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(field, reason)`` for every config value that breaks its declaration.

    Unknown names are reported too: a typo in a hand-written file would otherwise be a
    setting that silently does nothing.
    """
    problems: list[tuple[str, str]] = []
    known = {f.name: f for f in fields}
    for name in config:
        if name not in known:
            problems.append((name, f"unknown config field (known: {', '.join(known) or 'none'})"))
    for f in fields:
        value = config.get(f.name, f.default)
        if value is None:
            if f.required:
                problems.append((f.name, "required"))
            continue
        reason = _config_value_problem(f, value)
        if reason:
            problems.append((f.name, reason))
    return problems


def _config_value_problem(f: ConfigField, value: Any) -> str | None:
    numeric = f.type in (INTEGER, FLOAT)
    if f.type == INTEGER and (not isinstance(value, int) or isinstance(value, bool)):
        return f"expected an integer, got {value!r}"
    if f.type == FLOAT and (not isinstance(value, int | float) or isinstance(value, bool)):
        return f"expected a number, got {value!r}"
    if f.type == BOOLEAN and not isinstance(value, bool):
        return f"expected true or false, got {value!r}"
    if f.type == STRING and not isinstance(value, str):
        return f"expected text, got {value!r}"
    if f.type == OBJECT and not isinstance(value, dict):
        return f"expected an object, got {value!r}"
    if numeric and f.minimum is not None and value < f.minimum:
        return f"{value} is below the minimum {f.minimum:g}"
    if numeric and f.maximum is not None and value > f.maximum:
        return f"{value} is above the maximum {f.maximum:g}"
    if f.strict and f.suggestions and value not in [s.value for s in f.suggestions]:
        allowed = ", ".join(repr(s.value) for s in f.suggestions)
        return f"{value!r} is not one of {allowed}"
    return None
