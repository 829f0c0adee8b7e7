"""Every plugin outlet of seed 003 §21.3, as a plugin author meets them (issue 29): a real
plugin folder (``tests/browser/plugins/outlets``) whose script reaches the API through the
seed's global name ``window.ComfyTavern`` and puts a mark into each outlet, a real server,
a real browser, at both sizes.

Before this change the test failed at its first check: ``window.ComfyTavern`` did not
exist (the script threw, no mark anywhere), and of the seed's 17 outlets only 7 were in
the app (``layout:header:right``, ``editor:toolbar:left/right``,
``sidebar:icon-bar:tabs:after``, ``node:header:left/right``, ``node:footer``): the marks
for ``layout:header:before-tabs/after-tabs``, ``editor:toolbar:center``,
``editor:canvas:overlay``, ``editor:statusbar:left/right``,
``sidebar:icon-bar:tabs:before``, ``sidebar:icon-bar:bottom:before`` and
``sidebar:panel:header/footer[<panel>]`` had nowhere to show;
``registerNodeUI`` / ``nodes.registerUI`` did not exist.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from storyloom.testing.st_documents import card_document
from tests.browser.conftest import RunningServer, nav_to, no_sideways_scroll, tid

pytestmark = pytest.mark.browser

PLUGIN = "outlets"
FIXTURE = Path(__file__).resolve().parent / "plugins" / PLUGIN


def with_plugin(home: Path) -> None:
    shutil.copytree(FIXTURE, home / "plugins" / PLUGIN)


def test_a_plugin_fills_every_outlet_through_either_global_name(
    sized_page: Page, start_server: Callable[..., RunningServer]
) -> None:
    page = sized_page
    server: RunningServer = start_server(with_plugin, token=True)
    server.request("POST", f"/api/plugins/{PLUGIN}/enable")
    page.goto(f"{server.url}?token={server.token}")
    body = page.locator("body")
    expect(body).to_have_attribute("data-outlets-same-global", "true")
    # services.get: the connection service reads, refuses a write, and has no send.
    expect(body).to_have_attribute("data-outlets-ws-state", "read")
    expect(body).to_have_attribute("data-outlets-service-write", "refused")
    expect(body).to_have_attribute("data-outlets-service-send", "undefined")

    # The top bar, on every page.
    for outlet in ("layout:header:before-tabs", "layout:header:after-tabs", "layout:header:right"):
        expect(
            page.locator(tid(f"plugin-outlet-{outlet}")).get_by_test_id("outlet-mark")
        ).to_be_visible()
    no_sideways_scroll(page)

    # The navigation column (on a phone, behind the menu button).
    if not page.locator(tid("nav-chat")).is_visible():
        page.locator(tid("nav-menu")).click()
    for outlet in (
        "sidebar:icon-bar:tabs:before",
        "sidebar:icon-bar:tabs:after",
        "sidebar:icon-bar:bottom:before",
    ):
        expect(
            page.locator(tid(f"plugin-outlet-{outlet}")).get_by_test_id("outlet-mark")
        ).to_be_visible()
    no_sideways_scroll(page)

    # The workflow editor: toolbar, canvas overlay, status bar, each node.
    page.goto(f"{server.url}workflows/chat-default")
    expect(page.locator(tid("wf-node")).first).to_be_visible()
    for outlet in (
        "editor:toolbar:left",
        "editor:toolbar:center",
        "editor:toolbar:right",
        "editor:canvas:overlay",
        "editor:statusbar:left",
        "editor:statusbar:right",
    ):
        found = page.locator(tid(f"plugin-outlet-{outlet}")).get_by_test_id("outlet-mark")
        expect(found).to_be_visible()
        # The editor's outlets are told which workflow is open.
        expect(found).to_have_attribute("data-workflow", "chat-default")
    nodes = page.locator(tid("wf-node")).count()
    for outlet in ("node:header:left", "node:header:right", "node:footer"):
        expect(
            page.locator(tid(f"plugin-outlet-{outlet}")).get_by_test_id("outlet-mark")
        ).to_have_count(nodes)
    # registerNodeUI / nodes.registerUI: the budget and weaver nodes are drawn with the
    # plugin's body, told their node id and config; the other nodes are not.
    bodies = page.get_by_test_id("outlets-node-body")
    expect(bodies).to_have_count(2)
    expect(page.locator(f"{tid('wf-node-plugin-body')}[data-plugin='{PLUGIN}']")).to_have_count(2)
    expect(bodies.nth(0)).to_have_attribute("data-node-id", "budget")
    expect(bodies.nth(1)).to_have_attribute("data-node-id", "weaver")
    no_sideways_scroll(page)

    # The side panel's tabs: a header and a footer outlet in each, by the tab's id.
    toggle = page.locator(tid("wf-panel-toggle"))
    if toggle.get_attribute("aria-expanded") != "true":
        toggle.click()
    for tab in ("node", "run"):
        page.locator(tid(f"wf-side-{tab}")).click()
        for where in ("header", "footer"):
            outlet = f"sidebar:panel:{where}[{tab}]"
            expect(
                page.locator(tid(f"plugin-outlet-{outlet}")).get_by_test_id("outlet-mark")
            ).to_be_visible()
        no_sideways_scroll(page)


def test_a_plugin_adds_to_the_footer_of_the_apps_dialogs(
    sized_page: Page, start_server: Callable[..., RunningServer], tmp_path: Path
) -> None:
    """``modal:footer`` (seed 003 §20's manifest example): the card-conflict dialog, met
    by importing the same card twice, carries the plugin's mark and says which dialog it is.
    Before this change no dialog had the outlet."""
    page = sized_page
    page.set_default_timeout(30_000)
    card = tmp_path / "Seraphina.json"
    card.write_text(json.dumps(card_document("Seraphina")), encoding="utf-8")
    server: RunningServer = start_server(with_plugin, token=True)
    server.request("POST", f"/api/plugins/{PLUGIN}/enable")
    page.goto(f"{server.url}characters?token={server.token}")
    expect(page.locator("body")).to_have_attribute("data-outlets-same-global", "true")
    page.set_input_files(tid("character-import-file"), str(card))
    expect(page.locator(tid("character-item"))).to_have_count(1)
    page.set_input_files(tid("character-import-file"), str(card))
    dialog = page.locator(tid("card-conflict"))
    found = dialog.locator(tid("plugin-outlet-modal:footer")).get_by_test_id("outlet-mark")
    expect(found).to_be_visible()
    expect(found).to_have_attribute("data-dialog", "card-conflict")
    no_sideways_scroll(page)


def test_a_plugin_adds_a_page_of_its_own_and_a_menu_entry_to_it(
    sized_page: Page, start_server: Callable[..., RunningServer]
) -> None:
    """``router.addRoute`` and ``ui.addMenuItem`` (seed 003 §20.1): the plugin's page has
    an address of its own (a reload of it waits for the plugin) and the navigation opens
    it. Before this change neither call existed and /ext/... fell to the chat page."""
    page = sized_page
    server: RunningServer = start_server(with_plugin, token=True)
    server.request("POST", f"/api/plugins/{PLUGIN}/enable")
    page.goto(f"{server.url}ext/{PLUGIN}/report?token={server.token}")
    shown = page.get_by_test_id("outlets-page")
    expect(shown).to_be_visible()
    expect(shown).to_have_attribute("data-path", "report")
    expect(page.locator(tid("page-plugin")).locator("h1")).to_have_text("◆ Outlets")
    no_sideways_scroll(page)

    # A page the plugin does not have says so, in the page's language.
    page.goto(f"{server.url}ext/{PLUGIN}/nothing-here")
    expect(page.locator(tid("plugin-page-missing"))).to_contain_text("nothing-here")

    # The navigation entry opens the page.
    nav_to(page, "chat")
    entry = page.locator(f"{tid('nav-plugin-item')}[data-plugin='{PLUGIN}']")
    if not entry.is_visible():
        page.locator(tid("nav-menu")).click()
    entry.click()
    expect(page).to_have_url(f"{server.url}ext/{PLUGIN}/report")
    expect(page.get_by_test_id("outlets-page")).to_be_visible()
    no_sideways_scroll(page)
