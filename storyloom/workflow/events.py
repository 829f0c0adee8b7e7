"""What a run reports, named as seed 002's WebSocket protocol (``node:started`` …).

Every event carries the run's id and a sequence number counting from 1 within the run,
so a browser that reconnects asks for the events after the last one it saw. Values in
``outputs`` are JSON (pydantic models dumped); ``output`` is the text preview seed 002
sends: the single string output as it is, otherwise the outputs as JSON.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from storyloom.workflow.node_type import ContextSource, Evaluation


class _Event(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    run_id: str = Field(alias="runId")
    seq: int = 0


class WorkflowStarted(_Event):
    type: Literal["workflow:started"] = "workflow:started"
    workflow_id: str = Field(alias="workflowId")
    node_ids: list[str] = Field(alias="nodeIds", description="Nodes this run will compute")


class NodeStarted(_Event):
    type: Literal["node:started"] = "node:started"
    node_id: str = Field(alias="nodeId")
    node_name: str = Field(alias="nodeName")
    node_type: str = Field(alias="nodeType")


class NodeStreaming(_Event):
    type: Literal["node:streaming"] = "node:streaming"
    node_id: str = Field(alias="nodeId")
    chunk: str


class NodeCompleted(_Event):
    type: Literal["node:completed"] = "node:completed"
    node_id: str = Field(alias="nodeId")
    output: str
    outputs: dict[str, Any]
    evaluation: Evaluation | None = None
    context_sources: list[ContextSource] = Field(default_factory=list, alias="contextSources")
    history_id: int | None = Field(default=None, alias="historyId")
    duration_ms: float = Field(default=0.0, alias="durationMs")


class NodeCached(_Event):
    """The node did not run: its output came from the cache or from a frozen pin."""

    type: Literal["node:cached"] = "node:cached"
    node_id: str = Field(alias="nodeId")
    source: Literal["cache", "frozen"]
    output: str
    outputs: dict[str, Any]
    history_id: int | None = Field(default=None, alias="historyId")


class NodeNeedsHuman(_Event):
    type: Literal["node:needs-human"] = "node:needs-human"
    node_id: str = Field(alias="nodeId")
    reason: str
    output_preview: str = Field(alias="outputPreview")
    options: list[Literal["approve", "retry", "edit"]]
    candidates: list[str] | None = None


class NodeIteration(_Event):
    type: Literal["node:iteration"] = "node:iteration"
    node_id: str = Field(alias="nodeId")
    iteration: int
    total_iterations: int = Field(alias="totalIterations")
    # Seed 002 calls this `type`, which the envelope already uses for the event name.
    kind: Literal["recursive", "evolutionary"] = Field(alias="iterationType")
    candidate_count: int | None = Field(default=None, alias="candidateCount")


class NodeToolStep(_Event):
    """A tool call of an agent turn ran (or was denied, or skipped): the run log shows it
    under its node. ``step`` is a :class:`~storyloom.workflow.agent_host.ToolStep` as JSON."""

    type: Literal["node:tool-step"] = "node:tool-step"
    node_id: str = Field(alias="nodeId")
    step: dict[str, Any]


class NodeError(_Event):
    """The node raised; ``skipped`` lists the downstream nodes that will not run."""

    type: Literal["node:error"] = "node:error"
    node_id: str = Field(alias="nodeId")
    error: str
    skipped: list[str] = Field(default_factory=list)


class NodeCancelled(_Event):
    type: Literal["node:cancelled"] = "node:cancelled"
    node_id: str = Field(alias="nodeId")
    partial_output: str = Field(default="", alias="partialOutput")


class NodeOutput(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    node_id: str = Field(alias="nodeId")
    output: str


class WorkflowCompleted(_Event):
    type: Literal["workflow:completed"] = "workflow:completed"
    outputs: list[NodeOutput]
    interface_outputs: dict[str, Any] = Field(default_factory=dict, alias="interfaceOutputs")


class WorkflowError(_Event):
    """The run ended without every requested output: a node failed, or it was cancelled.

    Outputs that were completed are listed all the same.
    """

    type: Literal["workflow:error"] = "workflow:error"
    error: str
    node_id: str | None = Field(default=None, alias="nodeId")
    cancelled: bool = False
    outputs: list[NodeOutput] = Field(default_factory=list)


AnyRunEvent = (
    WorkflowStarted
    | NodeStarted
    | NodeStreaming
    | NodeCompleted
    | NodeCached
    | NodeNeedsHuman
    | NodeIteration
    | NodeToolStep
    | NodeError
    | NodeCancelled
    | WorkflowCompleted
    | WorkflowError
)
RunEvent = Annotated[AnyRunEvent, Field(discriminator="type")]
run_event_adapter: TypeAdapter[RunEvent] = TypeAdapter(RunEvent)


def event_json(event: BaseModel) -> dict[str, Any]:
    return event.model_dump(mode="json", by_alias=True, exclude_none=True)
