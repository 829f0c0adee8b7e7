"""Workflow runs over the WebSocket of a real server: streaming to every tab, re-attaching
after a reload, cancelling, failing nodes and human decisions."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
import websockets
from websockets.asyncio.client import ClientConnection

from storyloom.core.plugin_markers import hookimpl
from storyloom.plugins import node_registry
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.workflow.node_type import NodeContext, NodeExpansion, NodeType, Slot
from storyloom.workflow.slot_types import STRING

Message = dict[str, Any]
TIMEOUT_S = 60


class Boom(NodeType):
    """Raises whatever it is given: a node with a bug."""

    type: ClassVar[str] = "test:Boom"
    display_name: ClassVar[str] = "Boom"
    idempotent: ClassVar[bool] = False
    inputs: ClassVar[tuple[Slot, ...]] = (Slot(name="text", type=STRING),)
    outputs: ClassVar[tuple[Slot, ...]] = (Slot(name="text", type=STRING),)

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: dict[str, Any]
    ) -> dict[str, Any] | NodeExpansion:
        raise RuntimeError(f"kaboom on {inputs['text']!r}")


class TestNodes:
    @hookimpl
    def storyloom_node_types(self) -> list[type[NodeType]]:
        return [Boom]


@pytest.fixture
def server(tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]) -> Any:
    home = tmp_path / "home"
    home.mkdir()
    settings = {"user_llm": {"base_url": llm.url, "model": "test-model"}}
    (home / "settings.json").write_text(json.dumps(settings))
    registry = node_registry([TestNodes()], entry_points=False)
    return start_server(home, node_registry=registry)


@pytest.fixture
async def api(server: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        yield client


@asynccontextmanager
async def connect(server: Any) -> AsyncIterator[ClientConnection]:
    async with websockets.connect(server.ws_url) as ws:
        hello = json.loads(await ws.recv())
        assert (hello["type"], hello["status"]) == ("status", "connected")
        yield ws


async def send(ws: ClientConnection, message: Message) -> None:
    await ws.send(json.dumps(message))


async def receive_until(
    ws: ClientConnection, done: Callable[[Message], bool], run_id: str | None = None
) -> list[Message]:
    """Messages up to and including the first that ``done`` accepts (only ``run_id``'s
    events and replies when given)."""
    seen: list[Message] = []
    while True:
        message = json.loads(await asyncio.wait_for(ws.recv(), timeout=TIMEOUT_S))
        if run_id is not None and message.get("runId", run_id) != run_id:
            continue
        seen.append(message)
        if done(message):
            return seen


def of_type(*types: str) -> Callable[[Message], bool]:
    return lambda m: m["type"] in types


def run_end(message: Message) -> bool:
    return message["type"] in ("workflow:completed", "workflow:error")


def chat_workflow(workflow_id: str = "story", prompt: str = "Begin") -> dict[str, Any]:
    return {
        "id": workflow_id,
        "nodes": [
            {"id": "prompt", "type": "core:TextInput", "config": {"text": prompt}},
            {"id": "writer", "type": "llm:Chat"},
        ],
        "edges": [
            {"source": "prompt", "sourceSlot": "text", "target": "writer", "targetSlot": "prompt"}
        ],
    }


def reviewed_workflow(workflow_id: str = "reviewed") -> dict[str, Any]:
    workflow = chat_workflow(workflow_id)
    workflow["nodes"].append({"id": "review", "type": "core:HumanDecision"})
    workflow["edges"].append(
        {"source": "writer", "sourceSlot": "text", "target": "review", "targetSlot": "value"}
    )
    return workflow


async def start(ws: ClientConnection, workflow_id: str, **fields: Any) -> str:
    await send(ws, {"type": "workflow:run", "workflowId": workflow_id, **fields})
    accepted = await receive_until(ws, of_type("workflow:run-accepted", "workflow:invalid"))
    assert accepted[-1]["type"] == "workflow:run-accepted", accepted[-1]
    return str(accepted[-1]["runId"])


async def test_a_run_streams_to_every_open_socket_and_completes(
    server: Any, llm: ReplayLLMServer
) -> None:
    llm.script(Reply(text="The lighthouse keeper woke", chunk_delay_s=0.02))
    async with connect(server) as first, connect(server) as second:
        await send(first, {"type": "workflow:save", "workflow": chat_workflow()})
        saved = await receive_until(first, of_type("workflow:saved"))
        assert saved[-1] == {"type": "workflow:saved", "workflowId": "story", "problems": []}

        run_id = await start(first, "story")
        for ws in (first, second):
            events = await receive_until(ws, run_end, run_id)
            assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
            chunks = [e["chunk"] for e in events if e["type"] == "node:streaming"]
            assert len(chunks) > 1
            assert "".join(chunks) == "The lighthouse keeper woke"
            assert all(e["nodeId"] == "writer" for e in events if e["type"] == "node:streaming")
            assert events[-1]["type"] == "workflow:completed"


async def test_workflows_are_listed_loaded_and_refused_with_every_problem_over_the_socket(
    server: Any,
) -> None:
    tangled = {
        "id": "tangle",
        "nodes": [
            {"id": "a", "type": "core:TextTemplate"},
            {"id": "b", "type": "core:TextTemplate"},
            {"id": "words", "type": "core:TextInput"},
            {"id": "fill", "type": "core:TextTemplate", "config": {"template": "x"}},
        ],
        "edges": [
            {"source": "a", "sourceSlot": "text", "target": "b", "targetSlot": "template"},
            {"source": "b", "sourceSlot": "text", "target": "a", "targetSlot": "template"},
            {"source": "ghost", "sourceSlot": "text", "target": "fill", "targetSlot": "template"},
            {"source": "words", "sourceSlot": "text", "target": "fill", "targetSlot": "variables"},
        ],
        "x-note": "kept",
    }
    async with connect(server) as ws:
        await send(ws, {"type": "workflow:save", "workflow": tangled})
        saved = (await receive_until(ws, of_type("workflow:saved")))[-1]
        assert {"cycle", "dangling-edge", "type-mismatch"} <= {p["code"] for p in saved["problems"]}

        await send(ws, {"type": "workflow:list"})
        listing = (await receive_until(ws, of_type("workflow:list")))[-1]
        assert [w["id"] for w in listing["workflows"]] == ["chat-default", "tangle"]
        assert [w["builtin"] for w in listing["workflows"]] == [True, False]

        await send(ws, {"type": "workflow:load", "workflowId": "tangle"})
        data = (await receive_until(ws, of_type("workflow:data")))[-1]
        assert data["workflow"]["x-note"] == "kept"
        assert data["problems"] == saved["problems"]

        await send(ws, {"type": "workflow:run", "workflowId": "tangle"})
        refused = (await receive_until(ws, of_type("workflow:invalid", "workflow:started")))[-1]
        assert refused["type"] == "workflow:invalid"
        assert refused["problems"] == saved["problems"]

        await send(ws, {"type": "workflow:load", "workflowId": "nowhere"})
        missing = (await receive_until(ws, of_type("status")))[-1]
        assert missing["status"] == "error"
        assert "nowhere" in missing["message"]


async def test_a_run_never_takes_an_api_key_over_the_socket(
    server: Any, api: httpx.AsyncClient
) -> None:
    async with connect(server) as ws:
        await send(ws, {"type": "workflow:save", "workflow": chat_workflow()})
        await receive_until(ws, of_type("workflow:saved"))
        await send(
            ws,
            {"type": "workflow:run", "workflowId": "story", "apiConfig": {"apiKey": "sk-tab"}},
        )
        refused = (await receive_until(ws, of_type("status", "workflow:run-accepted")))[-1]
        assert refused["status"] == "error"
        assert "apiConfig" in refused["message"]
    assert (await api.get("/api/workflow-runs")).json() == []


async def test_attach_after_a_reload_replays_missed_events_in_order_then_goes_on_live(
    server: Any, llm: ReplayLLMServer
) -> None:
    llm.script(Reply(text="A storm rolled in"))
    async with connect(server) as tab:
        await send(tab, {"type": "workflow:save", "workflow": reviewed_workflow()})
        await receive_until(tab, of_type("workflow:saved"))
        run_id = await start(tab, "reviewed")
        before = await receive_until(tab, of_type("node:needs-human"), run_id)
        assert before[-1]["nodeId"] == "review"
        assert before[-1]["outputPreview"] == "A storm rolled in"
    # The page reloads: a new socket knows the run and the last event it had shown.
    seen = before[2]["seq"]
    async with connect(server) as reloaded:
        await send(reloaded, {"type": "workflow:attach", "runId": run_id, "afterSeq": seen})
        replayed = await receive_until(reloaded, of_type("node:needs-human"), run_id)
        assert replayed == before[3:]
        await send(reloaded, {"type": "human:decision", "nodeId": "review", "decision": "approve"})
        live = await receive_until(reloaded, run_end, run_id)
    events = [*replayed, *live]
    assert [e["seq"] for e in events] == list(range(seen + 1, seen + 1 + len(events)))
    review = next(e for e in live if e["type"] == "node:completed")
    assert review["outputs"]["value"] == "A storm rolled in"
    assert live[-1]["type"] == "workflow:completed"


async def test_a_tab_opened_mid_run_gets_its_events_only_once_it_attaches(
    server: Any, llm: ReplayLLMServer, api: httpx.AsyncClient
) -> None:
    llm.script(Reply(text="Waiting"))
    async with connect(server) as first:
        await send(first, {"type": "workflow:save", "workflow": reviewed_workflow()})
        await receive_until(first, of_type("workflow:saved"))
        run_id = await start(first, "reviewed")
        await receive_until(first, of_type("node:needs-human"), run_id)
        async with connect(server) as late:
            runs = (await api.get("/api/workflow-runs")).json()
            assert [(r["runId"], r["status"], r["waitingFor"]) for r in runs] == [
                (run_id, "running", ["review"])
            ]
            await send(late, {"type": "workflow:attach", "runId": run_id})
            everything = await receive_until(late, of_type("node:needs-human"), run_id)
            assert everything[0]["type"] == "workflow:started"
            decided = await api.post(
                f"/api/workflow-runs/{run_id}/decisions",
                json={"nodeId": "review", "decision": "approve"},
            )
            assert decided.json() == {"accepted": True}
            rest = await receive_until(late, run_end, run_id)
        events = [*everything, *rest]
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        await receive_until(first, run_end, run_id)


async def test_a_human_decision_over_rest_resumes_the_run_with_the_edit(
    server: Any, llm: ReplayLLMServer, api: httpx.AsyncClient
) -> None:
    llm.script(Reply(text="Draft text"))
    async with connect(server) as ws:
        await send(ws, {"type": "workflow:save", "workflow": reviewed_workflow()})
        await receive_until(ws, of_type("workflow:saved"))
        run_id = await start(ws, "reviewed")
        asked = (await receive_until(ws, of_type("node:needs-human"), run_id))[-1]
        assert asked["options"] == ["approve", "retry", "edit"]
        decided = await api.post(
            f"/api/workflow-runs/{run_id}/decisions",
            json={"nodeId": "review", "decision": "edit", "editedOutput": "Better text"},
        )
        assert decided.status_code == 200, decided.text
        events = await receive_until(ws, run_end, run_id)
    review = next(e for e in events if e["type"] == "node:completed" and e["nodeId"] == "review")
    assert review["outputs"]["value"] == "Better text"
    assert events[-1]["type"] == "workflow:completed"
    again = await api.post(
        f"/api/workflow-runs/{run_id}/decisions", json={"nodeId": "review", "decision": "approve"}
    )
    assert again.status_code == 409


async def test_cancel_over_rest_and_over_the_socket_ends_the_run_cancelled(
    server: Any, llm: ReplayLLMServer, api: httpx.AsyncClient
) -> None:
    # The model sends a few words and then hangs: only a cancel ends these runs.
    llm.script(*[Reply(text="It was a dark night", hold_after_chunks=2)] * 3)
    async with connect(server) as ws:
        await send(ws, {"type": "workflow:save", "workflow": chat_workflow()})
        await receive_until(ws, of_type("workflow:saved"))

        by_rest = await start(ws, "story")
        await receive_until(ws, of_type("node:streaming"), by_rest)
        cancelled = await api.post(f"/api/workflow-runs/{by_rest}/cancel")
        assert (cancelled.status_code, cancelled.json()) == (202, {"runId": by_rest})
        end = (await receive_until(ws, run_end, by_rest))[-1]
        assert (end["type"], end["cancelled"]) == ("workflow:error", True)

        by_socket = await start(ws, "story")
        await receive_until(ws, of_type("node:streaming"), by_socket)
        await send(ws, {"type": "workflow:cancel", "runId": by_socket})
        events = await receive_until(ws, run_end, by_socket)
        assert (events[-1]["type"], events[-1]["cancelled"]) == ("workflow:error", True)
        stopped = next(e for e in events if e["type"] == "node:cancelled")
        assert stopped["nodeId"] == "writer"

        everything = await start(ws, "story")
        await receive_until(ws, of_type("node:streaming"), everything)
        await send(ws, {"type": "workflow:cancel"})
        end = (await receive_until(ws, run_end, everything))[-1]
        assert end["cancelled"] is True

    statuses = {r["runId"]: r["status"] for r in (await api.get("/api/workflow-runs")).json()}
    assert statuses == {by_rest: "cancelled", by_socket: "cancelled", everything: "cancelled"}


async def test_a_node_that_raises_fails_the_run_and_the_server_keeps_serving(
    server: Any, api: httpx.AsyncClient
) -> None:
    workflow: dict[str, Any] = {
        "id": "faulty",
        "nodes": [
            {"id": "words", "type": "core:TextInput", "config": {"text": "hello"}},
            {"id": "bug", "type": "test:Boom"},
            {"id": "after", "type": "core:TextTemplate", "config": {"template": "x"}},
        ],
        "edges": [
            {"source": "words", "sourceSlot": "text", "target": "bug", "targetSlot": "text"},
            {"source": "bug", "sourceSlot": "text", "target": "after", "targetSlot": "template"},
        ],
    }
    async with connect(server) as ws:
        await send(ws, {"type": "workflow:save", "workflow": workflow})
        await receive_until(ws, of_type("workflow:saved"))
        run_id = await start(ws, "faulty")
        events = await receive_until(ws, run_end, run_id)
        failed = next(e for e in events if e["type"] == "node:error")
        assert failed["nodeId"] == "bug"
        assert "kaboom on 'hello'" in failed["error"]
        assert failed["skipped"] == ["after"]
        end = events[-1]
        assert (end["type"], end["nodeId"], end["cancelled"]) == ("workflow:error", "bug", False)
        assert "kaboom" in end["error"]

        assert (await api.get("/api/health")).json()["status"] == "ok"
        workflow["nodes"][1] = {"id": "bug", "type": "core:TextTemplate"}
        workflow["edges"][0]["targetSlot"] = "template"
        await send(ws, {"type": "workflow:save", "workflow": workflow})
        await receive_until(ws, of_type("workflow:saved"))
        fixed = await start(ws, "faulty")
        assert (await receive_until(ws, run_end, fixed))[-1]["type"] == "workflow:completed"
    runs = (await api.get("/api/workflow-runs")).json()
    assert [(r["runId"], r["status"]) for r in runs] == [(fixed, "completed"), (run_id, "failed")]
