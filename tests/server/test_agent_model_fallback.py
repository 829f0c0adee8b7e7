"""With no agent model set up, whatever uses the agent model by default (an agent profile,
the writing studio) runs on the user's chat model, and the settings say so; once an agent
model is set up, it answers instead. A real server; the models are replay servers."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.tools.agent_support import agent_workflow


@pytest.fixture
def chat_llm() -> Iterator[ReplayLLMServer]:
    with ReplayLLMServer(models=["chat-model"]) as server:
        yield server


@pytest.fixture
def agent_llm() -> Iterator[ReplayLLMServer]:
    with ReplayLLMServer(models=["agent-model"]) as server:
        yield server


@pytest.fixture
def api(
    tmp_path: Path, chat_llm: ReplayLLMServer, start_server: Callable[..., Any]
) -> Iterator[httpx.Client]:
    """A day-one user's server: a chat model, no agent model."""
    home = tmp_path / "home"
    home.mkdir()
    user = {"base_url": chat_llm.url, "model": "chat-model", "max_retries": 0}
    (home / "settings.json").write_text(json.dumps({"user_llm": user}))
    live = start_server(home)
    with httpx.Client(base_url=live.url, timeout=30) as client:
        yield client


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


def run_agent(api: httpx.Client, prompt: str) -> dict[str, Any]:
    """Run the ``narrator`` profile (model_role left at its default, the agent's) in a
    workflow through the REST API, to its end."""
    ok(api.put("/api/workflows/ask-agent", json=agent_workflow("narrator")))
    started = ok(
        api.post("/api/workflows/ask-agent/runs", json={"inputs": {"prompt": prompt}}), 202
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        run: dict[str, Any] = ok(api.get(f"/api/workflow-runs/{started['runId']}"))
        if run["status"] != "running":
            return run
        time.sleep(0.05)
    raise AssertionError("the agent run did not finish")


def test_an_agent_profile_with_no_agent_model_is_answered_by_the_chat_model(
    api: httpx.Client, chat_llm: ReplayLLMServer, agent_llm: ReplayLLMServer
) -> None:
    settings = ok(api.get("/api/settings"))
    assert settings["agent_uses_user_model"] is True
    profile = {"id": "narrator", "name": "Narrator", "prompt": "You narrate.", "protocol": "tam"}
    assert ok(api.post("/api/agents", json=profile), 201)["model_role"] == "agent"

    chat_llm.script(Reply(text="The tide turns."))
    run = run_agent(api, "What happens at dawn?")
    assert run["status"] == "completed", run
    asked = chat_llm.chat_requests[-1]
    assert asked["model"] == "chat-model"
    assert asked["messages"][0]["content"].startswith("You narrate.")
    assert asked["messages"][-1]["content"] == "What happens at dawn?"

    # Once an agent model is set up, it answers the profile, and the settings say so.
    agent = {"base_url": agent_llm.url, "model": "agent-model", "max_retries": 0}
    saved = ok(api.put("/api/settings", json={"agent_llm": agent}))
    assert saved["agent_uses_user_model"] is False
    before = len(chat_llm.chat_requests)
    agent_llm.script(Reply(text="The gulls cry."))
    assert run_agent(api, "And at noon?")["status"] == "completed"
    assert [r["model"] for r in agent_llm.chat_requests] == ["agent-model"]
    assert len(chat_llm.chat_requests) == before


def test_the_writing_studio_says_it_plans_and_curates_on_the_chat_model(
    api: httpx.Client,
) -> None:
    model = ok(api.get("/api/writing/agent-model"))
    assert model == {"source": "user", "model": "chat-model", "ready": True}
