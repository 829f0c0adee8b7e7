"""The author corrects the book's memory on the Writing page (issue 25): real server, real
Chromium, no model at all.

Mara's black hair is the author's fact; chapter 2 is kept and the offline curation reads
that she dyed it silver. On the Entities tab the author sees both facts with the
sentences they came from, corrects the silver to white (the profile follows), rejects a
wrong fact (it moves to the rejected list, and back when un-rejected), and merges "The
Captain" into Mara: the name becomes her alias and the Captain's fact is hers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from storyloom.project.project_file import init_project
from tests.browser.conftest import RunningServer, tid

pytestmark = pytest.mark.browser

API = "/api/writing"
MARA = "/entities/characters/mara"
CAPTAIN = "/entities/characters/the-captain"
CHAPTER_2 = "Mara stood at the rail. Mara had dyed it, and now Mara's silver hair caught the wind."


def project(home: Path) -> None:
    init_project(home / "projects" / "default")


def wait_until_curated(server: RunningServer, book_id: str, output_id: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        outputs = server.api(f"{API}/books/{book_id}/outputs")
        steps = [set(o["steps"].values()) for o in outputs if o["outputId"] == output_id]
        if steps and steps[0] <= {"done", "skipped"}:
            return
        assert time.monotonic() < deadline, f"curation did not finish: {outputs}"
        time.sleep(0.1)


def test_the_author_corrects_facts_and_merges_two_names_on_the_writing_page(
    start_server: Callable[..., RunningServer], page: Page
) -> None:
    server = start_server(project)
    book_id = server.request("POST", f"{API}/books", {"title": "The Salt Road"})["id"]
    book = f"{API}/books/{book_id}"
    for title in ("Mara", "The Captain"):
        server.request("POST", f"{book}/entities", {"kind": "character", "title": title})
    server.request(
        "POST",
        f"{book}/facts",
        {
            "subject": MARA,
            "attribute": "hair",
            "value": "black",
            "chapter": 1,
            "category": "characterization",
            "evidence": "Her black hair was tied back against the wind.",
        },
    )
    server.request(
        "POST",
        f"{book}/facts",
        {"subject": CAPTAIN, "attribute": "rank", "value": "captain", "chapter": 1},
    )
    server.request("POST", f"{book}/chapters", {"title": "One"})
    server.request("POST", f"{book}/chapters", {"title": "Two"})
    saved = server.request("PUT", f"{book}/chapters/2", {"text": CHAPTER_2})
    wait_until_curated(server, book_id, saved["outputId"])

    page.goto(server.url + f"writing/{book_id}")
    page.click(tid("writing-tab-entities"))
    page.locator(tid("entity-item")).filter(has_text="Mara").click()
    facts = page.locator(tid("resource-fact"))
    expect(facts).to_have_count(2)
    silver = facts.filter(has_text="silver")
    expect(silver.locator(tid("fact-evidence"))).to_have_text(
        "Mara had dyed it, and now Mara's silver hair caught the wind."
    )
    expect(silver.locator(tid("fact-source"))).to_have_text("read from the prose")
    expect(facts.filter(has_text="black").locator(tid("fact-evidence"))).to_contain_text(
        "Her black hair"
    )

    # Correct the value: a new version, made by the author; the profile follows.
    silver.locator(tid("fact-edit")).click()
    page.fill(tid("fact-value-input"), "white")
    page.click(tid("fact-save"))
    white = facts.filter(has_text="white")
    expect(white.locator(tid("fact-value"))).to_have_text("white")
    expect(white.locator(tid("fact-source"))).to_have_text("author")
    expect(page.locator(tid("fact-value"))).to_have_text(["black", "white"])
    history = server.api(f"{book}/facts/history?subject={MARA}&attribute=hair&chapter=2")
    assert [(h["action"], h["value"]) for h in history] == [("set", "silver"), ("edit", "white")]
    profile = server.api(f"{book}/resource?path=/profiles/characters/mara")
    assert "hair: white" in profile["levels"]["L1"]["text"]

    # Reject the black hair: it moves to the rejected list; undo brings it back.
    facts.filter(has_text="black").locator(tid("fact-reject")).click()
    expect(facts).to_have_count(1)
    rejected = page.locator(tid("rejected-fact"))
    expect(rejected).to_have_count(1)
    expect(rejected).to_contain_text("black")
    rejected.locator(tid("fact-unreject")).click()
    expect(facts).to_have_count(2)
    expect(page.locator(tid("rejected-fact"))).to_have_count(0)

    # Two names for one person: the Captain is Mara.
    page.locator(tid("entity-item")).filter(has_text="The Captain").click()
    expect(page.locator(tid("resource-fact"))).to_have_count(1)
    page.select_option(tid("entity-merge-into"), MARA)
    page.click(tid("entity-merge-go"))
    viewer = page.locator(tid("resource-viewer"))
    expect(viewer).to_have_attribute("data-path", MARA)
    expect(viewer).to_contain_text("Also called: The Captain")
    expect(page.locator(tid("resource-fact"))).to_have_count(3)
    expect(page.locator(tid("entity-item")).filter(has_text="The Captain")).to_have_count(0)
