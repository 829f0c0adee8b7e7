"""``/api/templates``: the instruct and context templates of text-completion connections.

The built-in templates and the SillyTavern files imported into the data directory
(``<home>/instruct``, ``<home>/context``; see :mod:`storyloom.llm.instruct`). An upload
to ``/import`` is SillyTavern's ``instruct/*.json`` or ``context/*.json`` as it is: the
file says which kind it is, and it is validated whole before anything is written; a
problem names the file, the field and the reason.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, File, Request, Response, UploadFile
from pydantic import BaseModel, Field, ValidationError

from storyloom.core.errors import InvalidInput
from storyloom.llm.instruct import (
    ContextTemplate,
    InstructTemplate,
    TemplateKind,
    TemplateLibrary,
)
from storyloom.server.api_errors import error_responses, upload_errors
from storyloom.server.file_transfer import read_named_upload
from storyloom.server.state import server_state

router = APIRouter(prefix="/api/templates", tags=["templates"])

_ERRORS = error_responses(400, 404, 409, 413, 422)


def _library(request: Request) -> TemplateLibrary:
    return server_state(request).templates


class TemplateEntry(BaseModel):
    name: str
    builtin: bool = Field(
        description="A built-in name (a stored file of that name is used instead of it)"
    )


class TemplateList(BaseModel):
    instruct: list[TemplateEntry]
    context: list[TemplateEntry]


class TemplateDocument(BaseModel):
    kind: Literal["instruct", "context"]
    name: str
    builtin: bool
    template: dict[str, Any] = Field(description="The template as SillyTavern's JSON file")


class TemplateImported(BaseModel):
    kind: Literal["instruct", "context"] = Field(description="Which kind the file is")
    name: str = Field(description="Its name in the library (the file's name field or stem)")


def _list(library: TemplateLibrary) -> TemplateList:
    def entries(kind: TemplateKind) -> list[TemplateEntry]:
        return [
            TemplateEntry(name=n, builtin=library.is_builtin(kind, n)) for n in library.names(kind)
        ]

    return TemplateList(instruct=entries("instruct"), context=entries("context"))


def _document(library: TemplateLibrary, kind: TemplateKind, name: str) -> TemplateDocument:
    template = library.instruct(name) if kind == "instruct" else library.context(name)
    return TemplateDocument(
        kind=kind,
        name=name,
        builtin=library.is_builtin(kind, name),
        template=template.model_dump(mode="json"),
    )


@router.get("", response_model=TemplateList, responses=_ERRORS)
async def list_templates(request: Request) -> TemplateList:
    """The names of both kinds, built in or stored, sorted."""
    return await asyncio.to_thread(_list, _library(request))


@router.get("/{kind}/{name}", response_model=TemplateDocument, responses=_ERRORS)
async def get_template(
    request: Request, kind: Literal["instruct", "context"], name: str
) -> TemplateDocument:
    return await asyncio.to_thread(_document, _library(request), kind, name)


@router.put("/{kind}/{name}", response_model=TemplateDocument, responses=_ERRORS)
async def put_template(
    request: Request,
    kind: Literal["instruct", "context"],
    name: str,
    template: Annotated[
        dict[str, Any], Body(description="The template as SillyTavern's JSON file")
    ],
) -> TemplateDocument:
    """Store a template under ``name`` (its ``name`` field is set to it); a built-in name
    stores the user's own version, which is used instead of the built-in one."""
    model = InstructTemplate if kind == "instruct" else ContextTemplate
    try:
        parsed = model.model_validate({**template, "name": name})
    except ValidationError as exc:
        raise InvalidInput.from_validation(f"{kind} template {name!r}", exc) from None
    library = _library(request)
    await asyncio.to_thread(library.save, kind, parsed)
    return await asyncio.to_thread(_document, library, kind, name)


@router.delete("/{kind}/{name}", status_code=204, responses=_ERRORS)
async def delete_template(
    request: Request, kind: Literal["instruct", "context"], name: str
) -> Response:
    """Remove a stored template (a built-in one of the same name shows again); a
    built-in template itself cannot be deleted (409)."""
    await asyncio.to_thread(_library(request).delete, kind, name)
    return Response(status_code=204)


@router.post("/import", status_code=201, response_model=TemplateImported, responses=_ERRORS)
async def import_template(
    request: Request,
    file: Annotated[UploadFile, File(description="SillyTavern instruct or context JSON")],
) -> TemplateImported:
    """A SillyTavern ``instruct/*.json`` or ``context/*.json`` file, stored as it is."""
    filename, data = await read_named_upload(request, file)
    library = _library(request)
    with tempfile.TemporaryDirectory(prefix="storyloom-template-") as folder:
        # Saved under the upload's name: a file without a name field is named by it.
        path = Path(folder) / filename
        path.write_bytes(data)
        with upload_errors(filename, saved_as=path):
            kind, name = await asyncio.to_thread(library.import_file, path)
    return TemplateImported(kind=kind, name=name)
