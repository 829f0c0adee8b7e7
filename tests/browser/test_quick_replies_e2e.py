"""Quick replies, a chat background and expression sprites moved in from SillyTavern,
in the real web app: the set's buttons under the message box (a slash command shown
disabled, saying why), a click sends the reply and the scripted model answers it; the
chat shows the background image picked in its settings; the character's sprite shows
beside the chat, and a pick changes it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from storyloom.chat.personalab.chat_backgrounds import import_st_backgrounds
from storyloom.chat.personalab.library import PresetLibrary
from storyloom.chat.personalab.quick_replies import import_st_quick_replies
from storyloom.chat.personalab.sprites import import_st_sprites
from storyloom.sillytavern.png_chunks import blank_png
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.browser.conftest import RESULTS_DIR, home_with, message_with, messages, start_chat, tid
from tests.chat.test_quick_replies import st_set

pytestmark = pytest.mark.browser

GREETING = "The tavern door creaks open."
CARD = {"name": "Mira", "description": "The innkeeper.", "first_mes": GREETING}


def with_sillytavern_things(url: str, st: Path) -> Callable[[Path], None]:
    """A home with one character, and a SillyTavern folder's quick replies, backgrounds
    and the character's sprites imported into it."""
    base = home_with(url, {"mira": CARD})

    def prepare(home: Path) -> None:
        base(home)
        project = home / "projects" / "default"
        quick = st / "QuickReplies"
        quick.mkdir(parents=True)
        (quick / "Tavern.json").write_text(json.dumps(st_set("Tavern")), encoding="utf-8")
        (quick / "Hidden.json").write_text(json.dumps(st_set("Hidden")), encoding="utf-8")
        assert import_st_quick_replies(quick, project, visible=["Tavern"]) == (2, [])
        backgrounds = st / "backgrounds"
        backgrounds.mkdir()
        (backgrounds / "tavern night.png").write_bytes(blank_png(8, 8, (40, 30, 20)))
        assert import_st_backgrounds(backgrounds, home) == 1
        sprites = st / "characters" / "Mira"
        sprites.mkdir(parents=True)
        (sprites / "neutral.png").write_bytes(blank_png(4, 6, (120, 120, 120)))
        (sprites / "joy.png").write_bytes(blank_png(4, 6, (250, 210, 0)))
        assert import_st_sprites(PresetLibrary(project), "mira", sprites) == 2

    return prepare


def test_a_quick_reply_sends_and_the_chat_shows_its_background_and_sprite(
    start_server: Callable[..., Any], page: Page, tmp_path: Path
) -> None:
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(Reply(text="Mira smiles: the fire is warm tonight."))
        server = start_server(with_sillytavern_things(llm.url, tmp_path / "st"))
        start_chat(page, server, "mira")
        expect(messages(page).first).to_contain_text(GREETING)

        # The user picks the chat's background in its settings.
        chat_id = page.url.rsplit("/", 1)[-1]
        page.click(tid("chat-side-settings"))
        page.select_option(tid("chat-settings-background"), "tavern night.png")
        page.click(tid("chat-settings-save"))
        main = page.locator(tid("chat-body"))
        expect(main).to_have_attribute("data-background", "tavern night.png")
        image = main.evaluate("el => getComputedStyle(el).backgroundImage")
        assert "/api/backgrounds/tavern%20night.png" in image
        loaded = page.evaluate(
            """async () => {
              const img = new Image();
              img.src = '/api/backgrounds/tavern%20night.png';
              await img.decode();
              return img.naturalWidth;
            }"""
        )
        assert loaded == 8
        page.click(tid("chat-side-settings"))  # the drawer closes

        # Only the visible set has buttons; the slash command is kept, disabled, saying why.
        bar = page.locator(tid("quick-reply-bar"))
        expect(bar.locator(tid("quick-reply"))).to_have_count(2)
        roll = bar.locator(tid("quick-reply")).filter(has_text="Roll")
        expect(roll).to_be_disabled()
        assert "slash command" in (roll.get_attribute("title") or "")

        bar.locator(tid("quick-reply")).filter(has_text="Look").click()
        expect(message_with(page, "I look around.")).to_have_count(1)
        expect(messages(page).last).to_contain_text("the fire is warm tonight")
        expect(messages(page).last).to_have_attribute("data-status", "complete")
        sent = llm.chat_requests[-1]["messages"]
        assert sent[-1]["role"] == "user" and "I look around." in sent[-1]["content"]
        expect(page.locator(tid("chat-input"))).to_have_value("")

        # The chat's settings show or hide a set (for every chat of the project).
        page.click(tid("chat-side-settings"))
        page.uncheck(f'{tid("chat-settings-quick-set")}[data-name="Tavern"]')
        expect(page.locator(tid("quick-reply-bar"))).to_have_count(0)
        page.check(f'{tid("chat-settings-quick-set")}[data-name="Hidden"]')
        expect(bar.locator(tid("quick-reply"))).to_have_count(2)
        page.click(tid("chat-side-settings"))

        # The character's default sprite shows beside the chat; a pick changes it.
        sprite = page.locator(tid("expression-sprite"))
        expect(sprite).to_have_attribute("data-expression", "neutral")
        page.select_option(tid("expression-pick"), "joy")
        expect(sprite).to_have_attribute("data-expression", "joy")
        expect(sprite.locator("img")).to_have_attribute("src", re.compile(r"/expressions/joy$"))
        width = sprite.locator("img").evaluate("img => img.decode().then(() => img.naturalWidth)")
        assert width == 4
        settings = server.api(f"/api/chats/{chat_id}")["conversation"]["settings"]
        assert settings["expression"] == "joy"
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(RESULTS_DIR / "chat-quick-replies.png"))
