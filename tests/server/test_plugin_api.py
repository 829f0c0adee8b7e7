"""``/api/plugins`` and ``/plugins/{name}/...`` through the real app: plugins found on disk
are off and listed with what they declare; enabling one brings its node types, tools and
web assets; a broken one is reported and the others still load; overrides need a grant;
static files are served for enabled plugins only and never from outside their folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import yaml

from storyloom.tools.plugin_scaffold import write_example_plugin
from tests.server.conftest import LiveServer


def _plugins_dir(live: LiveServer) -> Path:
    return live.home / "projects" / "default" / "plugins"


def _plugin(
    live: LiveServer, folder: str, manifest: dict[str, object], files: dict[str, str] | None = None
) -> Path:
    root = _plugins_dir(live) / folder
    root.mkdir(parents=True)
    (root / "plugin.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")
    for relative, text in (files or {}).items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _settings(live: LiveServer) -> dict[str, object]:
    path = live.home / "settings.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _tool_ids(client: httpx.Client) -> set[str]:
    return {tool["id"] for tool in client.get("/api/tools").json()}


def test_a_found_plugin_is_off_and_listed_with_what_it_declares(
    client: httpx.Client, live_server: LiveServer
) -> None:
    write_example_plugin(_plugins_dir(live_server) / "demo", "demo")
    installed = client.get("/api/plugins/installed").json()
    assert installed["problems"] == []
    (demo,) = installed["plugins"]
    assert demo["name"] == "demo" and demo["origin"] == "project"
    assert demo["enabled"] is False
    assert demo["risk"] == "high"
    assert any("Python" in reason for reason in demo["riskReasons"])
    declares = demo["declares"]
    assert declares["nodes"] == ["nodes/demo.py"]
    assert set(declares["tools"]) == {"demo:shout", "demo:greet"}
    assert declares["workflows"] == ["demo_shout"]
    assert declares["ui"]["inject"] == ["layout:header:right"]
    # Off: nothing of it runs, is offered or is served.
    assert client.get("/api/plugins").json() == []
    assert "demo:greet" not in _tool_ids(client)
    assert client.get("/plugins/demo/index.js").status_code == 404


def test_enabling_brings_node_types_tools_and_the_frontend_and_disabling_takes_them_away(
    client: httpx.Client, live_server: LiveServer
) -> None:
    write_example_plugin(_plugins_dir(live_server) / "demo", "demo")
    # Its Python runs inside the server: not on one click, but on accepting that risk.
    refused = client.post("/api/plugins/demo/enable", json={"grantOverrides": False})
    assert refused.status_code == 409
    message = refused.json()["error"]["message"]
    assert "'demo' is high risk: runs Python code inside the server process" in message
    assert 'acceptRisk "high"' in message
    assert client.get("/api/plugins").json() == []
    assert "demo:greet" not in _tool_ids(client)
    medium = client.post("/api/plugins/demo/enable", json={"acceptRisk": "medium"})
    assert medium.status_code == 409
    enabled = client.post(
        "/api/plugins/demo/enable", json={"grantOverrides": False, "acceptRisk": "high"}
    )
    assert enabled.status_code == 200, enabled.text
    assert enabled.json()["enabled"] is True
    assert enabled.json()["declares"]["nodes"] == ["demo:Shout"]
    assert _settings(live_server)["plugins"] == {"enabled": ["demo"], "granted": {}, "network": []}

    (extension,) = client.get("/api/plugins").json()
    assert extension["name"] == "demo"
    assert extension["frontend"] == {"entryUrl": "/plugins/demo/index.js", "styleUrls": []}
    assert extension["configOptions"][0]["key"] == "extensions.demo.greeting"
    script = client.get(extension["frontend"]["entryUrl"])
    assert script.status_code == 200
    assert "registerOutletComponent" in script.text

    node_types = {n["type"] for n in client.get("/api/workflows/node-types").json()}
    assert "demo:Shout" in node_types
    assert {"demo:shout", "demo:greet", "workflow:demo_shout"} <= _tool_ids(client)
    greet = client.post(
        "/api/tools/call", json={"tool": "demo:greet", "arguments": {"name": "Ann"}}
    )
    assert greet.json()["result"] == "Hello, Ann", greet.text
    shout = client.post("/api/tools/call", json={"tool": "demo:shout", "arguments": {"text": "hi"}})
    assert shout.json()["ok"] is True, shout.text

    disabled = client.post("/api/plugins/demo/disable")
    assert disabled.status_code == 200
    assert disabled.json()["enabled"] is False
    assert client.get("/api/plugins").json() == []
    assert "demo:greet" not in _tool_ids(client)
    node_types = {n["type"] for n in client.get("/api/workflows/node-types").json()}
    assert "demo:Shout" not in node_types
    assert client.get("/plugins/demo/index.js").status_code == 404


def test_a_broken_plugin_is_reported_and_the_others_still_load(
    client: httpx.Client, live_server: LiveServer
) -> None:
    write_example_plugin(_plugins_dir(live_server) / "demo", "demo")
    _plugin(live_server, "broken", {"name": "Not Kebab", "version": "1"})
    installed = client.get("/api/plugins/installed").json()
    assert [p["name"] for p in installed["plugins"]] == ["demo"]
    (problem,) = installed["problems"]
    assert problem["folder"].endswith("broken")
    assert problem["file"].endswith("plugin.yaml")
    assert problem["field"] == "name"
    assert "kebab-case" in problem["reason"]
    assert client.post("/api/plugins/demo/enable", json={"acceptRisk": "high"}).status_code == 200
    assert client.post("/api/plugins/broken/enable", json={}).status_code == 404


def test_a_plugin_whose_code_fails_to_import_is_enabled_with_its_problem_listed(
    client: httpx.Client, live_server: LiveServer
) -> None:
    _plugin(
        live_server,
        "crashy",
        {"name": "crashy", "version": "1", "nodes": {"entry": "nodes"}},
        {"nodes/crashy.py": "raise RuntimeError('boom at import')\n"},
    )
    write_example_plugin(_plugins_dir(live_server) / "demo", "demo")
    assert client.post("/api/plugins/crashy/enable", json={"acceptRisk": "high"}).status_code == 200
    assert client.post("/api/plugins/demo/enable", json={"acceptRisk": "high"}).status_code == 200
    installed = client.get("/api/plugins/installed").json()
    reasons = [p["reason"] for p in installed["problems"] if p["folder"].endswith("crashy")]
    assert any("boom at import" in reason for reason in reasons)
    assert "demo:greet" in _tool_ids(client)


def test_a_bad_tool_file_and_a_tool_id_taken_twice_are_problems_of_their_plugin(
    client: httpx.Client, live_server: LiveServer
) -> None:
    taken = {
        "id": "system:get_current_time",
        "parameters": {"type": "object"},
        "implementation": {"type": "service", "function": "now"},
    }
    bad = {"id": "tooly:bad", "parameters": {"type": "array"}, "implementation": {"type": "x"}}
    good = {"id": "tooly:ok", "implementation": {"type": "node", "node": "core:TextInput"}}
    _plugin(
        live_server,
        "tooly",
        {"name": "tooly", "version": "1"},
        {
            "tools/taken.tool.json": json.dumps(taken),
            "tools/bad.tool.json": json.dumps(bad),
            "tools/ok.tool.json": json.dumps(good),
        },
    )
    assert client.post("/api/plugins/tooly/enable", json={"acceptRisk": "high"}).status_code == 200
    problems = [
        p for p in client.get("/api/plugins/installed").json()["problems"]
        if p["folder"].endswith("tooly")
    ]  # fmt: skip
    files = {Path(p["file"]).name: p["reason"] for p in problems}
    assert "bad.tool.json" in files
    assert "declared twice" in files["taken.tool.json"]
    tools = _tool_ids(client)
    assert "tooly:ok" in tools and "tooly:bad" not in tools


def test_declared_overrides_need_a_grant_before_the_plugin_is_enabled(
    client: httpx.Client, live_server: LiveServer
) -> None:
    _plugin(
        live_server,
        "skin",
        {
            "name": "skin",
            "version": "1",
            "permissions": {"ui": {"override": ["ui:ChatMessage"]}},
        },
    )
    refused = client.post("/api/plugins/skin/enable", json={"grantOverrides": False})
    assert refused.status_code == 409
    message = refused.json()["error"]["message"]
    assert "ui:ChatMessage" in message and "grantOverrides" in message
    assert "plugins" not in _settings(live_server) or _settings(live_server)["plugins"] == {
        "enabled": [],
        "granted": {},
        "network": [],
    }
    granted = client.post(
        "/api/plugins/skin/enable", json={"grantOverrides": True, "acceptRisk": "high"}
    )
    assert granted.status_code == 200, granted.text
    assert granted.json()["granted"] == ["ui:ChatMessage"]
    (extension,) = client.get("/api/plugins").json()
    assert extension["overrides"] == ["ui:ChatMessage"]
    assert extension["wraps"] == []
    # Disabling withdraws the grant: enabling again asks again.
    client.post("/api/plugins/skin/disable")
    assert client.post("/api/plugins/skin/enable").status_code == 409


def test_a_plugin_that_replaces_a_core_service_is_refused_naming_file_field_and_reason(
    client: httpx.Client, live_server: LiveServer
) -> None:
    _plugin(
        live_server,
        "runner",
        {
            "name": "runner",
            "version": "1",
            "permissions": {"services": {"override": ["workflowManager"]}},
        },
    )
    installed = client.get("/api/plugins/installed").json()
    assert installed["plugins"] == []
    (problem,) = installed["problems"]
    assert problem["file"].endswith("runner/plugin.yaml")
    assert problem["field"] == "permissions.services.override"
    assert "'workflowManager'" in problem["reason"]
    assert "no replaceable core services" in problem["reason"]
    # Nothing to grant: enabling it, even granting everything, finds no such plugin.
    refused = client.post(
        "/api/plugins/runner/enable", json={"grantOverrides": True, "acceptRisk": "high"}
    )
    assert refused.status_code == 404
    assert client.get("/api/plugins").json() == []


def test_a_vite_dev_entry_is_reported_and_the_plugin_serves_its_build(
    client: httpx.Client, live_server: LiveServer
) -> None:
    _plugin(
        live_server,
        "viewy",
        {
            "name": "viewy",
            "version": "1",
            "frontend": {
                "dev": {"entry": "web/index.ts"},
                "build": {"entry": "dist/index.js"},
            },
        },
        {"dist/index.js": "export default {}\n"},
    )
    installed = client.get("/api/plugins/installed").json()
    (problem,) = installed["problems"]
    assert problem["file"].endswith("viewy/plugin.yaml")
    assert problem["field"] == "frontend.dev.entry"
    assert "does not run or proxy a Vite dev server" in problem["reason"]
    assert (
        client.post("/api/plugins/viewy/enable", json={"acceptRisk": "medium"}).status_code == 200
    )
    (extension,) = client.get("/api/plugins").json()
    assert extension["frontend"]["entryUrl"] == "/plugins/viewy/dist/index.js"
    assert client.get(extension["frontend"]["entryUrl"]).status_code == 200


def test_a_declared_wrap_is_granted_as_declared_and_the_web_app_is_told(
    client: httpx.Client, live_server: LiveServer
) -> None:
    # Before: wraps were never granted (only overrides were), so a plugin declaring
    # permissions.ui.wrap enabled without a question and the web app refused its wrap.
    _plugin(
        live_server,
        "frame",
        {
            "name": "frame",
            "version": "1",
            "permissions": {
                "ui": {"wrap": ["ui:BaseNode", "ui:SettingsPanel"]},
                "hooks": ["hook:client:auth:login"],
            },
        },
    )
    refused = client.post("/api/plugins/frame/enable")
    assert refused.status_code == 409
    message = refused.json()["error"]["message"]
    assert "wrap:ui:BaseNode" in message and "wrap:ui:SettingsPanel" in message
    granted = client.post("/api/plugins/frame/enable", json={"grantOverrides": True})
    assert granted.status_code == 200, granted.text
    assert granted.json()["granted"] == ["wrap:ui:BaseNode", "wrap:ui:SettingsPanel"]
    (extension,) = client.get("/api/plugins").json()
    assert extension["wraps"] == ["ui:BaseNode", "ui:SettingsPanel"]
    assert extension["overrides"] == []
    assert extension["hooks"] == ["hook:client:auth:login"]


def test_enabling_an_unknown_plugin_is_404(client: httpx.Client) -> None:
    response = client.post("/api/plugins/nobody/enable", json={"grantOverrides": False})
    assert response.status_code == 404
    assert "nobody" in response.json()["error"]["message"]


def test_static_files_never_come_from_outside_the_plugins_web_folder(
    client: httpx.Client, live_server: LiveServer, tmp_path: Path
) -> None:
    root = write_example_plugin(_plugins_dir(live_server) / "demo", "demo")[0].parent
    secret = tmp_path / "outside.txt"
    secret.write_text("not for the browser")
    os.symlink(secret, root / "web" / "leak.txt")
    client.post("/api/plugins/demo/enable", json={"acceptRisk": "high"})
    assert client.get("/plugins/demo/index.js").status_code == 200
    for path in (
        "/plugins/demo/..%2Fplugin.yaml",
        "/plugins/demo/%2e%2e/plugin.yaml",
        "/plugins/demo/..%2F..%2F..%2F..%2Fsettings.json",
        "/plugins/demo/leak.txt",
        "/plugins/demo/",
        "/plugins/demo/missing.js",
        "/plugins/nobody/index.js",
    ):
        response = client.get(path)
        assert response.status_code == 404, path
        assert "not for the browser" not in response.text
        assert "name: demo" not in response.text
