"""``/api/sillytavern``: move a SillyTavern user folder in from the web app.

The folder is a path on the server's own disk: the server binds to 127.0.0.1, so the
one who asks is the user of this machine, reading their own files (as the CLI does).
The preview answers at once; the import runs in a worker thread and is polled by its
job id. One import runs at a time: a second while one runs is a 409.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from fastapi import APIRouter, Request

from storyloom.core.errors import Conflict, NotFound, StoryloomError
from storyloom.server.api_errors import error_responses
from storyloom.server.st_move_in import MoveInTarget, import_folder, preview_folder
from storyloom.server.st_move_in_views import (
    ST_KINDS,
    StFolderPreview,
    StFolderRequest,
    StImportJob,
    StImportProgress,
    StImportReport,
    StKind,
    StKindProgress,
)
from storyloom.server.state import ServerState, server_state
from storyloom.sillytavern.user_folder import find_user_folder

router = APIRouter(prefix="/api/sillytavern", tags=["sillytavern"])

_ERRORS = error_responses(400, 404, 409, 422)


@dataclass
class _Job:
    job_id: str
    kinds: dict[StKind, tuple[int, int]] = field(
        default_factory=lambda: dict.fromkeys(ST_KINDS, (0, 0))
    )
    state: Literal["running", "done", "failed"] = "running"
    report: StImportReport | None = None
    error: str | None = None

    def view(self) -> StImportProgress:
        return StImportProgress(
            job_id=self.job_id,
            state=self.state,
            kinds=[StKindProgress(kind=k, done=d, total=t) for k, (d, t) in self.kinds.items()],
            report=self.report,
            error=self.error,
        )


class _Jobs:
    """The imports of this server, by id (kept while the server runs)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.jobs: dict[str, _Job] = {}

    def running(self) -> bool:
        return any(job.state == "running" for job in self.jobs.values())


_JOBS_LOCK = threading.Lock()


def _jobs(request: Request) -> _Jobs:
    with _JOBS_LOCK:
        jobs = getattr(request.app.state, "st_move_in_jobs", None)
        if not isinstance(jobs, _Jobs):
            jobs = _Jobs()
            request.app.state.st_move_in_jobs = jobs
        return jobs


def _target(state: ServerState) -> MoveInTarget:
    return MoveInTarget(
        home=state.home,
        project_dir=state.project_dir,
        tree=state.turn_tree,
        database=state.database,
        global_folders=state.knowledge.global_folders(),
    )


@router.post("/preview", response_model=StFolderPreview, responses=_ERRORS)
async def preview(request: Request, body: StFolderRequest) -> StFolderPreview:
    """What an import of the folder would bring, counted per kind; nothing is written.
    A path that is no SillyTavern folder is a 422 naming it."""
    target = _target(server_state(request))
    return await asyncio.to_thread(preview_folder, target, Path(body.path), body.user)


@router.post("/import", status_code=202, response_model=StImportJob, responses=_ERRORS)
async def start_import(request: Request, body: StFolderRequest) -> StImportJob:
    """Start moving the folder in; poll ``GET /api/sillytavern/import/{job_id}``."""
    state = server_state(request)
    jobs = _jobs(request)
    path = Path(body.path)
    # Refused before the job starts: the user sees a wrong path at once.
    await asyncio.to_thread(find_user_folder, path, body.user)
    with jobs.lock:
        if jobs.running():
            raise Conflict("an import from SillyTavern is running; wait for it to finish")
        job = _Job(job_id=uuid.uuid4().hex)
        jobs.jobs[job.job_id] = job

    def progress(kind: StKind, done: int, total: int) -> None:
        job.kinds[kind] = (done, total)

    def run() -> None:
        try:
            report = import_folder(_target(state), path, body.user, progress)
        except (StoryloomError, OSError) as exc:
            job.error, job.state = str(exc), "failed"
            return
        except Exception as exc:  # a job's failure is its answer, never a dead thread
            job.error, job.state = f"{type(exc).__name__}: {exc}", "failed"
            return
        finally:
            state.knowledge.reload()
        for conversation in state.turn_tree.conversations(state.chat.project_id):
            state.chat.announce(conversation.id)
        job.report, job.state = report, "done"

    threading.Thread(target=run, name=f"st-import-{job.job_id}", daemon=True).start()
    return StImportJob(job_id=job.job_id)


@router.get("/import/{job_id}", response_model=StImportProgress, responses=_ERRORS)
def import_progress(request: Request, job_id: str) -> StImportProgress:
    """How far the import is: per kind done of total; its report when done."""
    job = _jobs(request).jobs.get(job_id)
    if job is None:
        raise NotFound(f"no SillyTavern import {job_id!r}")
    return job.view()
