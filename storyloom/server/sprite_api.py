"""``/api/characters/{id}/expressions``: a character's expression sprites.

The labels it has a sprite for, the one shown when a chat picked none (the card's
default, else ``neutral``), and each image (served only when its bytes are an image).
A chat picks its own with ``settings.expression`` (``PATCH /api/chats/{id}``).
"""

from __future__ import annotations

import asyncio
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, File, Request, Response, UploadFile
from pydantic import BaseModel, Field

from storyloom.chat.personalab.library import PresetLibrary
from storyloom.chat.personalab.sprites import (
    default_expression,
    expressions,
    save_sprite,
    sprite,
)
from storyloom.chat.store.turn_tree import ChatError
from storyloom.server.api_errors import error_responses
from storyloom.server.file_transfer import read_image_upload
from storyloom.server.state import server_state

router = APIRouter(prefix="/api/characters", tags=["characters"])

_ERRORS = error_responses(400, 404, 413, 422)


class ExpressionSprite(BaseModel):
    label: str
    url: str


class ExpressionList(BaseModel):
    expressions: list[ExpressionSprite]
    default: str | None = Field(
        default=None, description="The label shown when a chat picked none (None: no sprite)"
    )


def _library(request: Request) -> PresetLibrary:
    presets = server_state(request).chat.presets
    if presets is None:
        raise ChatError("characters need a project")
    return presets


def _list(library: PresetLibrary, character_id: str) -> ExpressionList:
    base = f"/api/characters/{quote(character_id, safe='')}/expressions"
    return ExpressionList(
        expressions=[
            ExpressionSprite(label=label, url=f"{base}/{quote(label, safe='')}")
            for label in expressions(library, character_id)
        ],
        default=default_expression(library, character_id),
    )


@router.get("/{character_id}/expressions", response_model=ExpressionList, responses=_ERRORS)
def list_expressions(request: Request, character_id: str) -> ExpressionList:
    return _list(_library(request), character_id)


@router.get("/{character_id}/expressions/{label}", responses=_ERRORS)
def expression_image(request: Request, character_id: str, label: str) -> Response:
    data, media_type = sprite(_library(request), character_id, label)
    return Response(
        data,
        media_type=media_type,
        headers={"cache-control": "no-cache", "x-content-type-options": "nosniff"},
    )


@router.put("/{character_id}/expressions/{label}", response_model=ExpressionList, responses=_ERRORS)
async def upload_expression(
    request: Request,
    character_id: str,
    label: str,
    file: Annotated[UploadFile, File(description="A PNG, JPEG, GIF or WebP image")],
) -> ExpressionList:
    """Add or replace the ``label`` sprite."""
    library = _library(request)
    await asyncio.to_thread(library.character, character_id)
    data, _ = await read_image_upload(request, file)
    await asyncio.to_thread(save_sprite, library, character_id, label, data)
    return await asyncio.to_thread(_list, library, character_id)
