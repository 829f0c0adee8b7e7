"""Plugin UI grants and client hooks, as a plugin author meets them (issue 29; seed 003
§20, §21): a real plugin folder (``tests/browser/plugins/ui-frame``), a real server with
its access token, a real browser.

The plugin declares ``permissions.ui.wrap: [ui:SettingsPanel, ui:BaseNode]`` and the
client hook ``auth:login``. Enabling it on the Tools page asks to grant exactly those
wraps; once granted, its wrappers frame the settings page and every workflow node. What
its frontend tries beyond its manifest (wrapping ``ui:ChatMessage``, hooking settings
saves) is refused: the API answers ``false`` to the plugin and the refusals show on its
card. ``auth:login`` reaches it once the page is in.

Before this change the test failed at the first step: a plugin declaring only a wrap
was enabled without any grant dialog (the server granted overrides only), its
``wrapComponent`` answered ``false`` (never granted), ``auth:login`` was an unknown hook,
and an undeclared hook was accepted without a word.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import RunningServer, nav_to, no_sideways_scroll, tid

pytestmark = pytest.mark.browser

PLUGIN = "ui-frame"
FIXTURE = Path(__file__).resolve().parent / "plugins" / PLUGIN


def with_plugin(home: Path) -> None:
    """The plugin in the user's plugins folder: found, not enabled."""
    shutil.copytree(FIXTURE, home / "plugins" / PLUGIN)


def test_a_declared_wrap_is_granted_and_applies_and_what_is_not_declared_is_refused(
    sized_page: Page, start_server: Callable[..., RunningServer]
) -> None:
    page = sized_page
    server: RunningServer = start_server(with_plugin, token=True)
    # The address the server prints: the token becomes the page's cookie.
    page.goto(f"{server.url}?token={server.token}")
    nav_to(page, "tools")
    page.locator(tid("tools-tab-plugins")).click()

    card = page.locator(tid(f"plugin-{PLUGIN}"))
    expect(card).to_have_attribute("data-enabled", "false")
    card.locator(tid(f"plugin-enable-{PLUGIN}")).click()
    dialog = card.locator(tid(f"plugin-grant-dialog-{PLUGIN}"))
    expect(dialog).to_contain_text("wrap:ui:SettingsPanel")
    expect(dialog).to_contain_text("wrap:ui:BaseNode")
    dialog.locator(tid(f"plugin-grant-{PLUGIN}")).click()
    expect(card).to_have_attribute("data-enabled", "true")
    (extension,) = server.api("/api/plugins")
    assert extension["wraps"] == ["ui:SettingsPanel", "ui:BaseNode"]
    assert extension["hooks"] == ["hook:client:auth:login"]

    # The plugin's own view: its declared wrap was accepted, the undeclared one refused.
    body = page.locator("body")
    expect(body).to_have_attribute("data-ui-frame-results", json.dumps(
        {"wrapSettings": True, "wrapNodes": True, "wrapChat": False}, separators=(",", ":")
    ))  # fmt: skip
    # auth:login reached it: the page is in (its plugin list needed the token cookie).
    expect(body).to_have_attribute("data-ui-frame-login", "page")

    refusals = card.locator(tid(f"plugin-refusals-{PLUGIN}"))
    expect(refusals.locator('[data-kind="wrapNotGranted"]')).to_contain_text("ui:ChatMessage")
    expect(refusals.locator('[data-kind="hookNotDeclared"]')).to_contain_text(
        "hook:client:settings:before-save"
    )
    no_sideways_scroll(page)

    # The granted wrap applies: the settings page is drawn inside the plugin's frame.
    nav_to(page, "settings")
    frame = page.locator(tid("ui-frame-settings"))
    expect(frame).to_be_visible()
    expect(frame.locator("h1").first).to_be_visible()
    no_sideways_scroll(page)

    # ui:BaseNode: every node of a workflow is drawn inside the plugin's wrapper.
    page.goto(f"{server.url}workflows/chat-default")
    nodes = page.locator(tid("wf-node"))
    expect(nodes.first).to_be_visible()
    wrapped = page.locator(f"{tid('ui-frame-node')} {tid('wf-node')}")
    expect(wrapped).to_have_count(nodes.count())
    no_sideways_scroll(page)
