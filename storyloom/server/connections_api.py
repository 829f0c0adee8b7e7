"""``/api/connections``: the named connections (list, create or replace, delete, test)
and the import of SillyTavern's connection profiles.

Each connection is one endpoint like the user or agent model. As with the roles, keys
never reach the browser: a view says ``api_key_set``; an update without ``api_key``
keeps the stored key and ``""`` clears it.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, File, Form, Path, Request, UploadFile
from pydantic import BaseModel

from storyloom.core.errors import FieldProblem, InvalidInput
from storyloom.core.settings import (
    CONNECTION_NAME_MAX,
    ChatEndpointUpdate,
    ChatEndpointView,
    check_connection_name,
)
from storyloom.llm.connection_check import ConnectionReport, check_chat_endpoint
from storyloom.project.connection_import import ConnectionImportResult, import_connections
from storyloom.server.api_errors import error_responses, field_errors, upload_errors
from storyloom.server.file_transfer import read_named_upload
from storyloom.server.settings_api import save_settings
from storyloom.server.state import server_state
from storyloom.sillytavern.connection_profiles import read_connection_profiles

router = APIRouter(prefix="/api/connections", tags=["connections"])
_ERRORS = error_responses(404, 422)

ConnectionName = Annotated[
    str, Path(min_length=1, max_length=CONNECTION_NAME_MAX, description="The connection's name")
]


class ConnectionsView(BaseModel):
    """Every connection (name → endpoint, keys redacted), by name."""

    connections: dict[str, ChatEndpointView]


def _name(name: str) -> str:
    try:
        return check_connection_name(name)
    except ValueError as exc:
        raise InvalidInput.of("connection", [FieldProblem("name", str(exc))]) from None


@router.get("", response_model=ConnectionsView)
def list_connections(request: Request) -> ConnectionsView:
    return ConnectionsView(connections=server_state(request).configured_settings.connection_views())


@router.put("/{name}", response_model=ConnectionsView, responses=_ERRORS)
async def put_connection(
    request: Request, name: ConnectionName, endpoint: ChatEndpointUpdate
) -> ConnectionsView:
    """Create or replace connection ``name``; ``api_key`` absent keeps the stored key."""
    state = server_state(request)
    name = _name(name)
    async with state.settings_lock:
        with field_errors("connection", f"connections.{name}"):
            new_file = state.loaded.from_file.with_connection(name, endpoint)
        save_settings(state, new_file)
    return list_connections(request)


@router.delete("/{name}", response_model=ConnectionsView, responses=_ERRORS)
async def delete_connection(request: Request, name: ConnectionName) -> ConnectionsView:
    """Remove connection ``name``. A chat, card, agent or writing role that still names it
    fails with an error naming it until another is picked."""
    state = server_state(request)
    async with state.settings_lock:
        new_file = state.loaded.from_file.without_connection(name)
        save_settings(state, new_file)
    return list_connections(request)


@router.post("/{name}/test", response_model=ConnectionReport, responses=_ERRORS)
async def test_connection(
    request: Request, name: ConnectionName, endpoint: ChatEndpointUpdate | None = None
) -> ConnectionReport:
    """Ask the connection (the form's unsaved values over the saved ones, the stored key
    unless the form has a new one) whether it answers."""
    state = server_state(request)
    name = _name(name)
    settings = state.settings
    if endpoint is not None:
        with field_errors("connection", "endpoint"):
            settings = settings.with_connection(name, endpoint)
    return await check_chat_endpoint(
        settings.endpoint_for("user", name, chosen_in="the test"), role=f"connections.{name}"
    )


@router.post("/import", response_model=ConnectionImportResult, responses=_ERRORS)
async def import_sillytavern_connections(
    request: Request,
    file: Annotated[UploadFile, File(description="SillyTavern's settings.json")],
    replace: Annotated[
        bool, Form(description="Overwrite connections of the same name (keys are kept)")
    ] = False,
) -> ConnectionImportResult:
    """SillyTavern's connection profiles (its settings.json's
    ``extension_settings.connectionManager.profiles``) become connections; a profile whose
    API storyloom cannot talk to is reported, the others imported. No key comes with them
    (SillyTavern keeps keys in secrets.json)."""
    state = server_state(request)
    filename, data = await read_named_upload(request, file)
    with upload_errors(filename):
        profiles = await asyncio.to_thread(read_connection_profiles, data, source=filename)
    if not profiles:
        raise InvalidInput(
            f"{filename}: no connection profiles (SillyTavern keeps them in its "
            "settings.json under extension_settings.connectionManager.profiles)"
        )
    async with state.settings_lock:
        new_file, result = import_connections(state.loaded.from_file, profiles, replace=replace)
        if result.imported:
            save_settings(state, new_file)
    return result
