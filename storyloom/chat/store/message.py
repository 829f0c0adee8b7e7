"""One message of a conversation: a node of the turn tree."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["user", "assistant", "system"]
MessageStatus = Literal["complete", "streaming", "partial", "error"]
"""``streaming``: being written now; ``partial``: stopped, failed or interrupted mid-reply
(the text kept is what arrived); ``error``: the reply failed before any text arrived."""


class Message(BaseModel):
    """A message; every message but a root has a parent, and siblings are ordered."""

    model_config = ConfigDict(frozen=True)

    id: str
    conversation_id: str
    parent_id: str | None
    role: Role
    name: str = Field(default="", description="Speaker shown in the chat")
    content: str = Field(description="The text as stored (after regex scripts' rewrites)")
    original: str | None = Field(
        default=None, description="The text before regex scripts rewrote it, when they did"
    )
    thought: str | None = Field(default=None, description="Folded <thought> / reasoning")
    status: MessageStatus = "complete"
    error: str | None = Field(default=None, description="Why the reply stopped or failed")
    sibling_index: int = Field(default=0, ge=0, description="Order among its siblings")
    depth: int = Field(default=0, ge=0, description="Messages above it (a root has 0)")
    created_at: float = Field(description="Unix seconds")
    extra: dict[str, Any] = Field(
        default_factory=dict, description="Anything else: SillyTavern's extra, the model..."
    )
