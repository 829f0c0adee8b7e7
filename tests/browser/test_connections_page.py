"""Connections end to end: one made in Settings → Connections, picked in a chat's settings
drawer, writes that chat's next reply (two scripted model servers tell them apart), and
its key never comes back to the browser."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, Response, expect

from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.browser.conftest import home_with, messages, send, start_chat, tid

pytestmark = pytest.mark.browser

SECRET = "sk-connection-browser-test-41c2"
MIRA = {"name": "Mira", "description": "The innkeeper.", "first_mes": "Welcome, traveller."}


def test_a_connection_made_in_settings_and_picked_in_the_chat_writes_its_replies(
    start_server: Callable[..., Any], page: Page
) -> None:
    bodies: list[str] = []

    def on_response(response: Response) -> None:
        if "/api/" in response.url:
            try:
                bodies.append(response.text())
            except Exception:  # a body the browser dropped (navigation) has nothing to leak
                bodies.append("")

    page.on("response", on_response)
    with (
        ReplayLLMServer(models=["test-model"]) as default,
        ReplayLLMServer(models=["other-model"], api_key=SECRET) as other,
    ):
        server = start_server(home_with(default.url, {"mira": MIRA}))
        page.goto(server.url + "settings")
        expect(page.locator(tid("settings-connections"))).to_be_visible()
        expect(page.locator(tid("connections-empty"))).to_be_visible()

        page.click(tid("connection-add"))
        page.fill(tid("connection-name"), "Other server")
        page.fill(tid("connection-base-url"), other.url)
        page.fill(tid("connection-model"), "other-model")
        page.fill(tid("connection-api-key"), SECRET)
        page.click(tid("connection-test"))
        expect(page.locator(tid("connections-message"))).not_to_be_empty()
        assert other.chat_requests, "the test reached the connection's server"
        page.click(tid("connection-save"))
        item = page.locator(f'{tid("connection-item")}[data-name="Other server"]')
        expect(item).to_contain_text("other-model")
        expect(item).to_contain_text("key set")
        assert server.api("/api/connections")["connections"]["Other server"]["api_key_set"]

        start_chat(page, server, "mira")
        conversation_id = page.url.rsplit("/", 1)[-1]
        default.script(Reply(text="The house answers."))
        send(page, "Who answers?")
        expect(messages(page).last).to_contain_text("The house answers.")

        page.click(tid("chat-side-settings"))
        select = page.locator(tid("chat-settings-connection"))
        expect(select.locator('option[value="Other server"]')).to_have_count(1)
        select.select_option("Other server")
        expect(select).to_have_value("Other server")
        settings = server.api(f"/api/chats/{conversation_id}")["conversation"]["settings"]
        assert settings["connection"] == "Other server"

        asked_before = len(other.chat_requests)
        other.script(Reply(text="The other server answers."))
        send(page, "And now?")
        expect(messages(page).last).to_contain_text("The other server answers.")
        assert len(other.chat_requests) == asked_before + 1
        assert other.chat_requests[-1]["model"] == "other-model"
        assert len(default.chat_requests) == 1
    assert not [b for b in bodies if SECRET in b], "the key never reaches the browser"
    assert re.search(r"/chat/[0-9a-f]+$", page.url)
