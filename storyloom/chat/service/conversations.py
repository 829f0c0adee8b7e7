"""The chat service: every change to a conversation goes through here.

It keeps the house rules of a chat in one place: the user's words are saved before
anything is asked of a model; one reply at a time per conversation; every write is
versioned (a stale ``expected_version`` is refused, so two tabs cannot overwrite each
other) and is announced (:data:`~storyloom.chat.service.reply_run.Publish`) so every open tab
sees it. Replies run as background tasks (:class:`~storyloom.chat.service.reply_run.ChatTurn`).
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from storyloom.chat.personalab.agent_consent import AgentConsents
from storyloom.chat.personalab.card_permissions import CardPermissionStore
from storyloom.chat.personalab.director import initial_plot
from storyloom.chat.personalab.library import (
    PresetLibrary,
    SummaryPreset,
    background_snapshot,
    character_snapshot,
)
from storyloom.chat.personalab.memory_update import MemoryProposal, propose_memory_update
from storyloom.chat.personalab.personas import PersonaLibrary, persona_settings
from storyloom.chat.personalab.summaries import SeedOrder, SummaryIndex, seed_messages, summarise
from storyloom.chat.prompt.default_pipeline import pipeline_for
from storyloom.chat.prompt.ejs_template import WorldInfoOf
from storyloom.chat.prompt.macros import MacroContext, expand_macros
from storyloom.chat.prompt.regex_scripts import (
    RegexPlacement,
    RegexScript,
    apply_regex_scripts,
    card_regex_scripts,
)
from storyloom.chat.reply.mvu import mvu_start
from storyloom.chat.reply.mvu_values import keep_structure, mvu_variables
from storyloom.chat.service.display_sources import DisplaySources
from storyloom.chat.service.group_chat import (
    VIEW_KEY,
    answer_order,
    choose_speaker,
    new_group,
    speaker_extra,
    speaker_view,
    turn_view,
    updated_group,
)
from storyloom.chat.service.group_chat import greetings as group_greetings
from storyloom.chat.service.mnemosyne import build_snapshot, history_of, turn_lore_scope
from storyloom.chat.service.mvu_updater import run_updater
from storyloom.chat.service.reply_run import (
    GENERATION_OF,
    INTERRUPTED,
    STOPPED,
    ChatEvent,
    ChatTurn,
    ConversationChanged,
    MessageAdded,
    Publish,
    TurnKind,
    TurnSetup,
)
from storyloom.chat.service.turn_templates import (
    PresetTemplate,
    RenderEntry,
    preset_templates,
    render_entries,
    starting_variables,
    world_info_of,
)
from storyloom.chat.store.connection_choice import ConnectionChoice, choose_connection
from storyloom.chat.store.conversation import (
    BackgroundSnapshot,
    CharacterSnapshot,
    Conversation,
    ConversationSettings,
    card_macros,
)
from storyloom.chat.store.global_variables import GlobalVariables
from storyloom.chat.store.group import GroupSettings
from storyloom.chat.store.group_members import with_group_members, with_members
from storyloom.chat.store.message import Message, Role
from storyloom.chat.store.regex_library import GlobalRegexScripts
from storyloom.chat.store.snapshot import ContextSnapshot
from storyloom.chat.store.state import ChatState
from storyloom.chat.store.turn_tree import (
    ChatError,
    NewMessage,
    TurnTree,
    VersionConflict,
    new_id,
)
from storyloom.core.errors import FieldProblem, InvalidInput, NotFound, StoryloomError
from storyloom.core.settings import ChatEndpoint
from storyloom.llm.context_size import context_size_of
from storyloom.llm.errors import LLMError
from storyloom.llm.tokenizers import counter_for
from storyloom.workflow.node_type import WorkflowServices
from storyloom.workflow.runner import WorkflowRunner
from storyloom.workflow.workflow_file import Workflow

logger = logging.getLogger(__name__)

BUSY = "a reply is being written"
STOP_WAIT_S = 10.0
"""Longest wait for a stopped reply to be written down."""
DEFAULT_LAST_N_TURNS = 3


class SendResult(BaseModel):
    """The user's message as saved, the reply being written under it, and the version."""

    user_message: Message
    assistant_message: Message | None
    """None: nobody answers (a group chat in manual order, or every member muted)."""
    version: int


def character_name(conversation: Conversation) -> str:
    return conversation.character.text("name")


def macro_context(conversation: Conversation, **extra: Any) -> MacroContext:
    """The card and persona as {{char}}, {{user}}, {{description}}... see them."""
    return MacroContext(**card_macros(conversation.character, conversation.settings), **extra)


def allowed_scripts(conversation: Conversation) -> list[RegexScript]:
    """The card's regex scripts, when the user allowed them for this conversation (the
    global ones come first: :meth:`ChatService.regex_scripts`)."""
    if not conversation.settings.allow_regex_scripts:
        return []
    return card_regex_scripts(conversation.character.card)


def placement_of(role: Role) -> RegexPlacement:
    return RegexPlacement.USER_INPUT if role == "user" else RegexPlacement.AI_OUTPUT


def stored_text(
    conversation: Conversation,
    text: str,
    role: Role,
    scripts: Sequence[RegexScript],
    *,
    editing: bool = False,
    placement: RegexPlacement | None = None,
) -> str:
    """``text`` after the stored-phase ``scripts`` (:meth:`ChatService.regex_scripts`) of
    its placement (the role's; a reply's thought passes ``REASONING``), at depth 0: it is
    the newest message. An edit runs only the scripts marked ``runOnEdit``."""
    if editing:
        scripts = [s for s in scripts if s.runOnEdit]
    if not scripts:
        return text
    context = macro_context(conversation)
    return apply_regex_scripts(
        text,
        scripts,
        placement=placement or placement_of(role),
        phase="stored",
        depth=0,
        macros=lambda t: expand_macros(t, context),
    )


class ChatService:
    """Conversations of one project; one instance per server."""

    def __init__(
        self,
        tree: TurnTree,
        runner: WorkflowRunner,
        services: WorkflowServices,
        *,
        project_id: str,
        publish: Publish | None = None,
        summaries: Callable[[], SummaryIndex | None] | None = None,
        global_variables: GlobalVariables | None = None,
        global_regex: GlobalRegexScripts | None = None,
    ) -> None:
        self.tree = tree
        self.global_variables = global_variables
        """The user's global variables (None: a turn starts with none and saves none)."""
        self.global_regex = global_regex
        """The user's global regex scripts (None: only the cards' scripts run)."""
        self.runner = runner
        self.services = services
        self.project_id = project_id
        self.project_dir: Path | None = services.project_dir
        self.presets = PresetLibrary(self.project_dir) if self.project_dir is not None else None
        self.personas = PersonaLibrary(self.project_dir) if self.project_dir is not None else None
        self.agent_consents = (
            AgentConsents(self.project_dir) if self.project_dir is not None else None
        )
        """The agent profile the user confirmed for each character (cards only suggest)."""
        self.card_permissions = (
            CardPermissionStore(self.project_dir) if self.project_dir is not None else None
        )
        """What each character's card may run, as the user allowed it."""
        self._publish = publish
        self._summaries = summaries
        self._turns: dict[str, ChatTurn] = {}
        self._rounds: set[asyncio.Task[None]] = set()
        """A group's answers still to come (see :meth:`_answer_after`)."""

    def with_persona(self, conversation: Conversation) -> Conversation:
        """The conversation as a turn sees it: ``user_name`` and ``persona`` are those of
        its persona (its own ``persona_id``, else the project's default), read now, so a
        change of persona holds from the next turn on."""
        if self.personas is None:
            return conversation
        persona = self.personas.resolve(conversation.settings.persona_id)
        if persona is None:
            return conversation
        settings = persona_settings(conversation.settings, persona)
        return conversation.model_copy(update={"settings": settings})

    def _check_persona(self, conversation_id: str, persona_id: str | None) -> None:
        """A chat may be switched to a persona that exists (one it already names may be
        gone since: its turns fall back to the default persona)."""
        if persona_id is None or self.personas is None:
            return
        if persona_id == self.tree.conversation(conversation_id).settings.persona_id:
            return
        try:
            self.personas.get(persona_id)
        except (NotFound, ChatError) as exc:
            raise InvalidInput.of(
                "settings", [FieldProblem("settings.persona_id", str(exc))]
            ) from None

    # -- events -----------------------------------------------------------------------

    def publish(self, event: ChatEvent) -> None:
        if self._publish is None:
            return
        try:
            self._publish(event)
        except Exception:
            logger.exception("publishing a chat event failed")

    def _changed(self, conversation: Conversation, *, listed: bool = False) -> Conversation:
        self.publish(ConversationChanged(conversation.id, conversation.version, listed=listed))
        return conversation

    def announce(self, conversation_id: str) -> Conversation:
        """Tell every tab about a conversation made elsewhere (an import)."""
        return self._changed(self.tree.conversation(conversation_id), listed=True)

    def _added(self, message: Message) -> Message:
        version = self.tree.conversation(message.conversation_id).version
        self.publish(MessageAdded(message.conversation_id, message, version))
        return message

    # -- what is running --------------------------------------------------------------

    def running(self, conversation_id: str) -> bool:
        return conversation_id in self._turns

    def turn(self, conversation_id: str) -> ChatTurn | None:
        return self._turns.get(conversation_id)

    def check_idle(self, conversation_id: str) -> None:
        """Refuse (:class:`ChatError`) while a reply is being written in the conversation."""
        self._check_idle(conversation_id)

    def _check_idle(self, conversation_id: str, expected_version: int | None = None) -> None:
        """Refuse a write while a reply is being written; a tab that has not seen the
        latest version hears that first (it must reload before anything else)."""
        if conversation_id not in self._turns:
            return
        if expected_version is not None:
            actual = self.tree.conversation(conversation_id).version
            if actual != expected_version:
                raise VersionConflict(conversation_id, expected_version, actual)
        raise ChatError(f"conversation {conversation_id}: {BUSY}; stop it or wait")

    async def wait(self, conversation_id: str) -> Message | None:
        """The reply being written in the conversation, once it is finished (None: none)."""
        turn = self._turns.get(conversation_id)
        if turn is None or turn.task is None:
            return None
        return await asyncio.shield(turn.task)

    async def stop(self, conversation_id: str, reason: str = STOPPED) -> Message | None:
        """Stop the reply being written; the text so far is kept, marked partial.

        Returns the message as finalised (None when nothing was running).
        """
        turn = self._turns.get(conversation_id)
        if turn is None or turn.task is None:
            return None
        turn.stop(reason)
        done, _ = await asyncio.wait({turn.task}, timeout=STOP_WAIT_S)
        return turn.task.result() if done else None

    async def aclose(self) -> None:
        """Stop every reply (the server is going down); each keeps its text."""
        for round_ in list(self._rounds):
            round_.cancel()  # no group member starts a reply now
        turns = list(self._turns.values())
        for turn in turns:
            turn.stop(INTERRUPTED)
        tasks = [t.task for t in turns if t.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=STOP_WAIT_S)

    # -- conversations ----------------------------------------------------------------

    def create_conversation(
        self,
        *,
        character_id: str | None = None,
        background_id: str | None = None,
        title: str | None = None,
        user_name: str | None = None,
        persona: str | None = None,
        settings: ConversationSettings | None = None,
        now: datetime | None = None,
        persona_id: str | None = None,
    ) -> Conversation:
        """A new conversation from a character preset (and a background): the card's
        greetings become sibling first messages, ``first_mes`` active; a story outline
        starts the director at its first point."""
        moment = now or datetime.now(UTC)
        character = CharacterSnapshot()
        background: BackgroundSnapshot | None = None
        variables: dict[str, Any] = {}
        if character_id is not None or background_id is not None:
            presets = self._require_presets()
            if character_id is not None:
                preset = presets.character(character_id)
                character = character_snapshot(character_id, preset, moment)
                stat_data, problems = mvu_start(preset.source_card or character.card)
                for problem in problems:
                    logger.warning("character %s: %s", character_id, problem)
                if stat_data:
                    variables.update(mvu_variables(stat_data))
            if background_id is not None:
                background = background_snapshot(presets.background(background_id))
        chosen = (settings or ConversationSettings()).model_copy()
        if character_id is not None and self.card_permissions is not None:
            # a chat starts from what the user allowed for the card; the chat's own
            # switches (sent with ``settings``) win where they were set
            allowed = self.card_permissions.of(character_id)
            sent = settings.model_fields_set if settings is not None else set()
            if "allow_regex_scripts" not in sent:
                chosen.allow_regex_scripts = allowed.regex_scripts
            if "allow_html_scripts" not in sent:
                chosen.allow_html_scripts = allowed.frame_scripts
        if user_name is not None and user_name.strip():
            chosen.user_name = user_name.strip()
        if persona is not None:
            chosen.persona = persona
        if persona_id is not None and self.personas is not None:
            try:
                chosen.persona_id = self.personas.get(persona_id).id
            except (NotFound, ChatError) as exc:
                raise InvalidInput.of("chat", [FieldProblem("persona_id", str(exc))]) from None
        name = character.text("name")
        conversation = self.tree.create_conversation(
            project_id=self.project_id,
            title=(title or "").strip() or name or "New chat",
            character=character,
            background=background,
            settings=chosen,
            created_at=moment.timestamp(),
        )
        plot = initial_plot(background) if chosen.director_enabled else None
        greetings = [character.text("first_mes")]
        alternates = character.card.get("alternate_greetings")
        if isinstance(alternates, list):
            greetings += [g for g in alternates if isinstance(g, str)]
        context = macro_context(
            self.with_persona(conversation), now=moment, global_variables=self.load_globals()
        )
        added: list[Message] = []
        scripts = self.regex_scripts(conversation)
        for greeting in greetings:
            if not greeting.strip():
                continue
            # Each greeting starts the chat its own way: its {{setvar}}s are its own.
            context.variables = copy.deepcopy(variables)
            text = expand_macros(greeting, context)
            root_state = ChatState(variables=context.variables, plot=plot)
            stored = stored_text(conversation, text, "assistant", scripts)
            added.append(
                self.tree.add_message(
                    conversation.id,
                    parent_id=None,
                    role="assistant",
                    name=name,
                    content=stored,
                    original=text if stored != text else None,
                    state=root_state,
                    move_pointer=not added,
                    created_at=moment.timestamp(),
                )
            )
        if len(added) > 1:
            # The last greeting added is the active root; the chat opens on first_mes.
            self.tree.set_pointer(conversation.id, added[0].id)
        return self._changed(self.tree.conversation(conversation.id), listed=True)

    def update_conversation(
        self,
        conversation_id: str,
        *,
        expected_version: int | None,
        title: str | None = None,
        settings: ConversationSettings | None = None,
        character: CharacterSnapshot | None = None,
        background: BackgroundSnapshot | None = None,
    ) -> Conversation:
        if settings is not None:
            self._check_persona(conversation_id, settings.persona_id)
        conversation = self.tree.update_conversation(
            conversation_id,
            expected_version=expected_version,
            title=title,
            settings=settings,
            character=character,
            background=background,
        )
        return self._changed(conversation, listed=title is not None)

    async def delete_conversation(self, conversation_id: str) -> None:
        self.tree.conversation(conversation_id)  # NotFound first
        await self.stop(conversation_id)
        self.tree.delete_conversation(conversation_id)
        self.publish(ConversationChanged(conversation_id, 0, listed=True, deleted=True))

    # -- group chats ------------------------------------------------------------------

    def create_group_conversation(
        self,
        member_ids: Sequence[str],
        *,
        group: GroupSettings | None = None,
        title: str | None = None,
        settings: ConversationSettings | None = None,
        now: datetime | None = None,
    ) -> Conversation:
        """A group chat of the character presets ``member_ids`` (list order): each
        unmuted member's first message opens it, one after another, as in SillyTavern."""
        moment = now or datetime.now(UTC)
        presets = self._require_presets()
        group_settings, snapshots = new_group(presets, member_ids, group, moment)
        chosen = (settings or ConversationSettings()).model_copy(update={"group": group_settings})
        names = [s.text("name") or cid for cid, s in snapshots.items()]
        conversation = self.tree.create_conversation(
            project_id=self.project_id,
            title=(title or "").strip() or ", ".join(names),
            character=snapshots[group_settings.members[0].character_id],
            settings=chosen,
            metadata=with_members({}, snapshots),
            created_at=moment.timestamp(),
        )
        persona_view = self.with_persona(conversation)
        parent: str | None = None
        for greeting in group_greetings(group_settings, snapshots, persona_view.settings):
            view = speaker_view(conversation, greeting.member_id)
            # The alternates are swipes of the member's greeting; the next member's
            # greeting follows the first one.
            added: list[str] = []
            for text in (greeting.text, *greeting.alternates):
                stored = stored_text(view, text, "assistant", self.regex_scripts(view))
                added.append(
                    self.tree.add_message(
                        conversation.id,
                        parent_id=parent,
                        role="assistant",
                        name=greeting.name,
                        content=stored,
                        original=text if stored != text else None,
                        extra=speaker_extra(view),
                        move_pointer=not added,
                        created_at=moment.timestamp(),
                    ).id
                )
            parent = added[0]
        if parent is not None:
            self.tree.set_pointer(conversation.id, parent)
        return self._changed(self.tree.conversation(conversation.id), listed=True)

    def update_group(
        self, conversation_id: str, group: GroupSettings, *, expected_version: int | None
    ) -> Conversation:
        """New members, mutes, order or modes of a group chat; a member who joins has
        their card copied now."""
        self._check_idle(conversation_id, expected_version)
        conversation = self.tree.conversation(conversation_id)
        group, metadata, first = updated_group(conversation, group, self.presets, datetime.now(UTC))
        settings = conversation.settings.model_copy(update={"group": group})
        updated = self.tree.update_conversation(
            conversation_id,
            expected_version=expected_version,
            settings=settings,
            character=first,
            metadata=metadata,
        )
        return self._changed(updated)

    async def generate_as(
        self,
        conversation_id: str,
        speaker: str | None = None,
        *,
        parent_id: str | None = None,
        expected_version: int | None = None,
    ) -> Message:
        """The next reply of a group chat under ``parent_id`` (default: the pointer), by
        ``speaker`` (the user's pick, muted or not) or by the group's order."""
        self._check_idle(conversation_id, expected_version)
        conversation = self.tree.conversation(conversation_id)
        if expected_version is not None and conversation.version != expected_version:
            raise VersionConflict(conversation_id, expected_version, conversation.version)
        if conversation.settings.group is None:
            raise ChatError(f"conversation {conversation_id} is not a group chat")
        if parent_id is not None:
            self._in_conversation(conversation_id, parent_id)
        parent = parent_id if parent_id is not None else conversation.pointer
        if speaker is not None:
            chosen = choose_speaker(self.tree, conversation, parent, requested=speaker)
            assert chosen is not None  # a pick is a member or refused
            return self._start(speaker_view(conversation, chosen), parent, "reply")
        message = self._answer(conversation, parent, typed=False)
        if message is None:
            raise ChatError("every member of the group is muted: unmute one or pick who speaks")
        return message

    def _answer(
        self, conversation: Conversation, parent_id: str | None, *, typed: bool
    ) -> Message | None:
        """The reply to ``parent_id``: one-to-one, the character's; in a group, one by
        each member the order activates, one after another, as SillyTavern answers (the
        first starts now; None when nobody answers)."""
        if conversation.settings.group is None:
            return self._start(conversation, parent_id, "reply")
        order = answer_order(self.tree, conversation, parent_id, typed=typed)
        if not order:
            return None
        first = self._start(speaker_view(conversation, order[0]), parent_id, "reply")
        if len(order) > 1:
            self._answer_after(conversation.id, first, order[1:])
        return first

    def _answer_after(self, conversation_id: str, first: Message, speakers: list[str]) -> None:
        """The rest of a group's answer: each member speaks once the reply before is
        complete, while the chat stays where that reply left it (a stop, a failure, the
        user's own write or a move elsewhere ends the round)."""
        turn = self._turns.get(conversation_id)
        if turn is None or turn.task is None:
            return
        task = turn.task

        async def rest() -> None:
            current, previous = task, first
            for speaker in speakers:
                done = await asyncio.shield(current)
                conversation = self.tree.conversation(conversation_id)
                group = conversation.settings.group
                if (
                    done.status != "complete"
                    or conversation.pointer != previous.id
                    or self.running(conversation_id)
                    or group is None
                ):
                    return
                if speaker not in group.unmuted():
                    continue  # muted or gone since the round began
                previous = self._start(speaker_view(conversation, speaker), previous.id, "reply")
                following = self._turns.get(conversation_id)
                if following is None or following.task is None:
                    return
                current = following.task

        follow = asyncio.get_running_loop().create_task(rest())
        self._rounds.add(follow)
        follow.add_done_callback(self._rounds.discard)

    # -- the tree ---------------------------------------------------------------------

    def set_pointer(
        self, conversation_id: str, message_id: str | None, *, expected_version: int | None
    ) -> Conversation:
        """Time travel / branch from here: nothing is lost, the future stays reachable."""
        self._check_idle(conversation_id, expected_version)
        conversation = self.tree.set_pointer(
            conversation_id, message_id, expected_version=expected_version
        )
        return self._changed(conversation)

    def swipe(
        self, conversation_id: str, message_id: str, to_index: int, *, expected_version: int | None
    ) -> Conversation:
        self._check_idle(conversation_id, expected_version)
        self._in_conversation(conversation_id, message_id)
        conversation = self.tree.swipe(message_id, to_index, expected_version=expected_version)
        return self._changed(conversation)

    def edit_message(
        self, conversation_id: str, message_id: str, content: str, *, expected_version: int | None
    ) -> Message:
        """Edit as a new branch: a new sibling with the new text; the old message stays a
        sibling."""
        self._check_idle(conversation_id, expected_version)
        old = self._in_conversation(conversation_id, message_id)
        conversation = self.tree.conversation(conversation_id)
        stored = stored_text(
            conversation, content, old.role, self.regex_scripts(conversation), editing=True
        )
        message = self.tree.edit_message(message_id, stored, expected_version=expected_version)
        self._added(message)
        self._changed(self.tree.conversation(conversation_id))
        return message

    def rewrite_message(
        self, conversation_id: str, message_id: str, content: str, *, expected_version: int | None
    ) -> Message:
        """Edit in place: the message takes the new text and keeps what follows it; the
        old text is kept as a version of the message."""
        self._check_idle(conversation_id, expected_version)
        old = self._in_conversation(conversation_id, message_id)
        conversation = self.tree.conversation(conversation_id)
        stored = stored_text(
            conversation, content, old.role, self.regex_scripts(conversation), editing=True
        )
        message = self.tree.rewrite_message(
            message_id,
            stored,
            original=content if stored != content else None,
            expected_version=expected_version,
        )
        self._changed(self.tree.conversation(conversation_id), listed=True)
        return message

    def restore_version(
        self, conversation_id: str, message_id: str, index: int, *, expected_version: int | None
    ) -> Message:
        """An earlier text of the message becomes its text again (the current one is kept)."""
        self._check_idle(conversation_id, expected_version)
        self._in_conversation(conversation_id, message_id)
        message = self.tree.restore_version(message_id, index, expected_version=expected_version)
        self._changed(self.tree.conversation(conversation_id), listed=True)
        return message

    def set_hidden(
        self, conversation_id: str, message_id: str, hidden: bool, *, expected_version: int | None
    ) -> Message:
        """Leave a message out of the prompt (SillyTavern's ghost), or put it back."""
        self._check_idle(conversation_id, expected_version)
        self._in_conversation(conversation_id, message_id)
        message = self.tree.set_hidden(message_id, hidden, expected_version=expected_version)
        self._changed(self.tree.conversation(conversation_id))
        return message

    def set_variables(
        self, conversation_id: str, message_id: str, variables: dict[str, Any]
    ) -> Message:
        """Replace the chat variables after a message (a card's frame writing through the
        bridge, where the character allows it); the later messages keep their states."""
        self._check_idle(conversation_id)
        self._in_conversation(conversation_id, message_id)
        before = self.tree.state_at(message_id)
        variables = keep_structure(before.variables, variables)
        state = before.model_copy(update={"variables": variables})
        message = self.tree.update_message(message_id, state=state, bump_version=True)
        self._changed(self.tree.conversation(conversation_id))
        return message

    def delete_message(
        self, conversation_id: str, message_id: str, *, expected_version: int | None
    ) -> Conversation:
        self._check_idle(conversation_id, expected_version)
        self._in_conversation(conversation_id, message_id)
        conversation = self.tree.delete_message(message_id, expected_version=expected_version)
        return self._changed(conversation)

    def _in_conversation(self, conversation_id: str, message_id: str) -> Message:
        message = self.tree.message(message_id)
        if message.conversation_id != conversation_id:
            raise NotFound(f"no message {message_id!r} in conversation {conversation_id!r}")
        return message

    # -- turns ------------------------------------------------------------------------

    async def send(
        self, conversation_id: str, text: str, *, expected_version: int | None
    ) -> SendResult:
        """Save the user's message (stored-phase scripts applied, the original kept), then
        start the reply in the background; the reply's message exists when this returns."""
        self._check_idle(conversation_id, expected_version)
        if not text.strip():
            raise ChatError("text: the message is empty")
        conversation = self.with_persona(self.tree.conversation(conversation_id))
        stored = stored_text(conversation, text, "user", self.regex_scripts(conversation))
        user = self.tree.add_message(
            conversation_id,
            parent_id=conversation.pointer,
            role="user",
            name=conversation.settings.user_name,
            content=stored,
            original=text if stored != text else None,
            expected_version=expected_version,
        )
        self._added(user)
        assistant = self._answer(self.tree.conversation(conversation_id), user.id, typed=True)
        version = self.tree.conversation(conversation_id).version
        return SendResult(user_message=user, assistant_message=assistant, version=version)

    async def generate(
        self,
        conversation_id: str,
        *,
        parent_id: str | None = None,
        message_id: str | None = None,
        kind: TurnKind = "reply",
        expected_version: int | None = None,
        reroll: bool = False,
    ) -> Message:
        """Start a reply; returns its message (status ``streaming``).

        ``reply``: a new assistant message under ``parent_id`` (default: the pointer).
        ``swipe`` (and retry): a new sibling of the assistant message ``message_id``
        (``parent_id`` naming an assistant message means the same; default: the pointer's
        reply). ``continue``: more text appended to ``message_id`` (default: the pointer).

        A swipe replays the turn's tool calls that depend on chance (``chat:RollDice``
        rolls what the other swipes rolled); ``reroll`` gives it its own rolls.
        """
        self._check_idle(conversation_id, expected_version)
        conversation = self.tree.conversation(conversation_id)
        if expected_version is not None and conversation.version != expected_version:
            raise VersionConflict(conversation_id, expected_version, conversation.version)
        if kind == "continue":
            target_id = message_id or parent_id or conversation.pointer
            if target_id is None:
                raise ChatError("continue: the conversation has no message to continue")
            target = self._in_conversation(conversation_id, target_id)
            if target.role != "assistant":
                raise ChatError(f"continue: message {target_id} is not the character's")
            if conversation.pointer != target.id:
                conversation = self.tree.set_pointer(conversation_id, target.id)
            return self._start(conversation, target.id, "continue", target=target)
        parent = self._parent_for(conversation, kind, parent_id, message_id)
        return self._start(conversation, parent, kind, reroll=reroll)

    def _parent_for(
        self,
        conversation: Conversation,
        kind: TurnKind,
        parent_id: str | None,
        message_id: str | None,
    ) -> str | None:
        if kind == "reply":
            if parent_id is not None:
                self._in_conversation(conversation.id, parent_id)
                return parent_id
            return conversation.pointer
        named = message_id or parent_id or conversation.pointer
        if named is None:
            return None
        message = self._in_conversation(conversation.id, named)
        # Swiping an assistant message makes a sibling of it; naming any other message
        # (the user's) asks for one more reply under it.
        return message.parent_id if message.role == "assistant" else message.id

    def _start(
        self,
        conversation: Conversation,
        parent_id: str | None,
        kind: TurnKind,
        *,
        target: Message | None = None,
        reroll: bool = False,
    ) -> Message:
        tree = self.tree
        conversation = self.with_persona(conversation)
        conversation = turn_view(tree, conversation, kind, parent_id, target)
        if target is not None:
            message = tree.update_message(target.id, status="streaming")
            pointer: str | None = target.id
        else:
            message = tree.add_message(
                conversation.id,
                parent_id=parent_id,
                role="assistant",
                name=character_name(conversation),
                content="",
                status="streaming",
                extra=speaker_extra(conversation),
            )
            pointer = parent_id
        self._added(message)
        scripts = self.regex_scripts(conversation)
        # Every reply to the same message shares the key (a swipe replays its dice); a
        # reroll adds its own message's id.
        answered = target.parent_id if target is not None else parent_id
        turn_key = f"{conversation.id}:{answered or ''}"
        if reroll:
            turn_key += f":{message.id}"

        async def snapshot(context_tokens: int | None) -> ContextSnapshot:
            return await self.snapshot(
                conversation,
                pointer,
                generation=GENERATION_OF[kind],
                context_tokens=context_tokens,
                turn=message.id,
                turn_key=turn_key,
            )

        def clean(text: str) -> str:
            return stored_text(conversation, text, "assistant", scripts)

        def clean_thought(text: str) -> str:
            return stored_text(
                conversation, text, "assistant", scripts, placement=RegexPlacement.REASONING
            )

        setup = TurnSetup(
            tree=tree,
            runner=self.runner,
            conversation_id=conversation.id,
            message=message,
            kind=kind,
            snapshot=snapshot,
            workflow=lambda: self.pipeline(conversation),
            clean_reply=clean,
            clean_thought=clean_thought,
            publish=self.publish,
            keep_globals=self.save_globals,
            updater=self._mvu_updater if conversation.settings.mvu_updater else None,
            prefix=target.content if target is not None else "",
            thought_prefix=(target.thought or "") if target is not None else "",
        )
        turn = ChatTurn(setup)
        self._turns[conversation.id] = turn
        task = turn.start()

        def forget(_: asyncio.Task[Message]) -> None:
            if self._turns.get(conversation.id) is turn:
                del self._turns[conversation.id]

        task.add_done_callback(forget)
        return message

    def _preset_templates(self, conversation: Conversation) -> list[PresetTemplate]:
        """The pipeline's preset prompts holding an EJS template (none when the pipeline
        cannot be read: the turn says why when it runs it)."""
        try:
            return preset_templates(self.pipeline(conversation))
        except (StoryloomError, OSError):
            return []

    def pipeline(self, conversation: Conversation) -> Workflow:
        """The conversation's pipeline workflow (the project's copy, else the built-in)."""
        return pipeline_for(self.project_dir, conversation.settings.pipeline)

    async def snapshot(
        self,
        conversation: Conversation,
        pointer: str | None,
        *,
        generation: str = "normal",
        context_tokens: int | None = None,
        turn: str | None = None,
        turn_key: str = "",
    ) -> ContextSnapshot:
        """The snapshot of the reply ``turn``; its history fills ``context_tokens``
        (None: the context window of the model that answers: the chosen connection's,
        else the user model's)."""
        choice = self.connection_choice(conversation)
        endpoint = self.services.require_settings().endpoint_for(
            "user", choice.name, chosen_in=choice.chosen_in
        )
        counter = counter_for(endpoint)
        # The first count may probe the endpoint's tokenize route: do that off the loop.
        await asyncio.to_thread(lambda: counter.name)
        # What the server really holds (llama.cpp /props, KoboldCpp, vLLM, Ollama).
        window = await asyncio.to_thread(context_size_of, endpoint, context_tokens)
        global_scripts, regex_problems = await asyncio.to_thread(self.global_scripts)
        snapshot = await build_snapshot(
            self.tree,
            self.with_persona(conversation),
            pointer,
            knowledge=self.services.knowledge,
            summaries=self._summary_index(),
            presets=self.presets,
            generation=generation,
            turn=turn,
            turn_key=turn_key,
            history_tokens=window,
            count_tokens=counter.count,
            confirmed_agents=self.confirmed_agents(),
            global_regex_scripts=global_scripts,
            regex_problems=regex_problems,
            global_variables=self.load_globals(),
            preset_templates=self._preset_templates(conversation),
        )
        return snapshot.model_copy(
            update={
                "connection": choice.name,
                "connection_chosen_in": choice.chosen_in,
            }
        )

    def connection_choice(self, conversation: Conversation) -> ConnectionChoice:
        """The named connection that writes ``conversation``'s next reply (see
        :mod:`~storyloom.chat.store.connection_choice`): the character's card as it is
        now on the character page, else the chat's copy of it."""
        character = conversation.character
        card: Mapping[str, Any] = character.card
        if self.presets is not None and character.source_preset:
            try:
                live = self.presets.character(character.source_preset)
                card = {**card, "extensions": live.extensions}
            except (StoryloomError, OSError):
                pass  # the character is gone or broken: the chat's copy of the card
        speaker = conversation.metadata.get(VIEW_KEY)
        return choose_connection(
            conversation.settings, card, speaker=speaker if isinstance(speaker, str) else None
        )

    def confirmed_agents(self) -> dict[str, str]:
        """The agent profile the user confirmed per character; none (and a warning) when
        the file is broken: the chat goes on without agents, and the file is left to fix."""
        if self.agent_consents is None:
            return {}
        try:
            return self.agent_consents.load()
        except StoryloomError as exc:
            logger.warning("no character answers with an agent: %s", exc)
            return {}

    def load_globals(self) -> dict[str, Any]:
        """The user's global variables now; none (and a warning) when their file is
        broken: the chat goes on, and the file is left for the user to fix."""
        if self.global_variables is None:
            return {}
        try:
            return self.global_variables.load()
        except StoryloomError as exc:
            logger.warning("global variables are not used: %s", exc)
            return {}

    def global_scripts(self) -> tuple[list[RegexScript], list[str]]:
        """The user's enabled global regex scripts, read now, in the order they run; and
        why none run when their file is broken (the chat goes on without them and the
        prompt's problems say so; the file is left for the user to fix)."""
        if self.global_regex is None:
            return [], []
        try:
            scripts = self.global_regex.load()
        except StoryloomError as exc:
            logger.warning("global regex scripts are not used: %s", exc)
            return [], [f"global regex scripts are not used: {exc}"]
        return [s for s in scripts if not s.disabled], []

    def regex_scripts(self, conversation: Conversation) -> list[RegexScript]:
        """Every regex script of ``conversation`` in SillyTavern's order: the user's
        global ones, then the card's when the chat allows them."""
        return [*self.global_scripts()[0], *allowed_scripts(conversation)]

    def display_sources(self, conversation: Conversation) -> DisplaySources:
        """What showing ``conversation``'s messages needs besides them: its regex scripts,
        the user's global variables and the render entries of the lore it scans (a book
        whose scope cannot be read adds none: the messages still show)."""
        entries: list[RenderEntry] = []
        world_info: WorldInfoOf | None = None
        initial: dict[str, Any] = {}
        knowledge = self.services.knowledge
        if knowledge is not None:
            try:
                kbs = turn_lore_scope(knowledge, conversation, None, self.presets).kbs()
                entries = render_entries(kbs)
                world_info = world_info_of(kbs)
                initial = starting_variables(kbs)
            except (StoryloomError, OSError) as exc:
                logger.warning("render entries are not shown: %s", exc)
        return DisplaySources(
            scripts=self.regex_scripts(conversation),
            global_variables=self.load_globals(),
            render_entries=entries,
            initial_variables=initial,
            world_info=world_info,
        )

    def save_globals(self, before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
        """Write what a turn's macros changed in the global variables."""
        if self.global_variables is not None:
            self.global_variables.save_changes(before, after)

    def _summary_index(self) -> SummaryIndex | None:
        if self._summaries is None:
            return None
        try:
            return self._summaries()
        except StoryloomError as exc:  # no usable embedding model: no memories, still a reply
            logger.info("summary retrieval is off: %s", exc)
            return None

    # -- memory, summaries ------------------------------------------------------------

    def _require_presets(self) -> PresetLibrary:
        if self.presets is None:
            raise ChatError("presets need a project; start the server with a project")
        return self.presets

    async def _mvu_updater(
        self, snapshot: ContextSnapshot, outputs: Mapping[str, Any]
    ) -> dict[str, Any]:
        """MVU's separate updater on a finished reply (:mod:`.mvu_updater`)."""
        endpoint: ChatEndpoint | Exception
        try:
            endpoint = self._agent_model("MVU's separate updater")
        except LLMError as exc:
            endpoint = exc
        return await run_updater(endpoint, snapshot, outputs)

    def _agent_model(self, action: str) -> ChatEndpoint:
        """The agent model (the user's when no agent model is set up), or an error that
        says which setting ``action`` needs."""
        settings = self.services.require_settings()
        endpoint = settings.agent_model()
        if not endpoint.configured:
            missing = " and ".join(
                name
                for name, value in (("base URL", endpoint.base_url), ("model", endpoint.model))
                if not value
            )
            which, where = (
                (
                    "your chat model (user_llm), which answers when no agent model is set up,",
                    "User LLM",
                )
                if settings.agent_uses_user_model
                else ("the agent model (agent_llm),", "Agent LLM")
            )
            raise LLMError(
                f"{action} uses {which} which is not set up: its "
                f"{missing} {'are' if ' and ' in missing else 'is'} empty. Fill them in under "
                f"Settings → {where}.",
                kind="not_configured",
            )
        return endpoint

    async def propose_memory(self, conversation_id: str) -> MemoryProposal:
        """The agent model's new evolved persona, as a proposal (nothing is written)."""
        conversation = self.tree.conversation(conversation_id)
        history = history_of(self.tree.active_path(conversation_id))
        endpoint = self._agent_model("Update memory")
        return await propose_memory_update(endpoint, conversation.character, history)

    def accept_memory(
        self, conversation_id: str, evolved_persona: str, *, expected_version: int | None
    ) -> Conversation:
        conversation = self.tree.conversation(conversation_id)
        character = conversation.character.model_copy(update={"evolved_persona": evolved_persona})
        return self.update_conversation(
            conversation_id, expected_version=expected_version, character=character
        )

    async def summarise(self, conversation_id: str) -> SummaryPreset:
        """Plot points of the active branch, saved as a summary preset and indexed for
        retrieval (indexing is skipped without an embedding model)."""
        presets = self._require_presets()
        conversation = self.tree.conversation(conversation_id)
        history = history_of(self.tree.active_path(conversation_id))
        points = await summarise(
            self._agent_model("Summarise"),
            history,
            character_name=character_name(conversation) or "Character",
            user_name=self.with_persona(conversation).settings.user_name,
        )
        preset = await asyncio.to_thread(
            presets.save_summary,
            SummaryPreset(source_conversation=conversation_id, summaries=points),
        )
        await self._index_summary(conversation_id, preset)
        return preset

    async def _index_summary(self, conversation_id: str, preset: SummaryPreset) -> None:
        index = self._summary_index()
        if index is None:
            return
        try:
            await index.index(conversation_id, preset.summaries, preset.summary_id)
        except Exception as exc:  # retrieval is a help, not a requirement
            logger.warning("indexing summary %s failed: %s", preset.summary_id, exc)

    async def continue_from_summary(
        self,
        conversation_id: str,
        *,
        summary_id: str | None = None,
        order: SeedOrder = "summary_first",
        last_n_turns: int = DEFAULT_LAST_N_TURNS,
        title: str | None = None,
    ) -> Conversation:
        """A new conversation with the same character and background, opened by the
        summary's plot points and the last turns of the active branch."""
        presets = self._require_presets()
        old = self.tree.conversation(conversation_id)
        if summary_id is None:
            made = [s for s in presets.summaries() if s.source_conversation == conversation_id]
            if not made:
                raise ChatError(f"conversation {conversation_id} has no summary yet: summarise it")
            summary = max(made, key=lambda s: (s.created_at, s.summary_id))
        else:
            summary = presets.summary(summary_id)
        path = self.tree.active_path(conversation_id)
        specs = seed_messages(summary, path, order, last_n_turns)
        settings = old.settings.model_copy(update={"summaries": [summary.summary_id]})
        state = self.tree.state_at(old.pointer)
        start_state = ChatState(variables=dict(state.variables), plot=state.plot)
        conversation = self.tree.create_conversation(
            project_id=self.project_id,
            title=title or f"{old.title} (continued)",
            character=old.character,
            background=old.background,
            settings=settings,
            metadata=with_group_members(
                {"continued_from": conversation_id, "summary_id": summary.summary_id}, old
            ),
        )
        now = time.time()
        rows: list[NewMessage] = []
        parent: str | None = None
        for n, spec in enumerate(specs):
            message_id = new_id()
            rows.append(
                NewMessage(
                    parent_id=parent,
                    role=spec.role,
                    name=spec.name,
                    content=spec.content,
                    extra=dict(spec.extra),
                    message_id=message_id,
                    state=start_state if n == 0 else None,
                    created_at=now,
                )
            )
            parent = message_id
        if rows:
            self.tree.add_messages(conversation.id, rows)
        await self._index_summary(conversation.id, summary)
        return self._changed(self.tree.conversation(conversation.id), listed=True)
