"""The character library and personas over HTTP, on a real server: edit with versions (a
stale save is a 409), avatars, export and re-import, bad files refused, and the chat's
persona naming the user from the next turn on."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from storyloom.plugins import node_registry
from storyloom.sillytavern.png_chunks import blank_png
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from tests.server.conftest import chat_home

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sillytavern"
Json = dict[str, Any]
# What the editor edits; each must come back equal from an exported file.
EDITED = (
    "name",
    "nickname",
    "description",
    "personality",
    "scenario",
    "first_mes",
    "alternate_greetings",
    "mes_example",
    "creator_notes",
    "system_prompt",
    "post_history_instructions",
    "tags",
    "creator",
    "character_version",
)


@pytest.fixture
def api(
    tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., Any]
) -> Iterator[httpx.Client]:
    home = chat_home(tmp_path / "home", llm)
    server = start_server(home, node_registry=node_registry(entry_points=False))
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def import_file(api: httpx.Client, name: str, data: bytes, **form: str) -> httpx.Response:
    return api.post("/api/knowledge/import", files={"file": (name, data)}, data=form)


def imported_character(api: httpx.Client, name: str, data: bytes, **form: str) -> str:
    answer = import_file(api, name, data, **form)
    assert answer.status_code == 201, answer.text
    return Path(answer.json()["character_file"]).stem


def edit(document: Json) -> Json:
    character = dict(document["character"])
    character.update(
        nickname="Mare",
        description="Edited keeper of {{user}}'s lighthouse.",
        alternate_greetings=["Another dawn.", "又是黎明。"],
        tags=["sea", "light"],
        creator="tester",
        character_version="3",
        system_prompt="Be brief.",
        mes_example="<START>\n{{char}}: Hm.",
    )
    character["extensions"] = {
        **character["extensions"],
        "depth_prompt": {"prompt": "Remember the sea.", "depth": 3, "role": "system"},
    }
    return character


def test_a_character_is_created_listed_edited_and_counted(api: httpx.Client) -> None:
    created = api.post("/api/characters", json={"character": {"name": "Iris", "description": "A"}})
    assert created.status_code == 201, created.text
    character_id = created.json()["id"]
    listed = api.get("/api/characters").json()["characters"]
    assert [(c["id"], c["name"], c["avatar_url"]) for c in listed] == [
        (character_id, "Iris", f"/api/characters/{character_id}/avatar?v=0")
    ]
    document = api.get(f"/api/characters/{character_id}").json()
    assert document["tokens"]["fields"]["description"] == 1
    saved = api.put(
        f"/api/characters/{character_id}",
        json={"version": document["version"], "character": edit(document)},
    )
    assert saved.status_code == 200, saved.text
    after = saved.json()
    assert after["character"]["nickname"] == "Mare"
    assert after["tokens"]["fields"]["depth_prompt"] > 0
    assert after["tokens"]["alternate_greetings"][0] > 0
    assert after["version"] != document["version"]
    assert api.get("/api/characters", params={"q": "light"}).json()["characters"][0]["id"] == (
        character_id
    )
    assert api.get("/api/characters", params={"tag": "nope"}).json()["characters"] == []


def test_the_later_of_two_tabs_gets_a_conflict_and_the_first_save_stands(
    api: httpx.Client,
) -> None:
    character_id = api.post("/api/characters", json={"character": {"name": "Iris"}}).json()["id"]
    tab_one = api.get(f"/api/characters/{character_id}").json()
    tab_two = api.get(f"/api/characters/{character_id}").json()
    first = {**tab_one["character"], "description": "from tab one"}
    second = {**tab_two["character"], "description": "from tab two"}
    assert (
        api.put(
            f"/api/characters/{character_id}",
            json={"version": tab_one["version"], "character": first},
        ).status_code
        == 200
    )
    late = api.put(
        f"/api/characters/{character_id}", json={"version": tab_two["version"], "character": second}
    )
    assert late.status_code == 409
    assert "changed elsewhere" in late.json()["error"]["message"]
    assert api.get(f"/api/characters/{character_id}").json()["character"]["description"] == (
        "from tab one"
    )


def test_a_bad_field_is_refused_with_its_name_and_nothing_is_written(api: httpx.Client) -> None:
    character_id = api.post("/api/characters", json={"character": {"name": "Iris"}}).json()["id"]
    document = api.get(f"/api/characters/{character_id}").json()
    bad = {**document["character"], "alternate_greetings": "not a list", "talkativeness": 7}
    answer = api.put(
        f"/api/characters/{character_id}", json={"version": document["version"], "character": bad}
    )
    assert answer.status_code == 422
    fields = {p["field"] for p in answer.json()["error"]["problems"]}
    assert any("talkativeness" in f for f in fields)
    assert api.get(f"/api/characters/{character_id}").json()["version"] == document["version"]


def test_a_card_that_does_not_parse_names_file_and_field_and_changes_nothing(
    api: httpx.Client,
) -> None:
    before = api.get("/api/characters").json()
    card = {"spec": "chara_card_v2", "data": {"name": "Bad", "description": 42}}
    answer = import_file(api, "bad_card.json", json.dumps(card).encode())
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert "bad_card.json" in error["message"]
    assert [p["field"] for p in error["problems"]] == ["data.description"]
    assert api.get("/api/characters").json() == before
    assert api.get("/api/knowledge/bases").json()["bases"] == []


def test_avatar_upload_takes_images_only(api: httpx.Client) -> None:
    character_id = api.post("/api/characters", json={"character": {"name": "Iris"}}).json()["id"]
    refused = api.post(
        f"/api/characters/{character_id}/avatar", files={"file": ("a.txt", b"hello")}
    )
    assert refused.status_code == 422 and "a.txt" in refused.json()["error"]["message"]
    jpeg = b"\xff\xd8\xff\xe0" + b"\0" * 16
    taken = api.post(f"/api/characters/{character_id}/avatar", files={"file": ("a.jpg", jpeg)})
    assert taken.status_code == 200, taken.text
    url = taken.json()["avatar_url"]
    image = api.get(url)
    assert image.headers["content-type"] == "image/jpeg" and image.content == jpeg


@pytest.mark.parametrize("fmt", ["png", "charx", "json"])
def test_an_edited_card_exported_and_imported_again_is_unchanged(
    api: httpx.Client, fmt: str
) -> None:
    character_id = imported_character(
        api, "card_maren_v2_v3.png", (FIXTURES / "card_maren_v2_v3.png").read_bytes()
    )
    document = api.get(f"/api/characters/{character_id}").json()
    api.put(
        f"/api/characters/{character_id}",
        json={"version": document["version"], "character": edit(document)},
    ).raise_for_status()
    edited = api.get(f"/api/characters/{character_id}").json()["character"]
    exported = api.get(f"/api/characters/{character_id}/export", params={"format": fmt})
    assert exported.status_code == 200
    assert f".{fmt}" in exported.headers["content-disposition"]
    # The exported card is the character here, changed: a second one is the user's choice.
    again_id = imported_character(api, f"again.{fmt}", exported.content, on_conflict="keep_both")
    again = api.get(f"/api/characters/{again_id}").json()
    for key in EDITED:
        assert again["character"][key] == edited[key], key
    assert (
        again["character"]["extensions"]["depth_prompt"] == (edited["extensions"]["depth_prompt"])
    )
    if fmt != "json":
        assert again["avatar_url"] is not None


def test_duplicate_and_delete(api: httpx.Client) -> None:
    character_id = api.post("/api/characters", json={"character": {"name": "Iris"}}).json()["id"]
    copied = api.post(f"/api/characters/{character_id}/duplicate")
    assert copied.status_code == 201
    names = sorted(c["name"] for c in api.get("/api/characters").json()["characters"])
    assert names == ["Iris", "Iris (copy)"]
    assert api.delete(f"/api/characters/{character_id}").status_code == 204
    assert api.get(f"/api/characters/{character_id}").status_code == 404


def test_favourites_come_first(api: httpx.Client) -> None:
    for name in ("Anna", "Zed"):
        api.post("/api/characters", json={"character": {"name": name}})
    zed = next(c for c in api.get("/api/characters").json()["characters"] if c["name"] == "Zed")
    api.put(f"/api/characters/{zed['id']}/fav", json={"fav": True}).raise_for_status()
    listed = api.get("/api/characters").json()["characters"]
    assert [c["name"] for c in listed] == ["Zed", "Anna"] and listed[0]["fav"]
    assert [
        c["name"] for c in api.get("/api/characters", params={"fav": True}).json()["characters"]
    ] == ["Zed"]


# -- personas ----------------------------------------------------------------------------------


def test_personas_have_a_default_an_avatar_and_a_stale_save_is_a_conflict(
    api: httpx.Client,
) -> None:
    ann = api.post("/api/personas", json={"name": "Ann", "description": "A cartographer."})
    assert ann.status_code == 201, ann.text
    assert ann.json()["is_default"]
    bob = api.post("/api/personas", json={"name": "Bob"}).json()
    listed = api.get("/api/personas").json()
    assert listed["default_id"] == ann.json()["id"]
    api.post(f"/api/personas/{bob['id']}/default").raise_for_status()
    assert api.get("/api/personas").json()["default_id"] == bob["id"]
    png = blank_png()
    with_avatar = api.post(f"/api/personas/{bob['id']}/avatar", files={"file": ("b.png", png)})
    assert api.get(with_avatar.json()["avatar_url"]).content == png
    opened = api.get(f"/api/personas/{bob['id']}").json()["version"]
    body = {"version": opened, "persona": {"name": "Bob", "description": "one"}}
    assert api.put(f"/api/personas/{bob['id']}", json=body).status_code == 200
    body["persona"]["description"] = "two"
    assert api.put(f"/api/personas/{bob['id']}", json=body).status_code == 409
    assert api.get(f"/api/personas/{bob['id']}").json()["description"] == "one"


def test_a_persona_file_that_does_not_parse_is_refused_with_file_field_and_reason(
    api: httpx.Client,
) -> None:
    bad = json.dumps({"name": "", "description": 3}).encode()
    answer = api.post("/api/personas/import", files={"file": ("me.json", bad)})
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert "me.json" in error["message"]
    assert {p["field"] for p in error["problems"]} == {"name", "description"}
    assert api.get("/api/personas").json()["personas"] == []
    good = json.dumps({"name": "Cleo", "description": "Imported."}).encode()
    answer = api.post("/api/personas/import", files={"file": ("c.json", good)})
    assert answer.status_code == 201
    assert [p["name"] for p in answer.json()["imported"]] == ["Cleo"]


def test_a_sillytavern_persona_backup_imports_every_persona_and_the_default(
    api: httpx.Client,
) -> None:
    book = {
        "name": "Lanternfall",
        "entries": {"0": {"uid": 0, "key": ["lamp"], "content": "A lamp."}},
    }
    kb = import_file(api, "book.json", json.dumps(book).encode()).json()["created"][0]
    backup = {
        "personas": {"1.png": "Ann", "2.png": "Bob"},
        "persona_descriptions": {
            "1.png": {"description": "Ann maps rivers.", "position": 0},
            "2.png": {"description": "Bob shoes horses.", "lorebook": kb["displayName"]},
        },
        "default_persona": "2.png",
    }
    answer = api.post(
        "/api/personas/import", files={"file": ("personas.json", json.dumps(backup).encode())}
    )
    assert answer.status_code == 201, answer.text
    listed = api.get("/api/personas").json()
    by_name = {p["name"]: p for p in listed["personas"]}
    assert by_name["Ann"]["description"] == "Ann maps rivers."
    assert by_name["Bob"]["knowledge_base"] == kb["kb_id"]
    assert listed["default_id"] == by_name["Bob"]["id"]
    bad = {"personas": {"1.png": "Ann", "2.png": ""}, "persona_descriptions": {}}
    refused = api.post(
        "/api/personas/import", files={"file": ("bad.json", json.dumps(bad).encode())}
    )
    assert refused.status_code == 422
    assert [p["field"] for p in refused.json()["error"]["problems"]] == ["personas.2.png"]
    assert len(api.get("/api/personas").json()["personas"]) == 2


def _reply_done(api: httpx.Client, chat_id: str) -> Json:
    for _ in range(1000):
        view: Json = api.get(f"/api/chats/{chat_id}").json()
        if not view["running"]:
            return view
        time.sleep(0.01)
    raise AssertionError("the reply did not finish")


def test_the_chats_persona_names_the_user_from_the_next_turn(
    api: httpx.Client, llm: ReplayLLMServer
) -> None:
    character_id = api.post(
        "/api/characters",
        json={
            "character": {
                "name": "Sera",
                "description": "Knows {{user}}.",
                "first_mes": "Hi {{user}}.",
            }
        },
    ).json()["id"]
    ann = api.post("/api/personas", json={"name": "Ann", "description": "Ann maps rivers."}).json()
    bob = api.post("/api/personas", json={"name": "Bob", "description": "Bob shoes horses."}).json()
    chat = api.post("/api/chats", json={"character_id": character_id}).json()
    assert chat["settings"]["persona_id"] is None
    llm.script(Reply(text="Hello."))
    api.post(f"/api/chats/{chat['id']}/messages", json={"text": "Hi"}).raise_for_status()
    view = _reply_done(api, chat["id"])
    assert view["messages"][0]["content"] == "Hi Ann."
    assert "Ann maps rivers." in json.dumps(llm.chat_requests[-1]["messages"])
    patched = api.patch(
        f"/api/chats/{chat['id']}",
        json={
            "settings": {"persona_id": bob["id"]},
            "expected_version": view["conversation"]["version"],
        },
    )
    assert patched.status_code == 200, patched.text
    unknown = api.patch(
        f"/api/chats/{chat['id']}",
        json={"settings": {"persona_id": "nobody"}, "expected_version": patched.json()["version"]},
    )
    assert unknown.status_code == 422
    assert [p["field"] for p in unknown.json()["error"]["problems"]] == ["settings.persona_id"]
    llm.script(Reply(text="Again."))
    api.post(f"/api/chats/{chat['id']}/messages", json={"text": "Me again"}).raise_for_status()
    view = _reply_done(api, chat["id"])
    users = [m["name"] for m in view["messages"] if m["role"] == "user"]
    assert users == ["Ann", "Bob"]
    sent = json.dumps(llm.chat_requests[-1]["messages"])
    assert "Bob shoes horses." in sent and "Ann maps rivers." not in sent
    assert ann["id"] != bob["id"]


def test_a_character_file_from_before_bindings_shows_its_own_book_bound(
    api: httpx.Client, tmp_path: Path
) -> None:
    character_id = imported_character(
        api, "card_maren_v2_v3.png", (FIXTURES / "card_maren_v2_v3.png").read_bytes()
    )
    bound = api.get(f"/api/characters/{character_id}").json()["character"]["knowledge_bases"]
    path = tmp_path / "home" / "projects" / "default" / "presets" / "characters"
    file = path / f"{character_id}.json"
    data = json.loads(file.read_text(encoding="utf-8"))
    data.pop("knowledge_bases", None)
    file.write_text(json.dumps(data), encoding="utf-8")
    document = api.get(f"/api/characters/{character_id}").json()
    books = api.get("/api/knowledge/bases").json()["bases"]
    own = [b["kb_id"] for b in books if not b["displayName"].endswith("· character")]
    assert len(own) == 1
    assert document["character"]["knowledge_bases"] == own == bound
    api.put(
        f"/api/characters/{character_id}",
        json={"version": document["version"], "character": document["character"]},
    ).raise_for_status()
    assert json.loads(file.read_text(encoding="utf-8"))["knowledge_bases"] == own


def test_an_imported_cards_agent_profile_runs_only_after_the_user_confirms_it(
    api: httpx.Client, llm: ReplayLLMServer, tmp_path: Path
) -> None:
    profile = {"id": "dm", "name": "Game master", "prompt": "You run the game, with tools."}
    assert api.post("/api/agents", json=profile).status_code == 201
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Mallory",
            "description": "A downloaded card.",
            "first_mes": "Hello.",
            "extensions": {"storyloom": {"agent_profile": "dm"}},
        },
    }
    character_id = imported_character(api, "mallory.json", json.dumps(card).encode())
    agent = api.get(f"/api/characters/{character_id}").json()["agent"]
    assert agent == {"suggested": "dm", "answered": False, "profile": None}
    chat = api.post("/api/chats", json={"character_id": character_id}).json()
    llm.script(Reply(text="A plain reply."))
    api.post(f"/api/chats/{chat['id']}/messages", json={"text": "Hi"}).raise_for_status()
    _reply_done(api, chat["id"])
    assert "You run the game" not in json.dumps(llm.chat_requests[-1]["messages"])
    # Nothing the card (or its file) says can stand in for the answer.
    consent = tmp_path / "home" / "projects" / "default" / "agent_consent.json"
    assert not consent.exists()

    missing = api.put(f"/api/characters/{character_id}/agent", json={"profile": "nobody"})
    assert missing.status_code == 422 and "nobody" in missing.text
    confirmed = api.put(f"/api/characters/{character_id}/agent", json={"profile": "dm"})
    assert confirmed.status_code == 200, confirmed.text
    assert confirmed.json()["agent"] == {"suggested": "dm", "answered": True, "profile": "dm"}
    llm.script(Reply(text="An agent's reply."))
    api.post(f"/api/chats/{chat['id']}/messages", json={"text": "Again"}).raise_for_status()
    _reply_done(api, chat["id"])
    assert llm.chat_requests[-1]["messages"][0]["content"].startswith("You run the game")

    declined = api.put(f"/api/characters/{character_id}/agent", json={"profile": None})
    assert declined.json()["agent"] == {"suggested": "dm", "answered": True, "profile": None}
    assert api.delete(f"/api/characters/{character_id}").status_code == 204
    again = imported_character(api, "mallory.json", json.dumps(card).encode())
    assert api.get(f"/api/characters/{again}").json()["agent"]["answered"] is False
