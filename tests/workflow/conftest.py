"""Fixtures shared by the workflow tests: small node types that record what they did,
a registry holding them (and the real GroupInput/GroupOutput), a database, a runner.

The node types write into ``Probe`` (reset for every test): which nodes ran, in what
order things started and ended, and gates a test opens to let a node go on.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import pytest
from pydantic import Field

from storyloom.store.database import Database
from storyloom.workflow.node_history import NodeHistory
from storyloom.workflow.node_registry import NodeRegistry
from storyloom.workflow.node_type import (
    NodeConfig,
    NodeContext,
    NodeExpansion,
    NodeType,
    Slot,
    WorkflowServices,
)
from storyloom.workflow.nodes.interface_nodes import GroupInput, GroupOutput
from storyloom.workflow.runner import WorkflowRunner
from storyloom.workflow.slot_types import ANY, BOOLEAN, FLOAT, INTEGER, OBJECT, STRING
from storyloom.workflow.workflow_file import Workflow
from storyloom.workflow.workflow_graph import WorkflowNotFound

GATE_TIMEOUT_S = 10.0
"""Only a guard against a test hanging forever; no test depends on how long anything takes."""


@dataclass
class Probe:
    ran: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    counter: itertools.count[int] = field(default_factory=itertools.count)
    gates: dict[str, asyncio.Event] = field(default_factory=dict)

    def gate(self, name: str) -> asyncio.Event:
        if name not in self.gates:
            self.gates[name] = asyncio.Event()
        return self.gates[name]

    async def wait(self, name: str) -> None:
        await asyncio.wait_for(self.gate(name).wait(), GATE_TIMEOUT_S)


PROBE = Probe()


C = TypeVar("C", bound=NodeConfig)


class _Recorded(NodeType[C], Generic[C]):
    category: ClassVar[str] = "Test"

    def mark(self, ctx: NodeContext) -> None:
        PROBE.ran.append(ctx.node_id)


class TextConfig(NodeConfig):
    text: str = ""


class TextNode(_Recorded[TextConfig]):
    type: ClassVar[str] = "test:Text"
    display_name: ClassVar[str] = "Text"
    outputs: ClassVar[tuple[Slot, ...]] = (Slot(name="text", type=STRING),)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: TextConfig
    ) -> dict[str, Any] | NodeExpansion:
        self.mark(ctx)
        return {"text": config.text}


class NumberConfig(NodeConfig):
    value: int = 0


class NumberNode(_Recorded[NumberConfig]):
    type: ClassVar[str] = "test:Number"
    display_name: ClassVar[str] = "Number"
    outputs: ClassVar[tuple[Slot, ...]] = (Slot(name="value", type=INTEGER),)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: NumberConfig
    ) -> dict[str, Any] | NodeExpansion:
        self.mark(ctx)
        return {"value": config.value}


class JoinConfig(NodeConfig):
    sep: str = "+"


class JoinNode(_Recorded[JoinConfig]):
    """``a + sep + b``; ``b`` may be left unconnected and typed into the config."""

    type: ClassVar[str] = "test:Join"
    display_name: ClassVar[str] = "Join"
    inputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="a", type=STRING),
        Slot(name="b", type=STRING, required=False, default="B"),
    )
    outputs: ClassVar[tuple[Slot, ...]] = (Slot(name="text", type=STRING),)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: JoinConfig
    ) -> dict[str, Any] | NodeExpansion:
        self.mark(ctx)
        return {"text": f"{inputs['a']}{config.sep}{inputs['b']}"}


class UpperNode(_Recorded[NodeConfig]):
    type: ClassVar[str] = "test:Upper"
    display_name: ClassVar[str] = "Upper"
    inputs: ClassVar[tuple[Slot, ...]] = (Slot(name="text", type=STRING),)
    outputs: ClassVar[tuple[Slot, ...]] = (Slot(name="text", type=STRING),)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: NodeConfig
    ) -> dict[str, Any] | NodeExpansion:
        self.mark(ctx)
        return {"text": inputs["text"].upper()}


class AppendConfig(NodeConfig):
    suffix: str = "a"


class AppendNode(NodeType[AppendConfig]):
    """``text + suffix``: the body of the sub-workflow and iteration tests."""

    type: ClassVar[str] = "test:Append"
    display_name: ClassVar[str] = "Append"
    inputs: ClassVar[tuple[Slot, ...]] = (Slot(name="text", type=STRING),)
    outputs: ClassVar[tuple[Slot, ...]] = (Slot(name="text", type=STRING),)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: AppendConfig
    ) -> dict[str, Any] | NodeExpansion:
        return {"text": inputs["text"] + config.suffix}


class ShowNode(_Recorded[NodeConfig]):
    """Reports the Python type of what arrived in each slot (checks conversions)."""

    type: ClassVar[str] = "test:Show"
    display_name: ClassVar[str] = "Show"
    inputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="number", type=FLOAT, required=False),
        Slot(name="text", type=STRING, required=False),
    )
    outputs: ClassVar[tuple[Slot, ...]] = (Slot(name="seen", type=OBJECT),)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: NodeConfig
    ) -> dict[str, Any] | NodeExpansion:
        self.mark(ctx)
        return {"seen": {k: [type(v).__name__, v] for k, v in sorted(inputs.items())}}


class CounterNode(_Recorded[NodeConfig]):
    """Not idempotent: gives a new number every time it runs."""

    type: ClassVar[str] = "test:Counter"
    display_name: ClassVar[str] = "Counter"
    idempotent: ClassVar[bool] = False
    outputs: ClassVar[tuple[Slot, ...]] = (Slot(name="value", type=INTEGER),)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: NodeConfig
    ) -> dict[str, Any] | NodeExpansion:
        self.mark(ctx)
        return {"value": next(PROBE.counter)}


class Opaque:
    """A value JSON cannot express; its text is the same whatever it holds."""

    def __init__(self, label: str) -> None:
        self.label = label

    def __str__(self) -> str:
        return "opaque"


class OpaqueConfig(NodeConfig):
    label: str = "a"


class OpaqueNode(_Recorded[OpaqueConfig]):
    type: ClassVar[str] = "test:Opaque"
    display_name: ClassVar[str] = "Opaque"
    idempotent: ClassVar[bool] = False
    outputs: ClassVar[tuple[Slot, ...]] = (Slot(name="value", type=ANY),)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: OpaqueConfig
    ) -> dict[str, Any] | NodeExpansion:
        self.mark(ctx)
        return {"value": Opaque(config.label)}


class FailConfig(NodeConfig):
    message: str = "boom"


class FailNode(_Recorded[FailConfig]):
    type: ClassVar[str] = "test:Fail"
    display_name: ClassVar[str] = "Fail"
    inputs: ClassVar[tuple[Slot, ...]] = (Slot(name="text", type=ANY, required=False),)
    outputs: ClassVar[tuple[Slot, ...]] = (Slot(name="text", type=STRING),)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: FailConfig
    ) -> dict[str, Any] | NodeExpansion:
        self.mark(ctx)
        raise RuntimeError(config.message)


class RendezvousConfig(NodeConfig):
    name: str
    peer: str


class RendezvousNode(_Recorded[RendezvousConfig]):
    """Starts, then waits until its ``peer`` has started too: only completes when the
    two run at the same time."""

    type: ClassVar[str] = "test:Rendezvous"
    display_name: ClassVar[str] = "Rendezvous"
    inputs: ClassVar[tuple[Slot, ...]] = (Slot(name="text", type=STRING, required=False),)
    outputs: ClassVar[tuple[Slot, ...]] = (Slot(name="text", type=STRING),)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: RendezvousConfig
    ) -> dict[str, Any] | NodeExpansion:
        self.mark(ctx)
        PROBE.log.append(f"start {config.name}")
        PROBE.gate(f"started {config.name}").set()
        await PROBE.wait(f"started {config.peer}")
        PROBE.log.append(f"end {config.name}")
        return {"text": config.name}


class StreamConfig(NodeConfig):
    chunks: list[str] = Field(default_factory=lambda: ["a", "b"])
    hold: bool = False


class StreamNode(_Recorded[StreamConfig]):
    """Streams its ``chunks``; with ``hold`` it then waits for the gate ``release``."""

    type: ClassVar[str] = "test:Stream"
    display_name: ClassVar[str] = "Stream"
    streaming: ClassVar[bool] = True
    inputs: ClassVar[tuple[Slot, ...]] = (Slot(name="text", type=STRING, required=False),)
    outputs: ClassVar[tuple[Slot, ...]] = (Slot(name="text", type=STRING),)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: StreamConfig
    ) -> dict[str, Any] | NodeExpansion:
        self.mark(ctx)
        for chunk in config.chunks:
            await ctx.emit(chunk)
        if config.hold:
            PROBE.gate("streamed").set()
            await PROBE.wait("release")
        return {"text": "".join(config.chunks)}


class SwitchConfig(NodeConfig):
    on: bool = True


class SwitchNode(_Recorded[SwitchConfig]):
    """Passes on ``yes`` or ``no``; only the chosen one is computed."""

    type: ClassVar[str] = "test:Switch"
    display_name: ClassVar[str] = "Switch"
    inputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="on", type=BOOLEAN, required=False),
        Slot(name="yes", type=ANY, required=False, lazy=True),
        Slot(name="no", type=ANY, required=False, lazy=True),
    )
    outputs: ClassVar[tuple[Slot, ...]] = (Slot(name="value", type=ANY),)

    def check_lazy(self, available: Mapping[str, Any], config: SwitchConfig) -> list[str]:
        chosen = "yes" if available.get("on") else "no"
        return [] if chosen in available else [chosen]

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: SwitchConfig
    ) -> dict[str, Any] | NodeExpansion:
        self.mark(ctx)
        return {"value": inputs["yes"] if inputs["on"] else inputs["no"]}


class ShoutNode(_Recorded[NodeConfig]):
    """Expands into ``Upper → Join(b="!")`` on its input."""

    type: ClassVar[str] = "test:Shout"
    display_name: ClassVar[str] = "Shout"
    inputs: ClassVar[tuple[Slot, ...]] = (Slot(name="text", type=STRING),)
    outputs: ClassVar[tuple[Slot, ...]] = (Slot(name="text", type=STRING),)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: NodeConfig
    ) -> dict[str, Any] | NodeExpansion:
        self.mark(ctx)
        inner = build_workflow(
            "shout",
            {"up": ("test:Upper", {}), "join": ("test:Join", {"sep": ""})},
            ["up.text -> join.a"],
        )
        return NodeExpansion(
            workflow=inner,
            outputs={"text": ("join", "text")},
            inputs={("up", "text"): inputs["text"], ("join", "b"): "!"},
        )


class AskNode(_Recorded[NodeConfig]):
    """Asks a human about its input: approve passes it on, edit replaces it, retry
    re-runs what feeds it and passes on the fresh value."""

    type: ClassVar[str] = "test:Ask"
    display_name: ClassVar[str] = "Ask"
    idempotent: ClassVar[bool] = False
    inputs: ClassVar[tuple[Slot, ...]] = (Slot(name="text", type=ANY),)
    outputs: ClassVar[tuple[Slot, ...]] = (Slot(name="text", type=ANY),)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: NodeConfig
    ) -> dict[str, Any] | NodeExpansion:
        self.mark(ctx)
        text = inputs["text"]
        while True:
            decision = await ctx.request_human("check this", str(text))
            if decision.decision == "retry":
                text = (await ctx.rerun_inputs())["text"]
                continue
            if decision.decision == "edit":
                text = decision.edited_output
            return {"text": text}


class CallConfig(NodeConfig):
    workflow: str


class CallNode(_Recorded[CallConfig]):
    """Runs the workflow named in its config with ``{"text": text}``; gives its outputs."""

    type: ClassVar[str] = "test:Call"
    display_name: ClassVar[str] = "Call"
    inputs: ClassVar[tuple[Slot, ...]] = (Slot(name="text", type=STRING, required=False),)
    outputs: ClassVar[tuple[Slot, ...]] = (Slot(name="result", type=OBJECT),)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: CallConfig
    ) -> dict[str, Any] | NodeExpansion:
        self.mark(ctx)
        given = {"text": inputs["text"]} if inputs.get("text") is not None else {}
        return {"result": await ctx.run_workflow(config.workflow, given)}


class IterateConfig(NodeConfig):
    times: int = 2


class IterateNode(_Recorded[IterateConfig]):
    type: ClassVar[str] = "test:Iterate"
    display_name: ClassVar[str] = "Iterate"
    outputs: ClassVar[tuple[Slot, ...]] = (Slot(name="value", type=INTEGER),)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: IterateConfig
    ) -> dict[str, Any] | NodeExpansion:
        self.mark(ctx)
        for i in range(config.times):
            ctx.report_iteration(i + 1, config.times, "recursive")
        return {"value": config.times}


TEST_NODE_TYPES: tuple[type[NodeType], ...] = (
    TextNode,
    NumberNode,
    JoinNode,
    UpperNode,
    ShowNode,
    CounterNode,
    OpaqueNode,
    FailNode,
    RendezvousNode,
    StreamNode,
    SwitchNode,
    ShoutNode,
    AskNode,
    CallNode,
    IterateNode,
)


def build_workflow(
    workflow_id: str,
    nodes: Mapping[str, tuple[str, dict[str, Any]]],
    edges: Sequence[str] = (),
    **extra: Any,
) -> Workflow:
    """A workflow from ``{id: (type, config)}`` and edges written ``"a.out -> b.in"``."""
    parsed = []
    for edge in edges:
        left, right = (part.strip() for part in edge.split("->"))
        source, source_slot = left.split(".")
        target, target_slot = right.split(".")
        parsed.append(
            {
                "source": source,
                "sourceSlot": source_slot,
                "target": target,
                "targetSlot": target_slot,
            }
        )
    return Workflow.model_validate(
        {
            "id": workflow_id,
            "nodes": [
                {"id": node_id, "type": node_type, "config": dict(config)}
                for node_id, (node_type, config) in nodes.items()
            ],
            "edges": parsed,
            **extra,
        }
    )


class BuildWorkflow(Protocol):
    def __call__(
        self,
        workflow_id: str,
        nodes: Mapping[str, tuple[str, dict[str, Any]]],
        edges: Sequence[str] = ...,
        **extra: Any,
    ) -> Workflow: ...


@pytest.fixture
def probe() -> Iterator[Probe]:
    PROBE.ran.clear()
    PROBE.log.clear()
    PROBE.gates.clear()
    PROBE.counter = itertools.count()
    yield PROBE


@pytest.fixture
def make_workflow() -> BuildWorkflow:
    return build_workflow


@pytest.fixture
def registry() -> NodeRegistry:
    """A fresh registry: the test node types and the real GroupInput / GroupOutput."""
    return NodeRegistry([GroupInput, GroupOutput, *TEST_NODE_TYPES])


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "db" / "storyloom.sqlite3")
    yield database
    database.close()


@pytest.fixture
def history(db: Database) -> NodeHistory:
    return NodeHistory(db)


@pytest.fixture
def library() -> dict[str, Workflow]:
    """Workflows a run may load by id (``services.workflows``)."""
    return {}


@pytest.fixture
def services(library: dict[str, Workflow]) -> WorkflowServices:
    def load(workflow_id: str) -> Workflow:
        if workflow_id not in library:
            raise WorkflowNotFound(f"no workflow {workflow_id!r}")
        return library[workflow_id]

    return WorkflowServices(workflows=load)


@pytest.fixture
def runner(
    registry: NodeRegistry, services: WorkflowServices, history: NodeHistory, probe: Probe
) -> WorkflowRunner:
    return WorkflowRunner(registry, services, history=history)
