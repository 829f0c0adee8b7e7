"""``/api/settings``: read (keys redacted), update, and test an endpoint from the server.

The browser never holds an API key: it sends a new key once, and the test call uses the
stored key unless the form carries a new one.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field, ValidationError
from pydantic.config import JsonDict

from storyloom.core.errors import (
    FieldProblem,
    InvalidInput,
    StoryloomError,
    problems_from_validation,
)
from storyloom.core.settings import (
    ChatEndpoint,
    EmbeddingEndpoint,
    Role,
    Settings,
    SettingsUpdate,
    SettingsView,
)
from storyloom.llm.chat import ChatClient
from storyloom.llm.connection_check import (
    ConnectionReport,
    check_chat_endpoint,
    check_embedding_endpoint,
)
from storyloom.llm.context_size import forget_probes as forget_context_sizes
from storyloom.llm.errors import LLMError
from storyloom.llm.tokenizers import forget_probes as forget_tokenize_routes
from storyloom.server.api_errors import error_responses, field_errors
from storyloom.server.state import ServerState, server_state

router = APIRouter()
_ERRORS = error_responses(422)


@router.get("/api/settings", response_model=SettingsView)
def get_settings(request: Request) -> SettingsView:
    return server_state(request).configured_settings.view()


@router.put("/api/settings", response_model=SettingsView, responses=_ERRORS)
async def put_settings(request: Request, update: SettingsUpdate) -> SettingsView:
    state = server_state(request)
    async with state.settings_lock:
        with field_errors("settings", ""):
            new_file = state.loaded.from_file.with_update(update)
        save_settings(state, new_file)
    return state.configured_settings.view()


def save_settings(state: ServerState, new_file: Settings) -> None:
    """Write ``new_file`` as settings.json once the plugins' settings hooks agree, and
    put it in force; call holding ``state.settings_lock``.

    A hook refuses with :class:`InvalidInput` (a 422 with its reasons); a hook that
    fails otherwise refuses too, so a broken plugin cannot let through what it checks.
    Nothing is written either way.
    """
    hook = state.plugins.hook.storyloom_settings_before_save
    try:
        hook(settings=_without_keys(new_file.to_file_json()))
    except StoryloomError:
        raise
    except Exception as exc:
        raise SettingsHookFailed(exc) from exc
    state.settings_store.save(new_file)
    state.reload_settings()
    # A user who swapped the backend behind a URL saves settings: probe it afresh.
    forget_tokenize_routes()
    forget_context_sizes()


class SettingsHookFailed(StoryloomError):
    """A plugin's ``storyloom_settings_before_save`` failed with a bug of its own: the
    save is refused (a 400) rather than let through unchecked."""

    def __init__(self, exc: Exception) -> None:
        super().__init__(
            f"settings not saved: a plugin's settings hook failed ({type(exc).__name__}: {exc})"
        )


def _without_keys(data: Any) -> Any:
    """``data`` with every ``api_key`` left out, for plugin code to read."""
    if isinstance(data, dict):
        return {k: _without_keys(v) for k, v in data.items() if k != "api_key"}
    if isinstance(data, list):
        return [_without_keys(v) for v in data]
    return data


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


def _settings_for(state: ServerState, body: SettingsTestRequest) -> Settings:
    """The saved settings, with the form's unsaved endpoint values over them."""
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
    return settings


@router.post("/api/settings/test", response_model=ConnectionReport, responses=_ERRORS)
async def test_settings(request: Request, body: SettingsTestRequest) -> ConnectionReport:
    settings = _settings_for(server_state(request), body)
    endpoint = getattr(settings, body.role)
    if isinstance(endpoint, EmbeddingEndpoint):
        return await check_embedding_endpoint(endpoint)
    assert isinstance(endpoint, ChatEndpoint)
    return await check_chat_endpoint(endpoint, role=body.role)


class ModelList(BaseModel):
    """The models an endpoint lists (its ``/models``), asked by the server with the stored
    key, so the key never reaches the browser."""

    models: list[str] = Field(description="Model ids, as the endpoint lists them")
    message: str | None = Field(
        default=None, description="Why the list is empty (no base URL, the endpoint failed)"
    )


@router.post("/api/settings/models", response_model=ModelList, responses=_ERRORS)
async def list_models(request: Request, body: SettingsTestRequest) -> ModelList:
    """The chat models the endpoint of ``role`` offers (form values over the saved ones).
    An endpoint without a ``/models`` route answers an empty list with the reason."""
    settings = _settings_for(server_state(request), body)
    endpoint = getattr(settings, body.role)
    if not isinstance(endpoint, ChatEndpoint):
        raise InvalidInput.of(
            "settings", [FieldProblem("role", "only chat models are listed here")]
        )
    if not endpoint.base_url:
        return ModelList(models=[], message="The base URL is empty.")
    # Listing needs no model; the client refuses to start without one, so any name does.
    probe = endpoint.model_copy(update={"max_retries": 0, "model": endpoint.model or "-"})
    try:
        async with ChatClient(probe) as client:
            models = await client.list_models()
    except LLMError as error:
        return ModelList(models=[], message=error.message)
    return ModelList(models=sorted(dict.fromkeys(models)))
