"""Settings → Regex scripts (global), end to end: a real server and browser. The user
imports a SillyTavern regex export, switches a script off and deletes one; each change is
what the server then holds."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import tid

pytestmark = pytest.mark.browser


def st_script(name: str, find: str) -> dict[str, Any]:
    return {"id": f"st-{name}", "scriptName": name, "findRegex": find, "replaceString": "",
            "trimStrings": [], "placement": [1, 2], "disabled": False, "markdownOnly": False,
            "promptOnly": True, "runOnEdit": True, "substituteRegex": 0,
            "minDepth": None, "maxDepth": None}  # fmt: skip


def test_import_switch_off_and_delete_global_regex_scripts(
    server: Any, page: Page, tmp_path: Path
) -> None:
    server.request("PUT", "/api/regex-scripts", [st_script("lamp", "/lantern/gi")])
    page.goto(server.url)
    page.locator(tid("nav-settings")).click()
    expect(page).to_have_url(re.compile(r"/settings$"))
    section = page.locator(tid("settings-regex"))
    items = section.locator(tid("regex-item"))
    expect(items).to_have_count(1)
    expect(items.first).to_contain_text("lamp")
    expect(items.first).to_contain_text("prompt only")

    export = tmp_path / "regex-trim_ooc.json"
    export.write_text(json.dumps(st_script("trim ooc", "/\\(OOC:.*?\\)/g")), encoding="utf-8")
    section.locator(tid("regex-import-file")).set_input_files(str(export))
    expect(items).to_have_count(2)
    expect(section.locator(tid("regex-note"))).to_contain_text("1 script(s) imported")
    expect(items.nth(1)).to_contain_text("trim ooc")

    with page.expect_response(lambda r: r.request.method == "PUT" and r.ok):
        items.nth(0).locator(tid("regex-enabled")).uncheck()
    expect(items.nth(0).locator(tid("regex-enabled"))).not_to_be_checked()
    held = server.api("/api/regex-scripts")["scripts"]
    assert [(s["scriptName"], s["disabled"]) for s in held] == [
        ("lamp", True),
        ("trim ooc", False),
    ]

    items.nth(1).locator(tid("regex-delete")).click()
    expect(items).to_have_count(1)
    assert [s["scriptName"] for s in server.api("/api/regex-scripts")["scripts"]] == ["lamp"]
