"""Finding plugins: a broken one is reported with its place and skipped, the others
load; a bad web part costs only the web part; risk says why."""

from __future__ import annotations

from pathlib import Path

from storyloom.core.settings import Settings
from storyloom.tools.plugin_loader import discover_plugins
from tests.tools.plugin_support import enabled, node_module, write_plugin


def test_a_broken_plugin_is_reported_and_the_others_load(tmp_path: Path) -> None:
    plugins = tmp_path / "project" / "plugins"
    write_plugin(plugins, "good")
    bad = write_plugin(plugins, "bad", {"permissions": {"hooks": ["hook:server:nope:x"]}})
    write_plugin(plugins, "unparsable", "name: [\n")
    (plugins / "empty").mkdir()

    found, problems = discover_plugins(tmp_path / "project", tmp_path / "home", Settings())

    assert [p.name for p in found] == ["good"]
    by_folder = {Path(p.folder).name: p for p in problems}
    assert set(by_folder) == {"bad", "unparsable", "empty"}
    assert by_folder["bad"].file == str(bad / "plugin.yaml")
    assert by_folder["bad"].field == "permissions.hooks[0]"
    assert "not a server hook" in by_folder["bad"].reason
    assert "not valid YAML" in by_folder["unparsable"].reason
    assert "no plugin.yaml" in by_folder["empty"].reason


def test_a_frontend_without_build_or_vanilla_costs_only_the_web_part(tmp_path: Path) -> None:
    plugins = tmp_path / "project" / "plugins"
    write_plugin(
        plugins,
        "half",
        {"frontend": {"type": "vite", "dev": {"entry": "web/index.ts"}}},
        {"nodes/half.py": node_module("half"), "tools/x.tool.json": "{}"},
    )
    write_plugin(plugins, "typo", {"frontend": {"vanilla": {"entry": 3}}})

    found, problems = discover_plugins(tmp_path / "project", tmp_path / "home", Settings())

    assert [p.name for p in found] == ["half", "typo"]
    half = found[0]
    assert half.node_modules and half.tool_files
    assert [(Path(p.folder).name, p.field) for p in problems] == [
        ("half", "frontend.dev.entry"),
        ("half", "frontend"),
        ("typo", "frontend.vanilla.entry"),
    ]
    assert "does not run or proxy a Vite dev server" in problems[0].reason
    assert all("loads without its web part" in p.reason for p in problems[1:])


def test_missing_web_files_are_reported(tmp_path: Path) -> None:
    plugins = tmp_path / "project" / "plugins"
    write_plugin(
        plugins,
        "web",
        {"frontend": {"vanilla": {"entry": "main.js", "styles": ["x.css"]}}},
        {"web/main.js": "//"},
    )
    _, problems = discover_plugins(tmp_path / "project", tmp_path / "home", Settings())
    assert [(p.field, p.reason) for p in problems] == [
        ("frontend.vanilla.styles", "no file 'x.css' in 'web'")
    ]


def test_the_same_name_twice_is_a_problem_of_the_second(tmp_path: Path) -> None:
    write_plugin(tmp_path / "project" / "plugins", "one", {"name": "same"})
    second = write_plugin(tmp_path / "home" / "plugins", "two", {"name": "same"})

    found, problems = discover_plugins(tmp_path / "project", tmp_path / "home", Settings())

    assert [(p.name, p.origin) for p in found] == [("same", "project")]
    assert [(p.folder, p.field) for p in problems] == [(str(second), "name")]
    assert "already loaded" in problems[0].reason


def test_plugins_are_off_until_enabled_and_grants_follow_the_manifest(tmp_path: Path) -> None:
    plugins = tmp_path / "project" / "plugins"
    write_plugin(plugins, "a", {"permissions": {"ui": {"override": ["ui:BaseNode"]}}})
    write_plugin(plugins, "b")

    off, _ = discover_plugins(tmp_path / "project", tmp_path / "home", Settings())
    assert [p.enabled for p in off] == [False, False]

    settings = enabled("a", granted={"a": ["ui:BaseNode", "ui:Other"]})
    on, _ = discover_plugins(tmp_path / "project", tmp_path / "home", settings)
    assert [(p.name, p.enabled, p.granted) for p in on] == [
        ("a", True, ("ui:BaseNode",)),
        ("b", False, ()),
    ]


def test_risk_is_high_for_python_and_overrides_medium_for_hooks_low_otherwise(
    tmp_path: Path,
) -> None:
    plugins = tmp_path / "project" / "plugins"
    write_plugin(plugins, "py", files={"nodes/py.py": node_module("py")})
    write_plugin(plugins, "over", {"permissions": {"ui": {"override": ["ui:ChatMessage"]}}})
    write_plugin(plugins, "hooks", {"permissions": {"hooks": ["hook:client:node:render-after"]}})
    write_plugin(plugins, "wrap", {"permissions": {"ui": {"wrap": ["ui:BaseNode"]}}})
    write_plugin(plugins, "net", {"permissions": {"network": True}})
    write_plugin(plugins, "plain", {"permissions": {"ui": {"inject": ["node:footer"]}}})

    found, _ = discover_plugins(tmp_path / "project", tmp_path / "home", Settings())
    risk = {p.name: (p.risk, p.risk_reasons) for p in found}

    assert risk["py"] == ("high", ("runs Python code inside the server process (nodes/py.py)",))
    assert risk["over"] == ("high", ("replaces core UI components: ui:ChatMessage",))
    assert risk["hooks"][0] == "medium"
    assert risk["wrap"] == ("medium", ("wraps core UI components: ui:BaseNode",))
    assert risk["net"] == ("medium", ("connects to other machines",))
    assert risk["plain"] == ("low", ("adds UI to: node:footer",))


def test_declared_entries_that_do_not_exist_are_reported(tmp_path: Path) -> None:
    write_plugin(tmp_path / "project" / "plugins", "p", {"tools": {"entry": "my-tools"}})
    found, problems = discover_plugins(tmp_path / "project", tmp_path / "home", Settings())
    assert found[0].tool_files == ()
    assert [(p.field, p.reason) for p in problems] == [
        ("tools.entry", "no file or folder 'my-tools' in the plugin")
    ]
