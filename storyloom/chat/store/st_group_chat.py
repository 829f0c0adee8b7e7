"""SillyTavern group chats into the turn tree: the group file and its chat become one
conversation with members.

The chat file is read as any SillyTavern chat (:mod:`.st_chat`: swipes become sibling
messages, every line is kept for a lossless export); each reply keeps its
``original_avatar``, which names its speaker among the members. The group file becomes
the conversation's :class:`~storyloom.chat.store.group.GroupSettings` (strategy, mutes,
join options) and is kept whole in the metadata under :data:`GROUP_FILE_KEY`. Members
whose cards were not given keep the name their replies carry, so the chat reads and
continues; their cards can be given later by adding the characters to the group.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePath

from storyloom.chat.store.conversation import CharacterSnapshot
from storyloom.chat.store.group import (
    ActivationStrategy,
    GenerationMode,
    GroupMember,
    GroupSettings,
)
from storyloom.chat.store.group_members import with_members
from storyloom.chat.store.st_chat import ImportedChat, import_st_chat
from storyloom.chat.store.turn_tree import TurnTree
from storyloom.core.errors import FieldProblem, InvalidInput
from storyloom.sillytavern.chat_log import ChatLog
from storyloom.sillytavern.group_file import APPEND, APPEND_DISABLED, LIST, MANUAL, GroupFile

GROUP_FILE_KEY = "st_group"
"""Conversation metadata key holding the imported group file."""


def group_settings(group: GroupFile) -> tuple[GroupSettings, list[str]]:
    """The group's settings here, and what could not come across (as warnings)."""
    warnings: list[str] = []
    strategy: ActivationStrategy = "natural"
    if group.activation_strategy == LIST:
        strategy = "list"
    elif group.activation_strategy == MANUAL:
        strategy = "manual"
    elif group.activation_strategy != 0:
        warnings.append("pooled order is not supported here: the group uses natural order")
    mode: GenerationMode = "swap"
    if group.generation_mode == APPEND:
        mode = "append"
    elif group.generation_mode == APPEND_DISABLED:
        mode = "append_disabled"
    members = list(dict.fromkeys(group.members))
    disabled = set(group.disabled_members)
    settings = GroupSettings(
        members=[GroupMember(character_id=m, muted=m in disabled) for m in members],
        activation_strategy=strategy,
        allow_self_responses=group.allow_self_responses,
        auto_mode_delay=max(1, round(group.auto_mode_delay)),
        generation_mode=mode,
        join_prefix=group.generation_mode_join_prefix,
        join_suffix=group.generation_mode_join_suffix,
    )
    return settings, warnings


def names_in_chat(chat: ChatLog) -> dict[str, str]:
    """Avatar → the name its replies carry (the newest wins, as a rename would)."""
    names: dict[str, str] = {}
    for line in chat.messages:
        avatar = (line.model_extra or {}).get("original_avatar")
        if isinstance(avatar, str) and avatar and not line.is_user and line.name:
            names[avatar] = line.name
    return names


def member_cards(
    group: GroupFile, chat: ChatLog, cards: Mapping[str, CharacterSnapshot]
) -> tuple[dict[str, CharacterSnapshot], list[str]]:
    """A snapshot per member: its given card, else one holding the name its replies
    carry (or its avatar's file stem), with a warning."""
    seen = names_in_chat(chat)
    snapshots: dict[str, CharacterSnapshot] = {}
    warnings: list[str] = []
    for avatar in dict.fromkeys(group.members):
        card = cards.get(avatar)
        if card is not None:
            snapshots[avatar] = card
            continue
        name = seen.get(avatar) or PurePath(avatar).stem or avatar
        snapshots[avatar] = CharacterSnapshot(card={"name": name})
        warnings.append(f"{avatar}: no card given; {name} keeps only a name until one is added")
    return snapshots, warnings


def import_st_group_chat(
    tree: TurnTree,
    chat: ChatLog,
    group: GroupFile,
    *,
    project_id: str,
    cards: Mapping[str, CharacterSnapshot] | None = None,
    title: str | None = None,
) -> tuple[ImportedChat, list[str]]:
    """Make the group chat a new conversation (all or nothing); ``cards`` are the
    members' snapshots by avatar name. Returns what was imported and the warnings."""
    settings, warnings = group_settings(group)
    snapshots, missing = member_cards(group, chat, cards or {})
    warnings += missing
    if not settings.members:
        raise InvalidInput(
            f"group {group.name!r} has no members",
            [FieldProblem("members", "the group has no members")],
        )
    first = snapshots[settings.members[0].character_id]
    imported = import_st_chat(
        tree, chat, project_id=project_id, title=title or group.name or None, character=first
    )
    try:
        conversation = tree.conversation(imported.conversation_id)
        metadata = with_members(conversation.metadata, snapshots)
        metadata[GROUP_FILE_KEY] = group.model_dump(mode="json")
        chat_settings = conversation.settings.model_copy(update={"group": settings})
        tree.update_conversation(conversation.id, settings=chat_settings, metadata=metadata)
    except BaseException:
        tree.delete_conversation(imported.conversation_id)
        raise
    return imported, warnings
