"""Plugin folders written for tests: a manifest and any files, in a project's plugins/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from storyloom.core.settings import Settings
from storyloom.tools.plugin_host import PluginHost

HOSTS: list[PluginHost] = []
"""The plugin hosts a test opened: tests/tools/conftest.py closes them after each test
(plugin modules live in sys.modules until their host unloads them)."""


def write_plugin(
    root: Path,
    name: str,
    manifest: dict[str, Any] | str | None = None,
    files: dict[str, str] | None = None,
) -> Path:
    """``root/<name>/plugin.yaml`` (``{name, version}`` plus ``manifest``, or the text
    given) and ``files`` by path relative to the plugin folder."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    if isinstance(manifest, str):
        text = manifest
    else:
        text = yaml.safe_dump({"name": name, "version": "1.0.0", **(manifest or {})})
    (folder / "plugin.yaml").write_text(text, encoding="utf-8")
    for relative, content in (files or {}).items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    return folder


def enabled(*names: str, granted: dict[str, list[str]] | None = None) -> Settings:
    return Settings.model_validate({"plugins": {"enabled": list(names), "granted": granted or {}}})


NODE_MODULE = """
from typing import Any, ClassVar

from storyloom.core.plugin_markers import hookimpl
from storyloom.workflow.node_type import NodeConfig, NodeType, Slot


class Echo(NodeType[NodeConfig]):
    type: ClassVar[str] = "{name}:Echo"
    display_name: ClassVar[str] = "Echo"
    inputs: ClassVar[tuple[Slot, ...]] = (Slot(name="text", type="STRING"),)
    outputs: ClassVar[tuple[Slot, ...]] = (Slot(name="text", type="STRING"),)

    async def run(self, ctx: Any, inputs: dict[str, Any], config: NodeConfig) -> dict[str, Any]:
        return {{"text": inputs["text"]}}


@hookimpl
def storyloom_node_types() -> list[type[NodeType]]:
    return [Echo]
"""


def node_module(name: str) -> str:
    return NODE_MODULE.format(name=name)
