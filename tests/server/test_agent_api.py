"""``/api/agents``: agent profiles of the project, created, read, replaced and deleted over
HTTP through the real app; bad input is a 404/409/422 that changes nothing on disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from tests.server.conftest import LiveServer


def _profile(agent_id: str = "scribe", **fields: Any) -> dict[str, Any]:
    return {
        "id": agent_id,
        "name": "Scribe",
        "tool_ids_inventory": ["system:get_current_time", "chat:RollDice"],
        "prompt": "You keep notes.\n{{{system:available_tools}}}",
        "max_steps": 4,
        "policy": {"rules": [{"tool": "kb:*", "action": "ask"}], "default": "allow"},
        **fields,
    }


def _agents_dir(live: LiveServer) -> Path:
    return live.home / "projects" / "default" / "agents"


def test_a_created_profile_is_stored_in_the_project_and_read_back(
    client: httpx.Client, live_server: LiveServer
) -> None:
    created = client.post("/api/agents", json=_profile())
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["tool_ids_inventory"] == ["system:get_current_time", "chat:RollDice"]
    assert body["protocol"] == "auto" and body["call_timeout_s"] == 30
    on_disk = json.loads((_agents_dir(live_server) / "scribe.json").read_text())
    assert on_disk["max_steps"] == 4
    assert client.get("/api/agents/scribe").json() == body
    assert [p["id"] for p in client.get("/api/agents").json()] == ["scribe"]


def test_creating_an_id_that_exists_is_a_conflict_and_keeps_the_first(
    client: httpx.Client, live_server: LiveServer
) -> None:
    client.post("/api/agents", json=_profile())
    again = client.post("/api/agents", json=_profile(name="Other"))
    assert again.status_code == 409
    assert "scribe" in again.json()["error"]["message"]
    assert client.get("/api/agents/scribe").json()["name"] == "Scribe"


def test_put_replaces_an_existing_profile(client: httpx.Client) -> None:
    client.post("/api/agents", json=_profile())
    saved = client.put("/api/agents/scribe", json=_profile(name="Archivist", protocol="tam"))
    assert saved.status_code == 200, saved.text
    assert client.get("/api/agents/scribe").json()["protocol"] == "tam"


def test_put_of_a_missing_profile_is_404_and_writes_nothing(
    client: httpx.Client, live_server: LiveServer
) -> None:
    response = client.put("/api/agents/ghost", json=_profile("ghost"))
    assert response.status_code == 404
    assert not (_agents_dir(live_server) / "ghost.json").exists()


def test_put_whose_body_names_another_id_is_refused(client: httpx.Client) -> None:
    client.post("/api/agents", json=_profile())
    response = client.put("/api/agents/scribe", json=_profile("other"))
    assert response.status_code == 422
    assert response.json()["error"]["problems"][0]["field"] == "id"


def test_an_invalid_profile_names_each_field_and_writes_nothing(
    client: httpx.Client, live_server: LiveServer
) -> None:
    client.post("/api/agents", json=_profile())
    before = (_agents_dir(live_server) / "scribe.json").read_text()
    bad = _profile(max_steps=0, protocol="telepathy", policy={"rules": [], "default": "maybe"})
    response = client.put("/api/agents/scribe", json=bad)
    assert response.status_code == 422
    fields = {p["field"] for p in response.json()["error"]["problems"]}
    assert {"max_steps", "protocol", "policy.default"} <= fields
    assert (_agents_dir(live_server) / "scribe.json").read_text() == before
    created = client.post("/api/agents", json=_profile("fresh", unknown_field=1))
    assert created.status_code == 422
    assert not (_agents_dir(live_server) / "fresh.json").exists()


def test_an_id_that_cannot_name_a_file_is_refused(client: httpx.Client) -> None:
    assert client.post("/api/agents", json=_profile("../escape")).status_code == 422
    assert client.get("/api/agents/has.dot").status_code == 422


def test_delete_removes_the_file_and_a_second_delete_is_404(
    client: httpx.Client, live_server: LiveServer
) -> None:
    client.post("/api/agents", json=_profile())
    assert client.delete("/api/agents/scribe").status_code == 204
    assert not (_agents_dir(live_server) / "scribe.json").exists()
    assert client.get("/api/agents/scribe").status_code == 404
    assert client.delete("/api/agents/scribe").status_code == 404
