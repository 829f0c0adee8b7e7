"""Nothing a card carries is silently inactive, at 1440×900 and at 390×844: importing a
card with regex and Tavern Helper scripts asks what it may run (and its new chats follow
the answer), the character page lists every script with its status, the chat says which
of the card's scripts are off there (with a switch for this chat), and a reply whose lore
the budget cut says how many entries and which constant ones, with a link to the budget.

Before this change the import wrote the character and asked nothing (no
``card-scripts-question``), the character page had no Scripts section, the chat showed no
notice (``chat-scripts-notice`` / ``chat-lore-cut-notice`` never appeared) and the lore
budget could not be set from the web app (no ``lore-budget``): every test here failed at
its first such ``expect``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import pytest
from playwright.sync_api import Page, expect

from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.browser import conftest
from tests.browser.conftest import messages, no_sideways_scroll, send, side_panel, tid
from tests.fixtures.script_cards import budget_book_entries, scripted_card

pytestmark = pytest.mark.browser


def card(name: str = "小穗", *, book: bool = False) -> dict[str, Any]:
    """A card with two regex scripts (one draws a status bar with scripts) and two Tavern
    Helper scripts (MVU's bundle and one of its own); with ``book``, a lorebook whose two
    constant entries have the lowest order."""
    more = {"id": "r2", "scriptName": "去思考", "findRegex": "<think>", "placement": [2]}
    document = scripted_card(name, more_regex=[more])
    data: dict[str, Any] = document["data"]
    if book:
        entries = budget_book_entries()
        data["character_book"] = {"name": "港口", "entries": entries}
    return document


@pytest.fixture
def card_page(sized_page: Page) -> Page:
    sized_page.set_default_timeout(30_000)
    return sized_page


def _write(tmp_path: Path, document: dict[str, Any]) -> Path:
    path = tmp_path / "card.json"
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return path


def _character_id(page: Page) -> str:
    expect(page).to_have_url(re.compile(r"/characters/[^/?#]+"))
    found = re.search(r"/characters/([^/?#]+)", page.url)
    assert found is not None
    return unquote(found.group(1))


def test_the_import_question_lists_the_scripts_and_its_answer_reaches_a_new_chat(
    start_server: Callable[..., Any], card_page: Page, tmp_path: Path
) -> None:
    page = card_page
    server = start_server(conftest.home_with())
    page.goto(server.url + "characters")
    page.set_input_files(tid("character-import-file"), str(_write(tmp_path, card())))

    question = page.locator(tid("card-scripts-question"))
    expect(question).to_be_visible()
    form = "card-scripts-question-form"
    expect(page.locator(tid(f"{form}-regex"))).to_have_count(2)
    expect(page.locator(tid(f"{form}-regex")).first).to_contain_text("draws a page with scripts")
    helpers = page.locator(tid(f"{form}-helper"))
    expect(helpers).to_have_count(2)
    expect(helpers.nth(0)).to_contain_text("served by storyloom, never downloaded")
    expect(helpers.nth(1)).to_contain_text("日替")
    # The network is off until asked for, and asking for it warns.
    network = page.locator(tid(f"{form}-frame_network"))
    expect(network).not_to_be_checked()
    network.check()
    expect(page.locator(tid(f"{form}-network-warning"))).to_be_visible()
    network.uncheck()
    expect(page.locator(tid(f"{form}-regex_scripts"))).to_be_checked()
    page.locator(tid(f"{form}-helper-allow")).check()
    expect(page.locator(tid("card-scripts-allow"))).to_be_in_viewport()
    no_sideways_scroll(page)
    page.click(tid("card-scripts-allow"))
    expect(question).to_have_count(0)

    # The character page's Scripts section shows the answer.
    character_id = _character_id(page)
    section = page.locator(tid("character-scripts"))
    if not section.is_visible():
        page.click(tid("character-section-toggle-scripts"))
    rows = page.locator(tid("character-scripts-form-regex"))
    expect(rows.first).to_have_attribute("data-status", "runs")
    helper_rows = page.locator(tid("character-scripts-form-helper"))
    expect(helper_rows.nth(0)).to_have_attribute("data-status", "native")
    expect(helper_rows.nth(1)).to_have_attribute("data-status", "runs")
    no_sideways_scroll(page)

    # A new chat with the character starts with its regex (and page scripts) on.
    chat = server.request("POST", "/api/chats", {"character_id": character_id})
    page.goto(server.url + f"chat/{chat['id']}")
    expect(messages(page)).to_have_count(1)
    side_panel(page, "settings")
    expect(page.locator(tid("chat-settings-regex"))).to_be_checked()
    # Everything runs: the chat has nothing to say about scripts.
    expect(page.locator(tid("chat-scripts-notice"))).to_have_count(0)


def test_the_knowledge_pages_import_asks_the_same_question(
    start_server: Callable[..., Any], card_page: Page, tmp_path: Path
) -> None:
    page = card_page
    server = start_server(conftest.home_with())
    page.goto(server.url + "knowledge")
    page.set_input_files(tid("import-file"), str(_write(tmp_path, card(book=True))))
    expect(page.locator(tid("import-report"))).to_contain_text("小穗")
    question = page.locator(tid("card-scripts-question"))
    expect(question).to_be_visible()
    expect(page.locator(tid("card-scripts-question-form-regex"))).to_have_count(2)
    no_sideways_scroll(page)
    page.click(tid("card-scripts-allow"))
    expect(question).to_have_count(0)
    (character,) = server.api("/api/characters")["characters"]
    answer = server.api(f"/api/characters/{quote(character['id'])}")["scripts"]["permissions"]
    assert answer["asked"] and answer["regex_scripts"] and answer["frame_scripts"]
    assert not answer["frame_network"] and answer["helper_scripts"] == []


def test_not_now_stops_asking_and_the_scripts_section_changes_the_answer(
    start_server: Callable[..., Any], card_page: Page, tmp_path: Path
) -> None:
    page = card_page
    server = start_server(conftest.home_with())
    page.goto(server.url + "characters")
    page.set_input_files(tid("character-import-file"), str(_write(tmp_path, card())))
    expect(page.locator(tid("card-scripts-question"))).to_be_visible()
    page.click(tid("card-scripts-not-now"))
    expect(page.locator(tid("card-scripts-question"))).to_have_count(0)
    character_id = _character_id(page)
    answer = server.api(f"/api/characters/{quote(character_id)}")["scripts"]
    assert answer["needs_answer"] is False and answer["permissions"]["regex_scripts"] is False

    if not page.locator(tid("character-scripts")).is_visible():
        page.click(tid("character-section-toggle-scripts"))
    rows = page.locator(tid("character-scripts-form-regex"))
    expect(rows.first).to_have_attribute("data-status", "not_allowed")
    expect(rows.first.locator(".chip")).to_have_attribute(
        "title", "Waits for you to allow it for this character"
    )
    page.locator(tid("character-scripts-form-regex_scripts")).check()
    page.click(tid("character-scripts-save"))
    expect(rows.first).to_have_attribute("data-status", "runs")
    no_sideways_scroll(page)


def test_the_chat_says_which_scripts_are_off_and_switches_them_on_here(
    start_server: Callable[..., Any], card_page: Page, tmp_path: Path
) -> None:
    page = card_page
    # A character as an import leaves it (the card's JSON kept), never asked about.
    preset = {**card()["data"], "source_card": card()}
    server = start_server(conftest.home_with(characters={"sui": preset}))
    chat = server.request("POST", "/api/chats", {"character_id": "sui"})
    page.goto(server.url + f"chat/{chat['id']}")
    notice = page.locator(tid("chat-scripts-notice"))
    expect(notice).to_be_visible()
    expect(page.locator(tid("chat-scripts-notice-regex"))).to_have_text(
        "This card's 2 regex scripts are off in this chat."
    )
    expect(page.locator(tid("chat-scripts-notice-frames"))).to_have_text(
        "The scripts of its page (a status bar) are off in this chat."
    )
    expect(page.locator(tid("chat-scripts-notice-helper"))).to_have_text(
        "2 Tavern Helper scripts: 1 served by storyloom, 1 not allowed for this character."
    )
    no_sideways_scroll(page)
    page.click(tid("chat-scripts-switch-on"))
    expect(page.locator(tid("chat-scripts-notice-regex"))).to_have_count(0)
    expect(page.locator(tid("chat-scripts-notice-frames"))).to_have_count(0)
    settings = server.api(f"/api/chats/{chat['id']}")["conversation"]["settings"]
    assert settings["allow_regex_scripts"] is True and settings["allow_html_scripts"] is True
    # The helper script still waits: the link opens the character's Scripts section.
    expect(page.locator(tid("chat-scripts-notice-helper"))).to_be_visible()
    page.click(tid("chat-scripts-open"))
    expect(page).to_have_url(re.compile(r"/characters/sui#scripts$"))
    expect(page.locator(tid("character-scripts"))).to_be_visible()

    # Dismissed, it stays away in this chat until what it says changes.
    page.goto(server.url + f"chat/{chat['id']}")
    expect(notice).to_be_visible()
    page.click(tid("chat-scripts-notice-dismiss"))
    expect(notice).to_have_count(0)
    page.reload()
    expect(messages(page)).to_have_count(1)
    expect(notice).to_have_count(0)


def test_a_reply_whose_lore_the_budget_cut_says_so_and_links_the_budget(
    start_server: Callable[..., Any], card_page: Page, tmp_path: Path
) -> None:
    page = card_page
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(Reply(text="港口很平静。"))
        server = start_server(conftest.home_with(llm.url))
        path = _write(tmp_path, card("港口守", book=True))
        page.goto(server.url + "characters")
        page.set_input_files(tid("character-import-file"), str(path))
        page.click(tid("card-scripts-allow"))
        character_id = _character_id(page)
        settings = server.api("/api/lore/project")
        server.request("PUT", "/api/lore/project", {**settings, "budget_cap": 150})
        chat = server.request("POST", "/api/chats", {"character_id": character_id})
        page.goto(server.url + f"chat/{chat['id']}")
        expect(messages(page)).to_have_count(1)
        expect(page.locator(tid("chat-lore-cut-notice"))).to_have_count(0)
        send(page, "Tell me about the harbour.")
        notice = page.locator(tid("chat-lore-cut-notice"))
        expect(notice).to_be_visible()
        expect(notice).to_contain_text("The lore budget (150 tokens) left")
        expect(notice).to_contain_text("Among them the constant entries 扮演准则 and 世界设定.")
        no_sideways_scroll(page)
        page.click(tid("chat-lore-cut-budget"))
        expect(page).to_have_url(re.compile(r"/knowledge.*lore=budget"))
        cap = page.locator(tid("lore-budget-cap"))
        expect(cap).to_have_value("150")
        expect(page.locator(tid("lore-budget-percent"))).to_be_focused()
        cap.fill("0")
        page.click(tid("lore-budget-save"))
        expect(page.get_by_text("Lore budget saved.")).to_be_visible()
        assert server.api("/api/lore/project")["budget_cap"] == 0
        no_sideways_scroll(page)
