"""A chat turn on a real model through text completion: the embedded SmolLM2-135M (a
ChatML model) on llama.cpp's own ``/completion``, the user's connection set to
``api: llamacpp`` and nothing else. The pipeline's Text Prompt node lays the turn out in
ChatML, the reply streams back and completes, and the inspector holds the exact text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.server.conftest import LiveServer, start_live_server
from tests.server.test_embedded_model import finished, running_model, until


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    home = tmp_path_factory.mktemp("text-completion") / "home"
    home.mkdir(parents=True)
    user_llm = {"api": "llamacpp", "parameters": {"temperature": 0, "seed": 5, "max_tokens": 24}}
    (home / "settings.json").write_text(json.dumps({"user_llm": user_llm}))
    live = start_live_server(home, local_models=True)
    try:
        yield live
    finally:
        live.server.should_exit = True


def test_a_chatml_text_completion_turn_answers_and_the_inspector_shows_the_text(
    served: LiveServer,
) -> None:
    with httpx.Client(base_url=served.url, timeout=60) as api:
        until(lambda: running_model(api), "the embedded model")
        card = {"name": "Maren", "description": "Maren keeps a lighthouse.", "first_mes": "Hi."}
        created = api.post(
            "/api/chats/import", files={"file": ("maren.json", json.dumps(card).encode())}
        )
        assert created.status_code == 201, created.text
        chat_id = created.json()["conversation"]["id"]
        sent = api.post(f"/api/chats/{chat_id}/messages", json={"text": "Is the lamp lit?"})
        assert sent.status_code == 202, sent.text
        reply = finished(api, chat_id)["messages"][-1]
        inspector = api.get(f"/api/chats/{chat_id}/messages/{reply['id']}/prompt")
    assert reply["status"] == "complete", reply.get("error")
    assert reply["content"].strip()
    assert "<|im_start|>" not in reply["content"] and "<|im_end|>" not in reply["content"]
    assert inspector.status_code == 200, inspector.text
    text_prompt = inspector.json()["text_prompt"]
    text = text_prompt["text"]
    # ChatML: the story string as the system turn, the greeting, the format guide at
    # its depth, the user's message, and the assistant's turn left open.
    assert text.startswith(
        "<|im_start|>system\nWrite Maren's next reply in a fictional chat between Maren "
        "and User.\nMaren keeps a lighthouse.<|im_end|>\n<|im_start|>assistant\nHi.<|im_end|>"
    )
    assert text.endswith("<|im_start|>user\nIs the lamp lit?<|im_end|>\n<|im_start|>assistant\n")
    assert "[How to write your answer]" in text
    assert {"<|im_end|>", "<|im_start|>user"} <= set(text_prompt["stop"])
