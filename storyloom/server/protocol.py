"""The WebSocket message envelope of seed 002: every message is ``{"type": "...", ...}``.

Only the messages the server handles today are modelled; later layers add theirs to the
unions. Parsing goes through one ``TypeAdapter`` so an unknown or malformed message gets a
``status: error`` reply naming what was wrong instead of closing the socket.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from storyloom.core.errors import FileFormatError
from storyloom.server.api_errors import Problem
from storyloom.server.workflow_service import WorkflowEntry
from storyloom.tools.approvals import PendingApproval
from storyloom.workflow.agent_host import ApprovalDecision
from storyloom.workflow.events import AnyRunEvent
from storyloom.workflow.validation import WorkflowProblem
from storyloom.workflow.workflow_file import Workflow, WorkflowEdge, WorkflowNode
from storyloom.writing.curation import CurationProgress, OutputChecked, ProfileUpdated


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class StatusMessage(_Message):
    """Server → browser: the connection's state (``connected`` / ``busy`` / ``error``)."""

    type: Literal["status"] = "status"
    status: Literal["connected", "busy", "error"]
    message: str | None = None


class EmbeddingProgressMessage(_Message):
    """Server → browser: how far the background embedding of one knowledge base is."""

    type: Literal["knowledge:embedding-progress"] = "knowledge:embedding-progress"
    kb_id: str = Field(alias="kbId")
    model_id: str = Field(alias="modelId")
    state: Literal["queued", "running", "done", "failed", "cancelled"]
    done: int
    total: int
    error: str | None = None


class ConnectMessage(_Message):
    """Browser → server: open a project (the id is checked once projects exist)."""

    type: Literal["connect"]
    project_id: str = Field(alias="projectId")


class DisconnectMessage(_Message):
    type: Literal["disconnect"]


# -- workflows (seed 002 lines ~452-560) ----------------------------------------------
# The browser never sends an API key with a run (seed 002's ``apiConfig``): keys stay in
# settings.json on the server (docs/decisions.md), so these models forbid unknown fields.


class WorkflowSaveMessage(_Message):
    """Browser → server: save the workflow (even with problems); reply ``workflow:saved``."""

    type: Literal["workflow:save"]
    workflow: Workflow


class WorkflowLoadMessage(_Message):
    """Browser → server: reply ``workflow:data``."""

    type: Literal["workflow:load"]
    workflow_id: str = Field(alias="workflowId")


class WorkflowListRequest(_Message):
    """Browser → server: reply ``workflow:list`` with the project's workflows."""

    type: Literal["workflow:list"]


class WorkflowRunMessage(_Message):
    """Browser → server: start a run; reply ``workflow:run-accepted`` or ``workflow:invalid``.

    ``workflow`` runs that unsaved graph instead of the file (its id must be ``workflowId``);
    ``outputs`` are the node ids wanted (default: GroupOutput nodes, else the sinks).
    """

    type: Literal["workflow:run"]
    workflow_id: str = Field(alias="workflowId")
    inputs: dict[str, Any] = Field(default_factory=dict)
    outputs: list[str] | None = None
    workflow: Workflow | None = None


class WorkflowCancelMessage(_Message):
    """Browser → server: cancel that run, or every active run when ``runId`` is absent."""

    type: Literal["workflow:cancel"]
    run_id: str | None = Field(default=None, alias="runId")


class HumanDecisionMessage(_Message):
    """Browser → server: answer ``node:needs-human``; without ``runId`` the active run where
    ``nodeId`` waits."""

    type: Literal["human:decision"]
    run_id: str | None = Field(default=None, alias="runId")
    node_id: str = Field(alias="nodeId")
    decision: Literal["approve", "retry", "edit"]
    edited_output: str | None = Field(default=None, alias="editedOutput")
    choice: int | None = None


class WorkflowAttachMessage(_Message):
    """Browser → server: send me the run's events after ``afterSeq`` in order, then its live
    events (a reloaded page re-attaching to a run it had been watching)."""

    type: Literal["workflow:attach"]
    run_id: str = Field(alias="runId")
    after_seq: int = Field(default=0, ge=0, alias="afterSeq")


class WorkflowSavedMessage(_Message):
    type: Literal["workflow:saved"] = "workflow:saved"
    workflow_id: str = Field(alias="workflowId")
    problems: list[WorkflowProblem]


class WorkflowDataMessage(_Message):
    type: Literal["workflow:data"] = "workflow:data"
    workflow: Workflow
    problems: list[WorkflowProblem]


class BrokenWorkflowFile(_Message):
    """A file in ``workflows/`` that does not load, with what is wrong in it."""

    file: str
    problems: list[Problem]

    @classmethod
    def of(cls, error: FileFormatError) -> BrokenWorkflowFile:
        problems = [Problem(field=p.field, reason=p.reason) for p in error.problems]
        return cls(file=str(error.path), problems=problems)


class WorkflowListMessage(_Message):
    type: Literal["workflow:list"] = "workflow:list"
    workflows: list[WorkflowEntry]
    broken: list[BrokenWorkflowFile] = Field(default_factory=list)


class WorkflowRunAcceptedMessage(_Message):
    type: Literal["workflow:run-accepted"] = "workflow:run-accepted"
    run_id: str = Field(alias="runId")
    workflow_id: str = Field(alias="workflowId")


class WorkflowInvalidMessage(_Message):
    """Server → browser: the run was refused, nothing started; every problem is listed."""

    type: Literal["workflow:invalid"] = "workflow:invalid"
    workflow_id: str = Field(alias="workflowId")
    problems: list[WorkflowProblem]


# -- tool approvals ---------------------------------------------------------------------


class ToolApprovalNeededMessage(_Message):
    """Server → browser (every tab): a tool call waits for a person (an ``ask`` rule);
    answer with ``tool:approval`` (or ``POST /api/tools/approvals/{id}``)."""

    type: Literal["tool:approval-needed"] = "tool:approval-needed"
    approval: PendingApproval


class ToolApprovalResolvedMessage(_Message):
    """Server → browser (every tab): the approval was answered; tabs showing it drop it."""

    type: Literal["tool:approval-resolved"] = "tool:approval-resolved"
    id: str
    decision: ApprovalDecision


class ToolApprovalMessage(_Message):
    """Browser → server: answer a ``tool:approval-needed``."""

    type: Literal["tool:approval"]
    id: str = Field(min_length=1)
    decision: ApprovalDecision


# -- the writing studio (seed 002: curation and Role B) ------------------------------------


class OutputPersistMessage(_Message):
    """Browser → server: keep what node ``nodeId`` wrote in run ``runId`` as chapter
    ``chapter`` of book ``bookId`` (its ``slot`` output, default ``text``); reply
    ``output:persisted``. Curation follows in the background (``curation:progress``)."""

    type: Literal["output:persist"]
    run_id: str = Field(alias="runId", min_length=1, max_length=200)
    node_id: str = Field(alias="nodeId", min_length=1, max_length=200)
    book_id: str = Field(alias="bookId", min_length=1, max_length=200)
    chapter: int = Field(ge=1, le=1_000_000)
    slot: str | None = Field(default=None, max_length=200)
    tags: list[str] = Field(default_factory=list, max_length=100)


class OutputDeleteMessage(_Message):
    """Browser → server: forget a kept output and what its curation wrote; reply
    ``output:deleted``."""

    type: Literal["output:delete"]
    output_id: str = Field(alias="outputId", min_length=1, max_length=200)


class BuildRequestMessage(_Message):
    """Browser → server: ask Role B for a workflow change; reply ``build:suggestion``."""

    type: Literal["build:request"]
    intent: str = Field(min_length=1, max_length=20_000)
    current_workflow: str | None = Field(default=None, alias="currentWorkflow", max_length=200)


class BuildAcceptMessage(_Message):
    """Browser → server: apply a suggestion (with the author's changes); reply
    ``build:applied``."""

    type: Literal["build:accept"]
    suggestion_id: str = Field(alias="suggestionId", min_length=1, max_length=200)
    modifications: str | None = Field(default=None, max_length=20_000)


class BuildRejectMessage(_Message):
    """Browser → server: drop a suggestion, nothing changes; reply ``build:rejected``."""

    type: Literal["build:reject"]
    suggestion_id: str = Field(alias="suggestionId", min_length=1, max_length=200)
    reason: str | None = Field(default=None, max_length=20_000)


class OutputPersistedMessage(_Message):
    """Server → browser: the output is stored (``created`` false: it was already)."""

    type: Literal["output:persisted"] = "output:persisted"
    output_id: str = Field(alias="outputId")
    run_id: str | None = Field(default=None, alias="runId")
    node_id: str | None = Field(default=None, alias="nodeId")
    book_id: str = Field(alias="bookId")
    chapter: int
    created: bool


class OutputDeletedMessage(_Message):
    type: Literal["output:deleted"] = "output:deleted"
    output_id: str = Field(alias="outputId")


class BuildSuggestionMessage(_Message):
    """Server → browser: Role B's proposal, shown as a diff; nothing changed yet."""

    type: Literal["build:suggestion"] = "build:suggestion"
    suggestion_id: str = Field(alias="suggestionId")
    workflow_id: str = Field(alias="workflowId")
    nodes: list[WorkflowNode]
    edges: list[WorkflowEdge]
    explanation: str


class BuildAppliedMessage(_Message):
    type: Literal["build:applied"] = "build:applied"
    suggestion_id: str = Field(alias="suggestionId")
    workflow_id: str = Field(alias="workflowId")


class BuildRejectedMessage(_Message):
    type: Literal["build:rejected"] = "build:rejected"
    suggestion_id: str = Field(alias="suggestionId")


ClientMessage = Annotated[
    ConnectMessage
    | DisconnectMessage
    | WorkflowSaveMessage
    | WorkflowLoadMessage
    | WorkflowListRequest
    | WorkflowRunMessage
    | WorkflowCancelMessage
    | HumanDecisionMessage
    | WorkflowAttachMessage
    | ToolApprovalMessage
    | OutputPersistMessage
    | OutputDeleteMessage
    | BuildRequestMessage
    | BuildAcceptMessage
    | BuildRejectMessage,
    Field(discriminator="type"),
]
client_message_adapter: TypeAdapter[ClientMessage] = TypeAdapter(ClientMessage)
ServerMessage = (
    StatusMessage
    | EmbeddingProgressMessage
    | WorkflowSavedMessage
    | WorkflowDataMessage
    | WorkflowListMessage
    | WorkflowRunAcceptedMessage
    | WorkflowInvalidMessage
    | ToolApprovalNeededMessage
    | ToolApprovalResolvedMessage
    | OutputPersistedMessage
    | OutputDeletedMessage
    | BuildSuggestionMessage
    | BuildAppliedMessage
    | BuildRejectedMessage
    | CurationProgress
    | ProfileUpdated
    | OutputChecked
    | AnyRunEvent
)
