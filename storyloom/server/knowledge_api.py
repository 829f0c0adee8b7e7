"""``/api/knowledge``: the project's knowledge bases for the web app.

Reads come from :class:`~storyloom.project.knowledge_service.KnowledgeService`, which
reloads when files change. Writes validate the whole document first (422 with the JSON
path of every problem, nothing written) and then save atomically.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, File, Form, Query, Request, UploadFile
from fastapi.responses import Response
from pydantic import BaseModel, Field

from storyloom.chat.personalab.card_reimport import CardReimport
from storyloom.chat.personalab.library import PresetLibrary
from storyloom.chat.personalab.personas import PersonaLibrary
from storyloom.chat.service.kb_referrers import Referrer, forget_kb, kb_referrers
from storyloom.chat.store.st_chat import conversation_importer
from storyloom.core.errors import Conflict, FieldProblem, InvalidInput
from storyloom.knowledge.activation import ActivationResult, Reason, ScanMessage
from storyloom.knowledge.activation_settings import ActivationSettings
from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.catalog import LoadedKB
from storyloom.knowledge.entry_media import MAX_MEDIA_BYTES, read_entry_image
from storyloom.knowledge.knowledge_base import (
    KnowledgeBase,
    VectorIndexInfo,
    knowledge_base_schema,
    now_iso,
)
from storyloom.knowledge.st_export import export_world_info
from storyloom.project.knowledge_service import EmbeddingState, KnowledgeService, Snapshot
from storyloom.project.project_file import folder_slug
from storyloom.server.api_errors import (
    CardConflictBody,
    EmbeddingChoiceBody,
    ErrorBody,
    UploadTooLarge,
    error_responses,
    field_errors,
    upload_errors,
)
from storyloom.server.file_transfer import (
    CardConflictChoice,
    download,
    read_named_upload,
    too_large,
    upload_limit,
    upload_name,
)
from storyloom.server.state import server_state

router = APIRouter(prefix="/api/knowledge", tags=["knowledge"])
_ERRORS = error_responses(404, 422)


def _service(request: Request) -> KnowledgeService:
    return server_state(request).knowledge


# -- list / create ---------------------------------------------------------------------


class KnowledgeBaseSummary(BaseModel):
    kb_id: str
    displayName: str
    description: str
    scope: Literal["local", "global"]
    referenced: bool = Field(description="Named by the project's knowledgeBaseReferences")
    reference_ids: list[str]
    aliases: list[str]
    folder: str
    entry_count: int
    total_tokens: int = Field(description="Sum of the entries' text tokens (user LLM tokenizer)")
    embedding_model_id: str | None
    vector_index: VectorIndexInfo | None = Field(
        default=None, description="Model, dimension and index type its vectors were built with"
    )
    problems: list[str]
    enabled: bool = Field(default=True, description="Off: scanned in no chat")
    global_lore: bool = Field(
        default=False, description="In the project's global list: scanned in every chat"
    )


class ProjectInfo(BaseModel):
    root: str
    name: str


class KnowledgeBaseList(BaseModel):
    project: ProjectInfo
    bases: list[KnowledgeBaseSummary]
    problems: list[str] = Field(description="Project-level problems: unreadable KBs, ...")


def _summary(service: KnowledgeService, snap: Snapshot, loaded: LoadedKB) -> KnowledgeBaseSummary:
    kb = loaded.kb
    tokens = service.kb_tokens(kb)
    folder = str(loaded.folder)
    problems = [p for p in snap.knowledge.problems if folder in p]
    return KnowledgeBaseSummary(
        kb_id=kb.kb_id,
        displayName=kb.kb_displayName,
        description=kb.kb_description,
        scope=loaded.scope,
        referenced=bool(loaded.reference_ids),
        reference_ids=list(loaded.reference_ids),
        aliases=list(loaded.aliases),
        folder=folder,
        entry_count=len(kb.entries),
        total_tokens=sum(tokens.values()),
        vector_index=kb.vector_index,
        embedding_model_id=kb.embedding_model_id,
        problems=problems,
        enabled=kb.enabled,
        global_lore=kb.kb_id in snap.knowledge.project.globalKnowledgeBases,
    )


@router.get("/bases", response_model=KnowledgeBaseList)
def list_bases(request: Request) -> KnowledgeBaseList:
    service = _service(request)
    snap = service.snapshot()
    bases = [_summary(service, snap, loaded) for loaded in snap.knowledge.catalog.bases]
    project = snap.knowledge.project
    return KnowledgeBaseList(
        project=ProjectInfo(root=str(snap.knowledge.root), name=project.name),
        bases=bases,
        problems=list(snap.knowledge.problems),
    )


class CreateKnowledgeBase(BaseModel):
    displayName: str = Field(min_length=1, max_length=200)
    description: str = ""
    scope: Literal["local", "global"] = "local"


@router.post("/bases", response_model=KnowledgeBaseSummary, status_code=201, responses=_ERRORS)
async def create_base(request: Request, body: CreateKnowledgeBase) -> KnowledgeBaseSummary:
    """A new, empty KB: in the project (referenced by project.json) or the global folder."""
    service = _service(request)
    now = now_iso()
    kb = KnowledgeBase(
        kb_displayName=body.displayName.strip(),
        kb_description=body.description,
        created_at=now,
        updated_at=now,
    )
    loaded = await asyncio.to_thread(service.create, kb, body.scope)
    return await asyncio.to_thread(_summary, service, service.snapshot(), loaded)


@router.post(
    "/bases/{kb_id}/reference",
    response_model=KnowledgeBaseSummary,
    responses={**_ERRORS, **error_responses(409)},
)
async def reference_base(request: Request, kb_id: str) -> KnowledgeBaseSummary:
    """Reference a global KB in project.json (seed 000, 4.3: a node picked it).

    Answers the KB with its reference id; a KB already referenced is answered unchanged.
    """
    service = _service(request)
    loaded = await asyncio.to_thread(service.reference_global, kb_id)
    return await asyncio.to_thread(_summary, service, service.snapshot(), loaded)


# -- one KB ----------------------------------------------------------------------------


class KnowledgeBaseDocument(BaseModel):
    knowledge_base: KnowledgeBase = Field(description="The knowledge.json content, as stored")
    scope: Literal["local", "global"]
    folder: str
    entry_tokens: dict[str, int] = Field(description="Tokens of each entry's text, by entry id")
    total_tokens: int


def _document(service: KnowledgeService, loaded: LoadedKB) -> KnowledgeBaseDocument:
    kb = loaded.kb
    tokens = service.kb_tokens(kb)
    return KnowledgeBaseDocument(
        knowledge_base=kb,
        scope=loaded.scope,
        folder=str(loaded.folder),
        entry_tokens=tokens,
        total_tokens=sum(tokens.values()),
    )


@router.get("/bases/{kb_id}", response_model=KnowledgeBaseDocument, responses=_ERRORS)
def get_base(request: Request, kb_id: str) -> KnowledgeBaseDocument:
    service = _service(request)
    return _document(service, service.snapshot().require(kb_id))


@router.put("/bases/{kb_id}", response_model=KnowledgeBaseDocument, responses=_ERRORS)
async def put_base(request: Request, kb_id: str, body: KnowledgeBase) -> KnowledgeBaseDocument:
    """Replace the KB; entries are saved in the order given (drag-to-reorder saves this way)."""
    service = _service(request)
    if body.kb_id != kb_id:
        problem = FieldProblem("kb_id", f"must be {kb_id}, the kb_id in the URL")
        raise InvalidInput.of("knowledge base", [problem])
    loaded = await asyncio.to_thread(service.replace, body)
    service.embed_later([loaded])
    return await asyncio.to_thread(_document, service, loaded)


_MEDIA_ERRORS = error_responses(404, 413, 422)


@router.post(
    "/bases/{kb_id}/entries/{entry_id}/media",
    response_model=KnowledgeBaseDocument,
    responses=_MEDIA_ERRORS,
)
async def upload_entry_media(
    request: Request,
    kb_id: str,
    entry_id: str,
    file: Annotated[UploadFile, File(description="A PNG, JPEG, GIF or WebP image")],
) -> KnowledgeBaseDocument:
    """Attach an image to a saved entry: written into the KB's ``media/`` folder (type
    by its bytes, at most 10 MB), the entry's ``content.path``/``mime_type`` set to it;
    its text stays, as the stand-in a model without vision is sent."""
    service = _service(request)
    service.snapshot().require(kb_id)
    filename, data = await read_named_upload(
        request, file, min(upload_limit(request), MAX_MEDIA_BYTES)
    )
    loaded = await asyncio.to_thread(service.attach_image, kb_id, entry_id, data, filename)
    return await asyncio.to_thread(_document, service, loaded)


@router.delete(
    "/bases/{kb_id}/entries/{entry_id}/media",
    response_model=KnowledgeBaseDocument,
    responses=_ERRORS,
)
async def remove_entry_media(request: Request, kb_id: str, entry_id: str) -> KnowledgeBaseDocument:
    """Take an entry's image away: the entry is saved naming none (its text stays what
    every model is sent), then the image storyloom stored for it is deleted."""
    service = _service(request)
    service.snapshot().require(kb_id)
    loaded = await asyncio.to_thread(service.detach_image, kb_id, entry_id)
    return await asyncio.to_thread(_document, service, loaded)


@router.get("/bases/{kb_id}/entries/{entry_id}/media", responses=_ERRORS)
def entry_media(request: Request, kb_id: str, entry_id: str) -> Response:
    """The entry's image, served as what its bytes are (anything else: 404)."""
    loaded = _service(request).snapshot().require(kb_id)
    data, media_type = read_entry_image(loaded.kb, loaded.folder, entry_id)
    return Response(
        data,
        media_type=media_type,
        headers={"cache-control": "no-cache", "x-content-type-options": "nosniff"},
    )


class KnowledgeBasePatch(BaseModel):
    displayName: str | None = Field(default=None, min_length=1, max_length=200)
    enabled: bool | None = Field(default=None, description="Off: scanned in no chat")


@router.patch("/bases/{kb_id}", response_model=KnowledgeBaseSummary, responses=_ERRORS)
async def patch_base(
    request: Request, kb_id: str, body: KnowledgeBasePatch
) -> KnowledgeBaseSummary:
    """Rename the KB or switch it on or off; its entries stay as they are."""
    service = _service(request)
    name = body.displayName.strip() if body.displayName is not None else None
    if name == "":
        raise InvalidInput.of("knowledge base", [FieldProblem("displayName", "is empty")])
    loaded = await asyncio.to_thread(
        functools.partial(service.update_base, kb_id, display_name=name, enabled=body.enabled)
    )
    return await asyncio.to_thread(_summary, service, service.snapshot(), loaded)


class DuplicateRequest(BaseModel):
    displayName: str | None = Field(default=None, min_length=1, max_length=200)


@router.post(
    "/bases/{kb_id}/duplicate",
    response_model=KnowledgeBaseSummary,
    status_code=201,
    responses=_ERRORS,
)
async def duplicate_base(
    request: Request, kb_id: str, body: DuplicateRequest | None = None
) -> KnowledgeBaseSummary:
    """A copy of the KB under a new kb_id ("<name> (copy)"), bound to nothing."""
    service = _service(request)
    name = body.displayName.strip() if body is not None and body.displayName else None
    loaded = await asyncio.to_thread(service.duplicate, kb_id, name)
    service.embed_later([loaded])
    return await asyncio.to_thread(_summary, service, service.snapshot(), loaded)


class ReferrerOut(BaseModel):
    kind: Literal["global", "chat", "character", "persona", "knowledge_base"]
    id: str
    name: str


class ReferrerList(BaseModel):
    kb_id: str
    displayName: str
    referrers: list[ReferrerOut] = Field(
        description="What names the KB: the global list, chats, characters, personas, "
        "other KBs' references"
    )


def _libraries(request: Request) -> tuple[PresetLibrary, PersonaLibrary]:
    state = server_state(request)
    root = state.knowledge.project_dir
    return state.chat.presets or PresetLibrary(root), PersonaLibrary(root)


def _referrers(request: Request, kb_id: str) -> list[Referrer]:
    state = server_state(request)
    presets, personas = _libraries(request)
    return kb_referrers(
        kb_id, knowledge=state.knowledge, chat=state.chat, presets=presets, personas=personas
    )


def _referrer_list(service: KnowledgeService, kb_id: str, found: list[Referrer]) -> ReferrerList:
    loaded = service.snapshot().require(kb_id)
    return ReferrerList(
        kb_id=kb_id,
        displayName=loaded.kb.display_name,
        referrers=[ReferrerOut(kind=r.kind, id=r.id, name=r.name) for r in found],
    )


@router.get("/bases/{kb_id}/referrers", response_model=ReferrerList, responses=_ERRORS)
async def base_referrers(request: Request, kb_id: str) -> ReferrerList:
    """What names the KB: what deleting it would touch."""
    found = await asyncio.to_thread(_referrers, request, kb_id)
    return _referrer_list(_service(request), kb_id, found)


@router.delete(
    "/bases/{kb_id}",
    response_model=ReferrerList,
    responses={**_ERRORS, **error_responses(409)},
)
async def delete_base(
    request: Request,
    kb_id: str,
    confirm: Annotated[
        bool, Query(description="Delete even though chats or characters name it")
    ] = False,
) -> ReferrerList:
    """Delete the KB's folder, and take it out of the chats, characters, personas and the
    global list that named it. While something names it, the delete needs ``confirm``:
    without it the answer is a 409 that says what names it, and nothing changes.
    Answers what named it."""
    service = _service(request)
    found = await asyncio.to_thread(_referrers, request, kb_id)
    answer = _referrer_list(service, kb_id, found)
    if found and not confirm:
        names = "; ".join(f"{r.kind} {r.name}" for r in found)
        raise Conflict(
            f"knowledge base {answer.displayName!r} is used by: {names}; "
            "delete it with confirm=true to remove it from them too"
        )
    state = server_state(request)
    presets, personas = _libraries(request)
    await asyncio.to_thread(
        functools.partial(
            forget_kb, kb_id, found, chat=state.chat, presets=presets, personas=personas
        )
    )
    await asyncio.to_thread(service.delete_base, kb_id)
    return answer


@router.get("/schema")
def get_schema() -> dict[str, Any]:
    """JSON Schema of ``knowledge.json``; the entry form is generated from it."""
    return knowledge_base_schema()


# -- references ------------------------------------------------------------------------


class ReferenceCheckRequest(BaseModel):
    kb_id: str | None = Field(default=None, description="KB holding the text; None: no KB")
    text: str = Field(max_length=1_000_000)
    entry_id: str | None = Field(default=None, description="Entry being edited (cycle checks)")


class ReferenceTargetRef(BaseModel):
    kb_id: str
    entry_id: str
    displayName: str | None


class ReferenceCheckOut(BaseModel):
    start: int = Field(description="Offset of '{{{' in code points (Python string index)")
    end: int = Field(description="Offset after '}}}' in code points")
    raw: str = Field(description="The reference body, without its braces")
    status: Literal["ok", "missing", "ambiguous", "cyclic"]
    count: int
    kb_count: int
    targets: list[ReferenceTargetRef]
    message: str


class ReferenceCheckResponse(BaseModel):
    checks: list[ReferenceCheckOut]


@router.post("/references/check", response_model=ReferenceCheckResponse, responses=_ERRORS)
def check_references(request: Request, body: ReferenceCheckRequest) -> ReferenceCheckResponse:
    """A verdict per ``{{{...}}}`` of ``text``: the editor's green / red / yellow marks."""
    checks = _service(request).resolver().check(body.kb_id, body.text, entry_id=body.entry_id)
    return ReferenceCheckResponse(
        checks=[
            ReferenceCheckOut(
                start=c.start,
                end=c.end,
                raw=c.raw,
                status=c.status,
                count=c.count,
                kb_count=c.kb_count,
                targets=[
                    ReferenceTargetRef(
                        kb_id=t.kb_id, entry_id=t.entry_id, displayName=t.display_name
                    )
                    for t in c.targets
                ],
                message=c.message,
            )
            for c in checks
        ]
    )


class ReferenceTargetOut(BaseModel):
    kb_id: str
    kb_name: str
    entry_id: str
    displayName: str | None
    path: str
    reference: str = Field(description="The shortest '{{{...}}}' that names exactly this entry")
    kinds: list[str]
    tagged: bool = Field(description="Tagged '@ref' (or '@ref:KIND'): offered first")
    preview: str


class ReferenceTargetList(BaseModel):
    targets: list[ReferenceTargetOut]


MAX_TARGETS = 50


@router.get("/references/targets", response_model=ReferenceTargetList)
def reference_targets(
    request: Request, kb_id: str | None = None, q: str = ""
) -> ReferenceTargetList:
    """Entries to offer after ``{{{``: ``@ref``-tagged first, then every named entry."""
    targets = _service(request).resolver().referenceable(kb_id, include_all=True)
    needle = q.strip().casefold()
    if needle:
        targets = [
            t
            for t in targets
            if needle in (t.display_name or "").casefold() or needle in t.path.casefold()
        ]
    targets.sort(key=lambda t: not t.tagged)  # stable: keeps the resolver's KB order
    return ReferenceTargetList(
        targets=[
            ReferenceTargetOut(
                kb_id=t.kb_id,
                kb_name=t.kb_name,
                entry_id=t.entry_id,
                displayName=t.display_name,
                path=t.path,
                reference=t.reference,
                kinds=list(t.kinds),
                tagged=t.tagged,
                preview=t.preview,
            )
            for t in targets[:MAX_TARGETS]
        ]
    )


# -- activation test -------------------------------------------------------------------


class ActivationTestRequest(BaseModel):
    kb_ids: list[str] | None = Field(
        default=None, description="KBs to test; default: every KB the project references"
    )
    chat: str = Field(
        default="",
        max_length=1_000_000,
        description="One message per line, 'Name: text'; a line without a name is the user's",
    )
    user_name: str = Field(default="User", description="Whose lines have no name")
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="Overrides of the project's activation settings (scan_depth, budget_cap...)",
    )
    variables: dict[str, Any] = Field(default_factory=dict, description="Chat variables")
    max_context_tokens: int | None = Field(default=None, gt=0)
    seed: int | None = Field(default=None, description="Fixes probability rolls")
    character: str | None = Field(default=None, description="Character name for filters")


class ReasonOut(BaseModel):
    rule: str
    detail: str = Field(description="In English words")
    outcome: str
    term: str | None = Field(
        default=None, description="The detail's pattern, for the page's language"
    )
    values: dict[str, str | int | float | list[str]] = Field(
        default_factory=dict, description="The pattern's values: keys, places, numbers"
    )


class ActivatedOut(BaseModel):
    kb_id: str
    kb_name: str
    entry_id: str
    displayName: str
    text: str = Field(description="Injected text, references resolved")
    placement: str
    depth: int | None
    role: str | None
    outlet_name: str | None
    priority: int
    tokens: int
    recursion_level: int = Field(description="0: found by the chat; n: by the n-th recursion")
    reasons: list[ReasonOut]


class DroppedOut(BaseModel):
    kb_id: str
    kb_name: str
    entry_id: str
    displayName: str
    tokens: int | None
    reasons: list[ReasonOut]


class ChatMessageOut(BaseModel):
    name: str
    text: str
    is_user: bool


class ActivationTestResponse(BaseModel):
    activated: list[ActivatedOut] = Field(description="In insertion order")
    dropped: list[DroppedOut]
    tokens_used: int
    budget: int | None
    messages: list[ChatMessageOut] = Field(description="The chat as it was read, oldest first")
    settings: dict[str, Any] = Field(description="The activation settings in effect")
    problems: list[str]
    tokenizer: str = Field(
        default="", description="Which tokenizer counted the tokens (the user LLM's)"
    )


# -- search and embeddings -------------------------------------------------------------


class EmbeddingProgress(BaseModel):
    kb_id: str
    state: Literal["idle", "queued", "running", "done", "error"]
    done: int
    total: int
    model_id: str | None = None
    message: str = ""


class SearchHitOut(BaseModel):
    kb_id: str
    kb_name: str
    entry_id: str
    displayName: str
    preview: str
    score: float
    matched_by: list[str] = Field(description='"keyword", "vector" or both')


class SearchResponse(BaseModel):
    query: str
    hits: list[SearchHitOut]
    embedding: list[EmbeddingProgress] = Field(
        description="Embedding state of the KBs searched: vector hits need finished embeddings"
    )
    problems: list[str] = Field(description="Why a KB was searched by keywords only, ...")


# -- import / export -------------------------------------------------------------------


class ImportedKB(BaseModel):
    kb_id: str
    displayName: str
    entry_count: int
    scope: Literal["local", "global"]


class DuplicateOut(BaseModel):
    displayName: str = Field(description="The book of the file")
    existing_kb_id: str = Field(description="The KB here with the same entries")
    existing_name: str
    kept: Literal["existing", "both"] = Field(
        description="existing: the book was not stored again (a card's character is bound "
        "to the existing KB); both: it was stored as a second KB"
    )
    new_kb_id: str | None = Field(default=None, description="With kept=both: the new copy")


class ImportReport(BaseModel):
    kind: str = Field(description="What the file was: world_info, character_card, package...")
    filename: str
    created: list[ImportedKB]
    character: str | None = Field(default=None, description="Name of an imported character")
    character_file: str | None = Field(default=None, description="Where its preset was written")
    character_updated: bool = Field(
        default=False,
        description="The card was a character here already and became a new version of it "
        "(on_conflict=update)",
    )
    conversation_id: str | None = Field(
        default=None, description="The conversation a SillyTavern chat became"
    )
    warnings: list[str]
    duplicates: list[DuplicateOut] = Field(
        default_factory=list,
        description="Books of the file whose entries a KB here already has; import again "
        "with on_duplicate=keep_both to keep a second copy",
    )


_NAMED_LINE = re.compile(r"^\s*([^:：\n]{1,64}?)\s*[:：]\s?(.*)$")


def parse_chat(text: str, user_name: str) -> list[ScanMessage]:
    """One message per non-empty line: ``Name: text`` (full-width colon too); a line
    without a name is the user's."""
    messages = []
    for line in text.splitlines():
        if not line.strip():
            continue
        match = _NAMED_LINE.match(line)
        if match and match.group(1).strip():
            name, said = match.group(1).strip(), match.group(2)
        else:
            name, said = user_name, line.strip()
        messages.append(ScanMessage(name=name, text=said, is_user=name == user_name))
    return messages


def _kb_name(snap: Snapshot, kb_id: str) -> str:
    loaded = snap.knowledge.catalog.get(kb_id)
    return loaded.kb.display_name if loaded is not None else kb_id


def _reasons(reasons: Sequence[Reason]) -> list[ReasonOut]:
    return [
        ReasonOut(
            rule=r.rule,
            detail=r.detail,
            outcome=r.outcome,
            term=r.term or None,
            values=dict(r.values),
        )
        for r in reasons
    ]


@router.post("/activation/test", response_model=ActivationTestResponse, responses=_ERRORS)
async def activation_test(request: Request, body: ActivationTestRequest) -> ActivationTestResponse:
    """Which entries a chat activates, with reasons, before anything is sent to a model."""
    service = _service(request)
    with field_errors("request", "kb_ids"):
        kbs = await asyncio.to_thread(service.project_kbs, body.kb_ids)
    with field_errors("activation settings", "settings"):
        settings = await asyncio.to_thread(service.activation_settings, body.settings)
    messages = parse_chat(body.chat, body.user_name)
    engine, result, problems = await service.activate(
        kbs,
        settings,
        messages,
        variables=body.variables,
        max_context_tokens=body.max_context_tokens,
        seed=body.seed,
        character=body.character,
    )
    problems += [f"{p.kb_id}/{p.entry_id} {p.field}: {p.reason}" for p in engine.problems]
    problems += result.warnings
    # The reasons of dropped entries are built as they are read, and tokens may be
    # counted by the endpoint: off the event loop.
    return await asyncio.to_thread(
        _activation_report, service, kbs, result, messages, settings, problems
    )


def _activation_report(
    service: KnowledgeService,
    kbs: Sequence[LoadedKB],
    result: ActivationResult,
    messages: Sequence[ScanMessage],
    settings: ActivationSettings,
    problems: list[str],
) -> ActivationTestResponse:
    snap = service.snapshot()
    tokens = {b.kb_id: service.kb_tokens(b.kb) for b in kbs}
    return ActivationTestResponse(
        activated=[
            ActivatedOut(
                kb_id=a.kb_id,
                kb_name=_kb_name(snap, a.kb_id),
                entry_id=a.entry_id,
                displayName=a.display_name,
                text=a.text,
                placement=str(a.placement.value),
                depth=a.depth,
                role=a.role,
                outlet_name=a.outlet_name,
                priority=a.priority,
                tokens=a.tokens,
                recursion_level=a.recursion_level,
                reasons=_reasons(a.reasons),
            )
            for a in result.activated
        ],
        dropped=[
            DroppedOut(
                kb_id=d.kb_id,
                kb_name=_kb_name(snap, d.kb_id),
                entry_id=d.entry_id,
                displayName=d.display_name,
                tokens=tokens.get(d.kb_id, {}).get(d.entry_id),
                reasons=_reasons(d.reasons),
            )
            for d in result.dropped
        ],
        tokens_used=result.tokens_used,
        budget=result.budget,
        messages=[ChatMessageOut(name=m.name, text=m.text, is_user=m.is_user) for m in messages],
        settings=settings.model_dump(mode="json"),
        problems=problems,
        tokenizer=service.tokenizer_name(),
    )


def _progress(state: EmbeddingState) -> EmbeddingProgress:
    return EmbeddingProgress.model_validate(dataclasses.asdict(state))


PREVIEW_CHARS = 200


def _preview(entry: CAIU | None) -> str:
    if entry is None:
        return ""
    flat = " ".join(entry.text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"


@router.get("/search", response_model=SearchResponse, responses=_ERRORS)
async def search_entries(
    request: Request,
    q: Annotated[str, Query(min_length=1, max_length=2000)],
    kb_id: Annotated[list[str] | None, Query()] = None,
    top_k: Annotated[int, Query(ge=1, le=100)] = 10,
) -> SearchResponse:
    """Hybrid search (keywords + meaning) over the project's KBs or the ones named."""
    service = _service(request)
    kbs = await asyncio.to_thread(service.project_kbs, kb_id)
    hits, problems = await service.search(q, kbs, top_k)
    snap = service.snapshot()
    out = []
    for hit in hits:
        loaded = snap.knowledge.catalog.get(hit.kb_id)
        entry = loaded.kb.entry(hit.entry_id) if loaded is not None else None
        out.append(
            SearchHitOut(
                kb_id=hit.kb_id,
                kb_name=_kb_name(snap, hit.kb_id),
                entry_id=hit.entry_id,
                displayName=(entry.displayName if entry else None) or hit.entry_id,
                preview=_preview(entry),
                score=hit.score,
                matched_by=sorted(hit.matched_by),
            )
        )
    return SearchResponse(
        query=q,
        hits=out,
        embedding=[_progress(service.embedding_state(b)) for b in kbs],
        problems=problems,
    )


@router.get("/bases/{kb_id}/embedding", response_model=EmbeddingProgress, responses=_ERRORS)
def embedding_progress(request: Request, kb_id: str) -> EmbeddingProgress:
    """How far the background embedding of one KB has come."""
    service = _service(request)
    loaded = service.snapshot().require(kb_id)
    return _progress(service.embedding_state(loaded))


_CHUNK = 1024 * 1024


@router.post(
    "/import",
    response_model=ImportReport,
    status_code=201,
    responses={
        **_ERRORS,
        409: {"model": CardConflictBody},
        422: {"model": EmbeddingChoiceBody | ErrorBody},
    },
)
async def import_file(
    request: Request,
    file: Annotated[UploadFile, File(description="The file to import")],
    scope: Annotated[Literal["local", "global"], Form()] = "local",
    on_duplicate: Annotated[
        Literal["keep_existing", "keep_both"],
        Form(description="A book whose entries a KB here has: skip it, or store a copy"),
    ] = "keep_existing",
    on_conflict: CardConflictChoice = "ask",
    embedding_model: Annotated[
        str | None,
        Form(
            description="A package only: the embedding model of the imported KB. Needed when "
            "the package's vectors come from a model missing here (422 with "
            "embedding_choice otherwise)"
        ),
    ] = None,
) -> ImportReport:
    """Import a SillyTavern file (world info, card PNG/JSON, CHARX, chat JSONL) or a
    ``.ctkbz`` package. A chat becomes a conversation of the server's project; a card a
    character, asked about as on the Characters page when it is one here already.

    The upload goes to a temporary file (at most 50 MB) that is removed afterwards.
    """
    state = server_state(request)
    service = state.knowledge
    chat_importer = conversation_importer(state.turn_tree, project_id=state.chat.project_id)
    # The card is compared with the characters of the folder it would be written to.
    library = _libraries(request)[0] if scope == "local" else PresetLibrary(service.home)
    filename = upload_name(file)
    limit = upload_limit(request)
    with tempfile.TemporaryDirectory(prefix="storyloom-upload-") as tmp:
        path = Path(tmp) / "upload"
        size = 0
        with path.open("wb") as out:
            while chunk := await file.read(_CHUNK):
                size += len(chunk)
                if size > limit:
                    raise UploadTooLarge(too_large(filename, limit))
                out.write(chunk)
        with upload_errors(filename, saved_as=path.with_name(filename)):
            outcome = await asyncio.to_thread(
                functools.partial(
                    service.import_file,
                    path,
                    filename,
                    scope,
                    chat_importer=chat_importer,
                    on_duplicate=on_duplicate,
                    card_home=CardReimport(library, on_conflict),
                    embedding_model=embedding_model or None,
                )
            )
    service.embed_later(outcome.created)
    return ImportReport(
        kind=outcome.kind,
        filename=filename,
        created=[
            ImportedKB(
                kb_id=b.kb_id,
                displayName=b.kb.kb_displayName,
                entry_count=len(b.kb.entries),
                scope=b.scope,
            )
            for b in outcome.created
        ],
        character=outcome.character,
        character_file=str(outcome.character_file) if outcome.character_file else None,
        character_updated=outcome.character_updated,
        conversation_id=outcome.conversation_id,
        warnings=outcome.warnings,
        duplicates=[
            DuplicateOut(
                displayName=d.display_name,
                existing_kb_id=d.existing_kb_id,
                existing_name=d.existing_name,
                kept=d.kept,
                new_kb_id=d.new_kb_id,
            )
            for d in outcome.duplicates
        ],
    )


@router.get("/bases/{kb_id}/export", responses=_ERRORS)
async def export_base(
    request: Request, kb_id: str, format: Literal["st-worldinfo", "ctkbz"] = "st-worldinfo"
) -> Response:
    """Download the KB as a SillyTavern world info file or a ``.ctkbz`` package."""
    service = _service(request)
    loaded = await asyncio.to_thread(service.snapshot().require, kb_id)
    stem = folder_slug(loaded.kb.display_name, set())
    if format == "ctkbz":
        data, _ = await asyncio.to_thread(service.export_package_bytes, loaded)
        return download(data, f"{stem}.ctkbz", "application/zip")
    book = await asyncio.to_thread(export_world_info, loaded.kb)
    text = json.dumps(book, ensure_ascii=False, indent=4)
    return download(text.encode("utf-8"), f"{stem}.json", "application/json")
