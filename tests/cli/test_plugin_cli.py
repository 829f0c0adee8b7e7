"""``storyloom plugin ...`` end to end in a real process: new writes a plugin that
validates, list shows it off and its risk, enable turns it on, validate lists every
problem of a broken plugin with file, field and reason and exits 1."""

from __future__ import annotations

import json
from pathlib import Path

from storyloom.project.project_file import init_project
from tests.cli.cli_support import storyloom


def test_new_validate_list_and_enable(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    init_project(project)

    made = storyloom("plugin", "new", "my-plugin", home=home, cwd=project)
    assert made.returncode == 0, made.stderr
    folder = project / "plugins" / "my-plugin"
    assert (folder / "plugin.yaml").is_file()

    checked = storyloom("plugin", "validate", str(folder), home=home, cwd=project)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.startswith(
        "ok: my-plugin 0.1.0: 1 node type(s), 2 tool(s), 1 workflow(s)"
    )

    listed = storyloom("plugin", "list", "--json", home=home, cwd=project)
    assert listed.returncode == 0, listed.stderr
    [row] = json.loads(listed.stdout)["plugins"]
    assert (row["name"], row["origin"], row["enabled"], row["risk"]) == (
        "my-plugin",
        "project",
        False,
        "high",
    )

    # Python inside storyloom: not without accepting that risk by name.
    refused = storyloom("plugin", "enable", "my-plugin", home=home, cwd=project)
    assert refused.returncode == 1
    assert "is high risk: runs Python code inside the server process" in refused.stderr
    assert "--accept-risk high" in refused.stderr
    listed = storyloom("plugin", "list", "--json", home=home, cwd=project)
    assert json.loads(listed.stdout)["plugins"][0]["enabled"] is False
    on = storyloom("plugin", "enable", "my-plugin", "--accept-risk", "high", home=home, cwd=project)
    assert on.returncode == 0, on.stderr
    text = storyloom("plugin", "list", home=home, cwd=project).stdout
    assert "my-plugin 0.1.0  [project, enabled, risk high]" in text

    again = storyloom("plugin", "new", "my-plugin", home=home, cwd=project)
    assert again.returncode == 1 and "not an empty folder" in again.stderr


def test_validate_lists_each_problem_with_file_field_and_reason(tmp_path: Path) -> None:
    home = tmp_path / "home"
    folder = tmp_path / "broken"
    assert (
        storyloom(
            "plugin", "new", "broken", "--dir", str(folder), home=home, cwd=tmp_path
        ).returncode
        == 0
    )
    greet = folder / "tools" / "greet.tool.json"
    greet.write_text(greet.read_text().replace('"greet"', '"gone"'))
    (folder / "tools" / "bad.tool.json").write_text(
        '{"id": "broken:bad", "implementation": {"type": "nope"}}'
    )
    flow = folder / "workflows" / "broken_shout.json"
    flow.write_text(flow.read_text().replace('"broken:Shout"', '"broken:Missing"'))

    result = storyloom("plugin", "validate", str(folder), "--json", home=home, cwd=tmp_path)

    assert result.returncode == 1
    problems = {(Path(p["file"]).name, p["field"]) for p in json.loads(result.stdout)["problems"]}
    assert ("greet.tool.json", "implementation.function") in problems
    assert ("bad.tool.json", "implementation") in problems
    assert any(
        name == "broken_shout.json" and field.startswith("shout") for name, field in problems
    )

    plain = storyloom("plugin", "validate", str(folder), home=home, cwd=tmp_path)
    assert plain.returncode == 1
    assert f"{greet}: implementation.function:" in plain.stderr


def test_list_reports_plugins_that_did_not_load(tmp_path: Path) -> None:
    home = tmp_path / "home"
    bad = home / "plugins" / "bad"
    bad.mkdir(parents=True)
    (bad / "plugin.yaml").write_text("name: Bad Name\nversion: '1'\n")
    result = storyloom("plugin", "list", home=home, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Not loaded:" in result.stdout
    assert f"{bad / 'plugin.yaml'}: name: must be kebab-case" in result.stdout


def test_validate_refuses_a_service_override_and_a_vite_dev_entry_naming_each(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    folder = tmp_path / "seedish"
    folder.mkdir()
    (folder / "dist").mkdir()
    (folder / "dist" / "index.js").write_text("export default {}\n")
    manifest = folder / "plugin.yaml"
    manifest.write_text(
        "name: seedish\nversion: '1'\n"
        "frontend:\n  dev:\n    entry: web/index.ts\n  build:\n    entry: dist/index.js\n"
    )
    dev = storyloom("plugin", "validate", str(folder), home=home, cwd=tmp_path)
    assert dev.returncode == 1
    assert f"{manifest}: frontend.dev.entry: storyloom does not run or proxy a Vite" in dev.stderr

    manifest.write_text(
        "name: seedish\nversion: '1'\npermissions:\n  services:\n    override: [workflowManager]\n"
    )
    service = storyloom("plugin", "validate", str(folder), home=home, cwd=tmp_path)
    assert service.returncode == 1
    assert (
        f"{manifest}: permissions.services.override: 'workflowManager': storyloom has no "
        "replaceable core services" in service.stderr
    )


def test_enable_grants_a_declared_wrap_only_with_grant_overrides(tmp_path: Path) -> None:
    # Before: the CLI granted overrides only, so a declared wrap was never granted.
    home, project = tmp_path / "home", tmp_path / "project"
    init_project(project)
    folder = project / "plugins" / "frame"
    folder.mkdir(parents=True)
    (folder / "plugin.yaml").write_text(
        "name: frame\nversion: '1'\npermissions:\n  ui:\n    wrap: ['ui:BaseNode']\n",
        encoding="utf-8",
    )
    plain = storyloom("plugin", "enable", "frame", home=home, cwd=project)
    assert plain.returncode == 0, plain.stderr
    assert "wraps and overrides refused (pass --grant-overrides to allow): wrap:ui:BaseNode" in (
        plain.stdout
    )
    settings = json.loads((home / "settings.json").read_text(encoding="utf-8"))
    assert settings["plugins"]["granted"] == {}

    granted = storyloom("plugin", "enable", "frame", "--grant-overrides", home=home, cwd=project)
    assert granted.returncode == 0, granted.stderr
    settings = json.loads((home / "settings.json").read_text(encoding="utf-8"))
    assert settings["plugins"]["granted"] == {"frame": ["wrap:ui:BaseNode"]}
