"""``/api/quick-replies``: the project's quick reply sets (SillyTavern's Quick Reply).

Each set is SillyTavern's own file shape (``set``), with the buttons the chat shows for
it (``buttons``: slash-command replies are kept and marked not runnable, with why) and
whether the chat shows it. ``PUT /{name}`` writes a set; ``POST /import`` takes a
SillyTavern ``QuickReplies/<name>.json`` file (a file that does not read is refused with
file, field and reason, and nothing is written).
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, File, Request, Response, UploadFile
from pydantic import BaseModel, ConfigDict, Field

from storyloom.chat.personalab.quick_replies import (
    QuickReplyButton,
    QuickReplyLibrary,
    reply_buttons,
)
from storyloom.core.errors import FieldProblem, InvalidInput
from storyloom.server.api_errors import error_responses, upload_errors
from storyloom.server.file_transfer import read_named_upload
from storyloom.server.state import server_state
from storyloom.sillytavern.quick_reply_set import QuickReplySetFile, parse_quick_reply_set

router = APIRouter(prefix="/api/quick-replies", tags=["quick-replies"])

_ERRORS = error_responses(400, 404, 413, 422)


class QuickReplySetView(BaseModel):
    name: str
    visible: bool = Field(description="The chat shows this set's buttons")
    send: bool = Field(
        description="A click sends; False (the set's disableSend): it only fills the "
        "message box. With the set's injectInput the reply joins what is typed there "
        "(before it with placeBeforeInput), else it replaces it"
    )
    buttons: list[QuickReplyButton]
    set: QuickReplySetFile = Field(description="The set file as SillyTavern writes it")


class QuickReplyProblem(BaseModel):
    file: str
    error: str


class QuickReplySetList(BaseModel):
    sets: list[QuickReplySetView]
    problems: list[QuickReplyProblem] = Field(default_factory=list)


class QuickReplySetSave(BaseModel):
    model_config = ConfigDict(extra="forbid")

    set: QuickReplySetFile
    visible: bool | None = Field(default=None, description="None: as it was (a new set shows)")


def _library(request: Request) -> QuickReplyLibrary:
    return QuickReplyLibrary(server_state(request).project_dir)


def _view(quick_set: QuickReplySetFile, visible: list[str]) -> QuickReplySetView:
    return QuickReplySetView(
        name=quick_set.name,
        visible=quick_set.name in visible,
        send=not quick_set.disableSend,
        buttons=reply_buttons(quick_set),
        set=quick_set,
    )


def _one(library: QuickReplyLibrary, name: str) -> QuickReplySetView:
    return _view(library.get(name), library.visible())


@router.get("", response_model=QuickReplySetList)
def list_sets(request: Request) -> QuickReplySetList:
    """Every set: the visible ones first, in the order the chat shows them."""
    library = _library(request)
    visible = library.visible()
    order = {name: i for i, name in enumerate(visible)}
    sets = sorted(library.sets(), key=lambda s: (order.get(s.name, len(order)), s.name))
    problems = [QuickReplyProblem(file=str(p.path), error=str(p)) for p in library.problems()]
    return QuickReplySetList(sets=[_view(s, visible) for s in sets], problems=problems)


@router.post("/import", status_code=201, response_model=QuickReplySetView, responses=_ERRORS)
async def import_set(
    request: Request,
    file: Annotated[UploadFile, File(description="A SillyTavern QuickReplies/<name>.json")],
) -> QuickReplySetView:
    """A SillyTavern set file (v2, or an older v1 set); it replaces the set of its name."""
    library = _library(request)
    filename, data = await read_named_upload(request, file)
    with upload_errors(filename):
        quick_set = parse_quick_reply_set(data, filename)
    await asyncio.to_thread(library.save, quick_set)
    return _one(library, quick_set.name)


@router.get("/{name}", response_model=QuickReplySetView, responses=_ERRORS)
def get_set(request: Request, name: str) -> QuickReplySetView:
    return _one(_library(request), name)


@router.put("/{name}", response_model=QuickReplySetView, responses=_ERRORS)
def save_set(request: Request, name: str, body: QuickReplySetSave) -> QuickReplySetView:
    """Write the set called ``name`` (its ``set.name`` must be ``name``)."""
    if body.set.name != name:
        reason = f"the set is called {body.set.name!r}, the address names {name!r}"
        raise InvalidInput("quick reply set: " + reason, [FieldProblem("set.name", reason)])
    library = _library(request)
    library.save(body.set, visible=body.visible)
    return _one(library, name)


@router.delete("/{name}", status_code=204, responses=_ERRORS)
def delete_set(request: Request, name: str) -> Response:
    _library(request).delete(name)
    return Response(status_code=204)
