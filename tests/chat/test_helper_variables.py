"""Tavern Helper's variable macros as Tavern Helper reads and formats them."""

from __future__ import annotations

from typing import Any

from storyloom.chat.prompt.macros import MacroContext, expand_macros

STAT: dict[str, Any] = {
    "stat_data": {
        "理": {"$meta": {"extensible": False}, "好感度": [19, "好感"], "地点": "教堂"},
        "系统": {"当前任务": "", "笔记": "第一行\n第二行", "天数": 3, "旗": True, "空": None},
        "队伍": [{"名": "甲", "等级": 2}, ["x", "y"]],
        "a.b": "dotted key",
    }
}


def expand(text: str, **extra: Any) -> str:
    return expand_macros(text, MacroContext(variables=STAT, **extra))


def test_format_gives_yaml_in_tavern_helper_s_style_without_dollar_keys() -> None:
    assert expand("{{format_message_variable::stat_data.理}}") == (
        "好感度:\n  - 19\n  - 好感\n地点: 教堂"
    )
    assert expand("{{format_message_variable::stat_data.系统}}") == (
        '当前任务: ""\n笔记: |-\n  第一行\n  第二行\n天数: 3\n旗: true\n空: null'
    )
    assert expand("{{format_message_variable::stat_data.队伍}}") == (
        "- 名: 甲\n  等级: 2\n- - x\n  - y"
    )


def test_format_lines_up_under_the_text_before_it() -> None:
    assert expand("状态: {{format_chat_variable::stat_data.理}}") == (
        "状态: 好感度:\n      - 19\n      - 好感\n    地点: 教堂"
    )


def test_quoted_format_quotes_every_string() -> None:
    assert expand("{{format_message_variable_quoted::stat_data.理.地点}}") == "教堂"
    assert expand("{{format_message_variable_quoted::stat_data.理}}") == (
        '好感度:\n  - 19\n  - "好感"\n地点: "教堂"'
    )


def test_get_gives_strings_as_they_are_and_the_rest_as_json() -> None:
    assert expand("{{get_message_variable::stat_data.理.好感度[0]}}") == "19"
    assert expand("{{get_message_variable::stat_data.理.好感度.1}}") == "好感"
    assert expand("{{get_message_variable::stat_data.理}}") == (
        '{"好感度":[19,"好感"],"地点":"教堂"}'
    )
    assert expand('{{get_message_variable::stat_data["a.b"]}}') == "dotted key"
    assert expand("{{get_message_variable::stat_data.没有}}") == "null"


def test_each_scope_reads_its_own_variables() -> None:
    text = (
        "{{get_global_variable::g}} {{get_character_variable::c.d}} "
        "{{get_preset_variable::p}} {{format_global_variable::g}}"
    )
    out = expand(text, global_variables={"g": "全局"}, character_variables={"c": {"d": 4}})
    assert out == "全局 4 null 全局"
