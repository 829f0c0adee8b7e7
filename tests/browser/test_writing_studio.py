"""The writing studio end to end (issue 16): real server, real Chromium, two replay LLMs.

A novelist imports a three-chapter manuscript. Curation reads each chapter with the agent
model (scripted: Mara's eyes are green, the locket is planted in chapter 1 and due by
chapter 3). They write chapter 4 with the built-in chapter workflow: the draft gives Mara
blue eyes, so Role C sends it back once and then asks the author, who approves it. They
keep the chapter: it is stored at once, curated in the background, the profiles update,
and Role C's warning about the eyes appears; they mark it intentional and it goes quiet.
The provenance panel says why the model saw each piece of its context, the locket thread
is overdue, and the book exports as an EPUB holding all four chapters.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from storyloom.project.project_file import init_project
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.browser.conftest import RunningServer, tid

pytestmark = pytest.mark.browser

MANUSCRIPT = """# The Salt Road

## Chapter 1: The Harbour

Mara stood on the quay at dawn. Her green eyes followed the ships out past the breakwater.
Around her neck hung her mother's locket, closed since the funeral.

## Chapter 2: The Storm

The storm came in the night. Mara lashed the shutters and listened to the sea.

## Chapter 3: The Letter

A letter arrived from the lighthouse keeper, asking Mara to come before the tide turned.
"""

DRAFT = (
    "Mara climbed the spiral stair of the lighthouse. Mara's blue eyes searched the "
    "horizon for the keeper's boat, and the wind pulled at her coat."
)
REVISED = DRAFT + " At the top, the lamp was cold."
BLUE = {"subject": "Mara", "attribute": "eyes", "value": "blue", "category": "factual"}


def summary(l0: str) -> Reply:
    return Reply(text=json.dumps({"l0": l0, "l1": l0 + " Nothing else changes."}))


def extraction(**parts: object) -> Reply:
    return Reply(text=json.dumps({"facts": [], "entities": [], "relations": [], **parts}))


def claims(*found: dict[str, str]) -> Reply:
    evidence = "Mara's blue eyes searched the horizon for the keeper's boat."
    return Reply(text=json.dumps({"claims": [{**c, "evidence": evidence} for c in found]}))


def two_models(user_url: str, agent_url: str) -> Callable[[Path], None]:
    def prepare(home: Path) -> None:
        settings = {
            "user_llm": {"base_url": user_url, "model": "writer-model"},
            "agent_llm": {"base_url": agent_url, "model": "agent-model"},
        }
        (home / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
        init_project(home / "projects" / "default")

    return prepare


def test_a_novelist_imports_writes_keeps_checks_and_exports_a_book(
    start_server: Callable[..., RunningServer], page: Page, tmp_path: Path
) -> None:
    with (
        ReplayLLMServer(models=["writer-model"]) as writer,
        ReplayLLMServer(models=["agent-model"]) as agent,
    ):
        server = start_server(two_models(writer.url, agent.url))
        # Curation of the three imported chapters, in chapter order.
        agent.script(
            summary("Mara waits at the harbour wearing her mother's locket."),
            extraction(
                facts=[
                    {
                        "subject": "Mara",
                        "attribute": "eyes",
                        "value": "green",
                        "category": "factual",
                        "evidence": "Her green eyes followed the ships.",
                    }
                ],
                entities=[
                    {"path": "/entities/characters/mara", "title": "Mara", "aliases": ["Mara"]}
                ],
                threads=[
                    {
                        "path": "/entities/plot-threads/the-locket",
                        "title": "The locket",
                        "planted": 1,
                        "due": 3,
                    }
                ],
            ),
            summary("A storm; Mara shutters the house."),
            extraction(),
            summary("A letter calls Mara to the lighthouse."),
            extraction(),
        )

        page.goto(server.url + "writing")
        expect(page.locator(tid("ws-status"))).to_have_attribute("data-status", "connected")
        manuscript = tmp_path / "the-salt-road.md"
        manuscript.write_text(MANUSCRIPT, encoding="utf-8")
        page.locator(tid("writing-import-file")).set_input_files(str(manuscript))
        preview = page.locator(tid("writing-import-preview"))
        expect(preview.locator(tid("writing-import-chapter"))).to_have_count(3)
        preview.locator(tid("writing-import-confirm")).click()

        chapters = page.locator(tid("manuscript-chapter"))
        expect(chapters).to_have_count(3)
        expect(chapters.first).to_contain_text("The Harbour")
        expect(chapters.first.locator(tid("chapter-words"))).not_to_have_text("0")
        (book,) = server.api("/api/writing/books")
        book_id = book["id"]
        wait_until_curated(page, server, book_id, 3)

        # Chapter 4 with the chapter workflow.
        agent.script(
            Reply(text="Plan: Mara climbs the lighthouse and finds the lamp cold."),
            Reply(text=json.dumps({"entities": ["Mara"], "sceneType": "action"})),  # intent
            claims(BLUE),  # Role C on the first draft
            claims(BLUE),  # … and on the retry
            claims(BLUE),  # the check node
        )
        writer.script(Reply(text=DRAFT), Reply(text=DRAFT), Reply(text=REVISED))
        page.fill(tid("write-brief"), "Mara climbs the lighthouse to find the keeper.")
        page.click(tid("write-chapter"))
        stream = page.locator(tid("writing-stream"))
        expect(stream).to_contain_text("Mara climbed the spiral stair")
        # Role C sent the draft back once, then asks the author: they keep the blue eyes.
        expect(page.locator(tid("human-panel"))).to_contain_text("eyes")
        page.click(tid("human-approve"))
        evaluation = page.locator(tid("run-evaluation")).first
        expect(evaluation).to_have_attribute("data-decision", "flag-human")
        expect(evaluation).to_contain_text("expected “green” (since ch. 1), found “blue”")
        # The author's final choice.
        expect(page.locator(tid("human-panel"))).to_be_visible()
        page.click(tid("human-approve"))
        expect(page.locator(tid("keep-output"))).to_be_enabled()
        second_prompt = json.dumps(writer.chat_requests[1]["messages"], ensure_ascii=False)
        assert "green" in second_prompt, "the retry prompt carries Role C's findings"

        # Keep it: stored at once, curated in the background, profiles updated.
        agent.script(
            summary("Mara climbs the lighthouse; the lamp is cold."),
            extraction(facts=[{**BLUE, "evidence": "Mara's blue eyes searched the horizon."}]),
        )
        page.click(tid("keep-output"))
        expect(chapters).to_have_count(4)
        # What is kept is the chapter as the author approved it, nothing else.
        chapters.nth(3).click()
        expect(page.locator(tid("chapter-editor"))).to_have_value(REVISED)
        expect(page.locator(tid("profiles-updated"))).to_be_visible(timeout=30_000)
        wait_until_curated(page, server, book_id, 4)

        # The provenance of the draft's prompt: why the model saw each piece.
        page.click(tid("writing-tab-provenance"))
        pieces = page.locator(tid("provenance-piece"))
        expect(pieces.first).to_be_visible()
        # Each piece is named by its chapter's title or its entity's name; the address is
        # only the tooltip.
        expect(page.locator(tid("provenance-title")).first).to_have_attribute(
            "title", re.compile(r"^viking://resources/")
        )
        expect(page.locator(tid("provenance-panel"))).not_to_contain_text("viking://")
        expect(page.locator(tid("provenance-title")).filter(has_text="Mara").first).to_be_visible()
        profile = pieces.and_(page.locator('[data-uri$="/profiles/characters/mara"]'))
        expect(profile.locator(tid("provenance-reason"))).to_contain_text("Mara")
        pieces.first.locator(tid("provenance-expand")).click()
        expect(pieces.first.locator(tid("provenance-text"))).not_to_be_empty()

        # Mara's profile as of chapter 3 and now.
        page.click(tid("writing-tab-profiles"))
        page.locator(tid("profile-item")).filter(has_text="Mara").first.click()
        page.click(tid("level-L1"))
        expect(page.locator(tid("profile-text"))).to_contain_text("eyes: green")

        # Role C's warning on the blue eyes, marked intentional: it goes quiet.
        page.click(tid("writing-tab-warnings"))
        warning = page.locator(tid("warning-item")).filter(has_text="eyes")
        expect(warning).to_have_count(1)
        expect(warning).to_contain_text("blue")
        warning.locator(tid("warning-intentional")).click()
        expect(page.locator(tid("warning-item")).filter(has_text="eyes")).to_have_count(0)
        page.click(tid("warnings-show-intentional"))
        expect(page.locator(tid("warning-intentional-badge"))).to_have_count(1)
        stored = server.api(f"/api/writing/books/{book_id}/warnings")
        assert [w["intentional"] for w in stored] == [True]

        # The locket was due by chapter 3 and never paid off.
        page.click(tid("writing-tab-threads"))
        locket = page.locator(tid("thread-item")).filter(has_text="The locket")
        expect(locket.locator(tid("thread-overdue"))).to_be_visible()

        # The book as an EPUB.
        with page.expect_download() as download:
            page.click(tid("export-epub"))
        epub = tmp_path / "book.epub"
        download.value.save_as(epub)
        with zipfile.ZipFile(epub) as archive:
            text = " ".join(
                archive.read(name).decode("utf-8")
                for name in archive.namelist()
                if name.endswith(".xhtml")
            )
        for expected in ("The Harbour", "The Storm", "The Letter", "the lamp was cold"):
            assert expected in text, expected


def wait_until_curated(page: Page, server: RunningServer, book_id: str, count: int) -> None:
    """Every kept output's curation finished (each step done)."""

    def done() -> bool:
        outputs = server.api(f"/api/writing/books/{book_id}/outputs")
        finished = [o for o in outputs if all(s == "done" for s in o["steps"].values())]
        failed = [o for o in outputs if o.get("error")]
        assert not failed, failed
        return len(finished) >= count

    for _ in range(300):
        if done():
            return
        page.wait_for_timeout(100)
    pytest.fail(f"curation of {count} outputs did not finish: {server.log()[-3000:]}")
