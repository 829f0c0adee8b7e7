"""``plugin new``'s example: it validates, its node runs through the real runner, its
workflow is a workflow with an interface, its greet function reads its option."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from storyloom.core.errors import Conflict, InvalidInput
from storyloom.core.settings import Settings
from storyloom.plugins import node_registry
from storyloom.tools.plugin_host import PluginHost
from storyloom.tools.plugin_manifest import load_manifest
from storyloom.tools.plugin_scaffold import write_example_plugin
from storyloom.tools.plugin_validation import validate_plugin
from storyloom.tools.tool_definition import NodeImpl, ServiceImpl, load_tool_file
from storyloom.workflow.node_type import WorkflowServices
from storyloom.workflow.runner import WorkflowRunner
from storyloom.workflow.workflow_file import load_workflow_file

NAME = "hello-world"


@pytest.fixture
def host(tmp_path: Path) -> Iterator[PluginHost]:
    write_example_plugin(tmp_path / "project" / "plugins" / NAME, NAME)
    settings = Settings.model_validate(
        {"plugins": {"enabled": [NAME]}, "extensions": {NAME: {"greeting": "Ahoy"}}}
    )
    plugins = PluginHost(
        tmp_path / "project", tmp_path / "home", lambda: settings, node_registry(entry_points=False)
    )
    yield plugins
    plugins.close()


def test_the_example_plugin_validates(tmp_path: Path) -> None:
    folder = tmp_path / NAME
    written = write_example_plugin(folder, NAME)
    assert {p.relative_to(folder).as_posix() for p in written} == {
        "plugin.yaml",
        "nodes/hello_world.py",
        "tools/shout.tool.json",
        "tools/greet.tool.json",
        f"workflows/{NAME}_shout.json",
        "web/index.js",
        "README.md",
    }
    check = validate_plugin(folder, node_registry(entry_points=False), tmp_path / "home")
    assert check.problems == []
    assert check.ok
    assert check.node_types == [f"{NAME}:Shout"]
    assert check.tools == [f"{NAME}:greet", f"{NAME}:shout"]
    assert check.workflows == [f"{NAME}_shout"]

    manifest = load_manifest(folder / "plugin.yaml")
    [option] = manifest.config_options
    assert (option.key, option.type, option.default_value) == (
        f"extensions.{NAME}.greeting",
        "string",
        "Hello",
    )
    assert manifest.frontend is not None
    assert manifest.frontend.served() == ("web", "index.js", [])
    assert 'registerOutletComponent("layout:header:right"' in (folder / "web/index.js").read_text()
    shout = load_tool_file(folder / "tools/shout.tool.json")
    greet = load_tool_file(folder / "tools/greet.tool.json")
    assert (
        isinstance(shout.implementation, NodeImpl) and shout.implementation.node == f"{NAME}:Shout"
    )
    assert (
        isinstance(greet.implementation, ServiceImpl) and greet.implementation.function == "greet"
    )


async def test_the_example_workflow_runs_the_plugins_node(host: PluginHost) -> None:
    [plugin] = host.enabled_plugins()
    workflow = load_workflow_file(plugin.workflow_files[0])
    assert set(workflow.interface_inputs) == {"text"}
    runner = WorkflowRunner(host.node_registry, WorkflowServices(hooks=host.hook))
    result = await runner.run(workflow, inputs={"text": "hello"})
    assert result.status == "completed", result.errors
    assert result.interface_outputs == {"shouted": "HELLO!"}


def test_the_greet_function_reads_the_greeting_option(host: PluginHost) -> None:
    greet = host.tool_functions(NAME)["greet"]
    assert greet({"name": "Ada"}, None) == "Ahoy, Ada"


def test_a_bad_name_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as caught:
        write_example_plugin(tmp_path / "x", "Not Kebab")
    assert caught.value.problems[0].field == "name"
    assert not (tmp_path / "x").exists()


def test_a_folder_with_files_is_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "mine.txt").write_text("keep")
    with pytest.raises(Conflict):
        write_example_plugin(tmp_path / "p", "p")
    assert [f.name for f in (tmp_path / "p").iterdir()] == ["mine.txt"]


def test_the_example_workflow_file_is_plain_json_with_an_interface(tmp_path: Path) -> None:
    write_example_plugin(tmp_path / "p", "p")
    data = json.loads((tmp_path / "p" / "workflows" / "p_shout.json").read_text())
    assert data["interfaceOutputs"]["shouted"]["dataFlowType"] == "STRING"
    assert [n["type"] for n in data["nodes"]] == ["core:GroupInput", "p:Shout", "core:GroupOutput"]
