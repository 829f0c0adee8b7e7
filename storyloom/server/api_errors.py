"""One error envelope for every failed request: ``{"error": {"message", "problems"}}``."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException
from starlette.types import Scope, Send

from storyloom.core.errors import FieldProblem, FileFormatError, clean_reason, field_path


class Problem(BaseModel):
    field: str
    reason: str


class ErrorDetail(BaseModel):
    message: str
    problems: list[Problem] = []


class ErrorBody(BaseModel):
    error: ErrorDetail


def error_response(
    status: int, message: str, problems: list[FieldProblem] | None = None
) -> JSONResponse:
    body = ErrorBody(
        error=ErrorDetail(
            message=message,
            problems=[Problem(field=p.field, reason=p.reason) for p in problems or []],
        )
    )
    return JSONResponse(status_code=status, content=body.model_dump())


def request_headers(scope: Scope) -> dict[str, str]:
    """The headers of an ASGI request, names lower-cased (for middlewares)."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


async def refuse(scope: Scope, send: Send, status: int, message: str) -> None:
    """Answer a refused request from a middleware: the error envelope over HTTP, or a
    policy-violation close before accept, which fails a WebSocket handshake (403)."""
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    body = ErrorBody(error=ErrorDetail(message=message)).model_dump_json().encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})


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
    async def on_validation(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        problems = _request_problems(exc)
        summary = "; ".join(str(p) for p in problems)
        return error_response(422, f"invalid request: {summary}", problems)

    async def on_http(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        return error_response(exc.status_code, str(exc.detail))

    async def on_file_format(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, FileFormatError)
        return error_response(422, str(exc), exc.problems)

    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(HTTPException, on_http)
    app.add_exception_handler(FileFormatError, on_file_format)
