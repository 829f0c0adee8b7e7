"""Which slot types feed which, and how outside values are read."""

import json
from pathlib import Path

import pytest

from storyloom.workflow.slot_types import ALL_TYPES, can_connect, convert, parse_value


def test_json_types_connect_only_through_declared_conversions() -> None:
    assert can_connect("INTEGER", "FLOAT")
    assert not can_connect("FLOAT", "INTEGER")
    assert not can_connect("STRING", "INTEGER")
    assert can_connect("MESSAGES", "ARRAY") and not can_connect("ARRAY", "MESSAGES")
    assert can_connect("EMBEDDING", "OBJECT") and not can_connect("EMBEDDING", "ARRAY")
    assert all(can_connect("ANY", t) and can_connect(t, "ANY") for t in ALL_TYPES)
    assert all(can_connect(t, "STRING") for t in ALL_TYPES)


def test_conversion_turns_values_into_what_the_target_slot_expects() -> None:
    assert convert(3, "INTEGER", "FLOAT") == 3.0
    assert convert({"a": "é"}, "OBJECT", "STRING") == '{"a": "é"}'
    assert convert([1], "LORE_HITS", "ARRAY") == [1]


@pytest.mark.parametrize(
    ("raw", "type_name", "value"),
    [("3", "INTEGER", 3), ("2", "FLOAT", 2.0), ("yes", "BOOLEAN", True), ('["a"]', "ARRAY", ["a"])],
)
def test_command_line_text_is_read_as_the_declared_type(
    raw: str, type_name: str, value: object
) -> None:
    assert parse_value(raw, type_name) == value


@pytest.mark.parametrize(
    ("raw", "type_name"), [("three", "INTEGER"), ("1.5", "INTEGER"), ("{}", "ARRAY"), (3, "STRING")]
)
def test_a_value_of_the_wrong_type_says_what_was_expected(raw: object, type_name: str) -> None:
    with pytest.raises(ValueError, match="expected"):
        parse_value(raw, type_name)


def test_the_web_apps_copy_of_the_table_matches_can_connect() -> None:
    """The canvas refuses connections with a TypeScript copy of this rule; its vitest
    checks it against this fixture, and this test keeps the fixture true to Python."""
    fixture = Path(__file__).resolve().parents[2] / "web" / "tests" / "workflowSlotPairs.json"
    table = json.loads(fixture.read_text(encoding="utf-8"))
    assert sorted(table["types"]) == sorted(ALL_TYPES)
    wrong = [
        (source, target)
        for source, target, allowed in table["pairs"]
        if can_connect(source, target) != allowed
    ]
    assert wrong == []
    listed = {(s, t) for s, t, _ in table["pairs"]}
    assert {(s, t) for s in ALL_TYPES for t in ALL_TYPES} <= listed
