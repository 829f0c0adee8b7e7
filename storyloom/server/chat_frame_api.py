"""What a chat's sandboxed frames may do: ``/api/chats/{id}/frame`` and the variables write.

A card's HTML (a status bar, a front-end card) and its Tavern Helper scripts run in frames
with an opaque origin; the chat page answers their calls over ``postMessage`` (the bridge,
``web/src/lib/frameBridge.ts``). The page asks here once per chat what the character's
card was allowed (:class:`~storyloom.chat.personalab.card_permissions.CardPermissions`):
whether its frames may write and reach the network, and which of its own Tavern Helper
scripts run, with their code. A script the user did not allow is never sent to the page.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from storyloom.chat.personalab.card_permissions import CardPermissions
from storyloom.core.errors import NotFound
from storyloom.server.api_errors import error_responses
from storyloom.server.chat_api import StateView
from storyloom.server.state import server_state
from storyloom.sillytavern.tavern_helper import helper_scripts

router = APIRouter(prefix="/api/chats", tags=["chats"])

_ERRORS = error_responses(400, 404, 409, 422)


class FrameScript(BaseModel):
    """One of the card's Tavern Helper scripts the user allowed to run."""

    id: str
    name: str
    content: str = Field(description="The script's code, run in a hidden sandboxed frame")


class FrameAccess(BaseModel):
    """What the chat's frames may do beyond reading: the character's answers."""

    writes: bool = Field(description="Frames may change variables and send messages")
    network: bool = Field(description="Frames may load images, styles and scripts over https")
    helper_scripts: list[FrameScript] = Field(
        default_factory=list, description="The allowed Tavern Helper scripts, in card order"
    )
    global_variables: dict[str, Any] = Field(
        default_factory=dict, description="The user's global variables (read-only to frames)"
    )


@router.get("/{conversation_id}/frame", response_model=FrameAccess, responses=_ERRORS)
def frame_access(request: Request, conversation_id: str) -> FrameAccess:
    """The character's answers for its frames; a chat without a character: all off."""
    state = server_state(request)
    conversation = state.turn_tree.conversation(conversation_id)
    character_id = conversation.character.source_preset
    store = state.chat.card_permissions
    allowed = CardPermissions()
    if character_id is not None and store is not None and not conversation.settings.group:
        allowed = store.of(character_id)
    scripts = [
        FrameScript(id=s.id, name=s.name, content=s.content)
        for s in helper_scripts(conversation.character.card).scripts
        if s.enabled and s.kind == "other" and s.id in allowed.helper_scripts
    ]
    return FrameAccess(
        writes=allowed.frame_writes,
        network=allowed.frame_network,
        helper_scripts=scripts,
        global_variables=state.chat.load_globals(),
    )


class MessageVariables(BaseModel):
    """What a frame reads of one message, in one request: its variables, its parent's
    (for MVU's ``old->new`` views) and the change between them."""

    variables: dict[str, Any] = Field(description="The chat variables after the message")
    before: dict[str, Any] = Field(description="The chat variables after its parent")
    delta: list[dict[str, Any]] = Field(description="RFC 6902 ops: parent's state → this one")


@router.get(
    "/{conversation_id}/messages/{message_id}/variables",
    response_model=MessageVariables,
    responses=_ERRORS,
)
def message_variables(request: Request, conversation_id: str, message_id: str) -> MessageVariables:
    tree = server_state(request).turn_tree
    message = tree.message(message_id)
    if message.conversation_id != conversation_id:
        raise NotFound(f"no message {message_id!r} in conversation {conversation_id!r}")
    return MessageVariables(
        variables=tree.state_at(message_id).variables,
        before=tree.state_at(message.parent_id).variables,
        delta=tree.delta_of(message_id),
    )


class VariablesBody(BaseModel):
    model_config = ConfigDict(extra="ignore")

    variables: dict[str, Any] = Field(description="The message's chat variables, whole")


@router.put(
    "/{conversation_id}/messages/{message_id}/variables",
    response_model=StateView,
    responses=_ERRORS,
)
async def set_variables(
    request: Request, conversation_id: str, message_id: str, body: VariablesBody
) -> StateView:
    """Replace the chat variables after ``message_id`` (a frame's ``replaceVariables`` and
    kin, where the character allows writes). The later messages keep their own states;
    every open tab hears of the change. Refused while a reply is being written."""
    state = server_state(request)
    state.chat.set_variables(conversation_id, message_id, body.variables)
    tree = state.turn_tree
    return StateView(state=tree.state_at(message_id), delta=tree.delta_of(message_id))
