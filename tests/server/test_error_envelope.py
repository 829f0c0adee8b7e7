"""Every kind of error in :mod:`storyloom.core.errors` answers with its status and the one
error envelope, ``{"error": {"message", "problems": [{"field", "reason"}]}}``, through a
real server; a WebSocket answers ``status: error`` and stays open."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets

from storyloom.plugins import node_registry
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.server.conftest import chat_home

Json = dict[str, Any]


@pytest.fixture
def server(tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]) -> Any:
    card = {"name": "Maren", "first_mes": "Hello."}
    home = chat_home(tmp_path / "home", llm, {"maren": card}, api_key=None)
    return start_server(home, node_registry=node_registry(entry_points=False))


@pytest.fixture
def api(server: Any) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def envelope(response: httpx.Response, status: int) -> Json:
    """The error of ``response``, checked to be the envelope with ``status``."""
    assert response.status_code == status, response.text
    body: Json = response.json()
    error: Json = body["error"]
    assert set(error) == {"message", "problems"}
    assert isinstance(error["message"], str) and error["message"]
    assert all(set(p) == {"field", "reason"} for p in error["problems"])
    return body


def new_chat(api: httpx.Client) -> Json:
    created = api.post("/api/chats", json={"character_id": "maren"})
    assert created.status_code == 201, created.text
    conversation: Json = created.json()
    return conversation


def test_not_found_of_every_kind_is_a_404(api: httpx.Client) -> None:
    for path in (
        "/api/chats/nope",
        "/api/knowledge/bases/kb_nope",
        "/api/workflows/nope",
        "/api/workflow-runs/nope",
        "/api/presets/characters/nobody",
    ):
        body = envelope(api.get(path), 404)
        assert "nob" in body["error"]["message"] or "nope" in body["error"]["message"]
    frozen = api.put("/api/workflows/w/nodes/n/freeze", json={"historyId": 7})
    assert "history entry 7" in envelope(frozen, 404)["error"]["message"]


def test_a_stale_write_is_a_409_with_the_current_version(api: httpx.Client) -> None:
    conversation = new_chat(api)
    cid, version = conversation["id"], conversation["version"]
    renamed = api.patch(f"/api/chats/{cid}", json={"title": "New", "expected_version": version})
    assert renamed.status_code == 200, renamed.text
    stale = api.patch(f"/api/chats/{cid}", json={"title": "Old", "expected_version": version})
    body = envelope(stale, 409)
    assert body["version"] == renamed.json()["version"]


def test_a_conflict_without_a_version_is_a_plain_409(api: httpx.Client) -> None:
    created = api.post("/api/knowledge/bases", json={"displayName": "Local", "scope": "local"})
    kb_id = created.json()["kb_id"]
    body = envelope(api.post(f"/api/knowledge/bases/{kb_id}/reference"), 409)
    assert "local" in body["error"]["message"]
    assert "version" not in body


def test_invalid_input_names_each_field(api: httpx.Client) -> None:
    moved = api.put("/api/workflows/story", json={"id": "other", "nodes": [], "edges": []})
    assert [p["field"] for p in envelope(moved, 422)["error"]["problems"]] == ["id"]

    unknown_kb = api.post("/api/knowledge/activation/test", json={"kb_ids": ["kb_gone"]})
    problems = envelope(unknown_kb, 422)["error"]["problems"]
    assert [p["field"] for p in problems] == ["kb_ids"] and "kb_gone" in problems[0]["reason"]

    background = api.post("/api/presets/backgrounds", json={"name": 3})
    fields = [p["field"] for p in envelope(background, 422)["error"]["problems"]]
    assert fields and all(f.startswith("background") for f in fields)

    request = api.post("/api/chats", json={"title": ["not", "text"]})
    assert [p["field"] for p in envelope(request, 422)["error"]["problems"]] == ["title"]


def test_a_bad_upload_is_a_422_naming_the_file(api: httpx.Client) -> None:
    junk = {"file": ("notes.json", b'{"hello": "world"}', "application/json")}
    for path in ("/api/knowledge/import", "/api/chats/import"):
        message = envelope(api.post(path, files=junk), 422)["error"]["message"]
        assert message.startswith("notes.json: "), message


def test_a_workflow_that_cannot_run_is_a_422_with_every_graph_problem(api: httpx.Client) -> None:
    workflow = {"id": "ghostly", "nodes": [{"id": "g", "type": "x:Ghost"}], "edges": []}
    body = envelope(api.post("/api/workflows/ghostly/runs", json={"workflow": workflow}), 422)
    assert [p["code"] for p in body["problems"]] == ["unknown-type"]
    assert [p["field"] for p in body["error"]["problems"]] == ["g"]


def test_a_request_refused_as_asked_is_a_400(api: httpx.Client) -> None:
    cid = new_chat(api)["id"]
    body = envelope(api.post(f"/api/chats/{cid}/continue-from-summary"), 400)
    assert "summar" in body["error"]["message"]


def test_deleting_a_built_in_workflow_is_a_409(api: httpx.Client) -> None:
    body = envelope(api.delete("/api/workflows/chat-default"), 409)
    assert "built in" in body["error"]["message"]


def test_a_model_endpoint_that_is_unavailable_is_a_503_and_a_failing_one_a_502(
    api: httpx.Client, llm: ReplayLLMServer
) -> None:
    cid = new_chat(api)["id"]
    llm.script(Reply(status=429, retry_after=0))
    assert "rate" in envelope(api.post(f"/api/chats/{cid}/memory"), 503)["error"]["message"]
    llm.script(Reply(status=500))
    envelope(api.post(f"/api/chats/{cid}/memory"), 502)
    nowhere = {"agent_llm": {"base_url": "http://127.0.0.1:9/v1", "model": "x", "max_retries": 0}}
    assert api.put("/api/settings", json=nowhere).status_code == 200
    body = envelope(api.post(f"/api/chats/{cid}/memory"), 503)
    assert "127.0.0.1:9" in body["error"]["message"]


async def test_a_websocket_answers_each_bad_message_and_stays_open(server: Any) -> None:
    async with websockets.connect(server.ws_url) as ws:
        assert json.loads(await ws.recv())["status"] == "connected"
        for bad, says in (
            ("{not json", "not JSON"),
            (json.dumps({"type": "chat:subscribe"}), "conversationId"),
            (json.dumps({"type": "workflow:load", "workflowId": "nowhere"}), "nowhere"),
        ):
            await ws.send(bad)
            answer = json.loads(await ws.recv())
            assert (answer["type"], answer["status"]) == ("status", "error")
            assert says in answer["message"]
        await ws.send(json.dumps({"type": "connect", "projectId": "p"}))
        assert json.loads(await ws.recv())["status"] == "connected"
