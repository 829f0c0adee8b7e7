"""The WebSocket message envelope of seed 002: every message is ``{"type": "...", ...}``.

Only the messages the server handles today are modelled; later layers add theirs to the
unions. Parsing goes through one ``TypeAdapter`` so an unknown or malformed message gets a
``status: error`` reply naming what was wrong instead of closing the socket.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class StatusMessage(_Message):
    """Server → browser: the connection's state (``connected`` / ``busy`` / ``error``)."""

    type: Literal["status"] = "status"
    status: Literal["connected", "busy", "error"]
    message: str | None = None


class EmbeddingProgressMessage(_Message):
    """Server → browser: how far the background embedding of one knowledge base is."""

    type: Literal["knowledge:embedding-progress"] = "knowledge:embedding-progress"
    kb_id: str = Field(alias="kbId")
    model_id: str = Field(alias="modelId")
    state: Literal["queued", "running", "done", "failed", "cancelled"]
    done: int
    total: int
    error: str | None = None


class ConnectMessage(_Message):
    """Browser → server: open a project (the id is checked once projects exist)."""

    type: Literal["connect"]
    project_id: str = Field(alias="projectId")


class DisconnectMessage(_Message):
    type: Literal["disconnect"]


ClientMessage = Annotated[ConnectMessage | DisconnectMessage, Field(discriminator="type")]
client_message_adapter: TypeAdapter[ClientMessage] = TypeAdapter(ClientMessage)
ServerMessage = StatusMessage | EmbeddingProgressMessage
