"""Importing a card twice on the Characters page, at 1440×900 and at 390×844: the second
import opens a dialog instead of silently making ``Seraphina_2``; cancel leaves one tile,
keep both makes two. The Knowledge page's import asks with the same dialog. (Before issue
27 the second import wrote a second character and showed no dialog, on either page.)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from storyloom.testing.st_documents import card_book_entry, card_document
from tests.browser import conftest
from tests.browser.conftest import no_sideways_scroll, tid

pytestmark = pytest.mark.browser


@pytest.fixture
def card_page(sized_page: Page) -> Page:
    """The page at each size, waiting longer: an import on a busy machine takes a while."""
    sized_page.set_default_timeout(30_000)
    return sized_page


def choose_card(page: Page, path: Path) -> None:
    page.set_input_files(tid("character-import-file"), str(path))


def test_importing_a_card_twice_asks_cancel_keeps_one_keep_both_makes_two(
    start_server: Callable[..., Any], card_page: Page, tmp_path: Path
) -> None:
    page = card_page
    card = card_document(
        "Seraphina", book=[card_book_entry(0, ["glade"], "The glade is Seraphina's home.")]
    )
    path = tmp_path / "Seraphina.json"
    path.write_text(json.dumps(card), encoding="utf-8")
    server = start_server(conftest.home_with())
    page.goto(server.url + "characters")
    tiles = page.locator(tid("character-item"))
    expect(tiles).to_have_count(0)

    choose_card(page, path)
    expect(page.locator(tid("characters-notice"))).to_contain_text("Seraphina")
    expect(tiles).to_have_count(1)
    # The card's book is shown under its character, not offered as a stray book.
    expect(page.locator(tid("character-card-book"))).to_have_count(1)

    choose_card(page, path)
    dialog = page.locator(tid("card-conflict"))
    expect(dialog).to_be_visible()
    expect(dialog).to_have_attribute("data-sameness", "identical")
    expect(dialog).to_contain_text("Seraphina is already in your library")
    # Its choices are on screen at either size.
    expect(page.locator(tid("card-conflict-keep-both"))).to_be_in_viewport()
    no_sideways_scroll(page)
    page.click(tid("card-conflict-cancel"))
    expect(dialog).to_have_count(0)
    expect(tiles).to_have_count(1)

    choose_card(page, path)
    expect(dialog).to_be_visible()
    page.click(tid("card-conflict-keep-both"))
    expect(dialog).to_have_count(0)
    expect(tiles).to_have_count(2)
    expect(page.locator(tid("characters-notice"))).to_contain_text("Seraphina")
    no_sideways_scroll(page)


def test_the_knowledge_page_asks_about_a_card_here_already_and_cancel_writes_nothing(
    start_server: Callable[..., Any], card_page: Page, tmp_path: Path
) -> None:
    """The Knowledge page's import is a door for cards too: the same card again opens the
    Characters page's dialog (before, it wrote ``Seraphina_2`` and reported it)."""
    page = card_page
    card = card_document(
        "Seraphina", book=[card_book_entry(0, ["glade"], "The glade is Seraphina's home.")]
    )
    path = tmp_path / "Seraphina.json"
    path.write_text(json.dumps(card), encoding="utf-8")
    server = start_server(conftest.home_with())
    page.goto(server.url + "knowledge")

    page.set_input_files(tid("import-file"), str(path))
    expect(page.locator(tid("import-report"))).to_contain_text("Seraphina")
    assert [c["name"] for c in server.api("/api/characters")["characters"]] == ["Seraphina"]

    page.set_input_files(tid("import-file"), str(path))
    dialog = page.locator(tid("card-conflict"))
    expect(dialog).to_be_visible()
    expect(dialog).to_have_attribute("data-sameness", "identical")
    expect(dialog).to_contain_text("Seraphina is already in your library")
    expect(page.locator(tid("import-report"))).to_have_count(0)
    page.click(tid("card-conflict-cancel"))
    expect(dialog).to_have_count(0)
    expect(page.locator(tid("import-error"))).to_have_count(0)
    assert [c["name"] for c in server.api("/api/characters")["characters"]] == ["Seraphina"]
    assert len(server.api("/api/knowledge/bases")["bases"]) == 1

    # Open it goes to the character on the Characters page.
    page.set_input_files(tid("import-file"), str(path))
    expect(dialog).to_be_visible()
    page.click(tid("card-conflict-open"))
    (here,) = server.api("/api/characters")["characters"]
    expect(page).to_have_url(server.url + f"characters/{here['id']}")
    expect(page.locator(tid("character-item"))).to_have_count(1)
    no_sideways_scroll(page)
