"""``/api/personas``: who the user is in a chat (SillyTavern's persona management).

A persona has a name (``{{user}}``), a description (``{{persona}}``), an avatar and an
optional bound book. One may be the project's default; a chat picks its own with
``PATCH /api/chats/{id}`` and ``settings.persona_id``. Saves carry the ``version`` they
opened: a stale one is a 409 and nothing is written. A persona file uploaded to
``/import`` that does not read is refused with file, field and reason.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, File, Request, Response, UploadFile
from pydantic import BaseModel, ConfigDict, Field

from storyloom.chat.personalab.personas import (
    Persona,
    PersonaLibrary,
    PersonaProblem,
    read_persona_document,
)
from storyloom.chat.store.turn_tree import ChatError
from storyloom.core.errors import FieldProblem, InvalidInput
from storyloom.server.api_errors import error_responses, field_errors, upload_errors
from storyloom.server.file_transfer import (
    avatar_response,
    read_image_upload,
    read_named_upload,
    upload_json,
)
from storyloom.server.state import server_state

router = APIRouter(prefix="/api/personas", tags=["personas"])

_ERRORS = error_responses(400, 404, 409, 413, 422)


def _library(request: Request) -> PersonaLibrary:
    personas = server_state(request).chat.personas
    if personas is None:
        raise ChatError("personas need a project")
    return personas


class PersonaView(BaseModel):
    id: str
    name: str
    description: str = ""
    avatar_url: str | None = None
    knowledge_base: str | None = None
    version: str
    is_default: bool = False


class PersonaList(BaseModel):
    personas: list[PersonaView]
    default_id: str | None = None
    problems: list[PersonaProblem] = Field(default_factory=list)


class PersonaFields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    knowledge_base: str | None = None


class PersonaSave(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: str | None = Field(default=None, description="The version the editor opened")
    persona: PersonaFields


def _view(library: PersonaLibrary, persona: Persona, default_id: str | None) -> PersonaView:
    # A persona without a picture has an address too: the route answers its generated face.
    avatar = library.avatar_path(persona.id) if persona.avatar else None
    stamp = int(avatar.stat().st_mtime) if avatar is not None else 0
    url = f"/api/personas/{persona.id}/avatar?v={stamp}"
    return PersonaView(
        id=persona.id,
        name=persona.name,
        description=persona.description,
        avatar_url=url,
        knowledge_base=persona.knowledge_base,
        version=library.version(persona.id),
        is_default=persona.id == default_id,
    )


def _one(library: PersonaLibrary, persona_id: str) -> PersonaView:
    return _view(library, library.get(persona_id), library.default_id())


def _fields(body: PersonaFields) -> Persona:
    with field_errors("persona", "persona"):
        persona = Persona.model_validate(body.model_dump())
    if not persona.name.strip():
        raise InvalidInput("persona: the name is empty", [FieldProblem("persona.name", "empty")])
    return persona


@router.get("", response_model=PersonaList)
def list_personas(request: Request) -> PersonaList:
    library = _library(request)
    good, bad = library.personas()
    default_id = library.default_id()
    return PersonaList(
        personas=[_view(library, p, default_id) for p in good], default_id=default_id, problems=bad
    )


@router.post("", status_code=201, response_model=PersonaView, responses=_ERRORS)
def create_persona(request: Request, body: PersonaFields) -> PersonaView:
    """A new persona (the project's first becomes its default)."""
    library = _library(request)
    return _one(library, library.create(_fields(body)).id)


class PersonaImportReport(BaseModel):
    imported: list[PersonaView]
    warnings: list[str] = Field(default_factory=list)


@router.post("/import", status_code=201, response_model=PersonaImportReport, responses=_ERRORS)
async def import_persona(
    request: Request, file: Annotated[UploadFile, File(description="A persona JSON file")]
) -> PersonaImportReport:
    """A persona file: storyloom's (``{"name", "description", ...}``) or SillyTavern's
    persona backup (every persona in it; a bound lorebook is bound again when a knowledge
    base of that name is here). A file that does not read is refused with its field and
    reason, and nothing is written."""
    state = server_state(request)
    library = _library(request)
    filename, data = await read_named_upload(request, file)
    with upload_errors(filename):
        document = upload_json(filename, data)
        found = read_persona_document(document, filename)
    by_name = {
        b.kb.display_name: b.kb.kb_id for b in state.knowledge.snapshot().knowledge.catalog.bases
    }
    warnings: list[str] = []
    created: list[Persona] = []
    for persona, book in zip(found.personas, found.books, strict=True):
        kb_id = by_name.get(book) if book else None
        if book and kb_id is None:
            warnings.append(f"{persona.name}: the book {book!r} is not here; import it and bind it")
        made = await asyncio.to_thread(
            library.create,
            persona.model_copy(update={"knowledge_base": kb_id or persona.knowledge_base}),
        )
        created.append(made)
    if found.default is not None:
        await asyncio.to_thread(library.set_default, created[found.default].id)
    default_id = library.default_id()
    return PersonaImportReport(
        imported=[_view(library, library.get(p.id), default_id) for p in created], warnings=warnings
    )


@router.get("/{persona_id}", response_model=PersonaView, responses=_ERRORS)
def get_persona(request: Request, persona_id: str) -> PersonaView:
    return _one(_library(request), persona_id)


@router.put("/{persona_id}", response_model=PersonaView, responses=_ERRORS)
def save_persona(request: Request, persona_id: str, body: PersonaSave) -> PersonaView:
    """Save the fields; a stale ``version`` is a 409 and nothing is written."""
    library = _library(request)
    library.update(persona_id, _fields(body.persona), expected_version=body.version)
    return _one(library, persona_id)


@router.delete("/{persona_id}", status_code=204, responses=_ERRORS)
def delete_persona(request: Request, persona_id: str) -> Response:
    """Remove the persona; chats that used it speak as the default persona from then on."""
    _library(request).delete(persona_id)
    return Response(status_code=204)


@router.post("/{persona_id}/default", response_model=PersonaList, responses=_ERRORS)
def make_default(request: Request, persona_id: str) -> PersonaList:
    _library(request).set_default(persona_id)
    return list_personas(request)


@router.delete("/{persona_id}/default", response_model=PersonaList, responses=_ERRORS)
def clear_default(request: Request, persona_id: str) -> PersonaList:
    library = _library(request)
    if library.default_id() == persona_id:
        library.set_default(None)
    return list_personas(request)


@router.get("/{persona_id}/avatar", responses=_ERRORS)
def persona_avatar(request: Request, persona_id: str) -> Response:
    """The persona's picture; one without a picture answers its generated face."""
    library = _library(request)
    name = library.get(persona_id).name
    return avatar_response(library.avatar_path(persona_id), f"persona {persona_id}", name)


@router.post("/{persona_id}/avatar", response_model=PersonaView, responses=_ERRORS)
async def upload_avatar(
    request: Request,
    persona_id: str,
    file: Annotated[UploadFile, File(description="A PNG, JPEG, GIF or WebP image")],
) -> PersonaView:
    """Replace the avatar. Only PNG, JPEG, GIF and WebP images are taken (by content)."""
    library = _library(request)
    await asyncio.to_thread(library.get, persona_id)
    data, media_type = await read_image_upload(request, file)
    await asyncio.to_thread(library.set_avatar, persona_id, data, media_type)
    return await asyncio.to_thread(_one, library, persona_id)
