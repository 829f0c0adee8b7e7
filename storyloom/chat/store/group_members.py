"""The members' character snapshots a group chat keeps, and what is read from them.

They live in the conversation's metadata under :data:`MEMBERS_KEY` (member id → a
:class:`~storyloom.chat.store.conversation.CharacterSnapshot` as JSON): the metadata column
already holds what a conversation keeps besides its settings, and a snapshot is copied
once, when the member joins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from storyloom.chat.store.conversation import CharacterSnapshot, Conversation
from storyloom.chat.store.group import GroupSettings, speaker_of
from storyloom.chat.store.message import Message

MEMBERS_KEY = "group_members"
"""Conversation metadata key: member id → the member's character snapshot (JSON)."""
DEFAULT_TALKATIVENESS = 0.5
"""SillyTavern's ``talkativeness_default``: a card without the field speaks half the time."""


def member_snapshots(conversation: Conversation) -> dict[str, CharacterSnapshot]:
    """The member snapshots kept with a conversation (a broken one reads as empty)."""
    raw = conversation.metadata.get(MEMBERS_KEY)
    if not isinstance(raw, Mapping):
        return {}
    snapshots: dict[str, CharacterSnapshot] = {}
    for member_id, value in raw.items():
        try:
            snapshots[str(member_id)] = CharacterSnapshot.model_validate(value)
        except ValidationError:
            snapshots[str(member_id)] = CharacterSnapshot()
    return snapshots


def with_members(
    metadata: Mapping[str, Any], snapshots: Mapping[str, CharacterSnapshot]
) -> dict[str, Any]:
    """``metadata`` with the member snapshots replaced by ``snapshots``."""
    return {
        **metadata,
        MEMBERS_KEY: {k: v.model_dump(mode="json") for k, v in snapshots.items()},
    }


def with_group_members(metadata: Mapping[str, Any], source: Conversation) -> dict[str, Any]:
    """``metadata`` with ``source``'s member snapshots, when ``source`` is a group chat (a
    conversation continued from it keeps its members)."""
    if source.settings.group is None:
        return dict(metadata)
    return with_members(metadata, member_snapshots(source))


def member_name(snapshots: Mapping[str, CharacterSnapshot], member_id: str) -> str:
    snapshot = snapshots.get(member_id)
    name = snapshot.text("name") if snapshot is not None else ""
    return name or member_id


def talkativeness(snapshot: CharacterSnapshot | None) -> float:
    """The card's ``extensions.talkativeness`` (SillyTavern stores it as text), 0..1."""
    if snapshot is None:
        return DEFAULT_TALKATIVENESS
    extensions = snapshot.card.get("extensions")
    value = extensions.get("talkativeness") if isinstance(extensions, Mapping) else None
    if value is None:
        value = snapshot.card.get("talkativeness")
    try:
        number = float(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        number = None
    if number is None or number != number:  # NaN, as SillyTavern's isNaN check
        return DEFAULT_TALKATIVENESS
    return min(max(number, 0.0), 1.0)


def speaker_by_name(
    message: Message, snapshots: Mapping[str, CharacterSnapshot], group: GroupSettings
) -> str | None:
    """:func:`speaker_of`, falling back to the member whose name the message carries."""
    found = speaker_of(message, group)
    if found is not None or message.role != "assistant":
        return found
    for member in group.members:
        if member_name(snapshots, member.character_id) == message.name:
            return member.character_id
    return None
