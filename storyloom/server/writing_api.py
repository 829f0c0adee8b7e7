"""``/api/writing``: the Writing page's books, their resources, curation and Role A.

A thin mapping onto :class:`storyloom.writing.studio.WritingStudio`: the views are built
there, errors are the domain's kinds (answered in :mod:`.api_errors`). Routes are blocking
(the thread pool runs them); the studio hands the curation they start to the event loop.
"As of chapter c" (``asOf``) is the book as it stood when chapter c was finished.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, File, Path, Query, Request, Response, UploadFile

from storyloom.server.api_errors import error_responses, upload_errors
from storyloom.server.file_transfer import download, read_named_upload
from storyloom.server.state import server_state
from storyloom.writing.studio import WritingStudio
from storyloom.writing.views import (
    MAX_CHAPTER,
    BookSummary,
    ChapterNode,
    ChapterSaved,
    ChapterText,
    ChapterWorkflowView,
    ContextBody,
    ContextView,
    EntityEdit,
    ExportFormat,
    FactEdit,
    FactList,
    FactRef,
    FactVersionView,
    GraphView,
    ImportBody,
    ImportedChapters,
    ImportPreviewView,
    IntentionalBody,
    LabelsBody,
    MergeBody,
    NewBook,
    NewChapter,
    NewEntity,
    NewFact,
    NewRelation,
    OutputView,
    RebuildBody,
    RebuiltContext,
    ResourceEdit,
    ResourceView,
    RetryAccepted,
    SearchHitView,
    SearchRequest,
    SourceLabel,
    ThreadView,
    Tree,
)
from storyloom.writing.warnings import ConsistencyWarning
from storyloom.writing.writing_connections import WritingModelView

router = APIRouter(prefix="/api/writing", tags=["writing"])

_ERRORS = error_responses(404, 422)
_WRITE_ERRORS = error_responses(404, 409, 422)

BookId = Annotated[str, Path(min_length=1, max_length=200)]
AsOf = Annotated[
    int | None,
    Query(alias="asOf", ge=0, le=MAX_CHAPTER, description="The book as of this chapter's end"),
]


def _studio(request: Request) -> WritingStudio:
    return server_state(request).writing


# -- books ----------------------------------------------------------------------------------


@router.get("/books", response_model=list[BookSummary])
def list_books(request: Request) -> list[BookSummary]:
    return _studio(request).books()


@router.post("/books", status_code=201, response_model=BookSummary, responses=_ERRORS)
def create_book(request: Request, body: NewBook) -> BookSummary:
    return _studio(request).create_book(body.title, body.language)


@router.delete("/books/{book_id}", status_code=204, responses=_ERRORS)
def delete_book(request: Request, book_id: BookId) -> Response:
    _studio(request).delete_book(book_id)
    return Response(status_code=204)


@router.get("/books/{book_id}/tree", response_model=Tree, responses=_ERRORS)
def book_tree(request: Request, book_id: BookId) -> Tree:
    """Arcs, chapters and scenes with word counts; the other four directories' resources."""
    return _studio(request).tree(book_id)


# -- resources ------------------------------------------------------------------------------


@router.get("/books/{book_id}/resource", response_model=ResourceView, responses=_ERRORS)
def get_resource(
    request: Request,
    book_id: BookId,
    path: Annotated[str, Query(min_length=1, max_length=1_000)],
    as_of: AsOf = None,
) -> ResourceView:
    """One resource: its L0/L1/L2 as of a chapter (default: newest), every version, its
    relations and the facts about it (a profile: about its subject)."""
    return _studio(request).resource_view(book_id, path, as_of)


@router.put("/books/{book_id}/resource", response_model=ResourceView, responses=_WRITE_ERRORS)
def put_resource(request: Request, book_id: BookId, body: ResourceEdit) -> ResourceView:
    """The author's edit; a text is a new version of its level, the old ones kept."""
    return _studio(request).edit_resource(book_id, body)


@router.post(
    "/books/{book_id}/chapters", status_code=201, response_model=ChapterNode, responses=_ERRORS
)
def add_chapter(request: Request, book_id: BookId, body: NewChapter) -> ChapterNode:
    """A chapter after the last one; its text (if any) is kept and curated."""
    return _studio(request).add_chapter(book_id, body.title, body.text, body.arc)


@router.put("/books/{book_id}/chapters/{ordinal}", response_model=ChapterSaved, responses=_ERRORS)
def save_chapter(
    request: Request,
    book_id: BookId,
    ordinal: Annotated[int, Path(ge=1, le=MAX_CHAPTER)],
    body: ChapterText,
) -> ChapterSaved:
    """The author's text of the chapter: stored now, curated in the background (the
    same text again changes nothing)."""
    studio = _studio(request)
    persisted = studio.keep_chapter(book_id, ordinal, body.text)
    return ChapterSaved(
        chapter=studio.chapter_node(book_id, ordinal),
        output_id=persisted.output_id,
        created=persisted.created,
    )


# -- the author's corrections of memory -----------------------------------------------------

PathParam = Annotated[str, Query(min_length=1, max_length=1_000)]


@router.get("/books/{book_id}/facts", response_model=FactList, responses=_ERRORS)
def list_facts(
    request: Request,
    book_id: BookId,
    subject: Annotated[str | None, Query(min_length=1, max_length=1_000)] = None,
    as_of: AsOf = None,
) -> FactList:
    """The book's facts (about ``subject``), each with its sentence, chapter and who made
    it (author, agent or prose), and the facts the author rejected."""
    before = None if as_of is None else as_of + 1
    return _studio(request).corrections.fact_list(book_id, subject, before)


@router.get(
    "/books/{book_id}/facts/history", response_model=list[FactVersionView], responses=_ERRORS
)
def fact_history(
    request: Request,
    book_id: BookId,
    subject: PathParam,
    attribute: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    chapter: Annotated[int | None, Query(ge=0, le=MAX_CHAPTER)] = None,
) -> list[FactVersionView]:
    """Every version of the subject's facts: set, edited, rejected, un-rejected, merged."""
    return _studio(request).corrections.fact_history(book_id, subject, attribute, chapter)


@router.post("/books/{book_id}/facts", status_code=201, response_model=FactList, responses=_ERRORS)
def add_fact(request: Request, book_id: BookId, body: NewFact) -> FactList:
    """The author's fact: it wins over an extracted one of the same subject, attribute
    and chapter. Answers the subject's facts."""
    return _studio(request).corrections.add_fact(book_id, body)


@router.put("/books/{book_id}/facts", response_model=FactList, responses=_ERRORS)
def edit_fact(request: Request, book_id: BookId, body: FactEdit) -> FactList:
    """A new version of the fact, made by the author (the old one is kept in its history)."""
    return _studio(request).corrections.edit_fact(book_id, body)


@router.post("/books/{book_id}/facts/reject", response_model=FactList, responses=_ERRORS)
def reject_fact(request: Request, book_id: BookId, body: FactRef) -> FactList:
    """Out of memory, and never brought back by curating its chapter again."""
    return _studio(request).corrections.reject_fact(book_id, body)


@router.post("/books/{book_id}/facts/unreject", response_model=FactList, responses=_ERRORS)
def unreject_fact(request: Request, book_id: BookId, body: FactRef) -> FactList:
    return _studio(request).corrections.unreject_fact(book_id, body)


@router.post(
    "/books/{book_id}/entities", status_code=201, response_model=ResourceView, responses=_ERRORS
)
def add_entity(request: Request, book_id: BookId, body: NewEntity) -> ResourceView:
    studio = _studio(request)
    return studio.resource_view(book_id, studio.corrections.add_entity(book_id, body))


@router.put("/books/{book_id}/entities", response_model=ResourceView, responses=_ERRORS)
def edit_entity(request: Request, book_id: BookId, body: EntityEdit) -> ResourceView:
    """The entity's name and aliases."""
    studio = _studio(request)
    return studio.resource_view(book_id, studio.corrections.edit_entity(book_id, body))


@router.post("/books/{book_id}/entities/merge", response_model=ResourceView, responses=_ERRORS)
def merge_entities(request: Request, book_id: BookId, body: MergeBody) -> ResourceView:
    """Two names for one entity: ``from``'s name becomes an alias of ``into``, its facts
    and relations move over, and later extractions naming it land on ``into``."""
    studio = _studio(request)
    return studio.resource_view(book_id, studio.corrections.merge(book_id, body))


@router.post(
    "/books/{book_id}/relations", status_code=201, response_model=ResourceView, responses=_ERRORS
)
def add_relation(request: Request, book_id: BookId, body: NewRelation) -> ResourceView:
    """The author's relation; answers the view of its ``from`` end."""
    studio = _studio(request)
    return studio.resource_view(book_id, studio.corrections.add_relation(book_id, body))


@router.delete("/books/{book_id}/relations", response_model=ResourceView, responses=_ERRORS)
def reject_relation(
    request: Request,
    book_id: BookId,
    from_: Annotated[str, Query(alias="from", min_length=1, max_length=1_000)],
    to: PathParam,
    kind: Annotated[str, Query(min_length=1, max_length=200)],
) -> ResourceView:
    """Out of memory, and never brought back by curation; answers the ``from`` end."""
    studio = _studio(request)
    return studio.resource_view(
        book_id, studio.corrections.reject_relation(book_id, from_, to, kind)
    )


# -- graph, search, threads -----------------------------------------------------------------


@router.get("/books/{book_id}/graph", response_model=GraphView, responses=_ERRORS)
def book_graph(request: Request, book_id: BookId, as_of: AsOf = None) -> GraphView:
    return _studio(request).graph(book_id, as_of)


@router.post("/books/{book_id}/search", response_model=list[SearchHitView], responses=_ERRORS)
async def search_book(
    request: Request, book_id: BookId, body: SearchRequest
) -> list[SearchHitView]:
    """Hybrid search (keywords, and vectors once the book's texts are embedded) over the
    indexed levels, scoped to a directory."""
    return await _studio(request).search(book_id, body)


@router.get("/books/{book_id}/threads", response_model=list[ThreadView], responses=_ERRORS)
def plot_threads(request: Request, book_id: BookId) -> list[ThreadView]:
    return _studio(request).threads(book_id)


# -- context (Role A) -----------------------------------------------------------------------


@router.post("/books/{book_id}/context", response_model=ContextView, responses=_ERRORS)
def assemble(request: Request, book_id: BookId, body: ContextBody) -> ContextView:
    """The context Role A gives a node writing ``chapter`` (the same book state gives
    the same context), each piece with where it came from."""
    return _studio(request).context(book_id, body)


@router.post("/books/{book_id}/context/rebuild", response_model=RebuiltContext, responses=_ERRORS)
def rebuild(request: Request, book_id: BookId, body: RebuildBody) -> RebuiltContext:
    """The text a node saw, rebuilt from its ``contextSources``."""
    return RebuiltContext(text=_studio(request).rebuild(book_id, body.sources))


@router.post("/books/{book_id}/context/labels", response_model=list[SourceLabel], responses=_ERRORS)
def labels(request: Request, book_id: BookId, body: LabelsBody) -> list[SourceLabel]:
    """What each context address names (a chapter's title, an entity's name), in order:
    the Provenance tab shows these instead of ``viking://`` addresses."""
    return _studio(request).source_labels(book_id, body.uris)


# -- curation -------------------------------------------------------------------------------


@router.get("/agent-model", response_model=WritingModelView)
def agent_model(request: Request) -> WritingModelView:
    """Which model plans, checks and curates: a writing connection, the agent model, or
    the user's model when no agent model is set up; ``ready`` false: memory steps are
    skipped (the offline reader still reads the prose)."""
    return _studio(request).agent_model()


@router.get("/books/{book_id}/outputs", response_model=list[OutputView], responses=_ERRORS)
def list_outputs(request: Request, book_id: BookId) -> list[OutputView]:
    return _studio(request).outputs(book_id)


@router.post(
    "/outputs/{output_id}/retry", status_code=202, response_model=RetryAccepted, responses=_ERRORS
)
def retry_output(
    request: Request, output_id: Annotated[str, Path(min_length=1, max_length=200)]
) -> RetryAccepted:
    """Run the output's failed (and unfinished) curation steps again, in the background."""
    _studio(request).retry_later(output_id)
    return RetryAccepted(output_id=output_id)


@router.get("/books/{book_id}/warnings", response_model=list[ConsistencyWarning], responses=_ERRORS)
def list_warnings(
    request: Request,
    book_id: BookId,
    chapter: Annotated[int | None, Query(ge=1, le=MAX_CHAPTER)] = None,
) -> list[ConsistencyWarning]:
    return _studio(request).warnings(book_id, chapter)


@router.post(
    "/warnings/{warning_id}/intentional", response_model=ConsistencyWarning, responses=_ERRORS
)
def mark_intentional(
    request: Request,
    warning_id: Annotated[int, Path(ge=1, le=2**63 - 1)],
    body: IntentionalBody,
) -> ConsistencyWarning:
    """An intentional warning stays quiet: the check does not raise it again."""
    return _studio(request).mark_intentional(warning_id, body.intentional)


# -- import, export, the chapter workflow ---------------------------------------------------


@router.post("/import/preview", response_model=ImportPreviewView, responses=_ERRORS)
async def preview_import(
    request: Request,
    file: Annotated[UploadFile, File(description="A Markdown, plain-text or DOCX manuscript")],
) -> ImportPreviewView:
    """The chapters found in the file, for the author to edit; nothing is stored."""
    filename, data = await read_named_upload(request, file)
    with upload_errors(filename):
        return await asyncio.to_thread(WritingStudio.preview_import, data, filename)


@router.post("/books/{book_id}/import", response_model=ImportedChapters, responses=_ERRORS)
def import_chapters(request: Request, book_id: BookId, body: ImportBody) -> ImportedChapters:
    """Append the previewed chapters; each is kept and curated in the background (the
    answer names each chapter's output, whose ``curation:progress`` the page follows)."""
    return _studio(request).import_chapters(book_id, body.chapters, body.arc)


@router.get("/books/{book_id}/export", responses=_ERRORS)
def export_book(
    request: Request, book_id: BookId, format: Annotated[ExportFormat, Query()] = "markdown"
) -> Response:
    """The book's current text as a Markdown, DOCX or EPUB file."""
    data, filename, media_type = _studio(request).export(book_id, format)
    return download(data, filename, media_type)


@router.post(
    "/books/{book_id}/chapter-workflow", response_model=ChapterWorkflowView, responses=_ERRORS
)
def chapter_workflow(request: Request, book_id: BookId) -> ChapterWorkflowView:
    """The built-in chapter workflow, written into the project when it is missing."""
    studio = _studio(request)
    studio.store.book(book_id)
    return ChapterWorkflowView(workflow_id=studio.chapter_workflow())
