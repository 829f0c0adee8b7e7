"""A card whose book is a world already here, at 1440×900 and at 390×844 (issue 27, item 3).

The user imports the world book Eldoria on the Knowledge page, then Seraphina's card on
the Characters page; the card's ``extensions.world`` names Eldoria and it carries its own
copy of that book. Afterwards the Knowledge page lists Eldoria once and no
"Seraphina · character" knowledge base, Seraphina's editor shows Eldoria as her book, and
every "Bind a book…" list (another character's editor, the chat's Lore panel) offers each
distinct book once. (Before, the import added a "‹name› · character" KB of the card's
definition and a second KB with the card's copy of the book, and the lists offered every
KB: Eldoria twice and the definition KB besides.)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect

from storyloom.knowledge.st_import import import_sillytavern
from storyloom.project.project_knowledge import add_local_knowledge_base
from storyloom.testing.st_documents import (
    card_book_entry,
    card_document,
    world_info_document,
    world_info_entry,
)
from tests.browser import conftest
from tests.browser.conftest import (
    LANTERNFALL,
    RunningServer,
    no_sideways_scroll,
    side_panel,
    tid,
)

pytestmark = pytest.mark.browser

WORLD = "Eldoria"
LORE = [
    (["glade"], "The glade is Seraphina's home, deep in the forest of Eldoria."),
    (["shadow"], "Shadowy creatures have crept into Eldoria's woods."),
]
OTHER_ID = "tomas"
TOMAS = {"name": "Tomas", "description": "Tomas mends nets in the harbour."}


def world_file(folder: Path) -> Path:
    """Eldoria as SillyTavern saves a world file (``worlds/Eldoria.json``)."""
    entries = [world_info_entry(i, keys, text) for i, (keys, text) in enumerate(LORE)]
    path = folder / f"{WORLD}.json"
    path.write_text(json.dumps(world_info_document(entries)), encoding="utf-8")
    return path


def card_file(folder: Path) -> Path:
    """Seraphina's card bound to the world Eldoria, with the copy of it cards carry."""
    book = [card_book_entry(i, keys, text) for i, (keys, text) in enumerate(LORE)]
    card = card_document("Seraphina", book=book, book_name=WORLD)
    card["data"]["extensions"]["world"] = WORLD
    path = folder / "Seraphina.json"
    path.write_text(json.dumps(card), encoding="utf-8")
    return path


def prepare(home: Path) -> None:
    """Tomas in the library and another book (Lanternfall) here already."""
    conftest.home_with(None, {OTHER_ID: TOMAS})(home)
    project = home / "projects" / "default"
    add_local_knowledge_base(project, import_sillytavern(LANTERNFALL).knowledge_bases[0])


def book_names(server: RunningServer) -> dict[str, str]:
    """kb_id → display name of every KB here."""
    bases = server.api("/api/knowledge/bases")["bases"]
    return {b["kb_id"]: b["displayName"] or b["kb_id"] for b in bases}


def offered(select: Locator) -> list[str]:
    """A select's options but its first (the "choose" line), in order."""
    return [text.strip() for text in select.locator("option").all_inner_texts()[1:]]


@pytest.fixture
def book_page(sized_page: Page) -> Page:
    """The page at each size, waiting longer: an import on a busy machine takes a while."""
    sized_page.set_default_timeout(30_000)
    return sized_page


def test_a_card_whose_book_is_a_world_here_adds_no_book_and_each_list_offers_it_once(
    start_server: Callable[..., RunningServer], book_page: Page, tmp_path: Path
) -> None:
    page = book_page
    server = start_server(prepare)

    # The world book, from the Knowledge page's import.
    page.goto(server.url + "knowledge")
    items = page.locator(tid("kb-item"))
    expect(items).to_have_count(1)
    page.click(tid("kb-import-toggle"))
    page.set_input_files(tid("import-file"), str(world_file(tmp_path)))
    expect(page.locator(tid("import-report"))).to_contain_text(WORLD)
    expect(items).to_have_count(2)
    names = book_names(server)
    (eldoria,) = [kb_id for kb_id, name in names.items() if name == WORLD]
    other = next(name for kb_id, name in names.items() if kb_id != eldoria)

    # The card, from the Characters page's import.
    page.goto(server.url + "characters")
    tiles = page.locator(tid("character-item"))
    expect(tiles).to_have_count(1)
    page.set_input_files(tid("character-import-file"), str(card_file(tmp_path)))
    expect(page.locator(tid("characters-notice"))).to_contain_text("Seraphina")
    expect(tiles).to_have_count(2)
    characters = {c["name"]: c["id"] for c in server.api("/api/characters")["characters"]}
    seraphina = characters["Seraphina"]

    # No KB came with the card: no "· character" KB, no second Eldoria; she is bound to
    # the world itself.
    assert book_names(server) == names
    document = server.api(f"/api/characters/{seraphina}")
    assert document["character"]["knowledge_bases"] == [eldoria]
    page.goto(server.url + "knowledge")
    expect(items).to_have_count(2)
    expect(items.filter(has_text=WORLD)).to_have_count(1)
    expect(page.locator(tid("kb-list-local"))).not_to_contain_text("· character")
    no_sideways_scroll(page)

    # Seraphina's editor shows Eldoria as her book; her bind list offers the rest once.
    page.goto(server.url + f"characters/{seraphina}")
    expect(page.locator(tid("character-field-name"))).to_have_value("Seraphina")
    bound = page.locator(tid("character-book"))
    expect(bound).to_have_count(1)
    expect(bound).to_contain_text(WORLD)
    # It is the world everyone can bind, not a copy only she has.
    expect(bound.locator(tid("character-card-book"))).to_have_count(0)
    bind = page.locator(tid("character-bind-book"))
    expect(bind.locator("option")).to_have_count(2)
    assert offered(bind) == [other]
    no_sideways_scroll(page)

    # Another character's "Bind a book…" offers each book once, and only books.
    page.goto(server.url + f"characters/{characters['Tomas']}")
    expect(page.locator(tid("character-field-name"))).to_have_value("Tomas")
    expect(page.locator(tid("character-book"))).to_have_count(0)
    expect(bind.locator("option")).to_have_count(3)
    assert sorted(offered(bind)) == sorted([WORLD, other])
    no_sideways_scroll(page)

    # In a chat with Seraphina, Eldoria is her book and the Lore panel offers it once.
    conftest.start_chat(page, server, seraphina)
    side_panel(page, "lore")
    active = page.locator(tid("chat-lore-kb"))
    expect(active).to_have_count(1)
    expect(active).to_have_attribute("data-kb-id", eldoria)
    expect(active).to_have_attribute("data-scope", "character")
    add = page.locator(tid("chat-lore-add-select"))
    expect(add.locator("option")).to_have_count(3)
    assert sorted(offered(add)) == sorted([WORLD, other])
    no_sideways_scroll(page)
