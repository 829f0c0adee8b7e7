"""A newcomer's first chat, as `make run` gives it: `storyloom serve` on a data directory
where nothing is set up, a real browser, and the embedded SmolLM2-135M on llama.cpp
answering. The header says it is the tiny demo model; the reply streams in and completes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

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
