"""The writing studio learns a book from its prose (issue 25): real server, real Chromium,
no model at all (the offline prose reader does the reading).

An author starts a book on the Writing page and imports a three-chapter manuscript file.
Curation reads it: Mara Quill's green eyes, her brother, her trade and her home in
Lisbon, each with the sentence it came from; Tomas Reyes dies of the fever in chapter 3.
On the Entities tab the author sees Mara's facts with their sentences and chapters and
corrects her eyes to grey. They add chapter 4 and write in the editor that Tomas speaks;
Role C's warning names him, his status, the chapter and the sentence that killed him.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect

from storyloom.project.project_file import init_project
from tests.browser.conftest import RunningServer, tid

pytestmark = pytest.mark.browser

API = "/api/writing"
MARA = "/entities/characters/mara-quill"
TOMAS = "/entities/characters/tomas-reyes"

EYES = "Mara Quill had green eyes that missed very little."
BROTHER = "Her brother, Elias Quill, was waiting at the end of the pier with two cups of coffee."
TRADE = "Mara Quill was a cartographer, and the harbour master paid her to keep the charts honest."
HOME = "Mara Quill lived in Lisbon, in two rooms above a bakery on a steep street."
DEATH = "Tomas Reyes died of the fever before the thaw."
SPEAKS = '"Not tonight," Tomas Reyes said.'

MANUSCRIPT = f"""# The Lamplighter's Winter

## Chapter 1: The Harbour

Mara Quill came down to the harbour before the fishing boats were out. The gulls were
loud over the slipway, and the tide was turning.

{EYES} She counted the crates twice and wrote the numbers in a small book she kept in
her coat.

{BROTHER} Elias Quill never said good morning; he only handed her a cup and looked at
the sky.

## Chapter 2: The Map Room

The map room smelled of ink and old paper. {TRADE}

{HOME} In the evenings she walked home along the river and watched the ferries cross.

A fisherman called Tomas Reyes came to the map room on a wet afternoon. He coughed into
his sleeve and asked for a chart of the northern shoals. Tomas Reyes paid in old coins
and did not wait for his change.

## Chapter 3: The Fever

That winter the fever came up the river with the grain barges. Half the street kept to
their beds, and the bakery closed its shutters.

Mara Quill carried soup to the houses by the water. Elias Quill told her to stay away
from the sick, and she did not listen.

{DEATH} They buried him on a grey morning, and Mara Quill kept the chart of Tomas Reyes
rolled on the table by the window.
"""

CHAPTER_4 = f"""The thaw came late. Mara Quill unrolled the old chart by the window and
weighted its corners with stones.

Someone knocked at the door of the map room. {SPEAKS} The voice was hoarse, as it had
been on that wet afternoon.
"""


def project(home: Path) -> None:
    init_project(home / "projects" / "default")


def fact(page: Page, attribute: str) -> Locator:
    return page.locator(f'{tid("resource-fact")}[data-attribute="{attribute}"]')


def test_the_studio_learns_an_imported_manuscript_and_warns_of_a_dead_man_who_speaks(
    start_server: Callable[..., RunningServer], page: Page, tmp_path: Path
) -> None:
    server = start_server(project)
    page.goto(server.url + "writing")
    expect(page.locator(tid("ws-status"))).to_have_attribute("data-status", "connected")

    # A new book, then its manuscript from a file.
    page.click(tid("writing-new-book"))
    page.fill(tid("writing-book-title"), "The Lamplighter's Winter")
    page.click(tid("writing-create-book"))
    expect(page).to_have_url(re.compile(r"/writing/[^/]+$"))
    book_id = page.url.rstrip("/").rsplit("/", 1)[-1]
    manuscript = tmp_path / "the-lamplighters-winter.md"
    manuscript.write_text(MANUSCRIPT, encoding="utf-8")
    page.locator(tid("writing-import-file")).set_input_files(str(manuscript))
    preview = page.locator(tid("writing-import-preview"))
    titles = preview.locator(tid("writing-import-chapter-title"))
    expect(titles).to_have_count(3)
    for index, title in enumerate(["The Harbour", "The Map Room", "The Fever"], 1):
        expect(titles.nth(index - 1)).to_have_value(f"Chapter {index}: {title}")
    preview.locator(tid("writing-import-confirm")).click()
    expect(preview).to_have_count(0)
    expect(page.locator(tid("manuscript-chapter"))).to_have_count(3)

    # The page follows the import's curation as a whole until every chapter is learned.
    progress = page.locator(tid("import-curation"))
    expect(progress).to_have_attribute("data-total", "3")
    expect(progress).to_have_attribute("data-done", "true", timeout=90_000)
    expect(progress.locator(tid("import-curation-text"))).to_have_text(
        "All 3 chapters are curated: the book's memory is up to date."
    )
    expect(progress.locator(tid("import-curation-failure"))).to_have_count(0)
    outputs = server.api(f"{API}/books/{book_id}/outputs")
    assert sorted(o["chapter"] for o in outputs) == [1, 2, 3]
    assert all(set(o["steps"].values()) <= {"done", "skipped"} for o in outputs), outputs

    # Mara's facts, each with the sentence and chapter it was read from.
    page.click(tid("writing-tab-entities"))
    page.locator(tid("entity-item")).filter(has_text="Mara Quill").click()
    expect(page.locator(tid("resource-viewer"))).to_have_attribute("data-path", MARA)
    for attribute, value, chapter, sentence in [
        ("eyes", "green", 1, EYES),
        ("brother", "Elias Quill", 1, BROTHER),
        ("occupation", "cartographer", 2, TRADE),
        ("home", "Lisbon", 2, HOME),
    ]:
        shown = fact(page, attribute)
        expect(shown).to_have_count(1)
        expect(shown.locator(tid("fact-value"))).to_have_text(value)
        expect(shown.locator(tid("fact-evidence"))).to_have_text(sentence)
        expect(shown.locator(tid("fact-source"))).to_have_text("read from the prose")
        expect(shown).to_have_attribute("data-chapter", str(chapter))
        expect(shown).to_contain_text(f"from ch. {chapter}")

    # The author corrects the eyes: grey, by the author, from the same sentence.
    fact(page, "eyes").locator(tid("fact-edit")).click()
    page.fill(tid("fact-value-input"), "grey")
    page.click(tid("fact-save"))
    eyes = fact(page, "eyes")
    expect(eyes.locator(tid("fact-value"))).to_have_text("grey")
    expect(eyes.locator(tid("fact-source"))).to_have_text("author")
    expect(eyes.locator(tid("fact-evidence"))).to_have_text(EYES)
    stored = server.api(f"{API}/books/{book_id}/facts?subject={MARA}")["facts"]
    kept = [(f["value"], f["source"], f["chapter"]) for f in stored if f["attribute"] == "eyes"]
    assert kept == [("grey", "author", 1)]

    # Chapter 4, written in the editor: the dead man speaks.
    page.fill(tid("chapter-add-title"), "The Thaw")
    page.click(tid("chapter-add"))
    expect(page.locator(tid("manuscript-chapter"))).to_have_count(4)
    editor = page.locator(tid("chapter-editor"))
    expect(editor).to_have_value("")
    editor.fill(CHAPTER_4)
    page.click(tid("chapter-save"))
    expect(page.locator(tid("chapter-save-status"))).to_have_text(
        "Saved; the book's memory is being updated."
    )
    curation = page.locator(tid("curation-status"))
    expect(curation).to_contain_text("4")
    expect(curation).to_have_attribute("data-done", "true", timeout=60_000)

    # Role C's warning: who, which fact, which chapter, and the sentence behind it.
    page.click(tid("writing-tab-warnings"))
    warning = page.locator(tid("warning-item")).filter(has_text="Tomas Reyes")
    expect(warning).to_have_count(1)
    expect(warning).to_have_attribute("data-chapter", "4")
    expect(warning.locator(tid("warning-detail"))).to_contain_text("Tomas Reyes · status: “dead”")
    expect(warning.locator(tid("warning-detail"))).to_contain_text("yet acts or speaks")
    expect(warning.locator(tid("warning-fact-evidence"))).to_have_text(
        f"Established in chapter 3: “{DEATH}”"
    )
    expect(warning.locator(tid("warning-text-evidence"))).to_contain_text("Chapter 4 says:")
    expect(warning.locator(tid("warning-text-evidence"))).to_contain_text(SPEAKS)
    (stored_warning,) = [
        w for w in server.api(f"{API}/books/{book_id}/warnings?chapter=4") if w["subject"] == TOMAS
    ]
    assert stored_warning["sinceChapter"] == 3
    assert stored_warning["factEvidence"] == DEATH
