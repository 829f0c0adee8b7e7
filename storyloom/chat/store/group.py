"""A group chat: several characters in one conversation, as SillyTavern's groups.

The conversation's ``settings.group`` says who is in it and how they take turns
(:class:`GroupSettings`); each member's card is copied when the member joins and kept in
the conversation's metadata (see :mod:`.group_members`), so editing the character
later does not change the chat, exactly as a one-to-one chat keeps its snapshot. A reply
records who wrote it in ``Message.extra[SPEAKER_KEY]`` (``{"id", "name"}``); a message
imported from SillyTavern names its speaker by ``original_avatar`` instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from storyloom.chat.store.message import Message

SPEAKER_KEY = "speaker"
"""Message extra key: ``{"id": member id, "name": character name}``."""

ActivationStrategy = Literal["natural", "list", "manual"]
GenerationMode = Literal["swap", "append", "append_disabled"]


class GroupMember(BaseModel):
    """One member: the character (a preset id, or an imported card's avatar name)."""

    model_config = ConfigDict(extra="allow")

    character_id: str = Field(min_length=1)
    muted: bool = Field(
        default=False, description="Never picked to speak (SillyTavern's disabled_members)"
    )
    connection: str | None = Field(
        default=None,
        description="The named connection this member's replies are written with, over "
        "the chat's and the character's; None: those",
    )


class GroupSettings(BaseModel):
    """Who is in a group chat and how they take turns."""

    model_config = ConfigDict(extra="allow")

    members: list[GroupMember] = Field(default_factory=list, description="In list order")
    activation_strategy: ActivationStrategy = Field(
        default="natural",
        description="natural: mentioned names, then talkativeness; list: member order; "
        "manual: only the member the user picks",
    )
    allow_self_responses: bool = Field(
        default=False, description="Natural order may pick the member who spoke last"
    )
    auto_mode: bool = Field(default=False, description="Members keep talking on their own")
    auto_mode_delay: int = Field(default=5, ge=1, description="Seconds between auto replies")
    generation_mode: GenerationMode = Field(
        default="swap",
        description="swap: only the speaker's card; append: every unmuted member's card "
        "joined; append_disabled: every member's card joined, muted ones too",
    )
    join_prefix: str = Field(
        default="", description="Before each joined card field (<FIELDNAME>: its name)"
    )
    join_suffix: str = Field(default="", description="After each joined card field")

    def member(self, character_id: str) -> GroupMember | None:
        return next((m for m in self.members if m.character_id == character_id), None)

    def unmuted(self) -> list[str]:
        return [m.character_id for m in self.members if not m.muted]


def speaker_of(message: Message, group: GroupSettings | None = None) -> str | None:
    """The member who wrote ``message`` (None: the user, the system, or unknown).

    A reply made here names its speaker; one imported from SillyTavern has the avatar
    in its kept line (``original_avatar``), or only a name, matched against the members'
    snapshots by the caller when it has them.
    """
    if message.role != "assistant":
        return None
    speaker = message.extra.get(SPEAKER_KEY)
    if isinstance(speaker, Mapping) and isinstance(speaker.get("id"), str):
        return str(speaker["id"])
    line = message.extra.get("st_line")
    avatar = line.get("original_avatar") if isinstance(line, Mapping) else None
    known = isinstance(avatar, str) and bool(avatar)
    if known and (group is None or group.member(str(avatar)) is not None):
        return str(avatar)
    return None
