"""The writing studio's WebSocket messages on a real server: keeping a run's output
(``output:persist``) and its background curation, and Role B's ``build:*``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from websockets.asyncio.client import ClientConnection

from storyloom.testing.replay_server import ReplayLLMServer, Reply

Message = dict[str, Any]
TIMEOUT_S = 60
CHAPTER_TEXT = "Mara kept the lighthouse lamp burning through the night."


@pytest.fixture
def server(tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]) -> Any:
    """A server whose chat model is the scripted one and no agent model: the chat model
    plans and curates too."""
    home = tmp_path / "home"
    home.mkdir()
    settings = {"user_llm": {"base_url": llm.url, "model": "test-model", "max_retries": 0}}
    (home / "settings.json").write_text(json.dumps(settings))
    return start_server(home)


@pytest.fixture
def agent_server(tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]) -> Any:
    home = tmp_path / "agent-home"
    home.mkdir()
    endpoint = {"base_url": llm.url, "model": "test-model", "max_retries": 0}
    (home / "settings.json").write_text(json.dumps({"user_llm": endpoint, "agent_llm": endpoint}))
    return start_server(home)


@asynccontextmanager
async def connect(server: Any) -> AsyncIterator[ClientConnection]:
    async with websockets.connect(server.ws_url) as ws:
        hello = json.loads(await ws.recv())
        assert (hello["type"], hello["status"]) == ("status", "connected")
        yield ws


async def send(ws: ClientConnection, message: Message) -> None:
    await ws.send(json.dumps(message))


async def receive_until(ws: ClientConnection, done: Callable[[Message], bool]) -> list[Message]:
    seen: list[Message] = []
    while True:
        message = json.loads(await asyncio.wait_for(ws.recv(), timeout=TIMEOUT_S))
        seen.append(message)
        if done(message):
            return seen


def of_type(*types: str) -> Callable[[Message], bool]:
    return lambda m: m["type"] in types


def workflow(workflow_id: str = "story") -> dict[str, Any]:
    return {
        "id": workflow_id,
        "nodes": [
            {"id": "prompt", "type": "core:TextInput", "config": {"text": "Write chapter 1"}},
            {"id": "writer", "type": "llm:Chat"},
        ],
        "edges": [
            {"source": "prompt", "sourceSlot": "text", "target": "writer", "targetSlot": "prompt"}
        ],
    }


async def finished_run(ws: ClientConnection, llm: ReplayLLMServer) -> str:
    llm.script(Reply(text=CHAPTER_TEXT))
    await send(ws, {"type": "workflow:save", "workflow": workflow()})
    await receive_until(ws, of_type("workflow:saved"))
    await send(ws, {"type": "workflow:run", "workflowId": "story"})
    accepted = await receive_until(ws, of_type("workflow:run-accepted"))
    run_id = str(accepted[-1]["runId"])
    events = await receive_until(ws, of_type("workflow:completed", "workflow:error"))
    assert events[-1]["type"] == "workflow:completed", events[-1]
    return run_id


async def new_book(server: Any) -> str:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as api:
        response = await api.post("/api/writing/books", json={"title": "The Salt Road"})
        assert response.status_code == 201, response.text
        return str(response.json()["id"])


async def test_a_kept_output_is_stored_at_once_then_curated_with_progress_and_profiles(
    server: Any, llm: ReplayLLMServer
) -> None:
    book_id = await new_book(server)
    async with connect(server) as ws, connect(server) as other:
        run_id = await finished_run(ws, llm)
        # No agent model: the chat model summarises and extracts.
        summary = {"l0": "Mara keeps the lamp lit.", "l1": "Mara tends the lighthouse."}
        llm.script(Reply(text=json.dumps(summary)), Reply(text=json.dumps({"facts": []})))
        persist = {
            "type": "output:persist",
            "runId": run_id,
            "nodeId": "writer",
            "bookId": book_id,
            "chapter": 1,
        }
        await send(ws, persist)
        replies = await receive_until(ws, of_type("output:persisted", "status"))
        persisted = replies[-1]
        assert persisted["type"] == "output:persisted", persisted
        assert persisted | {"runId": run_id, "nodeId": "writer", "created": True} == persisted
        # Every tab sees the curation catch up.
        for socket in (ws, other):
            events = await receive_until(socket, of_type("profile:updated"))
            progress = [e for e in events if e["type"] == "curation:progress"]
            assert progress and all(e["outputId"] == persisted["outputId"] for e in progress)
            assert not [e for e in progress if e["state"] in ("failed", "skipped")], progress
            assert events[-1]["bookId"] == book_id
        curation = [r for r in llm.chat_requests if "Chapter 1" in json.dumps(r["messages"])]
        assert len(curation) == 2 and {r["model"] for r in curation} == {"test-model"}

        await send(ws, persist)
        again = await receive_until(ws, of_type("output:persisted", "status"))
        assert again[-1] | {"outputId": persisted["outputId"], "created": False} == again[-1]

    async with httpx.AsyncClient(base_url=server.url, timeout=30) as api:
        resource = await api.get(
            f"/api/writing/books/{book_id}/resource",
            params={"path": "/manuscript/arc-01/chapter-001"},
        )
        assert resource.json()["levels"]["L2"]["text"] == CHAPTER_TEXT


async def test_persisting_an_unknown_run_or_node_is_an_error_naming_it(
    server: Any, llm: ReplayLLMServer
) -> None:
    book_id = await new_book(server)
    async with connect(server) as ws:
        run_id = await finished_run(ws, llm)
        base = {"type": "output:persist", "bookId": book_id, "chapter": 1}
        await send(ws, {**base, "runId": "run-nope", "nodeId": "writer"})
        error = (await receive_until(ws, of_type("status")))[-1]
        assert error["status"] == "error" and "run-nope" in error["message"]
        await send(ws, {**base, "runId": run_id, "nodeId": "ghost"})
        error = (await receive_until(ws, of_type("status")))[-1]
        assert error["status"] == "error" and "ghost" in error["message"]


SUGGESTION = {
    "explanation": "Add a review step after the writer.",
    "nodes": [{"id": "review", "type": "core:HumanDecision"}],
    "edges": [
        {"source": "writer", "sourceSlot": "text", "target": "review", "targetSlot": "value"}
    ],
}


async def test_a_build_suggestion_changes_the_workflow_only_when_accepted(
    agent_server: Any, llm: ReplayLLMServer
) -> None:
    async with connect(agent_server) as ws:
        await send(ws, {"type": "workflow:save", "workflow": workflow()})
        await receive_until(ws, of_type("workflow:saved"))
        llm.script(Reply(text=json.dumps(SUGGESTION)), Reply(text=json.dumps(SUGGESTION)))
        request = {"type": "build:request", "intent": "review", "currentWorkflow": "story"}

        await send(ws, request)
        first = (await receive_until(ws, of_type("build:suggestion", "status")))[-1]
        assert first["type"] == "build:suggestion", first
        await send(ws, {"type": "build:reject", "suggestionId": first["suggestionId"]})
        rejected = (await receive_until(ws, of_type("build:rejected", "status")))[-1]
        assert rejected == {"type": "build:rejected", "suggestionId": first["suggestionId"]}
        await send(ws, {"type": "workflow:load", "workflowId": "story"})
        unchanged = (await receive_until(ws, of_type("workflow:data")))[-1]
        assert [n["id"] for n in unchanged["workflow"]["nodes"]] == ["prompt", "writer"]

        await send(ws, request)
        second = (await receive_until(ws, of_type("build:suggestion", "status")))[-1]
        assert second["type"] == "build:suggestion", second
        assert "review" in [n["id"] for n in second["nodes"]]
        await send(ws, {"type": "build:accept", "suggestionId": second["suggestionId"]})
        applied = (await receive_until(ws, of_type("build:applied", "status")))[-1]
        assert applied["type"] == "build:applied", applied
        await send(ws, {"type": "workflow:load", "workflowId": applied["workflowId"]})
        changed = (await receive_until(ws, of_type("workflow:data")))[-1]
        assert "review" in [n["id"] for n in changed["workflow"]["nodes"]]
