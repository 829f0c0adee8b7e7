"""``*.tool.json`` files: the seed's example loads; bad files name file, field, reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from storyloom.core.errors import FileFormatError
from storyloom.tools.tool_definition import ScriptImpl, WorkflowImpl, load_tool_file

SEED_EXAMPLE = {
    "id": "BilibiliFetch:getSubtitle",
    "displayName": "获取 Bilibili 视频字幕",
    "description": "输入 Bilibili 视频 URL 或 BV 号，获取字幕内容",
    "implementation": {
        "type": "script",
        "command": "python scripts/BilibiliFetch.py",
        "protocol": "stdio",
        "timeout": 30000,
    },
    "parameters": {
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "Bilibili 视频的完整 URL 或 BV 号"}
        },
        "required": ["url"],
    },
    "configSchema": [
        {
            "key": "bilibiliCookie",
            "type": "string",
            "label": "Bilibili Cookie",
            "description": "Cookie",
        }
    ],
}


def write(tmp_path: Path, data: Any, name: str = "t.tool.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_the_seed_example_loads(tmp_path: Path) -> None:
    definition = load_tool_file(write(tmp_path, SEED_EXAMPLE))
    assert definition.id == "BilibiliFetch:getSubtitle"
    assert definition.display_name == "获取 Bilibili 视频字幕"
    assert isinstance(definition.implementation, ScriptImpl)
    assert definition.implementation.cwd == "."
    assert definition.config_schema[0].key == "bilibiliCookie"
    assert definition.model_dump()["displayName"] == "获取 Bilibili 视频字幕"


def test_a_workflow_tool_may_leave_its_parameters_to_inference(tmp_path: Path) -> None:
    data = {"id": "p:summarize", "implementation": {"type": "workflow", "workflow": "summarize"}}
    definition = load_tool_file(write(tmp_path, data))
    assert isinstance(definition.implementation, WorkflowImpl)
    assert definition.infers_parameters


@pytest.mark.parametrize(
    ("change", "field", "reason"),
    [
        ({"id": "no-namespace"}, "id", "<Namespace>:<name>"),
        ({"parameters": {"type": "string"}}, "parameters", "type object"),
        ({"parameters": {"type": "object", "properties": 3}}, "parameters", "not a JSON Schema"),
        ({"implementation": {"type": "telepathy"}}, "implementation", "telepathy"),
        (
            {"implementation": {"type": "script", "command": "x", "cwd": "../up"}},
            "implementation.script.cwd",
            "inside the plugin",
        ),
        ({"paramters": {}}, "paramters", "Extra inputs"),
    ],
)
def test_bad_files_name_the_field_and_reason(
    tmp_path: Path, change: dict[str, Any], field: str, reason: str
) -> None:
    path = write(tmp_path, {**SEED_EXAMPLE, **change})
    with pytest.raises(FileFormatError) as caught:
        load_tool_file(path)
    assert caught.value.path == path
    assert any(p.field == field and reason in p.reason for p in caught.value.problems), (
        caught.value.problems
    )


def test_service_tools_must_declare_parameters(tmp_path: Path) -> None:
    path = write(tmp_path, {"id": "p:f", "implementation": {"type": "service", "function": "f"}})
    with pytest.raises(FileFormatError, match="parameters: required for a service tool"):
        load_tool_file(path)


def test_a_file_that_is_not_json_says_so(tmp_path: Path) -> None:
    with pytest.raises(FileFormatError, match="not JSON"):
        load_tool_file(write(tmp_path, "{nope"))
