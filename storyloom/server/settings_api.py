"""``/api/settings``: read (keys redacted), update, and test an endpoint from the server.

The browser never holds an API key: it sends a new key once, and the test call uses the
stored key unless the form carries a new one.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field, ValidationError
from pydantic.config import JsonDict

from storyloom.core.errors import FieldProblem, InvalidInput, problems_from_validation
from storyloom.core.settings import (
    ChatEndpoint,
    EmbeddingEndpoint,
    Role,
    SettingsUpdate,
    SettingsView,
)
from storyloom.llm.connection_check import (
    ConnectionReport,
    check_chat_endpoint,
    check_embedding_endpoint,
)
from storyloom.server.api_errors import ErrorBody, field_errors
from storyloom.server.state import ServerState

router = APIRouter()
_ERRORS: dict[int | str, dict[str, Any]] = {422: {"model": ErrorBody}}


def _state(request: Request) -> ServerState:
    state: ServerState = request.app.state.storyloom
    return state


@router.get("/api/settings", response_model=SettingsView)
def get_settings(request: Request) -> SettingsView:
    return _state(request).settings.view()


@router.put("/api/settings", response_model=SettingsView, responses=_ERRORS)
async def put_settings(request: Request, update: SettingsUpdate) -> SettingsView:
    state = _state(request)
    async with state.settings_lock:
        with field_errors("settings", ""):
            new_file = state.loaded.from_file.with_update(update)
        state.settings_store.save(new_file)
        state.reload_settings()
    return state.settings.view()


_ENDPOINT_SCHEMA: JsonDict = {
    "anyOf": [
        {"$ref": "#/components/schemas/ChatEndpointUpdate"},
        {"$ref": "#/components/schemas/EmbeddingEndpointUpdate"},
        {"type": "null"},
    ]
}


class SettingsTestRequest(BaseModel):
    """Which role to test; ``endpoint`` tests unsaved form values (same shape as PUT).

    ``endpoint`` is validated by the handler against the model of ``role``, so that errors
    name ``endpoint.<field>``; the schema still tells clients its real shape.
    """

    role: Role
    endpoint: dict[str, Any] | None = Field(default=None, json_schema_extra=_ENDPOINT_SCHEMA)


@router.post("/api/settings/test", response_model=ConnectionReport, responses=_ERRORS)
async def test_settings(request: Request, body: SettingsTestRequest) -> ConnectionReport:
    state = _state(request)
    settings = state.settings
    if body.endpoint is not None:
        try:
            settings = settings.with_update(
                SettingsUpdate.model_validate({body.role: body.endpoint})
            )
        except ValidationError as exc:
            # The update model nests under the role; the request nests under "endpoint".
            problems = []
            for problem in problems_from_validation(exc):
                inner = problem.field.removeprefix(body.role).lstrip(".")
                problems.append(
                    FieldProblem(f"endpoint.{inner}" if inner else "endpoint", problem.reason)
                )
            raise InvalidInput.of("settings", problems) from None
    endpoint = getattr(settings, body.role)
    if isinstance(endpoint, EmbeddingEndpoint):
        return await check_embedding_endpoint(endpoint)
    assert isinstance(endpoint, ChatEndpoint)
    return await check_chat_endpoint(endpoint, role=body.role)
