"""``/api/characters``: the character library (SillyTavern's character management).

List with avatars, tags and favourites; open one to edit every card field, with token
counts; create, duplicate, delete; upload an avatar; export as a PNG card, card JSON or
CHARX; import a card (``POST /import``: its book becomes a knowledge base, or is linked
to the one here that is the same book).

A card that is a character here already (the very same card, or a card of the same name
changed) is not imported again silently: the import answers 409 with the character it is
(:class:`~storyloom.chat.personalab.card_reimport.CardExists`) and writes nothing, and
the user's choice comes back as ``on_conflict``: ``update`` (the card becomes a new
version of that character) or ``keep_both`` (a second character, ``<name>_2``).

Every character document carries ``version`` (a hash of its file). A save sends the
version it opened; when the file changed since (another tab saved), the save is refused
with 409 and nothing is written: the editor reloads and the user makes the change again.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, File, Query, Request, Response, UploadFile
from pydantic import BaseModel, ConfigDict, Field

from storyloom.chat.personalab.agent_consent import AgentConsents, CharacterAgent
from storyloom.chat.personalab.card_export import card_charx, card_json, card_png
from storyloom.chat.personalab.card_permissions import CardPermissions, CardPermissionStore
from storyloom.chat.personalab.card_reimport import CardReimport
from storyloom.chat.personalab.library import CharacterListing, PresetLibrary
from storyloom.chat.personalab.personas import AVATAR_SUFFIXES
from storyloom.chat.service.card_scripts import CardScripts, card_scripts
from storyloom.chat.store.turn_tree import ChatError
from storyloom.core.errors import FieldProblem, InvalidInput
from storyloom.knowledge.card_knowledge import CHARACTER_DEFINITION, character_tag
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.st_import import import_sillytavern_bytes
from storyloom.project.project_file import folder_slug
from storyloom.server.api_errors import (
    CardConflictBody,
    error_responses,
    field_errors,
    upload_errors,
)
from storyloom.server.file_transfer import (
    CardConflictChoice,
    avatar_response,
    download,
    import_upload,
    read_image_upload,
    read_named_upload,
)
from storyloom.server.state import server_state
from storyloom.sillytavern.character import CharacterDefinition
from storyloom.tools.agent_profile import check_agent_id

router = APIRouter(prefix="/api/characters", tags=["characters"])

_ERRORS = error_responses(400, 404, 409, 413, 422)
# Fields whose tokens the editor shows, in its order; the depth prompt is
# extensions.depth_prompt.prompt.
TOKEN_FIELDS = (
    "name",
    "nickname",
    "description",
    "personality",
    "scenario",
    "first_mes",
    "mes_example",
    "creator_notes",
    "system_prompt",
    "post_history_instructions",
    "depth_prompt",
)
# What SillyTavern calls permanent: sent with every prompt, whatever the chat holds.
PERMANENT_FIELDS = (
    "name",
    "description",
    "personality",
    "scenario",
    "system_prompt",
    "post_history_instructions",
    "depth_prompt",
)


def _library(request: Request) -> PresetLibrary:
    presets = server_state(request).chat.presets
    if presets is None:
        raise ChatError("characters need a project")
    return presets


def _permissions(request: Request) -> CardPermissionStore:
    store = server_state(request).chat.card_permissions
    if store is None:
        raise ChatError("characters need a project")
    return store


def _consents(request: Request) -> AgentConsents:
    consents = server_state(request).chat.agent_consents
    if consents is None:
        raise ChatError("characters need a project")
    return consents


def avatar_url(character_id: str, avatar: str | None, stamp: float | int = 0) -> str:
    """Where the page loads a character's avatar (``v`` changes when the file does, so a
    new upload is not hidden by the browser's cache). A character without a picture has
    one too: the route answers its generated face."""
    version = int(stamp) if avatar else 0
    return f"/api/characters/{character_id}/avatar?v={version}"


class CharacterItem(CharacterListing):
    avatar_url: str | None = None


class CharacterLibrary(BaseModel):
    characters: list[CharacterItem]


class CharacterTokens(BaseModel):
    fields: dict[str, int] = Field(description="Tokens per card field (see TOKEN_FIELDS)")
    alternate_greetings: list[int] = Field(default_factory=list)
    total: int = Field(description="Every field the prompt can carry")
    permanent: int = Field(description="What every prompt carries, whatever the chat holds")


class CharacterDocument(BaseModel):
    id: str
    version: str = Field(description="Send it back with a save; a stale one is a 409")
    character: dict[str, Any] = Field(description="CharacterDefinition JSON, without source_card")
    avatar_url: str | None = None
    tokens: CharacterTokens
    card_spec: str | None = Field(default=None, description="The imported card's spec")
    agent: CharacterAgent = Field(
        description="The agent profile the card suggests and the one the user confirmed "
        "(only a confirmed one runs)"
    )
    scripts: CardScripts = Field(
        description="The card's regex and Tavern Helper scripts, whether each runs, and what "
        "the user allowed for this character"
    )


class CharacterSave(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: str | None = Field(
        default=None, description="The version the editor opened (None: overwrite)"
    )
    character: dict[str, Any]


class NewCharacter(BaseModel):
    model_config = ConfigDict(extra="forbid")

    character: dict[str, Any]


class CreatedCharacter(BaseModel):
    id: str
    version: str


class Favourite(BaseModel):
    fav: bool


class AgentAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    profile: str | None = Field(
        description="The agent profile the character answers with (the card's suggestion "
        "or another); None: no agent, and the page stops asking"
    )


class CardImport(BaseModel):
    outcome: Literal["added", "updated"] = Field(
        description="added: a new character; updated: a new version of the one here"
    )
    id: str
    name: str
    version: str
    books: list[str] = Field(description="The books bound to the character now (kb_ids)")
    warnings: list[str]


class TokenRequest(BaseModel):
    texts: dict[str, str] = Field(description="Field name → text")


class TokenAnswer(BaseModel):
    tokens: dict[str, int]


def _texts(preset: CharacterDefinition) -> dict[str, str]:
    depth = preset.depth_prompt
    return {
        "name": preset.name,
        "nickname": preset.nickname or "",
        "description": preset.description,
        "personality": preset.personality,
        "scenario": preset.scenario,
        "first_mes": preset.first_mes,
        "mes_example": preset.mes_example,
        "creator_notes": preset.creator_notes,
        "system_prompt": preset.system_prompt,
        "post_history_instructions": preset.post_history_instructions,
        "depth_prompt": depth.prompt if depth is not None else "",
    }


def token_counts(request: Request, preset: CharacterDefinition) -> CharacterTokens:
    """Tokens of each field with the tokenizer the budgets use (the user model's)."""
    count = server_state(request).knowledge.count_tokens
    fields = {key: count(text) if text else 0 for key, text in _texts(preset).items()}
    greetings = [count(g) if g else 0 for g in preset.alternate_greetings]
    total = sum(v for k, v in fields.items() if k not in ("nickname", "creator_notes"))
    permanent = sum(fields[k] for k in PERMANENT_FIELDS)
    return CharacterTokens(
        fields=fields, alternate_greetings=greetings, total=total, permanent=permanent
    )


def _bound_books(request: Request, preset: CharacterDefinition) -> list[str]:
    """The books bound to ``preset``; a file from before books could be bound has the
    books tagged with its name (as the chat's lore scope reads it), so the editor shows
    them and a save keeps them bound."""
    if "knowledge_bases" in preset.model_fields_set:
        return list(preset.knowledge_bases)
    tag = character_tag(preset.name)
    return [
        b.kb_id
        for b in server_state(request).knowledge.snapshot().knowledge.catalog.bases
        if tag in b.kb.tags and CHARACTER_DEFINITION not in b.kb.tags
    ]


def _document(request: Request, character_id: str) -> CharacterDocument:
    library = _library(request)
    preset = library.character(character_id)
    avatar = library.avatar_path(character_id)
    character = preset.model_dump(mode="json", exclude={"source_card"})
    character["knowledge_bases"] = _bound_books(request, preset)
    return CharacterDocument(
        id=character_id,
        version=library.character_version(character_id),
        character=character,
        avatar_url=avatar_url(character_id, preset.avatar, avatar.stat().st_mtime if avatar else 0),
        tokens=token_counts(request, preset),
        card_spec=preset.card_spec,
        agent=_consents(request).of(character_id, character),
        scripts=card_scripts(preset.source_card or {}, _permissions(request).of(character_id)),
    )


def _definition(body: dict[str, Any]) -> CharacterDefinition:
    with field_errors("character", "character"):
        preset = CharacterDefinition.model_validate(body)
    if not preset.name.strip():
        raise InvalidInput("character: the name is empty", [])
    return preset


def _bases(request: Request) -> list[KnowledgeBase]:
    return [b.kb for b in server_state(request).knowledge.snapshot().knowledge.catalog.bases]


@router.get("", response_model=CharacterLibrary)
def list_characters(
    request: Request,
    q: Annotated[str, Query(description="Words the name, tags or creator contain")] = "",
    tag: Annotated[str | None, Query(description="Only characters with this tag")] = None,
    fav: Annotated[bool | None, Query(description="Only favourites (true)")] = None,
) -> CharacterLibrary:
    """Every character (a file that does not read is listed with its error), favourites
    first, then by name."""
    library = _library(request)
    words = q.lower().split()
    out: list[CharacterItem] = []
    for listing in library.characters():
        text = " ".join([listing.name, listing.creator, *listing.tags]).lower()
        if words and not all(w in text for w in words):
            continue
        if tag is not None and tag not in listing.tags:
            continue
        if fav and not listing.fav:
            continue
        stamp = listing.modified
        out.append(
            CharacterItem(
                **listing.model_dump(), avatar_url=avatar_url(listing.id, listing.avatar, stamp)
            )
        )
    out.sort(key=lambda c: (not c.fav, c.name.casefold(), c.id))
    return CharacterLibrary(characters=out)


@router.post("", status_code=201, response_model=CreatedCharacter, responses=_ERRORS)
def create_character(request: Request, body: NewCharacter) -> CreatedCharacter:
    """A character made from scratch (only ``name`` is needed)."""
    library = _library(request)
    preset = _definition({**body.character, "avatar": None, "source_card": None})
    character_id = library.create_character(preset)
    return CreatedCharacter(id=character_id, version=library.character_version(character_id))


@router.post(
    "/import",
    status_code=201,
    response_model=CardImport,
    responses={**_ERRORS, 409: {"model": CardConflictBody}},
)
async def import_card(
    request: Request,
    file: Annotated[UploadFile, File(description="A card: PNG, JSON or CHARX")],
    on_conflict: CardConflictChoice = "ask",
) -> CardImport:
    """Import a SillyTavern card (see the module's docstring for a card already here)."""
    filename, data = await read_named_upload(request, file)
    with upload_errors(filename):
        result = await asyncio.to_thread(import_sillytavern_bytes, data, filename)
    if result.character is None:
        reason = "not a character card (a world book or a chat goes in on the Knowledge page)"
        raise InvalidInput.of(filename, [FieldProblem("file", reason)])
    library = _library(request)
    knowledge = server_state(request).knowledge
    imported = await import_upload(
        knowledge, data, filename, card_home=CardReimport(library, on_conflict)
    )
    assert imported.character_file is not None  # the file is a card
    character_id = imported.character_file.stem
    outcome: Literal["added", "updated"] = "updated" if imported.character_updated else "added"
    warnings = imported.warnings
    preset = library.character(character_id)
    return CardImport(
        outcome=outcome,
        id=character_id,
        name=preset.name,
        version=library.character_version(character_id),
        books=_bound_books(request, preset),
        warnings=warnings,
    )


@router.post("/tokens", response_model=TokenAnswer)
def count_tokens(request: Request, body: TokenRequest) -> TokenAnswer:
    """Tokens of texts being edited, counted as the budgets count them."""
    count = server_state(request).knowledge.count_tokens
    return TokenAnswer(tokens={k: count(v) if v else 0 for k, v in body.texts.items()})


@router.get("/{character_id}", response_model=CharacterDocument, responses=_ERRORS)
def get_character(request: Request, character_id: str) -> CharacterDocument:
    return _document(request, character_id)


@router.put("/{character_id}", response_model=CharacterDocument, responses=_ERRORS)
def save_character(request: Request, character_id: str, body: CharacterSave) -> CharacterDocument:
    """Save every field; the avatar and the imported card stay. A stale ``version``
    is a 409 and nothing is written."""
    library = _library(request)
    library.character(character_id)  # 404 (or the file's own problems) first
    preset = _definition(body.character)
    library.update_character(character_id, preset, expected_version=body.version)
    return _document(request, character_id)


@router.put("/{character_id}/fav", response_model=CharacterDocument, responses=_ERRORS)
def set_favourite(request: Request, character_id: str, body: Favourite) -> CharacterDocument:
    """Mark or unmark a favourite (SillyTavern's star)."""
    library = _library(request)
    preset = library.character(character_id).model_copy(update={"fav": body.fav})
    library.update_character(character_id, preset, expected_version=None)
    return _document(request, character_id)


@router.put("/{character_id}/agent", response_model=CharacterDocument, responses=_ERRORS)
def answer_agent(request: Request, character_id: str, body: AgentAnswer) -> CharacterDocument:
    """The user's answer to which agent profile the character answers with: the card's
    suggestion, another profile, or none. Only this makes a character run as an agent; a
    chat's own setting still overrides it."""
    _library(request).character(character_id)  # 404 first
    if body.profile is not None:
        agent_id = check_agent_id(body.profile)
        if not server_state(request).tools.agents.has_profile(agent_id):
            reason = f"no agent profile {agent_id!r}; create it on the Tools page first"
            raise InvalidInput.of("agent answer", [FieldProblem("profile", reason)])
    _consents(request).answer(character_id, body.profile)
    return _document(request, character_id)


@router.put("/{character_id}/permissions", response_model=CharacterDocument, responses=_ERRORS)
def set_permissions(
    request: Request, character_id: str, body: CardPermissions
) -> CharacterDocument:
    """What the character's card may run: its regex scripts, scripts in its HTML frames,
    whether those may write variables, send messages or reach the network, and which of
    its own Tavern Helper scripts run. Saving it answers the import question. New chats
    start from it; a chat's own switches stay as they are."""
    _library(request).character(character_id)  # 404 first
    _permissions(request).set(character_id, body.model_copy(update={"asked": True}))
    return _document(request, character_id)


@router.delete("/{character_id}", status_code=204, responses=_ERRORS)
def delete_character(request: Request, character_id: str) -> Response:
    """Remove the character, its avatar and assets, the agent the user confirmed for it and
    what its card may run (a new character given its id asks again). Conversations keep
    their copy."""
    _library(request).delete("characters", character_id)
    _consents(request).forget(character_id)
    _permissions(request).forget(character_id)
    return Response(status_code=204)


@router.post(
    "/{character_id}/duplicate", status_code=201, response_model=CreatedCharacter, responses=_ERRORS
)
def duplicate_character(request: Request, character_id: str) -> CreatedCharacter:
    library = _library(request)
    copy_id = library.duplicate_character(character_id)
    return CreatedCharacter(id=copy_id, version=library.character_version(copy_id))


@router.get("/{character_id}/avatar", responses=_ERRORS)
def character_avatar(request: Request, character_id: str) -> Response:
    """The character's picture; one without a picture answers its generated face."""
    library = _library(request)
    name = library.character(character_id).name
    return avatar_response(library.avatar_path(character_id), f"character {character_id}", name)


@router.post("/{character_id}/avatar", response_model=CharacterDocument, responses=_ERRORS)
async def upload_avatar(
    request: Request,
    character_id: str,
    file: Annotated[UploadFile, File(description="A PNG, JPEG, GIF or WebP image")],
) -> CharacterDocument:
    """Replace the avatar. Only PNG, JPEG, GIF and WebP images are taken (by content)."""
    library = _library(request)
    await asyncio.to_thread(library.character, character_id)
    data, media_type = await read_image_upload(request, file)
    await asyncio.to_thread(library.set_avatar, character_id, data, AVATAR_SUFFIXES[media_type])
    return await asyncio.to_thread(_document, request, character_id)


@router.get("/{character_id}/export", responses=_ERRORS)
def export_character(
    request: Request,
    character_id: str,
    format: Annotated[Literal["png", "json", "charx"], Query()] = "png",
) -> Response:
    """The character as a SillyTavern card: PNG (V2 ``chara`` + V3 ``ccv3``), JSON or
    CHARX, its primary bound book embedded."""
    library = _library(request)
    preset = library.character(character_id)
    avatar_path = library.avatar_path(character_id)
    avatar = avatar_path.read_bytes() if avatar_path is not None else None
    bases = _bases(request)
    stem = folder_slug(preset.name, set())
    if format == "json":
        text = json.dumps(card_json(preset, bases), ensure_ascii=False, indent=4)
        return download(text.encode("utf-8"), f"{stem}.json", "application/json")
    assets = library.folder("characters") / f"{character_id}.assets"
    kept = assets if assets.is_dir() else None
    if format == "charx":
        data = card_charx(preset, bases, avatar, kept)
        return download(data, f"{stem}.charx", "application/zip")
    return download(card_png(preset, bases, avatar, kept), f"{stem}.png", "image/png")
