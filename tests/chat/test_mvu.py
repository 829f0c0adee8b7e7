"""MVU cards: their [InitVar] entry starts the state, their JSON Patch updates change it."""

from __future__ import annotations

import json
from pathlib import Path

from storyloom.chat.reply.mvu import initial_variables

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sillytavern"
MVU_CARD = FIXTURES / "card_academy_zh_v3_mvu.json"


def test_the_cards_initvar_entry_gives_its_starting_variables() -> None:
    card = json.loads(MVU_CARD.read_text(encoding="utf-8"))
    variables, problems = initial_variables(card)
    assert problems == []
    assert variables["书院"]["当前地点"] == "藏书楼"
    assert variables["阿砚"] == {"墨技进度": 0}


def test_a_broken_initvar_entry_is_reported_and_skipped() -> None:
    card = {
        "data": {
            "character_book": {
                "entries": [
                    {"comment": "[InitVar] a", "content": "hp: [1, 2"},
                    {"comment": "[InitVar] b", "content": "- just\n- a list"},
                    {"comment": "[InitVar] c", "content": '{"gold": 5}'},
                    {"comment": "lore", "content": "hp: 9"},
                ]
            }
        }
    }
    variables, problems = initial_variables(card)
    assert variables == {"gold": 5}
    assert len(problems) == 2 and "[InitVar] a" in problems[0]
