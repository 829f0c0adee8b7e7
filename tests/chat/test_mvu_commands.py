"""MVU's command lines and structure rules in a chat started from an [InitVar] card."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from storyloom.chat.reply.mvu_math import MathError, evaluate
from storyloom.chat.reply.mvu_values import MVU_SCHEMA, apply_mvu_ops, mvu_variables
from storyloom.chat.reply.update_blocks import decode_update_variable

INIT: dict[str, Any] = {
    "角色": {"好感度": [10, "好感"], "醒着": True, "名字": "理"},
    "背包": ["$__META_EXTENSIBLE__$", "剑"],
    "技能": ["火球"],
    "同伴": {"$meta": {"extensible": True, "required": ["甲"]}, "甲": 1, "乙": 2},
}


def play(block: str, start: dict[str, Any] | None = None) -> tuple[Any, list[Any], list[str]]:
    variables = mvu_variables(start if start is not None else INIT)
    ops, problems = decode_update_variable(block)
    outcome = apply_mvu_ops(variables, ops)
    return (
        outcome.variables["stat_data"],
        [(w.kind, w.path) for w in outcome.warnings],
        problems + outcome.problems,
    )


def test_meta_and_the_array_marker_leave_stat_data_and_become_the_structure() -> None:
    variables = mvu_variables(INIT)
    assert variables["stat_data"]["背包"] == ["剑"]
    assert "$meta" not in variables["stat_data"]["同伴"]
    structure = variables[MVU_SCHEMA]
    assert structure["extensible"] is False
    assert structure["properties"]["背包"]["extensible"] is True
    assert structure["properties"]["技能"]["extensible"] is False


def test_set_with_two_or_three_arguments_and_math() -> None:
    data, warnings, problems = play(
        "_.set('角色.好感度', 10, 10 + 2);_.set('角色.名字', '10 + 2');_.set('角色.醒着', false);"
    )
    assert data["角色"] == {"好感度": [12, "好感"], "醒着": False, "名字": "10 + 2"}
    assert warnings == [] and problems == []


def test_set_on_a_missing_path_is_a_problem_in_an_mvu_chat() -> None:
    data, _, problems = play("_.set('角色.新', 1);")
    assert "新" not in data["角色"] and "does not exist" in problems[0]


def test_add_changes_numbers_and_pairs_with_math() -> None:
    data, _, problems = play("_.add('角色.好感度', math.pow(2, 3));_.add('角色.名字', 1);")
    assert data["角色"]["好感度"] == [18, "好感"]
    assert problems == ["_.add('角色.名字', 1): 角色.名字 is not a number or a date"]


def test_assign_pushes_inserts_and_sets_keys_where_the_structure_allows() -> None:
    data, warnings, _ = play(
        "_.assign('背包', '盾');_.assign('背包', 0, '药');"
        "_.assign('技能', '冰');_.assign('同伴', '丙', 3);_.assign('角色', '新', 1);"
        "_.assign('同伴', {'丁': 4});"
    )
    assert data["背包"] == ["药", "剑", "盾"]
    assert data["技能"] == ["火球"]
    assert data["同伴"] == {"甲": 1, "乙": 2, "丙": 3, "丁": 4}
    assert "新" not in data["角色"]
    assert warnings == [("not_extensible", "技能"), ("not_extensible", "角色.新")]


def test_remove_by_path_value_index_and_key() -> None:
    data, warnings, problems = play(
        "_.remove('背包', '剑');_.remove('同伴', '乙');_.remove('同伴', 0);"
        "_.remove('技能', 0);_.remove('角色.名字');_.remove('同伴.无');"
    )
    assert data["背包"] == [] and data["同伴"] == {"甲": 1}
    assert data["技能"] == ["火球"] and data["角色"]["名字"] == "理"
    assert warnings == [
        ("required", "同伴.甲"),
        ("not_extensible", "技能"),
        ("required", "角色.名字"),
    ]
    assert problems == ["_.remove('同伴.无'): 同伴.无 does not exist"]


def test_a_value_written_with_its_own_meta_opens_as_it_says_and_loses_it() -> None:
    data, warnings, _ = play(
        '_.assign(\'同伴\', \'丙\', {"$meta": {"extensible": true}, "hp": 1});'
        "_.assign('同伴.丙', 'mp', 2);"
    )
    assert data["同伴"]["丙"] == {"hp": 1, "mp": 2} and warnings == []


def test_a_chat_without_mvu_structure_keeps_storyloom_s_open_objects() -> None:
    ops, _ = decode_update_variable("_.set('a.b', 1);_.assign('list', 'x');")
    outcome = apply_mvu_ops({"stat_data": {"list": []}}, ops)
    assert outcome.variables["stat_data"] == {"a": {"b": 1}, "list": ["x"]}


def test_modify_and_alter_are_mvu_s_older_add_and_flip_a_boolean() -> None:
    data, _, problems = play(
        "_.modify('角色.醒着');_.alter('角色.好感度', 5);_.alter('角色.好感度');"
    )
    assert data["角色"]["醒着"] is False and data["角色"]["好感度"] == [15, "好感"]
    assert problems == ["_.alter('角色.好感度'): 角色.好感度 is not a boolean"]
    _, _, problems = play("_.add('角色.醒着');")
    assert problems and "takes a path and an amount" in problems[0]


def test_add_moves_a_date_by_milliseconds() -> None:
    start = {"时间": ["2024-01-01T12:00:00Z", "当前时间"]}
    data, _, problems = play("_.add('时间', 10 * 60 * 1000);", start)
    assert data["时间"] == ["2024-01-01T12:10:00.000Z", "当前时间"] and problems == []


def test_strict_set_writes_a_pair_whole() -> None:
    start = {"$meta": {"strictSet": True}, "好感": [1, "说明"]}
    data, _, _ = play("_.set('好感', [2, '新说明']);_.set('好感', 3);", start)
    assert data == {"好感": 3}


def test_math_is_a_whitelist() -> None:
    assert evaluate("(1 + 2) * 3 - 4 / 2") == 7
    assert evaluate("math.sqrt(16) + Math.abs(-1)") == 5
    assert evaluate("__import__('os')") is None
    assert evaluate("hello") is None
    for bad in ("1 / 0", "math.exp(1)", "2 ** 100000", "9" * 10 + " ** 64"):
        try:
            evaluate(bad)
        except MathError:
            continue
        raise AssertionError(bad)


def test_unreadable_math_is_a_problem_on_the_message() -> None:
    _, _, problems = play("_.add('角色.好感度', 1 / 0);_.set('角色.好感度', 1e999);")
    assert len(problems) == 2 and "division by zero" in problems[0]
    assert "not a finite number" in problems[1]


COMMANDS = st.sampled_from(
    ["set", "add", "modify", "alter", "assign", "insert", "remove", "unset", "delete"]
)
ARG = st.one_of(
    st.sampled_from(
        [
            "'角色.好感度'",
            "'背包'",
            "'同伴'",
            "'技能.0'",
            "'x'",
            "1 + 2",
            "math.pow(2, 99)",
            "-1",
            "0",
            "'-'",
            "{'a': 1}",
            "[1, 2]",
            "null",
            "undefined",
            "1 / 0",
            "''",
            "true",
        ]
    ),
    st.text(max_size=12),
)


@settings(max_examples=300, deadline=None)
@given(name=COMMANDS, args=st.lists(ARG, max_size=4))
def test_any_command_line_applies_or_becomes_a_problem(name: str, args: list[str]) -> None:
    block = f"_.{name}({', '.join(args)});"
    variables = mvu_variables(INIT)
    ops, problems = decode_update_variable(block)
    outcome = apply_mvu_ops(variables, ops)
    assert isinstance(outcome.variables["stat_data"], dict)
    unchanged = outcome.variables == variables
    assert outcome.applied or problems or outcome.problems or outcome.warnings or unchanged


def test_index_zero_addresses_a_pair_s_value_and_elements_of_a_locked_array_change() -> None:
    data, warnings, problems = play("_.set('角色.好感度[0]', 30);_.set('技能[0]', '冰');")
    assert data["角色"]["好感度"] == [30, "好感"] and data["技能"] == ["冰"]
    assert warnings == [] and problems == []


def test_json_patch_follows_the_same_structure_rules() -> None:
    block = (
        '<JSONPatch>[{"op": "add", "path": "/技能/-", "value": "冰"},'
        '{"op": "add", "path": "/背包/0", "value": "药"},'
        '{"op": "add", "path": "/同伴/丙", "value": 3},'
        '{"op": "remove", "path": "/角色/名字"}]</JSONPatch>'
    )
    data, warnings, _ = play(block)
    assert data["技能"] == ["火球"] and data["背包"] == ["药", "剑"]
    assert data["同伴"]["丙"] == 3 and data["角色"]["名字"] == "理"
    assert warnings == [("not_extensible", "技能"), ("required", "角色.名字")]


def test_a_merge_into_a_locked_object_is_refused_whole() -> None:
    data, warnings, _ = play("_.assign('角色', {'名字': '新'});")
    assert data["角色"]["名字"] == "理" and warnings == [("not_extensible", "角色")]


def test_javascript_style_literals_are_read_and_yaml_tricks_are_text() -> None:
    data, _, problems = play(
        "_.set('角色.名字', ['a', 'b']);_.set('角色.醒着', [2024-01-01]);"
        "_.assign('同伴', '丙', [&x [1], *x]);"
    )
    assert data["角色"]["名字"] == ["a", "b"] and problems == []
    assert data["角色"]["醒着"] == "[2024-01-01]"
    assert data["同伴"]["丙"] == "[&x [1], *x]"
