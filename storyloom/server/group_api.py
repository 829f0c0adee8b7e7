"""Group chats over HTTP: make one, see and change its members, ask who speaks next.

``POST /api/groups`` makes a group chat of character presets; ``GET``/``PUT
/api/chats/{id}/group`` read and change its members (mute, order, strategy, join
options); ``POST /api/chats/{id}/group/generate`` writes the next reply, by the member
the user picked or by the group's order (it streams over the WebSocket like any reply);
``POST /api/groups/import`` takes SillyTavern's group file, its chat and the members'
cards. Every write takes the ``expected_version`` the page last saw.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import PurePath
from typing import Annotated

from fastapi import APIRouter, File, Request, UploadFile
from pydantic import BaseModel, ConfigDict, Field

from storyloom.chat.personalab.card_reimport import CardReimport, card_target
from storyloom.chat.personalab.library import character_snapshot, snapshot_by_name
from storyloom.chat.service.conversations import ChatService
from storyloom.chat.store.conversation import CharacterSnapshot, Conversation
from storyloom.chat.store.group import GroupSettings
from storyloom.chat.store.group_members import member_name, member_snapshots, talkativeness
from storyloom.chat.store.st_group_chat import import_st_group_chat, names_in_chat
from storyloom.chat.store.turn_tree import ChatError
from storyloom.core.errors import FieldProblem, FileFormatError, InvalidInput, StoryloomError
from storyloom.knowledge.st_import import import_sillytavern_bytes
from storyloom.server.api_errors import CardConflictBody, error_responses, upload_errors
from storyloom.server.chat_views import MessageView, single_view
from storyloom.server.file_transfer import CardConflictChoice, import_upload, read_named_upload
from storyloom.server.limits import MAX_TITLE_CHARS
from storyloom.server.state import server_state
from storyloom.sillytavern.character import CharacterDefinition
from storyloom.sillytavern.chat_log import ChatLog, parse_chat_jsonl
from storyloom.sillytavern.group_file import GroupFile, parse_group_file

router = APIRouter(tags=["groups"])

_ERRORS = error_responses(400, 404, 409, 422)


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class MemberView(BaseModel):
    """A member as the group bar shows it."""

    character_id: str
    name: str
    muted: bool
    talkativeness: float
    avatar_url: str | None = Field(
        description="The character preset's avatar (a generated face when it has no "
        "picture), when the member has a preset"
    )


class GroupView(BaseModel):
    conversation_id: str
    version: int
    group: GroupSettings
    members: list[MemberView] = Field(description="In list order")


def group_view(chat: ChatService, conversation: Conversation) -> GroupView:
    group = conversation.settings.group
    if group is None:
        raise ChatError(f"conversation {conversation.id} is not a group chat")
    snapshots = member_snapshots(conversation)
    members = []
    for member in group.members:
        mid = member.character_id
        snapshot = snapshots.get(mid)
        preset = snapshot.source_preset if snapshot is not None else None
        avatar = None
        if chat.presets is not None and preset:
            try:
                chat.presets.character(preset)
                # With or without a picture: the route answers a generated face then.
                avatar = f"/api/presets/characters/{preset}/avatar"
            except StoryloomError:
                avatar = None  # an imported member without a preset
        members.append(
            MemberView(
                character_id=mid,
                name=member_name(snapshots, mid),
                muted=member.muted,
                talkativeness=talkativeness(snapshots.get(mid)),
                avatar_url=avatar,
            )
        )
    return GroupView(
        conversation_id=conversation.id, version=conversation.version, group=group, members=members
    )


class NewGroup(_Body):
    members: list[str] = Field(min_length=2, description="Character preset ids, in list order")
    title: str | None = Field(default=None, max_length=MAX_TITLE_CHARS)
    group: GroupSettings | None = Field(
        default=None, description="Strategy, modes and mutes (its members list is ignored)"
    )


@router.post("/api/groups", status_code=201, response_model=Conversation, responses=_ERRORS)
async def create_group(request: Request, body: NewGroup) -> Conversation:
    """A group chat of two or more characters; each unmuted member greets in turn."""
    return server_state(request).chat.create_group_conversation(
        body.members, group=body.group, title=body.title
    )


@router.get("/api/chats/{conversation_id}/group", response_model=GroupView, responses=_ERRORS)
def get_group(request: Request, conversation_id: str) -> GroupView:
    chat = server_state(request).chat
    return group_view(chat, server_state(request).turn_tree.conversation(conversation_id))


class GroupChange(_Body):
    group: GroupSettings
    expected_version: int | None = None


@router.put("/api/chats/{conversation_id}/group", response_model=GroupView, responses=_ERRORS)
async def put_group(request: Request, conversation_id: str, body: GroupChange) -> GroupView:
    """Members (a new one has their card copied now), mutes, strategy, modes."""
    chat = server_state(request).chat
    conversation = chat.update_group(
        conversation_id, body.group, expected_version=body.expected_version
    )
    return group_view(chat, conversation)


class NextTurn(_Body):
    speaker: str | None = Field(
        default=None, description="The member who speaks (None: the group's order picks)"
    )
    parent_id: str | None = Field(default=None, description="Default: the pointer")
    expected_version: int | None = None


class NextAccepted(BaseModel):
    message: MessageView = Field(description="The reply, status streaming")
    version: int


@router.post(
    "/api/chats/{conversation_id}/group/generate",
    status_code=202,
    response_model=NextAccepted,
    responses=_ERRORS,
)
async def generate_next(request: Request, conversation_id: str, body: NextTurn) -> NextAccepted:
    """The next reply, by ``speaker`` or by the group's order."""
    state = server_state(request)
    message = await state.chat.generate_as(
        conversation_id,
        body.speaker,
        parent_id=body.parent_id,
        expected_version=body.expected_version,
    )
    version = state.turn_tree.conversation(conversation_id).version
    return NextAccepted(
        message=single_view(state.turn_tree, message, state.chat.display_sources), version=version
    )


# -- SillyTavern group chats ----------------------------------------------------------------


class ImportedGroupView(BaseModel):
    conversation: Conversation
    messages: int = Field(description="Messages on the active path")
    siblings: int = Field(description="Extra swipes")
    members: dict[str, str | None] = Field(
        description="Each member's avatar name → the character preset its card became "
        "(None: no card given)"
    )
    warnings: list[str] = Field(default_factory=list)


@router.post(
    "/api/groups/import",
    status_code=201,
    response_model=ImportedGroupView,
    responses={**_ERRORS, 409: {"model": CardConflictBody}},
)
async def import_group(
    request: Request,
    group: Annotated[UploadFile, File(description="groups/<id>.json")],
    chat: Annotated[UploadFile, File(description="group chats/<chat id>.jsonl")],
    cards: Annotated[
        list[UploadFile] | None,
        File(description="Member cards (PNG, JSON, CHARX), named as in the group"),
    ] = None,
    on_conflict: CardConflictChoice = "ask",
) -> ImportedGroupView:
    """A SillyTavern group chat: its group file, its chat and (optionally) the members'
    cards, each card named as the group names it (``Seraphina.png``) or carrying the
    member's name. Every file is read and checked before anything is written, and a card
    that is a character here already asks first (``on_conflict``) as every card import
    does."""
    state = server_state(request)
    group_name, group_data = await read_named_upload(request, group)
    chat_name, chat_data = await read_named_upload(request, chat)
    with upload_errors(group_name):
        group_file = parse_group_file(group_data, group_name)
    with upload_errors(chat_name):
        try:
            text = chat_data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise FileFormatError(chat_name, [FieldProblem("", "not UTF-8 text")]) from None
        log = parse_chat_jsonl(text, chat_name)
    parsed_cards: list[tuple[str, bytes, str]] = []
    definitions: dict[str, CharacterDefinition] = {}
    for card in cards or []:
        name, data = await read_named_upload(request, card)
        with upload_errors(name):
            parsed = await asyncio.to_thread(import_sillytavern_bytes, data, name)
        if parsed.character is None:
            raise InvalidInput(
                f"{name}: not a character card",
                [FieldProblem("cards", f"{name} is a {parsed.kind}, not a character card")],
            )
        parsed_cards.append((name, data, parsed.character.name))
        definitions[name] = parsed.character
    by_avatar = _cards_by_member(group_file, log, parsed_cards)
    presets = state.chat.presets
    if presets is not None:
        for name, _ in by_avatar.values():
            # Every card is asked about before the first one is written.
            await asyncio.to_thread(card_target, presets, definitions[name], on_conflict)
    card_home = CardReimport(presets, on_conflict) if presets is not None else None
    snapshots: dict[str, CharacterSnapshot] = {}
    preset_of: dict[str, str | None] = dict.fromkeys(group_file.members)
    warnings: list[str] = []
    now = datetime.now(UTC)
    for avatar, (name, data) in by_avatar.items():
        outcome = await import_upload(state.knowledge, data, name, card_home=card_home)
        warnings += outcome.warnings
        if outcome.character_file is None or presets is None:
            continue
        character_id = outcome.character_file.stem
        preset_of[avatar] = character_id
        snapshots[avatar] = character_snapshot(character_id, presets.character(character_id), now)
    for avatar in group_file.members:
        if avatar in snapshots or presets is None:
            continue
        known = await asyncio.to_thread(
            snapshot_by_name, presets, names_in_chat(log).get(avatar), now
        )
        if known is not None:
            snapshots[avatar] = known
            preset_of[avatar] = known.source_preset
    imported, more = await asyncio.to_thread(
        import_st_group_chat,
        state.turn_tree,
        log,
        group_file,
        project_id=state.chat.project_id,
        cards=snapshots,
    )
    conversation = state.chat.announce(imported.conversation_id)
    return ImportedGroupView(
        conversation=conversation,
        messages=imported.messages,
        siblings=imported.siblings,
        members=preset_of,
        warnings=warnings + more,
    )


def _cards_by_member(
    group: GroupFile, chat: ChatLog, cards: list[tuple[str, bytes, str]]
) -> dict[str, tuple[str, bytes]]:
    """Which uploaded card is which member: by file name (SillyTavern names a member by
    its card's file), else by the card's name against the member's name in the chat or
    its file stem. A card that is no member is refused, naming it."""
    seen = names_in_chat(chat)
    found: dict[str, tuple[str, bytes]] = {}
    for filename, data, card_name in cards:
        match = next((m for m in group.members if m == filename), None)
        if match is None:
            match = next(
                (
                    m
                    for m in group.members
                    if card_name in (seen.get(m), PurePath(m).stem) and m not in found
                ),
                None,
            )
        if match is None:
            raise InvalidInput(
                f"{filename}: the card {card_name!r} is not a member of the group {group.name!r}",
                [FieldProblem("cards", f"{filename} matches no member")],
            )
        found[match] = (filename, data)
    return found
