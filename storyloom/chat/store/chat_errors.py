"""The conversation store's errors: a request it cannot do as asked, and a stale version.

A conversation or message that does not exist is :class:`storyloom.core.errors.NotFound`.
"""

from __future__ import annotations

from storyloom.core.errors import Conflict, StoryloomError


class ChatError(StoryloomError):
    """A chat operation that cannot be done as asked (the server answers 400)."""


class VersionConflict(Conflict):
    """The conversation changed since the caller read it: reload and retry."""

    def __init__(self, conversation_id: str, expected: int, actual: int) -> None:
        self.conversation_id = conversation_id
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"conversation {conversation_id} was changed meanwhile: expected version "
            f"{expected}, it is at version {actual}; reload it and try again",
            version=actual,
        )
