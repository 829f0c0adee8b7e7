"""The writing studio's WebSocket messages: keeping outputs (``output:*``) and Role B
(``build:*``).

``output:persist`` names the output by run and node, so what is kept is exactly what the
author saw: the text comes from the run's own ``node:completed`` event, never from the
browser. Drafts never enter the book's memory; only a kept output is curated. Role B's
request waits on the agent model, so it runs as a task and answers the sender when done.
"""

from __future__ import annotations

import logging
from typing import TypeGuard

from fastapi import WebSocket

from storyloom.core.errors import StoryloomError
from storyloom.server.protocol import (
    BuildAcceptMessage,
    BuildAppliedMessage,
    BuildRejectedMessage,
    BuildRejectMessage,
    BuildRequestMessage,
    BuildSuggestionMessage,
    ClientMessage,
    OutputDeletedMessage,
    OutputDeleteMessage,
    OutputPersistedMessage,
    OutputPersistMessage,
)
from storyloom.server.state import ServerState

logger = logging.getLogger(__name__)

WritingMessage = (
    OutputPersistMessage
    | OutputDeleteMessage
    | BuildRequestMessage
    | BuildAcceptMessage
    | BuildRejectMessage
)


def handles(message: ClientMessage) -> TypeGuard[WritingMessage]:
    return isinstance(message, WritingMessage)


def handle(state: ServerState, ws: WebSocket, message: WritingMessage) -> None:
    """Answer one writing message; a domain error propagates (``status: error``)."""
    hub, studio = state.hub, state.writing
    if isinstance(message, OutputPersistMessage):
        tracked = state.workflow_runs.get(message.run_id)
        persisted = studio.persist_output(
            tracked.events,
            run_id=message.run_id,
            node_id=message.node_id,
            book_id=message.book_id,
            chapter=message.chapter,
            slot=message.slot,
            tags=message.tags,
        )
        reply = OutputPersistedMessage(
            output_id=persisted.output_id,
            run_id=message.run_id,
            node_id=message.node_id,
            book_id=message.book_id,
            chapter=message.chapter,
            created=persisted.created,
        )
        hub.send(ws, reply)
    elif isinstance(message, OutputDeleteMessage):
        studio.curator.delete_output(message.output_id)
        hub.send(ws, OutputDeletedMessage(output_id=message.output_id))
    elif isinstance(message, BuildRequestMessage):
        studio.spawn(lambda: _suggest(state, ws, message), "build:request")
    elif isinstance(message, BuildAcceptMessage):
        workflow_id = studio.accept_suggestion(message.suggestion_id, message.modifications)
        hub.send(
            ws, BuildAppliedMessage(suggestion_id=message.suggestion_id, workflow_id=workflow_id)
        )
    else:
        studio.reject_suggestion(message.suggestion_id, message.reason)
        hub.send(ws, BuildRejectedMessage(suggestion_id=message.suggestion_id))


async def _suggest(state: ServerState, ws: WebSocket, message: BuildRequestMessage) -> None:
    try:
        suggestion = await state.writing.suggest(message.intent, message.current_workflow)
    except StoryloomError as exc:
        state.hub.send_error(ws, exc)
        return
    except Exception as exc:
        logger.exception("build:request failed")
        state.hub.send_error(ws, f"build:request failed: {type(exc).__name__}")
        return
    state.hub.send(
        ws,
        BuildSuggestionMessage(
            suggestion_id=suggestion.suggestion_id,
            workflow_id=suggestion.workflow_id,
            nodes=suggestion.nodes,
            edges=suggestion.edges,
            explanation=suggestion.explanation,
        ),
    )
