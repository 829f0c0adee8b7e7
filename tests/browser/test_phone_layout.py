"""The app on a phone (390×844) and the chat's lore beside the chat (issue 27, items 1 and 7).

On a phone the message box stays on screen while the chat log scrolls (the page itself
never scrolls), the app's navigation is one menu button and the chat's panels are one
menu; the Writing page does not scroll sideways and its editor fits. At 1440×900 the
navigation and the panel buttons are as they were, and "Lore in this chat" opens with one
click from the chat's header (it is no longer at the bottom of the settings drawer).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, ViewportSize, expect

from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.browser import conftest
from tests.browser.conftest import (
    RESULTS_DIR,
    RunningServer,
    messages,
    no_sideways_scroll,
    send,
    tid,
)

pytestmark = pytest.mark.browser

PHONE: ViewportSize = {"width": 390, "height": 844}
DESKTOP: ViewportSize = {"width": 1440, "height": 900}
CHARACTER_ID = "mira"
MIRA = {
    "name": "Mira",
    "description": "Mira keeps the Lantern Inn at the edge of the marsh.",
    "first_mes": "Welcome to the Lantern Inn, traveller.",
}
# Long enough that three of them overflow a phone's screen.
LONG_REPLY = (
    "*Mira wipes the counter.* The marsh road floods every spring, and the ferryman "
    "charges double when the water is high. " * 5
)

# The document's size against the window's: on a phone neither way may scroll.
DOCUMENT_SIZE = """() => ({
  scrollWidth: Math.max(document.documentElement.scrollWidth, document.body.scrollWidth),
  scrollHeight: Math.max(document.documentElement.scrollHeight, document.body.scrollHeight),
  innerWidth: window.innerWidth,
  innerHeight: window.innerHeight,
})"""


def no_page_scroll(page: Page) -> None:
    no_sideways_scroll(page)
    size = page.evaluate(DOCUMENT_SIZE)
    assert size["scrollHeight"] <= size["innerHeight"] + 1, size


def inside_viewport(page: Page, testid: str) -> None:
    box = page.locator(tid(testid)).bounding_box()
    assert box is not None, testid
    viewport = page.viewport_size
    assert viewport is not None
    assert box["x"] >= 0 and box["y"] >= 0, (testid, box)
    assert box["x"] + box["width"] <= viewport["width"], (testid, box)
    assert box["y"] + box["height"] <= viewport["height"], (testid, box)


def home(url: str) -> Callable[..., Any]:
    return conftest.home_with(url, {CHARACTER_ID: MIRA})


def open_panel(page: Page, tab: str) -> None:
    """A side panel from the phone's one panels menu."""
    menu = page.locator(tid("chat-panels-menu"))
    menu.click()
    expect(menu).to_have_attribute("aria-expanded", "true")
    page.locator(tid(f"chat-panels-{tab}")).click()
    expect(menu).to_have_attribute("aria-expanded", "false")
    expect(page.locator(f'{tid("chat-side")}[data-tab="{tab}"]')).to_be_visible()


def test_on_a_phone_the_message_box_stays_in_view_and_menus_fold(
    start_server: Callable[..., RunningServer], page: Page
) -> None:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(Reply(text=LONG_REPLY), Reply(text=LONG_REPLY), Reply(text=LONG_REPLY))
        server = start_server(home(llm.url))
        page.set_viewport_size(PHONE)
        conftest.start_chat(page, server, CHARACTER_ID)
        for n in range(3):
            send(page, f"Tell me about the road, part {n + 1}.")

        # The chat log scrolls; the page does not, and the message box is on screen.
        log = page.locator(tid("chat-log"))
        assert log.evaluate("el => el.scrollHeight > el.clientHeight + 100")
        inside_viewport(page, "chat-composer")
        no_page_scroll(page)
        log.evaluate("el => { el.scrollTop = 0 }")
        expect(messages(page).first).to_be_in_viewport()
        inside_viewport(page, "chat-composer")
        assert page.evaluate("() => window.scrollY") == 0
        page.screenshot(path=str(RESULTS_DIR / "phone-chat.png"))

        # The navigation is one button; the pages' links are behind it.
        nav_menu = page.locator(tid("nav-menu"))
        expect(nav_menu).to_be_visible()
        expect(nav_menu).to_have_attribute("aria-expanded", "false")
        expect(page.locator(tid("nav-writing"))).to_be_hidden()
        # The chat's panels are one menu too: no panel button of its own in the header.
        expect(page.locator(tid("chat-side-prompt"))).to_be_hidden()
        expect(page.locator(tid("chat-side-lore"))).to_be_hidden()
        panels = page.locator(tid("chat-panels-menu"))
        expect(panels).to_be_visible()
        # The header is one row: the log starts high on the screen.
        header = page.locator(".chat-head").bounding_box()
        assert header is not None and header["height"] <= 60, header

        # Escape closes the panels menu and gives the focus back to its button.
        panels.click()
        expect(panels).to_have_attribute("aria-expanded", "true")
        expect(page.locator(tid("chat-panels-list"))).to_be_visible()
        page.screenshot(path=str(RESULTS_DIR / "phone-chat-panels-menu.png"))
        page.keyboard.press("Escape")
        expect(panels).to_have_attribute("aria-expanded", "false")
        expect(page.locator(tid("chat-panels-list"))).to_be_hidden()
        expect(panels).to_be_focused()

        # The inspector and the chat's lore, each from the menu.
        open_panel(page, "prompt")
        expect(page.locator(tid("chat-prompt-panel"))).to_be_visible()
        no_sideways_scroll(page)
        page.screenshot(path=str(RESULTS_DIR / "phone-chat-inspector.png"))
        open_panel(page, "lore")
        expect(page.locator(f"{tid('chat-side')} {tid('chat-lore')}")).to_be_visible()
        no_page_scroll(page)
        page.screenshot(path=str(RESULTS_DIR / "phone-chat-lore.png"))
        page.click(tid("chat-side-close"))
        expect(page.locator(tid("chat-side"))).to_have_count(0)

        # The navigation menu: opens, closes on Escape, and reaches another page.
        nav_menu.click()
        expect(nav_menu).to_have_attribute("aria-expanded", "true")
        expect(page.locator(tid("nav-writing"))).to_be_visible()
        page.screenshot(path=str(RESULTS_DIR / "phone-nav-menu.png"))
        page.keyboard.press("Escape")
        expect(nav_menu).to_have_attribute("aria-expanded", "false")
        expect(page.locator(tid("nav-writing"))).to_be_hidden()
        expect(nav_menu).to_be_focused()
        nav_menu.click()
        page.click(tid("nav-writing"))
        expect(page).to_have_url(re.compile(r"/writing$"))
        expect(page.locator(tid("page-writing"))).to_be_visible()
        expect(nav_menu).to_have_attribute("aria-expanded", "false")
        expect(page.locator(tid("nav-chat"))).to_be_hidden()
        no_sideways_scroll(page)


PAGES = ["chat", "characters", "knowledge", "workflows", "writing", "tools", "settings"]


def test_on_a_phone_every_page_is_in_the_one_menu_and_fits_the_width(
    start_server: Callable[..., RunningServer], page: Page
) -> None:
    server = start_server(conftest.home_with(None))
    page.set_viewport_size(PHONE)
    page.goto(server.url + "chat")
    nav_menu = page.locator(tid("nav-menu"))
    for language in ("en", "zh"):
        page.locator(tid("lang-switch")).select_option(language)
        for name in PAGES:
            nav_menu.click()
            page.click(tid(f"nav-{name}"))
            expect(page.locator(tid(f"page-{name}"))).to_be_visible()
            expect(nav_menu).to_have_attribute("aria-expanded", "false")
            # The button names the page shown; the top bar stays one row.
            expect(nav_menu).to_contain_text(page.locator(tid(f"nav-{name}")).inner_text())
            top = page.locator("header.topbar").bounding_box()
            assert top is not None and top["height"] <= 56, (name, top)
            no_sideways_scroll(page)


def test_on_a_phone_the_writing_page_does_not_scroll_sideways(
    start_server: Callable[..., RunningServer], page: Page
) -> None:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    server = start_server(conftest.home_with(None))
    book = server.request("POST", "/api/writing/books", {"title": "The Salt Road"})
    text = "Mara stood on the quay at dawn. " * 40 + "\n\n" + "https://example.com/" + "x" * 200
    server.request(
        "POST", f"/api/writing/books/{book['id']}/chapters", {"title": "The Harbour", "text": text}
    )
    page.set_viewport_size(PHONE)
    page.goto(server.url + f"writing/{book['id']}")
    chapter = page.locator(tid("manuscript-chapter"))
    expect(chapter).to_have_count(1)
    no_sideways_scroll(page)
    chapter.click()
    editor = page.locator(tid("chapter-editor"))
    expect(editor).to_have_value(re.compile("Mara stood on the quay"))
    no_sideways_scroll(page)
    box = editor.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], box
    editor.scroll_into_view_if_needed()
    editor.click()
    page.keyboard.press("Control+End")
    page.keyboard.type(" The tide turned.")
    expect(page.locator(tid("chapter-save"))).to_be_enabled()
    no_sideways_scroll(page)
    page.screenshot(path=str(RESULTS_DIR / "phone-writing.png"), full_page=True)
    # Each of the tabs of what the book remembers fits too.
    tabs = page.locator('[data-testid^="writing-tab-"]')
    expect(tabs.first).to_be_visible()
    for n in range(tabs.count()):
        tabs.nth(n).click()
        expect(tabs.nth(n)).to_have_attribute("aria-selected", "true")
        no_sideways_scroll(page)


def test_at_1440_the_chat_s_lore_is_one_click_from_the_chat(
    start_server: Callable[..., RunningServer], page: Page
) -> None:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    with ReplayLLMServer(models=["test-model"]) as llm:
        server = start_server(home(llm.url))
        page.set_viewport_size(DESKTOP)
        conftest.start_chat(page, server, CHARACTER_ID)

        # The desktop keeps its navigation column and its row of panel buttons.
        expect(page.locator(tid("nav-writing"))).to_be_visible()
        expect(page.locator(tid("nav-menu"))).to_be_hidden()
        expect(page.locator(tid("chat-panels-menu"))).to_be_hidden()
        expect(page.locator(tid("chat-side-prompt"))).to_be_visible()

        lore = page.locator(tid("chat-side-lore"))
        lore.click()
        expect(lore).to_have_attribute("aria-pressed", "true")
        panel = page.locator(f'{tid("chat-side")}[data-tab="lore"] {tid("chat-lore")}')
        expect(panel).to_be_visible()
        expect(panel).to_be_in_viewport()
        inside_viewport(page, "chat-composer")
        no_page_scroll(page)
        page.screenshot(path=str(RESULTS_DIR / "desktop-chat-lore.png"))

        # The settings drawer no longer holds it.
        page.click(tid("chat-side-settings"))
        expect(page.locator(f'{tid("chat-side")}[data-tab="settings"]')).to_be_visible()
        expect(page.locator(tid("chat-lore"))).to_have_count(0)
