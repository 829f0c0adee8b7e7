"""``/api/workflows`` and ``/api/workflow-runs``: the canvas's workflows, runs and history.

A save writes the file even when the graph has problems (a half-built graph is saved as
it is) and answers the problems beside it; a run refuses an invalid graph with every
problem and starts nothing. Run events stream over the WebSocket; ``GET`` on a run answers
the same events for a client that polls or missed some.

The library includes the built-in workflows (the chat pipeline ``chat-default``), marked
``builtin`` while the project has no file of that id; a SillyTavern chat-completion preset
imports as a pipeline workflow file.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, File, Form, Query, Request, Response, UploadFile
from pydantic import BaseModel, ConfigDict, Field

from storyloom.core.errors import Conflict, FieldProblem, InvalidInput, NotFound
from storyloom.server.api_errors import ErrorBody, WorkflowInvalidBody, error_responses
from storyloom.server.file_transfer import read_named_upload
from storyloom.server.protocol import BrokenWorkflowFile
from storyloom.server.state import server_state
from storyloom.server.workflow_runs import RunInfo, RunManager, RunStatus
from storyloom.server.workflow_service import (
    WorkflowEntry,
    WorkflowService,
    read_preset_json,
    workflow_not_found,
)
from storyloom.workflow.events import RunEvent
from storyloom.workflow.node_history import HistoryEntry
from storyloom.workflow.node_type import HumanDecision, NodeSlots, NodeTypeInfo, Slot
from storyloom.workflow.validation import WorkflowProblem
from storyloom.workflow.workflow_file import Workflow

router = APIRouter(tags=["workflows"])
_ERRORS = error_responses(404, 422)
MAX_PRESET_BYTES = 10 * 1024 * 1024


def _service(request: Request) -> WorkflowService:
    return server_state(request).workflows


def _runs(request: Request) -> RunManager:
    return server_state(request).workflow_runs


class _Body(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")


# -- the library --------------------------------------------------------------------------


class WorkflowList(BaseModel):
    workflows: list[WorkflowEntry] = Field(
        description="The project's files and the built-ins it has no file for, by id"
    )
    broken: list[BrokenWorkflowFile] = Field(description="Files in workflows/ that do not load")


@router.get("/api/workflows", response_model=WorkflowList)
def list_workflows(request: Request) -> WorkflowList:
    entries, broken = _service(request).library.entries()
    return WorkflowList(workflows=entries, broken=[BrokenWorkflowFile.of(e) for e in broken])


@router.get("/api/workflows/node-types", response_model=list[NodeTypeInfo])
def node_types(request: Request) -> list[NodeTypeInfo]:
    """Every registered node type (built-in and plugins), by category then name."""
    infos = _service(request).registry.infos()
    return sorted(infos, key=lambda i: (i.category, i.display_name, i.type))


@router.get("/api/workflows/schema")
def get_schema(request: Request) -> dict[str, Any]:
    """JSON Schema of a workflow file, node config by node type."""
    return _service(request).registry.workflow_schema()


class ResolvedSlots(BaseModel):
    inputs: list[Slot]
    outputs: list[Slot]

    @classmethod
    def of(cls, slots: NodeSlots) -> ResolvedSlots:
        return cls(inputs=list(slots.inputs), outputs=list(slots.outputs))


class ValidationReport(BaseModel):
    problems: list[WorkflowProblem]
    slots: dict[str, ResolvedSlots] = Field(
        description="By node id, the slots of each node whose type works them out from its "
        "config (dynamicSlots: a sub-workflow's interface); a node whose slots could not be "
        "worked out is left out and has a problem"
    )


def _report(
    service: WorkflowService, workflow: Workflow
) -> tuple[list[WorkflowProblem], dict[str, ResolvedSlots]]:
    problems, slots = service.check(workflow)
    return problems, {node_id: ResolvedSlots.of(s) for node_id, s in slots.items()}


@router.post("/api/workflows/validate", response_model=ValidationReport, responses=_ERRORS)
def validate(request: Request, body: Workflow) -> ValidationReport:
    """Every problem of the graph (unknown types, missing inputs, type mismatches, cycles…)
    and the slots of its dynamic-slot nodes."""
    problems, slots = _report(_service(request), body)
    return ValidationReport(problems=problems, slots=slots)


@router.post(
    "/api/workflows/import-st-preset",
    status_code=201,
    response_model=Workflow,
    responses=error_responses(409, 413, 422),
)
async def import_st_preset(
    request: Request,
    file: Annotated[UploadFile, File(description="A SillyTavern chat-completion preset (.json)")],
    workflow_id: Annotated[
        str | None,
        Form(alias="id", description="Workflow id (default: `st-<file name>`)"),
    ] = None,
    name: Annotated[str | None, Form(description="Workflow name (default: the file name)")] = None,
    overwrite: Annotated[
        bool, Form(description="Replace a workflow of that id (else 409)")
    ] = False,
) -> Workflow:
    """Import a SillyTavern chat-completion preset as a chat pipeline workflow saved in the
    project's ``workflows/``; a conversation uses it when its ``settings.pipeline`` names
    the id. A bad file is a 422 naming the file and each field; nothing is written."""
    file_name, data = await read_named_upload(request, file, MAX_PRESET_BYTES)
    workflow, _ = _service(request).library.import_st_preset(
        read_preset_json(data, file_name),
        file_name=file_name,
        workflow_id=workflow_id or None,
        name=name or None,
        overwrite=overwrite,
    )
    return workflow


@router.get("/api/workflows/{workflow_id}", response_model=Workflow, responses=_ERRORS)
def get_workflow(request: Request, workflow_id: str) -> Workflow:
    """The file as stored (unknown fields included), or the built-in workflow of that id
    when the project has no file for it; 422 lists what is wrong with a broken file."""
    return _service(request).library.require(workflow_id)


class SavedWorkflow(ValidationReport):
    workflow: Workflow
    problems: list[WorkflowProblem] = Field(
        description="What keeps it from running; it is saved all the same"
    )


@router.put("/api/workflows/{workflow_id}", response_model=SavedWorkflow, responses=_ERRORS)
def put_workflow(request: Request, workflow_id: str, body: Workflow) -> SavedWorkflow:
    service = _service(request)
    if body.id != workflow_id:
        problem = FieldProblem("id", f"must be {workflow_id!r}, the id in the URL")
        raise InvalidInput.of("workflow", [problem])
    service.library.save(body)
    problems, slots = _report(service, body)
    return SavedWorkflow(workflow=body, problems=problems, slots=slots)


@router.delete(
    "/api/workflows/{workflow_id}",
    status_code=204,
    responses={**_ERRORS, **error_responses(409)},
)
def delete_workflow(request: Request, workflow_id: str) -> Response:
    """Delete the project's file; a built-in's copy goes and the built-in is back. The
    built-in itself cannot be deleted: a 409 (duplicate it to change it)."""
    if not _service(request).library.delete(workflow_id):
        raise workflow_not_found(workflow_id)
    return Response(status_code=204)


# -- runs -----------------------------------------------------------------------------------


class RunRequest(_Body):
    """No API key here: runs use the endpoints of the server's settings.json."""

    inputs: dict[str, Any] = Field(default_factory=dict, description="Interface input values")
    outputs: list[str] | None = Field(
        default=None, description="Node ids wanted (default: GroupOutput nodes, else the sinks)"
    )
    workflow: Workflow | None = Field(
        default=None, description="Run this unsaved graph instead of the file (same id)"
    )


class RunAccepted(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    run_id: str = Field(alias="runId")
    workflow_id: str = Field(alias="workflowId")


@router.post(
    "/api/workflows/{workflow_id}/runs",
    status_code=202,
    response_model=RunAccepted,
    # 422: an invalid graph lists its problems in full; a malformed request is the envelope.
    responses={404: {"model": ErrorBody}, 422: {"model": WorkflowInvalidBody | ErrorBody}},
)
async def start_run(request: Request, workflow_id: str, body: RunRequest) -> RunAccepted:
    """Validate and start a run; its events go to the WebSocket (and ``GET`` the run)."""
    tracked = _runs(request).start(
        workflow_id, workflow=body.workflow, inputs=body.inputs, outputs=body.outputs
    )
    return RunAccepted(run_id=tracked.run_id, workflow_id=tracked.workflow_id)


@router.get("/api/workflow-runs", response_model=list[RunInfo])
async def list_runs(request: Request) -> list[RunInfo]:
    """Active runs first, then the last finished ones; newest first."""
    return [t.info() for t in _runs(request).runs()]


class RunDetail(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    run_id: str = Field(alias="runId")
    workflow_id: str = Field(alias="workflowId")
    status: RunStatus
    events: list[RunEvent]


@router.get("/api/workflow-runs/{run_id}", response_model=RunDetail, responses=_ERRORS)
async def get_run(
    request: Request, run_id: str, after: int = Query(0, ge=0, description="Events after seq")
) -> RunDetail:
    tracked = _runs(request).get(run_id)
    return RunDetail(
        run_id=tracked.run_id,
        workflow_id=tracked.workflow_id,
        status=tracked.status,
        events=tracked.events_after(after),
    )


class RunRef(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    run_id: str = Field(alias="runId")


@router.post(
    "/api/workflow-runs/{run_id}/cancel",
    status_code=202,
    response_model=RunRef,
    responses=_ERRORS,
)
async def cancel_run(request: Request, run_id: str) -> RunRef:
    """Ask the run to stop; it ends with ``workflow:error`` and ``cancelled: true``."""
    _runs(request).cancel(run_id)
    return RunRef(run_id=run_id)


class DecisionRequest(_Body):
    node_id: str = Field(alias="nodeId")
    decision: Literal["approve", "retry", "edit"]
    edited_output: str | None = Field(default=None, alias="editedOutput")
    choice: int | None = None


class DecisionAccepted(BaseModel):
    accepted: bool


@router.post(
    "/api/workflow-runs/{run_id}/decisions",
    response_model=DecisionAccepted,
    responses={**_ERRORS, **error_responses(409)},
)
async def decide(request: Request, run_id: str, body: DecisionRequest) -> DecisionAccepted:
    """Answer a node's ``node:needs-human``; 409 when that node is not waiting."""
    decision = HumanDecision(
        decision=body.decision, edited_output=body.edited_output, choice=body.choice
    )
    if not _runs(request).decide(run_id, body.node_id, decision):
        raise Conflict(f"node {body.node_id!r} of run {run_id!r} is not waiting")
    return DecisionAccepted(accepted=True)


# -- history and freezing ---------------------------------------------------------------------


@router.get(
    "/api/workflows/{workflow_id}/nodes/{node_id:path}/history",
    response_model=list[HistoryEntry],
)
def node_history(
    request: Request, workflow_id: str, node_id: str, limit: int = Query(50, ge=1, le=500)
) -> list[HistoryEntry]:
    """Every kept output of the node, newest first."""
    return _service(request).history.entries(workflow_id, node_id, limit=limit)


@router.get("/api/workflows/{workflow_id}/frozen", response_model=dict[str, HistoryEntry])
def frozen(request: Request, workflow_id: str) -> dict[str, HistoryEntry]:
    """The pinned output of each frozen node, by node id."""
    return _service(request).history.frozen(workflow_id)


class FreezeRequest(_Body):
    history_id: int = Field(alias="historyId")


@router.put(
    "/api/workflows/{workflow_id}/nodes/{node_id:path}/freeze",
    response_model=HistoryEntry,
    responses=_ERRORS,
)
def freeze(request: Request, workflow_id: str, node_id: str, body: FreezeRequest) -> HistoryEntry:
    """Pin that history entry as the node's output: later runs report it as
    ``node:cached`` with ``source: frozen`` instead of running the node."""
    history = _service(request).history
    entry = history.get(body.history_id)
    if entry is None or (entry.workflow_id, entry.node_id) != (workflow_id, node_id):
        raise NotFound(f"no history entry {body.history_id} of node {node_id!r} in {workflow_id!r}")
    history.freeze(workflow_id, node_id, body.history_id)
    return history.get(body.history_id) or entry


@router.delete("/api/workflows/{workflow_id}/nodes/{node_id:path}/freeze", status_code=204)
def unfreeze(request: Request, workflow_id: str, node_id: str) -> Response:
    _service(request).history.unfreeze(workflow_id, node_id)
    return Response(status_code=204)
