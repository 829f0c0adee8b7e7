"""The app in 中文, page by page, as a Chinese-speaking SillyTavern user walks it on the
first day: every page and panel (the chat with its prompt inspector, tree, state, settings
and prompt manager; characters and the character editor; personas; knowledge; workflows;
tools; connections and settings; the Writing page) shows no string of the English
catalogue and no English-style time ("10:44 PM"), at 1440×900 and at 390×844.

The world book has an inclusion group and an entry delayed until recursion, and the card
a regex script that runs on the prompt, so the inspector explains every kind of lore
reason; a second walk, with no model at all, imports a manuscript on the Writing page
and saves a chapter, whose curation steps are skipped and say why.

What counts as English: every value of ``web/src/locales/en/*.json`` that differs from its
Chinese counterpart and has ASCII letters, cut at its ``{placeholders}``; each literal
piece of two words or more, or of eight letters or more, is looked for as whole words
(an identifier such as ``character_definition`` is no word) in the page's visible text and
in the placeholder / title / aria-label of visible elements. A term the Chinese
catalogue itself keeps ("接口地址（Base URL）", "温度（Temperature）") is not English.
Text marked ``lang="en"`` is English on purpose and is not read: only what nobody here
can translate (a plugin's node type or tool, an MCP server's tool, written for the model).
Text marked ``translate="no"`` is not read either: identifiers (a slot's name such as
``messages`` or ``reasoning``, which edges and a run's inputs name it by), shown as code,
that look like English words but are no label to translate; a slot's description, its
label, is read. Likewise a connection's ends in its aria-label ("从 weaver.messages 到
invoker.messages 的连接"): ``node.slot``, identifiers in an attribute, where no element can
carry ``translate="no"``.
storyloom's own node types and tools are shown from the web app's catalogue
(``locales/<lang>/nodes.json``, ``builtinTools.json``) in 中文 and are not so marked: the
walk checks the palette, a built-in pipeline's canvas and inspector and the Tools page for
that. So are the built-in workflows (``builtinWorkflows.json``): the chat pipeline's name on
the Workflows list and its interface slots' descriptions on its canvas are in 中文.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from storyloom.knowledge.st_import import import_sillytavern
from storyloom.project.project_file import init_project, load_project, save_project
from storyloom.project.project_knowledge import add_local_knowledge_base
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.testing.st_documents import world_info_document, world_info_entry
from tests.browser.conftest import (
    REPO,
    RESULTS_DIR,
    RunningServer,
    home_with,
    in_chinese,
    messages,
    side_panel,
    tid,
)

pytestmark = pytest.mark.browser

LOCALES = REPO / "web" / "src" / "locales"
ZH_NODES = json.loads((LOCALES / "zh" / "nodes.json").read_text(encoding="utf-8"))
ZH_TOOLS = json.loads((LOCALES / "zh" / "builtinTools.json").read_text(encoding="utf-8"))
ZH_WORKFLOWS = json.loads((LOCALES / "zh" / "builtinWorkflows.json").read_text(encoding="utf-8"))
# The ids of node types and tools (core:Evolutionary, node:kb:Query) are shown as they are:
# identifiers, not English, even where a part of one is also an English name.
IDENTIFIERS = {part for name in [*ZH_NODES, *ZH_TOOLS] for part in name.split(":")}
SIZES = {"wide": (1440, 900), "phone": (390, 844)}
ENGLISH_TIME = re.compile(r"\b\d{1,2}:\d{2}\s?(AM|PM)\b")
PLACEHOLDER = re.compile(r"\{[^{}]*\}")
WORD = re.compile(r"[A-Za-z]+")
EDGE = re.compile(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")
# A slot's address, node.slot (a connection's ends): identifiers, not words.
SLOT_ADDRESS = re.compile(r"(?<![\w.])[a-z_][\w-]*\.[a-z_]\w*(?![\w.])")

CHARACTER_ID = "aria"
CARD_SCRIPT = {"id": "card-lamp", "scriptName": "灯火", "findRegex": "/油灯/g",
               "replaceString": "灯火", "trimStrings": [], "placement": [1, 2],
               "disabled": False, "markdownOnly": False, "promptOnly": True,
               "runOnEdit": False, "substituteRegex": 0, "minDepth": None,
               "maxDepth": None}  # fmt: skip
ARIA = {
    "name": "艾莉亚",
    "description": "{{char}}是灯塔镇的守灯人，知道{{user}}的来历。",
    "personality": "沉静，细心。",
    "scenario": "暴风雨的夜里，{{user}}敲开了灯塔的门。",
    "first_mes": "*艾莉亚举起灯。* 进来吧，{{user}}，外面风大。",
    "mes_example": "<START>\n{{user}}：灯还亮着吗？\n{{char}}：一直亮着。",
    # A card script (allowed for the chat) that runs on every prompt.
    "extensions": {"regex_scripts": [CARD_SCRIPT]},
}
BOOK = world_info_document(
    [
        world_info_entry(0, [], "灯塔镇建在海边的悬崖上。", comment="灯塔镇", constant=True),
        world_info_entry(1, ["灯"], "守灯人每晚添一次油。", comment="守灯人"),
        # One of the two wins the group, the other loses it (issue 27 item 6: the
        # reasons of groups and recursion were English sentences).
        world_info_entry(2, ["灯"], "晴夜，灯光照得很远。", comment="晴夜", group="天气"),
        world_info_entry(3, ["灯"], "雨夜，灯光被雨幕挡住。", comment="雨夜", group="天气"),
        world_info_entry(4, ["灯"], "旧灯塔的秘密。", comment="旧灯", delayUntilRecursion=1),
    ],
    name="灯塔镇传说",
)
REPLIES = ["*她点点头。* 灯一直亮着。", "风会停的，先喝口热茶。"]


def _flatten(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _flatten(item, f"{path}.{key}" if path else key)
    elif isinstance(value, str):
        yield path, value


def _catalogue(language: str) -> dict[str, str]:
    strings: dict[str, str] = {}
    for file in sorted((LOCALES / language).glob("*.json")):
        strings.update(_flatten(json.loads(file.read_text(encoding="utf-8")), file.stem))
    return strings


def english_pieces() -> dict[str, str]:
    """Piece of English → the catalogue key it comes from."""
    english, chinese = _catalogue("en"), _catalogue("zh")
    kept = "\n".join(chinese.values())
    pieces: dict[str, str] = {}
    for key, value in english.items():
        if chinese.get(key) == value or not re.search(r"[A-Za-z]", value):
            continue
        # vue-i18n's plural forms are "one | many"; each form is its own text.
        for form in value.split(" | "):
            for part in PLACEHOLDER.split(form):
                piece = EDGE.sub("", part.strip())
                words = WORD.findall(piece)
                if re.search(rf"(?<![A-Za-z]){re.escape(piece)}(?![A-Za-z])", kept):
                    continue
                if piece in IDENTIFIERS:
                    continue
                if len(words) >= 2 or sum(len(w) for w in words) >= 8:
                    pieces.setdefault(piece, key)
    return pieces


PIECES = english_pieces()
PIECE_PATTERN = re.compile(
    "|".join(
        rf"(?<![A-Za-z0-9_]){re.escape(p)}(?![A-Za-z0-9_])"
        for p in sorted(PIECES, key=len, reverse=True)
    )
)

# English on purpose and identifiers (see above) are hidden while the page's text is read.
VISIBLE_TEXT = """() => {
  const english = [...document.body.querySelectorAll('[lang="en"], [translate="no"]')]
  const display = english.map((el) => el.style.display)
  english.forEach((el) => { el.style.display = 'none' })
  const out = [document.body.innerText]
  english.forEach((el, i) => { el.style.display = display[i] })
  for (const el of document.querySelectorAll('[placeholder], [title], [aria-label]')) {
    if (el.closest('body [lang="en"], body [translate="no"]')) continue
    if (!el.checkVisibility({ checkOpacity: false, checkVisibilityCSS: true })) continue
    for (const name of ['placeholder', 'title', 'aria-label']) {
      const value = el.getAttribute(name)
      if (value) out.push(value)
    }
  }
  return out
}"""


def english_on(page: Page) -> list[str]:
    """Every English catalogue string and English-style time the page shows, each once,
    with a little of the text around it."""
    found: dict[str, str] = {}
    for shown in page.evaluate(VISIBLE_TEXT):
        text = SLOT_ADDRESS.sub(" ", shown)
        for match in PIECE_PATTERN.finditer(text):
            piece = match.group(0)
            around = text[max(0, match.start() - 25) : match.end() + 25].replace("\n", " ⏎ ")
            found.setdefault(f"{piece!r} (en key {PIECES[piece]})", around)
        for match in ENGLISH_TIME.finditer(text):
            found.setdefault(f"{match.group(0)!r} (an English-style time)", text[
                max(0, match.start() - 25) : match.end() + 25
            ].replace("\n", " ⏎ "))  # fmt: skip
    return [f"{what} in «…{around}…»" for what, around in found.items()]


def prepare(url: str) -> Callable[[Path], None]:
    base = home_with(url, {CHARACTER_ID: ARIA})

    def run(home: Path) -> None:
        base(home)
        book = home / "灯塔镇传说.json"
        book.write_text(json.dumps(BOOK, ensure_ascii=False), encoding="utf-8")
        imported = import_sillytavern(book).knowledge_bases[0]
        add_local_knowledge_base(home / "projects" / "default", imported)
        # No recursion step: the entry delayed until recursion waits, and says so.
        project = load_project(home / "projects" / "default")
        project.activationSettings.max_recursion_steps = 1
        save_project(home / "projects" / "default", project)

    return run


def set_up_project(server: RunningServer) -> dict[str, str]:
    """A persona, the world book bound to a chat with the character, two replies in it,
    and a book on the Writing page; returns their ids."""
    server.request("POST", "/api/personas", {"name": "林舟", "description": "林舟是远行的画家。"})
    bases = server.api("/api/knowledge/bases")["bases"]
    kb_id = next(b["kb_id"] for b in bases if b["displayName"] == "灯塔镇传说")
    chat = server.request("POST", "/api/chats", {"character_id": CHARACTER_ID})
    server.request("PUT", f"/api/chats/{chat['id']}/lore", {"knowledge_bases": [kb_id]})
    server.request("PATCH", f"/api/chats/{chat['id']}", {"settings": {"allow_regex_scripts": True}})
    book = server.request("POST", "/api/writing/books", {"title": "灯塔之夜", "language": "zh"})
    workflow = {"id": "hebing", "nodes": [{"id": "merge", "type": "core:Merge"}]}
    server.request("PUT", "/api/workflows/hebing", workflow)
    return {"chat": chat["id"], "kb": kb_id, "book": book["id"], "workflow": "hebing"}


def chat_in_chinese(page: Page, server: RunningServer, chat_id: str) -> None:
    """Two turns of the chat, sent from the page."""
    page.goto(server.url + f"chat/{chat_id}")
    expect(messages(page)).to_have_count(1)
    for n, text in enumerate(["灯还亮着吗？", "外面的风好大。"]):
        page.fill(tid("chat-input"), text)
        page.press(tid("chat-input"), "Enter")
        expect(messages(page)).to_have_count(3 + 2 * n)
        expect(messages(page).last).to_have_attribute("data-status", "complete")


def open_all_details(page: Page, scope: str) -> None:
    page.eval_on_selector_all(f"{scope} details", "els => els.forEach(d => { d.open = true })")


def walk(page: Page, server: RunningServer, ids: dict[str, str], size: str) -> list[str]:
    """Every page and panel in turn; returns 'page: string' for each English string."""
    problems: list[str] = []

    def check(where: str) -> None:
        problems.extend(f"[{size}] {where}: {p}" for p in english_on(page))
        # The screenshots' other promise: nothing runs off the side of the window.
        wide = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        if wide > 0:
            problems.append(f"[{size}] {where}: scrolls sideways by {wide} px")

    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    page.goto(server.url + f"chat/{ids['chat']}")
    expect(messages(page)).to_have_count(5)
    expect(page.locator("html")).to_have_attribute("lang", "zh-CN")
    check("chat")
    composer = page.locator(tid("chat-input")).bounding_box()
    assert composer is not None
    height = page.evaluate("window.innerHeight")
    if composer["y"] < 0 or composer["y"] + composer["height"] > height:
        problems.append(f"[{size}] chat: the message box is out of view (y={composer['y']:.0f})")
    page.screenshot(path=str(RESULTS_DIR / f"zh-chat-{size}.png"))

    reply = messages(page).last
    reply.hover()
    reply.locator(tid("chat-show-prompt")).click()
    inspector = page.locator(tid("chat-prompt-panel"))
    expect(inspector.locator(tid("chat-prompt-block")).first).to_be_visible()
    expect(inspector.locator(tid("chat-lore")).first).to_be_visible()
    open_all_details(page, tid("chat-prompt-panel"))
    # The server's labels, said in 中文 (issue 27 item 6's "Preset: Main Prompt",
    # "Message 1 (Aria)", "always active (constant)").
    sources = inspector.locator(tid("chat-prompt-source"))
    expect(sources.first).to_have_text("预设：主提示词")
    expect(sources.filter(has_text=re.compile(r"^第 \d+ 条消息（艾莉亚）$")).first).to_be_visible()
    expect(inspector.locator(tid("chat-lore")).filter(has_text="常驻（始终激活）")).to_be_visible()
    # An inclusion group's winner and loser, and the entry that waits for recursion.
    expect(inspector.get_by_text(re.compile(r"赢得组“天气”")).first).to_be_visible()
    expect(inspector.get_by_text(re.compile(r"组“天气”由 (晴夜|雨夜) 胜出")).first).to_be_visible()
    expect(inspector.get_by_text("等待第 1 层递归", exact=False).first).to_be_visible()
    check("chat › prompt inspector")
    page.locator(tid("chat-side")).screenshot(path=str(RESULTS_DIR / f"zh-inspector-{size}.png"))
    # The prompt manager lists the pipeline's prompts, the tree the messages.
    panels = {
        "tree": f"{tid('chat-side')} li",
        "state": f"{tid('chat-state-panel')} h3",
        "settings": tid("chat-settings-title"),
        "manager": f"{tid('chat-prompt-manager')} .pm-name",
        "lore": f"{tid('chat-lore')} li",
    }
    for tab, shown in panels.items():
        side_panel(page, tab)
        expect(page.locator(shown).first).to_be_visible()
        check(f"chat › {tab}")

    page.goto(server.url + "characters")
    expect(page.locator(tid("character-item")).filter(has_text="艾莉亚")).to_be_visible()
    check("characters")
    page.goto(server.url + f"characters/{CHARACTER_ID}")
    expect(page.locator(tid("character-field-name"))).to_have_value("艾莉亚")
    check("character editor")
    page.screenshot(path=str(RESULTS_DIR / f"zh-character-{size}.png"))
    page.goto(server.url + "characters?tab=personas")
    expect(page.locator(tid("persona-item")).filter(has_text="林舟")).to_be_visible()
    check("personas")

    page.goto(server.url + "knowledge")
    expect(page.locator(tid("kb-item")).filter(has_text="灯塔镇传说")).to_be_visible()
    check("knowledge")
    page.goto(server.url + f"knowledge/{ids['kb']}")
    expect(page.get_by_text("守灯人").first).to_be_visible()
    check("knowledge › world book")

    page.goto(server.url + "workflows")
    expect(page.locator(tid("wf-palette-item")).first).to_be_attached()
    # The built-in node types in 中文, not English marked lang="en" (issue 27's loophole).
    weaver = ZH_NODES["chat:Weaver"]
    item = page.locator(f'{tid("wf-palette-item")}[data-node-type="chat:Weaver"]')
    expect(item.locator(".wf-palette-name")).to_have_text(weaver["name"])
    expect(item).to_have_attribute("title", weaver["description"])
    expect(item).not_to_have_attribute("lang", "en")
    expect(page.locator(f'{tid("wf-palette")} [lang="en"]')).to_have_count(0)
    # The chat pipeline storyloom ships is listed by its name in 中文.
    pipeline = ZH_WORKFLOWS["chat-default"]
    listed = page.locator(f'{tid("wf-list-item")}[data-workflow-id="chat-default"]')
    expect(listed.locator(".wf-list-name")).to_have_text(pipeline["name"])
    check("workflows")
    # A workflow of the project's with a built-in node: its title on the canvas, its
    # inspector and config form in 中文.
    merge = ZH_NODES["core:Merge"]
    page.goto(server.url + f"workflows/{ids['workflow']}")
    node = page.locator(f'{tid("wf-node")}[data-node-type="core:Merge"]')
    expect(node.locator(".wf-node-title")).to_have_text(merge["name"])
    expect(node.locator('[lang="en"]')).to_have_count(0)
    check("workflows › a workflow")
    node.locator(".wf-node-title").click()
    if not page.locator(tid("wf-inspector")).is_visible():
        page.locator(tid("wf-panel-toggle")).click()
    inspector = page.locator(tid("wf-inspector"))
    expect(inspector.locator("h2").first).to_have_text(merge["name"])
    expect(inspector.get_by_text(merge["config"]["separator"]["title"])).to_be_visible()
    expect(inspector.locator('[lang="en"]')).to_have_count(0)
    check("workflows › node inspector")
    # The chat pipeline storyloom ships: its nodes named by their types, in 中文.
    page.goto(server.url + "workflows/chat-default")
    weaver = page.locator(f'{tid("wf-node")}[data-node-type="chat:Weaver"]')
    expect(weaver.locator(".wf-node-title")).to_have_text(ZH_NODES["chat:Weaver"]["name"])
    # Its name, description and interface slots' descriptions in 中文; the slots' names are
    # identifiers, marked so.
    expect(page.locator(tid("wf-name"))).to_have_value(pipeline["name"])
    expect(page.locator(tid("wf-description"))).to_have_value(pipeline["description"])
    group_input = page.locator(f'{tid("wf-node")}[data-node-type="core:GroupInput"]')
    snapshot = group_input.locator(".wf-slot-out").filter(has_text="snapshot")
    expect(snapshot).to_have_attribute("title", pipeline["inputs"]["snapshot"])
    expect(snapshot.locator(".wf-slot-name")).to_have_attribute("translate", "no")
    group_output = page.locator(f'{tid("wf-node")}[data-node-type="core:GroupOutput"]')
    reply_slot = group_output.locator(".wf-slot-in").filter(has_text="reply")
    expect(reply_slot).to_have_attribute("title", pipeline["outputs"]["reply"])
    check("workflows › the chat pipeline")
    for tab in ("tools", "plugins", "agents", "mcp"):
        page.goto(server.url + f"tools?tab={tab}")
        expect(page.locator(f"#tools-panel-{tab}")).to_be_visible()
        if tab == "tools":
            expect(page.locator('[data-testid^="tool-row-"]').first).to_be_visible()
            query = page.locator(tid("tool-row-kb:Query"))
            expect(query.locator(".tool-name")).to_have_text(ZH_TOOLS["kb:Query"]["name"])
            expect(query.locator(".tool-desc")).to_have_text(ZH_TOOLS["kb:Query"]["description"])
            # No plugin or MCP server here: nothing on the list is left in English.
            expect(page.locator(f'{tid("tool-list")} [lang="en"]')).to_have_count(0)
            # "Try it": the arguments' hints too.
            query.locator(tid("tool-try-kb:Query")).click()
            hint = ZH_TOOLS["kb:Query"]["parameters"]["query"]
            expect(query.get_by_text(hint)).to_be_visible()
        check(f"tools › {tab}")
    page.goto(server.url + "settings")
    expect(page.locator(tid("page-settings"))).to_be_visible()
    expect(page.locator('option[value="test-model"]').first).to_be_attached()
    check("settings & connections")

    page.goto(server.url + f"writing/{ids['book']}")
    expect(page.locator(tid("chapter-add-title"))).to_be_visible()
    check("writing")
    page.screenshot(path=str(RESULTS_DIR / f"zh-writing-{size}.png"))
    return problems


@pytest.fixture
def zh_pages(browser: Browser) -> Iterator[Callable[[int, int], Page]]:
    contexts: list[Any] = []

    def open_page(width: int, height: int) -> Page:
        # An English browser with the app switched to 中文, as the user had it: a
        # time or number formatted in the browser's language instead of the page's shows.
        context = browser.new_context(locale="en-US", viewport={"width": width, "height": height})
        context.set_default_timeout(15_000)
        in_chinese(context)
        contexts.append(context)
        return context.new_page()

    yield open_page
    for context in contexts:
        context.close()


def test_every_page_in_chinese_shows_no_english_label_and_no_english_time(
    start_server: Callable[..., RunningServer], zh_pages: Callable[[int, int], Page]
) -> None:
    assert len(PIECES) > 500, "the English catalogue was not read"
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(*(Reply(text=t) for t in REPLIES))
        server = start_server(prepare(llm.url))
        ids = set_up_project(server)
        problems: list[str] = []
        for n, (size, (width, height)) in enumerate(SIZES.items()):
            page = zh_pages(width, height)
            if n == 0:
                chat_in_chinese(page, server, ids["chat"])
            problems.extend(walk(page, server, ids, size))
    assert not problems, f"{len(problems)} English strings in 中文:\n" + "\n".join(problems)


MANUSCRIPT = """# 灯塔之夜

## 第一章：港口

天还没亮，林舟就来到了港口。海鸥在码头上空叫个不停，潮水正在转向。林舟有一双黑色的眼睛。

艾莉亚站在灯塔下面，手里提着一盏油灯。

## 第二章：灯塔

灯塔里有一股煤油和旧纸的味道。艾莉亚每晚给灯添一次油。

林舟在灯塔的窗边坐了很久，看着渡船穿过海湾。
"""


def test_the_writing_page_in_chinese_says_why_curation_ran_without_a_model(
    start_server: Callable[..., RunningServer],
    zh_pages: Callable[[int, int], Page],
    tmp_path: Path,
) -> None:
    """No model at all: an imported manuscript's curation and a saved chapter's steps are
    skipped, and say why in 中文 (issue 27 item 6: they were English sentences)."""
    server = start_server(lambda home: init_project(home / "projects" / "default"))
    book = server.request("POST", "/api/writing/books", {"title": "灯塔之夜", "language": "zh"})
    manuscript = tmp_path / "灯塔之夜.md"
    manuscript.write_text(MANUSCRIPT, encoding="utf-8")
    problems: list[str] = []
    for n, (size, (width, height)) in enumerate(SIZES.items()):
        page = zh_pages(width, height)
        page.goto(server.url + f"writing/{book['id']}")
        expect(page.locator(tid("ws-status"))).to_have_attribute("data-status", "connected")

        def check(where: str, page: Page = page, size: str = size) -> None:
            problems.extend(f"[{size}] {where}: {p}" for p in english_on(page))
            wide = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            if wide > 0:
                problems.append(f"[{size}] {where}: scrolls sideways by {wide} px")

        if n == 0:
            page.locator(tid("writing-import-file")).set_input_files(str(manuscript))
            preview = page.locator(tid("writing-import-preview"))
            expect(preview.locator(tid("writing-import-chapter-title"))).to_have_count(2)
            check("writing › import preview")
            preview.locator(tid("writing-import-confirm")).click()
            progress = page.locator(tid("import-curation"))
            expect(progress).to_have_attribute("data-done", "true", timeout=90_000)
            check("writing › import curation")

        # A chapter written and saved on the page: its curation, step by step.
        page.fill(tid("chapter-add-title"), f"第{3 + n}章")
        page.click(tid("chapter-add"))
        expect(page.locator(tid("manuscript-chapter"))).to_have_count(3 + n)
        editor = page.locator(tid("chapter-editor"))
        expect(editor).to_have_value("")
        editor.fill("艾莉亚又给灯添了一次油。林舟用蓝色的眼睛看着海面，没有说话。")
        page.click(tid("chapter-save"))
        curation = page.locator(tid("curation-status"))
        expect(curation).to_have_attribute("data-done", "true", timeout=60_000)
        skipped = curation.locator(tid("curation-reason"))
        expect(skipped.and_(page.locator('[data-term="summary_no_model"]'))).to_contain_text(
            "还没有设置模型"
        )
        expect(skipped.and_(page.locator('[data-term="facts_no_model"]'))).to_contain_text(
            "离线文本阅读器"
        )
        check("writing › curation without a model")
        page.screenshot(path=str(RESULTS_DIR / f"zh-writing-curation-{size}.png"))
        # Role C's warning: its frame in 中文, the manuscript's words quoted.
        page.click(tid("writing-tab-warnings"))
        detail = page.locator(tid("warning-detail")).first
        expect(detail).to_have_attribute("data-kind", "contradiction")
        expect(detail).to_contain_text("林舟")
        expect(detail).to_contain_text("却写作")
        check("writing › warnings")
    assert not problems, f"{len(problems)} English strings in 中文:\n" + "\n".join(problems)
