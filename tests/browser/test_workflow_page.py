"""The Workflows canvas end to end: real server, real browser, a real OpenAI-style endpoint.

Builds a two-node workflow by dragging from the palette and connecting handles, runs it
against the replay LLM server and watches the streamed answer arrive in the Chat node.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from storyloom.project.project_file import init_project
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.browser.conftest import home_with as with_llm
from tests.browser.conftest import tid

REPO = Path(__file__).resolve().parents[2]
RESULTS_DIR = REPO / "test-results" / "browser"

pytestmark = pytest.mark.browser

PROMPT = "Tell me a story about a loom."
STORY = "Once upon a time, a loom wove the night sky into a thousand small stories."
CHUNKS = 6


def palette_item(page: Page, node_type: str) -> Locator:
    return page.locator(f'{tid("wf-palette-item")}[data-node-type="{node_type}"]')


def node(page: Page, node_type: str) -> Locator:
    return page.locator(f'{tid("wf-node")}[data-node-type="{node_type}"]')


def handle(page: Page, node_type: str, kind: str, slot: str) -> Locator:
    return node(page, node_type).locator(f'.vue-flow__handle.{kind}[data-handleid="{slot}"]')


def drag_from_palette(page: Page, node_type: str, x: int, y: int) -> None:
    """Find the node type in the palette (so it sits at the top, beside the canvas) and
    drag it to (x, y) of the canvas."""
    page.fill(tid("wf-palette-search"), node_type)
    canvas = page.locator(tid("wf-canvas"))
    palette_item(page, node_type).drag_to(canvas, target_position={"x": x, "y": y})
    expect(node(page, node_type)).to_have_count(1)
    page.fill(tid("wf-palette-search"), "")


def drag_handle(page: Page, source: Locator, target: Locator) -> None:
    """Press on one handle, move in steps and let go over the other, as a hand would."""
    start = source.bounding_box()
    end = target.bounding_box()
    assert start and end
    page.mouse.move(start["x"] + start["width"] / 2, start["y"] + start["height"] / 2)
    page.mouse.down()
    page.mouse.move(end["x"] + end["width"] / 2, end["y"] + end["height"] / 2, steps=12)
    page.mouse.up()


def select_node(page: Page, node_type: str) -> None:
    node(page, node_type).locator(".wf-node-head").click()
    expect(page.locator(tid("wf-inspector"))).to_have_attribute(
        "data-node-id", re.compile(node_type.split(":")[1])
    )


# Records every state and text length the Chat node shows, so the test sees the stream
# grow without depending on how fast it arrives.
WATCH_CHAT = """el => {
  window.__chatStates = []; window.__chatLengths = [];
  const record = () => {
    window.__chatStates.push(el.dataset.state);
    const text = el.querySelector('[data-testid="wf-node-text"]');
    window.__chatLengths.push(text ? text.textContent.length : 0);
  };
  new MutationObserver(record).observe(el, {
    attributes: true, childList: true, subtree: true, characterData: true });
}"""


def test_build_connect_run_and_freeze_a_two_node_workflow(
    start_server: Callable[..., Any], page: Page
) -> None:
    page.set_viewport_size({"width": 1600, "height": 1000})
    with ReplayLLMServer(models=["test-model"]) as llm:
        llm.script(Reply(text=STORY, chunks=CHUNKS, chunk_delay_s=0.05))
        server = start_server(with_llm(llm.url))
        page.goto(server.url + "workflows")
        expect(page.locator("h1")).to_contain_text("Workflows")
        expect(page.locator(tid("wf-none"))).to_be_visible()
        expect(page.locator(tid("ws-status"))).to_have_attribute("data-status", "connected")

        # A new workflow, named; its id comes from the name.
        page.click(tid("wf-new"))
        page.fill(tid("wf-create-name"), "Story beat")
        page.click(tid("wf-create-submit"))
        expect(page).to_have_url(re.compile(r"/workflows/story-beat$"))
        expect(page.locator(tid("wf-name"))).to_have_value("Story beat")

        # Two nodes dragged from the palette to where they are dropped.
        page.fill(tid("wf-palette-search"), "template")
        expect(palette_item(page, "llm:Chat")).to_have_count(0)
        expect(palette_item(page, "core:TextTemplate")).to_be_visible()
        drag_from_palette(page, "core:TextInput", 60, 60)
        drag_from_palette(page, "llm:Chat", 380, 200)
        text_box = node(page, "core:TextInput").bounding_box()
        chat_box = node(page, "llm:Chat").bounding_box()
        assert text_box and chat_box
        assert chat_box["x"] > text_box["x"] + 200, "each node lands where it was dropped"
        assert chat_box["y"] > text_box["y"] + 80

        # A third node added by double-click, then removed with the Delete key.
        palette_item(page, "core:TextInput").dblclick()
        expect(node(page, "core:TextInput")).to_have_count(2)
        page.keyboard.press("Delete")
        expect(node(page, "core:TextInput")).to_have_count(1)

        # The text, typed in the side panel.
        select_node(page, "core:TextInput")
        page.fill(tid("wf-config-text"), PROMPT)

        # Text → Chat.prompt connects; Text → Chat.history (MESSAGES) is refused.
        edges = page.locator(".vue-flow__edge")
        drag_handle(
            page,
            handle(page, "core:TextInput", "source", "text"),
            handle(page, "llm:Chat", "target", "prompt"),
        )
        expect(edges).to_have_count(1)
        drag_handle(
            page,
            handle(page, "core:TextInput", "source", "text"),
            handle(page, "llm:Chat", "target", "history"),
        )
        message = page.locator(tid("wf-connect-message"))
        expect(message).to_contain_text("types do not match")
        expect(message).to_contain_text("MESSAGES")
        expect(edges).to_have_count(1)
        select_node(page, "llm:Chat")
        expect(page.locator(tid("wf-feed-prompt"))).to_have_value(re.compile(r"TextInput-1"))
        expect(page.locator(tid("wf-feed-history"))).to_have_value("")

        # Save: the file holds both nodes, the config by name and the edge slot to slot.
        expect(page.locator(tid("wf-dirty"))).to_be_visible()
        page.click(tid("wf-save"))
        expect(page.locator(tid("wf-status"))).to_contain_text("Saved.")
        expect(page.locator(tid("wf-dirty"))).to_have_count(0)
        saved = json.loads(
            (server.home / "projects" / "default" / "workflows" / "story-beat.json").read_text()
        )
        by_type = {n["type"]: n for n in saved["nodes"]}
        assert by_type["core:TextInput"]["config"]["text"] == PROMPT
        assert saved["edges"] == [
            {
                "source": by_type["core:TextInput"]["id"],
                "sourceSlot": "text",
                "target": by_type["llm:Chat"]["id"],
                "targetSlot": "prompt",
            }
        ]

        # Run: the answer streams into the Chat node, which ends done.
        chat = node(page, "llm:Chat")
        chat.evaluate(WATCH_CHAT)
        page.click(tid("wf-run"))
        expect(chat).to_have_attribute("data-state", "done")
        expect(chat.locator(tid("wf-node-text"))).to_have_text(STORY)
        expect(node(page, "core:TextInput")).to_have_attribute("data-state", "done")
        expect(page.locator(tid("wf-run-status"))).to_have_attribute("data-status", "completed")
        states = page.evaluate("window.__chatStates")
        lengths = sorted(set(page.evaluate("window.__chatLengths")))
        assert "streaming" in states
        assert len([n for n in lengths if 0 < n < len(STORY)]) >= 2, lengths
        assert llm.chat_requests[-1]["messages"][-1]["content"] == PROMPT
        # The run's log is in the side panel's Run tab.
        page.click(tid("wf-side-run"))
        log_types = page.locator(tid("wf-log-line")).evaluate_all(
            "els => els.map(e => e.dataset.type)"
        )
        assert log_types[0] == "workflow:started" and log_types[-1] == "workflow:completed"
        assert "node:streaming" in log_types

        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        shot = RESULTS_DIR / "workflow-run.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000

        # Pin the answer from the history; the next run reports it frozen, asks no model.
        page.click(tid("wf-side-node"))
        page.click(tid("wf-tab-history"))
        entries = page.locator(tid("wf-history-item"))
        expect(entries).to_have_count(1)
        expect(entries.first).to_contain_text(STORY[:20])
        entries.first.locator(tid("wf-history-pin")).click()
        expect(entries.first.locator(tid("wf-history-frozen"))).to_be_visible()
        expect(chat).to_have_attribute("data-frozen", "true")
        requests_before = len(llm.chat_requests)
        page.click(tid("wf-run"))
        expect(page.locator(tid("wf-run-status"))).to_have_attribute("data-status", "completed")
        expect(chat).to_have_attribute("data-state", "frozen")
        # Nothing needs the Text node's output any more, so it does not run at all.
        expect(node(page, "core:TextInput")).to_have_attribute("data-state", "idle")
        expect(chat.locator(tid("wf-node-text"))).to_have_text(STORY)
        assert len(llm.chat_requests) == requests_before

        # A reload shows the last run again (re-attached from the server's run list).
        page.reload()
        expect(node(page, "llm:Chat")).to_have_attribute("data-state", "frozen")
        expect(node(page, "llm:Chat").locator(tid("wf-node-text"))).to_have_text(STORY)
        expect(node(page, "llm:Chat").locator(tid("wf-node-frozen"))).to_be_visible()

        # Unpin: the node is no longer frozen.
        select_node(page, "llm:Chat")
        page.click(tid("wf-tab-history"))
        page.click(tid("wf-unfreeze"))
        expect(node(page, "llm:Chat")).to_have_attribute("data-frozen", "false")
    errors = [m for m in page.console_messages if m.startswith(("error", "pageerror"))]  # type: ignore[attr-defined]
    assert not errors, errors


def test_a_run_refused_for_problems_marks_the_nodes(
    start_server: Callable[..., Any], page: Page
) -> None:
    page.set_viewport_size({"width": 1600, "height": 1000})
    server = start_server()
    page.goto(server.url + "workflows")
    page.click(tid("wf-new"))
    page.fill(tid("wf-create-name"), "broken")
    page.click(tid("wf-create-submit"))
    expect(page).to_have_url(re.compile(r"/workflows/broken$"))
    # A Chat node with nothing for its prompt: validation names the node and the slot.
    palette_item(page, "llm:Chat").dblclick()
    chat = node(page, "llm:Chat")
    expect(chat).to_have_count(1)
    page.click(tid("wf-validate"))
    problems = page.locator(tid("wf-problems"))
    expect(problems).to_be_visible()
    expect(chat).to_have_class(re.compile(r"\bwf-node-problem\b"))
    expect(chat.locator(tid("wf-node-problems"))).not_to_be_empty()
    page.click(tid("wf-run"))
    expect(page.locator(tid("wf-status"))).to_contain_text("cannot run")
    expect(page.locator(tid("wf-run-status"))).to_have_attribute("data-status", "none")


REVIEW_WORKFLOW = {
    "id": "review",
    "name": "Review a line",
    "nodes": [
        {
            "id": "draft",
            "type": "core:TextInput",
            "config": {"text": "The sea was angry that day."},
            "position": {"x": 40, "y": 60},
        },
        {
            "id": "check",
            "type": "core:HumanDecision",
            "config": {"reason": "Is this opening line good?"},
            "position": {"x": 360, "y": 60},
        },
    ],
    "edges": [{"source": "draft", "sourceSlot": "text", "target": "check", "targetSlot": "value"}],
}


def with_review_workflow(home: Path) -> None:
    project = home / "projects" / "default"
    init_project(project)
    (project / "workflows").mkdir(exist_ok=True)
    (project / "workflows" / "review.json").write_text(json.dumps(REVIEW_WORKFLOW), "utf-8")


def test_a_human_decision_survives_a_reload_and_takes_an_edit(
    start_server: Callable[..., Any], page: Page
) -> None:
    page.set_viewport_size({"width": 1600, "height": 1000})
    server = start_server(with_review_workflow)
    page.goto(server.url + "workflows")
    page.locator(f'{tid("wf-list-item")}[data-workflow-id="review"]').click()
    expect(page).to_have_url(re.compile(r"/workflows/review$"))
    check = page.locator(f'{tid("wf-node")}[data-node-id="check"]')
    expect(check).to_be_visible()
    expect(page.locator(tid("wf-dirty"))).to_have_count(0)  # opening changes nothing
    page.click(tid("wf-run"))

    dialog = page.locator(tid("wf-human-dialog"))
    expect(dialog).to_be_visible()
    expect(dialog.locator(tid("wf-human-reason"))).to_have_text("Is this opening line good?")
    expect(dialog.locator(tid("wf-human-preview"))).to_have_text("The sea was angry that day.")
    expect(check).to_have_attribute("data-state", "needs-human")

    # The run waits on the server: a reload finds it again and asks again.
    page.reload()
    expect(dialog).to_be_visible()
    expect(page.locator(tid("wf-run-status"))).to_have_attribute("data-status", "running")
    dialog.locator(tid("wf-human-edit")).click()
    dialog.locator(tid("wf-human-edit-text")).fill("The sea was calm that night.")
    dialog.locator(tid("wf-human-edit-submit")).click()

    expect(dialog).to_have_count(0)
    expect(check).to_have_attribute("data-state", "done")
    expect(check.locator(tid("wf-node-text"))).to_have_text("The sea was calm that night.")
    expect(page.locator(tid("wf-run-status"))).to_have_attribute("data-status", "completed")


def new_workflow_interface(page: Page, server: Any, name: str) -> Any:
    """A new empty workflow ``name``, open with its Interface tab shown (the side panel is
    hidden until asked for)."""
    page.set_viewport_size({"width": 1600, "height": 1000})
    page.goto(server.url + "workflows")
    page.click(tid("wf-new"))
    page.fill(tid("wf-create-name"), name)
    page.click(tid("wf-create-submit"))
    expect(page).to_have_url(re.compile(rf"/workflows/{name}$"))
    page.click(tid("wf-panel-toggle"))
    page.click(tid("wf-side-interface"))
    return server


def test_interface_slots_become_group_handles_and_run_inputs(
    start_server: Callable[..., Any], page: Page
) -> None:
    server = new_workflow_interface(page, start_server(), "echo")
    # One input and one output, renamed.
    page.click(tid("wf-interface-add-inputs"))
    page.click(tid("wf-interface-add-outputs"))
    page.locator(tid("wf-interface-inputs-name")).fill("topic")
    page.locator(tid("wf-interface-inputs-name")).press("Enter")
    page.locator(tid("wf-interface-outputs-name")).fill("result")
    page.locator(tid("wf-interface-outputs-name")).press("Enter")
    expect(page.locator(tid("wf-interface-inputs-topic"))).to_be_visible()

    # GroupInput hands out `topic`, GroupOutput collects `result`.
    drag_from_palette(page, "core:GroupInput", 60, 80)
    drag_from_palette(page, "core:GroupOutput", 420, 80)
    drag_handle(
        page,
        handle(page, "core:GroupInput", "source", "topic"),
        handle(page, "core:GroupOutput", "target", "result"),
    )
    expect(page.locator(".vue-flow__edge")).to_have_count(1)

    # The run form (the side panel's Run tab) asks for the input; the value comes out of
    # GroupOutput.
    page.click(tid("wf-side-run"))
    page.fill(tid("wf-run-input-topic"), "a lighthouse")
    page.click(tid("wf-run"))
    out = node(page, "core:GroupOutput")
    expect(out).to_have_attribute("data-state", "done")
    expect(out.locator(tid("wf-node-text"))).to_have_text("a lighthouse")

    page.click(tid("wf-save"))
    expect(page.locator(tid("wf-status"))).to_contain_text("Saved")
    saved = json.loads(
        (server.home / "projects" / "default" / "workflows" / "echo.json").read_text()
    )
    assert list(saved["interfaceInputs"]) == ["topic"]
    assert list(saved["interfaceOutputs"]) == ["result"]
    assert saved["edges"][0]["sourceSlot"] == "topic"
    assert saved["edges"][0]["targetSlot"] == "result"

    # Another workflow calling "echo": its SubWorkflow node gets echo's interface as
    # handles, worked out by the server once the node names the workflow.
    page.click(tid("wf-new"))
    page.fill(tid("wf-create-name"), "caller")
    page.click(tid("wf-create-submit"))
    expect(page).to_have_url(re.compile(r"/workflows/caller$"))
    palette_item(page, "core:SubWorkflow").dblclick()
    expect(node(page, "core:SubWorkflow")).to_be_visible()
    expect(node(page, "core:SubWorkflow").locator(".vue-flow__handle")).to_have_count(0)
    select_node(page, "core:SubWorkflow")
    page.select_option(tid("wf-config-workflow"), "echo")
    expect(handle(page, "core:SubWorkflow", "target", "topic")).to_have_count(1)
    expect(handle(page, "core:SubWorkflow", "source", "result")).to_have_count(1)


def test_the_interface_tab_switches_tool_calls_in_outputs_on(
    start_server: Callable[..., Any], page: Page
) -> None:
    server = new_workflow_interface(page, start_server(), "dice")
    toggle = page.locator(tid("wf-execute-tool-calls"))
    expect(toggle).not_to_be_checked()
    toggle.check()
    page.click(tid("wf-save"))
    expect(page.locator(tid("wf-status"))).to_contain_text("Saved")
    path = server.home / "projects" / "default" / "workflows" / "dice.json"
    assert json.loads(path.read_text())["executeToolCalls"] is True
    page.reload()
    page.click(tid("wf-panel-toggle"))
    page.click(tid("wf-side-interface"))
    expect(page.locator(tid("wf-execute-tool-calls"))).to_be_checked()
