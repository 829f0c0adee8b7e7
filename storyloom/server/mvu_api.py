"""MVU's actions on a chat (re-parse, replay, re-initialise, snapshot, clear old
variables) as routes; what each does to the state chain is said in
:mod:`storyloom.chat.service.mvu_actions`."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from storyloom.chat.service.mvu_actions import MvuActions
from storyloom.chat.store.conversation import Conversation
from storyloom.server.api_errors import error_responses
from storyloom.server.state import server_state

router = APIRouter(prefix="/api/chats", tags=["chats"])

_ERRORS = error_responses(400, 404, 409, 422)


def _actions(request: Request) -> MvuActions:
    return MvuActions(server_state(request).chat)


@router.post(
    "/{conversation_id}/messages/{message_id}/mvu/reparse",
    response_model=Conversation,
    responses=_ERRORS,
)
async def mvu_reparse(request: Request, conversation_id: str, message_id: str) -> Conversation:
    """Re-parse this reply: its update blocks applied again to its parent's state."""
    return await _actions(request).reparse(conversation_id, message_id)


@router.post(
    "/{conversation_id}/messages/{message_id}/mvu/replay",
    response_model=Conversation,
    responses=_ERRORS,
)
async def mvu_replay(request: Request, conversation_id: str, message_id: str) -> Conversation:
    """Replay: every reply from this message to the pointer re-parsed in order."""
    return await _actions(request).replay(conversation_id, message_id)


@router.post("/{conversation_id}/mvu/reinitialise", response_model=Conversation, responses=_ERRORS)
async def mvu_reinitialise(request: Request, conversation_id: str) -> Conversation:
    """The card's [InitVar] (and its schema's defaults) as ``stat_data`` at the pointer."""
    return await _actions(request).reinitialise(conversation_id)


@router.post("/{conversation_id}/mvu/snapshot", response_model=Conversation, responses=_ERRORS)
async def mvu_snapshot(request: Request, conversation_id: str) -> Conversation:
    """The state at the pointer stored whole, and kept by "clear old variables"."""
    return _actions(request).snapshot(conversation_id)


class ClearOldBody(BaseModel):
    model_config = ConfigDict(extra="ignore")

    keep: int = Field(
        default=10, ge=1, description="Messages before the pointer (it included) that keep theirs"
    )


class ClearedStates(BaseModel):
    conversation: Conversation
    cleared: list[str] = Field(description="The messages whose stored states were dropped")


@router.post("/{conversation_id}/mvu/clear-old", response_model=ClearedStates, responses=_ERRORS)
async def mvu_clear_old(
    request: Request, conversation_id: str, body: ClearOldBody
) -> ClearedStates:
    """Drop the stored states of the messages more than ``keep`` before the pointer."""
    conversation, cleared = _actions(request).clear_old(conversation_id, body.keep)
    return ClearedStates(conversation=conversation, cleared=cleared)
