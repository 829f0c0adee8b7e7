"""SillyTavern chat-completion preset files: reading, strict types, the global prompt order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from storyloom.core.errors import FileFormatError
from storyloom.sillytavern.completion_preset import read_completion_preset


def order(character_id: int, *identifiers: str) -> dict[str, Any]:
    return {
        "character_id": character_id,
        "order": [{"identifier": name, "enabled": True} for name in identifiers],
    }


@pytest.mark.parametrize(
    ("orders", "chosen"),
    [
        ([order(7, "a"), order(100000, "b"), order(100001, "c")], "c"),
        ([order(7, "a"), order(100000, "b")], "b"),
        ([order(7, "a"), order(8, "b")], "a"),
    ],
)
def test_global_order_is_the_dummy_character_then_the_older_one_then_the_first(
    orders: list[dict[str, Any]], chosen: str
) -> None:
    preset, _ = read_completion_preset({"prompt_order": orders})
    found = preset.global_order()
    assert found is not None and [entry.identifier for entry in found.order] == [chosen]


def test_a_preset_without_prompt_order_has_no_global_order() -> None:
    preset, _ = read_completion_preset({"temperature": 1})
    assert preset.global_order() is None


def test_fields_storyloom_does_not_read_are_kept() -> None:
    data = {"temperature": 0.7, "stream_openai": True, "prompts": [{"identifier": "x", "k": 1}]}
    preset, _ = read_completion_preset(data)
    dumped = preset.model_dump(exclude_none=True)
    assert dumped["stream_openai"] is True and dumped["prompts"][0]["k"] == 1


def test_a_string_temperature_is_refused_not_coerced() -> None:
    with pytest.raises(FileFormatError) as caught:
        read_completion_preset({"temperature": "0.7"}, name="warm")
    assert caught.value.path == Path("warm.json")
    assert [problem.field for problem in caught.value.problems] == ["temperature"]


def test_an_empty_role_reads_as_no_role() -> None:
    preset, _ = read_completion_preset({"prompts": [{"identifier": "main", "role": ""}]})
    assert preset.prompts is not None and preset.prompts[0].role is None


def test_a_file_is_read_and_named_by_its_path(tmp_path: Path) -> None:
    path = tmp_path / "Default.json"
    path.write_text(json.dumps({"openai_max_context": 8192}), encoding="utf-8")
    preset, source = read_completion_preset(path)
    assert source == path and preset.openai_max_context == 8192


@pytest.mark.parametrize(
    ("content", "reason"),
    [("{not json", "not valid JSON"), ("[1, 2]", "expected a JSON object, got list")],
)
def test_a_file_that_is_not_a_preset_is_refused(tmp_path: Path, content: str, reason: str) -> None:
    path = tmp_path / "broken.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(FileFormatError) as caught:
        read_completion_preset(path)
    assert caught.value.path == path and reason in str(caught.value)
