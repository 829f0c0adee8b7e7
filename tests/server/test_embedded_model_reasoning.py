"""A reasoning model's ``<think>…</think>`` reaches the thought box, never the reply, on
a real model.

SmolLM2-135M does not think out loud by itself, so llama.cpp is told to: a GBNF grammar
(passed through the user model's parameters, as a user of llama.cpp's server may) makes
every answer open with a ``<think>`` block, as DeepSeek-R1 and Qwen3 write it in the
content stream. The turn goes through the REST API like any other; what is checked is
where storyloom puts the two parts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.server.conftest import LiveServer, start_live_server
from tests.server.test_embedded_model import finished, running_model, until

THINKING_GRAMMAR = r"""root ::= "<think>" thought "</think>" reply
thought ::= [a-z ]{8,40}
reply ::= [A-Z] [a-z ,]{8,60} "."
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    home = tmp_path_factory.mktemp("reasoning") / "home"
    home.mkdir(parents=True)
    parameters = {"temperature": 0, "seed": 7, "max_tokens": 60, "grammar": THINKING_GRAMMAR}
    (home / "settings.json").write_text(json.dumps({"user_llm": {"parameters": parameters}}))
    live = start_live_server(home, local_models=True)
    try:
        yield live
    finally:
        live.server.should_exit = True


def test_a_think_block_in_the_content_goes_to_the_thought_not_the_reply(
    served: LiveServer,
) -> None:
    with httpx.Client(base_url=served.url, timeout=60) as api:
        until(lambda: running_model(api), "the embedded model")
        card = {"name": "Maren", "description": "Maren keeps a lighthouse.", "first_mes": "Hi."}
        created = api.post(
            "/api/chats/import",
            files={"file": ("maren.json", json.dumps(card).encode())},
        )
        assert created.status_code == 201, created.text
        chat_id = created.json()["conversation"]["id"]
        sent = api.post(f"/api/chats/{chat_id}/messages", json={"text": "Are you tired?"})
        assert sent.status_code == 202, sent.text
        reply = finished(api, chat_id)["messages"][-1]
    assert reply["status"] == "complete", reply.get("error")
    assert "<think>" not in reply["content"] and "</think>" not in reply["content"]
    assert reply["content"].strip()[:1].isupper()
    thought = reply.get("thought") or ""
    assert thought.strip() and "<think>" not in thought
