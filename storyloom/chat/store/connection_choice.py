"""Which named connection (settings.json ``connections``) writes a chat's replies.

Three places may name one, and the most specific wins:

1. in a group chat, the speaking member's ``connection`` (the group's member settings);
2. the chat's own ``settings.connection``;
3. the character's card, ``extensions.storyloom.connection`` (set on the character page;
   read from the character as it is now, so a change holds from the next turn on, and
   from the chat's copy of the card when the character is gone);

and with none of them, the user model (``user_llm``) answers. The choice keeps the
place it came from, so a name that no longer exists is reported with where it was
picked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from storyloom.chat.store.conversation import ConversationSettings

CARD_KEY = "connection"
"""Key under the card's ``extensions.storyloom``."""


@dataclass(frozen=True)
class ConnectionChoice:
    name: str | None
    """The connection's name; None: the user model."""
    chosen_in: str = ""
    """Where it was picked, in words (for the error when it is gone)."""


def card_connection(card: Mapping[str, Any]) -> str | None:
    """The connection a card names (``extensions.storyloom.connection``)."""
    extensions = card.get("extensions")
    ours = extensions.get("storyloom") if isinstance(extensions, Mapping) else None
    named = ours.get(CARD_KEY) if isinstance(ours, Mapping) else None
    return named if isinstance(named, str) and named.strip() else None


def choose_connection(
    settings: ConversationSettings,
    card: Mapping[str, Any],
    *,
    speaker: str | None = None,
) -> ConnectionChoice:
    """The connection of a reply in a chat with ``settings``, written by the character
    whose card is ``card`` (``speaker``: the group member speaking, if any)."""
    group = settings.group
    member = group.member(speaker) if group is not None and speaker else None
    if member is not None and member.connection:
        return ConnectionChoice(member.connection, f"the group member {speaker!r}'s settings")
    if settings.connection:
        return ConnectionChoice(settings.connection, "the chat's settings")
    named = card_connection(card)
    if named:
        name = card.get("name")
        who = f"the character {name!r}" if isinstance(name, str) and name else "the character"
        return ConnectionChoice(named, f"{who}'s card")
    return ConnectionChoice(None)
