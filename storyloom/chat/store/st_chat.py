"""SillyTavern chats in and out of the turn tree.

A SillyTavern ``.jsonl`` chat is a list: one line per message, and on a message its
``swipes`` (alternative texts, ``swipe_id`` the one shown) with a ``swipe_info`` entry per
swipe. In storyloom every swipe is a sibling message under the same parent, so a swipe
can be continued from like any other branch; the first message's swipes (alternate
greetings) are sibling roots.

Nothing SillyTavern wrote is dropped: the line each message came from is kept on the
swipe that was shown (``Message.extra["st_line"]``, its ``mes``/``swipes``/``swipe_info``/
``extra`` left out since the siblings hold them), each swipe keeps its own ``swipe_info``
entry and ``extra``, and the header's ``chat_metadata`` becomes the conversation's
metadata. So an imported chat that was not changed exports back to the same JSON
objects, line by line and key by key, and one that was changed exports the way
SillyTavern itself would have saved it (``mes`` = the shown swipe, the swipe's
``send_date``/``gen_started``/``gen_finished``/``extra`` on the line).

Messages made in storyloom export with the fields current SillyTavern writes: ``send_date``
as ``Date.toISOString()`` (UTC, milliseconds, ``Z``) and the header's ``create_date`` as its
``humanizedDateTime`` (local ``YYYY-MM-DD@HHhMMmSSsMMMms``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from storyloom.chat.store.conversation import CharacterSnapshot, Conversation, ConversationSettings
from storyloom.chat.store.message import Message, Role
from storyloom.chat.store.message_marks import HIDDEN_KEY, is_hidden
from storyloom.chat.store.state import ChatState
from storyloom.chat.store.tree_rows import trusted
from storyloom.chat.store.turn_tree import NewMessage, TurnTree, new_id
from storyloom.core.errors import NotFound
from storyloom.sillytavern.chat_log import (
    ChatLog,
    ChatMessage,
    dump_line,
    parse_send_date,
)

HEADER_KEY = "st_header"
"""Conversation metadata key holding the imported header (``chat_metadata`` left out: the
rest of the metadata is it)."""
LINE_KEY = "st_line"
EXTRA_KEY = "st_extra"
SWIPE_INFO_KEY = "st_swipe_info"
RAW_SWIPES_KEY = "st_swipes"
RAW_SWIPE_INFO_KEY = "st_swipe_info_raw"
SWIPE_COUNT_KEY = "st_swipe_count"
SIBLING_FIELDS = frozenset({"mes", "swipes", "swipe_info", "extra"})
"""Line fields whose values live on the siblings, not in the kept line."""
SWIPE_TIMES = ("send_date", "gen_started", "gen_finished")
SPEAKER_FIELDS = ("name", "original_avatar", "force_avatar")
"""Line fields that say who spoke."""
DEFAULT_USER = "User"
SYSTEM_NAME = "SillyTavern System"


class ImportedChat(BaseModel):
    conversation_id: str
    messages: int
    """Messages on the active path (one per line of the file)."""
    siblings: int
    """Extra swipes: messages off the active path."""
    total: int


def import_st_chat(
    tree: TurnTree,
    chat: ChatLog,
    *,
    project_id: str,
    title: str | None = None,
    character: CharacterSnapshot | None = None,
    settings: Mapping[str, Any] | None = None,
    state: ChatState | None = None,
) -> ImportedChat:
    """Make ``chat`` (already parsed and checked) a new conversation; all or nothing.
    ``settings`` override what the chat's header gives (a move-in's persona, books,
    pipeline); ``state`` is the state the chat starts from (its variables are added)."""
    header = chat.header
    chat_metadata: dict[str, Any] = dict(header.chat_metadata) if header is not None else {}
    metadata = dict(chat_metadata)
    if header is not None:
        kept = header.to_json()
        metadata[HEADER_KEY] = {k: (None if k == "chat_metadata" else v) for k, v in kept.items()}
    character_name = chat.character_name
    if character is None:
        card = {"name": character_name} if character_name else {}
        character = CharacterSnapshot(card=card)
    imported_at = time.time()
    rows, path_ids = _rows(chat, imported_at, _initial_state(chat_metadata, state))
    first = rows[0].created_at if rows and rows[0].created_at is not None else imported_at
    created_at = _created_at(header.create_date if header is not None else None, first)
    with tree.batch():  # all or nothing, in one commit
        conversation = tree.create_conversation(
            project_id=project_id,
            title=title or _default_title(chat),
            character=character,
            settings=_settings(chat, chat_metadata).model_copy(update=dict(settings or {})),
            metadata=metadata,
            created_at=created_at,
        )
        if rows:
            tree.add_messages(conversation.id, rows)
            # Rows go in swipe order, so each parent's active child is its last swipe;
            # moving the pointer to the end of the shown path points them at the shown one.
            tree.set_pointer(conversation.id, path_ids[-1])
    return ImportedChat(
        conversation_id=conversation.id,
        messages=len(path_ids),
        siblings=len(rows) - len(path_ids),
        total=len(rows),
    )


def conversation_importer(tree: TurnTree, *, project_id: str) -> Callable[[ChatLog, str], str]:
    """What :func:`storyloom.project.knowledge_import.import_knowledge_file` takes as
    ``chat_importer``: a chat met there becomes a conversation of ``project_id``."""

    def run(chat: ChatLog, title: str) -> str:
        return import_st_chat(tree, chat, project_id=project_id, title=title).conversation_id

    return run


def _default_title(chat: ChatLog) -> str:
    name = chat.character_name or "SillyTavern chat"
    created = chat.header.create_date if chat.header is not None else None
    return f"{name} - {created}" if isinstance(created, str) and created else name


def _settings(chat: ChatLog, chat_metadata: Mapping[str, Any]) -> ConversationSettings:
    settings = ConversationSettings(user_name=chat.user_name or DEFAULT_USER)
    note = chat_metadata.get("note_prompt")
    if isinstance(note, str) and note:
        settings.authors_note = note
        depth = chat_metadata.get("note_depth")
        if isinstance(depth, int) and not isinstance(depth, bool) and depth >= 0:
            settings.authors_note_depth = depth
    return settings


def _initial_state(chat_metadata: Mapping[str, Any], start: ChatState | None) -> ChatState | None:
    """SillyTavern keeps chat variables once per chat, not per message; they start the
    tree (on the roots) so every branch continues with them."""
    variables = chat_metadata.get("variables")
    if isinstance(variables, dict) and variables:
        base = start or ChatState()
        return base.model_copy(update={"variables": {**base.variables, **variables}})
    return start


def continue_st_chat(
    tree: TurnTree,
    conversation_id: str,
    chat: ChatLog,
    *,
    start: int,
    parent_id: str | None,
    keep_pointer: bool,
) -> list[str]:
    """Add ``chat``'s lines from ``start`` on under ``parent_id`` (None: as new roots), in
    one transaction: the lines a chat gained since it was imported, or a checkpoint's
    lines after the message it left from. Returns the ids of the added shown path. With
    ``keep_pointer`` the user stays where they were (a branch joins, the main chat stays
    shown); else the pointer moves to the last line."""
    if start >= len(chat.messages):
        return []
    rows, path_ids = _rows(chat, time.time(), None, parent=parent_id, start=start)
    with tree.batch():
        before = tree.conversation(conversation_id).pointer
        tree.add_messages(conversation_id, rows)
        tree.set_pointer(conversation_id, before if keep_pointer and before else path_ids[-1])
    return path_ids


_SYSTEM_TYPES = frozenset({"narrator", "comment"})
"""``extra.type`` of SillyTavern's own system lines (``/sys`` narration, ``/comment``)."""


def _role(line: ChatMessage) -> Role:
    """``is_system`` on a user's or the character's line is SillyTavern's ghost (hidden
    from the prompt), so it is the speaker's role plus :data:`HIDDEN_KEY`; the system
    role is for SillyTavern's own lines (its system name, narration, comments)."""
    if line.is_user:
        return "user"
    kind = line.extra.get("type")
    if line.is_system and (line.name == SYSTEM_NAME or not line.name):
        return "system"
    return "system" if isinstance(kind, str) and kind in _SYSTEM_TYPES else "assistant"


def _is_system(message: Message, imported: bool) -> bool:
    """A line's ``is_system``: in SillyTavern a saved line marked so never goes into the
    prompt. An imported line's hidden mark came from its own ``is_system``."""
    hidden = is_hidden(message.extra)
    return hidden if imported else hidden or message.role == "system"


def _created_at(value: Any, fallback: float) -> float:
    parsed = parse_send_date(value)
    if parsed is None:
        return fallback
    try:
        return parsed.timestamp()  # naive (humanised, "@" forms): the local time they were
    except (OverflowError, OSError, ValueError):
        return fallback


def _reasoning(extra: Mapping[str, Any]) -> str | None:
    value = extra.get("reasoning")
    return value if isinstance(value, str) and value else None


_ROW_FIELDS = {
    "parent_id", "role", "content", "name", "thought", "extra", "state", "message_id", "created_at"
}  # fmt: skip
"""The fields a row of :func:`_rows` sets (the others keep their defaults)."""


def _rows(
    chat: ChatLog,
    imported_at: float,
    initial: ChatState | None,
    *,
    parent: str | None = None,
    start: int = 0,
) -> tuple[list[NewMessage], list[str]]:
    """The new messages in swipe order (lines from ``start``, the first under
    ``parent``), and the ids of the shown path."""
    rows: list[NewMessage] = []
    path: list[str] = []
    for number, line in enumerate(chat.messages[start:], start):
        fallback = imported_at + number / 1000
        kept = line.to_json(blank=SIBLING_FIELDS)
        texts = list(line.swipes) if line.swipes else [line.mes]
        shown = line.swipe_id if line.swipe_id is not None else 0
        if not 0 <= shown < len(texts):
            shown = min(max(shown, 0), len(texts) - 1)
        infos = line.swipe_info
        if infos is None or len(infos) != len(texts) or not all(isinstance(i, dict) for i in infos):
            infos = None
        role = _role(line)
        shown_id = ""
        for index, text in enumerate(texts):
            message_id = new_id()
            info = infos[index] if infos is not None else None
            extra: dict[str, Any] = {}
            if index == shown:
                shown_id = message_id
                content = line.mes
                st_extra = dict(line.extra)
                extra[LINE_KEY] = kept
                extra[SWIPE_COUNT_KEY] = len(texts)
                if line.swipes is not None and (not line.swipes or line.swipes[shown] != line.mes):
                    extra[RAW_SWIPES_KEY] = line.swipes
                if line.swipe_info is not None and infos is None:
                    extra[RAW_SWIPE_INFO_KEY] = line.to_json().get("swipe_info")
                sent = line.send_date
            else:
                content = text
                info_extra = info.get("extra") if info is not None else None
                st_extra = dict(info_extra) if isinstance(info_extra, dict) else {}
                sent = info.get("send_date") if info is not None else line.send_date
            extra[EXTRA_KEY] = st_extra
            if line.is_system:
                extra[HIDDEN_KEY] = True
            if info is not None:
                extra[SWIPE_INFO_KEY] = info
            # Every value has its type already (the line was validated): a chat's rows
            # are built without validating each again.
            rows.append(
                trusted(
                    NewMessage,
                    {
                        "parent_id": parent,
                        "role": role,
                        "content": content,
                        "name": line.name,
                        "status": "complete",
                        "thought": _reasoning(st_extra),
                        "original": None,
                        "error": None,
                        "extra": extra,
                        "state": initial if parent is None else None,
                        "message_id": message_id,
                        "created_at": _created_at(sent, fallback),
                    },
                    _ROW_FIELDS,
                )
            )
        path.append(shown_id)
        parent = shown_id
    return rows, path


def export_st_chat(tree: TurnTree, conversation_id: str, *, leaf: str | None = None) -> str:
    """The active branch (or root → ``leaf``) as a SillyTavern ``.jsonl`` chat."""
    conversation = tree.conversation(conversation_id)
    if leaf is None:
        path = tree.active_path(conversation_id)
    else:
        path = tree.path(leaf)
        if path and path[-1].conversation_id != conversation_id:
            raise NotFound(f"message {leaf} is not in conversation {conversation_id}")
    names = _Names(conversation)
    lines = [dump_line(_header(conversation, names))]
    for message in path:
        group = tree.siblings(message.id)
        lines.append(dump_line(_line(message, group, names)))
    return "\n".join(lines)


class _Names:
    """Who speaks, for lines made in storyloom (imported lines keep their own names)."""

    def __init__(self, conversation: Conversation) -> None:
        self.user = conversation.settings.user_name or DEFAULT_USER
        card_name = conversation.character.card.get("name")
        self.character = card_name if isinstance(card_name, str) and card_name else None
        self.title = conversation.title

    def of(self, message: Message) -> str:
        if message.name:
            return message.name
        if message.role == "user":
            return self.user
        if message.role == "system":
            return SYSTEM_NAME
        return self.character or self.title


def iso_time(seconds: float) -> str:
    """``Date.toISOString()``: what SillyTavern writes as a message's ``send_date``."""
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def humanized_time(seconds: float) -> str:
    """SillyTavern's ``humanizedDateTime`` (local time), used for ``create_date``."""
    moment = datetime.fromtimestamp(seconds)
    return moment.strftime("%Y-%m-%d@%Hh%Mm%Ss") + f"{moment.microsecond // 1000:03d}ms"


def _header(conversation: Conversation, names: _Names) -> dict[str, Any]:
    chat_metadata = {k: v for k, v in conversation.metadata.items() if k != HEADER_KEY}
    kept = conversation.metadata.get(HEADER_KEY)
    if isinstance(kept, dict):
        header = {k: (chat_metadata if k == "chat_metadata" else v) for k, v in kept.items()}
        if "chat_metadata" not in header and chat_metadata:
            header["chat_metadata"] = chat_metadata
        return header
    return {
        "user_name": names.user,
        "character_name": names.character or conversation.title,
        "create_date": humanized_time(conversation.created_at),
        "chat_metadata": chat_metadata,
    }


def _st_extra(message: Message) -> dict[str, Any]:
    kept = message.extra.get(EXTRA_KEY)
    if isinstance(kept, dict):
        return kept
    return {"reasoning": message.thought} if message.thought else {}


def _swipe_info(message: Message) -> dict[str, Any]:
    kept = message.extra.get(SWIPE_INFO_KEY)
    if isinstance(kept, dict):
        return kept
    line = message.extra.get(LINE_KEY)
    if isinstance(line, dict):
        # An imported message that had no swipe_info: its own line has its times.
        info = {k: line[k] for k in SWIPE_TIMES if line.get(k) is not None}
        info.setdefault("send_date", iso_time(message.created_at))
        return {**info, "extra": _st_extra(message)}
    sent = iso_time(message.created_at)
    return {
        "send_date": sent,
        "gen_started": sent,
        "gen_finished": sent,
        "extra": _st_extra(message),
    }


def _as_imported(message: Message, group: Sequence[Message], holder: Message | None) -> bool:
    """The swipes are as the file had them: same count, the same one shown."""
    return (
        holder is not None
        and holder.id == message.id
        and holder.extra.get(SWIPE_COUNT_KEY) == len(group)
    )


def _swipe_fields(
    message: Message, group: Sequence[Message], holder: Message | None, as_imported: bool
) -> dict[str, Any]:
    """``swipe_id``, ``swipes``, ``swipe_info`` from the siblings (the file's own values
    when the swipes are as imported)."""
    swipe_id: Any = [m.id for m in group].index(message.id)
    swipes: Any = [m.content for m in group]
    swipe_info: Any = [_swipe_info(m) for m in group]
    if as_imported and holder is not None:
        swipe_id = holder.extra[LINE_KEY].get("swipe_id", swipe_id)
        swipes = holder.extra.get(RAW_SWIPES_KEY, swipes)
        swipe_info = holder.extra.get(RAW_SWIPE_INFO_KEY, swipe_info)
    return {"swipe_id": swipe_id, "swipes": swipes, "swipe_info": swipe_info}


def _line(message: Message, group: Sequence[Message], names: _Names) -> dict[str, Any]:
    holder = next((m for m in group if isinstance(m.extra.get(LINE_KEY), dict)), None)
    as_imported = _as_imported(message, group, holder)
    swipes = _swipe_fields(message, group, holder, as_imported)
    if holder is None:
        line: dict[str, Any] = {
            "name": names.of(message),
            "is_user": message.role == "user",
            "is_system": _is_system(message, imported=False),
            "send_date": iso_time(message.created_at),
            "mes": message.content,
            "extra": _st_extra(message),
        }
        if len(group) > 1:
            line.update(swipes)
        return line
    template: dict[str, Any] = holder.extra[LINE_KEY]
    # Another swipe shown now: the line carries that swipe's times, as in SillyTavern.
    times = _swipe_info(message) if message.id != holder.id else {}
    if SWIPE_INFO_KEY not in message.extra and message.extra.get(EXTRA_KEY) is not None:
        times = {}  # an imported swipe without swipe_info: the line's times stand
    # A sibling written here by another speaker (a group's other member) is that
    # speaker's line: the imported line's name and avatar are not its own.
    other_speaker = (
        message.id != holder.id and bool(message.name) and (message.name != template.get("name"))
    )
    line = {}
    for key, value in template.items():
        if other_speaker and key in SPEAKER_FIELDS:
            if key == "name":
                line[key] = message.name
            continue
        if key == "mes":
            line[key] = message.content
        elif key == "extra":
            line[key] = _st_extra(message)
        elif key in swipes:
            line[key] = swipes[key]
        else:
            line[key] = times.get(key, value) if key in SWIPE_TIMES else value
    if bool(line.get("is_system")) != _is_system(message, imported=True):
        # Hidden or shown again since the import: the file's own value stands otherwise.
        line["is_system"] = _is_system(message, imported=True)
    if len(group) > 1 and not as_imported:
        for key, value in swipes.items():
            line.setdefault(key, value)
    return line
