"""Faults a chat must survive without losing a word: the model failing before or during a
reply, a stop mid-stream, the server killed with ``kill -9`` mid-stream, and two tabs
writing to one conversation."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from storyloom.plugins import node_registry
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.workflow.node_registry import NodeRegistry
from tests.server.conftest import chat_home

TIMEOUT_S = 30.0
"""Only a guard against a hanging test; nothing depends on how long anything takes."""
REPO = Path(__file__).resolve().parents[2]
CARD = {"name": "Seraphina", "first_mes": "Welcome."}
Json = dict[str, Any]


def prepare_home(home: Path, llm: ReplayLLMServer) -> None:
    chat_home(home, llm, {"sera": CARD}, agent=False, api_key=None)


def chat_registry() -> NodeRegistry:
    return node_registry(entry_points=False)


async def eventually(check: Callable[[], Any]) -> Any:
    """Poll ``check`` (sync or async) until it returns something truthy."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("the condition did not come true")
        await asyncio.sleep(0.02)


@dataclass
class Client:
    """A browser tab's view of the API."""

    http: httpx.AsyncClient

    async def chat(self, conversation_id: str) -> Json:
        response = await self.http.get(f"/api/chats/{conversation_id}")
        assert response.status_code == 200, response.text
        view: Json = response.json()
        return view

    async def new_chat(self) -> str:
        response = await self.http.post("/api/chats", json={"character_id": "sera"})
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    async def send(self, conversation_id: str, text: str, version: int | None = None) -> Json:
        response = await self.http.post(
            f"/api/chats/{conversation_id}/messages",
            json={"text": text, "expected_version": version},
        )
        assert response.status_code == 202, response.text
        accepted: Json = response.json()
        return accepted

    async def finished(self, conversation_id: str) -> Json:
        async def done() -> Json | None:
            view = await self.chat(conversation_id)
            return None if view["running"] else view

        view: Json = await eventually(done)
        return view


@pytest.fixture
async def tab(
    tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]
) -> AsyncIterator[Client]:
    home = tmp_path / "home"
    prepare_home(home, llm)
    server = start_server(home, node_registry=chat_registry())
    async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT_S) as http:
        yield Client(http)


async def test_the_model_failing_before_any_text_keeps_the_message_and_retry_adds_a_sibling(
    tab: Client, llm: ReplayLLMServer
) -> None:
    cid = await tab.new_chat()
    llm.script(Reply(status=500, error_message="upstream exploded"))
    accepted = await tab.send(cid, "Are you there?")
    view = await tab.finished(cid)
    user, failed = view["messages"][-2:]
    assert (user["id"], user["content"]) == (accepted["user_message"]["id"], "Are you there?")
    assert failed["status"] == "error" and failed["content"] == ""
    assert "upstream exploded" in failed["error"]
    llm.script(Reply(text="Here I am."))
    retried = await tab.http.post(
        f"/api/chats/{cid}/generate",
        json={"kind": "swipe", "message_id": failed["id"],
              "expected_version": view["conversation"]["version"]},
    )  # fmt: skip
    assert retried.status_code == 202, retried.text
    after = await tab.finished(cid)
    reply = after["messages"][-1]
    assert reply["content"] == "Here I am." and reply["status"] == "complete"
    assert reply["parent_id"] == user["id"] and reply["sibling_count"] == 2
    swiped = await tab.http.post(
        f"/api/chats/{cid}/swipe",
        json={"message_id": reply["id"], "to_index": 0},
    )
    assert swiped.status_code == 200
    assert (await tab.chat(cid))["messages"][-1]["id"] == failed["id"]  # kept


async def test_a_stream_cut_midway_keeps_the_text_and_marks_it(
    tab: Client, llm: ReplayLLMServer
) -> None:
    cid = await tab.new_chat()
    llm.script(Reply(text="The bridge creaked under the weight", cut_after_chunks=3))
    await tab.send(cid, "Cross the bridge")
    reply = (await tab.finished(cid))["messages"][-1]
    assert reply["status"] == "partial"
    assert reply["content"] == "The bridge creaked"
    assert reply["error"]


async def test_stop_mid_stream_keeps_the_partial_reply(tab: Client, llm: ReplayLLMServer) -> None:
    cid = await tab.new_chat()
    llm.script(Reply(text="Slowly the fog lifted from the valley", hold_after_chunks=4))
    accepted = await tab.send(cid, "Look around")
    reply_id = accepted["assistant_message"]["id"]

    async def flushed() -> bool:
        view = await tab.chat(cid)
        return bool(view["messages"][-1]["content"] == "Slowly the fog lifted")

    await eventually(flushed)
    stopped = await tab.http.post(f"/api/chats/{cid}/stop")
    assert stopped.status_code == 200
    reply = (await tab.finished(cid))["messages"][-1]
    assert reply["id"] == reply_id
    assert (reply["status"], reply["error"]) == ("partial", "stopped")
    assert reply["content"] == "Slowly the fog lifted"


async def test_two_tabs_do_not_overwrite_each_other(tab: Client, llm: ReplayLLMServer) -> None:
    cid = await tab.new_chat()
    async with httpx.AsyncClient(base_url=str(tab.http.base_url), timeout=TIMEOUT_S) as http:
        other = Client(http)
        seen_by_first = (await tab.chat(cid))["conversation"]["version"]
        seen_by_second = (await other.chat(cid))["conversation"]["version"]
        assert seen_by_first == seen_by_second
        llm.script(Reply(text="Hello, first tab."))
        await tab.send(cid, "From the first tab", seen_by_first)
        refused = await other.http.post(
            f"/api/chats/{cid}/messages",
            json={"text": "From the second tab", "expected_version": seen_by_second},
        )
        assert refused.status_code == 409
        current = refused.json()["version"]
        assert current > seen_by_second
        reloaded = await other.finished(cid)
        contents = [m["content"] for m in reloaded["messages"]]
        assert contents[-2:] == ["From the first tab", "Hello, first tab."]
        assert "From the second tab" not in contents
        llm.script(Reply(text="Hello, second tab."))
        await other.send(cid, "From the second tab", reloaded["conversation"]["version"])
        final = await tab.finished(cid)
        assert [m["content"] for m in final["messages"]][-4:] == [
            "From the first tab", "Hello, first tab.", "From the second tab", "Hello, second tab.",
        ]  # fmt: skip


# -- kill -9 ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Process:
    url: str
    process: subprocess.Popen[bytes]
    log: Path


def serve(home: Path, log: Path) -> Process:
    """``storyloom serve`` in its own process, as a user starts it."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STORYLOOM_")}
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "storyloom", "serve", "--host", "127.0.0.1",
             "--port", str(port), "--home", str(home), "--no-token"],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            pytest.fail(f"storyloom serve exited with {process.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{url}/api/health", timeout=5).status_code == 200:
                return Process(url, process, log)
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"storyloom serve did not start:\n{log.read_text()}")
        time.sleep(0.1)


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for each in started:
        if each.process.poll() is None:
            each.process.kill()
        each.process.wait(timeout=10)


async def test_kill_9_mid_stream_keeps_the_users_message_and_the_flushed_text(
    tmp_path: Path, llm: ReplayLLMServer, processes: list[Process]
) -> None:
    home = tmp_path / "home"
    prepare_home(home, llm)
    log = tmp_path / "server.log"
    first = serve(home, log)
    processes.append(first)
    async with httpx.AsyncClient(base_url=first.url, timeout=TIMEOUT_S) as http:
        tab = Client(http)
        cid = await tab.new_chat()
        llm.script(Reply(text="The candle flickered and went out", hold_after_chunks=3))
        accepted = await tab.send(cid, "Light the candle")

        async def flushed() -> bool:
            reply = (await tab.chat(cid))["messages"][-1]
            return bool(reply["content"] == "The candle flickered")

        await eventually(flushed)
    os.kill(first.process.pid, signal.SIGKILL)
    first.process.wait(timeout=10)
    second = serve(home, log)
    processes.append(second)
    async with httpx.AsyncClient(base_url=second.url, timeout=TIMEOUT_S) as http:
        view = await Client(http).chat(cid)
    user, reply = view["messages"][-2:]
    assert (user["id"], user["content"]) == (accepted["user_message"]["id"], "Light the candle")
    assert reply["id"] == accepted["assistant_message"]["id"]
    assert reply["content"] == "The candle flickered"
    assert reply["status"] == "partial" and "interrupted" in reply["error"]
    assert view["running"] is False
