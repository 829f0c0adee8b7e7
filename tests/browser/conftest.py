"""Browser tests: the real server in a subprocess, driven through Debian's chromium.

The web app must be built first (``cd web && npm ci && npm run build``, or ``make test``):
the server serves ``storyloom/server/static``. Playwright's own browser downloads are
never used; ``STORYLOOM_CHROMIUM`` overrides the browser path (default /usr/bin/chromium).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, ViewportSize, expect

from storyloom.knowledge.st_import import import_sillytavern
from storyloom.project.project_file import init_project
from storyloom.project.project_knowledge import add_local_knowledge_base

REPO = Path(__file__).resolve().parents[2]
STATIC_INDEX = REPO / "storyloom" / "server" / "static" / "index.html"
RESULTS_DIR = REPO / "test-results" / "browser"
CHROMIUM = Path(os.environ.get("STORYLOOM_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
START_TIMEOUT_S = 60.0


def in_chinese(context: Any) -> None:
    """Switch the app to 中文 before any page script runs (web/src/i18n.ts keeps the choice).

    Init scripts run in every frame, sandboxed card frames included, where touching the
    real localStorage throws: only the top page is told.
    """
    context.add_init_script(
        "if (window.top === window) localStorage.setItem('storyloom.locale', 'zh')"
    )


def tid(name: str) -> str:
    """The CSS selector of the element with ``data-testid="name"``."""
    return f'[data-testid="{name}"]'


def home_with(
    url: str | None = None,
    characters: dict[str, dict[str, Any]] | None = None,
    **endpoint: Any,
) -> Callable[[Path], None]:
    """A ``prepare`` for :func:`start_server`: the replay LLM at ``url`` as the user model
    (with any other ``endpoint`` settings), and the default project with ``characters``
    (preset id → card fields) in its character library."""

    def prepare(home: Path) -> None:
        if url is not None:
            settings = {"user_llm": {"base_url": url, "model": "test-model", **endpoint}}
            (home / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
        project = home / "projects" / "default"
        init_project(project)
        if characters:
            folder = project / "presets" / "characters"
            folder.mkdir(parents=True, exist_ok=True)
            for character_id, card in characters.items():
                text = json.dumps(card, ensure_ascii=False)
                (folder / f"{character_id}.json").write_text(text, encoding="utf-8")

    return prepare


LANTERNFALL = REPO / "tests" / "fixtures" / "sillytavern" / "world_info_lanternfall_v1.18.json"


def with_lanternfall(home: Path) -> None:
    """The default project with the Lanternfall world info, as an import would leave it."""
    project = home / "projects" / "default"
    init_project(project)
    add_local_knowledge_base(project, import_sillytavern(LANTERNFALL).knowledge_bases[0])


# What sticks out past the window's right edge, for a failure message.
WIDE_ELEMENTS = """() => [...document.querySelectorAll('body *')]
  .filter(e => e.getBoundingClientRect().right > window.innerWidth + 0.5)
  .slice(0, 8)
  .map(e => `${e.tagName.toLowerCase()}.${[...e.classList].join('.')}`
             + `[${e.getAttribute('data-testid') || ''}]`
             + ` ${Math.round(e.getBoundingClientRect().right)}`)"""

SIDEWAYS = """() => Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)
  - window.innerWidth"""


def no_sideways_scroll(page: Page) -> None:
    """The page does not scroll sideways; else the failure names what sticks out."""
    overflow = page.evaluate(SIDEWAYS)
    assert overflow <= 0, (f"scrolls sideways by {overflow} px", page.evaluate(WIDE_ELEMENTS))


# The sizes the app is checked at (issue 27): a laptop and a phone.
SIZES: dict[str, ViewportSize] = {
    "1440x900": {"width": 1440, "height": 900},
    "390x844": {"width": 390, "height": 844},
}


@pytest.fixture(params=list(SIZES))
def sized_page(page: Page, request: pytest.FixtureRequest) -> Page:
    """The ``page`` at each of :data:`SIZES`: a test that takes it runs once per size."""
    page.set_viewport_size(SIZES[request.param])
    return page


def side_panel(page: Page, tab: str) -> None:
    """Open a chat side panel: its header button, or on a phone the panels menu's entry."""
    button = page.locator(tid(f"chat-side-{tab}"))
    if button.is_visible():
        button.click()
    else:
        page.locator(tid("chat-panels-menu")).click()
        page.locator(tid(f"chat-panels-{tab}")).click()
    expect(page.locator(tid("chat-side"))).to_have_attribute("data-tab", tab)


def nav_to(page: Page, area: str) -> None:
    """Go to an area by the navigation: its link, or on a phone the one menu's entry."""
    link = page.locator(tid(f"nav-{area}"))
    if not link.is_visible():
        page.locator(tid("nav-menu")).click()
    link.click()


def messages(page: Page) -> Locator:
    """The chat's messages root → pointer (not the greyed ones after it)."""
    return page.locator(f"{tid('chat-log')} {tid('chat-message')}:not([data-future])")


def message_with(page: Page, text: str) -> Locator:
    return messages(page).filter(has_text=text)


def start_chat(page: Page, server: RunningServer, character_id: str) -> None:
    """A new chat with the character, from the chat page's "new chat" form."""
    page.goto(server.url + "chat")
    expect(page.locator(tid("ws-status"))).to_have_attribute("data-status", "connected")
    page.click(tid("chat-new"))
    page.click(f'{tid("chat-character")}[data-character-id="{character_id}"]')
    page.click(tid("chat-create"))
    expect(page).to_have_url(re.compile(r"/chat/[0-9a-f]+$"))
    expect(messages(page)).to_have_count(1)


def send(page: Page, text: str, *, wait_complete: bool = True) -> None:
    """Send ``text``; with ``wait_complete`` wait until the reply has streamed in."""
    count = messages(page).count()
    page.fill(tid("chat-input"), text)
    page.press(tid("chat-input"), "Enter")
    expect(messages(page)).to_have_count(count + 2)
    expect(messages(page).nth(count)).to_contain_text(text)
    if wait_complete:
        expect(messages(page).last).to_have_attribute("data-status", "complete")
        expect(page.locator(tid("chat-send"))).to_be_visible()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RunningServer:
    url: str
    home: Path
    process: subprocess.Popen[bytes]
    log_path: Path
    extra: dict[str, Any] = field(default_factory=dict)
    token: str | None = None
    """The access token the server printed (None: started with ``--no-token``)."""

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def api(self, path: str) -> Any:
        request = urllib.request.Request(self.url.rstrip("/") + path, headers=self._headers())
        with urllib.request.urlopen(request, timeout=10) as resp:
            return json.loads(resp.read())

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """A JSON request to the API; an error answer fails the test with its detail."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url.rstrip("/") + path,
            data=data,
            headers={"Content-Type": "application/json", **self._headers()},
            method=method,
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as resp:
                text = resp.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            pytest.fail(f"{method} {path} answered {exc.code}: {detail}", pytrace=False)
        return json.loads(text) if text else None


PRINTED_TOKEN = re.compile(r"serving http://\S+/\?token=(\S+)")


def _start_server(
    home: Path, log_path: Path, *, token: bool = False, local_model: bool = False
) -> RunningServer:
    """``storyloom serve`` as a user starts it: with ``token``, exactly so (the token it
    prints is read back); without, ``--no-token``, for tests about anything else. Local
    models (the embedded one when no model is set up) start only with ``local_model``."""
    server_options = [] if token else ["--no-token"]
    if not local_model:
        server_options.append("--no-local-model")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STORYLOOM_")}
    env["PYTHONUNBUFFERED"] = "1"
    log = log_path.open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "storyloom", "serve", "--host", "127.0.0.1",
         "--port", str(port), "--home", str(home), *server_options],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    log.close()
    server = RunningServer(f"http://127.0.0.1:{port}/", home, process, log_path)
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if process.poll() is not None:
            pytest.fail(f"storyloom serve exited with {process.returncode}:\n{server.log()}")
        if token and server.token is None:
            printed = PRINTED_TOKEN.search(server.log())
            server.token = printed.group(1) if printed else None
        try:
            if token and server.token is None:
                raise ConnectionError("the address is not printed yet")
            health = server.api("/api/health")
            if health.get("status") == "ok":
                return server
        except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
            pass
        if time.monotonic() > deadline:
            _stop(process)
            pytest.fail(f"storyloom serve did not answer /api/health in {START_TIMEOUT_S}s:\n"
                        f"{server.log()}")  # fmt: skip
        time.sleep(0.1)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.fixture(scope="session")
def web_build() -> Path:
    if not STATIC_INDEX.is_file():
        pytest.fail(
            f"The web app is not built ({STATIC_INDEX.relative_to(REPO)} is missing). "
            "Run `cd web && npm ci && npm run build` (or `make test`, which builds it first).",
            pytrace=False,
        )
    return STATIC_INDEX


@pytest.fixture
def start_server(
    web_build: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., RunningServer]]:
    """Start ``storyloom serve`` on a free port; ``prepare(home)`` may write files first."""
    started: list[RunningServer] = []

    def start(
        prepare: Callable[[Path], None] | None = None,
        *,
        token: bool = False,
        local_model: bool = False,
    ) -> RunningServer:
        base = tmp_path_factory.mktemp("storyloom-browser")
        home = base / "home"
        home.mkdir()
        if prepare:
            prepare(home)
        server = _start_server(home, base / "server.log", token=token, local_model=local_model)
        started.append(server)
        return server

    yield start
    for server in started:
        _stop(server.process)


@pytest.fixture
def server(start_server: Callable[..., RunningServer]) -> RunningServer:
    return start_server()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One chromium per test module.

    Not per session: the sync API keeps an asyncio loop running in this thread while
    Playwright is started, so async tests collected after the browser tests would fail
    with "asyncio.run() cannot be called from a running event loop".
    """
    if not CHROMIUM.exists():
        pytest.fail(
            f"No chromium at {CHROMIUM}: install Debian's chromium (apt-get install chromium) "
            "or set STORYLOOM_CHROMIUM. Never run `playwright install`.",
            pytrace=False,
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh English page; on failure a screenshot goes to test-results/browser/."""
    context = browser.new_context(locale="en-US", viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    pg = context.new_page()
    console: list[str] = []
    pg.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
    pg.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
    pg.console_messages = console
    yield pg
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(Exception):
            pg.screenshot(path=str(RESULTS_DIR / f"FAILED-{request.node.name}.png"), full_page=True)
        print("browser console:\n" + "\n".join(console))
    context.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
