"""``/api/scripts`` through the real app: project scripts are saved (atomically), listed,
read and deleted; names that could leave the folder or lack a language are refused; an
enabled plugin's scripts are listed and read as ``<plugin>:<file>`` and refused as
read-only; a disabled plugin's are not there."""

from __future__ import annotations

from pathlib import Path

import httpx
import yaml

from tests.server.conftest import LiveServer


def _project(live: LiveServer) -> Path:
    return live.home / "projects" / "default"


def _plugin_with_scripts(live: LiveServer, name: str, scripts: dict[str, str]) -> Path:
    root = _project(live) / "plugins" / name
    (root / "scripts").mkdir(parents=True)
    (root / "plugin.yaml").write_text(
        yaml.safe_dump({"name": name, "version": "1.0.0"}), encoding="utf-8"
    )
    for file, code in scripts.items():
        (root / "scripts" / file).write_text(code, encoding="utf-8")
    return root


def test_a_project_script_is_saved_listed_read_and_deleted(
    client: httpx.Client, live_server: LiveServer
) -> None:
    assert client.get("/api/scripts").json() == []
    saved = client.put("/api/scripts/mood.lua", json={"code": "ctx.variables.mood = 'ok'\n"})
    assert saved.status_code == 200, saved.text
    assert saved.json() == {
        "name": "mood.lua",
        "language": "lua",
        "code": "ctx.variables.mood = 'ok'\n",
        "read_only": False,
    }
    assert (_project(live_server) / "scripts" / "mood.lua").read_text() == (
        "ctx.variables.mood = 'ok'\n"
    )
    client.put("/api/scripts/a-rule.js", json={"code": "ctx.blocks.pop();"})
    assert client.get("/api/scripts").json() == [
        {"name": "a-rule.js", "language": "javascript", "size": 17, "plugin": None},
        {"name": "mood.lua", "language": "lua", "size": 26, "plugin": None},
    ]
    replaced = client.put("/api/scripts/a-rule.js", json={"code": "// nothing"})
    assert replaced.json()["code"] == "// nothing"
    assert client.get("/api/scripts/a-rule.js").json()["code"] == "// nothing"
    leftovers = [p.name for p in (_project(live_server) / "scripts").iterdir()]
    assert sorted(leftovers) == ["a-rule.js", "mood.lua"]  # no temporary file left

    assert client.delete("/api/scripts/mood.lua").status_code == 204
    assert [s["name"] for s in client.get("/api/scripts").json()] == ["a-rule.js"]
    missing = client.get("/api/scripts/mood.lua")
    assert missing.status_code == 404 and "mood.lua" in missing.json()["error"]["message"]
    assert client.delete("/api/scripts/mood.lua").status_code == 404


def test_names_outside_the_rule_are_refused_and_nothing_is_written(
    client: httpx.Client, live_server: LiveServer
) -> None:
    for name in (".hidden.lua", "notes.txt", "script.py", "a%20b.lua", "x.lua.bak", "p:q:r.js"):
        answer = client.put(f"/api/scripts/{name}", json={"code": "x"})
        assert answer.status_code == 422, (name, answer.status_code)
        assert "script name" in answer.json()["error"]["message"]
    # A slash never reaches the route: the name cannot hold a folder.
    assert client.put("/api/scripts/..%2Fx.lua", json={"code": "x"}).status_code != 200
    assert not (_project(live_server) / "scripts").exists() or not any(
        (_project(live_server) / "scripts").iterdir()
    )
    assert not (_project(live_server) / "x.lua").exists()
    bad_body = client.put("/api/scripts/a.lua", json={"code": 3})
    assert bad_body.status_code == 422


def test_an_enabled_plugins_scripts_are_listed_and_read_only(
    client: httpx.Client, live_server: LiveServer
) -> None:
    _plugin_with_scripts(
        live_server, "moods", {"cheer.js": "ctx.variables.cheer = 1;", "notes.md": "no"}
    )
    client.put("/api/scripts/own.lua", json={"code": "-- mine"})
    # Off until enabled: its scripts are not offered.
    assert [s["name"] for s in client.get("/api/scripts").json()] == ["own.lua"]
    assert client.get("/api/scripts/moods:cheer.js").status_code == 404

    assert client.post("/api/plugins/moods/enable", json={}).status_code == 200
    listed = client.get("/api/scripts").json()
    assert listed == [
        {"name": "own.lua", "language": "lua", "size": 7, "plugin": None},
        {"name": "moods:cheer.js", "language": "javascript", "size": 24, "plugin": "moods"},
    ]
    read = client.get("/api/scripts/moods:cheer.js").json()
    assert read == {
        "name": "moods:cheer.js",
        "language": "javascript",
        "code": "ctx.variables.cheer = 1;",
        "read_only": True,
    }
    refused = client.put("/api/scripts/moods:cheer.js", json={"code": "x"})
    assert refused.status_code == 409 and "read-only" in refused.json()["error"]["message"]
    assert client.delete("/api/scripts/moods:cheer.js").status_code == 409
    plugin_file = _project(live_server) / "plugins" / "moods" / "scripts" / "cheer.js"
    assert plugin_file.read_text() == "ctx.variables.cheer = 1;"
