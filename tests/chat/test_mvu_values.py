"""MVU's rules under stat_data: value pairs, $meta and the schema."""

from __future__ import annotations

from typing import Any

from storyloom.chat.reply.mvu_values import apply_mvu_ops, with_defaults
from storyloom.chat.reply.state_ops import StateOp
from storyloom.chat.reply.update_blocks import decode_update_variable


def run(
    variables: dict[str, Any], block: str, schema: dict[str, Any] | None = None
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    ops, problems = decode_update_variable(block)
    assert problems == []
    outcome = apply_mvu_ops(variables, ops, schema)
    return outcome.variables["stat_data"], [(w.kind, w.path) for w in outcome.warnings]


def test_set_with_old_and_new_on_a_pair_keeps_the_description() -> None:
    data, warnings = run(
        {"stat_data": {"理": {"好感度": [19, "desc"]}}}, "_.set('理.好感度', 19, 25);"
    )
    assert data == {"理": {"好感度": [25, "desc"]}} and warnings == []


def test_json_patch_replace_and_delta_change_the_pair_s_value_and_keep_numbers() -> None:
    data, _ = run(
        {"stat_data": {"hp": [10, "health"], "name": ["A", "who"]}},
        '<JSONPatch>[{"op":"replace","path":"/hp","value":"12"},'
        '{"op":"delta","path":"/hp","value":3},'
        '{"op":"replace","path":"/name","value":["B","someone"]}]</JSONPatch>',
    )
    assert data == {"hp": [15, "health"], "name": ["B", "someone"]}


def test_meta_refuses_new_keys_and_required_removals_and_recursive_extensible_opens() -> None:
    variables = {
        "stat_data": {
            "封": {"$meta": {"extensible": False}, "a": 1},
            "表": {"$meta": {"required": ["留"]}, "留": 1, "走": 2},
            "开": {"$meta": {"recursiveExtensible": True}, "子": {"x": 1}},
        }
    }
    data, warnings = run(
        variables,
        '<JSONPatch>[{"op":"add","path":"/封/b","value":2},{"op":"remove","path":"/封/a"},'
        '{"op":"remove","path":"/表/留"},{"op":"remove","path":"/表/走"},'
        '{"op":"add","path":"/开/子/y","value":2},{"op":"add","path":"/表/新","value":3}]'
        "</JSONPatch>",
    )
    assert warnings == [("not_extensible", "封.b"), ("required", "封.a"), ("required", "表.留")]
    assert data["表"] == {"$meta": {"required": ["留"]}, "留": 1, "新": 3}
    assert data["开"]["子"] == {"x": 1, "y": 2}


def test_an_update_that_breaks_the_schema_is_refused_and_one_that_was_broken_is_not() -> None:
    schema = {
        "type": "object",
        "properties": {
            "hp": {"type": "number", "maximum": 100, "x-coerce": "number"},
            "mood": {"type": "string", "enum": ["calm", "angry"], "x-catch": "calm"},
            "old": {"type": "string"},
        },
    }
    variables = {"stat_data": {"hp": 50, "mood": "calm", "old": 7}}  # old breaks it already
    data, warnings = run(
        variables,
        "_.set('hp', 120);_.set('hp', '60');_.set('mood', 'sleepy');_.set('old', 8);",
        schema,
    )
    assert data == {"hp": 60, "mood": "calm", "old": 8}
    assert warnings == [("schema", "hp")]


def test_ops_outside_stat_data_apply_as_before() -> None:
    outcome = apply_mvu_ops({"gold": 1}, [StateOp(op="add", path="/gold", value=2)])
    assert outcome.variables == {"gold": 3} and outcome.warnings == []


def test_defaults_fill_what_is_missing_at_every_depth() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "object", "default": {}, "properties": {"b": {"default": 1}}},
            "c": {"type": "string", "default": "x"},
        },
    }
    assert with_defaults(schema, {"c": "kept"}) == {"a": {"b": 1}, "c": "kept"}


def test_a_set_deep_under_a_closed_object_is_refused_at_the_key_it_would_add() -> None:
    data, warnings = run(
        {"stat_data": {"封": {"$meta": {"extensible": False}, "a": 1}}},
        "_.set('封.新.深', 1);",
    )
    assert warnings == [("not_extensible", "封.新")]
    assert data == {"封": {"$meta": {"extensible": False}, "a": 1}}
