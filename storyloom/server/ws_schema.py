"""The WebSocket's chat messages in the OpenAPI document.

``/ws`` has no routes for FastAPI to describe, so the chat's message models are added to
``components.schemas`` here, beside the REST bodies. ``storyloom openapi`` writes the
document the web app's types are generated from (``npm run gen:api``), so the page's
``chat:*`` types follow these models as its REST types follow theirs.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.encoders import jsonable_encoder
from fastapi.openapi.models import Schema
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from storyloom.server.chat_ws import CHAT_CLIENT_MESSAGES, CHAT_SERVER_MESSAGES

REF_TEMPLATE = "#/components/schemas/{model}"


class SchemaConflict(RuntimeError):
    """A WebSocket model's schema and a REST schema of the same name differ."""


def ws_message_schemas() -> dict[str, Any]:
    """Schemas of the chat's WebSocket messages (and the models they hold), by name, plus
    the unions ``ChatClientMessage`` and ``ChatServerMessage``."""
    models = [*CHAT_CLIENT_MESSAGES, *CHAT_SERVER_MESSAGES]
    _, top = models_json_schema(
        [(model, "serialization") for model in models], ref_template=REF_TEMPLATE
    )
    schemas: dict[str, Any] = dict(top.get("$defs", {}))
    schemas["ChatClientMessage"] = _union(CHAT_CLIENT_MESSAGES)
    schemas["ChatServerMessage"] = _union(CHAT_SERVER_MESSAGES)
    # As FastAPI writes its own schemas (a `default` of None left out, and so on), so the
    # models both sides carry come out the same.
    return {name: _as_fastapi_writes(schema) for name, schema in schemas.items()}


def _as_fastapi_writes(schema: dict[str, Any]) -> dict[str, Any]:
    written: dict[str, Any] = jsonable_encoder(Schema(**schema), by_alias=True, exclude_none=True)
    return written


def _union(models: tuple[type[BaseModel], ...]) -> dict[str, Any]:
    # No `discriminator`: each member's `type` is a literal already, and openapi-typescript
    # rewrites the `type` of discriminated members to their schema names.
    return {"oneOf": [{"$ref": REF_TEMPLATE.format(model=m.__name__)} for m in models]}


def add_ws_messages(document: dict[str, Any]) -> None:
    """Add the WebSocket message schemas to an OpenAPI ``document``'s components.

    A model the REST routes carry too (``MessageView``) is kept once; should the two
    descriptions ever differ, the generated types could not be trusted, so that fails.
    """
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in ws_message_schemas().items():
        known = schemas.get(name)
        if known is not None and known != schema:
            raise SchemaConflict(f"{name}: the WebSocket and REST schemas differ")
        schemas[name] = schema


def openapi_with_ws_messages(app: FastAPI) -> dict[str, Any]:
    """``app.openapi``: FastAPI's document of the routes, with the WebSocket messages."""
    if app.openapi_schema is None:
        add_ws_messages(FastAPI.openapi(app))
    assert app.openapi_schema is not None
    return app.openapi_schema
