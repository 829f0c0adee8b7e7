"""Group chats on the chat service: who speaks, and the conversation as the speaker sees it.

A group reply is a one-to-one reply written by the member whose turn it is: the service
runs the same turn (snapshot, pipeline, swipes, branches) over a *speaker view* of the
conversation, a copy whose ``character`` is the speaker's snapshot, so ``{{char}}``, the
card blocks, the card's regex scripts and the lore scan (its character scope) are the
speaker's, while the tree, the state and the lore timers stay the conversation's. With
SillyTavern's "join character cards" (``append``/``append_disabled``) the view's card
carries every member's description, personality, scenario and examples, each joined
with the prefix and suffix and its own ``{{char}}``, and every member's character note
(depth prompt) goes in at its own depth.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from storyloom.chat.personalab.library import PresetLibrary, character_snapshot
from storyloom.chat.prompt.macros import MacroContext, expand_macros
from storyloom.chat.prompt.skein_builder import GROUP_DEPTH_PROMPTS
from storyloom.chat.service.group_order import TurnContext, activation_order, next_speaker
from storyloom.chat.store.conversation import (
    CharacterSnapshot,
    Conversation,
    ConversationSettings,
    card_macros,
)
from storyloom.chat.store.group import SPEAKER_KEY, GroupMember, GroupSettings
from storyloom.chat.store.group_members import (
    member_name,
    member_snapshots,
    speaker_by_name,
    talkativeness,
    with_members,
)
from storyloom.chat.store.message import Message
from storyloom.chat.store.turn_tree import ChatError, TurnTree
from storyloom.core.errors import FieldProblem, InvalidInput

VIEW_KEY = "group_speaker"
"""Metadata key of a speaker view (never stored): the member it speaks as."""
CONTEXT_MESSAGES = 64
"""Messages read back to find who spoke since the user's last message."""
JOINED_FIELDS = (
    ("description", "Description"),
    ("personality", "Personality"),
    ("scenario", "Scenario"),
    ("mes_example", "Example Messages"),
)
"""Card fields joined across members, with the name ``<FIELDNAME>`` stands for (as
SillyTavern names them)."""
MIN_MEMBERS = 2


# -- making a group ------------------------------------------------------------------------


@dataclass(frozen=True)
class Greeting:
    member_id: str
    name: str
    text: str
    alternates: tuple[str, ...] = ()
    """The member's other greetings, offered as swipes of ``text``."""


def new_group(
    presets: PresetLibrary,
    member_ids: Sequence[str],
    group: GroupSettings | None,
    now: datetime,
) -> tuple[GroupSettings, dict[str, CharacterSnapshot]]:
    """The settings and member snapshots of a new group of the character presets
    ``member_ids`` (at least two, each once)."""
    ids = list(dict.fromkeys(member_ids))
    if len(ids) < MIN_MEMBERS:
        raise InvalidInput(
            "a group chat needs at least two characters",
            [FieldProblem("members", f"{len(ids)} given, at least {MIN_MEMBERS} needed")],
        )
    snapshots = {cid: character_snapshot(cid, presets.character(cid), now) for cid in ids}
    settings = (group or GroupSettings()).model_copy(deep=True)
    given = {m.character_id: m for m in settings.members}
    settings.members = [given.get(cid) or GroupMember(character_id=cid) for cid in ids]
    return settings, snapshots


def greetings(
    group: GroupSettings, snapshots: Mapping[str, CharacterSnapshot], settings: ConversationSettings
) -> list[Greeting]:
    """Each unmuted member's greeting, in list order, as SillyTavern opens an empty group
    chat (each with its own ``{{char}}``): the first message, with the alternate
    greetings and the card's ``group_only_greetings`` (Character Card V3: greetings for
    group chats) as its swipes, as a one-to-one chat offers them."""
    found: list[Greeting] = []
    for member_id in group.unmuted():
        snapshot = snapshots.get(member_id)
        if snapshot is None:
            continue
        texts = [snapshot.text("first_mes")]
        for key in ("alternate_greetings", "group_only_greetings"):
            more = snapshot.card.get(key)
            if isinstance(more, list):
                texts += [g for g in more if isinstance(g, str)]
        texts = [t for t in texts if t.strip()]
        if not texts:
            continue
        context = MacroContext(**card_macros(snapshot, settings))
        first, *others = [expand_macros(t, context) for t in texts]
        found.append(Greeting(member_id, member_name(snapshots, member_id), first, tuple(others)))
    return found


def updated_group(
    conversation: Conversation,
    group: GroupSettings,
    presets: PresetLibrary | None,
    now: datetime,
) -> tuple[GroupSettings, dict[str, Any], CharacterSnapshot]:
    """New group settings for a group chat, its metadata with the snapshots of members
    who joined (those who left keep theirs: their replies still name them), and the first
    member's snapshot (the conversation's character, as the chat list names it)."""
    if conversation.settings.group is None:
        raise ChatError(f"conversation {conversation.id} is not a group chat")
    ids = [m.character_id for m in group.members]
    if len(set(ids)) != len(ids):
        raise InvalidInput(
            "a character is in the group twice",
            [FieldProblem("members", "each character may be a member once")],
        )
    if len(ids) < MIN_MEMBERS:
        raise InvalidInput(
            "a group chat needs at least two characters",
            [FieldProblem("members", f"{len(ids)} given, at least {MIN_MEMBERS} needed")],
        )
    snapshots = member_snapshots(conversation)
    for member_id in ids:
        if member_id in snapshots:
            continue
        if presets is None:
            raise ChatError("presets need a project; start the server with a project")
        snapshots[member_id] = character_snapshot(member_id, presets.character(member_id), now)
    return group, with_members(conversation.metadata, snapshots), snapshots[ids[0]]


# -- who speaks ----------------------------------------------------------------------------


def _seed(conversation_id: str, parent_id: str | None, replies_before: int) -> int:
    """The order's rolls for the reply after ``parent_id``: fixed by the stored chat (the
    same point asks the same member), new for each further reply asked at that point."""
    text = f"group:{conversation_id}:{parent_id or ''}:{replies_before}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def turn_context(
    tree: TurnTree,
    conversation: Conversation,
    parent_id: str | None,
    group: GroupSettings,
    snapshots: Mapping[str, CharacterSnapshot],
    *,
    typed: bool,
) -> TurnContext:
    """What the order reads at ``parent_id``: its text, whether it is the user's message
    being answered (``typed``: the reply follows a send), who wrote it, and who spoke
    since the user's last message."""
    if parent_id is None:
        return TurnContext()
    path = tree.path_tail(parent_id, CONTEXT_MESSAGES)
    last = path[-1]
    spoken: list[str] = []
    for message in reversed(path):
        if message.role == "user":
            break
        speaker = speaker_by_name(message, snapshots, group)
        if speaker is not None:
            spoken.insert(0, speaker)
    return TurnContext(
        text="" if last.role == "system" else last.content,
        user_input=typed and last.role == "user",
        last_speaker=speaker_by_name(last, snapshots, group),
        spoken_since_user=tuple(spoken),
    )


def _order_inputs(
    tree: TurnTree,
    conversation: Conversation,
    parent_id: str | None,
    group: GroupSettings,
    typed: bool,
) -> tuple[dict[str, str], dict[str, float], TurnContext, random.Random]:
    snapshots = member_snapshots(conversation)
    names = {m.character_id: member_name(snapshots, m.character_id) for m in group.members}
    chance = {m.character_id: talkativeness(snapshots.get(m.character_id)) for m in group.members}
    context = turn_context(tree, conversation, parent_id, group, snapshots, typed=typed)
    replies_before = len(tree.children(conversation.id, parent_id))
    rng = random.Random(_seed(conversation.id, parent_id, replies_before))
    return names, chance, context, rng


def answer_order(
    tree: TurnTree, conversation: Conversation, parent_id: str | None, *, typed: bool
) -> list[str]:
    """Every member the group's order activates to answer ``parent_id``, first speaker
    first, as SillyTavern lines them up (empty: nobody answers; [] one-to-one)."""
    group = conversation.settings.group
    if group is None:
        return []
    names, chance, context, rng = _order_inputs(tree, conversation, parent_id, group, typed)
    return activation_order(group, names, chance, context, rng)


def choose_speaker(
    tree: TurnTree,
    conversation: Conversation,
    parent_id: str | None,
    *,
    requested: str | None = None,
    typed: bool = False,
) -> str | None:
    """The member who writes the reply after ``parent_id`` (None: nobody answers);
    ``typed``: the reply answers the message the user just sent."""
    group = conversation.settings.group
    if group is None:
        return None
    names, chance, context, rng = _order_inputs(tree, conversation, parent_id, group, typed)
    return next_speaker(group, names, chance, context, rng, requested=requested)


def _swiped_speaker(
    tree: TurnTree, conversation: Conversation, parent_id: str | None, group: GroupSettings
) -> str | None:
    """Who wrote the reply being swiped: the one under ``parent_id`` on the pointer's
    path, else the newest reply there that names its speaker."""
    snapshots = member_snapshots(conversation)
    replies = [m for m in tree.children(conversation.id, parent_id) if m.role == "assistant"]
    on_path = {m.id for m in tree.path_tail(conversation.pointer, CONTEXT_MESSAGES)}
    ordered = [m for m in replies if m.id in on_path] + list(reversed(replies))
    for message in ordered:
        speaker = speaker_by_name(message, snapshots, group)
        if speaker is not None:
            return speaker
    return None


# -- the speaker's view --------------------------------------------------------------------


def _join(
    value: str,
    field_name: str,
    group: GroupSettings,
    snapshot: CharacterSnapshot,
    settings: ConversationSettings,
) -> str:
    value = value.strip()
    if not value:
        return ""
    context = MacroContext(**card_macros(snapshot, settings))

    def around(template: str) -> str:
        template = template.replace("<FIELDNAME>", field_name).replace("<fieldname>", field_name)
        return expand_macros(template.strip(), context) if template.strip() else ""

    prefix, suffix = around(group.join_prefix), around(group.join_suffix)
    text = expand_macros(value, context)
    return f"{prefix + chr(10) if prefix else ''}{text}{chr(10) + suffix if suffix else ''}"


def joined_card(
    conversation: Conversation, speaker: str, snapshots: Mapping[str, CharacterSnapshot]
) -> dict[str, Any]:
    """The speaker's card with every member's card fields joined in (``append`` modes);
    muted members are left out in ``append`` unless they are the speaker."""
    group = conversation.settings.group
    own = snapshots.get(speaker) or CharacterSnapshot(card={"name": speaker})
    if group is None or group.generation_mode == "swap":
        return dict(own.card)
    card = dict(own.card)
    for key, label in JOINED_FIELDS:
        parts: list[str] = []
        for member in group.members:
            mid = member.character_id
            if member.muted and mid != speaker and group.generation_mode == "append":
                continue
            snapshot = snapshots.get(mid)
            if snapshot is None:
                continue
            text = _join(snapshot.text(key), label, group, snapshot, conversation.settings)
            if text:
                parts.append(text)
        card[key] = "\n".join(parts)
    # SillyTavern injects every member's character note too, each at its own depth and
    # role with its own {{char}}.
    notes: list[dict[str, Any]] = []
    for member in group.members:
        mid = member.character_id
        if member.muted and mid != speaker and group.generation_mode == "append":
            continue
        snapshot = snapshots.get(mid)
        extensions = snapshot.card.get("extensions") if snapshot is not None else None
        note = extensions.get("depth_prompt") if isinstance(extensions, Mapping) else None
        if snapshot is None or not isinstance(note, Mapping):
            continue
        prompt = note.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            continue
        context = MacroContext(**card_macros(snapshot, conversation.settings))
        notes.append(
            {
                "member": mid,
                "prompt": expand_macros(prompt.strip(), context),
                "depth": note.get("depth", 4),
                "role": note.get("role", "system"),
            }
        )
    own_extensions = card.get("extensions")
    card["extensions"] = {
        **(own_extensions if isinstance(own_extensions, Mapping) else {}),
        GROUP_DEPTH_PROMPTS: notes,
    }
    return card


def speaker_view(conversation: Conversation, speaker: str) -> Conversation:
    """The conversation as ``speaker`` writes in it (see the module's docstring)."""
    snapshots = member_snapshots(conversation)
    own = snapshots.get(speaker) or CharacterSnapshot(card={"name": speaker})
    character = own.model_copy(update={"card": joined_card(conversation, speaker, snapshots)})
    metadata = {**conversation.metadata, VIEW_KEY: speaker}
    return conversation.model_copy(update={"character": character, "metadata": metadata})


def speaker_extra(conversation: Conversation) -> dict[str, Any]:
    """What a reply written in ``conversation`` records of its speaker ({} one-to-one):
    ``id`` and ``name``, and ``preset`` when the speaker comes from a character preset."""
    speaker = conversation.metadata.get(VIEW_KEY)
    if not isinstance(speaker, str):
        return {}
    character = conversation.character
    record: dict[str, Any] = {"id": speaker, "name": character.text("name")}
    if character.source_preset:
        # The page shows the speaker's face from the preset's avatar route (a generated
        # one when the preset has no picture).
        record["preset"] = character.source_preset
    return {SPEAKER_KEY: record}


def turn_view(
    tree: TurnTree,
    conversation: Conversation,
    kind: str,
    parent_id: str | None,
    target: Message | None,
) -> Conversation:
    """The view a turn of ``kind`` runs on: a swipe is rewritten by the member who wrote
    the reply, a continue by the reply's writer, a new reply by the next in order."""
    group = conversation.settings.group
    if group is None or VIEW_KEY in conversation.metadata:
        return conversation
    speaker: str | None
    if target is not None:
        speaker = speaker_by_name(target, member_snapshots(conversation), group)
    elif kind == "swipe":
        speaker = _swiped_speaker(tree, conversation, parent_id, group)
    else:
        speaker = None
    if speaker is None:
        speaker = choose_speaker(tree, conversation, parent_id)
    if speaker is None:
        raise ChatError("every member of the group is muted: unmute one or pick who speaks")
    return speaker_view(conversation, speaker)
