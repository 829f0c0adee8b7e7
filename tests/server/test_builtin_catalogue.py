"""The web app's catalogue of storyloom's own node types, tools and workflows
(web/src/locales/<lang>/nodes.json, builtinTools.json, builtinWorkflows.json) against what
the server lists: a node type, a built-in tool or a built-in workflow (the chat pipeline)
added without its English and Chinese texts fails here, as does a slot, a config field (or
a field of its list items), a labelled choice, a tool argument or a workflow's interface
slot the catalogue does not know, or an entry for something storyloom no longer ships.
The server keeps its own English for the model; the catalogue is only what the page
shows."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from storyloom.plugins import node_registry

LOCALES = Path(__file__).resolve().parents[2] / "web" / "src" / "locales"
LANGUAGES = ("en", "zh")
CJK = re.compile(r"[\u4e00-\u9fff]")
# Placeholders the user types into a field ({{name}}, {0}): a translation must keep them.
PLACEHOLDER = re.compile(r"\{\{\{?[#/]?\w+(?:\.\w+)?\}?\}\}|\{\d\}")

Json = dict[str, Any]


def _catalogue(language: str, name: str) -> Json:
    data: Json = json.loads((LOCALES / language / f"{name}.json").read_text(encoding="utf-8"))
    return data


@pytest.fixture
def listed(client: httpx.Client) -> tuple[dict[str, Json], dict[str, Json]]:
    """The built-in node types and tools, as the Workflows and Tools pages get them."""
    builtin_types = set(node_registry(entry_points=False).names())
    types = {
        info["type"]: info
        for info in client.get("/api/workflows/node-types").json()
        if info["type"] in builtin_types
    }
    assert set(types) == builtin_types
    tools = {tool["id"]: tool for tool in client.get("/api/tools").json()}
    return types, {tool_id: tool for tool_id, tool in tools.items() if tool["source"] == "builtin"}


def _texts(language: str, entry: Json) -> list[str]:
    texts = [entry["name"], entry["description"]]
    texts += [*entry.get("inputs", {}).values(), *entry.get("outputs", {}).values()]
    for field in entry.get("config", {}).values():
        texts += [field["title"], field.get("description", ""), *field.get("options", {}).values()]
        for item in field.get("items", {}).values():
            texts += [item["title"], item.get("description", "")]
    return [text for text in texts if text]


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_builtin_node_type_has_its_texts(
    language: str, listed: tuple[dict[str, Json], dict[str, Json]]
) -> None:
    types, _ = listed
    catalogue = _catalogue(language, "nodes")
    assert sorted(set(types) - set(catalogue)) == [], f"{language}/nodes.json lacks these types"
    assert sorted(set(catalogue) - set(types)) == [], f"{language}/nodes.json: types not shipped"
    for type_id, info in types.items():
        entry = catalogue[type_id]
        where = f"{language}/nodes.json {type_id}"
        assert entry["name"].strip() and entry["description"].strip(), where
        for side in ("inputs", "outputs"):
            described = {slot["name"] for slot in info[side] if slot.get("description")}
            assert set(entry.get(side, {})) == described, f"{where} {side}"
        fields: Json = info["configSchema"].get("properties", {})
        texts: Json = entry.get("config", {})
        assert set(texts) == set(fields), f"{where} config"
        for name, field in fields.items():
            text = texts[name]
            assert text["title"].strip(), f"{where} config.{name}.title"
            assert ("description" in text) == bool(field.get("description")), (
                f"{where} config.{name}.description"
            )
            labelled = {str(s["value"]) for s in field.get("x-suggestions") or [] if s.get("label")}
            assert set(text.get("options", {})) == labelled, f"{where} config.{name}.options"
            item_fields: Json = (field.get("items") or {}).get("properties") or {}
            item_texts: Json = text.get("items", {})
            assert set(item_texts) == set(item_fields), f"{where} config.{name}.items"
            for item, item_field in item_fields.items():
                assert item_texts[item]["title"].strip(), f"{where} config.{name}.items.{item}"
                assert ("description" in item_texts[item]) == bool(item_field.get("description"))


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_builtin_tool_has_its_texts(
    language: str, listed: tuple[dict[str, Json], dict[str, Json]]
) -> None:
    _, tools = listed
    assert {"kb:Query", "chat:RollDice", "system:get_current_time"} <= set(tools)
    catalogue = _catalogue(language, "builtinTools")
    assert sorted(set(tools) - set(catalogue)) == [], f"{language}/builtinTools.json lacks these"
    assert sorted(set(catalogue) - set(tools)) == [], f"{language}/builtinTools.json: not shipped"
    for tool_id, tool in tools.items():
        entry = catalogue[tool_id]
        assert entry["name"].strip() and entry["description"].strip(), tool_id
        described = {
            name for name, p in tool["parameters"]["properties"].items() if p.get("description")
        }
        assert set(entry.get("parameters", {})) == described, f"{tool_id} parameters"


def test_the_chinese_texts_are_chinese_and_keep_the_placeholders(
    listed: tuple[dict[str, Json], dict[str, Json]],
) -> None:
    types, tools = listed
    nodes = _catalogue("zh", "nodes")
    for type_id, info in types.items():
        entry = nodes[type_id]
        assert CJK.search(entry["name"]) and CJK.search(entry["description"]), type_id
        english = [info["description"], *(s.get("description") or "" for s in info["inputs"])]
        fields = info["configSchema"].get("properties", {}).values()
        english += [field.get("description") or "" for field in fields]
        chinese = "\n".join(_texts("zh", entry))
        for placeholder in {p for text in english for p in PLACEHOLDER.findall(text)}:
            assert placeholder in chinese, f"zh/nodes.json {type_id} lost {placeholder}"
    builtin_tools = _catalogue("zh", "builtinTools")
    for tool_id in tools:
        entry = builtin_tools[tool_id]
        assert CJK.search(entry["name"]) and CJK.search(entry["description"]), tool_id
        for name, text in entry.get("parameters", {}).items():
            assert CJK.search(text), f"{tool_id} parameters.{name}"


@pytest.fixture
def builtin_workflows(client: httpx.Client) -> dict[str, Json]:
    """The built-in workflows as the Workflows page opens them, by id."""
    listed = client.get("/api/workflows").json()["workflows"]
    ids = [entry["id"] for entry in listed if entry["builtin"]]
    assert "chat-default" in ids
    return {workflow_id: client.get(f"/api/workflows/{workflow_id}").json() for workflow_id in ids}


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_builtin_workflow_has_its_texts(
    language: str, builtin_workflows: dict[str, Json]
) -> None:
    catalogue = _catalogue(language, "builtinWorkflows")
    shipped = set(builtin_workflows)
    assert sorted(shipped - set(catalogue)) == [], f"{language}/builtinWorkflows.json lacks these"
    assert sorted(set(catalogue) - shipped) == [], f"{language}/builtinWorkflows.json: not shipped"
    for workflow_id, workflow in builtin_workflows.items():
        entry = catalogue[workflow_id]
        where = f"{language}/builtinWorkflows.json {workflow_id}"
        assert entry["name"].strip() and entry["description"].strip(), where
        for side, field in (("inputs", "interfaceInputs"), ("outputs", "interfaceOutputs")):
            slots: Json = workflow.get(field) or {}
            described = {name for name, slot in slots.items() if slot.get("description")}
            assert set(entry.get(side, {})) == described, f"{where} {side}"
            for name in described:
                assert entry[side][name].strip(), f"{where} {side}.{name}"
        if language == "en":
            # The English is the server's own: the page shows the same words either way.
            assert entry["name"] == workflow["name"], where
            assert entry["description"] == workflow["description"], where
            for side, field in (("inputs", "interfaceInputs"), ("outputs", "interfaceOutputs")):
                for name, text in entry.get(side, {}).items():
                    assert text == workflow[field][name]["description"], f"{where} {side}.{name}"
        else:
            texts = [entry["name"], entry["description"]]
            texts += [*entry.get("inputs", {}).values(), *entry.get("outputs", {}).values()]
            for text in texts:
                assert CJK.search(text), f"{where}: {text!r} is not Chinese"
