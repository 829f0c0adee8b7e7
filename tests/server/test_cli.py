import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from storyloom import __version__
from storyloom.testing.replay_server import ReplayLLMServer

REPO = Path(__file__).resolve().parents[2]


def storyloom(*args: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home or REPO)}
    if home:
        env["STORYLOOM_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "storyloom", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=REPO,
    )


def test_every_command_has_help() -> None:
    top = storyloom("--help")
    assert top.returncode == 0
    for command in ("serve", "version", "doctor", "openapi", "schema"):
        assert command in top.stdout
        sub = storyloom(command, "--help")
        assert sub.returncode == 0, sub.stderr
        assert "Usage" in sub.stdout


def test_version_prints_the_package_version() -> None:
    assert storyloom("version").stdout.strip() == __version__


def test_serve_on_a_busy_port_is_one_clear_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = storyloom("serve", "--port", str(port), "--home", str(tmp_path))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines == [
        f"storyloom: port {port} on 127.0.0.1 is already in use; stop what uses it or pass --port"
    ]


def test_doctor_checks_everything_and_says_how_to_fix(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text(
        json.dumps({"user_llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}})
    )
    result = storyloom("doctor", home=tmp_path)
    out = result.stdout
    assert result.returncode == 1
    assert "[ok  ] data directory" in out
    assert "sqlite-vec v" in out
    assert "[ok  ] embedding" in out
    assert "[FAIL] user_llm" in out and "127.0.0.1:9" in out
    assert "fix: start the model server" in out
    assert "[warn] agent_llm: not configured" in out
    assert "[ok  ] sandbox: bubblewrap " in out


def test_doctor_says_the_demo_model_answers_when_nothing_is_set_up(tmp_path: Path) -> None:
    out = storyloom("doctor", home=tmp_path).stdout
    for role in ("user_llm", "agent_llm"):
        assert f"[warn] {role}: no model set up: `storyloom serve` answers with the " in out
    assert "fix: connect a real model in Settings" in out


def test_doctor_names_a_local_model_file_that_cannot_run(tmp_path: Path) -> None:
    missing = tmp_path / "gone.gguf"
    settings = {"user_llm": {"local_model": {"path": str(missing)}}}
    (tmp_path / "settings.json").write_text(json.dumps(settings))
    out = storyloom("doctor", home=tmp_path).stdout
    assert f"[FAIL] user_llm: local model {missing}: no such file" in out


def test_doctor_passes_with_a_reachable_endpoint(tmp_path: Path) -> None:
    with ReplayLLMServer(models=["m"]) as llm:
        endpoint = {"base_url": llm.url, "model": "m"}
        (tmp_path / "settings.json").write_text(
            json.dumps({"user_llm": endpoint, "agent_llm": endpoint})
        )
        result = storyloom("doctor", "--home", str(tmp_path))
    assert result.returncode == 0, result.stdout
    assert "[ok  ] user_llm" in result.stdout


def test_committed_openapi_matches_the_models() -> None:
    """The web app's types are generated from this file; it must follow the pydantic models."""
    result = storyloom("openapi")
    committed = (REPO / "web" / "src" / "api" / "openapi.json").read_text()
    assert json.loads(committed) == json.loads(result.stdout), (
        "web/src/api/openapi.json is stale: run "
        "`.venv/bin/storyloom openapi web/src/api/openapi.json`"
    )


@pytest.mark.parametrize("name", ["settings", "knowledge-base", "project", "workflow"])
def test_reference_docs_match_the_models(name: str) -> None:
    result = storyloom("schema", name, "--markdown")
    committed = (REPO / "docs" / "reference" / f"{name}.md").read_text()
    assert committed == result.stdout, (
        f"docs/reference/{name}.md is stale: run "
        f"`.venv/bin/storyloom schema {name} --markdown > docs/reference/{name}.md`"
    )


def test_schema_prints_json_schema_and_refuses_unknown_formats() -> None:
    settings_schema = json.loads(storyloom("schema", "settings").stdout)
    assert settings_schema["title"] == "Settings"
    assert "user_llm" in settings_schema["properties"]
    unknown = storyloom("schema", "nope")
    assert unknown.returncode == 1
    assert "known: knowledge-base, project, settings" in unknown.stderr
