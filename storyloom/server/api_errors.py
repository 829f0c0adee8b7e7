"""Errors as answers: every failed request gets ``{"error": {"message", "problems"}}``.

Routes raise; they do not catch. The handlers installed here turn each kind of
:mod:`storyloom.core.errors` into its status, in one place:

=====================  ======  ============================================================
error                  status  envelope
=====================  ======  ============================================================
``NotFound``           404     message
``Conflict``           409     message, and ``version`` (top level) when it has one;
                              ``CardExists``: ``conflict`` (the character a card is)
``UploadTooLarge``     413     message (an upload over the server's size limit)
``InvalidInput``       422     message and ``problems``: ``{field, reason}`` each
``WorkflowInvalid``    422     message, ``problems``, and every graph problem in full
``Unavailable``        503     message (a model endpoint down, something not set up)
``LLMError``           502     message (the model endpoint answered with a failure)
other StoryloomError   400     message (the request cannot be done as asked)
=====================  ======  ============================================================

An LLM error that is also ``Unavailable`` (unreachable, rate limited, timed out, not
configured) is a 503; FastAPI's own request validation is a 422 like ``InvalidInput``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError
from starlette.exceptions import HTTPException
from starlette.types import Scope, Send

from storyloom.chat.personalab.card_reimport import CardExists, CardSameness
from storyloom.core.errors import (
    Conflict,
    FieldProblem,
    FileFormatError,
    InvalidInput,
    NotFound,
    StoryloomError,
    Unavailable,
    clean_reason,
    field_path,
)
from storyloom.knowledge.package import EmbeddingModelChoiceNeeded
from storyloom.llm.errors import LLMError
from storyloom.workflow.validation import WorkflowInvalid, WorkflowProblem


class UploadTooLarge(StoryloomError):
    """An upload over the size this server takes (``file_transfer.too_large`` says so)."""


class Problem(BaseModel):
    field: str
    reason: str


class ErrorDetail(BaseModel):
    message: str
    problems: list[Problem] = []


class ErrorBody(BaseModel):
    error: ErrorDetail


class ConflictBody(ErrorBody):
    """409 of a stale write: ``version`` is the conversation's version now."""

    version: int


class CardConflict(BaseModel):
    """The character here that an uploaded card is."""

    sameness: CardSameness = Field(
        description="identical: the very same card; changed: a card of the same name "
        "that differs (it can update the character)"
    )
    character_id: str
    name: str


class CardConflictBody(ErrorBody):
    """409 of a card import whose card is a character here already: nothing was written."""

    conflict: CardConflict


class EmbeddingChoice(BaseModel):
    """What the user picks from when a package's vectors came from a model missing here."""

    kind: Literal["embedding_model_missing"] = "embedding_model_missing"
    package_model: str = Field(description="The model the package's vectors were made with")
    available: list[str] = Field(description="The embedding models here, to embed it with")


class EmbeddingChoiceBody(ErrorBody):
    """422 of a package import that needs an embedding model chosen: nothing was written;
    send the file again with ``embedding_model`` set to one of ``available``."""

    embedding_choice: EmbeddingChoice


class WorkflowInvalidBody(ErrorBody):
    """422 of a refused run: the error envelope, and every graph problem in full."""

    problems: list[WorkflowProblem]


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """A route's ``responses=``: each of ``statuses`` answers with the error envelope."""
    return {status: {"model": ErrorBody} for status in statuses}


# Checked in order: the first kind an error is decides its status. ``Unavailable`` comes
# before ``LLMError`` so an unreachable endpoint is a 503, not a 502.
STATUS_OF_KIND: tuple[tuple[type[StoryloomError], int], ...] = (
    (NotFound, 404),
    (Conflict, 409),
    (UploadTooLarge, 413),
    (InvalidInput, 422),
    (WorkflowInvalid, 422),
    (Unavailable, 503),
    (LLMError, 502),
    (StoryloomError, 400),
)


def status_of(exc: StoryloomError) -> int:
    return next(status for kind, status in STATUS_OF_KIND if isinstance(exc, kind))


def error_response(
    status: int, message: str, problems: list[FieldProblem] | None = None
) -> JSONResponse:
    body = ErrorBody(error=_detail(message, problems or []))
    return JSONResponse(status_code=status, content=body.model_dump())


def _detail(message: str, problems: list[FieldProblem]) -> ErrorDetail:
    return ErrorDetail(
        message=message, problems=[Problem(field=p.field, reason=p.reason) for p in problems]
    )


def problem_field(problem: WorkflowProblem) -> str:
    """Where a graph problem sits, as the error envelope's ``field``: ``node.slot``."""
    if problem.node_id is None:
        return problem.field or problem.slot or ""
    return ".".join(p for p in (problem.node_id, problem.slot, problem.field) if p)


def storyloom_error_response(exc: StoryloomError) -> JSONResponse:
    """The answer to a domain error: its status and envelope (see the module's table)."""
    status = status_of(exc)
    body: ErrorBody
    if isinstance(exc, WorkflowInvalid):
        problems = [FieldProblem(problem_field(p), p.message) for p in exc.problems]
        message = f"workflow {exc.workflow_id!r} cannot run: {len(exc.problems)} problem(s)"
        body = WorkflowInvalidBody(error=_detail(message, problems), problems=exc.problems)
    elif isinstance(exc, CardExists):
        match = exc.match
        conflict = CardConflict(
            sameness=match.sameness, character_id=match.character_id, name=match.name
        )
        body = CardConflictBody(error=_detail(str(exc), []), conflict=conflict)
    elif isinstance(exc, EmbeddingModelChoiceNeeded):
        choice = EmbeddingChoice(package_model=exc.package_model_id, available=exc.available)
        body = EmbeddingChoiceBody(error=_detail(str(exc), exc.problems), embedding_choice=choice)
    elif isinstance(exc, Conflict) and exc.version is not None:
        body = ConflictBody(error=_detail(str(exc), []), version=exc.version)
    elif isinstance(exc, InvalidInput):
        body = ErrorBody(error=_detail(str(exc), exc.problems))
    else:
        body = ErrorBody(error=_detail(str(exc), []))
    return JSONResponse(status_code=status, content=body.model_dump(mode="json", by_alias=True))


def describe(exc: Exception) -> str:
    """One line saying what was wrong with a message, for a WebSocket ``status: error``."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "message"
        return f"{where}: {first.get('msg')}"
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON: {exc}"
    return str(exc)


@contextmanager
def field_errors(what: str, field: str) -> Iterator[None]:
    """What is read inside comes from request field ``field``: a pydantic validation error
    or a :class:`NotFound` there is that field's problem, a 422 naming it."""
    try:
        yield
    except ValidationError as exc:
        raise InvalidInput.from_validation(what, exc, field) from None
    except NotFound as exc:
        raise InvalidInput.of(what, [FieldProblem(field, str(exc))]) from None


@contextmanager
def upload_errors(filename: str, saved_as: Path | None = None) -> Iterator[None]:
    """Anything wrong with an uploaded file is a 422 that names the file as the user
    knows it: the temporary copy it was saved as (``saved_as``) means nothing to them. A
    card that is a character here already stays the 409 that asks the user."""
    try:
        yield
    except (CardExists, EmbeddingModelChoiceNeeded):
        raise
    except FileFormatError as exc:
        message = "; ".join(str(p) for p in exc.problems) or "unreadable"
        raise InvalidInput(f"{filename}: {message}", exc.problems) from None
    except StoryloomError as exc:
        # Already imported, a package that breaks the rules: the message says which.
        message = str(exc)
        if saved_as is not None:
            message = message.replace(str(saved_as), filename)
        problems = exc.problems if isinstance(exc, InvalidInput) else []
        message = message if filename in message else f"{filename}: {message}"
        raise InvalidInput(message, problems) from None


def request_headers(scope: Scope) -> dict[str, str]:
    """The headers of an ASGI request, names lower-cased (for middlewares)."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


async def refuse(scope: Scope, send: Send, status: int, message: str) -> None:
    """Answer a refused request from a middleware: the error envelope over HTTP, or a
    policy-violation close before accept, which fails a WebSocket handshake (403)."""
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": envelope_bytes(message)})


def envelope_bytes(message: str) -> bytes:
    """The error envelope of ``message`` as a response body."""
    return ErrorBody(error=ErrorDetail(message=message)).model_dump_json().encode()


def _request_problems(exc: RequestValidationError) -> list[FieldProblem]:
    problems = []
    for err in exc.errors():
        loc: tuple[Any, ...] = tuple(err.get("loc", ()))
        # "body" is FastAPI's name for the request payload, not a field the user wrote.
        if loc and loc[0] in ("body", "query", "path"):
            loc = loc[1:]
        problems.append(FieldProblem(field_path(loc), clean_reason(err)))
    return problems


def install_error_handlers(app: FastAPI) -> None:
    """The app's one set of error handlers; anything else is a 500."""

    async def on_validation(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        problems = _request_problems(exc)
        summary = "; ".join(str(p) for p in problems)
        return error_response(422, f"invalid request: {summary}", problems)

    async def on_http(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        return error_response(exc.status_code, str(exc.detail))

    async def on_storyloom_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StoryloomError)
        return storyloom_error_response(exc)

    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(HTTPException, on_http)
    app.add_exception_handler(StoryloomError, on_storyloom_error)
