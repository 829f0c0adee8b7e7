"""The chat's WebSocket messages in the OpenAPI document the web app's types come from."""

from __future__ import annotations

from typing import Any

import pytest

from storyloom.server.chat_ws import CHAT_SERVER_MESSAGES
from storyloom.server.ws_schema import SchemaConflict, add_ws_messages, ws_message_schemas


def test_the_document_lists_every_chat_message_each_way() -> None:
    document: dict[str, Any] = {}
    add_ws_messages(document)
    schemas = document["components"]["schemas"]
    server_refs = [member["$ref"] for member in schemas["ChatServerMessage"]["oneOf"]]
    assert server_refs == [f"#/components/schemas/{m.__name__}" for m in CHAT_SERVER_MESSAGES]
    assert schemas["ChatClientMessage"]["oneOf"] == [{"$ref": "#/components/schemas/ChatSubscribe"}]
    stream = schemas["ChatStreamMessage"]
    assert stream["properties"]["type"]["const"] == "chat:stream"
    assert set(stream["required"]) >= {"conversationId", "messageId", "text"}
    assert schemas["ChatMessageMessage"]["properties"]["message"] == {
        "$ref": "#/components/schemas/MessageView"
    }


def test_a_rest_schema_that_says_otherwise_is_refused() -> None:
    document = {"components": {"schemas": {"MessageView": {"type": "object"}}}}
    with pytest.raises(SchemaConflict, match="MessageView"):
        add_ws_messages(document)


def test_a_rest_schema_that_agrees_is_kept_once() -> None:
    view = ws_message_schemas()["MessageView"]
    document = {"components": {"schemas": {"MessageView": dict(view)}}}
    add_ws_messages(document)
    assert document["components"]["schemas"]["MessageView"] == view
