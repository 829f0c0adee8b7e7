"""Every lore reason a scan gives carries a term and values, so a page can say it in its
own language: the filters (disabled, generation type, character filter, delay, trigger
conditions), inclusion groups, recursion and delay until recursion. Each term has words
in the web app's English and Chinese catalogues (``chat.prompt.reason.<term>``), and the
values fill every placeholder of those words."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, get_args

import pytest

from storyloom.knowledge.activation import ActivationEngine, ActivationRequest, ScanMessage
from storyloom.knowledge.activation_request import CharacterContext
from storyloom.knowledge.activation_result import Reason
from storyloom.knowledge.activation_settings import ActivationSettings
from storyloom.knowledge.caiu import (
    CAIU,
    ActivationCriteria,
    CharacterFilter,
    Content,
    ManagementMetadata,
    TriggerCondition,
)
from storyloom.knowledge.inclusion_groups import GroupTerm
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.trigger_conditions import ConditionTerm

LOCALES = Path(__file__).resolve().parents[2] / "web" / "src" / "locales"
PLACEHOLDER = re.compile(r"\{(\w+)\}")


def catalogue(language: str) -> dict[str, str]:
    words = json.loads((LOCALES / language / "chat.json").read_text(encoding="utf-8"))
    return dict(words["prompt"]["reason"])


def entry(entry_id: str, text: str = "", enabled: bool = True, **criteria: Any) -> CAIU:
    return CAIU(
        id=entry_id,
        displayName=entry_id,
        content=Content(value=text or f"about {entry_id}"),
        activation_criteria=ActivationCriteria(**criteria),
        management_metadata=ManagementMetadata(is_enabled=enabled),
    )


def reasons_of(
    entries: list[CAIU], text: str, settings: ActivationSettings | None = None, **request: Any
) -> dict[str, list[Reason]]:
    engine = ActivationEngine(
        [KnowledgeBase(kb_id="kb", entries=entries)],
        settings or ActivationSettings(),
        count_tokens=lambda words: len(words.split()),
    )
    result = engine.activate(ActivationRequest(messages=[ScanMessage("User", text)], **request))
    found = {item.entry_id: item.reasons for item in result.activated}
    found.update({item.entry_id: item.reasons for item in result.dropped})
    return found


def terms(reasons: dict[str, list[Reason]]) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    return {
        name: [(r.term, dict(r.values)) for r in said if r.rule not in ("primary_key",)]
        for name, said in reasons.items()
    }


def test_filters_say_their_reason_as_a_term_with_values() -> None:
    found = terms(
        reasons_of(
            [
                entry("off", keywords=["storm"], enabled=False),
                entry("never", keywords=["storm"], never_activate=True),
                entry("quiet", keywords=["storm"], generation_triggers=["continue", "impersonate"]),
                entry("late", keywords=["storm"], delay=5),
                entry(
                    "others",
                    keywords=["storm"],
                    character_filter=CharacterFilter(names=["Aria"], is_exclude=True),
                ),
                entry("bran", keywords=["storm"], character_filter=CharacterFilter(names=["Bran"])),
                entry(
                    "tagged",
                    keywords=["storm"],
                    character_filter=CharacterFilter(tags=["villain"]),
                ),
                entry(
                    "untagged",
                    keywords=["storm"],
                    character_filter=CharacterFilter(tags=["hero"], is_exclude=True),
                ),
            ],
            "a storm",
            character=CharacterContext(name="Aria", tags=["hero"]),
        )
    )
    assert found == {
        "off": [("disabled", {})],
        "never": [("never_activate", {})],
        "quiet": [("generation_type", {"allowed": ["continue", "impersonate"], "type": "normal"})],
        "late": [("delay", {"delay": 5, "messages": 1})],
        "others": [("character_excluded", {"names": ["Aria"], "name": "Aria"})],
        "bran": [("character_not_listed", {"names": ["Bran"], "name": "Aria"})],
        "tagged": [("tag_missing", {"tags": ["villain"]})],
        "untagged": [("tag_excluded", {"tags": ["hero"]})],
    }
    nobody = terms(
        reasons_of(
            [entry("bran", keywords=["storm"], character_filter=CharacterFilter(names=["Bran"]))],
            "storm",
        )
    )
    assert nobody == {"bran": [("no_character", {"names": ["Bran"]})]}


def test_trigger_conditions_name_the_condition_and_what_the_variable_holds() -> None:
    def condition(variable: str, operator: str, value: Any = None) -> list[TriggerCondition]:
        return [TriggerCondition(variable=variable, operator=operator, value=value)]

    found = terms(
        reasons_of(
            [
                entry(
                    "calm",
                    keywords=["storm"],
                    trigger_conditions=condition("mood", "equals", "calm"),
                ),
                entry("unset", keywords=["storm"], trigger_conditions=condition("hp", "exists")),
                entry(
                    "set", keywords=["storm"], trigger_conditions=condition("mood", "not_exists")
                ),
                entry(
                    "odd",
                    keywords=["storm"],
                    trigger_conditions=condition("mood", "greater_than", 3),
                ),
                entry(
                    "held",
                    keywords=["storm"],
                    trigger_conditions=[
                        *condition("mood", "exists"),
                        *condition("mood", "contains", "ang"),
                    ],
                ),
            ],
            "storm",
            variables={"mood": "angry"},
        )
    )
    mood = {"variable": "mood", "value": '"angry"'}
    assert found["calm"] == [
        ("condition_value", {**mood, "operator": "equals", "expected": '"calm"'})
    ]
    assert found["unset"] == [("condition_not_set", {"variable": "hp", "operator": "exists"})]
    assert found["set"] == [("condition_set", {"variable": "mood", "operator": "not_exists"})]
    assert found["odd"] == [
        ("condition_not_comparable", {**mood, "operator": "greater_than", "expected": "3"})
    ]
    assert found["held"] == [("conditions_held", {"count": 2})]


def test_inclusion_groups_say_who_won_and_how() -> None:
    found = terms(
        reasons_of(
            [
                entry("sun", keywords=["sky"], inclusion_groups=["weather"], group_override=True),
                entry("rain", keywords=["sky"], inclusion_groups=["weather"]),
                entry("moon", keywords=["night"], inclusion_groups=["sky"], group_weight=50),
                entry("stars", keywords=["night"], inclusion_groups=["sky"], group_weight=50),
            ],
            "sky at night",
        )
    )
    assert found["sun"] == [("group_won_override", {"group": "weather", "priority": 100})]
    assert found["rain"] == [("group_lost", {"group": "weather", "entry": "sun"})]
    won = [term for term, values in found["moon"] + found["stars"] if term == "group_won_weight"]
    assert won == ["group_won_weight"]
    drawn = next(v for t, v in found["moon"] + found["stars"] if t == "group_won_weight")
    assert (drawn["group"], drawn["weight"], drawn["total"]) == ("sky", 50, 100)

    scored = terms(
        reasons_of(
            [
                entry("both", keywords=["wind", "rain"], inclusion_groups=["weather"]),
                entry("one", keywords=["wind"], inclusion_groups=["weather"]),
            ],
            "wind and rain",
            ActivationSettings(use_group_scoring=True),
        )
    )
    assert scored["one"] == [("group_scored_below", {"group": "weather", "score": 1, "best": 2})]


def test_recursion_and_delay_until_recursion_say_the_step_and_the_level() -> None:
    found = terms(
        reasons_of(
            [
                entry("door", "behind the door lies a key", keywords=["door"]),
                entry("key", keywords=["key"]),
                entry("gate", keywords=["door"], delay_until_recursion=1),
                entry("vault", keywords=["door"], delay_until_recursion=3),
            ],
            "a door",
            ActivationSettings(recursive=True, max_recursion_steps=2),
        )
    )
    assert found["key"] == [("recursion_step", {"step": 2})]
    assert found["gate"] == [("recursion_step", {"step": 2})]
    assert found["vault"] == [("delay_until_recursion", {"level": 3, "reached": 1, "steps": 2})]


TERMS = [
    "disabled",
    "never_activate",
    "generation_type",
    "no_character",
    "character_excluded",
    "character_not_listed",
    "tag_excluded",
    "tag_missing",
    "delay",
    "cooldown",
    "once_per_session",
    "recursion_step",
    "recursion_min_activations",
    "delay_until_recursion",
    *get_args(ConditionTerm),
    *get_args(GroupTerm),
]


@pytest.mark.parametrize("language", ["en", "zh"])
def test_every_reason_term_has_words_in_the_catalogue(language: str) -> None:
    words = catalogue(language)
    assert [term for term in TERMS if term not in words] == []


def test_the_values_fill_every_placeholder_of_the_english_words() -> None:
    words = catalogue("en")
    # {condition} the page writes from the variable, the operator and the expected value.
    said = {
        "generation_type": {"allowed", "type"},
        "no_character": {"names"},
        "character_excluded": {"names", "name"},
        "character_not_listed": {"names", "name"},
        "tag_excluded": {"tags"},
        "tag_missing": {"tags"},
        "delay": {"delay", "messages"},
        "cooldown": {"end"},
        "once_per_session": {"messages"},
        "recursion_step": {"step"},
        "recursion_min_activations": {"step"},
        "delay_until_recursion": {"level", "reached", "steps"},
        "condition_set": {"condition", "variable"},
        "condition_not_set": {"condition", "variable"},
        "condition_value": {"condition", "variable", "value"},
        "condition_not_comparable": {"condition", "variable", "value"},
        "conditions_held": {"count"},
        "group_sticky": {"group", "entry"},
        "group_scored_below": {"group", "score", "best"},
        "group_filled": {"group", "entry"},
        "group_lost": {"group", "entry"},
        "group_won_override": {"group", "priority"},
        "group_won_weight": {"group", "weight", "total", "draw"},
    }
    for term in TERMS:
        assert set(PLACEHOLDER.findall(words[term])) <= said.get(term, set()), term
