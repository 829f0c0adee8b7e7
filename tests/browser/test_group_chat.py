"""A three-character group chat end to end: real server, real browser, the scripted
OpenAI-style endpoint. Natural order (a name in a reply makes that member speak next), a
manual turn ("speaks next"), muting, and manual order where the user's message waits for
the user's pick. Each reply must reach the model with its speaker's card."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.browser.conftest import RESULTS_DIR, home_with, messages, no_sideways_scroll, tid

pytestmark = pytest.mark.browser

# Talkativeness 0: only a mention (or the user's pick) decides who speaks, so the test
# does not depend on the rolls.
QUIET = {"talkativeness": "0"}
CARDS: dict[str, dict[str, Any]] = {
    "ann": {"name": "Ann", "description": "ANN-CARD a ranger.", "first_mes": "Ann waves.",
            "extensions": QUIET},
    "bo": {"name": "Bo", "description": "BO-CARD a smith.", "first_mes": "Bo grunts.",
           "extensions": QUIET},
    "cy": {"name": "Cy", "description": "CY-CARD a scholar.", "first_mes": "Cy bows.",
           "extensions": QUIET},
}  # fmt: skip


def with_llm_and_characters(url: str) -> Callable[[Path], None]:
    return home_with(url, CARDS)


def speakers(page: Page) -> list[str]:
    return [n.strip() for n in messages(page).locator(tid("chat-message-name")).all_inner_texts()]


def member(page: Page, member_id: str) -> Locator:
    return page.locator(f'{tid("group-member")}[data-member-id="{member_id}"]')


def last_reply_done(page: Page, count: int) -> Locator:
    expect(messages(page)).to_have_count(count)
    last = messages(page).last
    expect(last).to_have_attribute("data-status", "complete")
    return last


def system_text(llm: ReplayLLMServer) -> str:
    sent = llm.chat_requests[-1]["messages"]
    return "\n".join(str(m.get("content")) for m in sent if m.get("role") == "system")


def test_a_three_character_group_with_natural_order_and_a_manual_turn(
    start_server: Callable[..., Any], page: Page
) -> None:
    with ReplayLLMServer(models=["test-model"]) as llm:
        server = start_server(with_llm_and_characters(llm.url))
        page.goto(server.url + "chat")
        expect(page.locator(tid("ws-status"))).to_have_attribute("data-status", "connected")

        # A new group of three, natural order.
        page.click(tid("group-new"))
        for cid in ("ann", "bo", "cy"):
            page.check(f'{tid("group-new-character")}[data-character-id="{cid}"]')
        expect(page.locator(tid("group-new-strategy"))).to_have_value("natural")
        page.click(tid("group-create"))
        expect(page).to_have_url(re.compile(r"/chat/[0-9a-f]+$"))
        expect(page.locator(tid("group-member"))).to_have_count(3)
        expect(messages(page)).to_have_count(3)
        assert speakers(page) == ["Ann", "Bo", "Cy"]
        expect(page.locator(tid("group-auto"))).not_to_be_checked()
        # The conversation list marks it as a group of three.
        listed = page.locator(f'{tid("chat-conversation")}[data-group="true"]')
        expect(listed.locator(tid("chat-conversation-group"))).to_contain_text("3")

        # The user names Bo: Bo answers, with Bo's card.
        llm.script(Reply(text="Hm. Ask Cy, she reads the old maps."))
        page.fill(tid("chat-input"), "Bo, can you forge a key?")
        page.press(tid("chat-input"), "Enter")
        last = last_reply_done(page, 5)
        expect(last.locator(tid("chat-message-name"))).to_have_text("Bo")
        assert "BO-CARD" in system_text(llm) and "CY-CARD" not in system_text(llm)

        # Bo's reply names Cy: natural order makes Cy speak next.
        llm.script(Reply(text="The map shows a door under the bridge."))
        page.click(tid("group-next"))
        last = last_reply_done(page, 6)
        expect(last.locator(tid("chat-message-name"))).to_have_text("Cy")
        expect(last).to_contain_text("door under the bridge")
        assert "CY-CARD" in system_text(llm)

        # A manual turn: the user picks Ann.
        llm.script(Reply(text="I will scout the bridge."))
        member(page, "ann").locator(tid("group-speak")).click()
        last = last_reply_done(page, 7)
        expect(last.locator(tid("chat-message-name"))).to_have_text("Ann")
        assert "ANN-CARD" in system_text(llm)
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(RESULTS_DIR / "group-chat.png"))

        # Mute Bo; manual order: the user's message waits for a pick, and a muted member
        # speaks when picked by name.
        member(page, "bo").locator(tid("group-mute")).click()
        expect(member(page, "bo").locator(tid("group-mute"))).to_have_attribute(
            "aria-pressed", "true"
        )
        page.select_option(tid("group-strategy"), "manual")
        expect(page.locator(tid("group-strategy"))).to_have_value("manual")
        page.fill(tid("chat-input"), "Everyone, rest now.")
        page.press(tid("chat-input"), "Enter")
        expect(messages(page)).to_have_count(8)
        expect(messages(page).last).to_have_attribute("data-role", "user")
        expect(page.locator(tid("chat-send"))).to_be_visible()
        llm.script(Reply(text="Bo sharpens the axe in silence."))
        member(page, "bo").locator(tid("group-speak")).click()
        last = last_reply_done(page, 9)
        expect(last.locator(tid("chat-message-name"))).to_have_text("Bo")

        # After a reload the group and its speakers are as they were.
        page.reload()
        expect(messages(page)).to_have_count(9)
        assert speakers(page)[-1] == "Bo"
        expect(page.locator(tid("group-strategy"))).to_have_value("manual")

        # On a phone the group bar wraps instead of scrolling sideways.
        page.set_viewport_size({"width": 390, "height": 844})
        bar = page.locator(tid("group-bar"))
        expect(bar).to_be_visible()
        expect(member(page, "ann")).to_be_visible()
        overflow = bar.evaluate("el => el.scrollWidth - el.clientWidth")
        assert overflow <= 0, f"the group bar scrolls sideways by {overflow}px at 390 px"
        page.screenshot(path=str(RESULTS_DIR / "group-chat-390.png"))


def test_a_member_without_a_picture_has_a_face_beside_its_message(
    start_server: Callable[..., Any], sized_page: Page
) -> None:
    """At 1440×900 and at 390×844: a generated face (initials on a colour), no 404."""
    page = sized_page
    viewport = page.viewport_size
    assert viewport is not None
    failed: list[str] = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.on("requestfailed", lambda r: failed.append(f"failed {r.url}"))
    with ReplayLLMServer(models=["test-model"]) as llm:
        # None of the cards has a picture.
        server = start_server(with_llm_and_characters(llm.url))
        page.goto(server.url + "chat")
        expect(page.locator(tid("ws-status"))).to_have_attribute("data-status", "connected")
        page.click(tid("group-new"))
        for cid in ("ann", "bo"):
            page.check(f'{tid("group-new-character")}[data-character-id="{cid}"]')
        page.click(tid("group-create"))
        expect(page).to_have_url(re.compile(r"/chat/[0-9a-f]+$"))
        expect(messages(page)).to_have_count(2)
        for index, name in enumerate(("Ann", "Bo")):
            face = messages(page).nth(index).locator(f"img{tid('chat-message-avatar')}")
            expect(face).to_have_attribute("alt", name)
            expect(face).to_be_visible()
            page.wait_for_function(
                "img => img.complete && img.naturalWidth > 0", arg=face.element_handle()
            )
        no_sideways_scroll(page)
        page.screenshot(path=str(RESULTS_DIR / f"group-generated-faces-{viewport['width']}.png"))
    assert [f for f in failed if "/avatar" in f] == []
