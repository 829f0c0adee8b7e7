"""The character editor with a long card, as a SillyTavern user meets it on day one.

At 1440×900 the editor takes the width of the window (two columns), its sections fold
(and stay folded after a reload), Save and its outcome stay in view at the bottom, and
leaving with unsaved edits asks first; at 390×844 it is one column, with no sideways
scroll and Save in view.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Dialog, Page, expect

from tests.browser import conftest
from tests.browser.conftest import no_sideways_scroll, tid

pytestmark = pytest.mark.browser

LONG = "long"
OTHER = "other"
PARAGRAPH = "The lighthouse keeper counts the ships that never come back. " * 12
LONG_CARD: dict[str, Any] = {
    "name": "Maren",
    "description": "\n\n".join([PARAGRAPH] * 8),
    "personality": PARAGRAPH,
    "scenario": PARAGRAPH,
    "first_mes": "\n\n".join([PARAGRAPH] * 3),
    "alternate_greetings": [PARAGRAPH, PARAGRAPH, PARAGRAPH],
    "mes_example": "\n".join(["<START>", "{{user}}: Hello?", "{{char}}: " + PARAGRAPH] * 4),
    "system_prompt": PARAGRAPH,
    "post_history_instructions": PARAGRAPH,
}
CARDS: dict[str, dict[str, Any]] = {
    LONG: LONG_CARD,
    OTHER: {"name": "Tomas", "description": "A fisherman."},
}


def open_page(browser: Browser, width: int, height: int) -> Iterator[Page]:
    context = browser.new_context(locale="en-US", viewport={"width": width, "height": height})
    context.set_default_timeout(15_000)
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def wide(browser: Browser) -> Iterator[Page]:
    yield from open_page(browser, 1440, 900)


@pytest.fixture
def phone(browser: Browser) -> Iterator[Page]:
    yield from open_page(browser, 390, 844)


def open_long_card(page: Page, server: Any) -> None:
    page.goto(server.url + f"characters/{LONG}")
    expect(page.locator(tid("character-field-name"))).to_have_value("Maren")


def test_a_long_card_uses_the_width_and_save_with_its_outcome_stays_in_view(
    start_server: Callable[..., Any], wide: Page
) -> None:
    server = start_server(conftest.home_with(None, CARDS))
    page = wide
    open_long_card(page, server)
    editor = page.locator(tid("character-editor"))
    box = editor.bounding_box()
    assert box is not None and box["width"] > 800, box
    # Two columns: the examples sit beside the description, not under it.
    description = page.locator(tid("character-section-description")).bounding_box()
    examples = page.locator(tid("character-section-mes_example")).bounding_box()
    assert description is not None and examples is not None
    assert examples["x"] > description["x"] + description["width"] - 1
    assert examples["y"] < description["y"] + description["height"]
    no_sideways_scroll(page)

    save = page.locator(tid("character-save"))
    assert page.evaluate("window.scrollY") == 0
    expect(save).to_be_in_viewport()
    page.fill(tid("character-field-scenario"), "A storm is coming.")
    expect(page.locator(tid("character-dirty"))).to_be_visible()
    save.click()
    notice = page.locator(tid("character-actions")).locator(tid("character-notice"))
    expect(notice).to_have_text("Saved.")
    expect(notice).to_be_in_viewport()
    card = server.api(f"/api/characters/{LONG}")["character"]
    assert card["scenario"] == "A storm is coming."

    # At the end of the card the bar is still there, not twice.
    page.locator(tid("character-field-creator_notes")).scroll_into_view_if_needed()
    expect(save).to_be_in_viewport()
    expect(page.locator(tid("character-save"))).to_have_count(1)


def test_a_folded_section_stays_folded_after_a_reload(
    start_server: Callable[..., Any], wide: Page
) -> None:
    server = start_server(conftest.home_with(None, CARDS))
    page = wide
    open_long_card(page, server)
    examples = page.locator(tid("character-field-mes_example"))
    expect(examples).to_be_visible()
    page.click(tid("character-section-toggle-mes_example"))
    expect(examples).to_be_hidden()
    # The folded title still says how much it holds.
    expect(page.locator(tid("tokens-mes_example"))).to_be_visible()
    page.reload()
    expect(page.locator(tid("character-field-name"))).to_have_value("Maren")
    expect(examples).to_be_hidden()
    expect(page.locator(tid("character-field-description"))).to_be_visible()
    # Per section, not per character: another card opens with it folded too.
    page.click(f'{tid("character-item")}[data-character-id="{OTHER}"]')
    expect(page.locator(tid("character-field-name"))).to_have_value("Tomas")
    expect(examples).to_be_hidden()
    page.click(tid("character-section-toggle-mes_example"))
    expect(examples).to_be_visible()
    page.reload()
    expect(page.locator(tid("character-field-mes_example"))).to_be_visible()


def test_leaving_with_unsaved_changes_asks_first(
    start_server: Callable[..., Any], wide: Page
) -> None:
    server = start_server(conftest.home_with(None, CARDS))
    page = wide
    open_long_card(page, server)
    asked: list[str] = []

    def answer(accept: bool) -> Callable[[Dialog], None]:
        def handle(dialog: Dialog) -> None:
            asked.append(dialog.message)
            if accept:
                dialog.accept()
            else:
                dialog.dismiss()

        return handle

    # Without changes, nothing asks.
    page.click(f'{tid("character-item")}[data-character-id="{OTHER}"]')
    expect(page.locator(tid("character-field-name"))).to_have_value("Tomas")
    assert asked == []

    page.fill(tid("character-field-personality"), "Gruff but kind.")
    # Another character, answered "stay": the edit is still there.
    page.once("dialog", answer(False))
    page.click(f'{tid("character-item")}[data-character-id="{LONG}"]')
    expect(page).to_have_url(re.compile(rf"/characters/{OTHER}$"))
    expect(page.locator(tid("character-field-personality"))).to_have_value("Gruff but kind.")
    assert len(asked) == 1 and "Tomas" in asked[0]
    # The page's other tab (personas), answered "stay".
    page.once("dialog", answer(False))
    page.click(tid("characters-tab-personas"))
    expect(page.locator(tid("character-field-personality"))).to_have_value("Gruff but kind.")
    assert len(asked) == 2
    # Another page, answered "stay", then "leave".
    page.once("dialog", answer(False))
    page.click(tid("nav-chat"))
    expect(page.locator(tid("character-field-personality"))).to_have_value("Gruff but kind.")
    expect(page).to_have_url(re.compile(rf"/characters/{OTHER}$"))
    page.once("dialog", answer(True))
    page.click(tid("nav-chat"))
    expect(page).to_have_url(re.compile(r"/chat"))
    assert len(asked) == 4
    assert server.api(f"/api/characters/{OTHER}")["character"]["personality"] == ""

    # Closing the tab with changes: the browser asks (its own question).
    page.goto(server.url + f"characters/{OTHER}")
    page.fill(tid("character-field-personality"), "Quiet.")
    unload: list[str] = []

    def on_unload(dialog: Dialog) -> None:
        unload.append(dialog.type)
        dialog.dismiss()

    page.once("dialog", on_unload)
    page.close(run_before_unload=True)
    expect(page.locator(tid("character-field-personality"))).to_have_value("Quiet.")
    assert unload == ["beforeunload"]


def test_on_a_phone_one_column_no_sideways_scroll_and_save_in_view(
    start_server: Callable[..., Any], phone: Page
) -> None:
    server = start_server(conftest.home_with(None, CARDS))
    page = phone
    open_long_card(page, server)
    no_sideways_scroll(page)
    description = page.locator(tid("character-section-description")).bounding_box()
    examples = page.locator(tid("character-section-mes_example")).bounding_box()
    assert description is not None and examples is not None
    assert examples["y"] > description["y"] + description["height"] - 1
    save = page.locator(tid("character-save"))
    expect(save).to_be_in_viewport()
    page.locator(tid("character-field-system_prompt")).scroll_into_view_if_needed()
    expect(save).to_be_in_viewport()
    page.fill(tid("character-field-system_prompt"), "Stay in character.")
    save.click()
    expect(page.locator(tid("character-notice"))).to_be_in_viewport()
    no_sideways_scroll(page)
