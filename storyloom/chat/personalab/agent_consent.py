"""Which agent profile each character answers with, as the user confirmed it.

A card may carry ``extensions.storyloom.agent_profile``: the tool-using agent its author
meant it to answer with. A downloaded card must not switch on the user's tools by itself,
so that field is only a suggestion. The user confirms it (or picks another profile, or
none) once per character on the character page, and the answer is kept here, in the
project's ``agent_consent.json``, outside every card: a card cannot confirm itself, and an
edit to its suggestion changes nothing until the user answers again.

The file maps a character id to the profile it answers with; ``""`` records a "no" (the
character page then stops asking). A character that is not in the file answers without an
agent, whatever its card suggests.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from storyloom.core.atomic_io import atomic_write_json
from storyloom.core.errors import FieldProblem, FileFormatError
from storyloom.core.json_files import read_json_object

FILE_NAME = "agent_consent.json"


def suggested_agent(card: dict[str, Any]) -> str | None:
    """The agent profile a card suggests (``extensions.storyloom.agent_profile``)."""
    extensions = card.get("extensions")
    ours = extensions.get("storyloom") if isinstance(extensions, dict) else None
    named = ours.get("agent_profile") if isinstance(ours, dict) else None
    return named if isinstance(named, str) and named else None


class CharacterAgent(BaseModel):
    """A character's agent, as the character page shows it."""

    suggested: str | None = Field(
        default=None, description="The profile the card suggests (None: it suggests none)"
    )
    answered: bool = Field(
        default=False, description="The user answered for this character (yes or no)"
    )
    profile: str | None = Field(
        default=None,
        description="The profile the character answers with (None: no agent; a card's "
        "suggestion never counts until the user confirms it)",
    )

    @property
    def pending(self) -> bool:
        """The card suggests a profile the user has not answered about."""
        return self.suggested is not None and not self.answered


class AgentConsents:
    """``<project>/agent_consent.json``: character id → confirmed profile ("" = declined)."""

    def __init__(self, project_dir: Path) -> None:
        self.path = project_dir / FILE_NAME
        self._lock = threading.Lock()

    def load(self) -> dict[str, str]:
        """Every answer; none when the file does not exist yet. A broken file is a
        :class:`FileFormatError` naming it (nothing runs as an agent meanwhile)."""
        with self._lock:
            return self._read()

    def of(self, character_id: str, card: dict[str, Any]) -> CharacterAgent:
        answers = self.load()
        answer = answers.get(character_id)
        return CharacterAgent(
            suggested=suggested_agent(card), answered=answer is not None, profile=answer or None
        )

    def answer(self, character_id: str, profile: str | None) -> None:
        """Record the user's answer: ``profile`` to answer with, None for no agent."""
        with self._lock:
            answers = self._read()
            answers[character_id] = profile or ""
            atomic_write_json(self.path, answers)

    def forget(self, character_id: str) -> None:
        """Drop the answer (the character is gone: a new one given its id must ask again)."""
        with self._lock:
            answers = self._read()
            if answers.pop(character_id, None) is not None:
                atomic_write_json(self.path, answers)

    def _read(self) -> dict[str, str]:
        if not self.path.is_file():
            return {}
        data = read_json_object(self.path)
        problems = [
            FieldProblem(key, 'an agent profile id or "" (no agent)')
            for key, value in data.items()
            if not isinstance(value, str)
        ]
        if problems:
            raise FileFormatError(self.path, problems)
        return data
