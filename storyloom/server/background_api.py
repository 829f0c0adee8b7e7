"""``/api/backgrounds``: the images a chat can show behind it (SillyTavern's Backgrounds).

They live in the data directory's ``backgrounds/``; a chat names one in
``settings.background`` (``PATCH /api/chats/{id}``). A name in the address is only ever
a plain file name of that folder (a path, ``..`` or a link is refused), and a file goes
out only when its bytes are an image, with the type its bytes say.
"""

from __future__ import annotations

import asyncio
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, File, Request, Response, UploadFile
from pydantic import BaseModel

from storyloom.chat.personalab.chat_backgrounds import ChatBackgrounds, check_background_name
from storyloom.server.api_errors import error_responses
from storyloom.server.file_transfer import read_image_upload, upload_name
from storyloom.server.state import server_state

router = APIRouter(prefix="/api/backgrounds", tags=["backgrounds"])

_ERRORS = error_responses(400, 404, 413, 422)


class BackgroundImage(BaseModel):
    name: str
    url: str


class BackgroundImageList(BaseModel):
    backgrounds: list[BackgroundImage]


def _backgrounds(request: Request) -> ChatBackgrounds:
    return ChatBackgrounds(server_state(request).home)


def _image(name: str) -> BackgroundImage:
    return BackgroundImage(name=name, url=f"/api/backgrounds/{quote(name, safe='')}")


@router.get("", response_model=BackgroundImageList)
def list_backgrounds(request: Request) -> BackgroundImageList:
    return BackgroundImageList(backgrounds=[_image(n) for n in _backgrounds(request).names()])


@router.post("", status_code=201, response_model=BackgroundImage, responses=_ERRORS)
async def upload_background(
    request: Request,
    file: Annotated[UploadFile, File(description="A PNG, JPEG, GIF or WebP image")],
) -> BackgroundImage:
    """Add (or replace) the image of the upload's file name."""
    name = check_background_name(upload_name(file))
    data, _ = await read_image_upload(request, file)
    await asyncio.to_thread(_backgrounds(request).save, name, data)
    return _image(name)


@router.get("/{name}", responses=_ERRORS)
def background_image(request: Request, name: str) -> Response:
    data, media_type = _backgrounds(request).read(name)
    return Response(
        data,
        media_type=media_type,
        headers={"cache-control": "no-cache", "x-content-type-options": "nosniff"},
    )
