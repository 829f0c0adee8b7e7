"""Export a branch as PersonaLab's conversation folder (seed 004, "对话文件格式").

The folder holds ``conversation.jsonl`` (one line per message: ``role``, ``content``,
``turn``, ``timestamp``; the ``{"type": "summary", "content"}`` lines first when the
conversation started from summaries), ``metadata.json`` (preset references and RAG
scope), ``character_snapshot.json`` and, when the director tracks an outline,
``plot_state.json``. The files are returned as text, keyed by file name, so a caller can
zip them, write them to a folder or send them over HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from storyloom.chat.personalab.library import iso_utc
from storyloom.chat.store.conversation import Conversation
from storyloom.chat.store.message import Message
from storyloom.chat.store.state import ChatState

SUMMARY_TYPE = "summary"
"""``Message.extra["type"]`` of a message that holds a plot-point summary (see
:func:`storyloom.chat.personalab.summaries.seed_messages`)."""

CONVERSATION_FILE = "conversation.jsonl"
METADATA_FILE = "metadata.json"
CHARACTER_SNAPSHOT_FILE = "character_snapshot.json"
PLOT_STATE_FILE = "plot_state.json"


def is_summary(message: Message) -> bool:
    return message.extra.get("type") == SUMMARY_TYPE


def number_turns(messages: Sequence[Message]) -> list[int]:
    """The PersonaLab turn of each message: one user + one assistant is one turn, from 1.

    A user message opens a new turn once the current one has an answer; an assistant
    message before any user message (a greeting) opens turn 1; messages in a row from
    one side stay in their turn. System messages take the turn they fall in (1 at the
    start). Summary messages are outside the numbering (0).
    """
    turns: list[int] = []
    turn = 0
    answered = False
    for message in messages:
        if is_summary(message):
            turns.append(0)
            continue
        if message.role == "user":
            if turn == 0 or answered:
                turn += 1
                answered = False
        elif message.role == "assistant":
            if turn == 0:
                turn = 1
            answered = True
        turns.append(max(turn, 1))
    return turns


def _json_line(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _json_file(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2) + "\n"


def conversation_jsonl(path_messages: Sequence[Message]) -> str:
    """``conversation.jsonl``: summaries first, then the messages with turn and time.

    A failed reply that kept no text is left out: the file holds the conversation.
    """
    kept = [m for m in path_messages if not (m.status == "error" and not m.content)]
    lines = [
        _json_line({"type": SUMMARY_TYPE, "content": m.content}) for m in kept if is_summary(m)
    ]
    talk = [m for m in kept if not is_summary(m)]
    for message, turn in zip(talk, number_turns(talk), strict=True):
        lines.append(
            _json_line(
                {
                    "role": message.role,
                    "content": message.content,
                    "turn": turn,
                    "timestamp": iso_utc(message.created_at),
                }
            )
        )
    return "".join(line + "\n" for line in lines)


def metadata_json(conversation: Conversation) -> dict[str, Any]:
    settings = conversation.settings
    background = conversation.background
    return {
        "conversation_id": conversation.id,
        "created_at": iso_utc(conversation.created_at),
        "presets": {
            "character": conversation.character.source_preset,
            "background": background.source_preset if background is not None else None,
            "summaries": list(settings.summaries),
        },
        "rag_scope": settings.rag_scope.model_dump(mode="json"),
    }


def character_snapshot_json(conversation: Conversation) -> dict[str, Any]:
    """The seed's four keys (and any extra ones kept from an import); not the card."""
    snapshot = conversation.character
    data: dict[str, Any] = {
        "source_preset": snapshot.source_preset,
        "snapshot_created_at": snapshot.snapshot_created_at or iso_utc(conversation.created_at),
        "base_persona": snapshot.base_persona,
        "evolved_persona": snapshot.evolved_persona,
    }
    data.update(snapshot.model_extra or {})
    return data


def export_personalab(
    conversation: Conversation, path_messages: Sequence[Message], state: ChatState
) -> dict[str, str]:
    """The PersonaLab files of one branch (``path_messages``: root → leaf; ``state``: the
    state at the leaf), file name → text."""
    files = {
        CONVERSATION_FILE: conversation_jsonl(path_messages),
        METADATA_FILE: _json_file(metadata_json(conversation)),
        CHARACTER_SNAPSHOT_FILE: _json_file(character_snapshot_json(conversation)),
    }
    if state.plot is not None:
        files[PLOT_STATE_FILE] = _json_file(state.plot.model_dump(mode="json"))
    return files
