"""Day one on the Writing page (issue 27, items 5 and 10): real server, real Chromium.

With no model at all, the page says the book's memory steps are skipped, with the way to
Settings; the chapter reads as Markdown (a soft-wrapped paragraph is one paragraph, a hard
break stays a break); Provenance names chapters by their titles, not ``viking://``
addresses. With only a chat model, the Writing page, Settings and the agent profile
editor say the agent's work runs on that model.

Before this change the page said nothing of a missing model (the hint, the read view and
the notes did not exist: the waits below time out), and Provenance showed addresses.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, ViewportSize, expect

from storyloom.project.project_file import init_project
from storyloom.testing.replay_server import ReplayLLMServer
from tests.browser.conftest import RESULTS_DIR, RunningServer, home_with, no_sideways_scroll, tid

pytestmark = pytest.mark.browser

API = "/api/writing"
WIDE: ViewportSize = {"width": 1440, "height": 900}
PHONE: ViewportSize = {"width": 390, "height": 844}
# An editor wrapping at 40 columns, then a paragraph with hard breaks (two spaces, "\").
CHAPTER = (
    "Mara walked the harbour wall at dawn,\n"
    "her black hair tied back against the\n"
    "wind.\n"
    "\n"
    "The sign on the gate read:  \n"
    "NO BOATS\\\n"
    "AFTER DARK"
)


def project(home: Path) -> None:
    init_project(home / "projects" / "default")


def test_with_no_model_the_writing_page_says_memory_is_skipped_and_reads_markdown_paragraphs(
    start_server: Callable[..., RunningServer], page: Page
) -> None:
    server = start_server(project)
    book_id = server.request("POST", f"{API}/books", {"title": "The Salt Road"})["id"]
    book = f"{API}/books/{book_id}"
    server.request("POST", f"{book}/chapters", {"title": "Dawn"})
    server.request("POST", f"{book}/chapters", {"title": "Dusk"})

    page.set_viewport_size(WIDE)
    page.goto(server.url + f"writing/{book_id}")
    hint = page.locator(tid("agent-model-hint"))
    expect(hint).to_have_attribute("data-state", "none")
    expect(hint).to_contain_text("memory steps are skipped")
    expect(hint.locator(tid("agent-model-settings"))).to_have_attribute("href", "/settings")

    # Keeping the chapter: the memory steps that need a model say "skipped: no model".
    page.locator(tid("manuscript-chapter")).filter(has_text="Dawn").click()
    page.fill(tid("chapter-editor"), CHAPTER)
    page.click(tid("chapter-save"))
    curation = page.locator(tid("curation-status"))
    expect(curation).to_have_attribute("data-done", "true")
    for step in ("summarize", "extract"):
        row = curation.locator(f'{tid("curation-step")}[data-step="{step}"]')
        expect(row).to_have_attribute("data-state", "skipped")
        expect(row).to_contain_text("skipped: no model")
    expect(curation.locator(f'{tid("curation-step")}[data-step="profiles"]')).to_have_attribute(
        "data-state", "done"
    )

    # The chapter read as it prints: the wrapped paragraph is one <p>, no <br>.
    page.click(tid("chapter-mode-read"))
    paragraphs = page.locator(f"{tid('chapter-read')} p")
    expect(paragraphs).to_have_count(2)
    expect(paragraphs.first).to_have_text(
        "Mara walked the harbour wall at dawn, her black hair tied back against the wind."
    )
    expect(paragraphs.first.locator("br")).to_have_count(0)
    expect(paragraphs.nth(1).locator("br")).to_have_count(2)
    expect(paragraphs.nth(1)).to_have_text("The sign on the gate read:NO BOATSAFTER DARK")
    no_sideways_scroll(page)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(RESULTS_DIR / "writing-no-model-1440.png"), full_page=True)
    page.set_viewport_size(PHONE)
    expect(hint).to_be_visible()
    expect(paragraphs).to_have_count(2)
    no_sideways_scroll(page)
    page.screenshot(path=str(RESULTS_DIR / "writing-no-model-390.png"), full_page=True)
    page.set_viewport_size(WIDE)

    # Provenance names the chapter by its title; the address is the tooltip.
    page.click(tid("writing-tab-provenance"))
    page.fill(tid("provenance-chapter"), "2")
    page.click(tid("provenance-assemble"))
    dawn = page.locator(tid("provenance-title")).filter(has_text="1. Dawn").first
    expect(dawn).to_be_visible()
    expect(dawn).to_have_attribute(
        "title", f"viking://resources/{book_id}/manuscript/arc-01/chapter-001"
    )
    expect(page.locator(f"{tid('provenance-panel')} .writing-uri")).to_have_count(0)
    no_sideways_scroll(page)


def test_with_only_a_chat_model_the_pages_say_the_agent_uses_it(
    start_server: Callable[..., RunningServer], page: Page
) -> None:
    with ReplayLLMServer(models=["test-model"]) as llm:
        server = start_server(home_with(llm.url))
        book_id = server.request("POST", f"{API}/books", {"title": "The Salt Road"})["id"]
        page.set_viewport_size(WIDE)

        page.goto(server.url + f"writing/{book_id}")
        hint = page.locator(tid("agent-model-hint"))
        expect(hint).to_have_attribute("data-state", "user")
        expect(hint).to_contain_text("use your chat model: test-model")

        page.goto(server.url + "settings")
        expect(page.locator(tid("settings-agent_llm-note"))).to_have_text(
            "No agent model is set up: the agent uses your chat model: test-model"
        )

        page.goto(server.url + "tools?tab=agents")
        page.click(tid("agent-new"))
        expect(page.locator(tid("agent-role"))).to_have_value("agent")
        role = page.locator(".field", has=page.locator(tid("agent-role")))
        expect(role.locator(".hint")).to_have_text(
            "No agent model is set up: this agent uses your chat model: test-model"
        )
        no_sideways_scroll(page)
