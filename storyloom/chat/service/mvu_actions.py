"""MVU's buttons, mapped onto storyloom's state chain.

MagVarUpdate offers five actions on a chat; storyloom keeps a state after every message
(:mod:`storyloom.chat.store.state_chain`), so each becomes this:

* **re-parse this reply** (重新处理变量): the update blocks of a stored reply (the model's
  raw text) applied again to its parent's state, with MVU's rules and the card's schema;
  the reply's state becomes the result (its lore timers and plot stay), its warnings
  are replaced, and the messages after it keep their own states;
* **re-initialise** (重新读取初始变量): the card's ``[InitVar]`` (with the schema's
  defaults) becomes ``stat_data`` of the state at the pointer; the other variables stay;
* **snapshot** (快照楼层): the state at the pointer is stored whole (a keyframe) and the
  message is marked ``extra.mvu_snapshot``; going back to it is moving the pointer there,
  and "clear old variables" never clears a snapshot;
* **replay** (重演楼层): from a chosen message to the pointer, each reply is re-parsed in
  order against the state its parent now has (a user message takes its parent's
  variables), so a fixed rule or a corrected early reply carries through;
* **clear old variables** (清除旧楼层变量): the stored states of the messages on the path
  more than ``keep`` messages before the pointer are dropped (they read as empty
  afterwards); the pointer's state and every later or other-branch state stay exactly
  as they were, and snapshots are kept.

Each refuses while a reply is being written and moves the conversation's version.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from storyloom.chat.reply.filament import FilamentTags, parse_filament
from storyloom.chat.reply.mvu import mvu_start
from storyloom.chat.reply.mvu_values import apply_mvu_ops, mvu_variables
from storyloom.chat.service.conversations import ChatService
from storyloom.chat.store.chat_errors import ChatError
from storyloom.chat.store.conversation import Conversation
from storyloom.chat.store.message import Message
from storyloom.chat.store.state import ChatState
from storyloom.core.errors import InvalidInput, NotFound
from storyloom.sillytavern.mvu_zod import ZodSchemaError, card_state_schema

SNAPSHOT_MARK = "mvu_snapshot"


class MvuActions:
    """MVU's five actions on the conversations of a :class:`ChatService`."""

    def __init__(self, chat: ChatService) -> None:
        self.chat = chat
        self.tree = chat.tree

    # -- helpers ------------------------------------------------------------------------

    def _message(self, conversation_id: str, message_id: str) -> Message:
        message = self.tree.message(message_id)
        if message.conversation_id != conversation_id:
            raise NotFound(f"no message {message_id!r} in conversation {conversation_id!r}")
        return message

    def _pointer(self, conversation: Conversation) -> str:
        if conversation.pointer is None:
            raise InvalidInput(f"conversation {conversation.id}: it has no messages yet")
        return conversation.pointer

    async def _schema(self, conversation: Conversation) -> tuple[dict[str, Any] | None, str]:
        try:
            schema = await asyncio.to_thread(card_state_schema, conversation.character.card)
        except ZodSchemaError as exc:
            return None, f"{exc}; the updates were applied without the schema"
        return schema, ""

    def _reparsed(
        self, message: Message, parent: ChatState, schema: Mapping[str, Any] | None
    ) -> tuple[ChatState, dict[str, Any]]:
        """The state after ``message`` with its update blocks applied again to
        ``parent``'s variables, and its ``extra`` with the new warnings."""
        record = self.tree.turn_record(message.id)
        text = record.raw or message.original or message.content
        result = parse_filament(text, FilamentTags())
        outcome = apply_mvu_ops(parent.variables, result.ops, schema)
        own = self.tree.state_at(message.id).as_json()
        extra = dict(message.extra)
        extra["problems"] = [*result.problems, *outcome.problems]
        warnings = [w.model_dump(mode="json") for w in outcome.warnings]
        if warnings:
            extra["mvu_warnings"] = warnings
        else:
            extra.pop("mvu_warnings", None)
        return ChatState.model_validate({**own, "variables": outcome.variables}), extra

    def _source_card(self, conversation: Conversation) -> Mapping[str, Any]:
        """The card as it was imported (its book holds ``[InitVar]``), from the preset the
        chat was made from; the chat's own copy when that preset is gone."""
        preset_id = conversation.character.source_preset
        if self.chat.presets is not None and preset_id:
            try:
                source = self.chat.presets.character(preset_id).source_card
            except (NotFound, ChatError, InvalidInput):
                source = None
            if source:
                return source
        return conversation.character.card

    def _done(self, conversation_id: str) -> Conversation:
        conversation = self.tree.conversation(conversation_id)
        self.chat.announce(conversation_id)
        return conversation

    # -- the actions --------------------------------------------------------------------

    async def reparse(self, conversation_id: str, message_id: str) -> Conversation:
        """Re-parse this reply (see the module)."""
        self.chat.check_idle(conversation_id)
        message = self._message(conversation_id, message_id)
        if message.role != "assistant" or message.parent_id is None:
            raise InvalidInput(f"message {message_id}: only a reply has updates to re-parse")
        conversation = self.tree.conversation(conversation_id)
        schema, problem = await self._schema(conversation)
        state, extra = self._reparsed(message, self.tree.state_at(message.parent_id), schema)
        if problem:
            extra["problems"] = [*extra["problems"], problem]
        self.tree.update_message(message.id, state=state, extra=extra, bump_version=True)
        return self._done(conversation_id)

    async def replay(self, conversation_id: str, message_id: str) -> Conversation:
        """Replay from ``message_id`` to the pointer (see the module)."""
        self.chat.check_idle(conversation_id)
        start = self._message(conversation_id, message_id)
        conversation = self.tree.conversation(conversation_id)
        path = self.tree.path(self._pointer(conversation))
        ids = [m.id for m in path]
        if start.id not in ids:
            raise InvalidInput(f"message {message_id}: not on the chat's current path")
        schema, problem = await self._schema(conversation)
        for message in path[ids.index(start.id) :]:
            parent = self.tree.state_at(message.parent_id)
            if message.role == "assistant" and message.parent_id is not None:
                state, extra = self._reparsed(message, parent, schema)
                if problem:
                    extra["problems"] = [*extra["problems"], problem]
                self.tree.update_message(message.id, state=state, extra=extra)
            else:
                own = self.tree.state_at(message.id)
                state = own.model_copy(update={"variables": parent.variables})
                self.tree.update_message(
                    message.id, state=ChatState.model_validate(state.as_json())
                )
        self.tree.update_message(path[-1].id, bump_version=True)
        return self._done(conversation_id)

    async def reinitialise(self, conversation_id: str) -> Conversation:
        """Re-initialise ``stat_data`` at the pointer (see the module)."""
        self.chat.check_idle(conversation_id)
        conversation = self.tree.conversation(conversation_id)
        pointer = self._pointer(conversation)
        card = self._source_card(conversation)
        stat_data, problems = await asyncio.to_thread(mvu_start, card)
        if problems:
            raise InvalidInput(f"conversation {conversation_id}: " + "; ".join(problems))
        own = self.tree.state_at(pointer).as_json()
        variables = {**own["variables"], **mvu_variables(stat_data)}
        state = ChatState.model_validate({**own, "variables": variables})
        self.tree.update_message(pointer, state=state, bump_version=True)
        return self._done(conversation_id)

    def snapshot(self, conversation_id: str) -> Conversation:
        """Snapshot the state at the pointer (see the module)."""
        self.chat.check_idle(conversation_id)
        conversation = self.tree.conversation(conversation_id)
        message = self.tree.message(self._pointer(conversation))
        self.tree.pin_state(message.id)
        self.tree.update_message(
            message.id, extra={**message.extra, SNAPSHOT_MARK: True}, bump_version=True
        )
        return self._done(conversation_id)

    def clear_old(self, conversation_id: str, keep: int) -> tuple[Conversation, list[str]]:
        """Clear the states older than ``keep`` messages before the pointer (see the
        module); the conversation and the ids whose states were dropped."""
        self.chat.check_idle(conversation_id)
        if keep < 1:
            raise InvalidInput(f"keep: {keep} is less than 1 (the current state is kept)")
        conversation = self.tree.conversation(conversation_id)
        path = self.tree.path(self._pointer(conversation))
        old: Sequence[Message] = path[: max(0, len(path) - keep)]
        ids = [m.id for m in old if not m.extra.get(SNAPSHOT_MARK)]
        dropped = self.tree.clear_states(conversation_id, ids) if ids else []
        return self._done(conversation_id), dropped
