"""A character or persona without a picture answers a generated face through its avatar
route: the name's initials on a colour fixed by the name, as SVG, the name escaped so a
hostile name cannot put markup into the image."""

from __future__ import annotations

import re
from xml.etree import ElementTree

import httpx

SVG = "{http://www.w3.org/2000/svg}"


def character(client: httpx.Client, name: str) -> str:
    created = client.post("/api/characters", json={"character": {"name": name}})
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def persona(client: httpx.Client, name: str) -> str:
    created = client.post("/api/personas", json={"name": name})
    assert created.status_code in (200, 201), created.text
    return str(created.json()["id"])


def face(client: httpx.Client, route: str) -> ElementTree.Element:
    answer = client.get(route)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("image/svg+xml")
    return ElementTree.fromstring(answer.text)


def letters(svg: ElementTree.Element) -> str:
    text = svg.find(f"{SVG}text")
    assert text is not None
    return text.text or ""


def colour(svg: ElementTree.Element) -> str:
    rect = svg.find(f"{SVG}rect")
    assert rect is not None
    return rect.attrib["fill"]


def test_a_character_without_a_picture_answers_its_initials(client: httpx.Client) -> None:
    for name, expected in (
        ("Iris", "I"),
        ("ann lee", "AL"),
        ("Jean Luc Picard", "JP"),
        ("张三", "张"),
    ):
        cid = character(client, name)
        listed = {c["id"]: c for c in client.get("/api/characters").json()["characters"]}
        route = listed[cid]["avatar_url"]
        assert route == f"/api/characters/{cid}/avatar?v=0"
        svg = face(client, route)
        assert letters(svg) == expected, name
        assert svg.attrib["aria-label"] == name
        assert re.fullmatch(r"hsl\(\d{1,3},45%,45%\)", colour(svg))
        # The library's older route (group members) answers the same face.
        assert letters(face(client, f"/api/presets/characters/{cid}/avatar")) == expected


def test_the_same_name_has_the_same_colour(client: httpx.Client) -> None:
    first, again, other = (
        character(client, "Seraphina"),
        character(client, "Seraphina"),
        character(client, "Aria"),
    )
    colours = [colour(face(client, f"/api/characters/{c}/avatar")) for c in (first, again, other)]
    assert colours[0] == colours[1]
    assert colours[0] != colours[2]
    # A persona of that name has that face too.
    mine = persona(client, "Seraphina")
    assert colour(face(client, f"/api/personas/{mine}/avatar")) == colours[0]


def test_a_persona_without_a_picture_answers_its_initials(client: httpx.Client) -> None:
    pid = persona(client, "Mei Ling")
    listed = {p["id"]: p for p in client.get("/api/personas").json()["personas"]}
    assert listed[pid]["avatar_url"] == f"/api/personas/{pid}/avatar?v=0"
    assert letters(face(client, listed[pid]["avatar_url"])) == "ML"


def test_a_hostile_name_cannot_put_markup_into_the_face(client: httpx.Client) -> None:
    hostile = '"><script>alert(1)</script><svg onload="alert(2)" a="&amp;'
    for route in (
        f"/api/characters/{character(client, hostile)}/avatar",
        f"/api/personas/{persona(client, hostile)}/avatar",
    ):
        answer = client.get(route)
        assert "<script" not in answer.text and "<svg onload" not in answer.text
        assert "script-src" not in answer.headers["content-security-policy"]
        svg = ElementTree.fromstring(answer.text)
        # The whole document is one rect and one text; the name is only an attribute value.
        assert [child.tag for child in svg] == [f"{SVG}rect", f"{SVG}text"]
        assert svg.attrib["aria-label"] == hostile
        assert letters(svg) == "SA"


def test_a_character_that_does_not_exist_is_still_not_found(client: httpx.Client) -> None:
    assert client.get("/api/characters/nobody/avatar").status_code == 404
    assert client.get("/api/personas/nobody/avatar").status_code == 404
