"""The plugin host: plugins are off until enabled; enabled ones have their Python
imported, their hooks registered only where declared, their node types in the registry
and out again when disabled; a plugin that fails is reported while the others work."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from storyloom.core.plugin_markers import hookimpl
from storyloom.core.settings import Settings, SettingsStore
from storyloom.tools.config_options import plugin_option_key
from storyloom.tools.plugin_host import PluginHost
from storyloom.tools.tool_definition import ServiceTool, ToolDefinition
from storyloom.workflow.node_registry import NodeRegistry
from storyloom.workflow.nodes.interface_nodes import GroupInput, GroupOutput
from tests.tools.plugin_support import HOSTS, enabled, node_module, write_plugin


class Env:
    def __init__(self, tmp_path: Path) -> None:
        self.project = tmp_path / "project"
        self.home = tmp_path / "home"
        self.plugins = self.project / "plugins"
        self.store = SettingsStore(self.home, environ={})
        self.registry = NodeRegistry([GroupInput, GroupOutput])

    def settings(self) -> Settings:
        return self.store.load().effective

    def host(self, builtins: list[object] | None = None) -> PluginHost:
        host = PluginHost(
            self.project, self.home, self.settings, self.registry, builtins=builtins or []
        )
        HOSTS.append(host)
        return host

    def enable(self, *names: str, granted: dict[str, list[str]] | None = None) -> None:
        self.store.save(enabled(*names, granted=granted))


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


AFTER_TURN = """
from storyloom.core.plugin_markers import hookimpl

SEEN = []

@hookimpl
def storyloom_chat_after_turn(conversation_id, message):
    SEEN.append(conversation_id)
    return None

@hookimpl
def storyloom_tool_before_call(tool_id, arguments, action):
    return "deny"
"""


def test_a_new_plugin_is_off_until_enabled_and_off_again_when_disabled(env: Env) -> None:
    write_plugin(env.plugins, "echo", files={"nodes/echo.py": node_module("echo")})
    host = env.host()
    assert [p.enabled for p in host.plugins] == [False]
    assert "echo:Echo" not in env.registry
    assert host.enabled_plugins() == []

    before = set(sys.modules)
    plugin = host.set_enabled(env.store, "echo", True, accept_risk="high")
    imported = {name for name in sys.modules if name.startswith("_storyloom_plugin")} - before
    assert imported
    assert plugin.enabled and "echo:Echo" in env.registry
    assert env.store.read_file().plugins.enabled == ["echo"]
    assert host.node_types_of("echo") == ["echo:Echo"]

    host.set_enabled(env.store, "echo", False)
    assert "echo:Echo" not in env.registry
    assert not imported & set(sys.modules)


def test_a_server_hook_not_declared_is_not_registered_and_is_reported(env: Env) -> None:
    folder = write_plugin(
        env.plugins,
        "sneaky",
        {"permissions": {"hooks": ["hook:server:chat:after-turn"]}},
        {"nodes/hooks.py": AFTER_TURN},
    )
    env.enable("sneaky")
    host = env.host()

    assert host.hook.storyloom_chat_after_turn(conversation_id="c1", message={}) == []
    assert host.hook.storyloom_tool_before_call(tool_id="t", arguments={}, action="allow") == []
    [problem] = host.problems
    assert problem.file == str(folder / "nodes" / "hooks.py")
    assert problem.field == "permissions.hooks"
    assert "storyloom_tool_before_call" in problem.reason
    assert "hook:server:tool:before-call" in problem.reason


def test_a_declared_server_hook_is_called(env: Env) -> None:
    write_plugin(
        env.plugins,
        "open",
        {"permissions": {"hooks": ["hook:server:tool:before-call"]}},
        {"nodes/hooks.py": AFTER_TURN.replace("SEEN.append", "print")},
    )
    env.enable("open")
    host = env.host()
    assert host.hook.storyloom_tool_before_call(tool_id="t", arguments={}, action="allow") == [
        "deny"
    ]


def test_a_module_that_fails_to_import_is_reported_and_the_rest_loads(env: Env) -> None:
    folder = write_plugin(
        env.plugins,
        "mixed",
        files={
            "nodes/a_broken.py": "raise RuntimeError('boom')\n",
            "nodes/b.py": node_module("mixed"),
        },
    )
    write_plugin(env.plugins, "fine", files={"nodes/fine.py": node_module("fine")})
    env.enable("mixed", "fine")
    host = env.host()

    assert "mixed:Echo" in env.registry and "fine:Echo" in env.registry
    [problem] = host.problems
    assert problem.file == str(folder / "nodes" / "a_broken.py")
    assert problem.reason == "import failed: RuntimeError: boom"


def test_a_node_type_outside_the_plugins_namespace_is_refused(env: Env) -> None:
    write_plugin(env.plugins, "thief", files={"nodes/t.py": node_module("core")})
    env.enable("thief")
    host = env.host()
    assert "core:Echo" not in env.registry
    assert "must be named thief:<Name>" in host.problems[0].reason


def test_modules_of_one_plugin_import_each_other(env: Env) -> None:
    helper = "WORD = 'shared'\n"
    uses = "from . import _helper\n" + node_module("pkg").replace(
        'display_name: ClassVar[str] = "Echo"', "display_name: ClassVar[str] = _helper.WORD"
    )
    write_plugin(env.plugins, "pkg", files={"nodes/_helper.py": helper, "nodes/main.py": uses})
    env.enable("pkg")
    host = env.host()
    assert host.problems == []
    node = env.registry.get("pkg:Echo")
    assert node is not None and node.display_name == "shared"


REFUSER = """
from storyloom.core.plugin_markers import hookimpl

@hookimpl
def storyloom_nodemanager_before_register(node_type):
    return not node_type.type.endswith(":Echo")
"""


def test_a_before_register_hook_refuses_node_types(env: Env) -> None:
    write_plugin(
        env.plugins,
        "guard",
        {"permissions": {"hooks": ["hook:server:nodemanager:before-register"]}},
        {"nodes/guard.py": REFUSER},
    )
    write_plugin(env.plugins, "victim", files={"nodes/v.py": node_module("victim")})
    env.enable("guard", "victim")
    host = env.host()
    assert "victim:Echo" not in env.registry
    assert [p.reason for p in host.problems] == [
        "node type 'victim:Echo' was refused by a plugin hook"
    ]


def test_overrides_are_granted_only_when_asked_and_reach_the_extension_info(env: Env) -> None:
    write_plugin(
        env.plugins,
        "skin",
        {
            "frontend": {"type": "vanilla", "vanilla": {"entry": "index.js", "styles": ["s.css"]}},
            "permissions": {
                "ui": {"override": ["ui:BaseNode"]},
            },
        },
        {"web/index.js": "//", "web/s.css": ""},
    )
    write_plugin(env.plugins, "other")
    host = env.host()
    assert host.extension_infos() == []

    host.set_enabled(env.store, "skin", True, accept_risk="high")
    [info] = host.extension_infos()
    assert info.overrides == []
    data = info.model_dump(mode="json")
    assert data["frontend"] == {
        "entryUrl": "/plugins/skin/index.js",
        "styleUrls": ["/plugins/skin/s.css"],
    }
    assert data["displayName"] == "skin"

    host.set_enabled(env.store, "skin", True, grant_overrides=True, accept_risk="high")
    assert host.extension_infos()[0].overrides == ["ui:BaseNode"]
    assert env.store.read_file().plugins.granted == {"skin": ["ui:BaseNode"]}

    host.set_enabled(env.store, "skin", False)
    assert env.store.read_file().plugins.granted == {}
    assert host.static_dir("skin") is None


def test_static_files_are_served_only_from_inside_the_plugin(env: Env, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = write_plugin(
        env.plugins, "link", {"frontend": {"vanilla": {"entry": "a.js", "rootDir": "web"}}}
    )
    os.symlink(outside, folder / "web")
    (outside / "a.js").write_text("//")
    write_plugin(
        env.plugins, "real", {"frontend": {"vanilla": {"entry": "a.js"}}}, {"web/a.js": "//"}
    )
    env.enable("link", "real")
    host = env.host()
    assert host.static_dir("link") is None
    assert host.static_dir("real") == (env.plugins / "real" / "web").resolve()
    assert [i.name for i in host.extension_infos() if i.frontend] == ["real"]


FUNCTIONS = """
from storyloom.core.plugin_markers import hookimpl

@hookimpl
def storyloom_tool_functions(options):
    def hello(arguments, context):
        return f"{options.get('greeting')} {options.get('token')} {arguments['name']}"
    return {"hello": hello, "not_callable": 3}
"""


def test_tool_functions_read_the_plugins_options_when_called(env: Env) -> None:
    options = [
        {"key": "extensions.fn.greeting", "type": "string", "label": "G", "defaultValue": "Hi"},
        {"key": "extensions.fn.token", "type": "secret", "label": "T"},
    ]
    write_plugin(env.plugins, "fn", {"configOptions": options}, {"nodes/fn.py": FUNCTIONS})
    env.enable("fn")
    host = env.host()
    functions = host.tool_functions("fn")
    assert set(functions) == {"hello"}
    assert functions["hello"]({"name": "Ada"}, None) == "Hi None Ada"

    settings = env.store.read_file()
    env.store.save(settings.model_copy(update={"extensions": {"fn": {"greeting": "Hey"}}}))
    host.secrets.set(plugin_option_key("fn", "token"), "s3cret")
    assert functions["hello"]({"name": "Ada"}, None) == "Hey s3cret Ada"
    assert host.tool_functions("not-a-plugin") == {}


def test_a_tools_config_schema_options_are_read_like_the_plugins_own(env: Env) -> None:
    tool = {
        "id": "fn:hello",
        "parameters": {"type": "object", "properties": {"name": {"type": "string"}}},
        "implementation": {"type": "service", "function": "hello"},
        "configSchema": [{"key": "token", "type": "secret", "label": "Token"}],
    }
    options = [
        {"key": "extensions.fn.greeting", "type": "string", "label": "G", "defaultValue": "Hi"}
    ]
    write_plugin(
        env.plugins,
        "fn",
        {"configOptions": options, "tools": {"entry": "./tools"}},
        {"nodes/fn.py": FUNCTIONS, "tools/hello.tool.json": json.dumps(tool)},
    )
    env.enable("fn")
    host = env.host()
    host.secrets.set(plugin_option_key("fn", "token"), "from-the-tool")
    assert host.tool_functions("fn")["hello"]({"name": "Ada"}, None) == "Hi from-the-tool Ada"


class BuiltinTools:
    @hookimpl
    def storyloom_tools(self) -> list[ServiceTool]:
        definition = ToolDefinition.model_validate(
            {
                "id": "system:noop",
                "parameters": {"type": "object"},
                "implementation": {"type": "service", "function": "noop"},
            }
        )
        return [ServiceTool(definition, lambda arguments, context: None)]


def test_service_tools_come_from_builtins_and_enabled_plugins(env: Env) -> None:
    plugin_tools = """
from storyloom.core.plugin_markers import hookimpl
from storyloom.tools.tool_definition import ServiceTool, ToolDefinition

@hookimpl
def storyloom_tools():
    d = ToolDefinition.model_validate({"id": "py:one", "parameters": {"type": "object"},
        "implementation": {"type": "service", "function": "one"}})
    return [ServiceTool(d, lambda a, c: 1)]
"""
    write_plugin(env.plugins, "py", files={"nodes/py.py": plugin_tools})
    host = env.host(builtins=[BuiltinTools()])
    assert [t.definition.id for t in host.service_tools()] == ["system:noop"]

    host.set_enabled(env.store, "py", True, accept_risk="high")
    owners = {t.definition.id: owner for owner, t in host.service_tools_by_plugin()}
    assert owners == {"system:noop": None, "py:one": "py"}


def test_an_edited_module_is_imported_again_on_reload(env: Env) -> None:
    folder = write_plugin(env.plugins, "live", files={"nodes/live.py": node_module("live")})
    env.enable("live")
    host = env.host()
    module = folder / "nodes" / "live.py"
    module.write_text(module.read_text().replace('"Echo"', '"Echo 2"'))
    os.utime(module, ns=(1, 1))
    host.reload()
    node = env.registry.get("live:Echo")
    assert node is not None and node.display_name == "Echo 2"


def test_unknown_hook_names_are_reported(env: Env) -> None:
    typo = (
        "from storyloom.core.plugin_markers import hookimpl\n\n"
        "@hookimpl\ndef storyloom_tool():\n    return []\n"
    )
    write_plugin(env.plugins, "typo", files={"nodes/t.py": typo})
    env.enable("typo")
    host = env.host()
    assert [(p.field, p.reason) for p in host.problems] == [
        ("storyloom_tool", "storyloom_tool is not a storyloom hook; not registered")
    ]


def test_plugin_names_not_found_raise_not_found(env: Env) -> None:
    from storyloom.core.errors import NotFound

    host = env.host()
    with pytest.raises(NotFound):
        host.plugin("ghost")
    with pytest.raises(NotFound):
        host.set_enabled(env.store, "ghost", True)
