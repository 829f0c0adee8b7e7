"""/api/knowledge/import over real HTTP for Character Card V3 files: a ``lorebook_v3`` book
and a V3 PNG card with decorators and an asset chunk."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sillytavern"
ISLES = FIXTURES / "lorebook_v3_drifting_isles.json"
ISA_PNG = FIXTURES / "card_isa_v3_decorators_assets.png"


def upload(client: httpx.Client, path: Path) -> httpx.Response:
    return client.post("/api/knowledge/import", files={"file": (path.name, path.read_bytes())})


def test_a_lorebook_v3_upload_becomes_a_kb_with_its_decorators_as_settings(
    client: httpx.Client,
) -> None:
    response = upload(client, ISLES)
    assert response.status_code == 201, response.text
    report = response.json()
    assert report["kind"] == "world_info"
    (created,) = report["created"]
    assert (created["displayName"], created["entry_count"]) == ("Drifting Isles", 6)
    assert any("@@sparkle (unknown decorator) ignored" in w for w in report["warnings"])
    kb = client.get(f"/api/knowledge/bases/{created['kb_id']}").json()["knowledge_base"]
    assert kb["token_budget"] == 400
    isle, _, sky, ledger, _, _ = kb["entries"]
    assert isle["usage_metadata"]["placement"] == "at_depth"
    assert isle["usage_metadata"]["role"] == "assistant"
    assert sky["activation_criteria"]["constant"] is True
    assert ledger["activation_criteria"]["never_activate"] is True
    assert all("@@" not in entry["content"]["value"] for entry in kb["entries"])


def test_a_v3_png_upload_keeps_its_asset_chunks_beside_the_character(
    client: httpx.Client,
) -> None:
    response = upload(client, ISA_PNG)
    assert response.status_code == 201, response.text
    report = response.json()
    assert report["character"] == "Isadora Vane"
    preset = Path(report["character_file"])
    data = json.loads(preset.read_text(encoding="utf-8"))
    assert data["nickname"] == "Isa"
    assert (preset.with_suffix(".assets") / "__asset" / "0").read_bytes()[:4] == b"\x89PNG"
