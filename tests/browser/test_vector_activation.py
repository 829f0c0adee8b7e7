"""Vector activation is a book's property: off after import, turned on in its form."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import tid, with_lanternfall

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.browser


def test_turn_on_vector_activation_for_an_imported_book(start_server: Any, page: Page) -> None:
    server = start_server(with_lanternfall)
    [kb] = server.api("/api/knowledge/bases")["bases"]
    on_disk = Path(kb["folder"]) / "knowledge.json"
    assert json.loads(on_disk.read_text("utf-8")).get("vector_activation", False) is False

    page.goto(server.url + "knowledge")
    page.locator(tid("kb-item")).click()
    expect(page).to_have_url(re.compile(rf"/knowledge/{kb['kb_id']}$"))
    page.locator(tid("kb-properties")).locator("summary").click()
    toggle = page.locator(tid("field-vector_activation"))
    expect(toggle).not_to_be_checked()
    expect(page.locator(tid("kb-properties"))).to_contain_text("Vector activation")
    toggle.check()
    page.click(tid("kb-save"))
    expect(page.locator(tid("kb-save-result"))).to_have_attribute("data-ok", "true")
    assert json.loads(on_disk.read_text("utf-8"))["vector_activation"] is True
