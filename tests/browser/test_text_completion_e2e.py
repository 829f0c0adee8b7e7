"""A KoboldCpp / llama.cpp user's setup, as they make it in the browser: a text-completion
connection, their own SillyTavern instruct template imported from its file and picked in
Settings, a chat that answers, and the prompt inspector showing the exact text the server
got, piece by piece.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from storyloom.testing.replay_server import ReplayLLMServer
from tests.browser import conftest
from tests.browser.conftest import messages, start_chat, tid

pytestmark = pytest.mark.browser

MAREN = {
    "name": "Maren",
    "description": "Maren keeps the Lanternfall lighthouse.",
    "first_mes": "*Maren sets a kettle on the stove.* You're awake.",
}
# An instruct template as SillyTavern writes it (Advanced Formatting → Export), with
# keys storyloom does not use, under a name of the user's.
MY_TEMPLATE = {
    "name": "Lighthouse Alpaca",
    "input_sequence": "### Instruction:",
    "output_sequence": "### Response:",
    "system_sequence": "",
    "stop_sequence": "",
    "wrap": True,
    "macro": True,
    "names_behavior": "always",
    "activation_regex": "",
    "system_sequence_prefix": "",
    "system_sequence_suffix": "",
    "first_output_sequence": "",
    "skip_examples": False,
    "output_suffix": "\n\n",
    "input_suffix": "\n\n",
    "system_suffix": "\n\n",
    "user_alignment_message": "",
    "system_same_as_user": False,
    "last_system_sequence": "",
    "first_input_sequence": "",
    "last_input_sequence": "",
    "last_output_sequence": "",
    "story_string_prefix": "",
    "story_string_suffix": "",
    "sequences_as_stop_strings": True,
}


def test_a_text_completion_connection_with_an_imported_template_chats(
    start_server: Callable[..., Any], page: Page, tmp_path: Path
) -> None:
    template_file = tmp_path / "Lighthouse Alpaca.json"
    template_file.write_text(json.dumps(MY_TEMPLATE, indent=4), encoding="utf-8")
    with ReplayLLMServer(models=["test-model"]) as llm:
        prepare = conftest.home_with(llm.url, {"maren": MAREN}, api="llamacpp")
        server = start_server(prepare)
        page.goto(server.url + "settings")
        expect(page.locator(tid("settings-user_llm-api"))).to_have_value("llamacpp")
        page.set_input_files(tid("settings-user_llm-template-file"), str(template_file))
        expect(page.locator(tid("settings-user_llm-template-note"))).to_contain_text(
            "Lighthouse Alpaca"
        )
        page.select_option(tid("settings-user_llm-instruct_template"), "Lighthouse Alpaca")
        page.click(tid("settings-user_llm-save"))
        expect(page.locator(tid("settings-user_llm-result"))).to_contain_text("Saved.")
        saved = server.api("/api/settings")["user_llm"]
        assert saved["instruct_template"] == "Lighthouse Alpaca"

        llm.script("*She pours the tea.* The storm has passed.")
        start_chat(page, server, "maren")
        page.fill(tid("chat-input"), "Is the storm over?")
        page.press(tid("chat-input"), "Enter")
        reply = messages(page).last
        expect(reply).to_have_attribute("data-status", "complete")
        expect(reply).to_contain_text("The storm has passed.")

        sent = llm.completion_requests
        assert len(sent) == 1 and not llm.chat_requests
        prompt = str(sent[0]["prompt"])
        # The user's own sequences around each turn, the character's name left open.
        assert prompt.startswith("Write Maren's next reply")
        assert prompt.endswith(
            "### Instruction:\nUser: Is the storm over?\n\n### Response:\nMaren:"
        )
        assert "### Response:\nMaren: *Maren sets a kettle on the stove.*" in prompt

        reply.locator(tid("chat-show-prompt")).click()
        body = page.locator(tid("chat-prompt-text-body"))
        expect(body).to_be_visible()
        shown = body.text_content() or ""
        assert shown == prompt
        pieces = page.locator(tid("chat-prompt-text-piece"))
        sources = pieces.evaluate_all("els => els.map(e => e.dataset.source)")
        assert any("Card" in (s or "") for s in sources), sources
