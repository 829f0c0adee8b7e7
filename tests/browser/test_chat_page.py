"""The chat page end to end: real server, real browser, a real OpenAI-style endpoint.

Each test starts a conversation with a character preset, sends messages and watches the
scripted replies of the replay LLM server stream in; then swipes an old reply, branches,
travels back in time through the tree (the state panel follows), and stops a reply
mid-stream.
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
from tests.browser.conftest import RESULTS_DIR, home_with, message_with, messages, send, tid
from tests.browser.conftest import start_chat as new_chat

pytestmark = pytest.mark.browser

GREETING = "Welcome to the Lantern Inn, traveller."
CHARACTER_ID = "mira"
MIRA = {"name": "Mira", "description": "The innkeeper of the Lantern Inn.", "first_mes": GREETING}


def with_llm_and_character(url: str) -> Callable[[Path], None]:
    """A home whose user LLM is the replay server, and a project with one character."""
    return home_with(url, {CHARACTER_ID: MIRA})


def future(page: Page) -> Locator:
    return page.locator(f'{tid("chat-log")} {tid("chat-message")}[data-future="true"]')


def start_chat(page: Page, server: Any) -> None:
    new_chat(page, server, CHARACTER_ID)
    expect(messages(page).first).to_contain_text(GREETING)
    expect(page.locator(tid("chat-conversation"))).to_have_count(1)


# Records the length of the last message's text at every change, so the test sees the
# reply grow in steps without depending on how fast it arrives.
WATCH_LOG = """el => {
  window.__lengths = [];
  new MutationObserver(() => {
    const all = el.querySelectorAll('[data-testid="chat-message"]');
    const last = all[all.length - 1];
    const text = last && last.querySelector('[data-testid="chat-message-text"]');
    window.__lengths.push(text ? text.textContent.length : 0);
  }).observe(el, { childList: true, subtree: true, characterData: true });
}"""


def test_a_reply_streams_in_with_its_thought_folded(
    start_server: Callable[..., Any], page: Page
) -> None:
    reply = (
        "<thought>She studies the stranger's muddy boots.</thought>"
        '*Mira wipes the counter.* "A room for the night? We have one left by the fire."'
    )
    status_bar = '<div class="status">HP <b id="hp">10</b> / 10</div>\nThe fire crackles.'
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(
            Reply(text=reply, chunks=12, chunk_delay_s=0.08),
            Reply(text=status_bar),
        )
        server = start_server(with_llm_and_character(llm.url))
        start_chat(page, server)
        page.locator(tid("chat-log")).evaluate(WATCH_LOG)

        send(page, "Good evening! Any rooms free?")
        last = messages(page).last
        expect(last).to_have_attribute("data-role", "assistant")
        text = last.locator(tid("chat-message-text"))
        expect(text).to_contain_text("A room for the night? We have one left by the fire.")
        expect(text).not_to_contain_text("muddy boots")
        expect(text).not_to_contain_text("<thought>")
        lengths: list[int] = page.evaluate("window.__lengths")
        grown = sorted({n for n in lengths if n > 0})
        assert len(grown) >= 3, f"the reply arrived in steps, not at once: {grown}"

        # Actions in italics, speech coloured; no markup from the model is HTML.
        expect(text.locator(".chat-em")).to_have_text("Mira wipes the counter.")
        expect(text.locator(".chat-quote").first).to_contain_text('"A room for the night?')

        # The thought is folded away, and opens on request.
        thought = last.locator(tid("chat-thought"))
        expect(thought).to_have_count(1)
        assert thought.evaluate("d => d.open") is False
        expect(thought.get_by_text("muddy boots")).to_be_hidden()
        thought.locator("summary").click()
        expect(thought.get_by_text("muddy boots")).to_be_visible()

        # The model saw the user's words after the greeting.
        sent = llm.chat_requests[0]["messages"]
        assert any("Any rooms free?" in str(m.get("content")) for m in sent)
        assert any(GREETING in str(m.get("content")) for m in sent)

        # HTML in a reply renders in a sandboxed frame with scripts off.
        send(page, "How am I doing?")
        frame = messages(page).last.locator(tid("chat-html-frame"))
        expect(frame).to_have_count(1)
        sandbox = frame.get_attribute("sandbox") or ""
        assert "allow-scripts" not in sandbox
        expect(frame).to_have_attribute("data-scripts", "off")
        expect(page.frame_locator(tid("chat-html-frame")).locator("#hp")).to_have_text("10")
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(RESULTS_DIR / "chat-reply.png"))

        # A reload shows the same conversation.
        page.reload()
        expect(messages(page)).to_have_count(5)
        expect(messages(page).nth(2)).to_contain_text("We have one left by the fire.")


def test_swipe_on_an_old_reply_and_back_keeps_the_later_messages(
    start_server: Callable[..., Any], page: Page
) -> None:
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(
            Reply(text="The soup is barley."),
            Reply(text="The stew is rabbit."),
            Reply(text="Tonight it is onion soup.", chunks=6, chunk_delay_s=0.05),
        )
        server = start_server(with_llm_and_character(llm.url))
        start_chat(page, server)
        send(page, "What soup do you have?")
        send(page, "And the stew?")
        expect(messages(page)).to_have_count(5)

        old = message_with(page, "The soup is barley.")
        expect(old.locator(tid("chat-swipe-count"))).to_have_text("1/1")
        # Right of the last version generates a new one beside it; the later turn goes
        # with the other version.
        old.locator(tid("chat-swipe-right")).click()
        expect(messages(page)).to_have_count(3)
        newest = messages(page).last
        expect(newest).to_contain_text("Tonight it is onion soup.")
        expect(newest).to_have_attribute("data-status", "complete")
        expect(newest.locator(tid("chat-swipe-count"))).to_have_text("2/2")
        expect(page.get_by_text("The stew is rabbit.")).to_have_count(0)

        # Back to the first version: the turn after it comes back.
        newest.locator(tid("chat-swipe-left")).click()
        expect(messages(page)).to_have_count(5)
        expect(messages(page).nth(2)).to_contain_text("The soup is barley.")
        expect(messages(page).nth(2).locator(tid("chat-swipe-count"))).to_have_text("1/2")
        expect(messages(page).last).to_contain_text("The stew is rabbit.")

        # Forward again goes to the version that exists: nothing is generated.
        message_with(page, "The soup is barley.").locator(tid("chat-swipe-right")).click()
        expect(messages(page)).to_have_count(3)
        expect(messages(page).last).to_contain_text("Tonight it is onion soup.")
        assert len(llm.chat_requests) == 3

        # The arrow keys in the empty message box swipe the last reply.
        page.focus(tid("chat-input"))
        page.keyboard.press("ArrowLeft")
        expect(messages(page)).to_have_count(5)
        expect(messages(page).last).to_contain_text("The stew is rabbit.")
        assert len(llm.chat_requests) == 3


def test_branch_from_an_earlier_message_then_the_tree_shows_both_branches(
    start_server: Callable[..., Any], page: Page
) -> None:
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(
            Reply(text="North leads to the mountains."),
            Reply(text="The pass is snowed in."),
            Reply(text="South leads to the sea."),
        )
        server = start_server(with_llm_and_character(llm.url))
        start_chat(page, server)
        send(page, "Where does the north road go?")
        send(page, "Can I cross?")

        # Branch from the first reply: what came after it is greyed, still there.
        message_with(page, "North leads to the mountains.").locator(tid("chat-branch")).click()
        expect(messages(page)).to_have_count(3)
        expect(future(page)).to_have_count(2)
        expect(page.locator(tid("chat-continuation"))).to_contain_text("The pass is snowed in.")

        # The next message starts a new branch.
        send(page, "And the south road?")
        expect(future(page)).to_have_count(0)
        expect(messages(page)).to_have_count(5)
        expect(messages(page).last).to_contain_text("South leads to the sea.")

        page.click(tid("chat-side-tree"))
        nodes = page.locator(tid("chat-tree-node"))
        expect(nodes).to_have_count(7)
        expect(page.locator(f'{tid("chat-tree-node")}[data-on-path="true"]')).to_have_count(5)
        fork = nodes.filter(has_text="North leads to the mountains.")
        expect(fork.locator(".chat-tree-branches")).to_have_text("⑂2")
        expect(page.locator(f'{tid("chat-tree-node")}[data-pointer="true"]')).to_contain_text(
            "South leads to the sea."
        )

        # Jump to the other branch's end from the tree.
        nodes.filter(has_text="The pass is snowed in.").click()
        expect(messages(page).last).to_contain_text("The pass is snowed in.")
        expect(messages(page)).to_have_count(5)
        expect(page.get_by_text("South leads to the sea.", exact=False)).to_have_count(1)  # tree
        expect(page.locator(f'{tid("chat-tree-node")}[data-pointer="true"]')).to_contain_text(
            "The pass is snowed in."
        )


def state_value(page: Page, key: str) -> Locator:
    return page.locator(
        f'{tid("chat-state-panel")} {tid("chat-state-value")}[data-path="/variables/{key}"]'
    )


def set_hp(value: int) -> str:
    return f'<state_update><set key="hp" value="{value}"></set></state_update>'


def test_time_travel_through_the_tree_restores_the_state(
    start_server: Callable[..., Any], page: Page
) -> None:
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(
            Reply(text="A goblin leaps out! " + set_hp(10)),
            Reply(text="It bites you. " + set_hp(5)),
        )
        server = start_server(with_llm_and_character(llm.url))
        start_chat(page, server)
        send(page, "I walk into the woods.")
        send(page, "I attack it.")
        expect(messages(page).last).to_contain_text("It bites you.")
        expect(page.locator(tid("chat-log"))).not_to_contain_text("state_update")

        page.click(tid("chat-side-state"))
        expect(state_value(page, "hp")).to_have_text("5")
        delta = page.locator(tid("chat-delta-op"))
        expect(delta).to_have_count(1)
        expect(delta).to_have_attribute("data-path", "/variables/hp")

        # Back in time to the first reply: the state there had hp 10.
        page.click(tid("chat-side-tree"))
        page.locator(tid("chat-tree-node")).filter(has_text="A goblin leaps out!").click()
        expect(messages(page).last).to_contain_text("A goblin leaps out!")
        expect(future(page)).to_have_count(2)
        page.click(tid("chat-side-state"))
        expect(state_value(page, "hp")).to_have_text("10")
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(RESULTS_DIR / "chat-time-travel.png"))

        # And forward again to the end.
        page.click(tid("chat-jump-end"))
        expect(future(page)).to_have_count(0)
        expect(messages(page).last).to_contain_text("It bites you.")
        expect(state_value(page, "hp")).to_have_text("5")

        # The prompt inspector of the last reply lists the blocks it was made of.
        messages(page).last.locator(tid("chat-show-prompt")).click()
        expect(page.locator(tid("chat-prompt-panel"))).to_be_visible()
        expect(page.locator(tid("chat-prompt-block")).first).to_be_visible()
        expect(page.locator(f'{tid("chat-prompt-block")}[data-kind="history"]')).not_to_have_count(
            0
        )
        expect(page.locator(tid("chat-prompt-total"))).to_contain_text("tokens")
        page.screenshot(path=str(RESULTS_DIR / "chat-prompt-inspector.png"))


def test_stop_keeps_the_partial_reply_marked_and_retry_makes_a_sibling(
    start_server: Callable[..., Any], page: Page
) -> None:
    story = "Once there was a lantern that never went out, not even in the great storm."
    held = Reply(text=story, chunks=8, hold_after_chunks=3)
    shown = "".join(held.pieces()[:3]).strip()
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(held, Reply(text="The lantern story, told in full."))
        server = start_server(with_llm_and_character(llm.url))
        start_chat(page, server)
        send(page, "Tell me a story.", wait_complete=False)
        reply = messages(page).last
        expect(reply).to_have_attribute("data-status", "streaming")
        expect(reply.locator(tid("chat-message-text"))).to_contain_text(shown)

        page.click(tid("chat-stop"))
        expect(reply).to_have_attribute("data-status", "partial")
        expect(reply).to_have_attribute("data-mark", "stopped")
        expect(reply.locator(tid("chat-mark"))).to_have_text("stopped")
        expect(reply.locator(tid("chat-message-text"))).to_have_text(shown)
        expect(page.locator(tid("chat-send"))).to_be_visible()

        # Kept after a reload, still marked.
        page.reload()
        reply = messages(page).last
        expect(reply).to_have_attribute("data-mark", "stopped")
        expect(reply.locator(tid("chat-message-text"))).to_have_text(shown)

        # Retry writes a new version beside it.
        reply.locator(tid("chat-retry")).click()
        expect(reply).to_contain_text("The lantern story, told in full.")
        expect(reply).to_have_attribute("data-status", "complete")
        expect(reply.locator(tid("chat-swipe-count"))).to_have_text("2/2")


def test_a_second_tab_sees_the_first_tabs_turn(
    start_server: Callable[..., Any], page: Page
) -> None:
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(Reply(text="The bell rings twice."), Reply(text="Someone knocks."))
        server = start_server(with_llm_and_character(llm.url))
        start_chat(page, server)
        other = page.context.new_page()
        other.goto(page.url)
        expect(messages(other)).to_have_count(1)
        expect(other.locator(tid("ws-status"))).to_have_attribute("data-status", "connected")

        send(page, "What was that?")
        expect(messages(other)).to_have_count(3)
        expect(messages(other).last).to_contain_text("The bell rings twice.")

        # The second tab goes on from what the first wrote; nothing is overwritten.
        send(other, "And now?")
        expect(messages(page)).to_have_count(5)
        expect(messages(page).last).to_contain_text("Someone knocks.")
        other.close()


def test_edit_as_a_new_branch_saves_a_version_beside_the_old_one(
    start_server: Callable[..., Any], page: Page
) -> None:
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(Reply(text="Two silver, please."), Reply(text="Ten silver for the suite."))
        server = start_server(with_llm_and_character(llm.url))
        start_chat(page, server)
        send(page, "How much for a bed?")
        send(page, "And the suite?")

        reply = message_with(page, "Two silver, please.")
        reply.locator(tid("chat-edit")).click()
        box = page.locator(tid("chat-edit-text"))
        expect(box).to_have_value("Two silver, please.")
        # Escape leaves the message as it was.
        box.press("Escape")
        expect(box).to_have_count(0)
        reply.locator(tid("chat-edit")).click()
        page.fill(tid("chat-edit-text"), "Three silver, and breakfast.")
        page.click(tid("chat-edit-branch"))

        # The edit is a sibling: the turn after the old text stays with the old text.
        expect(messages(page)).to_have_count(3)
        edited = messages(page).last
        expect(edited).to_contain_text("Three silver, and breakfast.")
        expect(edited.locator(tid("chat-swipe-count"))).to_have_text("2/2")
        edited.locator(tid("chat-swipe-left")).click()
        expect(messages(page)).to_have_count(5)
        expect(messages(page).nth(2)).to_contain_text("Two silver, please.")
        expect(messages(page).last).to_contain_text("Ten silver for the suite.")
        assert len(llm.chat_requests) == 2


def test_a_stale_tab_is_told_and_reloads_instead_of_overwriting(
    start_server: Callable[..., Any], page: Page
) -> None:
    muted = {"on": False}

    def relay(route: Any) -> None:
        server_ws = route.connect_to_server()

        def to_page(message: str | bytes) -> None:
            if muted["on"] and isinstance(message, str) and '"chat:' in message:
                return  # this tab does not hear the other writer
            route.send(message)

        server_ws.on_message(to_page)
        route.on_message(lambda message: server_ws.send(message))

    page.route_web_socket(re.compile(r"/ws$"), relay)
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(Reply(text="The road is long."))
        server = start_server(with_llm_and_character(llm.url))
        start_chat(page, server)
        send(page, "Is it far?")
        conversation_id = page.url.rsplit("/", 1)[-1]

        # Someone else goes back to the greeting while this tab hears nothing of it.
        muted["on"] = True
        view = server.api(f"/api/chats/{conversation_id}")
        greeting = view["messages"][0]["id"]
        body = {"message_id": greeting, "expected_version": view["conversation"]["version"]}
        post_json(server.url + f"api/chats/{conversation_id}/pointer", body)

        # This tab acts on what it shows: the server refuses, the tab says so and reloads.
        message_with(page, "Is it far?").locator(tid("chat-branch")).click()
        notice = page.locator(tid("chat-notice"))
        expect(notice).to_have_attribute("data-kind", "conflict")
        expect(notice).to_contain_text("changed elsewhere")
        expect(messages(page)).to_have_count(1)
        expect(future(page)).to_have_count(2)
        after = server.api(f"/api/chats/{conversation_id}")
        assert after["conversation"]["pointer"] == greeting


def post_json(url: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        return json.loads(resp.read())


ST_CHAT = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "sillytavern"
    / "chat_maren_legacy_header.jsonl"
)


def test_import_a_sillytavern_chat_from_the_new_chat_form(
    start_server: Callable[..., Any], page: Page
) -> None:
    sample = ST_CHAT
    server = start_server()
    page.goto(server.url + "chat")
    expect(page.locator(tid("chat-none"))).to_be_visible()
    page.click(tid("chat-new"))
    page.set_input_files(tid("chat-import-file"), str(sample))
    expect(page).to_have_url(re.compile(r"/chat/[0-9a-f]+$"))
    expect(messages(page)).to_have_count(7)
    expect(messages(page).first).to_contain_text("You wake to the smell of lamp oil")
    expect(messages(page).nth(1).locator(tid("chat-message-name"))).to_have_text("青禾")
    expect(page.locator(tid("chat-conversation"))).to_have_count(1)


def test_scripts_in_message_html_run_only_once_allowed(
    start_server: Callable[..., Any], page: Page
) -> None:
    widget = (
        '<div id="widget">scripts off</div>\n'
        "<script>document.getElementById('widget').textContent = 'scripts on';"
        " try { parent.document.body.dataset.leak = 'yes' } catch (e) {}</script>"
    )
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(Reply(text=widget))
        server = start_server(with_llm_and_character(llm.url))
        start_chat(page, server)
        send(page, "Show me the widget.")
        frame = messages(page).last.locator(tid("chat-html-frame"))
        expect(frame).to_have_attribute("data-scripts", "off")
        inside = page.frame_locator(tid("chat-html-frame")).locator("#widget")
        expect(inside).to_have_text("scripts off")

        # The user allows scripts for this conversation in its settings.
        page.click(tid("chat-side-settings"))
        page.check(tid("chat-settings-html-scripts"))
        page.click(tid("chat-settings-save"))
        expect(frame).to_have_attribute("data-scripts", "on")
        assert frame.get_attribute("sandbox") == "allow-scripts"
        expect(inside).to_have_text("scripts on")
        conversation_id = page.url.rsplit("/", 1)[-1]
        saved = server.api(f"/api/chats/{conversation_id}")["conversation"]["settings"]
        assert saved["allow_html_scripts"] is True
        # The frame is another origin: its script could not reach this page.
        assert page.evaluate("document.body.dataset.leak") is None


def test_a_malformed_state_update_is_reported_in_the_turn(
    start_server: Callable[..., Any], page: Page
) -> None:
    reply = 'The door creaks open. <state_update><add key="gold"></add></state_update>'
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(Reply(text=reply), Reply(text="The hall is quiet."))
        server = start_server(with_llm_and_character(llm.url))
        start_chat(page, server)
        send(page, "I push the door.")
        last = messages(page).last
        expect(last.locator(tid("chat-message-text"))).to_have_text("The door creaks open.")
        problems = last.locator(tid("chat-message-problems"))
        expect(problems).to_have_attribute("data-count", "1")
        expect(problems.locator(tid("chat-message-problem"))).to_be_hidden()
        problems.locator("summary").click()
        expect(problems.locator(tid("chat-message-problem"))).to_contain_text('<add key="gold">')
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(RESULTS_DIR / "chat-turn-problems.png"))

        # A clean turn has no marker.
        send(page, "I walk in.")
        expect(messages(page).last.locator(tid("chat-message-problems"))).to_have_count(0)


def test_an_edited_user_message_swipes_between_its_versions(
    start_server: Callable[..., Any], page: Page
) -> None:
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(Reply(text="Two silver, please."), Reply(text="The suite is ten."))
        server = start_server(with_llm_and_character(llm.url))
        start_chat(page, server)
        send(page, "How much for a bed?")

        asked = message_with(page, "How much for a bed?")
        expect(asked.locator(tid("chat-swipe-count"))).to_have_count(0)
        asked.locator(tid("chat-edit")).click()
        page.fill(tid("chat-edit-text"), "How much for the suite?")
        page.click(tid("chat-edit-branch"))
        expect(messages(page)).to_have_count(2)
        edited = messages(page).last
        expect(edited).to_contain_text("How much for the suite?")
        expect(edited.locator(tid("chat-swipe-count"))).to_have_text("2/2")
        # Past the user's last version there is nothing to generate.
        expect(edited.locator(tid("chat-swipe-right"))).to_be_disabled()

        # The new version is answered; the old one keeps its own reply.
        page.click(tid("chat-reply"))
        expect(messages(page)).to_have_count(3)
        expect(messages(page).last).to_contain_text("The suite is ten.")
        expect(messages(page).last).to_have_attribute("data-status", "complete")
        message_with(page, "How much for the suite?").locator(tid("chat-swipe-left")).click()
        expect(messages(page)).to_have_count(3)
        expect(messages(page).nth(1)).to_contain_text("How much for a bed?")
        expect(messages(page).nth(1).locator(tid("chat-swipe-count"))).to_have_text("1/2")
        expect(messages(page).last).to_contain_text("Two silver, please.")
        assert len(llm.chat_requests) == 2


def test_a_reply_stopped_before_any_text_is_marked_stopped(
    start_server: Callable[..., Any], page: Page
) -> None:
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(Reply(text="Never heard.", hold_after_chunks=0))
        server = start_server(with_llm_and_character(llm.url))
        start_chat(page, server)
        send(page, "Hello?", wait_complete=False)
        reply = messages(page).last
        expect(reply).to_have_attribute("data-status", "streaming")
        page.click(tid("chat-stop"))
        # No text came: the server keeps it as an error, and the page says it was stopped.
        expect(reply).to_have_attribute("data-status", "error")
        expect(reply).to_have_attribute("data-mark", "stopped")
        expect(reply.locator(tid("chat-mark"))).to_have_text("stopped")
        expect(reply.locator(tid("chat-retry"))).to_be_visible()

        page.reload()
        reply = messages(page).last
        expect(reply).to_have_attribute("data-mark", "stopped")
        expect(reply.locator(tid("chat-mark"))).to_have_text("stopped")


def st_preset_file(folder: Path) -> Path:
    """A SillyTavern chat-completion preset, in the shape of its
    ``default/content/presets/openai/Default.json``."""
    preset = {
        "temperature": 0.33,
        "top_p": 0.9,
        "frequency_penalty": 0,
        "presence_penalty": 0,
        "openai_max_context": 8000,
        "openai_max_tokens": 300,
        "squash_system_messages": False,
        "prompts": [
            {
                "identifier": "main",
                "name": "Main Prompt",
                "system_prompt": True,
                "role": "system",
                "content": "Storm house rules: {{char}} answers in one line.",
            },
            {"identifier": "charDescription", "name": "Char Description", "marker": True},
            {"identifier": "chatHistory", "name": "Chat History", "marker": True},
        ],
        "prompt_order": [
            {
                "character_id": 100001,
                "order": [
                    {"identifier": "main", "enabled": True},
                    {"identifier": "charDescription", "enabled": True},
                    {"identifier": "chatHistory", "enabled": True},
                ],
            }
        ],
    }
    path = folder / "Storm House.json"
    path.write_text(json.dumps(preset), encoding="utf-8")
    return path


def test_a_sillytavern_preset_imported_in_the_settings_writes_the_replies(
    start_server: Callable[..., Any], page: Page, tmp_path: Path
) -> None:
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(Reply(text="One line, as the house asks."))
        server = start_server(with_llm_and_character(llm.url))
        start_chat(page, server)
        conversation_id = page.url.rsplit("/", 1)[-1]

        page.click(tid("chat-side-settings"))
        pipeline = page.locator(tid("chat-settings-pipeline"))
        expect(pipeline).to_have_value("chat-default")
        expect(pipeline.locator('option[value="chat-default"]')).to_contain_text("built-in")

        page.set_input_files(tid("chat-settings-preset-file"), str(st_preset_file(tmp_path)))
        expect(page.locator(tid("chat-settings-preset-note"))).to_contain_text("st-storm-house")
        expect(pipeline).to_have_value("st-storm-house")
        saved = server.api(f"/api/chats/{conversation_id}")["conversation"]["settings"]
        assert saved["pipeline"] == "st-storm-house"
        expect(page.locator(tid("chat-settings-save"))).to_be_disabled()
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        group = page.locator(tid("chat-settings-pipeline-group"))
        group.scroll_into_view_if_needed()
        page.screenshot(path=str(RESULTS_DIR / "chat-settings-pipeline.png"))

        # The next reply is written by the preset's pipeline: its prompt and sampling.
        send(page, "Is the storm bad?")
        expect(messages(page).last).to_contain_text("One line, as the house asks.")
        request = llm.chat_requests[-1]
        assert request.get("temperature") == 0.33
        sent = " ".join(str(m.get("content")) for m in request["messages"])
        assert "Storm house rules: Mira answers in one line." in sent

        # "Open in the workflow editor" shows the pipeline in the canvas.
        page.click(tid("chat-settings-pipeline-open"))
        expect(page).to_have_url(re.compile(r"/workflows/st-storm-house$"))
        expect(page.locator(f'{tid("wf-node")}[data-node-type="chat:LLMInvoker"]')).to_have_count(1)


def test_the_built_in_pipeline_opens_in_the_workflow_editor(
    start_server: Callable[..., Any], page: Page
) -> None:
    server = start_server(with_llm_and_character("http://127.0.0.1:9/v1"))
    start_chat(page, server)
    page.click(tid("chat-side-settings"))
    expect(page.locator(tid("chat-settings-pipeline"))).to_have_value("chat-default")
    page.click(tid("chat-settings-pipeline-open"))
    expect(page).to_have_url(re.compile(r"/workflows/chat-default$"))
    expect(page.locator(f'{tid("wf-node")}[data-node-type="chat:SkeinBuilder"]')).to_have_count(1)


def test_a_chat_imported_on_the_knowledge_page_links_to_its_conversation(
    start_server: Callable[..., Any], page: Page
) -> None:
    sample = ST_CHAT
    server = start_server()
    page.goto(server.url + "knowledge")
    page.set_input_files(tid("import-file"), str(sample))
    link = page.locator(tid("import-chat-link"))
    expect(link).to_be_visible()
    link.click()
    expect(page).to_have_url(re.compile(r"/chat/[0-9a-f]+$"))
    expect(messages(page)).to_have_count(7)
    expect(messages(page).first).to_contain_text("You wake to the smell of lamp oil")
