"""``/api/config`` through the real app: the options of enabled plugins and of their tools,
with values; every value checked before anything is saved; secret values kept encrypted
on the server and never in any answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from storyloom.tools.secret_store import SecretStore
from tests.server.conftest import LiveServer

SECRET = "sk-plugin-secret-4711"

MANIFEST: dict[str, Any] = {
    "name": "weather",
    "version": "1.0.0",
    "tools": {"entry": "tools"},
    "nodes": {"entry": "nodes"},
    "configOptions": [
        {
            "key": "extensions.weather.city",
            "type": "string",
            "label": "City",
            "defaultValue": "Oslo",
        },
        {
            "key": "extensions.weather.days",
            "type": "integer",
            "label": "Days",
            "defaultValue": 3,
            "min": 1,
            "max": 7,
        },
        {"key": "extensions.weather.apiKey", "type": "secret", "label": "API key"},
    ],
}

TOOL = {
    "id": "weather:forecast",
    "displayName": "Forecast",
    "parameters": {"type": "object", "properties": {}},
    "implementation": {"type": "service", "function": "forecast"},
    "configSchema": [
        {"key": "units", "type": "select", "label": "Units", "defaultValue": "metric",
         "options": [{"value": "metric", "label": "°C"}, {"value": "imperial", "label": "°F"}]},
    ],
}  # fmt: skip

NODES = """
from storyloom.core.plugin_markers import hookimpl

@hookimpl
def storyloom_tool_functions(options):
    def forecast(arguments, context):
        key = options.get("apiKey")
        return {"city": options.get("city"), "days": options.get("days"), "keyed": bool(key)}
    return {"forecast": forecast}
"""


@pytest.fixture
def weather(client: httpx.Client, live_server: LiveServer) -> Path:
    root = live_server.home / "projects" / "default" / "plugins" / "weather"
    (root / "tools").mkdir(parents=True)
    (root / "nodes").mkdir()
    (root / "plugin.yaml").write_text(yaml.safe_dump(MANIFEST))
    (root / "tools" / "forecast.tool.json").write_text(json.dumps(TOOL))
    (root / "nodes" / "weather.py").write_text(NODES)
    assert (
        client.post("/api/plugins/weather/enable", json={"acceptRisk": "high"}).status_code == 200
    )
    return root


def _by_key(client: httpx.Client) -> dict[str, dict[str, Any]]:
    response = client.get("/api/config")
    assert response.status_code == 200
    return {option["key"]: option for option in response.json()}


def test_options_of_enabled_plugins_and_their_tools_are_listed_with_defaults(
    client: httpx.Client, weather: Path
) -> None:
    options = _by_key(client)
    assert set(options) == {
        "extensions.weather.city",
        "extensions.weather.days",
        "extensions.weather.apiKey",
        "extensions.weather.units",
    }
    assert options["extensions.weather.city"]["value"] == "Oslo"
    assert (
        options["extensions.weather.days"] | {"value": 3, "min": 1, "max": 7}
        == options["extensions.weather.days"]
    )
    assert options["extensions.weather.apiKey"]["isSet"] is False
    assert options["extensions.weather.apiKey"]["value"] is None
    units = options["extensions.weather.units"]
    assert units["tool"] == "weather:forecast" and units["plugin"] == "weather"
    assert units["value"] == "metric"


def test_a_disabled_plugin_has_no_options_listed(client: httpx.Client, weather: Path) -> None:
    client.post("/api/plugins/weather/disable")
    assert client.get("/api/config").json() == []


def test_saved_values_reach_the_tools_and_the_secret_stays_on_the_server(
    client: httpx.Client, live_server: LiveServer, weather: Path
) -> None:
    values = {"extensions.weather.city": "Bergen", "extensions.weather.days": 5.0,
              "extensions.weather.apiKey": SECRET}  # fmt: skip
    saved = client.put("/api/config", json={"values": values})
    assert saved.status_code == 200, saved.text
    assert SECRET not in saved.text
    options = {o["key"]: o for o in saved.json()}
    assert options["extensions.weather.days"]["value"] == 5
    assert (
        options["extensions.weather.apiKey"] | {"isSet": True, "value": None}
        == options["extensions.weather.apiKey"]
    )
    settings_text = (live_server.home / "settings.json").read_text()
    assert json.loads(settings_text)["extensions"] == {"weather": {"city": "Bergen", "days": 5}}
    assert SECRET not in settings_text
    assert SECRET not in (live_server.home / "secrets.json").read_text()
    for name in ("secrets.json", "secret.key"):
        assert (live_server.home / name).stat().st_mode & 0o777 == 0o600, name
    assert SecretStore(live_server.home).get("extensions.weather.apiKey") == SECRET
    for path in ("/api/config", "/api/plugins", "/api/plugins/installed", "/api/settings"):
        assert SECRET not in client.get(path).text, path
    call = client.post("/api/tools/call", json={"tool": "weather:forecast", "arguments": {}})
    assert call.json()["result"] == {"city": "Bergen", "days": 5, "keyed": True}, call.text
    assert SECRET not in client.get("/api/tools/audit").text


def test_null_clears_a_value_and_a_secret(client: httpx.Client, weather: Path) -> None:
    client.put("/api/config", json={"values": {"extensions.weather.city": "Bergen",
                                               "extensions.weather.apiKey": SECRET}})  # fmt: skip
    cleared = client.put(
        "/api/config",
        json={"values": {"extensions.weather.city": None, "extensions.weather.apiKey": None}},
    )
    assert cleared.status_code == 200
    options = {o["key"]: o for o in cleared.json()}
    assert options["extensions.weather.city"]["value"] == "Oslo"
    assert options["extensions.weather.apiKey"]["isSet"] is False


def test_bad_values_name_each_key_and_nothing_is_saved(
    client: httpx.Client, live_server: LiveServer, weather: Path
) -> None:
    client.put("/api/config", json={"values": {"extensions.weather.city": "Bergen"}})
    before = (live_server.home / "settings.json").read_text()
    response = client.put(
        "/api/config",
        json={
            "values": {
                "extensions.weather.city": "Tromsø",
                "extensions.weather.days": 9,
                "extensions.weather.units": "kelvin",
                "extensions.weather.apiKey": 42,
                "extensions.other.thing": 1,
            }
        },
    )
    assert response.status_code == 422
    problems = {p["field"]: p["reason"] for p in response.json()["error"]["problems"]}
    assert set(problems) == {
        "extensions.weather.days",
        "extensions.weather.units",
        "extensions.weather.apiKey",
        "extensions.other.thing",
    }
    assert "maximum 7" in problems["extensions.weather.days"]
    assert (live_server.home / "settings.json").read_text() == before
    assert _by_key(client)["extensions.weather.apiKey"]["isSet"] is False


def test_a_body_that_is_not_a_values_map_is_422(client: httpx.Client) -> None:
    assert client.put("/api/config", json={"values": [1]}).status_code == 422
    assert client.put("/api/config", json={"city": "x"}).status_code == 422
