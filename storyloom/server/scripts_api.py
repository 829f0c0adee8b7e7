"""``/api/scripts``: the Lua and JavaScript files a ``chat:Script`` node runs.

The project's scripts (``<project>/scripts/<name>.lua|.js``) are listed, read, saved and
deleted here; the enabled plugins' scripts (``<plugin>:<file>``) are listed and read, and
refused with a 409 when asked to change. The node and these routes see the same plugins:
both go through the chat services' ``script_folders``
(:mod:`storyloom.project.scripts`).
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from storyloom.project.scripts import ScriptFile, ScriptInfo, ScriptLibrary
from storyloom.server.api_errors import error_responses
from storyloom.server.state import server_state

router = APIRouter(prefix="/api/scripts", tags=["scripts"])


def _library(request: Request) -> ScriptLibrary:
    state = server_state(request)
    folders = state.workflows.services.script_folders
    return ScriptLibrary(state.project_dir, folders() if folders is not None else {})


class ScriptSave(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str = Field(description="The script's whole text")


@router.get("", response_model=list[ScriptInfo])
def list_scripts(request: Request) -> list[ScriptInfo]:
    """The project's scripts by name, then each enabled plugin's (read-only)."""
    return _library(request).list_scripts()


@router.get("/{name}", response_model=ScriptFile, responses=error_responses(404, 422))
def get_script(request: Request, name: str) -> ScriptFile:
    return _library(request).read(name)


@router.put("/{name}", response_model=ScriptFile, responses=error_responses(409, 404, 422))
def put_script(request: Request, name: str, body: ScriptSave) -> ScriptFile:
    """Create or replace a project script (written atomically). The name is letters,
    digits, ``_ . -`` ending in ``.lua`` or ``.js``; a plugin's script is a 409."""
    return _library(request).write(name, body.code)


@router.delete(
    "/{name}", status_code=204, response_class=Response, responses=error_responses(404, 409, 422)
)
def delete_script(request: Request, name: str) -> Response:
    _library(request).delete(name)
    return Response(status_code=204)
