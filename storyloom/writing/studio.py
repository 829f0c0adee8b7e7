"""The writing studio as the server and the CLI use it: one object over a data directory's
books, their curation (background tasks) and Role B.

Views are built here from the store so the HTTP layer stays a thin mapping. Curation runs
as ``asyncio`` tasks kept in a set (a task nobody references may be collected mid-way);
``start()`` resumes the curation a stopped server left unfinished, ``aclose()`` cancels
what still runs (its steps are resumable: each step's writes and its "done" mark are one
transaction, so a cancelled step is simply run again at the next start).

"As of chapter c" in every view means the book as it stood when chapter c was finished:
every text, fact and relation from chapters up to and including c.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from storyloom.core.errors import NotFound, Unavailable
from storyloom.core.settings import ChatEndpoint, Settings
from storyloom.llm.embeddings import EmbeddingProvider
from storyloom.project.knowledge_service import KnowledgeService
from storyloom.store.database import Database
from storyloom.workflow.events import AnyRunEvent, NodeCached, NodeCompleted
from storyloom.workflow.node_registry import NodeRegistry
from storyloom.workflow.node_type import ContextSource
from storyloom.workflow.workflow_file import Workflow
from storyloom.writing.book_store import LEVELS, Book, BookStore, Level, LevelText, Resource
from storyloom.writing.builder import Builder, Suggestion
from storyloom.writing.chapter_workflow import ensure_chapter_workflow
from storyloom.writing.context_assembly import ContextRequest, assemble_context, rebuild_context
from storyloom.writing.curation import CurationEvent, Curator, PersistedOutput
from storyloom.writing.manuscript_import import import_entities
from storyloom.writing.manuscript_io import (
    ExportBook,
    ExportChapter,
    export_book,
    parse_manuscript,
)
from storyloom.writing.memory_corrections import MemoryCorrections, fact_view, relation_view
from storyloom.writing.profiles import subject_of
from storyloom.writing.uris import invalid, is_under, normalize_path, parse_uri, resource_uri
from storyloom.writing.views import (
    ArcNode,
    BookSummary,
    ChapterNode,
    ChapterToImport,
    ContextBody,
    ContextPieceView,
    ContextView,
    CurationStarted,
    GraphNode,
    GraphView,
    ImportChapter,
    ImportedChapters,
    ImportPreviewView,
    LevelVersion,
    LevelView,
    OutputView,
    ResNode,
    ResourceEdit,
    ResourceView,
    SceneNode,
    SearchHitView,
    SearchRequest,
    SourceLabel,
    SourceRef,
    ThreadView,
    Tree,
)
from storyloom.writing.warnings import ConsistencyWarning
from storyloom.writing.word_count import count_words
from storyloom.writing.writing_connections import WritingModelView, writing_endpoint, writing_model

logger = logging.getLogger(__name__)


class RunOutputNotFound(NotFound):
    """The run has no finished output for that node (or not in that slot)."""


def _before(as_of: int | None) -> int | None:
    """``as_of`` (chapter c finished) as the store's exclusive ``before_chapter``."""
    return None if as_of is None else as_of + 1


DEFAULT_TEXT_SLOTS = ("text", "value")


def run_output_text(events: Sequence[AnyRunEvent], node_id: str, slot: str | None = None) -> str:
    """The text node ``node_id`` produced in a run: its newest ``node:completed`` (or
    ``node:cached``) event's ``outputs[slot]`` (default: ``text``, else ``value``), else
    its ``output``."""
    finished = [
        e for e in events if isinstance(e, NodeCompleted | NodeCached) and e.node_id == node_id
    ]
    if not finished:
        raise RunOutputNotFound(f"node {node_id!r} has not finished in this run")
    event = finished[-1]
    if slot is not None:
        value = event.outputs.get(slot)
        if not isinstance(value, str):
            raise RunOutputNotFound(f"node {node_id!r} has no text output {slot!r}")
        return value
    # A writing node says `text`; a human decision passes its `value` on.
    for name in DEFAULT_TEXT_SLOTS:
        value = event.outputs.get(name)
        if isinstance(value, str):
            return value
    return event.output


@dataclass(frozen=True)
class _Counts:
    """Word counts of one state of a book (cached per state version)."""

    state_version: int
    texts: dict[str, int]
    """path → words of its newest L2."""


class WritingStudio:
    def __init__(
        self,
        database: Database,
        project_dir: Path,
        *,
        settings: Callable[[], Settings],
        knowledge: KnowledgeService | None = None,
        publish: Callable[[CurationEvent], None] = lambda message: None,
        project_id: str = "default",
        registry: NodeRegistry | None = None,
        load_workflow: Callable[[str], Workflow] | None = None,
        save_workflow: Callable[[Workflow], object] | None = None,
    ) -> None:
        self.store = BookStore(database)
        self.corrections = MemoryCorrections(self.store)
        self.project_dir = project_dir
        self.project_id = project_id
        self._settings = settings
        self._knowledge = knowledge
        self._publish = publish
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._counts: dict[str, _Counts] = {}
        self._counts_lock = threading.Lock()
        self.curator = Curator(
            self.store,
            agent_endpoint=self.agent_endpoint,
            embeddings=self._embeddings if knowledge is not None else None,
            publish=self._emit,
        )
        self.builder: Builder | None = None
        if registry is not None and load_workflow is not None and save_workflow is not None:
            save = save_workflow

            def save_only(workflow: Workflow) -> None:
                save(workflow)

            self.builder = Builder(
                database, self.agent_endpoint, registry, load_workflow, save_only
            )

    # -- services -------------------------------------------------------------------------

    def agent_endpoint(self) -> ChatEndpoint | None:
        """The agent role's endpoint in force (its writing connection, else the agent
        model), set up or not: an unconfigured one still says why (a local model that does
        not run), which curation tells the author."""
        return writing_endpoint("agent", self._settings())

    def agent_model(self) -> WritingModelView:
        """Which model plans, checks and curates (the page says so, or that there is
        none and memory is read offline)."""
        return writing_model("agent", self._settings())

    def _embeddings(self) -> EmbeddingProvider | None:
        if self._knowledge is None:
            return None
        try:
            return self._knowledge.embedding_provider()
        except Exception:  # no usable model: curation indexes keywords only
            logger.debug("no embedding model for the writing index", exc_info=True)
            return None

    def _emit(self, message: CurationEvent) -> None:
        """Publish from the event loop whichever thread a curation step reports from."""
        loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is not None and running is not loop:
            loop.call_soon_threadsafe(self._publish, message)
        else:
            self._publish(message)

    # -- background tasks -----------------------------------------------------------------

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The event loop background work runs on (the server's)."""
        self._loop = loop

    def spawn(self, work: Callable[[], Coroutine[Any, Any, Any]], name: str) -> None:
        """Run ``work()`` in the background on the studio's loop, from that loop or from
        a worker thread (a blocking route); without a loop (a script) it is not run and
        the curation waits for the next :meth:`start`."""
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if self._loop is None and running is not None:
            self._loop = running
        loop = self._loop
        if loop is None or loop.is_closed():
            logger.info("no event loop for %s: it runs at the next start", name)
            return
        if running is loop:
            self._create(work, name)
        else:
            loop.call_soon_threadsafe(self._create, work, name)

    def _create(self, work: Callable[[], Coroutine[Any, Any, Any]], name: str) -> None:
        task = asyncio.get_running_loop().create_task(work(), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # The curator reports a failed step itself (curation:progress with the error).
            logger.error("writing task %s failed", task.get_name(), exc_info=task.exception())

    def curate_later(self, output_id: str) -> None:
        self.spawn(lambda: self.curator.process(output_id), f"curate {output_id}")

    def retry_later(self, output_id: str) -> None:
        """Re-run an output's failed curation in the background (NotFound at once when
        there is no such output)."""
        self.curator.status(output_id)
        self.spawn(lambda: self.curator.retry(output_id), f"retry {output_id}")

    def start(self) -> None:
        """Resume the curation a stopped server left unfinished (call from the loop)."""
        self.bind(asyncio.get_running_loop())
        self.spawn(self.curator.resume, "resume curation")

    async def idle(self) -> None:
        """Wait until no background task runs (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # -- books ----------------------------------------------------------------------------

    def books(self) -> list[BookSummary]:
        return [self.summary(book) for book in self.store.books(self.project_id)]

    def create_book(self, title: str, language: str = "en") -> BookSummary:
        book = self.store.create_book(title, project_id=self.project_id, language=language)
        return self.summary(book)

    def delete_book(self, book_id: str) -> None:
        self.store.delete_book(book_id)
        with self._counts_lock:
            self._counts.pop(book_id, None)

    def summary(self, book: Book) -> BookSummary:
        chapters = self.store.chapters(book.id)
        counts = self._word_counts(book.id)
        words = sum(self._chapter_words(c, counts) for c in chapters)
        return BookSummary(
            id=book.id,
            title=book.title,
            language=book.language,
            state_version=book.state_version,
            chapters=len(chapters),
            words=words,
        )

    def _word_counts(self, book_id: str) -> dict[str, int]:
        """Words of every manuscript text, counted once per state of the book."""
        state = self.store.state_version(book_id)
        with self._counts_lock:
            cached = self._counts.get(book_id)
        if cached is not None and cached.state_version == state:
            return cached.texts
        texts = self.store.latest_levels(book_id, "L2", under="/manuscript", state_version=state)
        counts = {path: count_words(text.text) for path, text in texts.items()}
        with self._counts_lock:
            self._counts[book_id] = _Counts(state, counts)
        return counts

    @staticmethod
    def _chapter_words(chapter: Resource, counts: dict[str, int]) -> int:
        own = counts.get(chapter.path)
        if own is not None:
            return own
        return sum(n for path, n in counts.items() if is_under(path, chapter.path))

    # -- the tree -------------------------------------------------------------------------

    def tree(self, book_id: str) -> Tree:
        self.store.book(book_id)
        counts = self._word_counts(book_id)
        resources = self.store.resources(book_id)
        by_parent: dict[str, list[Resource]] = {}
        for r in resources:
            by_parent.setdefault(r.parent, []).append(r)

        def chapter_node(chapter: Resource) -> ChapterNode:
            scenes = [
                SceneNode(path=s.path, title=s.title, words=counts.get(s.path, 0))
                for s in by_parent.get(chapter.path, [])
                if s.kind == "scene"
            ]
            return ChapterNode(
                path=chapter.path,
                ordinal=chapter.ordinal,
                title=chapter.title,
                words=self._chapter_words(chapter, counts),
                scenes=scenes,
            )

        arcs = [r for r in resources if r.kind == "arc"]
        arcs.sort(key=lambda r: (r.ordinal, r.path))
        manuscript: list[ArcNode] = []
        for arc in arcs:
            chapters = sorted(
                (c for c in by_parent.get(arc.path, []) if c.kind == "chapter"),
                key=lambda c: c.ordinal,
            )
            nodes = [chapter_node(c) for c in chapters]
            manuscript.append(
                ArcNode(
                    path=arc.path,
                    title=arc.title,
                    words=sum(n.words for n in nodes),
                    chapters=nodes,
                )
            )

        def under(top: str) -> list[ResNode]:
            return [
                ResNode(path=r.path, uri=r.uri, kind=r.kind, title=r.title)
                for r in resources
                if is_under(r.path, top) and r.path != top
            ]

        return Tree(
            manuscript=manuscript,
            meta=under("/meta"),
            entities=under("/entities"),
            summaries=under("/summaries"),
            profiles=under("/profiles"),
        )

    # -- one resource ---------------------------------------------------------------------

    def resource_view(self, book_id: str, path: str, as_of: int | None = None) -> ResourceView:
        resource = self.store.resource(book_id, path)
        before = _before(as_of)
        levels: dict[Level, LevelView] = {}
        for level in LEVELS:
            found = self.store.level(book_id, resource.path, level, before_chapter=before)
            if found is not None:
                levels[level] = _level_view(found)
        history = [
            LevelVersion(
                level=t.level,
                version=t.version,
                as_of_chapter=t.as_of_chapter,
                source=t.source,
                created_at=t.created_at,
            )
            for t in self.store.level_history(book_id, resource.path)
        ]
        subject = subject_of(resource) if resource.kind == "profile" else resource.path
        facts = (
            self.store.facts(book_id, subject=subject, before_chapter=before)
            if subject is not None
            else []
        )
        relations = self.store.relations(
            book_id, path=subject or resource.path, before_chapter=before
        )
        return ResourceView(
            path=resource.path,
            uri=resource.uri,
            kind=resource.kind,
            title=resource.title,
            aliases=list(resource.aliases),
            attrs=dict(resource.attrs),
            levels=levels,
            history=history,
            relations=[relation_view(r) for r in relations],
            facts=[fact_view(f) for f in facts],
            rejected_facts=[
                fact_view(f)
                for f in (self.store.rejected_facts(book_id, subject=subject) if subject else [])
                if before is None or f.chapter < before
            ],
            state_version=self.store.state_version(book_id),
        )

    def edit_resource(self, book_id: str, edit: ResourceEdit) -> ResourceView:
        """The author's edit: the resource's name, aliases and attributes, and with
        ``level`` and ``text`` a new version of that level (the old ones are kept)."""
        path = normalize_path(edit.path)
        if path.count("/") < 2:
            raise invalid("path", f"{path!r} is a top directory, not a resource")
        try:
            existing: Resource | None = self.store.resource(book_id, path)
        except NotFound:
            self.store.book(book_id)
            existing = None
        if existing is None and edit.kind in ("chapter", "arc", "scene"):
            # Chapters are numbered book-wide: only add_chapter gives them their place.
            raise invalid("kind", "add chapters with POST /chapters or an import")
        if existing is not None and existing.kind != edit.kind:
            raise invalid("kind", f"{path} is a {existing.kind}; its kind does not change")
        if (edit.level is None) != (edit.text is None):
            raise invalid("level", "give level and text together")
        kept_aliases = existing.aliases if existing else ()
        kept_attrs = existing.attrs if existing else None
        self.store.put_resource(
            book_id,
            path,
            kind=edit.kind,
            title=edit.title.strip() or (existing.title if existing else path),
            ordinal=existing.ordinal if existing else 0,
            chapter_from=existing.chapter_from if existing else edit.as_of_chapter,
            aliases=edit.aliases if edit.aliases is not None else kept_aliases,
            attrs=edit.attrs if edit.attrs is not None else kept_attrs,
        )
        if edit.level is not None and edit.text is not None:
            self.store.write_level(
                book_id, path, edit.level, edit.text, as_of_chapter=edit.as_of_chapter
            )
        return self.resource_view(book_id, path)

    # -- chapters -------------------------------------------------------------------------

    def add_chapter(
        self, book_id: str, title: str, text: str = "", arc: str | None = None
    ) -> ChapterNode:
        chapter = self.store.add_chapter(book_id, title, arc=arc)
        if text.strip():
            self.keep_chapter(book_id, chapter.ordinal, text)
        return self.chapter_node(book_id, chapter.ordinal)

    def keep_chapter(self, book_id: str, ordinal: int, text: str) -> PersistedOutput:
        """The author's text of a chapter, stored now and curated in the background."""
        self.store.chapter(book_id, ordinal)
        persisted = self.curator.persist(book_id, chapter=ordinal, text=text)
        if persisted.created:
            self.curate_later(persisted.output_id)
        return persisted

    def chapter_node(self, book_id: str, ordinal: int) -> ChapterNode:
        chapter = self.store.chapter(book_id, ordinal)
        counts = self._word_counts(book_id)
        return ChapterNode(
            path=chapter.path,
            ordinal=chapter.ordinal,
            title=chapter.title,
            words=self._chapter_words(chapter, counts),
        )

    # -- curated outputs ------------------------------------------------------------------

    def persist_output(
        self,
        events: Sequence[AnyRunEvent],
        *,
        run_id: str,
        node_id: str,
        book_id: str,
        chapter: int,
        slot: str | None = None,
        tags: Sequence[str] = (),
    ) -> PersistedOutput:
        """Keep what node ``node_id`` wrote in run ``run_id`` as chapter ``chapter``: stored
        at once, curated in the background (persisting it again changes nothing)."""
        text = run_output_text(events, node_id, slot)
        try:
            self.store.chapter(book_id, chapter)
        except NotFound:
            # The chapter workflow writes the next chapter before it exists in the tree.
            self.store.add_chapter(book_id, "", ordinal=chapter)
        persisted = self.curator.persist(
            book_id, chapter=chapter, text=text, run_id=run_id, node_id=node_id, tags=tags
        )
        if persisted.created:
            self.curate_later(persisted.output_id)
        return persisted

    def outputs(self, book_id: str) -> list[OutputView]:
        self.store.book(book_id)
        return [
            OutputView(
                output_id=o.output_id,
                chapter=o.chapter,
                run_id=o.run_id,
                node_id=o.node_id,
                persisted_at=o.persisted_at,
                steps=dict(o.steps),
                error=o.error,
                reasons=dict(o.reasons),
                reason_terms=dict(o.reason_terms),
            )
            for o in self.curator.outputs(book_id)
        ]

    def warnings(self, book_id: str, chapter: int | None = None) -> list[ConsistencyWarning]:
        self.store.book(book_id)
        return self.curator.warnings(book_id, chapter)

    def mark_intentional(self, warning_id: int, intentional: bool) -> ConsistencyWarning:
        return self.curator.mark_intentional(warning_id, intentional)

    # -- graph, threads, search -----------------------------------------------------------

    def graph(self, book_id: str, as_of: int | None = None) -> GraphView:
        before = _before(as_of)
        entities = [
            r for r in self.store.entities(book_id) if before is None or r.chapter_from < before
        ]
        edges = self.store.relations(book_id, before_chapter=before)
        nodes = {r.path: GraphNode(path=r.path, title=r.title, kind=r.kind) for r in entities}
        for edge in edges:
            for path in (edge.from_path, edge.to_path):
                if path not in nodes:
                    nodes[path] = self._graph_node(book_id, path)
        return GraphView(nodes=list(nodes.values()), edges=[relation_view(e) for e in edges])

    def _graph_node(self, book_id: str, path: str) -> GraphNode:
        try:
            r = self.store.resource(book_id, path)
        except NotFound:
            return GraphNode(path=path, title=path.rsplit("/", 1)[-1], kind="missing")
        return GraphNode(path=r.path, title=r.title, kind=r.kind)

    def threads(self, book_id: str) -> list[ThreadView]:
        """Plot threads with where each was planted, is due and paid off; one is overdue
        when its chapter is past (the book has gone beyond it) and it is not paid off."""
        chapters = self.store.chapters(book_id)
        last = chapters[-1].ordinal if chapters else 0
        out: list[ThreadView] = []
        for r in self.store.resources(book_id, "/entities/plot-threads", kinds=["plot-thread"]):
            planted, due, paid = (_chapter_attr(r.attrs, k) for k in ("planted", "due", "paidOff"))
            out.append(
                ThreadView(
                    path=r.path,
                    title=r.title,
                    planted=planted,
                    due=due,
                    paid_off=paid,
                    overdue=due is not None and paid is None and due < last,
                )
            )
        return out

    async def search(self, book_id: str, request: SearchRequest) -> list[SearchHitView]:
        await asyncio.to_thread(self.store.book, book_id)
        provider = self._embeddings()
        vector: list[float] | None = None
        model_id: str | None = None
        if provider is not None and await asyncio.to_thread(
            self.store.has_vectors, book_id, provider.model_id
        ):
            # The query is embedded only when the book's texts have vectors of this model.
            model_id = provider.model_id
            vector = await provider.embed_query(request.query)
        hits = await asyncio.to_thread(
            partial(
                self.store.search,
                book_id,
                request.query,
                under=request.under,
                levels=request.levels,
                top_k=request.top_k,
                before_chapter=_before(request.as_of),
                query_vector=vector,
                model_id=model_id,
            )
        )
        titles = {r.path: r.title for r in self.store.resources(book_id)}
        return [
            SearchHitView(
                path=h.path,
                uri=resource_uri(book_id, h.path),
                level=h.level,
                score=h.score,
                title=titles.get(h.path, h.path),
            )
            for h in hits
        ]

    # -- context (Role A) -----------------------------------------------------------------

    def context(self, book_id: str, body: ContextBody) -> ContextView:
        self.store.book(book_id)
        assembled = assemble_context(
            self.store,
            ContextRequest(
                book_id=book_id,
                chapter=body.chapter,
                prompt=body.prompt,
                outline=body.outline,
                scene_type=body.scene_type,
                budget_tokens=body.budget_tokens,
            ),
        )
        labels = self.source_labels(book_id, [p.uri for p in assembled.pieces])
        return ContextView(
            text=assembled.text,
            tokens=assembled.tokens,
            budget_tokens=assembled.budget_tokens,
            state_version=assembled.state_version,
            pieces=[
                ContextPieceView(
                    uri=p.uri,
                    path=p.path,
                    label=label,
                    level=p.level,
                    version=p.version,
                    reason=p.reason,
                    tokens=p.tokens,
                    text=p.text,
                )
                for p, label in zip(assembled.pieces, labels, strict=True)
            ],
        )

    def source_labels(self, book_id: str, uris: Sequence[str]) -> list[SourceLabel]:
        """Each address as a person reads it: the chapter's number and title, the
        entity's name (as the book names it now; one gone since keeps its path)."""
        self.store.book(book_id)
        known = {r.path: r for r in self.store.resources(book_id)}
        labels: list[SourceLabel] = []
        for index, uri in enumerate(uris):
            address, fragment, _ = uri.partition("#")
            owner, path = parse_uri(address)
            if owner != book_id:
                raise invalid(f"uris[{index}]", f"{uri!r} is not in book {book_id}")
            found = known.get(path)
            if found is None:
                labels.append(SourceLabel(uri=uri, kind=None, title=path, passage=bool(fragment)))
                continue
            labels.append(
                SourceLabel(
                    uri=uri,
                    kind=found.kind,
                    title=found.title,
                    chapter=found.ordinal if found.kind == "chapter" else None,
                    passage=bool(fragment),
                )
            )
        return labels

    def rebuild(self, book_id: str, sources: Sequence[SourceRef]) -> str:
        self.store.book(book_id)
        for index, source in enumerate(sources):
            owner, _ = parse_uri(source.uri)
            if owner != book_id:
                raise invalid(f"sources[{index}].uri", f"{source.uri!r} is not in book {book_id}")
        return rebuild_context(
            self.store,
            [
                ContextSource(uri=s.uri, reason=s.reason, level=s.level, version=s.version)
                for s in sources
            ],
        )

    # -- import and export ----------------------------------------------------------------

    @staticmethod
    def preview_import(data: bytes, filename: str) -> ImportPreviewView:
        preview = parse_manuscript(data, filename)
        return ImportPreviewView(
            format=preview.format,
            title=preview.title,
            chapters=[
                ImportChapter(title=c.title, text=c.text, words=c.words) for c in preview.chapters
            ],
        )

    def import_chapters(
        self, book_id: str, chapters: Sequence[ChapterToImport], arc: str | None = None
    ) -> ImportedChapters:
        """Append the chapters (as the author edited the preview); each is kept, so its
        curation makes it part of the book's memory. The answer names the curation started,
        so that the page can follow an import's progress as a whole."""
        self.store.book(book_id)
        added = [(self.store.add_chapter(book_id, d.title, arc=arc), d.text) for d in chapters]
        if added:
            # Before curation starts: its chapters then find these people by name.
            import_entities(self.store, book_id, [t for _, t in added], added[0][0].ordinal)
        started: list[CurationStarted] = []
        for chapter, text in added:
            if text.strip():
                kept = self.keep_chapter(book_id, chapter.ordinal, text)
                if kept.created:
                    started.append(CurationStarted(output_id=kept.output_id, chapter=kept.chapter))
        return ImportedChapters(tree=self.tree(book_id), curation=started)

    def export(self, book_id: str, fmt: str) -> tuple[bytes, str, str]:
        """``(content, file name, media type)`` of the book's current text."""
        book = self.store.book(book_id)
        texts = self.store.latest_levels(book_id, "L2", under="/manuscript")
        chapters = []
        for chapter in self.store.chapters(book_id):
            own = texts.get(chapter.path)
            if own is not None:
                text = own.text
            else:
                parts = [t.text for p, t in sorted(texts.items()) if is_under(p, chapter.path)]
                text = "\n\n".join(parts)
            chapters.append(ExportChapter(title=chapter.title, text=text))
        exported = ExportBook(
            title=book.title, language=book.language, book_id=book.id, chapters=chapters
        )
        return export_book(exported, fmt)

    # -- Role B ---------------------------------------------------------------------------

    def _require_builder(self) -> Builder:
        if self.builder is None:
            raise Unavailable("Role B needs the project's workflows and node types")
        return self.builder

    async def suggest(self, intent: str, current_workflow: str | None) -> Suggestion:
        return await self._require_builder().request(intent, current_workflow)

    def accept_suggestion(self, suggestion_id: str, modifications: str | None = None) -> str:
        """Apply the suggestion and save its workflow; answers the workflow's id."""
        return self._require_builder().accept(suggestion_id, modifications).id

    def reject_suggestion(self, suggestion_id: str, reason: str | None = None) -> None:
        self._require_builder().reject(suggestion_id, reason)

    # -- the chapter workflow -------------------------------------------------------------

    def chapter_workflow(self) -> str:
        return ensure_chapter_workflow(self.project_dir).id


def _level_view(text: LevelText) -> LevelView:
    return LevelView(
        text=text.text,
        version=text.version,
        as_of_chapter=text.as_of_chapter,
        tokens=text.tokens,
        source=text.source,
    )


def _chapter_attr(attrs: Any, key: str) -> int | None:
    value = attrs.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None
