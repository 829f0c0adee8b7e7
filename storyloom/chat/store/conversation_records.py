"""Conversation rows: creating, reading, listing, changing and deleting conversations.

A conversation's messages are the turn tree's; deleting a conversation deletes them and
their states too.
"""

from __future__ import annotations

import json
import time
from typing import Any

import apsw
from pydantic import BaseModel, ConfigDict, Field

from storyloom.chat.store.chat_errors import ChatError
from storyloom.chat.store.conversation import (
    BackgroundSnapshot,
    CharacterSnapshot,
    Conversation,
    ConversationSettings,
)
from storyloom.chat.store.state_chain import StateChain
from storyloom.chat.store.tree_rows import dumps_json, fetch, new_id, preview
from storyloom.chat.store.versioned_write import writing
from storyloom.core.errors import NotFound
from storyloom.store.database import Database

SUMMARY_PREVIEW_CHARS = 120


class ConversationSummary(BaseModel):
    """One line of the conversation list."""

    model_config = ConfigDict(frozen=True)

    id: str
    project_id: str
    title: str
    character_name: str = ""
    character_id: str | None = Field(
        default=None, description="The character preset the chat began from (its avatar's id)"
    )
    group_size: int = Field(default=0, description="Members of a group chat (0: one character)")
    updated_at: float
    message_count: int = Field(description="Messages on the path root → pointer")
    last_message: str = Field(default="", description="Preview of the pointer message")


CONVERSATION_COLUMNS = (
    "id, project_id, title, created_at, updated_at, pointer, version, character, "
    "background, settings, metadata"
)


def read_conversation(conn: apsw.Connection, conversation_id: str) -> Conversation:
    """The conversation as it is in ``conn`` (inside a write: as the write left it)."""
    rows = fetch(
        conn,
        f"SELECT {CONVERSATION_COLUMNS} FROM chat_conversation WHERE id = ?",
        (conversation_id,),
    )
    if not rows:
        raise NotFound(f"conversation {conversation_id} not found")
    (cid, project, title, created, updated, pointer, version, char, bg, sets, meta) = rows[0]
    return Conversation.model_validate(
        {
            "id": cid,
            "project_id": project,
            "title": title,
            "created_at": created,
            "updated_at": updated,
            "pointer": pointer,
            "version": version,
            "character": json.loads(char),
            "background": None if bg is None else json.loads(bg),
            "settings": json.loads(sets),
            "metadata": json.loads(meta),
        }
    )


class ConversationRecords:
    """The conversation rows of a turn tree (:class:`TurnTree` answers for them)."""

    def __init__(self, db: Database, chain: StateChain) -> None:
        self._db = db
        self._chain = chain

    def create_conversation(
        self,
        *,
        project_id: str,
        title: str,
        character: CharacterSnapshot | None = None,
        background: BackgroundSnapshot | None = None,
        settings: ConversationSettings | None = None,
        metadata: dict[str, Any] | None = None,
        conversation_id: str | None = None,
        created_at: float | None = None,
    ) -> Conversation:
        cid = conversation_id or new_id()
        now = time.time() if created_at is None else created_at
        character = character or CharacterSnapshot()
        settings = settings or ConversationSettings()
        params = (
            cid,
            project_id,
            title,
            now,
            now,
            dumps_json(character.model_dump(mode="json"), "character"),
            None
            if background is None
            else dumps_json(background.model_dump(mode="json"), "background"),
            dumps_json(settings.model_dump(mode="json"), "settings"),
            dumps_json(metadata or {}, "metadata"),
        )
        with self._db.transaction() as conn:
            try:
                conn.execute(
                    "INSERT INTO chat_conversation (id, project_id, title, created_at, "
                    "updated_at, pointer, version, character, background, settings, metadata) "
                    "VALUES (?, ?, ?, ?, ?, NULL, 0, ?, ?, ?, ?)",
                    params,
                )
            except apsw.ConstraintError as exc:
                raise ChatError(f"conversation id {cid} is already taken") from exc
            return read_conversation(conn, cid)

    def conversation(self, conversation_id: str) -> Conversation:
        return read_conversation(self._db.connection(), conversation_id)

    def conversations(self, project_id: str | None = None) -> list[ConversationSummary]:
        """Newest first; ``message_count`` counts the messages on the path to the pointer."""
        rows = fetch(
            self._db.connection(),
            "SELECT c.id, c.project_id, c.title, "
            "COALESCE(json_extract(c.character, '$.card.name'), ''), "
            "json_extract(c.character, '$.source_preset'), "
            "COALESCE(json_array_length(c.settings, '$.group.members'), 0), c.updated_at, "
            "COALESCE(p.depth + 1, 0), COALESCE(substr(p.content, 1, 400), '') "
            "FROM chat_conversation AS c LEFT JOIN chat_message AS p ON p.id = c.pointer "
            "WHERE ?1 IS NULL OR c.project_id = ?1 "
            "ORDER BY c.updated_at DESC, c.id",
            (project_id,),
        )
        return [
            ConversationSummary(
                id=cid,
                project_id=project,
                title=title,
                character_name=str(name),
                character_id=preset if isinstance(preset, str) and preset else None,
                group_size=members,
                updated_at=updated,
                message_count=count,
                last_message=preview(text, SUMMARY_PREVIEW_CHARS),
            )
            for cid, project, title, name, preset, members, updated, count, text in rows
        ]

    def update_conversation(
        self,
        conversation_id: str,
        *,
        expected_version: int | None = None,
        title: str | None = None,
        settings: ConversationSettings | None = None,
        character: CharacterSnapshot | None = None,
        background: BackgroundSnapshot | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Conversation:
        """Change the given fields (None: unchanged)."""
        changes: dict[str, Any] = {}
        if title is not None:
            changes["title"] = title
        if settings is not None:
            changes["settings"] = dumps_json(settings.model_dump(mode="json"), "settings")
        if character is not None:
            changes["character"] = dumps_json(character.model_dump(mode="json"), "character")
        if background is not None:
            changes["background"] = dumps_json(background.model_dump(mode="json"), "background")
        if metadata is not None:
            changes["metadata"] = dumps_json(metadata, "metadata")
        with writing(self._db, conversation_id, expected_version) as (conn, _head):
            if changes:
                assignments = ", ".join(f"{column} = ?" for column in changes)
                conn.execute(
                    f"UPDATE chat_conversation SET {assignments} WHERE id = ?",
                    (*changes.values(), conversation_id),
                )
            return read_conversation(conn, conversation_id)

    def delete_conversation(self, conversation_id: str) -> None:
        with self._db.transaction() as conn:
            conn.execute(
                "DELETE FROM chat_state WHERE message_id IN "
                "(SELECT id FROM chat_message WHERE conversation_id = ?)",
                (conversation_id,),
            )
            conn.execute("DELETE FROM chat_message WHERE conversation_id = ?", (conversation_id,))
            conn.execute("DELETE FROM chat_conversation WHERE id = ?", (conversation_id,))
            if conn.changes() == 0:
                raise NotFound(f"conversation {conversation_id} not found")
        self._chain.clear()
