"""Curation (seed 002 策展管线): what the author keeps becomes the book's memory.

:meth:`Curator.persist` is immediate and synchronous: the chapter's text (a new L2
version), the ``writing_output`` row and its queued steps are written in one
transaction, so the author's text is never lost. The rest happens in the background,
step by step (:data:`STEPS`):

- ``summarize``: the chapter's L0 and L1 (agent LLM, or extractive without one);
- ``extract``: facts, new entities, relations and plot threads: the prose reader
  (:mod:`storyloom.writing.prose_reader`) always, and the agent LLM when there is one
  (its answer wins where both say something of the same subject and attribute); kept in
  the step's result only, nothing written to memory yet;
- ``profiles``: the profiles of every entity the chapter touches, rendered from the facts
  as of the chapter, the arc and whole-work summaries, and the extracted facts and
  relations, committed in ONE transaction (memory is never half-updated);
- ``index``: the search index and, with an embedding provider, vectors;
- ``check``: Role C on the kept text; findings become warnings (never blocking).

Each step's writes and its ``done`` mark share one transaction, and every write is an
upsert or a no-op on the same input, so a crash mid-way resumes from the first
unfinished step (:meth:`Curator.resume`) without duplicating anything. Persisting the
same text for the same chapter again is a no-op. A failed step (LLM down, malformed
JSON) is reported with its reason; later steps wait until :meth:`Curator.retry`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal, cast, get_args

import apsw
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from storyloom.core.errors import FieldProblem, NotFound, StoryloomError
from storyloom.core.settings import ChatEndpoint
from storyloom.knowledge.vector_index import StoredVector, missing_vectors, store_vectors
from storyloom.llm.embeddings import EmbeddingProvider
from storyloom.writing.agent_json import AgentJsonError, ask_agent_json
from storyloom.writing.book_store import (
    ENTITY_KIND_OF_FOLDER,
    FACT_CATEGORIES,
    BookStore,
    Fact,
    LevelText,
    LevelWrite,
    Relation,
    Resource,
    content_hash,
    index_id,
)
from storyloom.writing.curation_reason import (
    StepReason,
    StepReasonTerm,
    english,
    read_stored,
    stored,
)
from storyloom.writing.monitor import (
    WORLD_SUBJECTS,
    AgentClaim,
    Claim,
    Finding,
    Lexicon,
    check_claims,
    evaluate,
    extract_claims,
    subject_names,
)
from storyloom.writing.passages import prepare_passages
from storyloom.writing.profiles import PROFILE_TYPE_OF_KIND, profile_resource, render_profile
from storyloom.writing.prose_reader import (
    discover_entities,
    found_entity_resources,
    people_of,
    read_facts,
)
from storyloom.writing.summaries import (
    L0_TOKENS,
    chapter_l0,
    chapter_l1,
    fit,
    rollup_l0,
    rollup_l1,
)
from storyloom.writing.uris import invalid, normalize_path, resource_uri
from storyloom.writing.warnings import (
    ConsistencyWarning,
    list_warnings,
    record_findings,
    set_intentional,
)

logger = logging.getLogger(__name__)

StepName = Literal["summarize", "extract", "profiles", "index", "check"]
STEPS: tuple[StepName, ...] = get_args(StepName)
StepState = Literal["pending", "running", "done", "skipped", "failed"]
"""``skipped``: the step's agent-model work did not run (there is none); what it could do
without it is done, and its reason says what is missing and how to set it up."""
FINISHED: frozenset[StepState] = frozenset({"done", "skipped"})
EMBED_BATCH = 32


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def output_id_for(book_id: str, chapter: int, text: str) -> str:
    """The same text kept for the same chapter of the same book is the same output."""
    key = f"{book_id}\x1f{chapter}\x1f{content_hash(text)}"
    return "out_" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


# -- wire shapes -----------------------------------------------------------------------


class _Wire(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, serialize_by_alias=True, frozen=True
    )


class PersistedOutput(_Wire):
    """The answer to ``output:persist`` (sent as ``output:persisted``)."""

    type: Literal["output:persisted"] = "output:persisted"
    output_id: str
    book_id: str
    chapter: int
    run_id: str | None = None
    node_id: str | None = None
    created: bool
    """False when this text was already kept for this chapter: nothing was queued."""


class OutputStatus(_Wire):
    output_id: str
    book_id: str
    chapter: int
    run_id: str | None = None
    node_id: str | None = None
    tags: list[str] = Field(default_factory=list)
    persisted_at: str
    steps: dict[str, StepState]
    error: str | None = None
    """The failed step's error, when one failed."""
    reasons: dict[str, str] = Field(default_factory=dict)
    """Why each skipped step was skipped, or what a step done without the agent model
    could and could not do (step → reason)."""
    reason_terms: dict[str, StepReason] = Field(default_factory=dict)
    """The same reasons as terms and values, for a page to say in its language (a step
    kept before reasons were structured has only its sentence)."""


class CurationProgress(_Wire):
    type: Literal["curation:progress"] = "curation:progress"
    output_id: str
    book_id: str
    step: str
    state: StepState
    done: int
    total: int
    error: str | None = None
    reason: str | None = None
    """Why the step was skipped, or what it did without the agent model."""
    reason_term: StepReason | None = None
    """The same reason as a term and values, for a page to say in its language."""


class ProfileRef(_Wire):
    type: str
    """The profile folder: characters, plot-threads, world-state, …"""
    name: str
    uri: str


class ProfileUpdated(_Wire):
    type: Literal["profile:updated"] = "profile:updated"
    book_id: str
    profiles: list[ProfileRef]


class ConsistencyCheck(_Wire):
    dimension: str
    passed: bool
    detail: str = ""


class OutputChecked(_Wire):
    type: Literal["output:checked"] = "output:checked"
    output_id: str
    book_id: str
    consistency_checks: list[ConsistencyCheck]
    warnings: list[ConsistencyWarning]
    """The chapter's warnings the author has not marked intentional."""


CurationEvent = CurationProgress | ProfileUpdated | OutputChecked


# -- what the agent LLM answers --------------------------------------------------------


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class AgentSummary(_Loose):
    l0: str = Field(min_length=1)
    l1: str = Field(min_length=1)


class AgentEntity(_Loose):
    path: str = Field(min_length=1)
    title: str = Field(min_length=1)
    aliases: list[str] = Field(default_factory=list)


class AgentRelation(_Loose):
    from_: str = Field(alias="from", min_length=1)
    to: str = Field(min_length=1)
    kind: str = Field(min_length=1)
    reason: str = ""


class AgentThread(_Loose):
    path: str = Field(min_length=1)
    title: str = ""
    planted: int | None = None
    due: int | None = None
    paid_off: int | None = Field(default=None, alias="paidOff")


class AgentExtraction(_Loose):
    facts: list[AgentClaim] = Field(default_factory=list)
    entities: list[AgentEntity] = Field(default_factory=list)
    relations: list[AgentRelation] = Field(default_factory=list)
    threads: list[AgentThread] = Field(default_factory=list)


SUMMARIZE_SYSTEM = (
    "You summarise one chapter of a novel for the author's reference. Answer only JSON: "
    '{"l0": "<one sentence, at most 50 tokens>", "l1": "<a structured overview: who '
    'appears, what happens, what changes, what is left open>"}'
)
EXTRACT_SYSTEM = (
    "You keep a novel's bible. From one chapter, list only what it states as fact. Answer "
    'only JSON: {"facts":[{"subject":"<entity path or name>","attribute":"...","value":"...",'
    '"category":"characterization|factual|narrative|timeline|world","evidence":"<sentence>",'
    '"change":<true when the chapter shows the value changing>}],'
    '"entities":[{"path":"/entities/characters/<slug>","title":"...","aliases":[]}],'
    '"relations":[{"from":"<path>","to":"<path>","kind":"关联|冲突|引入|涉及|...","reason":""}],'
    '"threads":[{"path":"/entities/plot-threads/<slug>","title":"...","planted":<chapter>,'
    '"due":<chapter or null>,"paidOff":<chapter or null>}]}'
)


# -- extraction, as stored in the step's result ----------------------------------------


@dataclass(frozen=True)
class Extraction:
    facts: list[Claim]
    entities: list[dict[str, Any]]
    relations: list[Relation]
    threads: list[dict[str, Any]]
    mentions: list[str]
    source: Literal["agent", "lexical", "prose"]
    """``agent`` (merged with the prose reader's), ``prose`` (the reader alone), or
    ``lexical`` (kept by curations before the prose reader)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "facts": [asdict(c) for c in self.facts],
            "entities": self.entities,
            "relations": [asdict(r) for r in self.relations],
            "threads": self.threads,
            "mentions": self.mentions,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Extraction:
        return cls(
            facts=[Claim(**c) for c in data.get("facts", [])],
            entities=list(data.get("entities", [])),
            relations=[Relation(**r) for r in data.get("relations", [])],
            threads=list(data.get("threads", [])),
            mentions=list(data.get("mentions", [])),
            source=data.get("source", "lexical"),
        )


@dataclass(frozen=True)
class _Output:
    id: str
    book_id: str
    chapter: int
    run_id: str | None
    node_id: str | None
    text: str
    tags: list[str]
    persisted_at: str


@dataclass(frozen=True)
class _Outcome:
    state: Literal["done", "skipped"]
    reason: StepReason | None = None
    """Why it was skipped, or what a done step could not do without the agent model."""


class OutputNotFound(NotFound):
    def __init__(self, output_id: str) -> None:
        super().__init__(f"no curated output {output_id!r}")


class StepFailed(StoryloomError):
    """A curation step that could not finish; the message names the step and why."""


class Curator:
    """Keeps curated chapters and turns them into the book's memory in the background.

    ``publish`` receives every :data:`CurationEvent` (on the event loop); the server
    sends them as WebSocket messages as they are (``model_dump(by_alias=True)``).
    """

    def __init__(
        self,
        store: BookStore,
        *,
        agent_endpoint: Callable[[], ChatEndpoint | None],
        embeddings: Callable[[], EmbeddingProvider | None] | None = None,
        publish: Callable[[CurationEvent], None] = lambda event: None,
    ) -> None:
        self.store = store
        self._agent_endpoint = agent_endpoint
        self._embeddings = embeddings
        self._publish = publish
        self._locks: dict[str, asyncio.Lock] = {}

    # -- storing (immediate) -------------------------------------------------------------

    def persist(
        self,
        book_id: str,
        *,
        chapter: int,
        text: str,
        run_id: str | None = None,
        node_id: str | None = None,
        tags: Sequence[str] = (),
    ) -> PersistedOutput:
        """Keep ``text`` as chapter ``chapter`` now; its curation steps are queued for
        :meth:`process`. The chapter must exist, or be the next one (it is made)."""
        if not text.strip():
            raise invalid("text", "there is no text to keep")
        self.store.book(book_id)
        if chapter < 1:
            raise invalid("chapter", "chapters are numbered from 1")
        chapters = {c.ordinal: c for c in self.store.chapters(book_id)}
        resource = chapters.get(chapter)
        if resource is None:
            last = max(chapters, default=0)
            if chapter != last + 1:
                raise invalid(
                    "chapter", f"the book has chapters 1–{last}: chapter {chapter} is not next"
                )
            resource = self.store.add_chapter(book_id, "", ordinal=chapter)
        output_id = output_id_for(book_id, chapter, text)
        answer = PersistedOutput(
            output_id=output_id, book_id=book_id, chapter=chapter, run_id=run_id, node_id=node_id,
            created=False,
        )  # fmt: skip
        with self.store.database.write_transaction() as tx:
            if self._output_row(tx, output_id) is not None:
                return answer
            # Nested: BookStore's transaction is a savepoint inside this one.
            self.store.write_levels(
                book_id,
                [LevelWrite(resource.path, "L2", text, chapter, f"curation:{output_id}")],
            )
            now = _now()
            tx.execute(
                "INSERT INTO writing_output (id, book_id, chapter, run_id, node_id,"
                " content_hash, text, tags, persisted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    output_id,
                    book_id,
                    chapter,
                    run_id,
                    node_id,
                    content_hash(text),
                    text,
                    json.dumps(list(tags), ensure_ascii=False),
                    now,
                ),
            )
            for position, step in enumerate(STEPS):
                tx.execute(
                    "INSERT INTO writing_curation_step (output_id, step, position, state,"
                    " updated_at) VALUES (?, ?, ?, 'pending', ?)",
                    (output_id, step, position, now),
                )
        return answer.model_copy(update={"created": True})

    def delete_output(self, output_id: str) -> None:
        """Forget a curated output and its steps (``output:delete``). The chapter's text
        stays: it is the author's, and the memory made from it stays until the chapter is
        curated again or edited."""
        with self.store.database.write_transaction() as tx:
            if self._output_row(tx, output_id) is None:
                raise OutputNotFound(output_id)
            tx.execute("DELETE FROM writing_curation_step WHERE output_id = ?", (output_id,))
            tx.execute("DELETE FROM writing_output WHERE id = ?", (output_id,))

    # -- reading ---------------------------------------------------------------------------

    def _output_row(self, conn: apsw.Connection, output_id: str) -> _Output | None:
        row = conn.execute(
            "SELECT id, book_id, chapter, run_id, node_id, text, tags, persisted_at"
            " FROM writing_output WHERE id = ?",
            (output_id,),
        ).fetchone()
        if row is None:
            return None
        return _Output(row[0], row[1], row[2], row[3], row[4], row[5], json.loads(row[6]), row[7])

    def _output(self, output_id: str) -> _Output:
        found = self._output_row(self.store.database.connection(), output_id)
        if found is None:
            raise OutputNotFound(output_id)
        return found

    def _steps(self, output_id: str) -> list[tuple[str, StepState, str | None, Any]]:
        rows = self.store.database.connection().execute(
            "SELECT step, state, error, result FROM writing_curation_step WHERE output_id = ?"
            " ORDER BY position",
            (output_id,),
        )
        return [
            (r[0], cast(StepState, r[1]), r[2], json.loads(r[3]) if r[3] else None) for r in rows
        ]

    def step_result(self, output_id: str, step: str) -> Any:
        """What a done step recorded (the extraction, the profiles it wrote…)."""
        for name, _, _, result in self._steps(output_id):
            if name == step:
                return result
        raise NotFound(f"output {output_id!r} has no step {step!r}")

    def outputs(self, book_id: str) -> list[OutputStatus]:
        self.store.book(book_id)
        conn = self.store.database.connection()
        rows = conn.execute(
            "SELECT id FROM writing_output WHERE book_id = ? ORDER BY chapter, persisted_at, id",
            (book_id,),
        ).fetchall()
        return [self.status(str(r[0])) for r in rows]

    def status(self, output_id: str) -> OutputStatus:
        out = self._output(output_id)
        steps = self._steps(output_id)
        error = next((e for _, state, e, _ in steps if state == "failed"), None)
        said = {name: read_stored(e) for name, state, e, _ in steps if state in FINISHED and e}
        return OutputStatus(
            output_id=out.id,
            book_id=out.book_id,
            chapter=out.chapter,
            run_id=out.run_id,
            node_id=out.node_id,
            tags=out.tags,
            persisted_at=out.persisted_at,
            steps={name: state for name, state, _, _ in steps},
            error=error,
            reasons={name: sentence for name, (sentence, _) in said.items()},
            reason_terms={name: term for name, (_, term) in said.items() if term is not None},
        )

    def warnings(
        self, book_id: str, chapter: int | None = None, *, include_intentional: bool = True
    ) -> list[ConsistencyWarning]:
        self.store.book(book_id)
        return list_warnings(
            self.store.database.connection(),
            book_id,
            chapter=chapter,
            include_intentional=include_intentional,
        )

    def mark_intentional(self, warning_id: int, intentional: bool = True) -> ConsistencyWarning:
        """The author says this is on purpose: it stays quiet on later checks."""
        with self.store.database.write_transaction() as tx:
            return set_intentional(tx, warning_id, intentional)

    # -- processing (background) -----------------------------------------------------------

    def _lock(self, book_id: str) -> asyncio.Lock:
        # One book's outputs are curated one at a time, in the order they were kept
        # (asyncio locks are fair): a chapter's profiles build on the chapter before's,
        # and the agent model sees the chapters in order.
        return self._locks.setdefault(book_id, asyncio.Lock())

    async def process(self, output_id: str, *, until: str | None = None) -> None:
        """Run the output's unfinished steps in order (a failed one included), stopping at
        the first failure; with ``until``, stop after that step (the rest stay pending)."""
        if until is not None and until not in STEPS:
            raise invalid("until", f"{until!r} is not one of {', '.join(STEPS)}")
        out = self._output(output_id)
        async with self._lock(out.book_id):
            steps = self._steps(output_id)
            total = len(steps)
            done = sum(1 for _, state, _, _ in steps if state in FINISHED)
            for name, state, _, _ in steps:
                if state not in FINISHED:
                    await asyncio.to_thread(self._mark, output_id, name, "running")
                    self._progress(out, name, "running", done, total)
                    try:
                        outcome = await self._run(out, name)
                    except Exception as exc:
                        error = f"{name}: {_reason(exc)}"
                        if not isinstance(exc, StoryloomError):
                            logger.exception("curation step %s of %s failed", name, output_id)
                        await asyncio.to_thread(self._mark, output_id, name, "failed", error)
                        self._progress(out, name, "failed", done, total, error)
                        return
                    done += 1
                    self._progress(out, name, outcome.state, done, total, reason=outcome.reason)
                if name == until:
                    return

    async def retry(self, output_id: str) -> None:
        """Run again from the failed (or first unfinished) step."""
        await self.process(output_id)

    async def resume(self) -> list[str]:
        """Finish every output whose steps were interrupted (pending or running: a crash
        left them so); failed ones wait for :meth:`retry`. Returns the outputs resumed."""
        rows = (
            self.store.database.connection()
            .execute(
                "SELECT o.id FROM writing_output AS o WHERE EXISTS (SELECT 1 FROM"
                " writing_curation_step AS s WHERE s.output_id = o.id AND s.state IN"
                " ('pending', 'running')) AND NOT EXISTS (SELECT 1 FROM writing_curation_step AS s"
                " WHERE s.output_id = o.id AND s.state = 'failed') ORDER BY o.persisted_at, o.id"
            )
            .fetchall()
        )
        resumed = [str(r[0]) for r in rows]
        for output_id in resumed:
            await self.process(output_id)
        return resumed

    def _progress(
        self,
        out: _Output,
        step: str,
        state: StepState,
        done: int,
        total: int,
        error: str | None = None,
        *,
        reason: StepReason | None = None,
    ) -> None:
        self._emit(
            CurationProgress(
                output_id=out.id,
                book_id=out.book_id,
                step=step,
                state=state,
                done=done,
                total=total,
                error=error,
                reason=english(reason) if reason is not None else None,
                reason_term=reason,
            )
        )

    def _emit(self, event: CurationEvent) -> None:
        try:
            self._publish(event)
        except Exception:
            logger.exception("curation event subscriber failed")

    def _mark(self, output_id: str, step: str, state: StepState, error: str | None = None) -> None:
        with self.store.database.write_transaction() as tx:
            self._set_state(tx, output_id, step, state, error=error)

    def _set_state(
        self,
        tx: apsw.Connection,
        output_id: str,
        step: str,
        state: StepState,
        *,
        error: str | None = None,
        result: Any = None,
    ) -> None:
        attempts = ", attempts = attempts + 1" if state == "running" else ""
        keep = "result" if result is None else "?"
        args: list[Any] = [state, error, _now()]
        if result is not None:
            args.append(json.dumps(result, ensure_ascii=False, sort_keys=True))
        tx.execute(
            f"UPDATE writing_curation_step SET state = ?, error = ?, updated_at = ?{attempts},"
            f" result = {keep} WHERE output_id = ? AND step = ?",
            [*args, output_id, step],
        )

    def _done(
        self,
        tx: apsw.Connection,
        out: _Output,
        step: str,
        result: Any,
        skipped: StepReason | None = None,
    ) -> None:
        """Mark ``step`` finished: done, or skipped for the reason ``skipped`` (kept in
        the error column, which says why a step did not do its whole job)."""
        state: StepState = "done" if skipped is None else "skipped"
        error = stored(skipped) if skipped is not None else None
        self._set_state(tx, out.id, step, state, error=error, result=result)

    async def _run(self, out: _Output, step: str) -> _Outcome:
        """Run one step: done or skipped, and why."""
        if step == "summarize":
            skipped = await self._summarize(out)
            return _Outcome("done") if skipped is None else _Outcome("skipped", skipped)
        if step == "extract":
            skipped = await self._extract(out)
            return _Outcome("done") if skipped is None else _Outcome("skipped", skipped)
        if step == "profiles":
            profiles = await asyncio.to_thread(self._profiles, out)
            self._emit(ProfileUpdated(book_id=out.book_id, profiles=profiles))
        elif step == "index":
            await self._index(out)
        elif step == "check":
            self._emit(await asyncio.to_thread(self._check, out))
        else:  # pragma: no cover - the table only holds STEPS
            raise StepFailed(f"unknown step {step!r}")
        return _Outcome("done")

    def _agent(self) -> ChatEndpoint | None:
        endpoint = self._agent_endpoint()
        return endpoint if endpoint is not None and endpoint.configured else None

    def _no_agent(self, step: Literal["summary", "facts"]) -> StepReason:
        """Why there is no agent model to ask for ``step`` (what it did instead follows
        from the step)."""
        endpoint = self._agent_endpoint()
        problem = endpoint.local_problem if endpoint is not None else None
        if problem is not None:
            down: StepReasonTerm = "summary_agent_down" if step == "summary" else "facts_agent_down"
            return StepReason(term=down, problem=problem)
        return StepReason(term="summary_no_model" if step == "summary" else "facts_no_model")

    # -- summarize -----------------------------------------------------------------------

    async def _summarize(self, out: _Output) -> StepReason | None:
        chapter = self.store.chapter(out.book_id, out.chapter)
        endpoint = self._agent()
        skipped: StepReason | None = None
        if endpoint is not None:
            answer = await ask_agent_json(
                endpoint,
                SUMMARIZE_SYSTEM,
                f"Chapter {out.chapter}: {chapter.title}\n\n{out.text}",
                AgentSummary,
                what="summary",
            )
            l0, l1, source = fit([answer.l0.strip()], L0_TOKENS + 10), answer.l1.strip(), "agent"
        else:
            names = self._mention_titles(out)
            l0 = chapter_l0(chapter.title, out.text)
            l1 = chapter_l1(chapter.title, out.text, names)
            source = f"curation:{out.id}"
            skipped = self._no_agent("summary")

        def write() -> None:
            with self.store.database.write_transaction() as tx:
                self.store.write_levels(
                    out.book_id,
                    [
                        LevelWrite(chapter.path, "L0", l0, out.chapter, source),
                        LevelWrite(chapter.path, "L1", l1, out.chapter, source),
                    ],
                )
                self._done(tx, out, "summarize", {"source": source, "l0": l0}, skipped)

        await asyncio.to_thread(write)
        return skipped

    def _mention_titles(self, out: _Output) -> list[str]:
        lexicon = Lexicon.build(self.store, out.book_id)
        paths = lexicon.matcher.match(out.text)
        return [lexicon.entities[p].title for p in paths if p in lexicon.entities]

    # -- extract -------------------------------------------------------------------------

    async def _extract(self, out: _Output) -> StepReason | None:
        """The chapter's extraction; without a model the step is skipped (the offline
        reader's facts are still kept), for the reason returned."""
        endpoint = self._agent()
        skipped: StepReason | None = None
        if endpoint is not None:

            async def resolved(answer: AgentExtraction) -> Extraction:
                # Names the book does not know are problems of the answer too: the model
                # hears them in the one retry, as it hears schema problems.
                return await asyncio.to_thread(self._from_agent, out, answer)

            agent = await ask_agent_json(
                endpoint,
                EXTRACT_SYSTEM,
                self._extract_prompt(out),
                AgentExtraction,
                what="extraction",
                accept=resolved,
            )
            prose = await asyncio.to_thread(self._prose, out)
            extraction = _merge_extractions(agent, prose)
        else:
            extraction = await asyncio.to_thread(self._prose, out)
            skipped = self._no_agent("facts")

        def write() -> None:
            with self.store.database.write_transaction() as tx:
                self._done(tx, out, "extract", extraction.to_json(), skipped)

        await asyncio.to_thread(write)
        return skipped

    def _extract_prompt(self, out: _Output) -> str:
        entities = self.store.entities(out.book_id)
        lines = [f"Chapter {out.chapter}. Known entities:"]
        lines += [f"- {e.path}: {', '.join((e.title, *e.aliases))}" for e in entities]
        current = self.store.facts_as_of(out.book_id, out.chapter)
        lines.append("Facts before this chapter:")
        for subject, attributes in sorted(current.items()):
            lines.append(
                f"- {subject}: " + ", ".join(f"{a}={f.value}" for a, f in attributes.items())
            )
        return "\n".join([*lines, "", "The chapter:", out.text])

    def _mentions(self, out: _Output, lexicon: Lexicon) -> list[str]:
        return lexicon.matcher.match(out.text)

    def _prose(self, out: _Output) -> Extraction:
        """What the offline prose reader finds in the chapter: people and places it names
        that the book does not know yet, the facts its sentences state, kin relations, and
        the changes Role C's extractor sees to what the book already records."""
        lexicon = Lexicon.build(self.store, out.book_id)
        known_names = {
            n.casefold() for r in lexicon.entities.values() for n in (r.title, *r.aliases)
        }
        # "Voss" said twice is not someone new when the book knows "Mara Voss".
        known_names |= {w for n in known_names for w in n.split()}
        found = [
            f
            for f in discover_entities([out.text], first_chapter=out.chapter)
            if not any(n.casefold() in known_names for n in (f.title, *f.aliases))
            and f.path not in lexicon.entities
        ]
        reading = read_facts(out.text, people_of(lexicon.entities.values(), found), out.chapter)
        claims = extract_claims(self.store, out.book_id, out.text, out.chapter, lexicon=lexicon)
        facts = {(c.subject, c.attribute): c for c in claims if c.change}
        for claim in reading.facts:
            # Several values of one attribute in a chapter: the last one stated holds.
            facts[(claim.subject, claim.attribute)] = claim
        mentions = list(dict.fromkeys([*self._mentions(out, lexicon), *(f.path for f in found)]))
        resources = found_entity_resources(out.book_id, found)
        entities = [
            {"path": r.path, "title": r.title, "aliases": list(r.aliases), "attrs": dict(r.attrs)}
            for r in resources
        ]
        known = {**lexicon.entities, **{r.path: r for r in resources}}
        return Extraction(
            facts=list(facts.values()),
            entities=entities,
            relations=[*self._mention_relations(out, mentions, known), *reading.relations],
            threads=[],
            mentions=mentions,
            source="prose",
        )

    def _mention_relations(
        self, out: _Output, mentions: Sequence[str], entities: Mapping[str, Resource]
    ) -> list[Relation]:
        chapter = self.store.chapter(out.book_id, out.chapter).path
        relations = []
        for path in mentions:
            entity = entities.get(path)
            kind = "引入" if entity is not None and entity.chapter_from == out.chapter else "涉及"
            relations.append(
                Relation(chapter, path, kind, f"named in chapter {out.chapter}", out.chapter)
            )
        return relations

    def _from_agent(self, out: _Output, answer: AgentExtraction) -> Extraction:
        names = subject_names(self.store, out.book_id)
        problems: list[FieldProblem] = []
        entities: list[dict[str, Any]] = []
        for index, entity in enumerate(answer.entities):
            path = _entity_path(entity.path)
            if path is None:
                problems.append(
                    FieldProblem(
                        f"entities[{index}].path", f"{entity.path!r} is not /entities/<kind>/<name>"
                    )
                )
                continue
            aliases = [a.strip() for a in entity.aliases if a.strip()]
            entities.append({"path": path, "title": entity.title.strip(), "aliases": aliases})
            for name in (path, entity.title, *aliases):
                names.setdefault(name.strip().casefold(), path)
        threads: list[dict[str, Any]] = []
        for index, thread in enumerate(answer.threads):
            path = _entity_path(thread.path)
            if path is None or not path.startswith("/entities/plot-threads/"):
                problems.append(
                    FieldProblem(
                        f"threads[{index}].path",
                        f"{thread.path!r} is not /entities/plot-threads/<name>",
                    )
                )
                continue
            threads.append(
                {
                    "path": path,
                    "title": thread.title.strip(),
                    "planted": thread.planted,
                    "due": thread.due,
                    "paidOff": thread.paid_off,
                }
            )
            names.setdefault(path, path)

        def resolve(name: str, where: str) -> str | None:
            found = names.get(name.strip().casefold())
            if found is None:
                problems.append(FieldProblem(where, f"{name!r} names no known entity"))
            return found

        facts: list[Claim] = []
        for index, fact in enumerate(answer.facts):
            subject = resolve(fact.subject, f"facts[{index}].subject")
            if subject is not None:
                facts.append(
                    Claim(
                        subject,
                        fact.attribute.strip(),
                        fact.value.strip(),
                        fact.category,
                        fact.evidence,
                        fact.change,
                    )
                )
        chapter = self.store.chapter(out.book_id, out.chapter).path
        relations: list[Relation] = []
        for index, rel in enumerate(answer.relations):
            source = (
                chapter
                if rel.from_.strip().startswith("/manuscript")
                else resolve(rel.from_, f"relations[{index}].from")
            )
            target = resolve(rel.to, f"relations[{index}].to")
            if source is not None and target is not None:
                relations.append(
                    Relation(source, target, rel.kind.strip(), rel.reason, out.chapter)
                )
        if problems:
            raise AgentJsonError("extraction", problems)
        lexicon = Lexicon.build(self.store, out.book_id)
        mentions = list(
            dict.fromkeys([*self._mentions(out, lexicon), *(e["path"] for e in entities)])
        )
        known = {**lexicon.entities}
        relations += [
            r
            for r in self._mention_relations(out, mentions, known)
            if (r.from_path, r.to_path) not in {(x.from_path, x.to_path) for x in relations}
        ]
        return Extraction(facts, entities, relations, threads, mentions, "agent")

    # -- profiles ------------------------------------------------------------------------

    def _profiles(self, out: _Output) -> list[ProfileRef]:
        book_id, ordinal = out.book_id, out.chapter
        extraction = Extraction.from_json(self.step_result(out.id, "extract") or {})
        chapter = self.store.chapter(book_id, ordinal)
        current = self.store.facts_as_of(book_id, ordinal)
        source_uri = chapter.uri
        facts = [
            Fact(
                c.subject,
                c.attribute,
                c.value,
                ordinal,
                c.category,
                source_uri,
                c.evidence,
                out.id,
                source="agent" if extraction.source == "agent" else "prose",
            )
            for c in extraction.facts
            if _memorable(c, current)
        ]
        resources = self._entity_resources(out, extraction)
        known = {r.path: r for r in self.store.entities(book_id)}
        known.update({r.path: r for r in resources})
        touched = dict.fromkeys(
            [
                *extraction.mentions,
                *(f.subject for f in facts),
                *(r.path for r in resources),
                *(p for r in extraction.relations for p in (r.from_path, r.to_path)),
            ]
        )
        existing = {r.path for r in self.store.resources(book_id, "/profiles")}
        levels: list[LevelWrite] = []
        refs: list[ProfileRef] = []
        for path in touched:
            entity = known.get(path)
            if entity is None:
                continue
            mine = _merged(
                self.store.facts(book_id, subject=path), [f for f in facts if f.subject == path]
            )
            texts = render_profile(entity, mine, ordinal)
            levels += texts.writes(ordinal)
            for later in self._later_profile_chapters(book_id, texts.path, ordinal):
                levels += render_profile(entity, mine, later, path=texts.path).writes(later)
            folder = PROFILE_TYPE_OF_KIND.get(entity.kind, "world-state")
            if texts.path not in existing:
                resources.append(profile_resource(book_id, texts.path, entity, folder))
            refs.append(
                ProfileRef(type=folder, name=entity.title, uri=resource_uri(book_id, texts.path))
            )
        if any(f.category == "world" or f.subject in WORLD_SUBJECTS for f in facts):
            world = self.store.resource(book_id, "/profiles/world-state/current")
            world_facts = [
                f
                for subject in WORLD_SUBJECTS
                for f in _merged(
                    self.store.facts(book_id, subject=subject),
                    [f for f in facts if f.subject == subject],
                )
            ]
            texts = render_profile(world, world_facts, ordinal, path=world.path)
            levels += texts.writes(ordinal)
            for later in self._later_profile_chapters(book_id, world.path, ordinal):
                levels += render_profile(world, world_facts, later, path=world.path).writes(later)
            refs.append(ProfileRef(type="world-state", name=world.title, uri=world.uri))
        summary_levels, summary_resources = self._summaries(out, chapter)
        levels += summary_levels
        resources += summary_resources
        with self.store.database.write_transaction() as tx:
            self.store.commit_chapter_memory(
                book_id,
                levels=levels,
                facts=facts,
                relations=extraction.relations,
                resources=resources,
            )
            paths = sorted({w.path for w in levels} | {chapter.path})
            self._done(
                tx,
                out,
                "profiles",
                {"paths": paths, "facts": len(facts), "profiles": [r.model_dump() for r in refs]},
            )
        return refs

    def _later_profile_chapters(self, book_id: str, path: str, ordinal: int) -> list[int]:
        """The later chapters a profile has a state for: curating (or rewriting) an earlier
        chapter renders those again, so a fact it adds is not missing from them."""
        return [c for c in self.store.level_chapters(book_id, path) if c > ordinal]

    def _entity_resources(self, out: _Output, extraction: Extraction) -> list[Resource]:
        """New entities (and new aliases or thread chapters of known ones) to write."""
        book_id = out.book_id
        out_resources: dict[str, Resource] = {}

        def current(path: str) -> Resource | None:
            if path in out_resources:
                return out_resources[path]
            try:
                return self.store.resource(book_id, path)
            except NotFound:
                return None

        for item in extraction.entities:
            path = item["path"]
            before = current(path)
            kind = ENTITY_KIND_OF_FOLDER[path.split("/")[2]]
            found_attrs = dict(item.get("attrs") or {})
            aliases = tuple(dict.fromkeys([*(before.aliases if before else ()), *item["aliases"]]))
            if before is not None and set(aliases) == set(before.aliases):
                continue
            out_resources[path] = Resource(
                book_id,
                path,
                before.kind if before else kind,
                before.title if before else item["title"] or path.rsplit("/", 1)[1],
                path.rsplit("/", 1)[0],
                before.ordinal if before else 0,
                before.chapter_from if before else out.chapter,
                aliases,
                dict(before.attrs) if before else found_attrs,
            )
        for thread in extraction.threads:
            path = thread["path"]
            before = current(path)
            attrs = dict(before.attrs) if before else {}
            for key in ("planted", "due", "paidOff"):
                if thread.get(key) is not None:
                    attrs[key] = thread[key]
            attrs.setdefault("planted", out.chapter)
            if before is not None and attrs == dict(before.attrs):
                continue
            out_resources[path] = Resource(
                book_id,
                path,
                "plot-thread",
                before.title if before else thread["title"] or path.rsplit("/", 1)[1],
                "/entities/plot-threads",
                before.ordinal if before else 0,
                before.chapter_from if before else out.chapter,
                before.aliases if before else (),
                attrs,
            )
        return list(out_resources.values())

    def _summaries(
        self, out: _Output, chapter: Resource
    ) -> tuple[list[LevelWrite], list[Resource]]:
        """The arc's and the whole work's L0/L1 as of this chapter, from chapter L0s."""
        book_id, ordinal = out.book_id, out.chapter
        source = f"curation:{out.id}"
        l0s = self.store.latest_levels(
            book_id, "L0", under="/manuscript", before_chapter=ordinal + 1
        )
        chapters = [c for c in self.store.chapters(book_id) if c.ordinal <= ordinal]
        arcs = {a.path: a for a in self.store.resources(book_id, "/manuscript", kinds=["arc"])}
        book = self.store.book(book_id)
        levels: list[LevelWrite] = []
        resources: list[Resource] = []
        existing = {r.path for r in self.store.resources(book_id, "/summaries")}
        arc_l0: dict[str, str] = {}
        for arc_dir in dict.fromkeys(c.parent for c in chapters):
            mine = [c for c in chapters if c.parent == arc_dir]
            arc = arcs.get(arc_dir)
            title = arc.title if arc else arc_dir.rsplit("/", 1)[1]
            lines = [f"- ch. {c.ordinal} · {c.title}: {_text(l0s, c.path)}".rstrip() for c in mine]
            latest = l0s[mine[-1].path].text if mine[-1].path in l0s else ""
            arc_l0[arc_dir] = rollup_l0(title, mine[0].ordinal, mine[-1].ordinal, latest)
            if arc_dir != chapter.parent:
                continue
            path = "/summaries/" + arc_dir.rsplit("/", 1)[1]
            if path not in existing:
                resources.append(
                    Resource(
                        book_id, path, "summary", title, "/summaries", arc.ordinal if arc else 0, 0
                    )
                )
            levels += [
                LevelWrite(path, "L0", arc_l0[arc_dir], ordinal, source),
                LevelWrite(path, "L1", rollup_l1(title, lines), ordinal, source),
            ]
        whole = [f"- {arcs[a].title if a in arcs else a}: {text}" for a, text in arc_l0.items()]
        latest_arc = arc_l0.get(chapter.parent, "")
        levels += [
            LevelWrite(
                "/summaries/full-work",
                "L0",
                rollup_l0(book.title, 1, ordinal, latest_arc),
                ordinal,
                source,
            ),
            LevelWrite("/summaries/full-work", "L1", rollup_l1(book.title, whole), ordinal, source),
        ]
        return levels, resources

    # -- index ---------------------------------------------------------------------------

    async def _index(self, out: _Output) -> None:
        result = self.step_result(out.id, "profiles") or {}
        paths = list(result.get("paths", [])) or [self.store.chapter(out.book_id, out.chapter).path]
        report = await asyncio.to_thread(self.store.index_levels, out.book_id, paths)
        # Cut the chapters into Role A's passages now, not on the first context request.
        chapter_path = self.store.chapter(out.book_id, out.chapter).path
        await asyncio.to_thread(prepare_passages, self.store, out.book_id, [chapter_path])
        provider = self._embeddings() if self._embeddings is not None else None
        vectors = 0
        if provider is not None:
            kb = index_id(out.book_id)
            pending = [
                p
                for p in await asyncio.to_thread(
                    lambda: missing_vectors(self.store.database.connection(), kb, provider.model_id)
                )
                if embeddable(p.entry_id)
            ]
            for start in range(0, len(pending), EMBED_BATCH):
                batch = pending[start : start + EMBED_BATCH]
                embedded = await provider.embed_passages([p.text for p in batch])
                if len(embedded) != len(batch):
                    raise StepFailed(
                        f"the embedding model returned {len(embedded)} vectors"
                        f" for {len(batch)} texts"
                    )
                items = [
                    StoredVector(p.entry_id, p.content_hash, v)
                    for p, v in zip(batch, embedded, strict=True)
                ]
                vectors += await asyncio.to_thread(
                    store_vectors,
                    self.store.database.connection(),
                    kb,
                    provider.model_id,
                    items,
                    only_current=True,
                )

        def write() -> None:
            with self.store.database.write_transaction() as tx:
                self._done(
                    tx,
                    out,
                    "index",
                    {
                        "added": len(report.added),
                        "changed": len(report.changed),
                        "vectors": vectors,
                    },
                )

        await asyncio.to_thread(write)

    # -- check ---------------------------------------------------------------------------

    def _check(self, out: _Output) -> OutputChecked:
        book_id, ordinal = out.book_id, out.chapter
        claims = extract_claims(self.store, book_id, out.text, ordinal)
        extraction = Extraction.from_json(self.step_result(out.id, "extract") or {})
        if extraction.source in ("agent", "prose"):
            claims += extraction.facts
        findings = check_claims(self.store, book_id, claims, ordinal)
        with self.store.database.write_transaction() as tx:
            warnings = record_findings(tx, book_id, out.id, ordinal, findings)
            quiet = {w.fingerprint for w in warnings if w.intentional}
            marked = [_with_intent(f, f.fingerprint in quiet) for f in findings]
            evaluation = evaluate(marked, attempt=0, max_retries=0)
            checks = [
                ConsistencyCheck(dimension=c.dimension, passed=c.passed, detail=c.detail)
                for c in evaluation.checks
            ]
            self._done(
                tx,
                out,
                "check",
                {
                    "findings": len(findings),
                    "quiet": len(quiet),
                    "checks": [c.model_dump() for c in checks],
                },
            )
        return OutputChecked(
            output_id=out.id,
            book_id=book_id,
            consistency_checks=checks,
            warnings=[w for w in warnings if not w.intentional],
        )


def _merge_extractions(agent: Extraction, prose: Extraction) -> Extraction:
    """The agent's extraction with what the prose reader adds: the agent wins where both
    state the same subject's attribute; the reader's other facts, the people it found
    that the agent did not name, and its relations are added."""
    said = {(c.subject, c.attribute) for c in agent.facts}
    named = {e["path"] for e in agent.entities} | {
        n.casefold() for e in agent.entities for n in (e["title"], *e["aliases"])
    }
    entities = [
        e
        for e in prose.entities
        if e["path"] not in named
        and not any(n.casefold() in named for n in (e["title"], *e["aliases"]))
    ]
    kept = {e["path"] for e in entities}
    new_paths = {e["path"] for e in prose.entities}

    def usable(path: str) -> bool:
        # A person only the reader found is usable when the reader's entity is kept.
        return path not in new_paths or path in kept

    facts = [
        *agent.facts,
        *(c for c in prose.facts if (c.subject, c.attribute) not in said and usable(c.subject)),
    ]
    seen = {(r.from_path, r.to_path, r.kind) for r in agent.relations}
    relations = [
        *agent.relations,
        *(
            r
            for r in prose.relations
            if (r.from_path, r.to_path, r.kind) not in seen
            and usable(r.from_path)
            and usable(r.to_path)
        ),
    ]
    mentions = list(dict.fromkeys([*agent.mentions, *(m for m in prose.mentions if usable(m))]))
    return Extraction(
        facts, [*agent.entities, *entities], relations, agent.threads, mentions, "agent"
    )


def embeddable(entry_id: str) -> bool:
    """Whether an index entry (``<path>#<level>``) gets a vector, besides its keywords.

    Embedding is most of what curation costs offline (the bundled model takes seconds for
    a chapter's text, which it would cut at 512 tokens anyway), so vectors go where
    meaning matters more than names: every resource's one-line L0 (what a chapter is
    about, who a character is). The longer levels (L1, L2) and the arc and whole-work
    summaries (which change with every chapter, and roll up the chapters' L0s) are found
    by their keywords."""
    path, _, level = entry_id.partition("#")
    return level == "L0" and not path.startswith("/summaries/")


def _text(levels: Mapping[str, LevelText], path: str) -> str:
    found = levels.get(path)
    return found.text if found is not None else ""


def _with_intent(finding: Finding, intentional: bool) -> Finding:
    return replace(finding, intentional=intentional)


def _reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _entity_path(raw: str) -> str | None:
    try:
        path = normalize_path(raw)
    except StoryloomError:
        return None
    parts = path.split("/")
    if len(parts) != 4 or parts[1] != "entities" or parts[2] not in ENTITY_KIND_OF_FOLDER:
        return None
    return path


def _memorable(claim: Claim, current: Mapping[str, Mapping[str, Fact]]) -> bool:
    """Whether a claim becomes a fact of this chapter: new, or a change. Restating the
    current value adds nothing; contradicting it without a change is Role C's business
    (a warning), not memory."""
    if claim.category not in FACT_CATEGORIES:
        return False
    now = current.get(claim.subject, {}).get(claim.attribute)
    if now is None:
        return True
    same = now.value.strip().casefold() == claim.value.strip().casefold()
    return claim.change and not same


def _merged(stored: Sequence[Fact], new: Sequence[Fact]) -> list[Fact]:
    """``stored`` facts with ``new`` ones replacing those of the same attribute and chapter."""
    by_key = {(f.attribute, f.chapter): f for f in stored}
    by_key.update({(f.attribute, f.chapter): f for f in new})
    return sorted(by_key.values(), key=lambda f: (f.attribute, f.chapter))
