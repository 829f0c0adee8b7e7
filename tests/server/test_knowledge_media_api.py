"""An entry's image over real HTTP: uploaded into the KB's media/ folder (checked by its
bytes, size-limited, written atomically) and served back as the image it is."""

from __future__ import annotations

from pathlib import Path

import httpx

from storyloom.core.image_kind import image_type
from tests.server.test_knowledge_api import entry, kb_file, make_kb

IMAGE = (
    Path(__file__).resolve().parents[1] / "fixtures" / "sillytavern" / "card_greta_de_v2_tiny.png"
)
OTHER_IMAGE = IMAGE.with_name("card_maren_v2_v3.png")


def _media_url(kb_id: str, entry_id: str) -> str:
    return f"/api/knowledge/bases/{kb_id}/entries/{entry_id}/media"


def _attach(
    client: httpx.Client, kb_id: str, entry_id: str, name: str, data: bytes
) -> httpx.Response:
    return client.post(_media_url(kb_id, entry_id), files={"file": (name, data)})


def test_an_uploaded_image_lands_in_media_and_the_entry_names_it(client: httpx.Client) -> None:
    kb_id = make_kb(client, "Bestiary", [entry("dragon", "Dragon", "A red dragon, wings spread.")])
    data = IMAGE.read_bytes()

    response = _attach(client, kb_id, "dragon", "whatever.jpg", data)

    assert response.status_code == 200, response.text
    content = response.json()["knowledge_base"]["entries"][0]["content"]
    assert content["mime_type"] == "image/png"  # by its bytes, not its name
    assert content["path"].startswith("media/dragon-") and content["path"].endswith(".png")
    assert content["value"] == "A red dragon, wings spread."  # the text stand-in stays
    folder = kb_file(client, kb_id).parent
    assert (folder / content["path"]).read_bytes() == data
    assert not [p for p in (folder / "media").iterdir() if p.name.endswith(".tmp")]

    served = client.get(_media_url(kb_id, "dragon"))
    assert served.status_code == 200
    assert served.headers["content-type"] == "image/png"
    assert served.headers["x-content-type-options"] == "nosniff"
    assert served.content == data


def test_replacing_an_image_removes_the_old_file(client: httpx.Client) -> None:
    kb_id = make_kb(client, "Bestiary", [entry("dragon", "Dragon", "A red dragon.")])
    first = _attach(client, kb_id, "dragon", "a.png", IMAGE.read_bytes()).json()
    second = _attach(client, kb_id, "dragon", "b.png", OTHER_IMAGE.read_bytes()).json()

    folder = kb_file(client, kb_id).parent
    old = first["knowledge_base"]["entries"][0]["content"]["path"]
    new = second["knowledge_base"]["entries"][0]["content"]["path"]
    assert old != new
    assert not (folder / old).exists()
    assert client.get(_media_url(kb_id, "dragon")).content == OTHER_IMAGE.read_bytes()


def test_a_file_that_is_no_image_is_refused_whatever_its_name(client: httpx.Client) -> None:
    kb_id = make_kb(client, "Bestiary", [entry("dragon", "Dragon", "A red dragon.")])

    response = _attach(client, kb_id, "dragon", "dragon.png", b"<svg onload=alert(1)></svg>")

    assert response.status_code == 422
    error = response.json()["error"]
    assert "dragon.png" in error["message"] and "not a PNG, JPEG, GIF or WebP" in error["message"]
    saved = client.get(f"/api/knowledge/bases/{kb_id}").json()["knowledge_base"]
    assert saved["entries"][0]["content"].get("path") is None
    assert not (kb_file(client, kb_id).parent / "media").exists() or not list(
        (kb_file(client, kb_id).parent / "media").iterdir()
    )


def test_an_image_over_ten_megabytes_is_refused(client: httpx.Client) -> None:
    kb_id = make_kb(client, "Bestiary", [entry("dragon", "Dragon", "A red dragon.")])
    big = IMAGE.read_bytes() + b"\0" * (10 * 1024 * 1024)

    response = _attach(client, kb_id, "dragon", "huge.png", big)

    assert response.status_code == 413
    assert "huge.png" in response.json()["error"]["message"]


def test_an_unknown_entry_or_an_entry_without_media_is_a_404(client: httpx.Client) -> None:
    kb_id = make_kb(client, "Bestiary", [entry("dragon", "Dragon", "A red dragon.")])

    assert _attach(client, kb_id, "nope", "a.png", IMAGE.read_bytes()).status_code == 404
    assert client.get(_media_url(kb_id, "dragon")).status_code == 404


def test_a_hand_written_path_outside_the_folder_or_to_no_image_is_never_served(
    client: httpx.Client,
) -> None:
    kb_id = make_kb(
        client,
        "Bestiary",
        [
            entry("notes", "Notes", "x", content={"value": "x", "path": "media/notes.png"}),
        ],
    )
    folder = kb_file(client, kb_id).parent
    (folder / "media").mkdir(exist_ok=True)
    (folder / "media" / "notes.png").write_text("<html>not an image</html>")

    response = client.get(_media_url(kb_id, "notes"))

    assert response.status_code == 404
    assert "not an image" in response.json()["error"]["message"]
    assert image_type(IMAGE.read_bytes()) == "image/png"


def test_removing_an_image_keeps_the_text_and_deletes_the_file(client: httpx.Client) -> None:
    kb_id = make_kb(client, "Bestiary", [entry("dragon", "Dragon", "A red dragon.")])
    attached = _attach(client, kb_id, "dragon", "a.png", IMAGE.read_bytes()).json()
    stored = attached["knowledge_base"]["entries"][0]["content"]["path"]
    folder = kb_file(client, kb_id).parent

    removed = client.delete(_media_url(kb_id, "dragon"))

    assert removed.status_code == 200, removed.text
    content = removed.json()["knowledge_base"]["entries"][0]["content"]
    assert content.get("path") is None
    assert content["mime_type"] == "text/plain"
    assert content["value"] == "A red dragon."
    assert not (folder / stored).exists()
    assert client.get(_media_url(kb_id, "dragon")).status_code == 404
    # Nothing left to remove: said so, and nothing changes.
    again = client.delete(_media_url(kb_id, "dragon"))
    assert again.status_code == 404
    assert "has no media file" in again.json()["error"]["message"]


def test_removing_a_hand_placed_image_leaves_its_file(client: httpx.Client) -> None:
    hand_placed = {"value": "A red dragon.", "path": "art/dragon.png", "mime_type": "image/png"}
    kb_id = make_kb(
        client, "Bestiary", [entry("dragon", "Dragon", "A red dragon.", content=hand_placed)]
    )
    folder = kb_file(client, kb_id).parent
    (folder / "art").mkdir()
    (folder / "art" / "dragon.png").write_bytes(IMAGE.read_bytes())

    removed = client.delete(_media_url(kb_id, "dragon"))

    assert removed.status_code == 200, removed.text
    assert removed.json()["knowledge_base"]["entries"][0]["content"].get("path") is None
    assert (folder / "art" / "dragon.png").exists()
