"""``storyloom plugin new``: a working example plugin to start from.

It has one of everything: a typed node type (``<name>:Shout``), a node tool and a service
tool (``<name>:shout``, ``<name>:greet``), a workflow with an interface (so it is the
``workflow:<name>_shout`` tool), a config option (``extensions.<name>.greeting``), a
vanilla-JS web part in the header outlet and a README saying how the parts fit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from storyloom.core.atomic_io import atomic_write_text
from storyloom.core.errors import Conflict, FieldProblem, InvalidInput
from storyloom.tools.plugin_manifest import MAX_NAME, PLUGIN_NAME


def module_name(name: str) -> str:
    """The Python module of a plugin's nodes: its name with ``_`` for ``-``."""
    return name.replace("-", "_")


def title_of(name: str) -> str:
    return " ".join(part.capitalize() for part in name.split("-"))


def check_plugin_name(name: str) -> None:
    if len(name) > MAX_NAME or not PLUGIN_NAME.fullmatch(name):
        raise InvalidInput.of(
            "plugin name",
            [
                FieldProblem(
                    "name",
                    "must be kebab-case (lowercase letters and digits joined by "
                    f"'-', at most {MAX_NAME}), e.g. my-plugin",
                )
            ],
        )


def example_plugin_files(name: str) -> dict[str, str]:
    """The example plugin's files, by path relative to its folder."""
    check_plugin_name(name)
    title = title_of(name)
    module = module_name(name)
    return {
        "plugin.yaml": _MANIFEST.format(name=name, title=title),
        f"nodes/{module}.py": _NODES.replace("{name}", name).replace("{title}", title),
        "tools/shout.tool.json": _json(_shout_tool(name)),
        "tools/greet.tool.json": _json(_greet_tool(name)),
        f"workflows/{name}_shout.json": _json(_workflow(name)),
        "web/index.js": _WEB.replace("{name}", name).replace("{title}", title),
        "README.md": _README.replace("{name}", name)
        .replace("{title}", title)
        .replace("{module}", module),
    }


def write_example_plugin(folder: Path, name: str) -> list[Path]:
    """Write the example plugin into ``folder`` (new or empty); returns the files."""
    files = example_plugin_files(name)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise Conflict(f"{folder} exists and is not an empty folder; pick another --dir")
    written = []
    for relative, text in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text, mode=0o644)
        written.append(path)
    return written


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2) + "\n"


def _shout_tool(name: str) -> dict[str, Any]:
    return {
        "id": f"{name}:shout",
        "displayName": "Shout",
        "description": "Upper-case a text and add an exclamation mark.",
        "parameters": {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "The text to shout"}},
            "required": ["text"],
        },
        "implementation": {"type": "node", "node": f"{name}:Shout"},
    }


def _greet_tool(name: str) -> dict[str, Any]:
    return {
        "id": f"{name}:greet",
        "displayName": "Greet",
        "description": "Greet someone by name, with the greeting set in Settings → Extensions.",
        "parameters": {
            "type": "object",
            "properties": {"name": {"type": "string", "description": "Who to greet"}},
            "required": ["name"],
        },
        "implementation": {"type": "service", "function": "greet"},
    }


def _workflow(name: str) -> dict[str, Any]:
    return {
        "id": f"{name}_shout",
        "name": "Shout (example)",
        "description": "Shout a text: upper-case it and add an exclamation mark.",
        "interfaceInputs": {
            "text": {"description": "The text to shout", "dataFlowType": "STRING", "required": True}
        },
        "interfaceOutputs": {
            "shouted": {"description": "The shouted text", "dataFlowType": "STRING"}
        },
        "nodes": [
            {"id": "input", "type": "core:GroupInput", "position": {"x": 0, "y": 0}},
            {"id": "shout", "type": f"{name}:Shout", "config": {}, "position": {"x": 260, "y": 0}},
            {"id": "output", "type": "core:GroupOutput", "position": {"x": 520, "y": 0}},
        ],
        "edges": [
            {"source": "input", "sourceSlot": "text", "target": "shout", "targetSlot": "text"},
            {"source": "shout", "sourceSlot": "text", "target": "output", "targetSlot": "shouted"},
        ],
    }


_MANIFEST = """\
# The manifest of the {name} plugin (written by `storyloom plugin new`; edit freely).
# Check it with `storyloom plugin validate <this folder>`.
name: {name}
displayName: {title}
version: 0.1.0
description: An example plugin with a node, two tools, a workflow, a setting and a web part.

# Python modules with node types and tool functions (runs inside the server: high risk).
nodes:
  entry: nodes
# *.tool.json files, one tool each.
tools:
  entry: tools
# Workflows shipped with the plugin; one with interfaceInputs/Outputs is a workflow: tool.
workflows:
  entry: workflows

# Plain JavaScript served under /plugins/{name}/.
frontend:
  type: vanilla
  vanilla:
    entry: index.js
    rootDir: web

# Settings → Extensions shows these; tool functions read them through `options`.
configOptions:
  - key: extensions.{name}.greeting
    type: string
    label: Greeting
    description: The word the greet tool starts with.
    defaultValue: Hello
    categoryKey: general
    category: General

# What the plugin asks for; people see this before they enable it.
permissions:
  hooks: []
  ui:
    inject:
      - layout:header:right
  network: false
"""

_NODES = '''\
"""Node types and tool functions of the {name} plugin.

storyloom imports this file when the plugin is enabled and registers the functions
marked with ``hookimpl``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from pydantic import Field

from storyloom.core.plugin_markers import hookimpl
from storyloom.workflow.node_type import NodeConfig, NodeContext, NodeExpansion, NodeType, Slot
from storyloom.workflow.slot_types import STRING


class ShoutConfig(NodeConfig):
    suffix: str = Field("!", description="Added after the upper-cased text")


class Shout(NodeType[ShoutConfig]):
    """Upper-cases its text and adds the suffix."""

    type: ClassVar[str] = "{name}:Shout"
    display_name: ClassVar[str] = "Shout"
    category: ClassVar[str] = "{title}"
    description: ClassVar[str] = "Upper-case a text and add an exclamation mark."
    inputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="text", type=STRING, description="The text to shout"),
    )
    outputs: ClassVar[tuple[Slot, ...]] = (
        Slot(name="text", type=STRING, description="The text, upper-cased, with the suffix"),
    )

    async def run(
        self, ctx: NodeContext, inputs: dict[str, Any], config: ShoutConfig
    ) -> dict[str, Any] | NodeExpansion:
        return {"text": str(inputs["text"]).upper() + config.suffix}


@hookimpl
def storyloom_node_types() -> list[type[NodeType]]:
    return [Shout]


@hookimpl
def storyloom_tool_functions(options: Any) -> dict[str, Callable[..., Any]]:
    """The functions tools/*.tool.json name (implementation.function)."""

    def greet(arguments: dict[str, Any], context: Any) -> str:
        # Read the option at call time, so a change in Settings counts at once.
        return f"{options.get('greeting')}, {arguments['name']}"

    return {"greet": greet}
'''

_WEB = """\
// The web part of the {name} plugin: a button in the header (outlet layout:header:right).
// A component is an object with mount(el, props); what mount returns, if a function,
// is called when the component is removed.
const api = window.storyloom && window.storyloom.extensionApi;

if (api) {
  api.ui.registerOutletComponent("layout:header:right", {
    mount(el) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "{name}-button";
      button.dataset.plugin = "{name}";
      button.title = "From the {name} plugin";
      button.textContent = "{title}";
      const onClick = () => {
        button.textContent = button.textContent.toUpperCase() + "!";
      };
      button.addEventListener("click", onClick);
      el.appendChild(button);
      return () => {
        button.removeEventListener("click", onClick);
        button.remove();
      };
    },
  });
}
"""

_README = """\
# {title}

An example storyloom plugin, written by `storyloom plugin new {name}`.

| file | what it is |
|---|---|
| `plugin.yaml` | the manifest: name, parts, settings, permissions |
| `nodes/{module}.py` | the node type `{name}:Shout` and the function behind `{name}:greet` |
| `tools/shout.tool.json` | tool `{name}:shout`: runs the node `{name}:Shout` |
| `tools/greet.tool.json` | tool `{name}:greet`: calls `greet` from `storyloom_tool_functions` |
| `workflows/{name}_shout.json` | a workflow with an interface: the tool `workflow:{name}_shout` |
| `web/index.js` | a button in the header (outlet `layout:header:right`) |

Try it:

1. `storyloom plugin validate .` checks the manifest, the tools and the workflow.
2. Enable the plugin on the Tools page (new plugins are off: their Python runs inside
   the server). `storyloom plugin list` shows it and its risk.
3. `storyloom tools call {name}:greet --args '{"name": "Ada"}'` prints `Hello, Ada`;
   change the greeting in Settings → Extensions and call it again.

Hooks into storyloom's own work (`permissions.hooks`, e.g.
`hook:server:workflow:before-execute`) must be declared before a module may implement
them; see `docs/tools.md`.
"""
