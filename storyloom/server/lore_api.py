"""Which lore goes into which chat: the project's global list and a chat's own books.

``/api/lore/project`` holds the project's global list (books on in every chat) and the
insertion strategy; ``/api/lore/books`` is what every "Bind a book…" list offers (each
book once, no card's own book: :func:`~storyloom.knowledge.same_book.bindable_books`);
``/api/chats/{id}/lore`` says which knowledge bases a chat's next
turn scans and why (:mod:`storyloom.chat.service.lore_scope`), and sets the books bound
to that chat.
"""

from __future__ import annotations

import asyncio
import functools

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from storyloom.chat.service.lore_scope import LoreScopeName, ScopedKB
from storyloom.chat.service.mnemosyne import turn_lore_scope
from storyloom.core.errors import FieldProblem, InvalidInput
from storyloom.knowledge.activation_settings import InsertionStrategy
from storyloom.knowledge.catalog import LoadedKB
from storyloom.knowledge.same_book import bindable_books
from storyloom.project.knowledge_service import KnowledgeService
from storyloom.server.api_errors import error_responses
from storyloom.server.state import ServerState, server_state

router = APIRouter(tags=["lore"])
_ERRORS = error_responses(404, 409, 422)


# -- the project -----------------------------------------------------------------------


class LoreSettings(BaseModel):
    global_knowledge_bases: list[str] = Field(
        description="kb_ids of the books on in every chat of the project (global lore)"
    )
    insertion_strategy: InsertionStrategy = Field(
        description="evenly: global and character lore sorted together by priority; "
        "character_first / global_first: that scope's books first. Chat and persona lore "
        "always come first"
    )
    budget_percent: int | None = Field(
        default=None,
        ge=1,
        le=100,
        description="The lore budget as a percent of the model's context window "
        "(SillyTavern's world_info_budget); None in a request keeps it",
    )
    budget_cap: int | None = Field(
        default=None,
        ge=0,
        description="Most tokens lore may take, 0: no cap (world_info_budget_cap); None in "
        "a request keeps it",
    )


def _settings(service: KnowledgeService) -> LoreSettings:
    project = service.snapshot().knowledge.project
    return LoreSettings(
        global_knowledge_bases=list(project.globalKnowledgeBases),
        insertion_strategy=project.activationSettings.insertion_strategy,
        budget_percent=project.activationSettings.context_percent,
        budget_cap=project.activationSettings.budget_cap,
    )


@router.get("/api/lore/project", response_model=LoreSettings)
def get_lore_settings(request: Request) -> LoreSettings:
    return _settings(server_state(request).knowledge)


@router.put("/api/lore/project", response_model=LoreSettings, responses=_ERRORS)
async def put_lore_settings(request: Request, body: LoreSettings) -> LoreSettings:
    """Set the global list (every kb_id must name a KB), the insertion strategy and the
    lore budget (the chat's "lore was cut" notice links here)."""
    service = server_state(request).knowledge
    await asyncio.to_thread(
        functools.partial(
            service.set_lore_settings,
            global_kb_ids=body.global_knowledge_bases,
            insertion_strategy=body.insertion_strategy,
            budget_percent=body.budget_percent,
            budget_cap=body.budget_cap,
        )
    )
    return _settings(service)


# -- one chat --------------------------------------------------------------------------


class ScopedKnowledgeBase(BaseModel):
    kb_id: str
    name: str = Field(description="The KB's display name")
    scope: LoreScopeName
    reason: str = Field(description="Why it is in the chat, in words")
    via: str = Field(description="The character or persona that binds it ('' otherwise)")
    legacy: bool = Field(
        description="A character's book found by its character:<name> tag (imported "
        "before books were bound), not by a binding"
    )
    enabled: bool
    entry_count: int


class BindableKnowledgeBase(BaseModel):
    kb_id: str
    name: str
    enabled: bool
    global_lore: bool


class BookList(BaseModel):
    books: list[BindableKnowledgeBase] = Field(
        description="Each distinct book once (a world, not a card's copy of it); no card's "
        "own book (it is shown under its character) and no '· character' definition KB"
    )


def _bindable(service: KnowledgeService) -> list[BindableKnowledgeBase]:
    snap = service.snapshot().knowledge
    global_ids = set(snap.project.globalKnowledgeBases)
    books: list[LoadedKB] = service.cached(
        "bindable_books", lambda: bindable_books(snap.catalog.bases)
    )
    return [
        BindableKnowledgeBase(
            kb_id=b.kb_id,
            name=b.kb.display_name,
            enabled=b.kb.enabled,
            global_lore=b.kb_id in global_ids,
        )
        for b in books
    ]


@router.get("/api/lore/books", response_model=BookList)
async def list_books(request: Request) -> BookList:
    """What a "Bind a book…" list offers (a chat's, a character's, a persona's)."""
    return BookList(books=await asyncio.to_thread(_bindable, server_state(request).knowledge))


class ChatLore(BaseModel):
    conversation_id: str
    version: int = Field(description="The conversation's version")
    chat_knowledge_bases: list[str] = Field(description="The books bound to this chat")
    active: list[ScopedKnowledgeBase] = Field(
        description="Every KB the next turn scans, in scan order, with its scope"
    )
    disabled: list[ScopedKnowledgeBase] = Field(
        description="KBs bound to the chat through a scope but switched off"
    )
    available: list[BindableKnowledgeBase] = Field(
        description="What may be bound (as /api/lore/books lists it)"
    )
    insertion_strategy: InsertionStrategy
    problems: list[str] = Field(description="Bindings that name no KB")


def _scoped(s: ScopedKB) -> ScopedKnowledgeBase:
    return ScopedKnowledgeBase(
        kb_id=s.kb_id,
        name=s.name,
        scope=s.scope,
        reason=s.reason,
        via=s.via,
        legacy=s.legacy,
        enabled=s.loaded.kb.enabled,
        entry_count=len(s.loaded.kb.entries),
    )


def _chat_lore(state: ServerState, conversation_id: str) -> ChatLore:
    conversation = state.turn_tree.conversation(conversation_id)
    knowledge = state.knowledge
    scope = turn_lore_scope(knowledge, conversation, None, state.chat.presets)
    snap = knowledge.snapshot().knowledge
    return ChatLore(
        conversation_id=conversation.id,
        version=conversation.version,
        chat_knowledge_bases=list(conversation.settings.knowledge_bases),
        active=[_scoped(s) for s in scope.active],
        disabled=[_scoped(s) for s in scope.disabled],
        available=_bindable(knowledge),
        insertion_strategy=snap.project.activationSettings.insertion_strategy,
        problems=list(scope.problems),
    )


@router.get("/api/chats/{conversation_id}/lore", response_model=ChatLore, responses=_ERRORS)
async def get_chat_lore(request: Request, conversation_id: str) -> ChatLore:
    """Every KB the chat's next turn scans, each with its scope and why."""
    return await asyncio.to_thread(_chat_lore, server_state(request), conversation_id)


class ChatLoreBody(BaseModel):
    knowledge_bases: list[str] = Field(description="kb_ids to bind to this chat, in order")
    expected_version: int | None = None


@router.put("/api/chats/{conversation_id}/lore", response_model=ChatLore, responses=_ERRORS)
async def put_chat_lore(request: Request, conversation_id: str, body: ChatLoreBody) -> ChatLore:
    """Bind these books to the chat (chat lore); every kb_id must name a KB."""
    state = server_state(request)
    catalog = state.knowledge.snapshot().knowledge.catalog
    unknown = [k for k in body.knowledge_bases if catalog.get(k) is None]
    if unknown:
        problems = [
            FieldProblem("knowledge_bases", f"no knowledge base has kb_id {k}") for k in unknown
        ]
        raise InvalidInput.of("chat lore", problems)
    conversation = state.turn_tree.conversation(conversation_id)
    settings = conversation.settings.model_copy(
        update={"knowledge_bases": list(dict.fromkeys(body.knowledge_bases))}
    )
    state.chat.update_conversation(
        conversation_id, expected_version=body.expected_version, settings=settings
    )
    return await asyncio.to_thread(_chat_lore, state, conversation_id)
