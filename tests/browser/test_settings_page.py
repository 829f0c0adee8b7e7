"""The Settings page end to end: real server, real browser, a real OpenAI-style endpoint."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, Response, expect
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from storyloom.testing.loopback import serve_in_thread
from storyloom.testing.replay_server import ReplayLLMServer
from tests.browser.conftest import nav_to, no_sideways_scroll, tid

REPO = Path(__file__).resolve().parents[2]
RESULTS_DIR = REPO / "test-results" / "browser"

pytestmark = pytest.mark.browser

SECRET = "sk-storyloom-browser-test-7f3a9c"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def open_settings(page: Page, server: Any) -> None:
    page.goto(server.url)
    expect(page.locator(tid("ws-status"))).to_have_attribute("data-status", "connected")
    nav_to(page, "settings")
    expect(page).to_have_url(re.compile(r"/settings$"))
    expect(page.locator(tid("settings-user_llm-base_url"))).to_be_visible()


def watch_api_responses(page: Page) -> list[tuple[str, str]]:
    """Collect (url, body) of every /api response the page receives."""
    seen: list[tuple[str, str]] = []

    def on_response(response: Response) -> None:
        if "/api/" in response.url:
            try:
                seen.append((response.url, response.text()))
            except Exception:  # a body the browser dropped (navigation) has nothing to leak
                seen.append((response.url, ""))

    page.on("response", on_response)
    return seen


def test_test_connection_save_and_reload(server: Any, page: Page) -> None:
    responses = watch_api_responses(page)
    ws_frames: list[str] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda f: ws_frames.append(str(f))))
    with ReplayLLMServer(models=["test-model"], api_key=SECRET) as llm:
        open_settings(page, server)
        page.fill(tid("settings-user_llm-base_url"), llm.url)
        page.fill(tid("settings-user_llm-model"), "test-model")
        page.fill(tid("settings-user_llm-api_key"), SECRET)

        # Test connection sends the unsaved form values, key included.
        page.click(tid("settings-user_llm-test"))
        result = page.locator(tid("settings-user_llm-result"))
        expect(result).to_have_attribute("data-ok", "true")
        expect(result).to_have_class(re.compile(r"\bresult-ok\b"))
        message = result.inner_text()
        assert message.strip(), "the success box shows the server's message"
        expect(page.locator(tid("settings-user_llm-latency"))).to_contain_text("ms")
        assert llm.requests, "the server reached the replay endpoint"
        assert all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in llm.requests)
        assert server.api("/api/settings")["user_llm"]["base_url"] == "", "testing saves nothing"

        # Save: the key goes to the server once and the field empties.
        page.click(tid("settings-user_llm-save"))
        expect(result).to_contain_text("Saved.")
        expect(page.locator(tid("settings-user_llm-api_key"))).to_have_value("")
        expect(page.locator(tid("settings-user_llm-key_status"))).to_have_text("a key is stored")
        stored = json.loads((server.home / "settings.json").read_text())
        assert stored["user_llm"]["base_url"] == llm.url
        assert stored["user_llm"]["model"] == "test-model"
        assert stored["user_llm"]["api_key"] == SECRET

        # Reload: the values come back from the server, the key only as "a key is stored".
        page.reload()
        expect(page.locator(tid("settings-user_llm-base_url"))).to_have_value(llm.url)
        expect(page.locator(tid("settings-user_llm-model"))).to_have_value("test-model")
        expect(page.locator(tid("settings-user_llm-api_key"))).to_have_value("")
        expect(page.locator(tid("settings-user_llm-key_status"))).to_have_text("a key is stored")
        assert server.api("/api/settings")["user_llm"]["api_key_set"] is True

        # With the key field left empty the test uses the stored key.
        before = len(llm.requests)
        page.click(tid("settings-user_llm-test"))
        expect(result).to_have_attribute("data-ok", "true")
        new = llm.requests[before:]
        assert new and all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in new)

        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        page.evaluate("window.scrollTo(0, 0)")
        shot = RESULTS_DIR / "settings-test-connection.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000

        # The key never comes back to the browser: not in the DOM, storage or any response.
        assert SECRET not in page.content()
        storage = page.evaluate(
            "() => JSON.stringify({...localStorage}) + JSON.stringify({...sessionStorage})"
        )
        assert SECRET not in storage
        api_bodies = [body for _, body in responses]
        assert any('"api_key_set":true' in b.replace(" ", "") for b in api_bodies)
        assert not [url for url, body in responses if SECRET in body]
        assert not [f for f in ws_frames if SECRET in f]
    assert not [m for m in page.console_messages if SECRET in m]  # type: ignore[attr-defined]


def test_dead_endpoint_shows_error_in_red(server: Any, page: Page) -> None:
    dead = free_port()  # nothing listens there
    open_settings(page, server)
    page.fill(tid("settings-user_llm-base_url"), f"http://127.0.0.1:{dead}/v1")
    page.fill(tid("settings-user_llm-model"), "test-model")
    page.click(tid("settings-user_llm-test"))
    result = page.locator(tid("settings-user_llm-result"))
    expect(result).to_have_attribute("data-ok", "false", timeout=30_000)
    expect(result).to_have_class(re.compile(r"\bresult-error\b"))
    assert result.inner_text().strip()
    color = result.evaluate("el => getComputedStyle(el).color")
    r, g, b = (int(v) for v in re.findall(r"\d+", color)[:3])
    assert r > 150 and g < 90 and b < 90, f"error text is red, got {color}"
    # Nothing was saved by testing.
    assert server.api("/api/settings")["user_llm"]["base_url"] == ""


def test_validation_error_is_shown_next_to_the_field(server: Any, page: Page) -> None:
    open_settings(page, server)
    page.fill(tid("settings-user_llm-base_url"), "ftp://example.org/v1")
    page.click(tid("settings-user_llm-save"))
    error = page.locator(tid("settings-user_llm-error-base_url"))
    expect(error).to_be_visible()
    expect(error).to_contain_text("http")
    expect(page.locator(tid("settings-user_llm-result"))).to_have_attribute("data-ok", "false")
    assert server.api("/api/settings")["user_llm"]["base_url"] == ""


def test_language_switch_shows_chinese(server: Any, page: Page) -> None:
    open_settings(page, server)
    expect(page.locator(tid("nav-settings"))).to_have_text(re.compile("Settings"))
    page.select_option(tid("lang-switch"), "zh")
    expect(page.locator(tid("nav-settings"))).to_contain_text("设置")
    expect(page.locator(tid("nav-chat"))).to_contain_text("聊天")
    expect(page.locator("h1")).to_have_text("设置")
    expect(page.locator(tid("settings-user_llm-save"))).to_have_text("保存")
    expect(page.locator(tid("settings-user_llm-test"))).to_have_text("测试连接")
    expect(page.locator(tid("ws-status"))).to_contain_text("已连接")
    assert page.evaluate("document.documentElement.lang") == "zh-CN"
    # The choice is remembered.
    page.reload()
    expect(page.locator(tid("settings-user_llm-save"))).to_have_text("保存")
    page.select_option(tid("lang-switch"), "en")
    expect(page.locator(tid("settings-user_llm-save"))).to_have_text("Save")


def test_chinese_browser_defaults_to_chinese(server: Any, browser: Any) -> None:
    context = browser.new_context(locale="zh-CN")
    try:
        pg = context.new_page()
        pg.goto(server.url + "settings")
        expect(pg.locator("h1")).to_have_text("设置")
    finally:
        context.close()


def test_broken_settings_file_shows_banner(start_server: Any, page: Page) -> None:
    def prepare(home: Path) -> None:
        (home / "settings.json").write_text('{"user_llm": {"base_url": "not a url"}}')

    server = start_server(prepare)
    page.goto(server.url + "knowledge")
    banner = page.locator(tid("settings-error-banner"))
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("settings.json could not be read")
    expect(banner).to_contain_text("user_llm.base_url")
    expect(page.locator("h1")).to_contain_text("Knowledge")
    # The file is left as it was.
    assert "not a url" in (server.home / "settings.json").read_text()


def test_every_area_has_a_page(server: Any, page: Page) -> None:
    page.goto(server.url)
    areas = [("chat", "Chat"), ("characters", "Characters"), ("knowledge", "Knowledge"),
             ("workflows", "Workflows"), ("writing", "Writing"), ("tools", "Tools")]  # fmt: skip
    for area, title in areas:
        page.click(tid(f"nav-{area}"))
        expect(page).to_have_url(re.compile(rf"/{area}$"))
        expect(page.locator(tid(f"page-{area}"))).to_be_visible()
        # One heading names the area for screen readers and the tab; the chat's and the
        # canvas's may be visually hidden, since their page height goes to the work.
        expect(page.locator("h1")).to_have_count(1)
        expect(page.locator("h1")).to_contain_text(title)
        expect(page.locator(tid(f"nav-{area}"))).to_have_attribute("aria-current", "page")
    # A deep link is served by the SPA fallback.
    page.goto(server.url + "settings")
    expect(page.locator(tid("settings-user_llm-save"))).to_be_visible()


def test_an_address_that_is_not_an_llm_gets_a_plain_answer(server: Any, sized_page: Page) -> None:
    """A web page's address in the base URL: the check says the address answered, but not
    as an OpenAI-compatible API, instead of a JSON parser's complaint (at 1440×900 and at
    390×844, where the long answer wraps)."""
    page = sized_page

    async def web_page(request: Request) -> HTMLResponse:
        return HTMLResponse("<!DOCTYPE html><html><body><h1>My router</h1></body></html>")

    app = Starlette(routes=[Route("/{path:path}", web_page, methods=["GET", "POST"])])
    with serve_in_thread(app) as url:
        open_settings(page, server)
        page.fill(tid("settings-user_llm-base_url"), url)
        page.fill(tid("settings-user_llm-model"), "test-model")
        page.click(tid("settings-user_llm-test"))
        result = page.locator(tid("settings-user_llm-result"))
        expect(result).to_have_attribute("data-ok", "false")
    expect(result).to_contain_text(
        f"{url} answered, but not as an OpenAI-compatible API (got an HTML page)."
    )
    expect(result).not_to_contain_text("Expecting value")
    expect(result).to_be_in_viewport()
    no_sideways_scroll(page)
