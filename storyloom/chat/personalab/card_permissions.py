"""What each character's card may run, as the user allowed it.

A card from the internet carries code: regex scripts that rewrite the chat, HTML with
scripts (status bars, front-end cards) and Tavern Helper scripts. SillyTavern asks once per
character whether its regex scripts may run; storyloom asks the same for all of it. The
answers are kept in the project's ``card_permissions.json``, outside every card, as the
agent answers are (:mod:`.agent_consent`): a card cannot allow itself, and a re-imported card
keeps what the user said for that character.

A new chat with the character starts from these answers (its regex and frame-script
switches); the frame bridge reads the rest (writes, sending messages, network, which
Tavern Helper scripts run) from here when it runs the card's HTML.
"""

from __future__ import annotations

import threading
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from storyloom.core.atomic_io import atomic_write_json
from storyloom.core.errors import FileFormatError, problems_from_validation
from storyloom.core.json_files import read_json_object

FILE_NAME = "card_permissions.json"


class CardPermissions(BaseModel):
    """One character's answers. Everything is off until the user turns it on."""

    model_config = ConfigDict(extra="forbid")

    asked: bool = Field(
        default=False,
        description="The user has answered the import question for this character "
        "(the page stops asking)",
    )
    regex_scripts: bool = Field(
        default=False, description="The card's regex scripts run in its new chats"
    )
    frame_scripts: bool = Field(
        default=False,
        description="Scripts run in the card's HTML frames (status bars, front-end cards) "
        "in its new chats",
    )
    frame_writes: bool = Field(
        default=False,
        description="The card's frames and scripts may change variables and send messages",
    )
    frame_network: bool = Field(
        default=False, description="The card's frames and scripts may load from the network"
    )
    helper_scripts: list[str] = Field(
        default_factory=list,
        description="Ids of the card's own Tavern Helper scripts the user allowed to run "
        "(MVU's bundle and schema are served natively and need no entry)",
    )


class CardPermissionStore:
    """``<project>/card_permissions.json``: character id → :class:`CardPermissions`."""

    def __init__(self, project_dir: Path) -> None:
        self.path = project_dir / FILE_NAME
        self._lock = threading.Lock()

    def of(self, character_id: str) -> CardPermissions:
        """The character's answers (all off when the user never answered)."""
        with self._lock:
            return self._read().get(character_id, CardPermissions())

    def set(self, character_id: str, permissions: CardPermissions) -> CardPermissions:
        with self._lock:
            answers = self._read()
            answers[character_id] = permissions
            self._write(answers)
        return permissions

    def forget(self, character_id: str) -> None:
        """Drop the answers (the character is gone: a new one given its id asks again)."""
        with self._lock:
            answers = self._read()
            if answers.pop(character_id, None) is not None:
                self._write(answers)

    def _write(self, answers: dict[str, CardPermissions]) -> None:
        atomic_write_json(self.path, {k: v.model_dump(mode="json") for k, v in answers.items()})

    def _read(self) -> dict[str, CardPermissions]:
        if not self.path.is_file():
            return {}
        data = read_json_object(self.path)
        answers: dict[str, CardPermissions] = {}
        problems = []
        for key, value in data.items():
            try:
                answers[key] = CardPermissions.model_validate(value)
            except ValidationError as exc:
                problems.extend(problems_from_validation(exc, prefix=key))
        if problems:
            raise FileFormatError(self.path, problems)
        return answers
