"""The chat as a SillyTavern user lives in it, end to end in a real browser: editing a
middle message in place, hiding a message from the prompt, the prompt manager's order and
switches reaching the next prompt, the notice a swipe on an old reply gives, the model
list of the settings, and a chat that fits the window at 1440×900 and at 390×844."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.browser import conftest
from tests.browser.conftest import (
    RESULTS_DIR,
    message_with,
    messages,
    no_sideways_scroll,
    send,
    tid,
)

pytestmark = pytest.mark.browser

GREETING = "Welcome to the Lantern Inn, traveller."
DESCRIPTION = "Mira keeps the Lantern Inn at the edge of the marsh."
CHARACTER_ID = "mira"
MIRA = {"name": "Mira", "description": DESCRIPTION, "first_mes": GREETING}


def home_with(url: str) -> Callable[[Path], None]:
    return conftest.home_with(url, {CHARACTER_ID: MIRA})


def start_chat(page: Page, server: Any) -> None:
    conftest.start_chat(page, server, CHARACTER_ID)


def sent_texts(llm: ReplayLLMServer) -> list[str]:
    return [str(m["content"]) for m in llm.chat_requests[-1]["messages"]]


def test_editing_a_middle_message_in_place_keeps_what_follows(
    start_server: Callable[..., Any], page: Page
) -> None:
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(Reply(text="Two silver, please."), Reply(text="The stew is rabbit."))
        server = start_server(home_with(llm.url))
        start_chat(page, server)
        send(page, "How much for a bed?")
        send(page, "And the stew?")

        middle = message_with(page, "Two silver, please.")
        expect(middle.locator(tid("chat-message-index"))).to_have_text("#2")
        middle.locator(tid("chat-edit")).click()
        page.fill(tid("chat-edit-text"), "Three silver, and breakfast.")
        page.click(tid("chat-edit-save"))

        # Rewritten where it stands: everything after it is still there.
        expect(messages(page)).to_have_count(5)
        expect(messages(page).nth(2)).to_contain_text("Three silver, and breakfast.")
        expect(messages(page).nth(3)).to_contain_text("And the stew?")
        expect(messages(page).last).to_contain_text("The stew is rabbit.")
        edited = messages(page).nth(2)
        expect(edited.locator(tid("chat-swipe-count"))).to_have_text("1/1")
        # The old text is a version, and can come back.
        versions = edited.locator(tid("chat-versions"))
        expect(versions).to_have_attribute("data-count", "1")
        versions.locator("summary").click()
        expect(versions.locator(tid("chat-version"))).to_contain_text("Two silver, please.")
        versions.locator(tid("chat-version-restore")).click()
        expect(messages(page).nth(2)).to_contain_text("Two silver, please.")
        expect(messages(page)).to_have_count(5)
        assert len(llm.chat_requests) == 2


def test_a_hidden_message_is_left_out_of_the_next_prompt(
    start_server: Callable[..., Any], page: Page
) -> None:
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(
            Reply(text="The soup is barley."),
            Reply(text="The stew is rabbit."),
            Reply(text="Bread is free."),
        )
        server = start_server(home_with(llm.url))
        start_chat(page, server)
        send(page, "What soup do you have?")
        send(page, "And the stew?")

        secret = message_with(page, "What soup do you have?")
        secret.locator(tid("chat-hide")).click()
        expect(secret).to_have_attribute("data-hidden", "true")
        expect(secret.locator(tid("chat-hide"))).to_have_attribute("aria-pressed", "true")
        send(page, "Any bread?")
        assert "What soup do you have?" not in sent_texts(llm)
        assert "And the stew?" in sent_texts(llm)
        # Still in the chat, dimmed; and the inspector's prompt leaves it out.
        expect(message_with(page, "What soup do you have?")).to_have_count(1)
        messages(page).last.locator(tid("chat-show-prompt")).click()
        panel = page.locator(tid("chat-prompt-panel"))
        expect(panel).to_be_visible()
        history = page.locator(f'{tid("chat-prompt-block")}[data-kind="history"]')
        expect(history.first).to_be_visible()
        expect(history.filter(has_text="What soup do you have?")).to_have_count(0)
        expect(history.filter(has_text="And the stew?")).to_have_count(1)
        # The tree marks it too.
        page.click(tid("chat-side-tree"))
        node = page.locator(tid("chat-tree-node")).filter(has_text="What soup do you have?")
        expect(node).to_have_attribute("data-hidden", "true")
        expect(node.locator(tid("chat-tree-hidden"))).to_be_visible()
        other = page.locator(tid("chat-tree-node")).filter(has_text="And the stew?")
        expect(other.locator(tid("chat-tree-hidden"))).to_have_count(0)


def test_the_prompt_manager_reorders_and_switches_prompts_for_the_next_reply(
    start_server: Callable[..., Any], page: Page
) -> None:
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(Reply(text="Welcome in."), Reply(text="Sit by the fire."))
        server = start_server(home_with(llm.url))
        start_chat(page, server)
        send(page, "Hello.")
        assert "Write Mira's next reply" in sent_texts(llm)[0]

        page.click(tid("chat-side-manager"))
        manager = page.locator(tid("chat-prompt-manager"))
        expect(manager.locator(tid("chat-manager-builtin"))).to_be_visible()
        lines = manager.locator(tid("chat-prompt-line"))
        expect(lines.first).to_have_attribute("data-identifier", "main")

        def line(identifier: str) -> Locator:
            return manager.locator(f'{tid("chat-prompt-line")}[data-identifier="{identifier}"]')

        # The main prompt down to the end with the buttons (the keyboard's way to drag),
        # and the character's description switched off.
        expect(line("main").locator(tid("chat-prompt-toggle"))).to_be_disabled()
        for _ in range(lines.count()):
            if lines.last.get_attribute("data-identifier") == "main":
                break
            line("main").locator(tid("chat-prompt-down")).click()
        expect(lines.last).to_have_attribute("data-identifier", "main")
        # Dragging works as well: the scenario dropped onto the first line takes its place.
        line("scenario").locator(tid("chat-prompt-grip")).drag_to(lines.first)
        expect(lines.first).to_have_attribute("data-identifier", "scenario")
        line("charDescription").locator(tid("chat-prompt-toggle")).uncheck()
        expect(line("charDescription")).to_have_attribute("data-enabled", "false")
        manager.locator(tid("chat-sampler-temperature")).fill("0.3")
        manager.locator(tid("chat-manager-save")).click()
        expect(manager.locator(tid("chat-manager-note"))).to_contain_text("chat-default-2")
        workflows = server.api("/api/workflows")["workflows"]
        assert {w["id"]: w["builtin"] for w in workflows}["chat-default"] is True
        chat_id = page.url.rsplit("/", 1)[-1]
        page.wait_for_function(
            f"""async () => (await (await fetch('/api/chats/{chat_id}')).json())
                 .conversation.settings.pipeline === 'chat-default-2'"""
        )

        send(page, "Is there a fire?")
        texts = sent_texts(llm)
        assert not any(DESCRIPTION in text for text in texts)
        main_at = next(i for i, text in enumerate(texts) if "Write Mira's next reply" in text)
        asked_at = next(i for i, text in enumerate(texts) if "Is there a fire?" in text)
        assert main_at > asked_at
        assert llm.chat_requests[-1]["temperature"] == 0.3
        # The inspector shows the same order.
        messages(page).last.locator(tid("chat-show-prompt")).click()
        blocks = page.locator(tid("chat-prompt-block"))
        expect(blocks.first).to_be_visible()
        expect(blocks.last).to_contain_text("Main Prompt")
        expect(blocks.filter(has_text="Char Description")).to_have_count(0)


def test_swiping_an_old_reply_says_where_the_later_messages_went(
    start_server: Callable[..., Any], page: Page
) -> None:
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(
            Reply(text="The soup is barley."),
            Reply(text="The stew is rabbit."),
            Reply(text="Tonight it is onion soup."),
        )
        server = start_server(home_with(llm.url))
        start_chat(page, server)
        send(page, "What soup do you have?")
        send(page, "And the stew?")
        message_with(page, "The soup is barley.").locator(tid("chat-swipe-right")).click()
        expect(messages(page).last).to_contain_text("Tonight it is onion soup.")
        notice = page.locator(tid("chat-notice"))
        expect(notice).to_have_attribute("data-kind", "info")
        expect(notice).to_contain_text("2 later messages on this branch stay with version 1")
        # The conversation list follows the branch on screen.
        listed = page.locator(tid("chat-conversation"))
        expect(listed).to_contain_text("3 messages")
        expect(listed).to_contain_text("Tonight it is onion soup.")
        message_with(page, "Tonight it is onion soup.").locator(tid("chat-swipe-left")).click()
        expect(messages(page)).to_have_count(5)
        expect(listed).to_contain_text("5 messages")
        expect(listed).to_contain_text("The stew is rabbit.")


def test_the_chat_fits_the_window_at_1440_and_390_without_sideways_scroll(
    start_server: Callable[..., Any], page: Page
) -> None:
    long_word = "Lanternfall" * 30
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(Reply(text=f'*She smiles.* "Welcome." {long_word}'), Reply(text="Sit down."))
        server = start_server(home_with(llm.url))
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        page.set_viewport_size({"width": 1440, "height": 900})
        start_chat(page, server)
        send(page, "A room for the night, please, and a very long word: " + long_word)
        send(page, "Thank you.")
        expect(page.locator(tid("chat-conversation"))).to_contain_text("5 messages")
        expect(messages(page).last.locator(tid("chat-message-tokens"))).to_be_visible()
        log_box = page.locator(tid("chat-log")).bounding_box()
        assert log_box is not None
        # The chat takes the window's height: no page title above it.
        composer = page.locator(tid("chat-input")).bounding_box()
        assert composer is not None and composer["y"] + composer["height"] <= 900
        assert log_box["height"] > 500
        no_sideways_scroll(page)
        page.screenshot(path=str(RESULTS_DIR / "chat-1440x900.png"))
        # A panel opens beside the chat; the chat stays where it was.
        before = page.evaluate(f"() => document.querySelector('{tid('chat-log')}').scrollTop")
        page.click(tid("chat-side-tree"))
        expect(page.locator(tid("chat-tree"))).to_be_visible()
        after = page.evaluate(f"() => document.querySelector('{tid('chat-log')}').scrollTop")
        assert abs(after - before) < 200
        no_sideways_scroll(page)
        page.screenshot(path=str(RESULTS_DIR / "chat-1440x900-tree.png"))
        # The tree names the speakers.
        speakers = page.locator(tid("chat-tree-speaker")).all_inner_texts()
        assert "Mira" in speakers and "User" in speakers
        # A jump in the tree scrolls the chat to that message.
        page.locator(tid("chat-tree-node")).filter(has_text="A room for the night").click()
        expect(messages(page).last).to_contain_text("A room for the night")
        expect(messages(page).last).to_be_in_viewport()
        page.click(tid("chat-jump-end"))
        expect(messages(page).last).to_contain_text("Sit down.")

        page.set_viewport_size({"width": 390, "height": 844})
        # On a phone the panels are one menu.
        page.click(tid("chat-panels-menu"))
        page.click(tid("chat-panels-tree"))
        expect(page.locator(tid("chat-side"))).to_have_count(0)
        no_sideways_scroll(page)
        page.screenshot(path=str(RESULTS_DIR / "chat-390x844.png"))
        # Touch: the actions of a message are at least 40 px high.
        actions = messages(page).last.locator(".chat-action")
        for n in range(actions.count()):
            box = actions.nth(n).bounding_box()
            assert box is not None and box["height"] >= 40
        # The list is a drawer; a panel is a drawer over the chat.
        page.click(tid("chat-list-toggle"))
        expect(page.locator(tid("chat-conversation"))).to_be_visible()
        no_sideways_scroll(page)
        page.screenshot(path=str(RESULTS_DIR / "chat-390x844-list.png"))
        page.locator(tid("chat-conversation")).first.click()
        page.click(tid("chat-panels-menu"))
        page.click(tid("chat-panels-manager"))
        expect(page.locator(tid("chat-prompt-manager"))).to_be_visible()
        no_sideways_scroll(page)
        page.screenshot(path=str(RESULTS_DIR / "chat-390x844-manager.png"))
        # In Chinese too.
        page.locator(".lang select").select_option("zh")
        page.click(tid("chat-panels-menu"))
        expect(page.locator(tid("chat-panels-manager"))).to_have_text("提示词管理")
        page.keyboard.press("Escape")
        no_sideways_scroll(page)
        page.set_viewport_size({"width": 1440, "height": 900})
        no_sideways_scroll(page)


def test_the_model_field_lists_the_endpoint_s_models_and_warns_about_others(
    start_server: Callable[..., Any], page: Page
) -> None:
    with ReplayLLMServer(models=["test-model", "other-model", "secret-model"],
                         listed_models=["test-model", "other-model"]) as llm:  # fmt: skip
        server = start_server(home_with(llm.url))
        page.goto(server.url + "settings")
        choices = page.locator(tid("settings-user_llm-model-list"))
        expect(choices.locator("option")).to_have_count(3)
        choices.select_option("other-model")
        expect(page.locator(tid("settings-user_llm-model"))).to_have_value("other-model")
        expect(page.locator(tid("settings-user_llm-model-warning"))).to_have_count(0)
        page.fill(tid("settings-user_llm-model"), "secret-model")
        expect(page.locator(tid("settings-user_llm-model-warning"))).to_contain_text("secret-model")
        page.click(tid("settings-user_llm-test"))
        result = page.locator(tid("settings-user_llm-result"))
        expect(result).to_contain_text("answered")
        expect(result).to_contain_text("does not list model 'secret-model'")
