"""What a message carries besides its text: earlier versions and "hidden from the prompt".

Both live in the message's ``extra`` (no column of their own), under keys that SillyTavern's
own ``extra`` never uses, since that one is kept apart (``st_extra``):

- ``versions``: the texts an edit in place replaced, oldest first, each with when it was
  replaced. SillyTavern keeps no history of an edit; storyloom keeps it so an edit can be
  undone (a version restored) without the tree growing a sibling.
- ``hidden``: SillyTavern's ghost (its ``is_system`` on a user or character line): the
  message stays in the chat, dimmed, and is left out of the prompt's history.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

VERSIONS_KEY = "versions"
HIDDEN_KEY = "hidden"
MAX_VERSIONS = 50
"""Versions kept per message; the oldest go first (a long edit session stays small)."""


class MessageVersion(BaseModel):
    """A text a message had before an edit in place replaced it."""

    content: str
    thought: str | None = None
    replaced_at: float = Field(description="Unix seconds: when the edit replaced it")


def is_hidden(extra: Mapping[str, Any]) -> bool:
    return extra.get(HIDDEN_KEY) is True


def versions_of(extra: Mapping[str, Any]) -> list[MessageVersion]:
    """The message's earlier versions, oldest first (malformed entries are skipped)."""
    raw = extra.get(VERSIONS_KEY)
    if not isinstance(raw, list):
        return []
    out: list[MessageVersion] = []
    for item in raw:
        if isinstance(item, dict) and isinstance(item.get("content"), str):
            thought = item.get("thought")
            when = item.get("replaced_at")
            out.append(
                MessageVersion(
                    content=item["content"],
                    thought=thought if isinstance(thought, str) else None,
                    replaced_at=float(when) if isinstance(when, int | float) else 0.0,
                )
            )
    return out


def with_version(
    extra: Mapping[str, Any], replaced: MessageVersion, *, drop: int | None = None
) -> dict[str, Any]:
    """``extra`` with ``replaced`` added as the newest version (``drop``: an index of the
    old list to remove first, the version being restored)."""
    versions = versions_of(extra)
    if drop is not None:
        del versions[drop]
    versions.append(replaced)
    kept = versions[-MAX_VERSIONS:]
    return {**extra, VERSIONS_KEY: [v.model_dump(exclude_none=True) for v in kept]}


def with_hidden(extra: Mapping[str, Any], hidden: bool) -> dict[str, Any]:
    out = {k: v for k, v in extra.items() if k != HIDDEN_KEY}
    if hidden:
        out[HIDDEN_KEY] = True
    return out
