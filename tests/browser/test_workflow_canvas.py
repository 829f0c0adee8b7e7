"""The workflow canvas on a laptop screen: real server, real Chromium at 1440×900.

The built-in chat pipeline opens with every node in view, readable and apart; the zoom
buttons, Fit and the minimap move the view; a workflow stored without positions opens
laid out; Auto layout is undone and saved like a move; the built-in cannot be deleted
(the API refuses) and is duplicated to be changed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, ViewportSize, expect

from storyloom.chat.prompt.default_pipeline import default_pipeline
from storyloom.project.project_file import init_project
from tests.browser.conftest import tid

REPO = Path(__file__).resolve().parents[2]
RESULTS_DIR = REPO / "test-results" / "browser"
LAPTOP: ViewportSize = {"width": 1440, "height": 900}
READABLE_PX = 12
PIPELINE_NODES = len(default_pipeline().nodes)

pytestmark = pytest.mark.browser


# The canvas, the view's zoom (from Vue Flow's transform, not from our readout) and each
# node's box, name and label font sizes, as the browser lays them out.
GEOMETRY = """() => {
  const box = (el) => { const r = el.getBoundingClientRect();
    return { x: r.x, y: r.y, width: r.width, height: r.height }; };
  const pane = document.querySelector('.vue-flow__transformationpane');
  const match = /scale\\(([0-9.]+)\\)/.exec(pane.style.transform);
  const nodes = [...document.querySelectorAll('[data-testid="wf-node"]')].map((n) => {
    const title = n.querySelector('.wf-node-title');
    const label = n.querySelector('[data-testid="wf-node-label"]');
    return { id: n.dataset.nodeId, box: box(n),
      titlePx: parseFloat(getComputedStyle(title).fontSize),
      labelPx: label ? parseFloat(getComputedStyle(label).fontSize) : null };
  });
  return { canvas: box(document.querySelector('[data-testid="wf-canvas"]')),
    zoom: match ? parseFloat(match[1]) : 1, nodes,
    scrollWidth: document.documentElement.scrollWidth,
    scrollHeight: document.documentElement.scrollHeight,
    innerWidth: window.innerWidth, innerHeight: window.innerHeight };
}"""

# True once every node lies inside the canvas: the view has been fitted.
ALL_IN_VIEW = """(count) => {
  const c = document.querySelector('[data-testid="wf-canvas"]').getBoundingClientRect();
  const nodes = [...document.querySelectorAll('[data-testid="wf-node"]')];
  return nodes.length === count && nodes.every((n) => { const r = n.getBoundingClientRect();
    return r.width > 0 && r.left >= c.left && r.top >= c.top && r.right <= c.right
      && r.bottom <= c.bottom; });
}"""


def geometry(page: Page) -> dict[str, Any]:
    result: dict[str, Any] = page.evaluate(GEOMETRY)
    return result


def zoom(page: Page) -> float:
    return float(geometry(page)["zoom"])


def wait_for_zoom(page: Page, above: float | None = None, below: float | None = None) -> None:
    """Until the zoom readout is above or below the given zoom."""
    shown = f"Number(document.querySelector('{tid('wf-zoom-level')}').dataset.zoom)"
    test = f"{shown} > {above}" if above is not None else f"{shown} < {below}"
    page.wait_for_function(f"() => {test}")


def inside(inner: dict[str, float], outer: dict[str, float]) -> bool:
    return (
        inner["x"] >= outer["x"] - 0.5
        and inner["y"] >= outer["y"] - 0.5
        and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + 0.5
        and inner["y"] + inner["height"] <= outer["y"] + outer["height"] + 0.5
    )


def overlapping(nodes: list[dict[str, Any]]) -> list[tuple[str, str]]:
    found = []
    for i, a in enumerate(nodes):
        for b in nodes[i + 1 :]:
            p, q = a["box"], b["box"]
            if (
                p["x"] < q["x"] + q["width"]
                and q["x"] < p["x"] + p["width"]
                and p["y"] < q["y"] + q["height"]
                and q["y"] < p["y"] + p["height"]
            ):
                found.append((a["id"], b["id"]))
    return found


def open_workflow(page: Page, server: Any, workflow_id: str, count: int) -> None:
    page.goto(server.url + "workflows")
    page.locator(f'{tid("wf-list-item")}[data-workflow-id="{workflow_id}"]').click()
    expect(page).to_have_url(re.compile(rf"/workflows/{workflow_id}$"))
    expect(page.locator(tid("wf-node"))).to_have_count(count)
    page.wait_for_function(ALL_IN_VIEW, arg=count)


def test_the_chat_pipeline_opens_with_every_node_in_view_and_readable(
    start_server: Callable[..., Any], page: Page
) -> None:
    page.set_viewport_size(LAPTOP)
    server = start_server()
    open_workflow(page, server, "chat-default", PIPELINE_NODES)

    seen = geometry(page)
    canvas = seen["canvas"]
    # The canvas takes the window's height below the header and toolbar, and its width.
    assert canvas["y"] + canvas["height"] <= seen["innerHeight"]
    assert canvas["y"] + canvas["height"] >= seen["innerHeight"] - 40
    assert canvas["height"] >= seen["innerHeight"] * 0.6
    assert canvas["width"] >= seen["innerWidth"] * 0.6
    assert seen["scrollWidth"] <= seen["innerWidth"]
    assert seen["scrollHeight"] <= seen["innerHeight"]

    nodes = seen["nodes"]
    assert len(nodes) == PIPELINE_NODES
    outside = [n["id"] for n in nodes if not inside(n["box"], canvas)]
    assert outside == []
    assert overlapping(nodes) == []
    for n in nodes:
        # The built-in pipeline's nodes carry no label: the title (the type's name, in the
        # page's language) names each one.
        assert n["labelPx"] is None, n
        assert n["titlePx"] * seen["zoom"] >= READABLE_PX, n

    # Read-only: no Save, no unsaved changes (the layout on opening is not an edit), no
    # Delete in the list; Duplicate is offered instead.
    expect(page.locator(tid("wf-builtin-note"))).to_be_visible()
    expect(page.locator(tid("wf-save"))).to_have_count(0)
    expect(page.locator(tid("wf-dirty"))).to_have_count(0)
    expect(page.locator(tid("wf-duplicate"))).to_have_text("Duplicate to change")
    row = page.locator(".wf-list-row").filter(
        has=page.locator(f'{tid("wf-list-item")}[data-workflow-id="chat-default"]')
    )
    expect(row.locator(tid("wf-builtin-tag"))).to_be_visible()
    expect(row.locator(tid("wf-delete"))).to_have_count(0)
    expect(page.locator(tid("wf-palette-item")).first).to_be_disabled()

    # Asked directly, the server refuses to delete it and says why.
    refused = page.request.delete(server.url + "api/workflows/chat-default")
    assert refused.status == 409
    message = refused.json()["error"]["message"]
    assert "built in" in message and "duplicate" in message
    assert page.request.get(server.url + "api/workflows/chat-default").status == 200

    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(RESULTS_DIR / "workflow-canvas-1440.png"))
    errors = [m for m in page.console_messages if m.startswith(("error", "pageerror"))]  # type: ignore[attr-defined]
    assert not errors, errors


def test_zoom_buttons_fit_and_the_minimap_move_the_view(
    start_server: Callable[..., Any], page: Page
) -> None:
    page.set_viewport_size(LAPTOP)
    server = start_server()
    open_workflow(page, server, "chat-default", PIPELINE_NODES)
    fitted = zoom(page)
    level = page.locator(tid("wf-zoom-level"))
    expect(level).to_have_text(f"{round(fitted * 100)}%")

    page.click(tid("wf-zoom-in"))
    wait_for_zoom(page, above=fitted + 0.01)
    zoomed_in = zoom(page)
    assert zoomed_in == pytest.approx(fitted * 1.2, rel=0.02)
    page.click(tid("wf-zoom-out"))
    page.click(tid("wf-zoom-out"))
    wait_for_zoom(page, below=fitted - 0.01)
    assert zoom(page) == pytest.approx(fitted / 1.2, rel=0.02)
    page.click(tid("wf-fit"))
    page.wait_for_function(ALL_IN_VIEW, arg=PIPELINE_NODES)
    assert zoom(page) == pytest.approx(fitted, rel=0.01)

    # The minimap shows every node; a click on it brings that spot to the middle.
    minimap = page.locator(".vue-flow__minimap")
    expect(minimap).to_be_visible()
    expect(minimap.locator(".vue-flow__minimap-node")).to_have_count(PIPELINE_NODES)
    pane = page.locator(".vue-flow__transformationpane")
    before = pane.get_attribute("style") or ""
    box = minimap.bounding_box()
    assert box
    page.mouse.click(box["x"] + box["width"] * 0.85, box["y"] + box["height"] * 0.85)
    expect(pane).not_to_have_attribute("style", before)
    assert zoom(page) == pytest.approx(fitted, rel=0.01)
    # Not every node is in view any more: the view moved towards the bottom right.
    assert not page.evaluate(ALL_IN_VIEW, PIPELINE_NODES)


NO_POSITIONS: dict[str, Any] = {
    "id": "draft",
    "name": "Draft chain",
    "nodes": [
        {"id": f"t{i}", "type": "core:TextTemplate", "config": {"template": "{{text}}"}}
        for i in range(6)
    ],
    "edges": [
        {"source": f"t{i}", "sourceSlot": "text", "target": f"t{i + 1}", "targetSlot": "template"}
        for i in range(5)
    ],
}


def with_unplaced_workflow(home: Path) -> None:
    project = home / "projects" / "default"
    init_project(project)
    (project / "workflows").mkdir(exist_ok=True)
    (project / "workflows" / "draft.json").write_text(json.dumps(NO_POSITIONS), "utf-8")


def node_boxes(page: Page) -> dict[str, dict[str, float]]:
    return {n["id"]: n["box"] for n in geometry(page)["nodes"]}


def test_a_workflow_without_positions_opens_laid_out_and_auto_layout_is_undone_and_saved(
    start_server: Callable[..., Any], page: Page
) -> None:
    page.set_viewport_size(LAPTOP)
    server = start_server(with_unplaced_workflow)
    open_workflow(page, server, "draft", 6)
    assert overlapping(geometry(page)["nodes"]) == []
    boxes = node_boxes(page)
    for edge in NO_POSITIONS["edges"]:
        source, target = boxes[edge["source"]], boxes[edge["target"]]
        # Left to right, or on to the next band below when the chain wraps.
        assert (
            target["x"] > source["x"] + source["width"]
            or target["y"] > source["y"] + source["height"]
        )
    expect(page.locator(tid("wf-dirty"))).to_have_count(0)
    expect(page.locator(tid("wf-undo-layout"))).to_have_count(0)

    # A node dragged onto another; Auto layout puts things right, Undo puts them back.
    first = page.locator(f'{tid("wf-node")}[data-node-id="t0"] .wf-node-head')
    drop = page.locator(f'{tid("wf-node")}[data-node-id="t3"]').bounding_box()
    start = first.bounding_box()
    assert start and drop
    page.mouse.move(start["x"] + 30, start["y"] + 10)
    page.mouse.down()
    page.mouse.move(drop["x"] + 40, drop["y"] + 20, steps=10)
    page.mouse.up()
    expect(page.locator(tid("wf-dirty"))).to_be_visible()
    assert ("t0", "t3") in overlapping(geometry(page)["nodes"])

    page.click(tid("wf-auto-layout"))
    page.wait_for_function(ALL_IN_VIEW, arg=6)
    expect(page.locator(tid("wf-undo-layout"))).to_be_visible()
    assert overlapping(geometry(page)["nodes"]) == []
    page.click(tid("wf-undo-layout"))
    expect(page.locator(tid("wf-undo-layout"))).to_have_count(0)
    page.wait_for_function(ALL_IN_VIEW, arg=6)
    assert ("t0", "t3") in overlapping(geometry(page)["nodes"])

    # Laid out again and saved: the file holds the layout.
    page.click(tid("wf-auto-layout"))
    page.wait_for_function(ALL_IN_VIEW, arg=6)
    page.click(tid("wf-save"))
    expect(page.locator(tid("wf-status"))).to_contain_text("Saved")
    saved = json.loads(
        (server.home / "projects" / "default" / "workflows" / "draft.json").read_text()
    )
    positions = {(n["position"]["x"], n["position"]["y"]) for n in saved["nodes"]}
    assert len(positions) == 6
    page.reload()
    expect(page.locator(tid("wf-node"))).to_have_count(6)
    page.wait_for_function(ALL_IN_VIEW, arg=6)
    expect(page.locator(tid("wf-dirty"))).to_have_count(0)


def test_duplicating_the_builtin_makes_an_editable_copy_that_can_be_deleted(
    start_server: Callable[..., Any], page: Page
) -> None:
    page.set_viewport_size(LAPTOP)
    server = start_server()
    open_workflow(page, server, "chat-default", PIPELINE_NODES)
    page.click(tid("wf-duplicate"))
    expect(page).to_have_url(re.compile(r"/workflows/chat-default-copy$"))
    expect(page.locator(tid("wf-status"))).to_contain_text("Duplicated")
    expect(page.locator(tid("wf-name"))).to_have_value("Chat (default) (copy)")
    expect(page.locator(tid("wf-builtin-note"))).to_have_count(0)
    expect(page.locator(tid("wf-dirty"))).to_have_count(0)
    page.wait_for_function(ALL_IN_VIEW, arg=PIPELINE_NODES)

    copy_file = server.home / "projects" / "default" / "workflows" / "chat-default-copy.json"
    copy = json.loads(copy_file.read_text())
    assert len(copy["nodes"]) == PIPELINE_NODES
    # The copy keeps the layout it was shown in, not the built-in's single row.
    assert len({n["position"]["y"] for n in copy["nodes"]}) > 1

    # It is the project's own: renamed and saved, and it has a Delete.
    page.fill(tid("wf-name"), "My chat")
    page.click(tid("wf-save"))
    expect(page.locator(tid("wf-status"))).to_contain_text("Saved")
    assert json.loads(copy_file.read_text())["name"] == "My chat"
    row = page.locator(".wf-list-row").filter(
        has=page.locator(f'{tid("wf-list-item")}[data-workflow-id="chat-default-copy"]')
    )
    page.once("dialog", lambda dialog: dialog.accept())
    row.locator(tid("wf-delete")).click()
    expect(row).to_have_count(0)
    assert not copy_file.exists()
    expect(page.locator(f'{tid("wf-list-item")}[data-workflow-id="chat-default"]')).to_be_visible()
