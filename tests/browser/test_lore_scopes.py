"""Which lore goes into a chat, as a SillyTavern user walks it: import a card with its own
book and a separate world book on the Knowledge page, chat with the card (only the card's
book is in the prompt), bind the world book to the chat in its settings (it is in the
next prompt); and a book a chat uses is deleted only after the user sees which and agrees.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.testing.st_documents import (
    card_book_entry,
    card_document,
    world_info_document,
    world_info_entry,
)
from tests.browser.conftest import RESULTS_DIR, messages, send, tid
from tests.browser.conftest import home_with as with_llm

pytestmark = pytest.mark.browser

GLADE = "The glade is where Seraphina tends the wounded."
QIN = "The Qin unified the warring states in 221 BC."
CARD = card_document(
    "Seraphina",
    book=[card_book_entry(0, ["glade"], GLADE)],
    book_name="Seraphina's Forest",
    first_mes="*Seraphina smiles.* You are safe here.",
)
BOOK = world_info_document([world_info_entry(0, ["Qin"], QIN)], name="Qin History")


def files(tmp_path: Path) -> tuple[Path, Path]:
    card = tmp_path / "main_Seraphina_v2.json"
    card.write_text(json.dumps(CARD), encoding="utf-8")
    book = tmp_path / "download (7).json"
    book.write_text(json.dumps(BOOK), encoding="utf-8")
    return card, book


def import_file(page: Page, path: Path) -> Locator:
    page.set_input_files(tid("import-file"), str(path))
    report = page.locator(tid("import-report"))
    expect(report).to_contain_text(path.name)
    return report


def post(server: Any, path: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        server.url.rstrip("/") + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        return json.loads(resp.read())


def prompt_text(llm: ReplayLLMServer) -> str:
    return "\n".join(str(m.get("content")) for m in llm.chat_requests[-1]["messages"])


def test_a_chat_has_only_its_cards_book_until_another_is_bound_to_it(
    start_server: Callable[..., Any], page: Page, tmp_path: Path
) -> None:
    card_file, book_file = files(tmp_path)
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(Reply(text="The glade is quiet tonight."), Reply(text="The Qin, you say?"))
        server = start_server(with_llm(llm.url))
        page.goto(server.url + "knowledge")
        import_file(page, card_file)
        report = import_file(page, book_file)
        # The book takes the name it carries, not the file's.
        expect(report).to_contain_text("Qin History")
        items = page.locator(tid("kb-item"))
        expect(items.filter(has_text="Seraphina's Forest")).to_have_count(1)
        expect(items.filter(has_text="Qin History")).to_have_count(1)

        bases = {b["displayName"]: b for b in server.api("/api/knowledge/bases")["bases"]}
        characters = server.api("/api/presets/characters")["characters"]
        character_id = next(c["id"] for c in characters if c["name"] == "Seraphina")
        chat = post(server, "/api/chats", {"character_id": character_id})
        page.goto(server.url + f"chat/{chat['id']}")
        expect(messages(page)).to_have_count(1)

        send(page, "What do you know of the glade, and of the Qin?")
        sent = prompt_text(llm)
        assert GLADE in sent and QIN not in sent
        reply_id = messages(page).last.get_attribute("data-id")
        inspector = server.api(f"/api/chats/{chat['id']}/messages/{reply_id}/prompt")
        assert [(r["kb_name"], r["scope"]) for r in inspector["lore"] if r["activated"]] == [
            ("Seraphina's Forest", "character")
        ]

        # The chat's lore panel, one click from the chat, says which books are in it and
        # why, and binds another.
        page.click(tid("chat-side-lore"))
        panel = page.locator(f'{tid("chat-side")}[data-tab="lore"] {tid("chat-lore")}')
        active = panel.locator(tid("chat-lore-kb"))
        expect(active).to_have_count(1)
        expect(active.first).to_have_attribute("data-scope", "character")
        expect(active.first).to_contain_text("Seraphina's Forest")
        panel.locator(tid("chat-lore-add-select")).select_option(bases["Qin History"]["kb_id"])
        panel.locator(tid("chat-lore-add")).click()
        bound = panel.locator(f'{tid("chat-lore-kb")}[data-scope="chat"]')
        expect(bound).to_contain_text("Qin History")
        expect(active).to_have_count(2)
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        panel.screenshot(path=str(RESULTS_DIR / "lore-chat-panel.png"))

        # Saving the chat's settings afterwards keeps the binding.
        page.click(tid("chat-side-settings"))
        page.fill(tid("chat-settings-title"), "By the glade")
        page.click(tid("chat-settings-save"))
        expect(page.locator(tid("chat-settings-save"))).to_be_disabled()
        conversation = server.api(f"/api/chats/{chat['id']}")["conversation"]
        assert conversation["title"] == "By the glade"
        assert conversation["settings"]["knowledge_bases"] == [bases["Qin History"]["kb_id"]]

        send(page, "Tell me more of the Qin.")
        sent = prompt_text(llm)
        assert QIN in sent and GLADE in sent

        # Removing it takes it out again.
        page.click(tid("chat-side-lore"))
        bound.locator(tid("chat-lore-remove")).click()
        expect(active).to_have_count(1)


def test_deleting_a_book_a_chat_uses_lists_it_and_asks(
    start_server: Callable[..., Any], page: Page, tmp_path: Path
) -> None:
    _card_file, book_file = files(tmp_path)
    with ReplayLLMServer(models=["test-model"]) as llm:
        server = start_server(with_llm(llm.url))
        page.goto(server.url + "knowledge")
        import_file(page, book_file)
        # The same book again: it is already here, and a second copy is only on request.
        again = import_file(page, book_file)
        expect(again.locator(tid("import-duplicate"))).to_contain_text("Qin History")
        kb_id = server.api("/api/knowledge/bases")["bases"][0]["kb_id"]
        assert len(server.api("/api/knowledge/bases")["bases"]) == 1
        chat = post(server, "/api/chats", {"title": "Evening at the inn"})
        request = urllib.request.Request(
            server.url + f"api/chats/{chat['id']}/lore",
            data=json.dumps({"knowledge_bases": [kb_id]}).encode(),
            headers={"Content-Type": "application/json"},
            method="PUT",
        )
        urllib.request.urlopen(request, timeout=10).close()

        page.goto(server.url + f"knowledge/{kb_id}")
        page.click(tid("kb-delete"))
        confirm = page.locator(tid("kb-delete-confirm"))
        expect(confirm.locator(tid("kb-referrer"))).to_have_text(["chat “Evening at the inn”"])
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(RESULTS_DIR / "lore-delete-confirm.png"))
        page.click(tid("kb-delete-yes"))
        expect(page.locator(tid("kb-notice"))).to_contain_text("Qin History")
        expect(page.locator(tid("kb-item"))).to_have_count(0)
        expect(page).to_have_url(re.compile(r"/knowledge/?$"))
