"""The corpus status-bar card (MagVarUpdate's example 青空 理) played in the browser as a
Chinese user plays it: the page in 中文, the PNG imported on the Characters page, its
regex and page scripts allowed (not writes, not the network, not its own script 日替),
one turn against the scripted server.

Its display regex 状态栏 turns ``<StatusPlaceHolderImpl/>`` into a full HTML page whose
script waits for ``DOMContentLoaded``, reads ``(await getChatMessages(getCurrentMessageId()))
[0].data`` and falls back to its own sample data (好感度 ``15->19``) when the read throws:
the frame must show this chat's values, not the sample's.

Before this test's fixes the bar showed ``5`` where MVU shows ``0->5``: the server records
``_.set`` on a [value, description] pair as one replace of the pair, and the bridge's
``display_data`` / ``delta_data`` skipped any change whose new value was an array; the
chat list's preview showed the raw ``<StatusPlaceHolderImpl/>``; and the chat's notice
counted the scripts not allowed without naming 日替. The web app must be built
(``cd web && npm run build``); ``make test-corpus`` runs this with the other corpus tests.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from playwright.sync_api import Browser, FrameLocator, Locator, Page, expect

from storyloom.sillytavern.png_chunks import read_chunks, text_chunks
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.browser.conftest import (
    RunningServer,
    home_with,
    in_chinese,
    messages,
    no_sideways_scroll,
    send,
    start_chat,
    tid,
)

pytestmark = pytest.mark.browser

CARD = "zh_card_aozora_ri_mvu_statusbar_v2+v3.png"
FORM = "card-scripts-question-form"
Json = dict[str, Any]


def _card_data(path: Path) -> Json:
    """The card's V3 data, as the PNG's ``ccv3`` chunk carries it."""
    (text,) = [t.text for t in text_chunks(read_chunks(path.read_bytes())) if t.keyword == "ccv3"]
    data: Json = json.loads(base64.b64decode(text))["data"]
    return data


def _start_value(data: Json) -> int:
    """理.好感度's value in the card's [InitVar] entry (a value–description pair)."""
    (init,) = [e for e in data["character_book"]["entries"] if "[InitVar]" in e["comment"]]
    value: int = json.loads(init["content"])["理"]["好感度"][0]
    return value


@pytest.fixture
def zh_page(browser: Browser) -> Iterator[Page]:
    # An English browser with the app switched to 中文 (web/src/i18n.ts keeps the choice).
    context = browser.new_context(locale="en-US", viewport={"width": 1280, "height": 900})
    context.set_default_timeout(20_000)
    in_chinese(context)
    yield context.new_page()
    context.close()


def _frame(message: Locator) -> FrameLocator:
    return message.locator(tid("chat-html-frame")).content_frame


def test_the_real_status_bar_shows_the_new_affection_in_its_sandboxed_frame(
    start_server: Callable[..., RunningServer],
    zh_page: Page,
    corpus_sample: Callable[[str], Path],
) -> None:
    page = zh_page
    # what went wrong in the page or in a frame (the card's script included)
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    path = corpus_sample(CARD)
    data = _card_data(path)
    before = _start_value(data)
    after = before + 5
    regex_names = [r["scriptName"] for r in data["extensions"]["regex_scripts"]]
    reply = (
        "理轻轻合上祈祷书，向你露出微笑。\n"
        "<UpdateVariable>\n<Analysis>\n理.好感度: Y\n</Analysis>\n"
        f"_.set('理.好感度', {before}, {after});//理感到被需要\n"
        "</UpdateVariable>\n<StatusPlaceHolderImpl/>"
    )
    # the long context the models these cards are written for report: the whole world fits
    with ReplayLLMServer(models=["test-model"], context_length=131072) as llm:
        llm.script(Reply(text=reply))
        server = start_server(home_with(llm.url))
        page.goto(server.url + "characters")
        expect(page.locator("html")).to_have_attribute("lang", "zh-CN")
        page.set_input_files(tid("character-import-file"), str(path))

        # 1. The import question lists every regex script and both Tavern Helper scripts:
        # MVU's bundle served natively, 日替 as its own (left unticked).
        question = page.locator(tid("card-scripts-question"))
        expect(question).to_be_visible()
        regex_rows = page.locator(tid(f"{FORM}-regex"))
        expect(regex_rows).to_have_count(len(regex_names))
        expect(regex_rows.locator(".script-name")).to_have_text(regex_names)
        bar = regex_rows.nth(regex_names.index("状态栏"))
        expect(bar).to_contain_text("绘制带脚本的页面")
        # the plain-text bar ships switched off: listed, and said to be off in the card
        plain = regex_rows.nth(regex_names.index("状态栏-纯文本"))
        expect(plain).to_have_attribute("data-status", "off_in_card")
        helpers = page.locator(tid(f"{FORM}-helper"))
        expect(helpers).to_have_count(2)
        expect(helpers.filter(has_text="由 storyloom 自己提供")).to_have_count(1)
        ri_ti = helpers.filter(has_text="日替")
        expect(ri_ti).to_have_attribute("data-status", "not_allowed")
        expect(ri_ti.locator(tid(f"{FORM}-helper-allow"))).not_to_be_checked()
        expect(page.locator(tid(f"{FORM}-regex_scripts"))).to_be_checked()
        expect(page.locator(tid(f"{FORM}-frame_scripts"))).to_be_checked()
        expect(page.locator(tid(f"{FORM}-frame_writes"))).not_to_be_checked()
        expect(page.locator(tid(f"{FORM}-frame_network"))).not_to_be_checked()
        page.click(tid("card-scripts-allow"))
        expect(question).to_have_count(0)

        # 2. A chat with 理 (the card's first greeting), one turn.
        character_id = unquote(page.url.rsplit("/characters/", 1)[1].split("#")[0])
        start_chat(page, server, character_id)
        chat_id = page.url.rsplit("/", 1)[-1]
        send(page, "早上好，理。")

        # 3. The reply's status bar: sandboxed, scripts on, this chat's values.
        last = messages(page).last
        frame = last.locator(tid("chat-html-frame"))
        expect(frame).to_have_attribute("sandbox", "allow-scripts")
        expect(frame).to_have_attribute("data-scripts", "on")
        inside = _frame(last)
        # display_data (the toggle off, as the card starts): the change as MVU shows it
        affection = inside.locator("#li-affection")
        expect(affection).to_have_text(f"{before}->{after}")
        expect(inside.locator(".toggle-label")).to_have_text("显示全部数据")
        expect(inside.locator("#li-item")).to_have_text("圣女头纱")
        # delta_data: only what changed (the card's toggle, kept in the frame's storage)
        inside.locator(".switch .slider").click()
        expect(inside.locator("#data-toggle")).to_be_checked()
        expect(inside.locator(".toggle-label")).to_have_text("仅显示变更")
        expect(affection).to_have_text(f"{before}->{after}")
        expect(inside.locator("#li-item").locator("..")).to_be_hidden()
        expect(last.locator(tid("chat-message-text"))).to_contain_text("理轻轻合上祈祷书")
        expect(last).not_to_contain_text("StatusPlaceHolderImpl")
        expect(page.locator("body")).not_to_contain_text("<StatusPlaceHolderImpl/>")
        expect(page.locator("body")).not_to_contain_text("UpdateVariable")
        state = server.api(f"/api/chats/{chat_id}/messages/{_last_id(server, chat_id)}/state")
        assert state["state"]["variables"]["stat_data"]["理"]["好感度"][0] == after

        # 4. Nothing the card carries is silently inactive: 日替 waits for an answer.
        expect(page.locator(tid("chat-scripts-notice-helper"))).to_have_text(
            "2 个酒馆助手脚本：1 个由 storyloom 提供，1 个未对此角色允许。"
        )
        expect(page.locator(tid("chat-scripts-notice-helper-names"))).to_have_text(
            "未允许的脚本：日替。"
        )
        # the whole world reached the model: no lore was cut at the server's context
        expect(page.locator(tid("chat-lore-cut-notice"))).to_have_count(0)
        no_sideways_scroll(page)
        page.set_viewport_size({"width": 390, "height": 844})
        expect(_frame(messages(page).last).locator("#li-affection")).to_have_text(
            f"{before}->{after}"
        )
        no_sideways_scroll(page)
        assert problems == []


def _last_id(server: RunningServer, chat_id: str) -> str:
    view = server.api(f"/api/chats/{chat_id}")
    return str(view["messages"][-1]["id"])
