"""A manuscript imported through ``/api/writing`` with no agent model becomes memory: the
import finds its characters and places, the curation reads their facts from the prose,
and each character's profile says what the book says of them, as of every chapter."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

API = "/api/writing"
CURATION_DEADLINE_S = 90

MANUSCRIPT = """# The Glass Coast

## Chapter 1: Lisbon

Mara Voss woke before the bells. She had lived in Lisbon all her life, in two rooms above
a chandler's shop, and her green eyes were the first thing strangers noticed. Her black
hair she kept short.

Her brother Tomas came up the stairs with bread. Tomas owed Vance two hundred crowns and
did not want to talk about it.

## Chapter 2: The Quay

Mara walked Tomas down to the quay of Lisbon. Vance was waiting by the customs house. Tomas said
nothing; Mara paid nothing.

## Chapter 3: Porto

That winter Mara dyed her hair silver and moved to Porto. Tomas stayed behind with
Vance's debt.
"""


@pytest.fixture
def api(tmp_path: Path, start_server: Callable[..., Any]) -> Iterator[httpx.Client]:
    home = tmp_path / "home"
    home.mkdir()
    server = start_server(home)
    with httpx.Client(base_url=server.url + API, timeout=30) as client:
        yield client


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


def import_and_curate(api: httpx.Client) -> str:
    book_id = str(ok(api.post("/books", json={"title": "The Glass Coast"}), 201)["id"])
    preview = ok(api.post("/import/preview", files={"file": ("glass.md", MANUSCRIPT.encode())}))
    chapters = [{"title": c["title"], "text": c["text"]} for c in preview["chapters"]]
    ok(api.post(f"/books/{book_id}/import", json={"chapters": chapters}))
    deadline = time.monotonic() + CURATION_DEADLINE_S
    while True:
        outputs: list[dict[str, Any]] = ok(api.get(f"/books/{book_id}/outputs"))
        states = [set(o["steps"].values()) for o in outputs]
        assert not any("failed" in s for s in states), outputs
        if len(outputs) == 3 and all(s <= {"done", "skipped"} for s in states):
            return book_id
        assert time.monotonic() < deadline, f"curation did not finish: {outputs}"
        time.sleep(0.05)


def resource(api: httpx.Client, book_id: str, path: str, as_of: int | None = None) -> Any:
    params: dict[str, Any] = {"path": path} | ({} if as_of is None else {"asOf": as_of})
    return ok(api.get(f"/books/{book_id}/resource", params=params))


def test_the_import_finds_the_characters_and_places_the_prose_names(api: httpx.Client) -> None:
    book_id = import_and_curate(api)
    mara = resource(api, book_id, "/entities/characters/mara-voss")
    assert (mara["kind"], mara["title"], mara["aliases"]) == ("character", "Mara Voss", ["Mara"])
    assert resource(api, book_id, "/entities/characters/tomas")["kind"] == "character"
    assert resource(api, book_id, "/entities/characters/vance")["kind"] == "character"
    assert resource(api, book_id, "/entities/locations/lisbon")["kind"] == "location"


def test_without_an_agent_model_the_profile_holds_what_the_prose_says(
    api: httpx.Client,
) -> None:
    book_id = import_and_curate(api)
    profile = "/profiles/characters/mara-voss"
    now = resource(api, book_id, profile, 3)["levels"]["L1"]["text"]
    assert "- eyes: green (since ch. 1)" in now
    assert "- hair: silver (since ch. 3); before: black (ch. 1)" in now
    assert "- home: Porto (since ch. 3); before: Lisbon (ch. 1)" in now
    assert "- brother: Tomas (since ch. 1)" in now
    # Writing chapter 2 reads chapter 1's Mara: nothing of chapter 3 reaches it.
    before = resource(api, book_id, profile, 2)["levels"]["L1"]["text"]
    assert "- hair: black (since ch. 1)" in before
    assert "silver" not in before and "Porto" not in before
    tomas = resource(api, book_id, "/profiles/characters/tomas", 3)["levels"]["L1"]["text"]
    assert "- owes: two hundred crowns to Vance (since ch. 1)" in tomas
    facts = resource(api, book_id, "/entities/characters/mara-voss")["facts"]
    hair = [f for f in facts if f["attribute"] == "hair"]
    assert [(f["value"], f["chapter"]) for f in hair] == [("black", 1), ("silver", 3)]
    assert "dyed her hair silver" in hair[1]["evidence"]
    relations = resource(api, book_id, "/entities/characters/mara-voss")["relations"]
    assert any(
        r["to"] == "/entities/characters/tomas" and r["kind"] == "kin:brother" for r in relations
    )
