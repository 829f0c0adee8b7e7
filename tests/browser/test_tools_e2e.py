"""Tools end to end (issue 14, "Done when"): real server, real browser, the replay LLM.

A plugin written by ``storyloom plugin new``'s scaffold is enabled on the Tools page and
one of its tools is tried from there. Then a character with an agent profile rolls dice
and writes a lore entry in one turn: the lore write waits for the user's approval in the
chat ("Always"), the turn stays one assistant message with its tool calls folded inside,
and a swipe replays the turn as one unit, with the same roll and no second question.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.project.project_knowledge import add_local_knowledge_base
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.tools.plugin_scaffold import write_example_plugin
from tests.browser.conftest import RESULTS_DIR, RunningServer, home_with, messages, start_chat, tid

pytestmark = pytest.mark.browser

PLUGIN = "hello-tools"
CHARACTER_ID = "mira"
GREETING = "Welcome to the Lantern Inn, traveller."
MIRA = {"name": "Mira", "description": "The innkeeper, fond of dice.", "first_mes": GREETING}
KB_ID = "campaign-lore"
AGENT_ID = "dice-keeper"
ENTRY_NAME = "The innkeeper's wager"

# Round 1: two chained calls in one TAM block; round 2: the reply, once the results are in.
ROUND_1 = (
    "Mira reaches under the counter for her dice.\n"
    "<|[REQUEST_TOOL]|>\n"
    "command1:「始」chat:RollDice「末」\n"
    "notation1:「始」1d20「末」\n"
    "command2:「始」kb:CreateEntry「末」\n"
    f"kb2:「始」{KB_ID}「末」\n"
    f"name2:「始」{ENTRY_NAME}「末」\n"
    "content2:「始」Mira bet the traveller a free room on one roll of her old die.「末」\n"
    "<|[END_TOOL]|>"
)
ROUND_2 = '"The die has spoken," Mira laughs. "Your room is on the house tonight."'


def prepare(url: str) -> Callable[[Path], None]:
    """The replay LLM as the user model, Mira, a lore book the agent may write, and the
    example plugin in the project's plugins/ (found, not enabled)."""
    base = home_with(url, {CHARACTER_ID: MIRA})

    def run(home: Path) -> None:
        base(home)
        project = home / "projects" / "default"
        add_local_knowledge_base(
            project, KnowledgeBase(kb_id=KB_ID, kb_displayName="Campaign lore")
        )
        write_example_plugin(project / "plugins" / PLUGIN, PLUGIN)

    return run


def pick_plugin_tool(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The example plugin's tool that is quickest to try: a Python function over a
    workflow (which would need a model)."""
    mine = [t for t in tools if t.get("plugin") == PLUGIN and t.get("available")]
    assert mine, f"the enabled plugin lists no available tool: {tools}"
    order = {"service": 0, "node": 1, "workflow": 2}
    return sorted(mine, key=lambda t: order.get(str(t.get("implementation")), 9))[0]


def enable_example_plugin_and_try_a_tool(page: Page, server: RunningServer) -> None:
    page.goto(server.url + "tools?tab=plugins")
    card = page.locator(tid(f"plugin-{PLUGIN}"))
    expect(card).to_be_visible()
    assert not [t for t in server.api("/api/tools") if t.get("plugin") == PLUGIN], (
        "a newly found plugin is off until the user enables it"
    )
    page.click(tid(f"plugin-enable-{PLUGIN}"))
    # Its Python runs inside the server: one click only asks, naming the risk and why.
    dialog = page.locator(tid(f"plugin-grant-dialog-{PLUGIN}"))
    expect(dialog.locator(tid(f"plugin-high-risk-{PLUGIN}"))).to_be_visible()
    expect(dialog).to_contain_text("runs Python code inside the server process")
    assert PLUGIN not in [p["name"] for p in server.api("/api/plugins")]
    dialog.locator(tid(f"plugin-grant-{PLUGIN}")).click()
    expect(page.locator(tid(f"plugin-disable-{PLUGIN}"))).to_be_visible()
    assert PLUGIN in [p["name"] for p in server.api("/api/plugins")]

    # Its web part loads at once (no page reload): a button in the header outlet.
    expect(page.locator(f'script[data-storyloom-plugin="{PLUGIN}"]')).to_have_count(1)
    button = page.locator(
        f'{tid("plugin-outlet-layout:header:right")} button[data-plugin="{PLUGIN}"]'
    )
    expect(button).to_have_text("Hello Tools")
    button.click()
    expect(button).to_have_text("HELLO TOOLS!")

    tool = pick_plugin_tool(server.api("/api/tools"))
    page.click(tid("tools-tab-tools"))
    page.fill(tid("tool-search"), tool["id"])
    row = page.locator(tid(f"tool-row-{tool['id']}"))
    expect(row).to_be_visible()
    row.locator(tid(f"tool-try-{tool['id']}")).click()
    form = page.locator(tid(f"tool-try-form-{tool['id']}"))
    params = tool.get("parameters") or {}
    for key in params.get("required", []):
        prop = params.get("properties", {}).get(key, {})
        if prop.get("type", "string") == "string" and not prop.get("enum"):
            form.locator(tid(f"try-arg-{key}")).fill("storyloom")
    form.locator(tid("try-run")).click()
    result = form.locator(tid("try-result"))
    expect(result).to_have_attribute("data-ok", "true")
    expect(form.locator(tid("try-output"))).to_contain_text("storyloom")
    page.screenshot(path=str(RESULTS_DIR / "tools-try-plugin-tool.png"))
    audit = server.request("GET", f"/api/tools/audit?tool={tool['id']}")
    assert audit["total"] >= 1 and audit["entries"][0]["ok"] is True


def roll_of(message: Locator) -> str:
    """The total the message's chat:RollDice step shows (opening the fold)."""
    steps = message.locator(tid("tool-steps"))
    expect(steps).to_have_count(1)
    if not steps.evaluate("d => d.open"):
        steps.locator("summary").first.click()
    roll = steps.locator(f'{tid("tool-step")}[data-tool="chat:RollDice"]')
    expect(roll).to_have_count(1)
    expect(roll).to_have_attribute("data-ok", "true")
    text = roll.locator(tid("tool-step-summary")).inner_text().strip()
    assert re.fullmatch(r"\d{1,2}", text) and 1 <= int(text) <= 20, f"not a d20 roll: {text!r}"
    return text


def test_plugin_tool_then_an_agent_turn_with_an_approval_and_a_swipe(
    start_server: Callable[..., RunningServer], page: Page
) -> None:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    with ReplayLLMServer(models=["test-model"]) as llm:
        server = start_server(prepare(llm.url))

        # -- the example plugin, from the Tools page ------------------------------------
        enable_example_plugin_and_try_a_tool(page, server)

        # -- an agent that rolls freely and asks before it writes lore --------------------
        # Globally both tools are allowed; the profile is stricter for the lore write.
        server.request(
            "PUT",
            "/api/tools/policy",
            {
                "rules": [
                    {"tool": "chat:RollDice", "action": "allow"},
                    {"tool": "kb:CreateEntry", "action": "allow"},
                ],
                "default": "ask",
            },
        )
        server.request(
            "POST",
            "/api/agents",
            {
                "id": AGENT_ID,
                "name": "Dice keeper",
                "tool_ids_inventory": ["chat:RollDice", "kb:CreateEntry"],
                "prompt": "You are Mira. Tools:\n{{{system:available_tools}}}",
                "model_role": "user",
                "protocol": "tam",
                "policy": {
                    "rules": [
                        {"tool": "chat:RollDice", "action": "allow"},
                        {"tool": "kb:CreateEntry", "action": "ask"},
                    ],
                    "default": "deny",
                },
                "kb_access": {"read": ["*"], "write": [KB_ID]},
            },
        )

        start_chat(page, server, CHARACTER_ID)
        # The conversation uses the profile: picked in its settings.
        page.click(tid("chat-side-settings"))
        picker = page.locator(tid("chat-settings-agent-profile"))
        expect(picker.locator(f'option[value="{AGENT_ID}"]')).to_have_count(1)
        picker.select_option(AGENT_ID)
        page.click(tid("chat-settings-save"))
        expect(page.locator(tid("chat-settings-save"))).to_be_disabled()
        conversation_id = page.url.rsplit("/", 1)[-1]
        saved = server.request("GET", f"/api/chats/{conversation_id}")
        settings = saved["conversation"]["settings"]
        assert settings["agent_profile"] == AGENT_ID
        page.click(tid("chat-side-close"))

        # -- the turn: dice roll allowed, the lore write waits for the user -----------------
        llm.script(Reply(text=ROUND_1), Reply(text=ROUND_2))
        page.fill(tid("chat-input"), "Shall we play for the room?")
        page.press(tid("chat-input"), "Enter")
        card = page.locator(tid("approval-card"))
        expect(card).to_have_count(1)
        expect(card).to_have_attribute("data-tool", "kb:CreateEntry")
        expect(card).to_contain_text(ENTRY_NAME)
        page.screenshot(path=str(RESULTS_DIR / "tools-approval-in-chat.png"))
        card.locator(tid("approval-always")).click()
        expect(card).to_have_count(0)

        expect(messages(page)).to_have_count(3)
        reply = messages(page).last
        expect(reply).to_have_attribute("data-role", "assistant")
        expect(reply).to_have_attribute("data-status", "complete")
        expect(reply.locator(tid("chat-message-text"))).to_contain_text("Your room is on the house")
        expect(reply).not_to_contain_text("REQUEST_TOOL")
        first_roll = roll_of(reply)
        lore_step = reply.locator(f'{tid("tool-step")}[data-tool="kb:CreateEntry"]')
        expect(lore_step).to_have_attribute("data-decision", "approved")
        expect(lore_step).to_have_attribute("data-ok", "true")
        expect(lore_step.locator(tid("tool-step-summary"))).to_have_text(ENTRY_NAME)
        page.screenshot(path=str(RESULTS_DIR / "tools-steps-in-message.png"))

        # The model saw the roll before it wrote its reply.
        assert len(llm.chat_requests) == 2, [r["messages"][-1] for r in llm.chat_requests]
        assert first_roll in json.dumps(llm.chat_requests[1]["messages"], ensure_ascii=False)

        # The lore entry is in the book, marked as the agent's.
        kb = server.request("GET", f"/api/knowledge/bases/{KB_ID}")
        entries = kb["knowledge_base"]["entries"]
        written = [e for e in entries if e.get("displayName") == ENTRY_NAME]
        assert len(written) == 1, entries
        assert written[0]["management_metadata"]["source"] == "agent_generated"

        # -- swipe: the turn replays as one unit, same roll, no second question ------------
        llm.script(Reply(text=ROUND_1), Reply(text=ROUND_2))
        reply.locator(tid("chat-swipe-right")).click()
        expect(messages(page).last.locator(tid("chat-swipe-count"))).to_have_text("2/2")
        expect(messages(page).last).to_have_attribute("data-status", "complete")
        expect(page.locator(tid("approval-card"))).to_have_count(0)
        expect(messages(page)).to_have_count(3)
        swiped = messages(page).last
        expect(swiped.locator(tid("chat-message-text"))).to_contain_text(
            "Your room is on the house"
        )
        assert roll_of(swiped) == first_roll
        expect(swiped.locator(f'{tid("tool-step")}[data-tool="kb:CreateEntry"]')).to_have_attribute(
            "data-decision", "allowed"
        )
        assert len(llm.chat_requests) == 4
        page.screenshot(path=str(RESULTS_DIR / "tools-swiped-turn.png"))
        # The replayed write answered the entry of the first swipe; the book has it once.
        kb = server.request("GET", f"/api/knowledge/bases/{KB_ID}")
        entries = kb["knowledge_base"]["entries"]
        assert [e["id"] for e in entries if e.get("displayName") == ENTRY_NAME] == [
            written[0]["id"]
        ]

        # -- the prompt inspector lists the turn's calls ------------------------------------
        swiped.locator(tid("chat-show-prompt")).click()
        tools = page.locator(f"{tid('chat-prompt-panel')} {tid('chat-prompt-tool')}")
        expect(tools).to_have_count(2)
        expect(tools.first).to_have_attribute("data-tool", "chat:RollDice")
