"""A newcomer's server with no model set up: the embedded SmolLM2-135M (real llama.cpp,
2,048-token context) answers at once, Settings still show what the user set, and a chat
longer than the context is trimmed to fit instead of being refused.

Real model, real server, real HTTP: temperature 0 and a fixed seed keep it repeatable;
the assertions are about what storyloom does with the answer, not what the model says.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import LiveServer, start_live_server

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sillytavern"
Json = dict[str, Any]
WAIT_S = 240.0
"""A reply on one thread of a loaded two-core machine: slow, but it comes."""


def newcomer_home(home: Path) -> Path:
    """A data directory where the user set nothing but how replies are sampled."""
    home.mkdir(parents=True)
    parameters = {"temperature": 0, "seed": 11, "max_tokens": 24}
    (home / "settings.json").write_text(json.dumps({"user_llm": {"parameters": parameters}}))
    return home


def until(check: Callable[[], Any], what: str) -> Any:
    """Poll ``check`` until it returns something truthy (what the test waits for)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    home = newcomer_home(tmp_path_factory.mktemp("embedded") / "home")
    live = start_live_server(home, local_models=True)
    try:
        yield live
    finally:
        live.server.should_exit = True


@pytest.fixture
def api(served: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served.url, timeout=60) as client:
        yield client


def running_model(api: httpx.Client) -> Json | None:
    models = api.get("/api/health").json()["local_models"]
    assert not [m["problem"] for m in models if m["problem"]]
    return next((m for m in models if m["running"]), None)


def finished(api: httpx.Client, chat_id: str) -> Json:
    view: Json = until(
        lambda: (v := api.get(f"/api/chats/{chat_id}").json()) and not v["running"] and v,
        "the reply",
    )
    return view


def test_with_nothing_set_up_the_embedded_model_answers_the_first_chat(
    api: httpx.Client,
) -> None:
    model = until(lambda: running_model(api), "the embedded model")
    assert model["embedded"] is True and model["context_size"] == 2048
    health = api.get("/api/health").json()["models"]["user_llm"]
    assert health["configured"] is True and health["base_url"] == model["url"]
    # Settings show what the user set (nothing), never the demo model's address: saving
    # the form must not pin storyloom to a port that changes each start.
    assert api.get("/api/settings").json()["user_llm"]["base_url"] == ""

    card = (FIXTURES / "card_maren_v2_v3.png").read_bytes()
    imported = api.post("/api/chats/import", files={"file": ("maren.png", card)})
    assert imported.status_code == 201, imported.text
    chat_id = imported.json()["conversation"]["id"]
    sent = api.post(f"/api/chats/{chat_id}/messages", json={"text": "Where am I?"})
    assert sent.status_code == 202, sent.text
    view = finished(api, chat_id)
    reply = view["messages"][-1]
    assert reply["role"] == "assistant"
    assert reply["status"] == "complete", reply.get("error")
    assert reply["content"].strip()


def long_chat() -> bytes:
    """A SillyTavern chat with Maren far longer than 2,048 tokens: the real log's
    messages, told over and over."""
    lines = (FIXTURES / "chat_maren_legacy_header.jsonl").read_text(encoding="utf-8").splitlines()
    header, messages = lines[0], lines[1:]
    return ("\n".join([header, *(messages * 40)]) + "\n").encode()


def test_a_chat_longer_than_the_servers_context_is_trimmed_not_refused(
    api: httpx.Client,
) -> None:
    until(lambda: running_model(api), "the embedded model")
    card = (FIXTURES / "card_maren_v2_v3.png").read_bytes()
    brought = api.post("/api/chats/import", files={"file": ("maren.png", card)})
    # An earlier test on this server may have brought Maren already: the same card is
    # then found, not copied.
    assert brought.status_code == 201 or (
        brought.status_code == 409 and brought.json()["conflict"]["sameness"] == "identical"
    ), brought.text
    imported = api.post("/api/chats/import", files={"file": ("maren.jsonl", long_chat())})
    assert imported.status_code == 201, imported.text
    assert imported.json()["messages"] > 100
    chat_id = imported.json()["conversation"]["id"]
    sent = api.post(f"/api/chats/{chat_id}/messages", json={"text": "Tell me about the storm."})
    assert sent.status_code == 202, sent.text
    reply = finished(api, chat_id)["messages"][-1]
    assert reply["status"] == "complete", reply.get("error")
    assert "context" not in (reply.get("error") or "")
