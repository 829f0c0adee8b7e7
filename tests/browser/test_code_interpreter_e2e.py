"""Code in the browser (issue 15): real server, real sandbox, real Chromium, the replay LLM.

An agent in a chat calls ``CodeInterpreter:execute`` with Python that sums the primes
below 100. The sandbox really runs it: the model's second request carries the printed
line and the value, which no script could know beforehand. The chat shows the reply with
the call folded inside it: the code closed (its language and length on the fold), opening
to the highlighted code, with the real output and value below.

Then the workflow canvas: a chat:Script node's inline code is edited in a code editor that
highlights Lua and JavaScript (the node's ``language``), and its script-file picker opens
a project script from ``/api/scripts`` in the same editor.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect

from storyloom.project.project_file import init_project
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.browser.conftest import RESULTS_DIR, RunningServer, home_with, messages, start_chat, tid
from tests.tools.agent_support import tam_call

pytestmark = pytest.mark.browser

TOOL = "CodeInterpreter:execute"
CHARACTER_ID = "ada"
ADA = {
    "name": "Ada",
    "description": "A mathematician who checks her sums by running them.",
    "first_mes": "Give me a sum and I will compute it.",
}
AGENT_ID = "calculator"

CODE = (
    "primes = [n for n in range(2, 100) if all(n % d for d in range(2, n))]\n"
    'print(f"{len(primes)} primes below 100")\n'
    "sum(primes)"
)
# What the sandbox prints and returns: only a real run of CODE gives these.
PRINTED = "25 primes below 100"
VALUE = "1060"

ROUND_1 = "Let me compute that.\n" + tam_call(TOOL, language="python", code=CODE)
ROUND_2 = f"The primes below 100 add up to {VALUE}."


def open_steps(message: Locator) -> Locator:
    """The message's tool steps, unfolded."""
    steps = message.locator(tid("tool-steps"))
    expect(steps).to_have_count(1)
    if not steps.evaluate("d => d.open"):
        steps.locator("summary").first.click()
    return steps


def is_open(details: Locator) -> bool:
    return bool(details.evaluate("d => d.open"))


def test_an_agent_computes_with_the_code_interpreter_and_the_chat_shows_the_code_folded(
    start_server: Callable[..., RunningServer], page: Page
) -> None:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    with ReplayLLMServer(models=["test-model"]) as llm:
        server = start_server(home_with(llm.url, {CHARACTER_ID: ADA}))
        server.request(
            "PUT",
            "/api/tools/policy",
            {"rules": [{"tool": TOOL, "action": "allow"}], "default": "ask"},
        )
        server.request(
            "POST",
            "/api/agents",
            {
                "id": AGENT_ID,
                "name": "Calculator",
                "tool_ids_inventory": [TOOL],
                "prompt": "You are Ada. Tools:\n{{{system:available_tools}}}",
                "model_role": "user",
                "protocol": "tam",
                "policy": {"rules": [{"tool": TOOL, "action": "allow"}], "default": "deny"},
            },
        )

        start_chat(page, server, CHARACTER_ID)
        page.click(tid("chat-side-settings"))
        page.locator(tid("chat-settings-agent-profile")).select_option(AGENT_ID)
        page.click(tid("chat-settings-save"))
        expect(page.locator(tid("chat-settings-save"))).to_be_disabled()
        page.click(tid("chat-side-close"))

        llm.script(Reply(text=ROUND_1), Reply(text=ROUND_2))
        page.fill(tid("chat-input"), "What do the primes below 100 add up to?")
        page.press(tid("chat-input"), "Enter")
        expect(messages(page)).to_have_count(3)
        reply = messages(page).last
        expect(reply).to_have_attribute("data-status", "complete")
        expect(reply.locator(tid("chat-message-text"))).to_contain_text(ROUND_2)
        expect(reply).not_to_contain_text("REQUEST_TOOL")

        # The sandbox ran the code: the model read what it printed and returned.
        assert len(llm.chat_requests) == 2, [r["messages"][-1] for r in llm.chat_requests]
        seen = json.dumps(llm.chat_requests[1]["messages"], ensure_ascii=False)
        assert PRINTED in seen and VALUE in seen, seen[-2000:]

        # One step, the code folded: closed, with its language and length on the fold.
        steps = open_steps(reply)
        step = steps.locator(f'{tid("tool-step")}[data-tool="{TOOL}"]')
        expect(step).to_have_count(1)
        expect(step).to_have_attribute("data-ok", "true")
        expect(step.locator(tid("tool-step-summary"))).to_have_text(VALUE)
        fold = step.locator(tid("code-run-code"))
        assert not is_open(fold), "the code starts folded"
        expect(fold.locator(tid("code-run-fold"))).to_have_text("Python · 3 lines")
        expect(fold.locator(tid("code-run-source"))).not_to_be_visible()
        # Below the fold, what the sandbox gave back.
        expect(step.locator(tid("code-run-stdout"))).to_have_text(PRINTED)
        expect(step.locator(tid("code-run-value"))).to_have_text(VALUE)
        expect(step.locator(tid("code-run-error"))).to_have_count(0)
        expect(step.locator(tid("code-run-limit"))).to_have_count(0)
        page.screenshot(path=str(RESULTS_DIR / "code-interpreter-folded.png"))

        # Opened: the code, highlighted as Python, line by line.
        fold.locator(tid("code-run-fold")).click()
        assert is_open(fold)
        source = fold.locator(tid("code-run-source"))
        expect(source).to_be_visible()
        expect(source).to_have_attribute("data-language", "python")
        expect(source).to_have_attribute("data-highlighted", "true")
        expect(source.locator(".code-line")).to_have_count(3)
        expect(source).to_contain_text('print(f"{len(primes)} primes below 100")')
        keywords = source.locator(".tok-keyword").all_inner_texts()
        assert {"for", "in", "if"} <= set(keywords), keywords
        # The f-string is string tokens (around its interpolation).
        strings = "".join(source.locator(".tok-string2, .tok-string").all_inner_texts())
        assert "primes below 100" in strings, strings
        # The tokens are coloured, not only marked.
        colour = source.locator(".tok-keyword").first.evaluate("e => getComputedStyle(e).color")
        plain = source.evaluate("e => getComputedStyle(e).color")
        assert colour != plain, (colour, plain)
        page.screenshot(path=str(RESULTS_DIR / "code-interpreter-open.png"))

        # No script error.
        errors = [m for m in page.console_messages if m.startswith("pageerror")]  # type: ignore[attr-defined]
        assert not errors, errors


LUA_CODE = 'local mood = ctx.variables.mood or "calm"\n-- say it\nctx.variables.mood = mood\n'
JS_CODE = "const n = ctx.blocks.length\n// count them\nctx.variables.blocks = n\n"
FILE_CODE = "for i = 1, 3 do\n  print(i)\nend\n"

SCRIPTED = {
    "id": "scripted",
    "name": "Scripted",
    "nodes": [
        {
            "id": "mood",
            "type": "chat:Script",
            "config": {"language": "lua", "code": LUA_CODE},
            "position": {"x": 40, "y": 60},
        },
        {
            "id": "count",
            "type": "chat:Script",
            "config": {"language": "javascript", "code": JS_CODE},
            "position": {"x": 420, "y": 60},
        },
    ],
    "edges": [],
}


def with_script_workflow(home: Path) -> None:
    project = home / "projects" / "default"
    init_project(project)
    (project / "workflows").mkdir(exist_ok=True)
    (project / "workflows" / "scripted.json").write_text(json.dumps(SCRIPTED), "utf-8")
    (project / "scripts").mkdir(exist_ok=True)
    (project / "scripts" / "loop.lua").write_text(FILE_CODE, "utf-8")


def select(page: Page, node_id: str) -> Locator:
    page.locator(f'{tid("wf-node")}[data-node-id="{node_id}"] .wf-node-head').click()
    inspector = page.locator(tid("wf-inspector"))
    expect(inspector).to_have_attribute("data-node-id", node_id)
    return inspector


def keywords(editor: Locator) -> list[str]:
    expect(editor.locator(".cm-content .tok-keyword").first).to_be_visible()
    return editor.locator(".cm-content .tok-keyword").all_inner_texts()


def test_the_script_node_edits_its_code_in_a_highlighting_editor(
    start_server: Callable[..., RunningServer], page: Page
) -> None:
    page.set_viewport_size({"width": 1600, "height": 1000})
    server = start_server(with_script_workflow)
    page.goto(server.url + "workflows")
    page.locator(f'{tid("wf-list-item")}[data-workflow-id="scripted"]').click()
    expect(page).to_have_url(re.compile(r"/workflows/scripted$"))

    # Lua: the editor highlights Lua's keywords, strings and comments, with line numbers.
    inspector = select(page, "mood")
    editor = inspector.locator(tid("wf-config-code"))
    expect(editor).to_have_attribute("data-language", "lua")
    expect(editor.locator(".cm-editor")).to_be_visible()
    expect(editor.locator(".cm-content")).to_contain_text("local mood")
    assert "local" in keywords(editor)
    expect(editor.locator(".cm-content .tok-string")).to_have_text(['"calm"'])
    expect(editor.locator(".cm-content .tok-comment")).to_have_text(["-- say it"])
    expect(editor.locator(".cm-lineNumbers .cm-gutterElement", has_text="3")).to_have_count(1)
    page.screenshot(path=str(RESULTS_DIR / "script-node-lua.png"))

    # Typing goes into the node's config.
    editor.locator(".cm-content").click()
    page.keyboard.press("Control+End")
    page.keyboard.type("print(mood)")
    expect(editor.locator(".cm-content")).to_contain_text("print(mood)")
    expect(page.locator(tid("wf-dirty"))).to_have_count(1)

    # JavaScript: the other node's code, highlighted as JavaScript.
    inspector = select(page, "count")
    editor = inspector.locator(tid("wf-config-code"))
    expect(editor).to_have_attribute("data-language", "javascript")
    expect(editor.locator(".cm-content")).to_contain_text("const n")
    assert "const" in keywords(editor)
    expect(editor.locator(".cm-content .tok-comment")).to_have_text(["// count them"])

    # Switching the node's language re-highlights the same code.
    inspector.locator(tid("wf-config-language")).select_option("lua")
    expect(editor).to_have_attribute("data-language", "lua")
    assert "const" not in editor.locator(".cm-content .tok-keyword").all_inner_texts()

    # The script-file picker lists the project's scripts and opens one in the editor.
    picker = inspector.locator(tid("wf-config-script-select"))
    expect(picker.locator('option[value="loop.lua"]')).to_have_count(1)
    picker.select_option("loop.lua")
    inspector.locator(tid("wf-config-script-edit")).click()
    file_editor = inspector.locator(tid("wf-config-script-code"))
    expect(file_editor).to_have_attribute("data-language", "lua")
    expect(file_editor.locator(".cm-content")).to_contain_text("print(i)")
    assert {"for", "do", "end"} <= set(keywords(file_editor))
    file_editor.locator(".cm-content").click()
    page.keyboard.press("Control+End")
    page.keyboard.type("-- saved from the browser")
    inspector.locator(tid("wf-config-script-save")).click()
    expect(inspector.locator(tid("wf-config-script-saved"))).to_be_visible()
    saved = (server.home / "projects" / "default" / "scripts" / "loop.lua").read_text("utf-8")
    assert saved.startswith(FILE_CODE) and saved.endswith("-- saved from the browser"), saved
    page.screenshot(path=str(RESULTS_DIR / "script-node-file.png"))

    errors = [m for m in page.console_messages if m.startswith(("error", "pageerror"))]  # type: ignore[attr-defined]
    assert not errors, errors
