"""SillyTavern's group file: ``data/<user>/groups/<id>.json``.

A group names its members by their cards' avatar file names (``"Seraphina.png"``) and
keeps how they take turns: ``activation_strategy`` (0 natural, 1 list, 2 manual,
3 pooled), ``generation_mode`` (0 swap character cards, 1 join them, 2 join them with
muted members too) with ``generation_mode_join_prefix``/``_suffix``,
``disabled_members`` (muted), ``allow_self_responses``, ``auto_mode_delay`` (seconds)
and the ids of its chats (``chat_id`` the current one, ``chats`` all of them: each is
``group chats/<chat id>.jsonl``). Keys this model does not name are kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from storyloom.sillytavern.json_document import parse_json_document

NATURAL, LIST, MANUAL, POOLED = 0, 1, 2, 3
SWAP, APPEND, APPEND_DISABLED = 0, 1, 2


def _text_id(value: Any) -> Any:
    """Ids were numbers (``Date.now()``) in older files; SillyTavern reads them as text."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


class GroupFile(BaseModel):
    """A SillyTavern group, as its file holds it."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1)
    name: str = "New Group"
    members: list[str] = Field(description="Avatar file names of the member cards, in order")
    avatar_url: str | None = None
    allow_self_responses: bool = False
    activation_strategy: int = Field(default=NATURAL, ge=0, le=3)
    generation_mode: int = Field(default=SWAP, ge=0, le=2)
    disabled_members: list[str] = Field(default_factory=list)
    chat_metadata: dict[str, Any] = Field(default_factory=dict)
    fav: bool | str | None = None
    chat_id: str | None = None
    chats: list[str] = Field(default_factory=list)
    auto_mode_delay: int | float = Field(default=5, ge=0)
    generation_mode_join_prefix: str = ""
    generation_mode_join_suffix: str = ""

    @field_validator("id", "chat_id", mode="before")
    @classmethod
    def _id_as_text(cls, value: Any) -> Any:
        return _text_id(value)

    @field_validator("chats", mode="before")
    @classmethod
    def _ids_as_text(cls, value: Any) -> Any:
        return [_text_id(v) for v in value] if isinstance(value, list) else value

    @property
    def current_chat(self) -> str:
        """The chat the group opens on (older files: the group's own id)."""
        return self.chat_id or self.id


def parse_group_file(data: bytes | str, path: Path | str) -> GroupFile:
    """The group in ``data``; anything that does not fit refuses the whole file, naming
    each field and why."""
    return parse_json_document(data, path, GroupFile, "a group file")
