"""Paths in update blocks: JSON Pointers kept exactly, dotted keys where they are allowed."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from storyloom.chat.reply.state_ops import apply_ops, escape_pointer_part
from storyloom.chat.reply.update_blocks import (
    decode_json_patch,
    decode_state_update,
    decode_update_variable,
)


def state_update(patch: list[dict[str, Any]], variables: dict[str, Any]) -> Any:
    ops, problems = decode_state_update(json.dumps(patch, ensure_ascii=False))
    outcome = apply_ops(variables, ops)
    return outcome.variables, problems + outcome.problems


def test_a_pointer_to_a_blank_key_is_that_key_not_the_empty_one() -> None:
    variables, problems = state_update(
        [{"op": "replace", "path": "/ ", "value": 8}, {"op": "add", "path": "/x ", "value": 1}],
        {"": 0, " ": 7},
    )
    assert problems == []
    assert variables == {"": 0, " ": 8, "x ": 1}


def test_a_test_op_on_a_blank_key_reads_that_key() -> None:
    _, problems = state_update([{"op": "test", "path": "/ ", "value": 7}], {"": 0, " ": 7})
    assert problems == []
    _, problems = state_update([{"op": "test", "path": "/ ", "value": 0}], {"": 0, " ": 7})
    assert len(problems) == 1


def test_a_state_update_path_without_a_leading_slash_is_an_error() -> None:
    variables, problems = state_update(
        [{"op": "add", "path": "foo", "value": "bar"}, {"op": "add", "path": "/ok", "value": 1}],
        {},
    )
    assert variables == {"ok": 1}
    assert len(problems) == 1
    assert "op 1" in problems[0] and "RFC 6901" in problems[0]


def test_a_move_from_a_path_that_is_not_a_pointer_is_an_error() -> None:
    variables, problems = state_update([{"op": "move", "from": "a", "path": "/b"}], {"a": 1})
    assert variables == {"a": 1}
    assert "from a" in problems[0]


def test_state_update_op_tags_keep_a_pointer_exactly_and_strip_a_dotted_key() -> None:
    ops, problems = decode_state_update(
        '<set key="/ " value="1"/><set key=" stats.hp " value="2"/>'
    )
    assert problems == []
    assert [op.path for op in ops] == ["/ ", "/stats/hp"]


def test_a_state_update_object_still_sets_dotted_keys() -> None:
    ops, problems = decode_state_update('{"stats.hp": 9}')
    assert problems == []
    assert apply_ops({}, ops).variables == {"stats": {"hp": 9}}


def test_mvu_json_patch_keeps_blank_keys_under_its_root() -> None:
    ops, problems = decode_json_patch('[{"op": "replace", "path": "/ a ", "value": 2}]')
    assert problems == []
    out = apply_ops({"stat_data": {" a ": 1, "a": 0}}, ops)
    assert out.problems == []
    assert out.variables == {"stat_data": {" a ": 2, "a": 0}}


def test_mvu_json_patch_reads_slashless_and_dotted_paths_as_mvu_does() -> None:
    ops, problems = decode_json_patch(
        '[{"op": "replace", "path": "角色.好感度", "value": 5},'
        ' {"op": "replace", "path": "a/b", "value": 1}]'
    )
    assert problems == []
    out = apply_ops({"stat_data": {"角色": {"好感度": 0}, "a": {"b": 0}}}, ops)
    assert out.variables == {"stat_data": {"角色": {"好感度": 5}, "a": {"b": 1}}}


def test_mvu_set_commands_still_take_dotted_paths() -> None:
    ops, problems = decode_update_variable("_.set('系统.阶段', '旧', '新');")
    assert problems == []
    assert ops[0].path == "/stat_data" and ops[0].patch is not None
    assert (ops[0].patch[0]["path"], ops[0].patch[0]["args"]) == ("/系统/阶段", ["新"])


@settings(max_examples=150, deadline=None)
@given(key=st.text(max_size=8), value=st.integers())
def test_any_key_round_trips_through_a_pointer(key: str, value: int) -> None:
    pointer = "/" + escape_pointer_part(key)
    variables, problems = state_update([{"op": "add", "path": pointer, "value": value}], {})
    assert problems == []
    assert variables == {key: value}
