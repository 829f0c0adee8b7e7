"""``POST /api/knowledge/bases/{kb_id}/reference`` on a real server: a global KB picked in a
workflow node is added to project.json, and the node finds it by the reference id."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx


def project_dir(live_server: Any) -> Path:
    return Path(live_server.home) / "projects" / "default"


def make_kb(client: httpx.Client, name: str, texts: list[str], scope: str = "global") -> str:
    created = client.post("/api/knowledge/bases", json={"displayName": name, "scope": scope})
    assert created.status_code == 201, created.text
    kb_id: str = created.json()["kb_id"]
    doc = client.get(f"/api/knowledge/bases/{kb_id}").json()["knowledge_base"]
    doc["entries"] = [
        {"id": f"e{n}", "displayName": f"{name} {n}", "content": {"value": text}}
        for n, text in enumerate(texts)
    ]
    saved = client.put(f"/api/knowledge/bases/{kb_id}", json=doc)
    assert saved.status_code == 200, saved.text
    return kb_id


def references(live_server: Any) -> list[dict[str, Any]]:
    project = json.loads((project_dir(live_server) / "project.json").read_text(encoding="utf-8"))
    refs: list[dict[str, Any]] = project["knowledgeBaseReferences"]
    return refs


def run_static_kb(client: httpx.Client, knowledge_bases: list[str]) -> dict[str, Any]:
    """Run a one-node workflow (``kb:StaticKnowledgeBase``) and answer its outputs."""
    workflow = {
        "id": "lore",
        "nodes": [
            {
                "id": "kb",
                "type": "kb:StaticKnowledgeBase",
                "config": {"knowledge_bases": knowledge_bases},
            }
        ],
        "edges": [],
    }
    started = client.post("/api/workflows/lore/runs", json={"workflow": workflow})
    assert started.status_code == 202, started.text
    run_id = started.json()["runId"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        run = client.get(f"/api/workflow-runs/{run_id}").json()
        if run["status"] != "running":
            break
        time.sleep(0.05)
    assert run["status"] == "completed", run
    done = [e for e in run["events"] if e["type"] == "node:completed" and e["nodeId"] == "kb"]
    outputs: dict[str, Any] = done[0]["outputs"]
    return outputs


def test_referencing_a_global_kb_writes_project_json_and_a_node_resolves_the_reference_id(
    client: httpx.Client, live_server: Any
) -> None:
    other = make_kb(client, "Other", ["not wanted"])
    sea = make_kb(client, "Sea Lore", ["The sea is salt.", "Tides follow the moon."])
    local = make_kb(client, "Local", ["local text"], scope="local")
    path = project_dir(live_server) / "project.json"
    inode_before = path.stat().st_ino

    response = client.post(f"/api/knowledge/bases/{sea}/reference")

    assert response.status_code == 200, response.text
    summary = response.json()
    assert (summary["kb_id"], summary["scope"], summary["referenced"]) == (sea, "global", True)
    [ref_id] = summary["reference_ids"]
    assert ref_id not in (sea, "Sea Lore")
    assert references(live_server)[1:] == [
        {"id": ref_id, "type": "global", "path": None, "name": "Sea Lore", "source_id": sea}
    ]
    # Replaced through a temporary file and a rename, never rewritten in place.
    assert path.stat().st_ino != inode_before
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []

    listed = client.get("/api/knowledge/bases").json()["bases"]
    assert [(b["kb_id"], b["referenced"]) for b in listed] == [
        (local, True),
        (sea, True),
        (other, False),
    ]

    outputs = run_static_kb(client, [ref_id])
    assert outputs["count"] == 2
    assert {e["kbId"] for e in outputs["entries"]} == {sea}
    # Empty: every KB the project references, the new global one included, not the others.
    everything = run_static_kb(client, [])
    assert {e["kbId"] for e in everything["entries"]} == {local, sea}


def test_referencing_twice_keeps_one_reference_and_leaves_the_file_alone(
    client: httpx.Client, live_server: Any
) -> None:
    sea = make_kb(client, "Sea", ["salt"])
    first = client.post(f"/api/knowledge/bases/{sea}/reference")
    assert first.status_code == 200, first.text
    path = project_dir(live_server) / "project.json"
    written = path.read_bytes()

    again = client.post(f"/api/knowledge/bases/{sea}/reference")

    assert again.status_code == 200, again.text
    assert again.json()["reference_ids"] == first.json()["reference_ids"]
    assert path.read_bytes() == written
    assert [r["source_id"] for r in references(live_server)] == [sea]


def test_two_globals_with_one_name_get_distinct_reference_ids(client: httpx.Client) -> None:
    one = make_kb(client, "Lore", ["a"])
    two = make_kb(client, "Lore", ["b"])
    ids = [
        client.post(f"/api/knowledge/bases/{k}/reference").json()["reference_ids"]
        for k in (one, two)
    ]
    assert len({i[0] for i in ids}) == 2
    assert run_static_kb(client, ids[1])["entries"][0]["kbId"] == two


def test_an_unknown_kb_is_404_and_a_local_kb_is_409_with_nothing_written(
    client: httpx.Client, live_server: Any
) -> None:
    local = make_kb(client, "Local", ["x"], scope="local")
    path = project_dir(live_server) / "project.json"
    before = path.read_bytes()

    missing = client.post("/api/knowledge/bases/kb_nowhere/reference")
    assert missing.status_code == 404
    assert "kb_nowhere" in missing.json()["error"]["message"]

    conflict = client.post(f"/api/knowledge/bases/{local}/reference")
    assert conflict.status_code == 409
    assert local in conflict.json()["error"]["message"]
    assert "local" in conflict.json()["error"]["message"]
    assert path.read_bytes() == before


def test_a_broken_project_json_is_422_and_stays_as_it_was(
    client: httpx.Client, live_server: Any
) -> None:
    sea = make_kb(client, "Sea", ["salt"])
    path = project_dir(live_server) / "project.json"
    path.write_text('{"knowledgeBaseReferences": "oops"}', encoding="utf-8")

    response = client.post(f"/api/knowledge/bases/{sea}/reference")

    assert response.status_code == 422, response.text
    assert "project.json" in response.json()["error"]["message"]
    assert response.json()["error"]["problems"][0]["field"].startswith("knowledgeBaseReferences")
    assert path.read_text(encoding="utf-8") == '{"knowledgeBaseReferences": "oops"}'
