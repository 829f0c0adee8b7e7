"""Characters and personas end to end: real server, real browser, the replay LLM.

A SillyTavern user creates two personas and switches the chat between them (the messages
carry the persona's name); imports a card, edits it, exports it as CHARX and as PNG and
imports both again unchanged; and two tabs editing one character do not overwrite each
other.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.browser import conftest
from tests.browser.conftest import messages, send, tid

pytestmark = pytest.mark.browser

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sillytavern"
CHARACTER_ID = "mira"
MIRA = {
    "name": "Mira",
    "description": "The innkeeper; she knows {{user}}.",
    "first_mes": "Hello, {{user}}.",
}


def home_with(url: str | None = None) -> Callable[[Path], None]:
    """A project with one character (greeting names {{user}}); the replay LLM as the
    user model when ``url`` is given."""
    return conftest.home_with(url, {CHARACTER_ID: MIRA})


def create_persona(page: Page, name: str, description: str) -> None:
    page.fill(tid("persona-new-name"), name)
    page.click(tid("persona-create"))
    form = page.locator(tid("persona-form"))
    expect(form.locator(tid("persona-field-name"))).to_have_value(name)
    page.fill(tid("persona-field-description"), description)
    page.click(tid("persona-save"))
    expect(page.locator(tid("persona-notice"))).to_be_visible()


def test_create_and_switch_personas_and_the_messages_carry_the_persona_name(
    start_server: Callable[..., Any], page: Page
) -> None:
    with ReplayLLMServer(models=["test-model"]) as llm:
        server = start_server(home_with(llm.url))
        page.goto(server.url + "characters")
        page.click(tid("characters-tab-personas"))
        expect(page.locator(tid("persona-empty"))).to_be_visible()
        create_persona(page, "Ann", "Ann maps rivers.")
        create_persona(page, "Bob", "Bob shoes horses.")
        items = page.locator(tid("persona-item"))
        expect(items).to_have_count(2)
        # The first persona is the default.
        expect(items.filter(has_text="Ann").locator(tid("persona-default-badge"))).to_be_visible()

        page.click(tid("nav-chat"))
        page.click(tid("chat-new"))
        character = page.locator(f'{tid("chat-character")}[data-character-id="{CHARACTER_ID}"]')
        expect(character).to_contain_text("Mira")
        # Faces and names, not the raw description.
        expect(character).not_to_contain_text("innkeeper")
        character.click()
        expect(page.locator(tid("chat-new-persona"))).to_contain_text("Ann")
        page.click(tid("chat-create"))
        expect(page).to_have_url(re.compile(r"/chat/[0-9a-f]+$"))
        expect(messages(page).first).to_contain_text("Hello, Ann.")

        llm.script(Reply(text="Good day."))
        send(page, "Hi there")
        user_message = messages(page).nth(1)
        expect(user_message.locator(tid("chat-message-name"))).to_have_text("Ann")
        assert "Ann maps rivers." in json.dumps(llm.chat_requests[-1]["messages"])

        # Switch the chat to Bob: the next turn speaks as Bob.
        page.click(tid("chat-side-settings"))
        picker = page.locator(tid("persona-picker-select"))
        picker.select_option(label="Bob")
        expect(picker).to_have_value(re.compile(".+"))
        page.click(tid("chat-side-close"))
        llm.script(Reply(text="Hello, smith."))
        send(page, "It is me now")
        expect(messages(page).nth(3).locator(tid("chat-message-name"))).to_have_text("Bob")
        expect(messages(page).nth(1).locator(tid("chat-message-name"))).to_have_text("Ann")
        sent = json.dumps(llm.chat_requests[-1]["messages"])
        assert "Bob shoes horses." in sent and "Ann maps rivers." not in sent


EDITS = {
    "character-field-description": "Edited: keeper of the Lanternfall light, friend of {{user}}.",
    "character-field-scenario": "A stormy night at the lighthouse.",
    "character-field-system_prompt": "Write in short sentences.",
    "character-field-depth_prompt": "Remember the storm.",
    "character-field-tags": "lighthouse, storm",
    "character-field-creator": "browser test",
    "character-field-character_version": "2.0",
}


def editor_values(page: Page) -> dict[str, str]:
    editor = page.locator(tid("character-editor"))
    expect(editor.locator(tid("character-field-name"))).not_to_have_value("")
    values = {key: editor.locator(tid(key)).input_value() for key in EDITS}
    values["name"] = editor.locator(tid("character-field-name")).input_value()
    values["first_mes"] = editor.locator(tid("character-field-first_mes")).input_value()
    greetings = editor.locator(tid("character-greeting"))
    values["greetings"] = json.dumps(
        [greetings.nth(i).input_value() for i in range(greetings.count())]
    )
    return values


def import_card(page: Page, path: Path, *, keep_both: bool = False) -> None:
    """Import a card; ``keep_both``: it is a character here already, and the dialog that
    asks is answered "keep both"."""
    before = page.url
    page.set_input_files(tid("character-import-file"), str(path))
    if keep_both:
        page.click(tid("card-conflict-keep-both"))
    expect(page.locator(tid("characters-notice"))).to_be_visible()
    expect(page).not_to_have_url(before)


def test_edit_a_character_export_as_charx_and_png_and_import_both_unchanged(
    start_server: Callable[..., Any], page: Page, tmp_path: Path
) -> None:
    server = start_server(home_with())
    page.goto(server.url + "characters")
    import_card(page, FIXTURES / "card_maren_v2_v3.png")
    expect(page.locator(tid("character-item"))).to_have_count(2)
    editor = page.locator(tid("character-editor"))
    for key, value in EDITS.items():
        editor.locator(tid(key)).fill(value)
    page.click(tid("character-add-greeting"))
    editor.locator(tid("character-greeting")).last.fill("A new dawn, {{user}}.")
    expect(page.locator(tid("tokens-depth_prompt"))).not_to_have_text("0 tokens")
    page.click(tid("character-save"))
    expect(page.locator(tid("character-notice"))).to_be_visible()
    edited = editor_values(page)
    assert edited["character-field-tags"] == "lighthouse, storm"

    files: dict[str, Path] = {}
    for fmt in ("charx", "png"):
        with page.expect_download() as info:
            page.click(tid(f"character-export-{fmt}"))
        target = tmp_path / f"exported.{fmt}"
        info.value.save_as(target)
        files[fmt] = target

    for fmt, path in files.items():
        page.click(tid("nav-characters"))
        import_card(page, path, keep_both=True)
        again = editor_values(page)
        assert again == edited, fmt
        # The re-imported card shows its avatar, not the initial.
        expect(editor.locator(tid("avatar-image"))).to_be_visible()
    expect(page.locator(tid("character-item"))).to_have_count(4)


def test_the_later_of_two_tabs_saving_one_character_gets_a_conflict(
    start_server: Callable[..., Any], browser: Browser
) -> None:
    server = start_server(home_with())
    context = browser.new_context(locale="en-US", viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    try:
        first, second = context.new_page(), context.new_page()
        for tab in (first, second):
            tab.goto(server.url + f"characters/{CHARACTER_ID}")
            expect(tab.locator(tid("character-field-name"))).to_have_value("Mira")
        first.fill(tid("character-field-scenario"), "From the first tab.")
        first.click(tid("character-save"))
        expect(first.locator(tid("character-notice"))).to_be_visible()
        second.fill(tid("character-field-scenario"), "From the second tab.")
        second.click(tid("character-save"))
        expect(second.locator(tid("character-error"))).to_contain_text("saved elsewhere")
        second.click(tid("character-reload"))
        expect(second.locator(tid("character-field-scenario"))).to_have_value("From the first tab.")
    finally:
        context.close()


def test_a_cards_suggested_agent_waits_for_the_users_answer_on_its_page(
    start_server: Callable[..., Any], page: Page, tmp_path: Path
) -> None:
    suggesting = {**MIRA, "extensions": {"storyloom": {"agent_profile": "dm"}}}

    def prepare(home: Path) -> None:
        conftest.home_with(None, {CHARACTER_ID: suggesting})(home)
        agents = home / "projects" / "default" / "agents"
        agents.mkdir(parents=True, exist_ok=True)
        profile = {"id": "dm", "name": "Game master", "prompt": "You run the game."}
        (agents / "dm.json").write_text(json.dumps(profile), encoding="utf-8")

    server = start_server(prepare)
    page.goto(server.url + f"characters/{CHARACTER_ID}")
    asked = page.locator(tid("character-agent-suggested"))
    expect(asked).to_contain_text("dm")
    expect(page.locator(tid("character-agent-profile"))).to_have_value("")
    page.click(tid("character-agent-confirm"))
    expect(asked).to_be_hidden()
    expect(page.locator(tid("character-agent-profile"))).to_have_value("dm")
    consent = server.home / "projects" / "default" / "agent_consent.json"
    assert json.loads(consent.read_text(encoding="utf-8")) == {CHARACTER_ID: "dm"}
    page.reload()
    expect(page.locator(tid("character-agent-profile"))).to_have_value("dm")
    page.select_option(tid("character-agent-profile"), "")
    expect(page.locator(tid("character-agent-profile"))).to_have_value("")
    expect(asked).to_be_hidden()
