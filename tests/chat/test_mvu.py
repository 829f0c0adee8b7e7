"""MVU cards: their [InitVar] entry starts the state, their JSON Patch updates change it."""

from __future__ import annotations

import json
from pathlib import Path

from storyloom.chat.reply.mvu import initial_variables

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "st-samples"
MVU_CARD = SAMPLES / "zh_card_ai_v3json_mvu_27entries.json"


def test_the_sample_cards_initvar_entry_gives_its_starting_variables() -> None:
    card = json.loads(MVU_CARD.read_text(encoding="utf-8"))
    variables, problems = initial_variables(card)
    assert problems == []
    assert variables["系统"]["当前地点"] == "玄天宗"
    assert variables["小穗"] == {"觉醒进度": 0}


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
