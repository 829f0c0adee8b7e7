"""The corpus's MVU cards: their Zod schema, starting variables, variable list and status
bar as storyloom serves them natively."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from storyloom.chat.prompt.macros import MacroContext, expand_macros
from storyloom.chat.reply.mvu import mvu_start
from storyloom.chat.reply.mvu_values import apply_mvu_ops, is_value_pair
from storyloom.chat.reply.update_blocks import decode_update_variable
from storyloom.sillytavern.character_card import read_png_card
from storyloom.sillytavern.mvu_zod import card_state_schema

Sample = Callable[[str], Path]


def entry(card: dict[str, Any], title: str) -> dict[str, Any]:
    entries = card["data"]["character_book"]["entries"]
    found: dict[str, Any] = next(e for e in entries if e.get("comment") == title)
    return found


def test_the_ai_card_s_zod_schema_fills_its_start_and_its_list_shows_yaml(
    corpus_sample: Sample,
) -> None:
    path = corpus_sample("zh_card_ai_v3json_mvu_27entries.json")
    card = json.loads(path.read_text(encoding="utf-8"))
    schema = card_state_schema(card)
    assert schema is not None
    stage = schema["properties"]["系统"]["properties"]["当前阶段"]
    assert stage["enum"][0] == "磨合期"
    stat_data, problems = mvu_start(card)
    assert problems == []
    assert stat_data["系统"]["当前地点"] == "玄天宗" and stat_data["小穗"]["觉醒进度"] == 0
    shown = expand_macros(
        entry(card, "变量列表")["content"], MacroContext(variables={"stat_data": stat_data})
    )
    assert (
        '系统:\n  当前阶段: 磨合期\n  当前任务: ""\n  当前地点: 玄天宗\n小穗:\n  觉醒进度: 0'
        in shown
    )
    ops, _ = decode_update_variable(
        '<JSONPatch>[{"op":"replace","path":"/系统/当前阶段","value":"不存在"},'
        '{"op":"replace","path":"/小穗/觉醒进度","value":"30"}]</JSONPatch>'
    )
    outcome = apply_mvu_ops({"stat_data": stat_data}, ops, schema)
    assert outcome.variables["stat_data"]["系统"]["当前阶段"] == "磨合期"
    assert outcome.variables["stat_data"]["小穗"]["觉醒进度"] == 30
    assert [(w.kind, w.rule) for w in outcome.warnings] == [("schema", "enum")]


def test_the_aozora_status_bar_reads_the_value_of_each_pair(corpus_sample: Sample) -> None:
    path = corpus_sample("zh_card_aozora_ri_mvu_statusbar_v2+v3.png")
    card = read_png_card(path.read_bytes(), path).card
    stat_data, problems = mvu_start(card)
    assert problems == []
    assert is_value_pair(stat_data["理"]["好感度"])
    ops, _ = decode_update_variable("_.set('理.好感度', 0, 5);//初见")
    after = apply_mvu_ops({"stat_data": stat_data}, ops).variables
    assert after["stat_data"]["理"]["好感度"][1] == stat_data["理"]["好感度"][1]
    bar = next(
        s for s in card["data"]["extensions"]["regex_scripts"] if s["scriptName"] == "状态栏-纯文本"
    )
    shown = expand_macros(bar["replaceString"], MacroContext(variables=after))
    assert shown.startswith("💖 当前好感度: 5\n")
