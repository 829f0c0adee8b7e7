"""Status bars and front-end cards run in sandboxed frames with a Tavern Helper bridge.

A card built here plays as a Chinese MVU card does: an ``[InitVar]`` entry starts
``stat_data``, each reply changes it with ``_.set`` in ``<UpdateVariable>`` and ends with
``<StatusPlaceHolderImpl/>``, and a display regex turns the placeholder into a full HTML
page whose script reads the message's ``stat_data`` through ``getChatMessages
(getCurrentMessageId())``. The character's permissions (set through the route, as the
character page does) allow its frame scripts. Then a card's page attacks from inside its
frame: every attempt must fail, and a bridge write works only once writes are allowed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import pytest
from playwright.sync_api import FrameLocator, Locator, Page, expect

from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.testing.st_documents import card_book_entry, card_document
from tests.browser.conftest import (
    RunningServer,
    home_with,
    messages,
    no_sideways_scroll,
    send,
    start_chat,
    tid,
)

pytestmark = pytest.mark.browser

STATUS_BAR = """```html
<!DOCTYPE html>
<html><head><style>#bar{border:1px solid #c9a;padding:6px;border-radius:6px}</style></head>
<body><div id="bar">好感度 <b id="affection">…</b> <span id="change"></span>
<span id="turn"></span></div>
<script>
(async () => {
  const id = getCurrentMessageId();
  const found = await getChatMessages(id);
  const data = found[0].data;
  document.getElementById('affection').textContent = String(data.stat_data['好感度']);
  document.getElementById('change').textContent = String(data.delta_data['好感度'] || '');
  document.getElementById('turn').textContent = 'message ' + id + ' of ' + getLastMessageId();
  localStorage.setItem('seen', String(id));
})();
</script>
</body></html>
```"""


def mvu_card(first_mes: str = "你来了。") -> dict[str, Any]:
    init = card_book_entry(0, [], "好感度: 10\n", comment="[InitVar]", enabled=False)
    status_regex = {
        "id": "status-bar",
        "scriptName": "状态栏",
        "findRegex": "<StatusPlaceHolderImpl/>",
        "replaceString": STATUS_BAR,
        "placement": [2],
        "markdownOnly": True,
        "disabled": False,
    }
    return card_document(
        "小穗",
        spec="v3",
        book=[init],
        first_mes=first_mes,
        extensions={"regex_scripts": [status_regex]},
    )


def import_card(page: Page, server: RunningServer, card: dict[str, Any]) -> str:
    answer = page.request.post(
        server.url + "api/characters/import",
        multipart={
            "file": {
                "name": "card.json",
                "mimeType": "application/json",
                "buffer": json.dumps(card, ensure_ascii=False).encode(),
            }
        },
    )
    assert answer.status == 201, answer.text()
    return str(answer.json()["id"])


def allow(server: RunningServer, character_id: str, **answers: Any) -> None:
    body = {"regex_scripts": True, "frame_scripts": True, **answers}
    server.request("PUT", f"/api/characters/{quote(character_id)}/permissions", body)


def turn(n: int, value: int) -> str:
    return (
        f"她笑了，这是第{n}轮。\n"
        f"<UpdateVariable>\n_.set('好感度', {value}, {value + 5});\n</UpdateVariable>\n"
        "<StatusPlaceHolderImpl/>"
    )


def frame_of(message: Locator) -> FrameLocator:
    return message.locator(tid("chat-html-frame")).content_frame


def test_the_status_bar_shows_the_new_values_after_each_turn(
    start_server: Callable[..., Any], sized_page: Page
) -> None:
    page = sized_page
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(*(Reply(text=turn(n, 10 + 5 * (n - 1))) for n in (1, 2, 3)))
        server = start_server(home_with(llm.url))
        page.goto(server.url + "chat")
        character_id = import_card(page, server, mvu_card())
        allow(server, character_id)
        start_chat(page, server, character_id)

        for n in (1, 2, 3):
            send(page, f"第{n}句")
            last = messages(page).last
            frame = last.locator(tid("chat-html-frame"))
            expect(frame).to_have_attribute("sandbox", "allow-scripts")
            expect(frame).to_have_attribute("data-scripts", "on")
            inside = frame_of(last)
            value = 10 + 5 * n
            expect(inside.locator("#affection")).to_have_text(str(value))
            expect(inside.locator("#change")).to_have_text(f"{value - 5}->{value}")
            expect(inside.locator("#turn")).to_have_text(f"message {2 * n} of {2 * n}")
            # The story text stays text; the placeholder and the update are not shown.
            expect(last.locator(tid("chat-message-text"))).to_contain_text(f"这是第{n}轮")
            expect(last).not_to_contain_text("StatusPlaceHolderImpl")
            # The bar is sized to its content (one line with a border).
            page.wait_for_function(
                "el => { const h = el.getBoundingClientRect().height; return h > 20 && h < 80 }",
                arg=frame.element_handle(),
            )

        # Each turn's bar keeps its own turn's values.
        first_bar = frame_of(messages(page).nth(2))
        expect(first_bar.locator("#affection")).to_have_text("15")
        no_sideways_scroll(page)


ATTACK = r"""```html
<!DOCTYPE html><html><body>
<ul id="results"></ul>
<script>
const results = document.getElementById('results');
function report(key, value) {
  const li = document.createElement('li');
  li.id = key;
  li.textContent = value;
  results.appendChild(li);
}
async function attempt(key, fn) {
  try {
    const got = await fn();
    report(key, 'GOT ' + String(got).slice(0, 60));
  } catch (e) {
    report(key, 'blocked');
  }
}
(async () => {
  await attempt('parent-document', () => parent.document.body.innerHTML.length);
  await attempt('top-storage', () => top.localStorage.length);
  await attempt('cookie', () => {
    const c = document.cookie;
    if (!c) throw new Error('empty');
    return c;
  });
  await attempt('app-storage', () => {
    if (localStorage.length === 0) throw new Error('only the frame\'s own storage');
    return localStorage.key(0);
  });
  await attempt('own-storage', () => {
    localStorage.setItem('k', 'v');
    return localStorage.getItem('k');
  });
  await attempt('fetch-api', async () => {
    const answer = await fetch(new URL('/api/chats', document.baseURI));
    return answer.status + ' ' + (await answer.text());
  });
  await attempt('window-open', () => {
    const w = window.open('https://example.com/');
    if (!w) throw new Error('no window');
    return 'opened';
  });
  await attempt('top-navigation', () => {
    top.location.href = 'https://example.com/#pwned';
    return 'navigated';
  });
  await attempt('bridge-write', () =>
    replaceVariables({ stat_data: { 好感度: 999 } },
                     { type: 'message', message_id: getCurrentMessageId() })
      .then(() => 'written'));
  // Another window (a frame inside this one) speaks with this frame's own id and nonce.
  const config = Array.from(document.scripts).map((s) => s.textContent)
    .find((t) => t.includes('"nonce":"'));
  const id = /"frame":"([^"]*)"/.exec(config)[1];
  const nonce = /"nonce":"([^"]*)"/.exec(config)[1];
  const forged = { type: 'storyloom:call', frame: id, nonce, id: 777, fn: 'replaceVariables',
    args: { type: 'message', message_id: getCurrentMessageId(), variables: { forged: 1 } } };
  const answered = new Promise((resolve) => {
    addEventListener('message', (e) => { if (e.data && e.data.id === 777) resolve('ACCEPTED') });
    setTimeout(() => resolve('ignored'), 1500);
  });
  const child = document.createElement('iframe');
  child.srcdoc = '<script>parent.parent.postMessage('
    + JSON.stringify(forged) + ', "*")<' + '/script>';
  document.body.appendChild(child);
  parent.postMessage({ ...forged, frame: 'someone-else', nonce: 'guess' }, '*');
  report('forged', await answered);
  report('done', 'yes');
})();
</script></body></html>
```"""

ATTEMPTS = (
    "parent-document",
    "top-storage",
    "cookie",
    "app-storage",
    "fetch-api",
    "window-open",
    "top-navigation",
)


def attack_chat(
    page: Page, server: RunningServer, character_id: str, **answers: Any
) -> tuple[FrameLocator, str]:
    allow(server, character_id, **answers)
    start_chat(page, server, character_id)
    greeting = messages(page).first
    expect(greeting.locator(tid("chat-html-frame"))).to_have_attribute("sandbox", "allow-scripts")
    inside = frame_of(greeting)
    expect(inside.locator("#done")).to_have_text("yes", timeout=15_000)
    return inside, page.url.rsplit("/", 1)[-1]


def greeting_variables(server: RunningServer, conversation_id: str) -> dict[str, Any]:
    view = server.api(f"/api/chats/{conversation_id}")
    first = view["messages"][0]["id"]
    state = server.api(f"/api/chats/{conversation_id}/messages/{first}/state")
    variables: dict[str, Any] = state["state"]["variables"]
    return variables


def test_a_cards_page_cannot_reach_the_app_and_writes_only_where_allowed(
    start_server: Callable[..., Any], page: Page
) -> None:
    with ReplayLLMServer(models=["test-model"]) as llm:
        server = start_server(home_with(llm.url), token=True)
        page.goto(f"{server.url}?token={server.token}")
        expect(page).to_have_url(re.compile(r"/chat"))
        app_url = page.url
        character_id = import_card(page, server, mvu_card(first_mes=f"看看这个。\n{ATTACK}"))
        inside, conversation_id = attack_chat(page, server, character_id)
        for key in ATTEMPTS:
            expect(inside.locator(f"#{key}")).to_have_text("blocked")
        expect(inside.locator("#bridge-write")).to_have_text("blocked")
        expect(inside.locator("#forged")).to_have_text("ignored")
        # The card's own storage works: it lives in the frame's memory, not the app's.
        expect(inside.locator("#own-storage")).to_have_text("GOT v")
        assert page.url.startswith(app_url.split("/chat")[0])
        assert "pwned" not in page.url
        assert len(page.context.pages) == 1, "no window was opened"
        assert greeting_variables(server, conversation_id)["stat_data"] == {"好感度": 10}

        # With writes allowed, the same page's bridge write lands (and the forged one not).
        page.goto(server.url + "chat")
        inside, conversation_id = attack_chat(page, server, character_id, frame_writes=True)
        expect(inside.locator("#bridge-write")).to_have_text("GOT written")
        expect(inside.locator("#forged")).to_have_text("ignored")
        for key in ATTEMPTS:
            expect(inside.locator(f"#{key}")).to_have_text("blocked")
        # the chat's MVU structure rules stay: the frame never saw them
        written = greeting_variables(server, conversation_id)
        assert written["stat_data"] == {"好感度": 999} and "$mvu_schema" in written


def test_a_front_end_card_renders_its_page_with_scripts_off_until_allowed(
    start_server: Callable[..., Any], sized_page: Page
) -> None:
    page = sized_page
    front_end = (
        "欢迎。\n```html\n<!DOCTYPE html><html><head><style>h1{color:#b3541e}</style></head>"
        '<body><h1 id="title">小穗的小屋</h1><p id="run">scripts off</p>'
        "<script>document.getElementById('run').textContent = 'scripts on'</script>"
        "</body></html>\n```"
    )
    with ReplayLLMServer(models=["test-model"]) as llm:
        server = start_server(home_with(llm.url))
        page.goto(server.url + "chat")
        character_id = import_card(page, server, mvu_card(first_mes=front_end))
        start_chat(page, server, character_id)
        greeting = messages(page).first
        frame = greeting.locator(tid("chat-html-frame"))
        expect(frame).to_have_attribute("data-page", "page")
        assert "allow-scripts" not in (frame.get_attribute("sandbox") or "")
        inside = frame_of(greeting)
        expect(inside.locator("#title")).to_have_text("小穗的小屋")
        expect(inside.locator("#run")).to_have_text("scripts off")
        expect(greeting.locator(tid("chat-html-scripts-off"))).to_be_visible()
        expect(greeting.locator(tid("chat-message-text"))).to_contain_text("欢迎。")
        no_sideways_scroll(page)

        allow(server, character_id)
        start_chat(page, server, character_id)
        greeting = messages(page).first
        expect(greeting.locator(tid("chat-html-frame"))).to_have_attribute(
            "sandbox", "allow-scripts"
        )
        expect(frame_of(greeting).locator("#run")).to_have_text("scripts on")
        expect(greeting.locator(tid("chat-html-scripts-off"))).to_have_count(0)
        no_sideways_scroll(page)


def test_a_page_that_navigates_itself_away_is_closed(
    start_server: Callable[..., Any], sized_page: Page
) -> None:
    # A sandboxed frame with scripts may still load another address into itself (browsers
    # allow it): storyloom closes the frame at once and says so. Without scripts, Chromium
    # refuses even the meta refresh, and the page stays.
    page = sized_page
    leaving = (
        "你好。\n```html\n<!DOCTYPE html><html><head>"
        '<meta http-equiv="refresh" content="0;url=about:blank"></head>'
        "<body><p id=\"stay\">here</p><script>location.href = '/api/health?leak=script'</script>"
        "</body></html>\n```"
    )
    with ReplayLLMServer(models=["test-model"]) as llm:
        server = start_server(home_with(llm.url))
        page.goto(server.url + "chat")
        for allowed in (False, True):
            card = mvu_card(first_mes=leaving)
            card["data"]["name"] = f"出走{int(allowed)}"
            character_id = import_card(page, server, card)
            if allowed:
                allow(server, character_id)
            start_chat(page, server, character_id)
            greeting = messages(page).first
            expect(greeting.locator(tid("chat-message-text"))).to_contain_text("你好。")
            if allowed:
                expect(greeting.locator(tid("chat-html-left"))).to_be_visible()
                expect(greeting.locator(tid("chat-html-frame"))).to_have_count(0)
            else:
                expect(frame_of(greeting).locator("#stay")).to_have_text("here")
                expect(greeting.locator(tid("chat-html-left"))).to_have_count(0)


HELPER = """
const p = document.createElement('p');
p.id = 'ran';
p.textContent = 'last ' + getLastMessageId();
document.body.appendChild(p);
eventOn(tavern_events.MESSAGE_RECEIVED, (id) => {
  const heard = document.createElement('p');
  heard.id = 'heard';
  heard.textContent = 'received ' + id + ' ' + getVariables({ type: 'chat' }).stat_data['好感度'];
  document.body.appendChild(heard);
});
"""


def test_only_the_allowed_helper_script_runs_and_hears_the_reply(
    start_server: Callable[..., Any], page: Page
) -> None:
    card = mvu_card()
    card["data"]["extensions"]["tavern_helper"] = {
        "scripts": [
            {"type": "script", "id": "allowed", "name": "好的", "enabled": True, "content": HELPER},
            {"type": "script", "id": "other", "name": "没允许", "enabled": True, "content": HELPER},
        ]
    }
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(Reply(text=turn(1, 10)))
        server = start_server(home_with(llm.url))
        page.goto(server.url + "chat")
        character_id = import_card(page, server, card)
        allow(server, character_id, helper_scripts=["allowed"])
        start_chat(page, server, character_id)
        scripts = page.locator(tid("chat-script-frame"))
        expect(scripts).to_have_count(1)
        expect(scripts).to_have_attribute("sandbox", "allow-scripts")
        expect(page.locator(tid("chat-helper-scripts"))).to_have_attribute("data-count", "1")
        inside = scripts.content_frame
        expect(inside.locator("#ran")).to_have_text("last 0")
        send(page, "你好")
        expect(inside.locator("#heard")).to_have_text("received 2 15")
