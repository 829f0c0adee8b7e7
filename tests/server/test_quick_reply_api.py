"""Quick replies, chat backgrounds and expression sprites over HTTP, on a real server:
a SillyTavern set uploaded and listed with its buttons (slash commands kept, not
runnable), saved, hidden and deleted; backgrounds listed and served only as the images
they are, with every way out of the folder refused; a character's sprites listed and
served; a chat naming its background and its expression."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from storyloom.plugins import node_registry
from storyloom.sillytavern.png_chunks import blank_png
from storyloom.testing.replay_server import ReplayLLMServer
from tests.chat.test_quick_replies import st_set
from tests.server.conftest import LiveServer, chat_home

CARD = {"name": "Seraphina", "description": "A guardian of the forest.", "first_mes": "Hello."}


@pytest.fixture
def server(tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]) -> LiveServer:
    home = chat_home(tmp_path / "home", llm, {"seraphina": CARD})
    live: LiveServer = start_server(home, node_registry=node_registry(entry_points=False))
    return live


@pytest.fixture
def api(server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def upload_set(api: httpx.Client, quick_set: dict[str, Any]) -> httpx.Response:
    data = json.dumps(quick_set).encode()
    name = f"{quick_set['name']}.json"
    return api.post("/api/quick-replies/import", files={"file": (name, data)})


def test_an_uploaded_set_lists_its_buttons_and_round_trips(api: httpx.Client) -> None:
    answer = upload_set(api, st_set("Dice"))
    assert answer.status_code == 201, answer.text
    view = answer.json()
    assert view["visible"] and view["send"]
    assert [(b["label"], b["runnable"]) for b in view["buttons"]] == [
        ("Look", True),
        ("Roll", False),
    ]
    assert "slash command" in view["buttons"][1]["not_runnable"]
    assert view["set"]["idIndex"] == 3  # SillyTavern's own keys come back

    upload_set(api, st_set("Story", disableSend=True))
    listed = api.get("/api/quick-replies").json()
    assert [(s["name"], s["send"]) for s in listed["sets"]] == [("Dice", True), ("Story", False)]

    edited = view["set"] | {"color": "#ff0000"}
    saved = api.put("/api/quick-replies/Dice", json={"set": edited, "visible": False})
    assert saved.status_code == 200, saved.text
    assert saved.json()["set"]["color"] == "#ff0000" and not saved.json()["visible"]
    assert [s["name"] for s in api.get("/api/quick-replies").json()["sets"]] == ["Story", "Dice"]

    assert api.delete("/api/quick-replies/Dice").status_code == 204
    assert api.get("/api/quick-replies/Dice").status_code == 404


def test_a_bad_set_is_refused_naming_file_field_and_reason(api: httpx.Client) -> None:
    bad = st_set("Bad")
    bad["qrList"][1]["message"] = ["not", "text"]
    answer = upload_set(api, bad)
    assert answer.status_code == 422
    body = answer.json()["error"]
    assert "Bad.json" in body["message"]
    assert [p["field"] for p in body["problems"]] == ["qrList[1].message"]
    assert api.get("/api/quick-replies").json()["sets"] == []

    renamed = api.put("/api/quick-replies/Other", json={"set": st_set("Dice")})
    assert renamed.status_code == 422
    assert renamed.json()["error"]["problems"][0]["field"] == "set.name"


def test_backgrounds_are_listed_served_and_set_on_a_chat(
    api: httpx.Client, server: LiveServer
) -> None:
    png = blank_png(rgb=(1, 2, 3))
    answer = api.post("/api/backgrounds", files={"file": ("forest glade.png", png)})
    assert answer.status_code == 201, answer.text
    url = answer.json()["url"]
    assert api.get("/api/backgrounds").json()["backgrounds"] == [
        {"name": "forest glade.png", "url": url}
    ]
    image = api.get(url)
    assert image.content == png and image.headers["content-type"] == "image/png"
    assert image.headers["x-content-type-options"] == "nosniff"

    chat = api.post("/api/chats", json={"character_id": "seraphina"}).json()
    patched = api.patch(
        f"/api/chats/{chat['id']}",
        json={"expected_version": chat["version"], "settings": {"background": "forest glade.png"}},
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["settings"]["background"] == "forest glade.png"
    again = api.get(f"/api/chats/{chat['id']}").json()
    assert again["conversation"]["settings"]["background"] == "forest glade.png"


def test_a_background_upload_that_is_not_an_image_is_refused(api: httpx.Client) -> None:
    html = b"<html><script>alert(document.cookie)</script></html>"
    answer = api.post("/api/backgrounds", files={"file": ("evil.png", html)})
    assert answer.status_code == 422
    answer = api.post("/api/backgrounds", files={"file": ("evil.svg", blank_png())})
    assert answer.status_code == 422
    assert api.get("/api/backgrounds").json()["backgrounds"] == []


@pytest.mark.parametrize(
    "path",
    [
        "/api/backgrounds/..%2Fsettings.json",
        "/api/backgrounds/..%2F..%2Fsettings.json",
        "/api/backgrounds/%2e%2e%2fsettings.json",
        "/api/backgrounds/..%5Csettings.json",
        "/api/backgrounds/%2Fetc%2Fpasswd",
        "/api/backgrounds/.hidden.png",
        "/api/backgrounds/link.png",
        "/api/backgrounds/fake.png",
        "/api/backgrounds/../settings.json",
        "/api/characters/seraphina/expressions/..%2F..%2Fseraphina",
        "/api/characters/..%2Fseraphina/expressions/joy",
    ],
)
def test_an_attacker_cannot_read_outside_the_folders(
    server: LiveServer, tmp_path: Path, path: str
) -> None:
    folder = server.home / "backgrounds"
    folder.mkdir(exist_ok=True)
    secret = tmp_path / "secret.png"
    secret.write_bytes(blank_png())
    (folder / "link.png").symlink_to(secret)
    (folder / ".hidden.png").write_bytes(blank_png())
    (folder / "fake.png").write_text("<script>alert(1)</script>")
    settings_text = (server.home / "settings.json").read_bytes()
    # A raw request: httpx would otherwise normalise the "../" away before sending.
    with httpx.Client(base_url=server.url, timeout=30) as raw:
        request = raw.build_request("GET", server.url)
        request.url = request.url.copy_with(raw_path=path.encode())
        answer = raw.send(request)
    assert answer.status_code in (404, 422), answer.text
    assert answer.content != settings_text and answer.content != blank_png()
    assert not answer.headers.get("content-type", "").startswith("image/")


def test_sprites_are_listed_served_and_picked_per_chat(
    api: httpx.Client, server: LiveServer
) -> None:
    joy = blank_png(rgb=(250, 200, 0))
    neutral = blank_png(rgb=(100, 100, 100))
    for label, data in (("joy", joy), ("neutral", neutral)):
        put = api.put(
            f"/api/characters/seraphina/expressions/{label}", files={"file": ("x.png", data)}
        )
        assert put.status_code == 200, put.text
    listed = api.get("/api/characters/seraphina/expressions").json()
    assert [e["label"] for e in listed["expressions"]] == ["joy", "neutral"]
    assert listed["default"] == "neutral"
    assert api.get(listed["expressions"][0]["url"]).content == joy
    assert api.get("/api/characters/seraphina/expressions/anger").status_code == 404
    assert api.get("/api/characters/nobody/expressions").status_code == 404
    bad = api.put(
        "/api/characters/seraphina/expressions/anger", files={"file": ("x.png", b"<svg/>")}
    )
    assert bad.status_code == 422

    chat = api.post("/api/chats", json={"character_id": "seraphina"}).json()
    patched = api.patch(
        f"/api/chats/{chat['id']}",
        json={"expected_version": chat["version"], "settings": {"expression": "joy"}},
    )
    assert patched.json()["settings"]["expression"] == "joy"
    assert patched.json()["character"]["source_preset"] == "seraphina"
