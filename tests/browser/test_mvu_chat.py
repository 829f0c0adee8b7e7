"""An MVU card's chat in the browser, in 中文, at a laptop's and a phone's size: a refused
variable update is listed under the reply in the reader's language, the reply offers
MVU's re-parse and replay, and the header's MVU menu takes a snapshot, which the message
then shows. Before this change no MVU action existed and a refused update did not exist
either: the menu, the buttons and the warning are all looked for, so the test failed."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.browser.conftest import (
    home_with,
    in_chinese,
    messages,
    no_sideways_scroll,
    send,
    start_chat,
    tid,
)

pytestmark = pytest.mark.browser

CHARACTER_ID = "li"
INIT_VARS = "理:\n  $meta:\n    extensible: false\n  好感度: [19, 她对你的好感]\n  地点: 教堂\n"
SOURCE_CARD = {
    "spec": "chara_card_v3",
    "data": {
        "name": "理",
        "character_book": {
            "entries": [{"comment": "[InitVar]", "content": INIT_VARS, "enabled": False}]
        },
    },
}
LI = {
    "name": "理",
    "description": "教堂里的修女。",
    "first_mes": "你来了。",
    "extensions": {
        "tavern_helper": {
            "scripts": [
                {"type": "script", "id": "mvu", "name": "MVU", "enabled": True,
                 "content": "import 'https://testingcf.jsdelivr.net/gh/MagicalAstrogy/MagVarUpdate/artifact/bundle.js'"}
            ]
        }
    },
    "source_card": SOURCE_CARD,
}  # fmt: skip
PATCH = [
    {"op": "replace", "path": "/理/好感度", "value": 25},
    {"op": "add", "path": "/理/秘密", "value": "钥匙"},
]
REPLY = "她笑了。<UpdateVariable><JSONPatch>" + json.dumps(PATCH, ensure_ascii=False)
REPLY += "</JSONPatch></UpdateVariable>"


@pytest.mark.parametrize("size", [(1440, 900), (390, 844)], ids=["1440x900", "390x844"])
def test_an_mvu_chat_shows_refused_updates_and_offers_mvu_s_actions(
    start_server: Callable[..., Any], page: Page, size: tuple[int, int]
) -> None:
    page.set_viewport_size({"width": size[0], "height": size[1]})
    in_chinese(page.context)
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(Reply(text=REPLY))
        server = start_server(home_with(llm.url, {CHARACTER_ID: LI}))
        start_chat(page, server, CHARACTER_ID)
        send(page, "你好")
        reply = messages(page).last
        expect(reply.locator(tid("chat-message-problem"))).to_have_text(
            ["理.秘密：未更改：结构已锁定（不能增删键或元素）"]
        )
        expect(reply.locator(tid("chat-mvu-reparse"))).to_have_text("重新处理变量")
        expect(reply.locator(tid("chat-mvu-replay"))).to_have_text("从此处重演")
        no_sideways_scroll(page)

        page.locator(tid("chat-mvu-menu")).click()
        expect(page.locator(tid("chat-mvu-reinitialise"))).to_have_text("重新读取初始变量")
        no_sideways_scroll(page)
        page.locator(tid("chat-mvu-snapshot")).click()
        expect(reply.locator(tid("chat-mvu-snapshot-mark"))).to_have_text("快照")
        chat_id = page.url.rsplit("/", 1)[-1]
        view = server.api(f"/api/chats/{chat_id}")
        last = view["messages"][-1]
        state = server.api(f"/api/chats/{chat_id}/messages/{last['id']}/state")
        assert state["state"]["variables"]["stat_data"]["理"]["好感度"] == [25, "她对你的好感"]
        assert last["extra"]["mvu_snapshot"] is True
