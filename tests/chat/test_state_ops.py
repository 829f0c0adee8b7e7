"""State ops: applying what a reply asks of the chat variables, never raising."""

from __future__ import annotations

import json
from typing import Any

import pytest

from storyloom.chat.reply.state_ops import (
    StateOp,
    StateOpsError,
    apply_ops,
    key_to_pointer,
    ops_from_json,
    ops_to_json,
    parse_number,
    parse_value,
)


def op(name: Any, path: str, value: Any = None, **kw: Any) -> StateOp:
    return StateOp(op=name, path=path, value=value, **kw)


# -- keys ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "pointer"),
    [
        ("hp", "/hp"),
        ("stats.hp", "/stats/hp"),
        ("/stats/hp", "/stats/hp"),
        ("items[0].name", "/items/0/name"),
        ('a["x.y"].b', "/a/x.y/b"),
        ("a['b c']", "/a/b c"),
        ("a/b", "/a~1b"),
        ("a~b.c", "/a~0b/c"),
        ("角色.好感度", "/角色/好感度"),
        ("  hp ", "/hp"),
    ],
)
def test_dotted_keys_become_escaped_json_pointers(key: str, pointer: str) -> None:
    assert key_to_pointer(key) == pointer


def test_a_key_with_a_slash_is_one_key_not_two() -> None:
    out = apply_ops({}, [op("set", "km/h", 30), op("set", "a~b", 1)])
    assert out.variables == {"km/h": 30, "a~b": 1}
    assert out.problems == []


def test_state_op_converts_a_dotted_path() -> None:
    assert op("set", "stats.hp", 1).path == "/stats/hp"
    assert op("set", "", {}).path == ""


def test_numbers_written_as_text_are_numbers() -> None:
    assert parse_number("10") == 10
    assert parse_number(" +5 ") == 5
    assert parse_number("-2.5") == -2.5
    assert parse_number("ten") is None
    assert parse_number("nan") is None
    assert parse_number(True) is None
    assert parse_number(None) is None


def test_values_are_json_when_they_parse_else_text() -> None:
    assert parse_value("90") == 90
    assert parse_value("true") is True
    assert parse_value('"90"') == "90"
    assert parse_value("[1, 2]") == [1, 2]
    assert parse_value(" Alice ") == "Alice"
    assert parse_value("007") == "007"
    assert parse_value("null") is None
    assert parse_value("Infinity") == "Infinity"


# -- set / add / sub -------------------------------------------------------------------------


def test_set_creates_missing_parent_objects() -> None:
    out = apply_ops({}, [op("set", "/stats/combat/hp", 90)])
    assert out.variables == {"stats": {"combat": {"hp": 90}}}
    assert out.problems == []
    assert len(out.applied) == 1


def test_set_into_an_array_by_index_and_dash() -> None:
    out = apply_ops(
        {"l": [1, 2]}, [op("set", "/l/0", 9), op("set", "/l/-", 3), op("set", "/l/3", 4)]
    )
    assert out.variables == {"l": [9, 2, 3, 4]}
    bad = apply_ops({"l": [1]}, [op("set", "/l/5", 0), op("set", "/l/x", 0)])
    assert bad.variables == {"l": [1]}
    assert len(bad.problems) == 2
    assert "past the end" in bad.problems[0]
    assert "not an index" in bad.problems[1]


def test_set_through_a_plain_value_is_a_problem_not_a_crash() -> None:
    out = apply_ops({"hp": 5}, [op("set", "/hp/max", 10), op("set", "/mp", 3)])
    assert out.variables == {"hp": 5, "mp": 3}
    assert out.problems == ["set /hp/max 10: /hp is a number, not an object or array"]
    assert [o.path for o in out.applied] == ["/mp"]


def test_set_of_the_root_needs_an_object() -> None:
    assert apply_ops({"a": 1}, [op("set", "", {"b": 2})]).variables == {"b": 2}
    out = apply_ops({"a": 1}, [op("set", "", 5)])
    assert out.variables == {"a": 1}
    assert "only an object" in out.problems[0]


def test_add_and_sub_treat_missing_as_zero_and_accept_numbers_as_text() -> None:
    out = apply_ops(
        {"gold": "5", "hp": 10},
        [op("add", "gold", 10), op("sub", "hp", "2.5"), op("add", "xp", 3), op("sub", "debt", 1)],
    )
    assert out.variables == {"gold": 15, "hp": 7.5, "xp": 3, "debt": -1}
    assert out.problems == []


def test_add_of_a_non_number_is_skipped_with_a_problem() -> None:
    out = apply_ops(
        {"name": "Alice", "gold": 1},
        [op("add", "gold", "lots"), op("add", "name", 1), op("add", "gold", 1)],
    )
    assert out.variables == {"name": "Alice", "gold": 2}
    assert out.problems == [
        'add /gold "lots": "lots" is not a number',
        'add /name 1: the current value "Alice" is not a number',
    ]


def test_add_counts_null_as_zero_but_not_booleans() -> None:
    out = apply_ops({"a": None, "b": True}, [op("add", "a", 2), op("add", "b", 1)])
    assert out.variables == {"a": 2, "b": True}
    assert len(out.problems) == 1


# -- remove / push / pull --------------------------------------------------------------------


def test_remove_deletes_keys_and_array_items() -> None:
    out = apply_ops({"a": 1, "l": ["x", "y"]}, [op("remove", "a"), op("remove", "/l/0")])
    assert out.variables == {"l": ["y"]}
    assert out.problems == []


def test_remove_of_something_missing_is_a_problem() -> None:
    out = apply_ops({"a": {}}, [op("remove", "/a/b"), op("remove", "/x/y"), op("remove", "")])
    assert out.variables == {"a": {}}
    assert out.problems == [
        "remove /a/b: nothing there to remove",
        "remove /x/y: /x does not exist",
        "remove /: cannot remove the variables themselves",
    ]


def test_push_appends_and_creates_the_array() -> None:
    out = apply_ops(
        {"inv": ["sword"]}, [op("push", "inv", "shield"), op("push", "bag.items", [1, 2])]
    )
    assert out.variables == {"inv": ["sword", "shield"], "bag": {"items": [[1, 2]]}}


def test_push_onto_a_non_array_is_a_problem() -> None:
    out = apply_ops({"inv": "none"}, [op("push", "inv", "x")])
    assert out.variables == {"inv": "none"}
    assert out.problems == ['push /inv "x": the current value is a string, not an array']


def test_pull_removes_every_equal_element() -> None:
    out = apply_ops({"l": ["a", "b", "a", 3]}, [op("pull", "l", "a"), op("pull", "l", "3")])
    assert out.variables == {"l": ["b"]}
    missing = apply_ops({"l": ["a"]}, [op("pull", "l", "z"), op("pull", "nope", "a")])
    assert missing.variables == {"l": ["a"]}
    assert len(missing.problems) == 2


# -- patch -----------------------------------------------------------------------------------


def test_patch_applies_rfc6902_ops_under_its_path() -> None:
    start = {"stat_data": {"系统": {"当前阶段": "磨合期"}, "list": [1]}}
    patch = [
        {"op": "replace", "path": "/系统/当前阶段", "value": "损友成型"},
        {"op": "add", "path": "/list/-", "value": 2},
        {"op": "copy", "from": "/list/0", "path": "/first"},
        {"op": "move", "from": "/first", "path": "/moved"},
        {"op": "test", "path": "/moved", "value": 1},
    ]
    out = apply_ops(start, [op("patch", "/stat_data", patch=patch)])
    assert out.problems == []
    assert out.variables == {
        "stat_data": {"系统": {"当前阶段": "损友成型"}, "list": [1, 2], "moved": 1}
    }


def test_a_failing_patch_op_is_skipped_and_the_others_apply() -> None:
    patch = [
        {"op": "replace", "path": "/missing", "value": 1},
        {"op": "add", "path": "/a", "value": 1},
        {"op": "frobnicate", "path": "/a"},
        {"op": "test", "path": "/a", "value": 2},
        {"op": "remove", "path": "/a/b/c"},
        {"op": "add", "path": "/b", "value": 2},
    ]
    out = apply_ops({}, [op("patch", "", patch=patch)])
    assert out.variables == {"a": 1, "b": 2}
    assert len(out.problems) == 4
    assert out.problems[0].startswith("patch / op 1 replace /missing 1:")
    assert "unknown operation 'frobnicate'" in out.problems[1]
    assert out.problems[2].startswith("patch / op 4 test /a 2:")
    assert out.problems[3].startswith("patch / op 5 remove /a/b/c:")
    assert len(out.applied) == 1


def test_a_patch_entry_that_is_not_an_object_is_a_problem() -> None:
    bad = StateOp.model_construct(op="patch", path="", value=None, patch=["junk"])  # type: ignore[list-item]
    out = apply_ops({"a": 1}, [bad])
    assert out.variables == {"a": 1}
    assert out.problems == ['patch / op 1 "junk": an operation must be an object']


def test_a_patch_whose_ops_all_fail_is_not_counted_as_applied() -> None:
    patch = [{"op": "remove", "path": "/nope"}]
    out = apply_ops({"n": 1}, [op("patch", "", patch=patch), op("patch", "/n", patch=patch)])
    assert out.applied == []
    assert len(out.problems) == 2
    assert out.problems[1] == "patch /n: the value there is a number, not an object or array"


def test_patch_creates_its_missing_base_object() -> None:
    out = apply_ops(
        {}, [op("patch", "/stat_data", patch=[{"op": "add", "path": "/x", "value": 1}])]
    )
    assert out.variables == {"stat_data": {"x": 1}}


def test_patch_understands_mvu_insert_and_delta() -> None:
    patch = [
        {"op": "insert", "path": "/items/-", "value": "key"},
        {"op": "delta", "path": "/hp", "value": -5},
        {"op": "delta", "path": "/hp", "value": "many"},
    ]
    out = apply_ops({"s": {"items": [], "hp": 20}}, [op("patch", "/s", patch=patch)])
    assert out.variables == {"s": {"items": ["key"], "hp": 15}}
    assert len(out.problems) == 1
    assert "not a number" in out.problems[0]


def test_patch_cannot_turn_the_variables_into_a_plain_value() -> None:
    patch = [{"op": "replace", "path": "", "value": 3}]
    out = apply_ops({"a": 1}, [op("patch", "", patch=patch)])
    assert out.variables == {"a": 1}
    assert len(out.problems) == 1


def test_a_patch_op_needs_its_patch_list() -> None:
    with pytest.raises(ValueError, match="patch"):
        StateOp(op="patch", path="")


# -- copies and round trips ------------------------------------------------------------------


def test_apply_ops_never_changes_the_callers_dict_or_aliases_op_values() -> None:
    start: dict[str, Any] = {"stats": {"hp": 1}, "l": [1]}
    snapshot = json.dumps(start)
    value: dict[str, Any] = {"nested": [1]}
    out = apply_ops(start, [op("set", "stats.hp", 2), op("push", "l", 2), op("set", "obj", value)])
    assert json.dumps(start) == snapshot
    value["nested"].append(2)
    assert out.variables["obj"] == {"nested": [1]}


def test_ops_round_trip_through_json() -> None:
    ops = [
        op("set", "/a", None),
        op("add", "/b", 1.5),
        op("remove", "/c"),
        op("patch", "/stat_data", patch=[{"op": "add", "path": "/x", "value": [1]}]),
    ]
    data = ops_to_json(ops)
    assert data[0] == {"op": "set", "path": "/a", "value": None}
    assert "patch" not in data[1]
    assert ops_from_json(json.loads(json.dumps(data))) == ops


def test_bad_op_lists_raise_naming_each_entry() -> None:
    with pytest.raises(StateOpsError) as info:
        ops_from_json([{"op": "explode", "path": "/a"}, 3, {"op": "set"}])
    message = str(info.value)
    assert "[0].op" in message
    assert "[1]: an op must be an object" in message
    assert "[2].path" in message
    with pytest.raises(StateOpsError, match="must be a list"):
        ops_from_json({"op": "set"})


def test_bad_op_lists_can_be_read_tolerantly() -> None:
    problems: list[str] = []
    ops = ops_from_json([{"op": "set", "path": "hp", "value": 1}, "junk"], problems)
    assert ops == [op("set", "/hp", 1)]
    assert problems == ["[1]: an op must be an object, not str"]


def test_describe_names_the_op_briefly() -> None:
    assert op("add", "/gold", 10).describe() == "add /gold 10"
    assert op("remove", "").describe() == "remove /"
    assert op("set", "/t", "x" * 100).describe().endswith("…")
