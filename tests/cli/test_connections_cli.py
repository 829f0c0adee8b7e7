"""``storyloom connections ...`` in a real process: SillyTavern's connection profiles
become connections in settings.json (no keys, unknown APIs reported), and a file without
profiles fails naming it."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from tests.cli.cli_support import storyloom

REPO = Path(__file__).resolve().parents[2]
"""Run from here: ``python -m storyloom`` then imports this checkout's code."""

ST_SETTINGS = {
    "extension_settings": {
        "connectionManager": {
            "profiles": [
                {
                    "id": "1",
                    "mode": "tc",
                    "api": "llamacpp",
                    "api-url": "http://127.0.0.1:8080",
                    "instruct": "Llama 3 Instruct",
                    "context": "Llama 3 Instruct",
                    "name": "Local llama",
                },
                {"id": "2", "mode": "cc", "api": "makersuite", "name": "Gemini"},
            ]
        }
    }
}


def test_import_sillytavern_profiles_then_list_them(tmp_path: Path) -> None:
    home = tmp_path / "home"
    source = tmp_path / "settings.json"
    source.write_text(json.dumps(ST_SETTINGS))

    done = storyloom("connections", "import-sillytavern", str(source), home=home, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert "imported 'Local llama': llamacpp http://127.0.0.1:8080" in done.stdout
    assert "not imported 'Gemini'" in done.stdout
    assert "secrets.json" in done.stdout
    settings_file = home / "settings.json"
    saved = json.loads(settings_file.read_text())["connections"]
    assert list(saved) == ["Local llama"]
    assert saved["Local llama"]["instruct_template"] == "Llama 3 Instruct"
    assert saved["Local llama"]["api_key"] is None
    assert stat.S_IMODE(os.stat(settings_file).st_mode) == 0o600

    listed = storyloom("connections", "list", "--json", home=home, cwd=REPO)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["Local llama"]["api"] == "llamacpp"


def test_a_file_without_profiles_fails_naming_it(tmp_path: Path) -> None:
    source = tmp_path / "st-settings.json"
    source.write_text('{"main_api": "kobold"}')
    home = tmp_path / "home"
    failed = storyloom("connections", "import-sillytavern", str(source), home=home, cwd=REPO)
    assert failed.returncode == 1
    assert "st-settings.json" in failed.stderr and "no connection profiles" in failed.stderr
