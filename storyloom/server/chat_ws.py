"""The chat's WebSocket messages: a tab subscribes to a conversation and hears its turns.

Browser → server: ``chat:subscribe`` / ``chat:unsubscribe`` ``{conversationId}``.
Server → browser, to the tabs subscribed to that conversation: ``chat:message`` (a
message added or finalised), ``chat:stream`` (visible reply text as it arrives, thoughts
apart), ``chat:tool-step`` (an agent turn's tool call ended, with its result),
``chat:done`` (the reply ended, how) and ``chat:changed`` (anything else: another
tab's edit, swipe or pointer move; the tab reloads what it shows). A change to the list
itself (a conversation created, renamed, deleted) goes to every tab as ``chat:changed``.
"""

from __future__ import annotations

import logging
from typing import Any, Literal, cast

from fastapi import WebSocket
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from storyloom.chat.service.reply_run import (
    ChatEvent,
    ConversationChanged,
    StreamDelta,
    ToolStepAdded,
    TurnDone,
)
from storyloom.chat.store.message import MessageStatus
from storyloom.chat.store.turn_tree import TurnTree
from storyloom.server.chat_views import MessageView, SourcesOf, single_view
from storyloom.server.protocol import ServerMessage
from storyloom.server.ws_hub import WebSocketHub
from storyloom.workflow.agent_host import ToolStep

logger = logging.getLogger(__name__)

PREFIX = "chat:"


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ChatSubscribe(_Message):
    """Browser → server: follow (or stop following) one conversation's turns."""

    type: Literal["chat:subscribe", "chat:unsubscribe"]
    conversation_id: str = Field(alias="conversationId", min_length=1)


class ChatMessageMessage(_Message):
    """Server → browser: a message was added or finalised."""

    type: Literal["chat:message"] = "chat:message"
    conversation_id: str = Field(alias="conversationId")
    message: MessageView
    version: int


class ChatStreamMessage(_Message):
    """Server → browser: reply text as it arrives."""

    type: Literal["chat:stream"] = "chat:stream"
    conversation_id: str = Field(alias="conversationId")
    message_id: str = Field(alias="messageId")
    text: str = Field(description="Visible reply text that just arrived")
    thought: str | None = Field(default=None, description="Thought text that just arrived")


class ChatToolStepMessage(_Message):
    """Server → browser: one tool call of the agent turn writing ``messageId`` ended."""

    type: Literal["chat:tool-step"] = "chat:tool-step"
    conversation_id: str = Field(alias="conversationId")
    message_id: str = Field(alias="messageId")
    step: ToolStep


class ChatDoneMessage(_Message):
    """Server → browser: the reply ended: complete, or partial/error with why."""

    type: Literal["chat:done"] = "chat:done"
    conversation_id: str = Field(alias="conversationId")
    message_id: str = Field(alias="messageId")
    status: MessageStatus
    error: str | None = None
    version: int


class ChatChangedMessage(_Message):
    """Server → browser: anything else changed the conversation (or the list, ``listed``)."""

    type: Literal["chat:changed"] = "chat:changed"
    conversation_id: str = Field(alias="conversationId")
    version: int
    deleted: bool | None = None
    listed: bool | None = Field(default=None, description="The conversation list changed")


CHAT_CLIENT_MESSAGES: tuple[type[_Message], ...] = (ChatSubscribe,)
CHAT_SERVER_MESSAGES: tuple[type[_Message], ...] = (
    ChatMessageMessage,
    ChatStreamMessage,
    ChatToolStepMessage,
    ChatDoneMessage,
    ChatChangedMessage,
)
"""The chat's messages each way, for the schema the web app's types come from."""


class ChatSubscriptions:
    """Which socket follows which conversation, and the delivery of chat events."""

    def __init__(self, hub: WebSocketHub, tree: TurnTree, sources_of: SourcesOf) -> None:
        self.hub = hub
        self.tree = tree
        self.sources_of = sources_of
        """A conversation's regex scripts, for the display text of a message sent."""
        self._followers: dict[str, set[WebSocket]] = {}

    def handle(self, ws: WebSocket, data: Any) -> bool:
        """Take a ``chat:*`` message from ``ws``; False when it is not one of ours."""
        if not isinstance(data, dict) or not str(data.get("type", "")).startswith(PREFIX):
            return False
        try:
            request = ChatSubscribe.model_validate(data)
        except ValidationError as exc:
            self.hub.send_error(ws, exc)
            return True
        followers = self._followers.setdefault(request.conversation_id, set())
        if request.type == "chat:subscribe":
            followers.add(ws)
        else:
            followers.discard(ws)
            if not followers:
                del self._followers[request.conversation_id]
        return True

    def forget(self, ws: WebSocket) -> None:
        """The socket closed."""
        for conversation_id in list(self._followers):
            followers = self._followers[conversation_id]
            followers.discard(ws)
            if not followers:
                del self._followers[conversation_id]

    def followers(self, conversation_id: str) -> set[WebSocket]:
        return set(self._followers.get(conversation_id, ()))

    def _send(self, ws: WebSocket, message: BaseModel) -> None:
        # The hub's union lists the protocol module's messages; these are the chat's own.
        self.hub.send(ws, cast(ServerMessage, message))

    def publish(self, event: ChatEvent) -> None:
        """Deliver a chat event; call from the event loop."""
        if isinstance(event, StreamDelta | ToolStepAdded) and not self._followers.get(
            event.conversation_id
        ):
            return
        message = self._message(event)
        if message is None:
            return
        if isinstance(event, ConversationChanged) and event.listed:
            targets = set(self.hub.sockets())
        else:
            targets = self.followers(event.conversation_id)
        for ws in targets:
            self._send(ws, message)

    def _message(self, event: ChatEvent) -> BaseModel | None:
        if isinstance(event, StreamDelta):
            return ChatStreamMessage(
                conversation_id=event.conversation_id,
                message_id=event.message_id,
                text=event.text,
                thought=event.thought,
            )
        if isinstance(event, ToolStepAdded):
            return ChatToolStepMessage(
                conversation_id=event.conversation_id,
                message_id=event.message_id,
                step=ToolStep.model_validate(event.step),
            )
        if isinstance(event, TurnDone):
            return ChatDoneMessage(
                conversation_id=event.conversation_id,
                message_id=event.message_id,
                status=event.status,
                error=event.error,
                version=event.version,
            )
        if isinstance(event, ConversationChanged):
            return ChatChangedMessage(
                conversation_id=event.conversation_id,
                version=event.version,
                deleted=event.deleted or None,
                listed=event.listed or None,
            )
        if not self._followers.get(event.conversation_id):
            return None  # nobody to show it to: skip the view's queries
        try:
            view = single_view(self.tree, event.message, self.sources_of)
        except Exception:
            logger.exception("chat:message for %s could not be built", event.message.id)
            return None
        return ChatMessageMessage(
            conversation_id=event.conversation_id,
            message=view,
            version=event.version,
        )
