"""Chat settings that said too little, end to end: the settings drawer has one place for
who the user is (the persona picker, no old "Your name" field), the prompt manager says
where a save goes before it saves and can save the shared pipeline for every chat, and a
message hidden from the prompt says so in words; each at 1440×900 and at 390×844, where
the chat's panels are behind the one panels menu."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.browser import conftest
from tests.browser.conftest import message_with, no_sideways_scroll, send, side_panel, tid

pytestmark = pytest.mark.browser

GREETING = "Welcome to the Lantern Inn, traveller."
CHARACTER_ID = "mira"
MIRA = {"name": "Mira", "description": "Mira keeps the inn.", "first_mes": GREETING}


def home_with(url: str | None = None) -> Callable[[Path], None]:
    return conftest.home_with(url, {CHARACTER_ID: MIRA})


def start_chat(page: Page, server: Any) -> str:
    conftest.start_chat(page, server, CHARACTER_ID)
    return page.url.rsplit("/", 1)[-1]


def test_the_settings_drawer_asks_who_you_are_only_through_the_persona_picker(
    start_server: Callable[..., Any], sized_page: Page
) -> None:
    page = sized_page
    server = start_server(home_with())
    start_chat(page, server)
    side_panel(page, "settings")
    drawer = page.locator(tid("chat-settings"))
    expect(drawer.locator(tid("persona-picker"))).to_be_visible()
    expect(drawer.locator(tid("chat-settings-title"))).to_be_visible()
    expect(drawer.get_by_text("Your name", exact=True)).to_have_count(0)
    expect(drawer.get_by_text("Your persona", exact=True)).to_have_count(0)
    expect(drawer.locator(tid("chat-settings-user"))).to_have_count(0)
    expect(drawer.locator(tid("chat-settings-persona"))).to_have_count(0)
    no_sideways_scroll(page)


def test_the_prompt_manager_says_where_a_save_goes_and_saves_for_all_chats(
    start_server: Callable[..., Any], sized_page: Page
) -> None:
    page = sized_page
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(Reply(text="Sit down."))
        server = start_server(home_with(llm.url))
        first = start_chat(page, server)
        side_panel(page, "manager")
        manager = page.locator(tid("chat-prompt-manager"))
        # Before saving: what "this chat only" makes, and the other way.
        notice = manager.locator(tid("chat-manager-builtin"))
        expect(notice).to_contain_text("its own copy (chat-default-2)")
        expect(notice).to_contain_text("for all chats")
        no_sideways_scroll(page)
        manager.locator(tid("chat-sampler-temperature")).fill("0.3")
        manager.locator(tid("chat-manager-save-all")).click()
        expect(manager.locator(tid("chat-manager-note"))).to_contain_text("chat-default")
        expect(manager.locator(tid("chat-manager-shared"))).to_be_visible()
        no_sideways_scroll(page)

        # The shared pipeline changed in place: no copy, this chat still on it.
        workflows = {w["id"]: w for w in server.api("/api/workflows")["workflows"]}
        assert "chat-default-2" not in workflows
        assert workflows["chat-default"]["builtin"] is False
        chat = server.api(f"/api/chats/{first}")["conversation"]
        assert chat["settings"]["pipeline"] == "chat-default"

        # Another chat on the pipeline answers with it.
        second = start_chat(page, server)
        assert second != first
        other = server.api(f"/api/chats/{second}")["conversation"]
        assert other["settings"]["pipeline"] == "chat-default"
        send(page, "Hello.")
        assert llm.chat_requests[-1]["temperature"] == 0.3


def test_a_message_hidden_from_the_prompt_says_so(
    start_server: Callable[..., Any], sized_page: Page
) -> None:
    page = sized_page
    server = start_server(home_with())
    start_chat(page, server)
    greeting = message_with(page, GREETING)
    label = greeting.locator(tid("chat-message-hidden-label"))
    expect(label).to_have_count(0)
    greeting.locator(tid("chat-hide")).click()
    expect(greeting).to_have_attribute("data-hidden", "true")
    expect(label).to_be_visible()
    expect(label).to_have_text("hidden from the prompt")
    expect(label.locator("svg")).to_have_count(1)
    no_sideways_scroll(page)
    greeting.locator(tid("chat-hide")).click()
    expect(label).to_have_count(0)
