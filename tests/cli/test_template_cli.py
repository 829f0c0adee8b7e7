"""``storyloom template ...`` end to end: a real process on a real data directory."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.cli_support import storyloom

# SillyTavern's instruct/Mistral.json as older releases shipped it (names,
# separator_sequence, system_sequence_prefix): it imports as it is.
ST_MISTRAL = {
    "name": "Mistral (old)",
    "system_prompt": "Write {{char}}'s next reply.",
    "input_sequence": "[INST] ",
    "output_sequence": "",
    "last_output_sequence": "",
    "system_sequence_prefix": "",
    "system_sequence_suffix": "",
    "stop_sequence": "",
    "separator_sequence": "</s>",
    "wrap": False,
    "macro": True,
    "names": False,
    "names_force_groups": True,
    "activation_regex": "",
}


def test_a_sillytavern_instruct_file_imports_lists_shows_and_deletes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    source = tmp_path / "Mistral.json"
    source.write_text(json.dumps(ST_MISTRAL))
    done = storyloom("template", "import", str(source), home=home)
    assert done.returncode == 0, done.stderr
    assert "imported the instruct template 'Mistral (old)'" in done.stdout
    assert json.loads((home / "instruct" / "Mistral (old).json").read_text()) == ST_MISTRAL

    listed = storyloom("template", "list", "--json", home=home)
    entries = json.loads(listed.stdout)["instruct"]
    assert {"name": "Mistral (old)", "builtin": False} in entries
    assert {"name": "ChatML", "builtin": True} in entries

    shown = json.loads(storyloom("template", "show", "instruct", "Mistral (old)", home=home).stdout)
    assert shown["output_suffix"] == "</s>" and shown["names_behavior"] == "force"

    gone = storyloom("template", "delete", "instruct", "Mistral (old)", home=home)
    assert gone.returncode == 0, gone.stderr
    assert not (home / "instruct" / "Mistral (old).json").exists()
    builtin = storyloom("template", "delete", "instruct", "ChatML", home=home)
    assert builtin.returncode == 1 and "built in" in builtin.stderr


def test_a_bad_file_is_named_with_its_field_and_nothing_is_written(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "Bad", "input_sequence": "x", "wrap": "sometimes"}))
    done = storyloom("template", "import", str(bad), home=home)
    assert done.returncode == 1
    assert f"{bad}:" in done.stderr and "wrap:" in done.stderr
    assert not (home / "instruct").exists()
