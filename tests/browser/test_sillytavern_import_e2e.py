"""Moving in from SillyTavern through the web app: Settings → Import from SillyTavern
previews a user folder, imports it with a bar per kind and reports; the checkpointed chat
is one tree, and the next message's prompt holds what SillyTavern's would (the persona,
the lore of every scope, the card's regex result, the preset's main prompt).

The folder is built by :mod:`storyloom.testing.st_user_folder` in SillyTavern's own file
shapes; the model is the scripted replay server, so the prompt it received is read back.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.testing.st_user_folder import FACTS, write_st_user_folder
from tests.browser.conftest import RESULTS_DIR, home_with, message_with, messages, send, tid

pytestmark = pytest.mark.browser

# Counts the progress bars each time the section changes, so the test knows they were
# shown however fast the import ran.
WATCH_BARS = """el => {
  window.__bars = 0;
  new MutationObserver(() => {
    const n = el.querySelectorAll('[data-testid="st-import-bar"]').length;
    window.__bars = Math.max(window.__bars, n);
  }).observe(el, { childList: true, subtree: true });
}"""

MAIN_END = "Until the gulls go quiet."
BRANCH_END = "Tell me of Veyl."
CHECKPOINT_END = "No, it burned down."
LEFT_FROM = "And the market, is it open?"


def cell(page: Page, table: str, kind: str, column: str) -> Locator:
    return page.locator(f'{tid(table)}[data-kind="{kind}"] [data-col="{column}"]')


def prompt_text(request: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content")) for m in request["messages"])


def test_a_folder_imported_from_settings_continues_its_checkpointed_chat(
    start_server: Callable[..., Any], page: Page, tmp_path: Path
) -> None:
    user = write_st_user_folder(tmp_path / "SillyTavern", broken_card=True)
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(Reply(text="The blue light is the lighthouse; the market is below it."))
        server = start_server(home_with(llm.url))

        page.goto(server.url + "settings")
        section = page.locator(tid("settings-st-import"))
        expect(section).to_contain_text("the machine the storyloom server runs on")
        section.locator(tid("st-import-path")).fill(str(user))
        section.locator(tid("st-import-preview")).click()

        # The preview: what would come per kind, and the card that cannot be read.
        expect(cell(page, "st-import-preview-row", "chats", "new")).not_to_have_text("0")
        expect(cell(page, "st-import-preview-row", "characters", "new")).to_have_text("3")
        expect(cell(page, "st-import-preview-row", "personas", "new")).to_have_text("2")
        problems = page.locator(tid("st-import-preview-problems"))
        expect(problems).to_contain_text("characters/Broken.json")

        section.evaluate(WATCH_BARS)
        section.locator(tid("st-import-start")).click()

        # The report: what came per kind, and the broken card named and skipped.
        report = page.locator(tid("st-import-report"))
        expect(report).to_be_visible()
        assert page.evaluate("window.__bars") >= 3, "a progress bar per kind was shown"
        expect(cell(page, "st-import-count", "characters", "added")).to_have_text("3")
        expect(cell(page, "st-import-count", "personas", "added")).to_have_text("2")
        expect(cell(page, "st-import-count", "worlds", "added")).not_to_have_text("0")
        expect(report.locator(tid("st-import-report-problems"))).to_contain_text(
            "characters/Broken.json"
        )
        expect(section.locator(tid("st-import-path"))).to_have_value(str(user))
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        section.screenshot(path=str(RESULTS_DIR / "sillytavern-import-report.png"))

        # A second look at the same folder finds what came here already.
        section.locator(tid("st-import-preview")).click()
        for kind in ("characters", "worlds", "personas", "chats", "presets"):
            expect(cell(page, "st-import-preview-row", kind, "new")).to_have_text("0")
            expect(cell(page, "st-import-preview-row", kind, "changed")).to_have_text("0")

        # The checkpointed chat is one conversation: the branch and the checkpoint are
        # branches of it, not chats of their own.
        page.goto(server.url + "chat")
        expect(page.locator(tid("ws-status"))).to_have_attribute("data-status", "connected")
        conversations = page.locator(tid("chat-conversation"))
        expect(conversations.filter(has_text=MAIN_END)).to_have_count(1)
        expect(conversations.filter(has_text=BRANCH_END)).to_have_count(0)
        expect(conversations.filter(has_text=CHECKPOINT_END)).to_have_count(0)
        conversations.filter(has_text=MAIN_END).click()
        expect(page).to_have_url(re.compile(r"/chat/[0-9a-f]+$"))
        expect(messages(page).last).to_contain_text(MAIN_END)

        page.click(tid("chat-side-tree"))
        nodes = page.locator(tid("chat-tree-node"))
        for text in (MAIN_END, BRANCH_END, CHECKPOINT_END):
            expect(nodes.filter(has_text=text)).to_have_count(1)
        expect(page.locator(f'{tid("chat-tree-node")}[data-pointer="true"]')).to_contain_text(
            MAIN_END
        )

        # The branch switcher on the message the branch left from goes over to it.
        left_from = message_with(page, LEFT_FROM)
        expect(left_from.locator(tid("chat-swipe-count"))).to_have_text("1/2")
        left_from.locator(tid("chat-swipe-right")).click()
        expect(messages(page).last).to_contain_text(BRANCH_END)
        expect(page.locator(f'{tid("chat-tree-node")}[data-pointer="true"]')).to_contain_text(
            BRANCH_END
        )

        # Back to the main path's end, and on with the chat.
        nodes.filter(has_text=MAIN_END).click()
        expect(messages(page).last).to_contain_text(MAIN_END)
        said = "Does the lighthouse watch the market when the tides turn?"
        send(page, said)
        expect(messages(page).last).to_contain_text("The blue light is the lighthouse")

        sent = [r for r in llm.chat_requests if said in prompt_text(r)]
        assert len(sent) == 1, [prompt_text(r)[:200] for r in llm.chat_requests]
        prompt = prompt_text(sent[0])
        for name in ("persona_default", "lore_character", "lore_global", "lore_chat"):
            assert FACTS[name] in prompt, f"{name}: {FACTS[name]!r} not in the prompt"
        assert FACTS["preset_main"] in prompt, "the active preset's main prompt"
        assert f"Follow the {FACTS['regex_result']} posts north." in prompt, "the card's regex"
        assert "Follow the lantern posts north." not in prompt
