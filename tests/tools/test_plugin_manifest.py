"""plugin.yaml and config options: what loads, what is refused, and how the refusal
names the file, the field and the reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from storyloom.core.errors import FileFormatError
from storyloom.tools.config_options import ConfigOption
from storyloom.tools.plugin_manifest import (
    NO_COMPONENT,
    OUTLETS,
    SIDE_PANELS,
    WRAP_POINTS,
    WrapPoint,
    load_manifest,
    parse_manifest,
)

SEED_MANIFEST = """
name: my-awesome-plugin
displayName: 我的超棒插件
version: 1.0.0
description: 这个插件能极大地提升生产力，并添加了一个神奇的节点。
nodes:
  entry: ./nodes
tools:
  entry: ./tools
frontend:
  dev:
    entry: web/index.ts
  build:
    entry: dist/index.js
    styles:
      - dist/style.css
configOptions:
  - key: "extensions.my-awesome-plugin.enableFeatureX"
    type: "boolean"
    label: "启用功能 X"
    description: "是否激活实验性功能 X。"
    defaultValue: true
    categoryKey: "features"
    category: "功能开关"
  - key: "extensions.my-awesome-plugin.maxItems"
    type: "number"
    label: "最大项目数"
    defaultValue: 10
    min: 1
    max: 50
    step: 1
permissions:
  hooks:
    - "hook:client:auth:login"
    - "hook:client:settings:before-save"
    - "hook:client:workflow:before-execute"
    - "hook:server:nodemanager:before-register"
  ui:
    wrap: ["ui:BaseNode", "ui:SidebarManager"]
    inject: ["node:header:right", "sidebar:icon-bar:tabs:after"]
    override: []
  services:
    override: []
"""


def problems_of(data: Any) -> list[tuple[str, str]]:
    with pytest.raises(FileFormatError) as caught:
        parse_manifest(data, Path("plugins/x/plugin.yaml"))
    assert str(caught.value.path) == "plugins/x/plugin.yaml"
    return [(p.field, p.reason) for p in caught.value.problems]


def test_the_seed_manifest_loads_with_every_field(tmp_path: Path) -> None:
    path = tmp_path / "plugin.yaml"
    path.write_text(SEED_MANIFEST, encoding="utf-8")
    manifest = load_manifest(path)
    assert manifest.name == "my-awesome-plugin"
    assert manifest.display_name == "我的超棒插件"
    assert manifest.nodes is not None and manifest.nodes.entry == "nodes"
    assert manifest.frontend is not None
    assert manifest.frontend.served() == (".", "dist/index.js", ["dist/style.css"])
    assert [o.name for o in manifest.config_options] == ["enableFeatureX", "maxItems"]
    assert manifest.permissions.server_hooks == ["storyloom_nodemanager_before_register"]
    assert manifest.permissions.overrides() == []
    assert manifest.permissions.grants() == ["wrap:ui:BaseNode", "wrap:ui:SidebarManager"]
    assert manifest.permissions.client_hooks == [
        "hook:client:auth:login",
        "hook:client:settings:before-save",
        "hook:client:workflow:before-execute",
    ]


# Seed 003 §21.2: every core component id it names.
SEED_COMPONENT_IDS = [
    "ui:BaseNode",
    "ui:NodeInputControl",
    "ui:GraphEditor",
    "ui:ContextMenu",
    "ui:SidebarManager",
    "ui:HomeSidebar",
    "ui:StatusBar",
    "ui:RightPreviewPanel",
    "ui:SettingsPanel",
    "ui:MainMenu",
]


@pytest.mark.parametrize("component", SEED_COMPONENT_IDS)
@pytest.mark.parametrize("kind", ["wrap", "override"])
def test_each_seed_component_id_is_a_wrap_point_or_refused_with_its_reason(
    component: str, kind: str
) -> None:
    data = {"name": "a", "version": "1", "permissions": {"ui": {kind: [component]}}}
    if component in WRAP_POINTS:
        parse_manifest(data, Path("p.yaml"))
        return
    [(field, reason)] = problems_of(data)
    assert field == f"permissions.ui.{kind}[0]"
    assert reason == f"{component!r} is no wrap point of storyloom: {NO_COMPONENT[component]}"


def test_a_component_id_unknown_to_the_seed_and_storyloom_names_the_wrap_points() -> None:
    [(field, reason)] = problems_of(
        {"name": "a", "version": "1", "permissions": {"ui": {"wrap": ["ui:Nope"]}}}
    )
    assert field == "permissions.ui.wrap[0]"
    assert "no wrap point" in reason and "ui:BaseNode" in reason and "ui:ChatMessage" in reason


def test_a_client_hook_the_web_app_does_not_have_is_refused() -> None:
    [(field, reason)] = problems_of(
        {"name": "a", "version": "1", "permissions": {"hooks": ["hook:client:auth:logout"]}}
    )
    assert field == "permissions.hooks[0]"
    assert "not a client hook" in reason and "hook:client:auth:login" in reason


def test_replacing_a_core_service_is_refused_with_the_reason() -> None:
    ((field, reason),) = problems_of(
        {
            "name": "a",
            "version": "1",
            "permissions": {"services": {"override": ["workflowManager"]}},
        }
    )
    assert field == "permissions.services.override"
    assert reason.startswith("'workflowManager': storyloom has no replaceable core services")


def test_a_version_yaml_reads_as_a_number_is_kept_as_text() -> None:
    manifest = parse_manifest({"name": "a", "version": 1.5}, Path("p.yaml"))
    assert manifest.version == "1.5"


@pytest.mark.parametrize(
    ("data", "field", "reason_part"),
    [
        ({"name": "My Plugin", "version": "1"}, "name", "kebab-case"),
        ({"name": "a"}, "version", "Field required"),
        ({"name": "a", "version": "1", "nodes": {"entry": "../up"}}, "nodes.entry", "inside"),
        ({"name": "a", "version": "1", "colour": "red"}, "colour", "Extra inputs"),
        (
            {"name": "a", "version": "1", "permissions": {"hooks": ["hook:server:x:y"]}},
            "permissions.hooks[0]",
            "not a server hook",
        ),
        (
            {"name": "a", "version": "1", "permissions": {"hooks": ["workflow:before-execute"]}},
            "permissions.hooks[0]",
            "hook:<server|client>",
        ),
        (
            {"name": "a", "version": "1", "permissions": {"ui": {"override": ["BaseNode"]}}},
            "permissions.ui.override[0]",
            "ui:<Component>",
        ),
        (
            {
                "name": "a",
                "version": "1",
                "configOptions": [{"key": "extensions.b.x", "type": "string", "label": "X"}],
            },
            "configOptions[0].key",
            "extensions.a.<option>",
        ),
        (
            {
                "name": "a",
                "version": "1",
                "configOptions": [
                    {
                        "key": "extensions.a.n",
                        "type": "integer",
                        "label": "N",
                        "min": 5,
                        "defaultValue": 3,
                    }
                ],
            },
            "configOptions[0].defaultValue",
            "below the minimum",
        ),
        (
            {
                "name": "a",
                "version": "1",
                "configOptions": [
                    {"key": "extensions.a.x", "type": "string", "label": "X"},
                    {"key": "extensions.a.x", "type": "string", "label": "Y"},
                ],
            },
            "configOptions[1].key",
            "declared twice",
        ),
    ],
)
def test_a_bad_manifest_names_the_field_and_the_reason(
    data: dict[str, Any], field: str, reason_part: str
) -> None:
    problems = problems_of(data)
    assert any(f == field and reason_part in r for f, r in problems), problems


def test_bad_yaml_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "plugin.yaml"
    path.write_text("name: a\nversion: [1\n", encoding="utf-8")
    with pytest.raises(FileFormatError) as caught:
        load_manifest(path)
    assert caught.value.path == path
    assert "line 3" in caught.value.problems[0].reason


def test_yaml_python_tags_are_not_executed(tmp_path: Path) -> None:
    path = tmp_path / "plugin.yaml"
    path.write_text("name: !!python/object/apply:os.system ['true']\nversion: '1'\n")
    with pytest.raises(FileFormatError):
        load_manifest(path)


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ({"type": "boolean"}, True, True),
        ({"type": "integer", "min": 1, "max": 5}, 3.0, 3),
        ({"type": "number"}, 0.5, 0.5),
        ({"type": "string"}, "hi", "hi"),
        ({"type": "select", "options": [{"value": "a"}, {"value": "b"}]}, "b", "b"),
        ({"type": "secret"}, "sk", "sk"),
        ({"type": "string"}, None, None),
    ],
)
def test_a_config_option_accepts_values_of_its_type(
    option: dict[str, Any], value: Any, expected: Any
) -> None:
    checked = ConfigOption.model_validate({"key": "k", "label": "K", **option}).check(value)
    assert checked == expected and type(checked) is type(expected)


@pytest.mark.parametrize(
    ("option", "value", "reason_part"),
    [
        ({"type": "boolean"}, "yes", "true or false"),
        ({"type": "integer"}, 2.5, "whole number"),
        ({"type": "integer"}, True, "a number"),
        ({"type": "number", "max": 1}, 2, "above the maximum"),
        ({"type": "number"}, float("nan"), "finite"),
        ({"type": "select", "options": [{"value": "a"}]}, "z", "not one of"),
        ({"type": "textarea"}, 3, "text"),
    ],
)
def test_a_config_option_refuses_other_values_saying_why(
    option: dict[str, Any], value: Any, reason_part: str
) -> None:
    config = ConfigOption.model_validate({"key": "k", "label": "K", **option})
    with pytest.raises(ValueError, match=reason_part):
        config.check(value)


def test_a_secret_type_option_is_secret() -> None:
    option = ConfigOption.model_validate({"key": "k", "type": "secret", "label": "K"})
    assert option.secret
    assert option.model_dump(by_alias=True)["defaultValue"] is None


names = st.from_regex(r"[a-z0-9]{1,8}(-[a-z0-9]{1,8}){0,2}", fullmatch=True)
option_names = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,10}", fullmatch=True)


@st.composite
def manifests(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(names)
    options = [
        {
            "key": f"extensions.{name}.{option}",
            "type": "integer",
            "label": option,
            "min": low,
            "max": low + span,
            "defaultValue": low + draw(st.integers(0, span)),
        }
        for option, low, span in draw(
            st.lists(
                st.tuples(option_names, st.integers(-100, 100), st.integers(0, 50)),
                unique_by=lambda t: t[0],
                max_size=4,
            )
        )
    ]
    return {
        "name": name,
        "version": draw(st.sampled_from(["1.0.0", "0.1", "2"])),
        "displayName": draw(st.text(max_size=20)),
        "configOptions": options,
        "permissions": {
            "hooks": draw(
                st.lists(
                    st.sampled_from(
                        ["hook:server:chat:after-turn", "hook:client:node:render-after"]
                    ),
                    unique=True,
                )
            ),
            "network": draw(st.booleans()),
        },
    }


@settings(max_examples=60, deadline=None)
@given(manifests())
def test_valid_manifests_survive_a_yaml_round_trip(data: dict[str, Any]) -> None:
    text = yaml.safe_dump(data, allow_unicode=True)
    manifest = parse_manifest(yaml.safe_load(text), Path("p.yaml"))
    again = parse_manifest(manifest.model_dump(by_alias=True, exclude_none=True), Path("p.yaml"))
    assert again == manifest
    for option in manifest.config_options:
        assert option.check(option.default_value) == option.default_value


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "name",
                "version",
                "nodes",
                "tools",
                "frontend",
                "configOptions",
                "permissions",
                "workflows",
                "displayName",
            ]
        ),
        json_values,
    )
)
def test_any_yaml_document_either_loads_or_is_a_file_format_error(data: dict[str, Any]) -> None:
    try:
        parse_manifest(data, Path("p.yaml"))
    except FileFormatError as exc:
        assert exc.problems and all(p.reason for p in exc.problems)


def test_every_wrap_point_the_api_names_has_its_component() -> None:
    # The API's enum (ExtensionInfo.wraps, from WrapPoint) is what the web app's own list
    # is checked against (web/tests/extensionSchema.test.ts); this side checks the table.
    assert set(WRAP_POINTS) == set(get_args(WrapPoint))
    assert not set(WRAP_POINTS) & set(NO_COMPONENT)


@pytest.mark.parametrize(
    "outlet", ["editor:canvas:overlay", "modal:footer", "sidebar:panel:footer[run]"]
)
def test_an_outlet_the_web_app_has_may_be_declared(outlet: str) -> None:
    data = {"name": "a", "version": "1", "permissions": {"ui": {"inject": [outlet]}}}
    assert parse_manifest(data, Path("p.yaml")).permissions.ui.inject == [outlet]


@pytest.mark.parametrize(
    ("outlet", "said"),
    [
        ("editor:canvas:underlay", "no outlet of storyloom"),
        ("sidebar:panel:header[nodes]", "no side panel 'nodes'"),
    ],
)
def test_an_outlet_the_web_app_has_not_is_refused_naming_the_known_ones(
    outlet: str, said: str
) -> None:
    [(field, reason)] = problems_of(
        {"name": "a", "version": "1", "permissions": {"ui": {"inject": [outlet]}}}
    )
    assert field == "permissions.ui.inject[0]"
    assert said in reason


def test_every_outlet_a_manifest_may_name_is_placed_in_the_web_app() -> None:
    """OUTLETS is the web app's list: each name is in some <PluginOutlet name=...>."""
    web = Path(__file__).resolve().parents[2] / "web" / "src"
    sources = "\n".join(p.read_text(encoding="utf-8") for p in web.rglob("*.vue"))
    for outlet in OUTLETS:
        if "{panelId}" in outlet:
            where = outlet.split("[")[0]
            for panel in SIDE_PANELS:
                assert f"`{where}[{panel}]`" in sources, (outlet, panel)
        else:
            assert f'name="{outlet}"' in sources, outlet
