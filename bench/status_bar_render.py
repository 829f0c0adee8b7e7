"""Status-bar render time: from a reply's end to its status bar showing the new value.

A card built here plays as an MVU card does (``[InitVar]``, ``_.set`` in
``<UpdateVariable>``, ``<StatusPlaceHolderImpl/>`` turned into a full HTML page by a
display regex); its status bar reads ``stat_data`` through the frame bridge
(``getChatMessages(getCurrentMessageId())``) and, once it has written the value into its
page, tells the chat page by ``postMessage`` (the bench's own line in the card). In
Chromium (as the browser tests run it), over N turns:

* frame: from the reply's end on the WebSocket (``chat:done``, or the finished message
  if it comes first) to the status bar's "shown" message, timed in the page;
* text: the same replies in a chat with the character's scripts off (no regex, no
  frame): from the same end to the message showing as finished text.

Prints p50/p95 of each and ends with ``ratio: <frame p50 / text p50>``. Target: the
frame under 100 ms.

    .venv/bin/python bench/status_bar_render.py [--turns 10]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.testing.st_documents import card_book_entry, card_document

CHROMIUM = Path(os.environ.get("STORYLOOM_CHROMIUM", "/usr/bin/chromium"))
TARGET_MS = 100.0

STATUS_BAR = """```html
<!DOCTYPE html>
<html><head><style>#bar{border:1px solid #c9a;padding:6px;border-radius:6px}</style></head>
<body><div id="bar">好感度 <b id="affection">…</b> <span id="change"></span></div>
<script>
(async () => {
  const found = await getChatMessages(getCurrentMessageId());
  const data = found[0].data;
  const value = String(data.stat_data['好感度']);
  document.getElementById('affection').textContent = value;
  document.getElementById('change').textContent = String(data.delta_data['好感度'] || '');
  requestAnimationFrame(() => parent.postMessage({ bench: 'shown', value }, '*'));
})();
</script>
</body></html>
```"""

# Records, in the page's clock, each reply's end (WebSocket) and each bar's "shown".
INIT = """
window.__bench = { ends: [], shown: [] };
const Native = window.WebSocket;
window.WebSocket = class extends Native {
  constructor(...args) {
    super(...args);
    this.addEventListener('message', (event) => {
      try {
        const m = JSON.parse(event.data);
        const finished = m.type === 'chat:message' && m.message && m.message.role === 'assistant'
          && m.message.status === 'complete';
        if (m.type === 'chat:done' || finished) window.__bench.ends.push(performance.now());
      } catch (e) {}
    });
  }
};
addEventListener('message', (event) => {
  if (event.data && event.data.bench === 'shown') {
    window.__bench.shown.push([performance.now(), event.data.value]);
  }
});
"""

# The time the newest message first shows as finished text holding `expected`.
WATCH_TEXT = """(expected) => {
  window.__bench.text = null;
  const check = () => {
    const all = document.querySelectorAll('[data-testid="chat-message"]');
    const last = all[all.length - 1];
    if (last && last.dataset.status === 'complete' && last.textContent.includes(expected)) {
      window.__bench.text = performance.now();
      return true;
    }
    return false;
  };
  if (check()) return;
  const observer = new MutationObserver(() => { if (check()) observer.disconnect(); });
  observer.observe(document.body, { subtree: true, childList: true, characterData: true,
                                    attributes: true });
}"""


def card(name: str) -> dict[str, Any]:
    init = card_book_entry(0, [], "好感度: 10\n", comment="[InitVar]", enabled=False)
    regex = {
        "id": "status-bar",
        "scriptName": "状态栏",
        "findRegex": "<StatusPlaceHolderImpl/>",
        "replaceString": STATUS_BAR,
        "placement": [2],
        "markdownOnly": True,
    }
    return card_document(
        name, spec="v3", book=[init], first_mes="你来了。", extensions={"regex_scripts": [regex]}
    )


def reply(turn: int) -> str:
    value = 10 + 5 * (turn - 1)
    return (
        f"她笑了，这是第{turn}轮。\n"
        f"<UpdateVariable>\n_.set('好感度', {value}, {value + 5});\n</UpdateVariable>\n"
        "<StatusPlaceHolderImpl/>"
    )


def start_server(home: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "storyloom", "serve", "--port", str(port), "--home", str(home),
         "--no-token", "--no-local-model"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/api/health", timeout=2).status_code == 200:
                return process, url
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("storyloom serve did not start")


def make_character(client: httpx.Client, allowed: bool) -> str:
    # Two characters of one card: the second under another name (no "same card" question).
    data = json.dumps(card("小穗" if allowed else "小穗（文字）"), ensure_ascii=False).encode()
    answer = client.post(
        "/api/characters/import", files={"file": ("card.json", data, "application/json")}
    )
    answer.raise_for_status()
    character_id = str(answer.json()["id"])
    answers = {"regex_scripts": allowed, "frame_scripts": allowed}
    client.put(f"/api/characters/{quote(character_id)}/permissions", json=answers)
    return character_id


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def play(page: Any, url: str, conversation_id: str, turns: int, frame: bool) -> list[float]:
    """Each turn's time from the reply's end to what it shows, in ms."""
    page.goto(f"{url}/chat/{conversation_id}")
    page.locator('[data-testid="ws-status"][data-status="connected"]').wait_for()
    page.locator('[data-testid="chat-message"]').first.wait_for()
    times = []
    for turn in range(1, turns + 1):
        value = str(10 + 5 * turn)
        ends_before = page.evaluate("window.__bench.ends.length")
        if not frame:
            page.evaluate(WATCH_TEXT, f"这是第{turn}轮")
        page.fill('[data-testid="chat-input"]', f"第{turn}句")
        page.press('[data-testid="chat-input"]', "Enter")
        if frame:
            page.wait_for_function(
                "(v) => window.__bench.shown.some((s) => s[1] === v)", arg=value, timeout=30_000
            )
            shown = page.evaluate("(v) => window.__bench.shown.find((s) => s[1] === v)[0]", value)
        else:
            page.wait_for_function("() => window.__bench.text !== null", timeout=30_000)
            shown = page.evaluate("window.__bench.text")
        page.wait_for_function(f"() => window.__bench.ends.length > {ends_before}")
        end = page.evaluate(f"window.__bench.ends[{ends_before}]")
        times.append(float(shown) - float(end))
        page.locator('[data-testid="chat-send"]').wait_for()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=10)
    measure(parser.parse_args().turns)


def measure(turns: int) -> None:
    """Play ``turns`` turns with the status bar framed and with it off; print the figures
    and the ``ratio:`` line (``bench/card_scripts.py`` calls this for its part (c))."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, ReplayLLMServer(models=["test-model"]) as llm:
        home = Path(tmp) / "home"
        home.mkdir()
        settings = {"user_llm": {"base_url": llm.url, "model": "test-model"}}
        (home / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
        llm.script(*(Reply(text=reply(t)) for t in range(1, turns + 1)))
        llm.script(*(Reply(text=reply(t)) for t in range(1, turns + 1)))
        process, url = start_server(home)
        try:
            with httpx.Client(base_url=url, timeout=60) as client:
                framed = make_character(client, allowed=True)
                plain = make_character(client, allowed=False)
                chats = {
                    name: client.post("/api/chats", json={"character_id": cid}).json()["id"]
                    for name, cid in (("frame", framed), ("text", plain))
                }
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.add_init_script(INIT)
                frame_ms = play(page, url, chats["frame"], turns, frame=True)
                text_ms = play(page, url, chats["text"], turns, frame=False)
                browser.close()
        finally:
            process.terminate()
            process.wait(timeout=30)
    print(f"status bar render over {turns} turns (reply's end → value shown, in the page)")
    for name, times in (("frame (sandboxed status bar)", frame_ms), ("text (frame off)", text_ms)):
        print(
            f"    {name}: p50 {statistics.median(times):.1f} ms, p95 {p(times, 0.95):.1f} ms, "
            f"max {max(times):.1f} ms"
        )
    frame_p50 = statistics.median(frame_ms)
    verdict = "met" if frame_p50 < TARGET_MS else "missed"
    print(f"    target: frame p50 under {TARGET_MS:.0f} ms ({verdict})")
    text_p50 = max(statistics.median(text_ms), 0.1)
    print(f"ratio: {frame_p50 / text_p50:.2f}  frame / plain text, p50")


if __name__ == "__main__":
    main()
