"""Trigger conditions: each operator class against chat variables."""

from __future__ import annotations

from typing import Any

import pytest

from storyloom.knowledge.caiu import TriggerCondition
from storyloom.knowledge.trigger_conditions import evaluate_condition, evaluate_conditions

VARIABLES: dict[str, Any] = {
    "hp": 5,
    "level": "12",
    "name": "Aria",
    "flags": {"met_king": True},
    "party": ["Aria", "Bran"],
    "bio": "born in the north",
}


def holds(variable: str, operator: str, value: Any = None) -> bool:
    condition = TriggerCondition(variable=variable, operator=operator, value=value)
    return evaluate_condition(condition, VARIABLES).held


@pytest.mark.parametrize(
    ("variable", "operator", "value", "expected"),
    [
        ("hp", "equals", 5, True),
        ("hp", "equals", "5", True),
        ("level", "equals", 12, True),
        ("name", "equals", "aria", False),
        ("flags.met_king", "equals", "true", True),
        ("hp", "not_equals", 6, True),
        ("hp", "not_equals", 5, False),
    ],
)
def test_equality_operators_compare_numbers_as_numbers(
    variable: str, operator: str, value: Any, expected: bool
) -> None:
    assert holds(variable, operator, value) is expected


@pytest.mark.parametrize(
    ("operator", "value", "expected"),
    [
        ("greater_than", 4, True),
        ("greater_than", 5, False),
        ("greater_or_equal", 5, True),
        ("less_than", 5, False),
        ("less_or_equal", "5", True),
    ],
)
def test_ordering_operators_compare_numbers(operator: str, value: Any, expected: bool) -> None:
    assert holds("hp", operator, value) is expected


def test_ordering_fails_for_values_that_are_not_numbers() -> None:
    condition = TriggerCondition(variable="name", operator="greater_than", value=3)
    outcome = evaluate_condition(condition, VARIABLES)
    assert not outcome.held
    assert "not comparable as numbers" in outcome.detail


def test_contains_looks_into_strings_lists_and_objects() -> None:
    assert holds("bio", "contains", "north")
    assert holds("party", "contains", "Bran")
    assert holds("flags", "contains", "met_king")
    assert not holds("party", "contains", "Cole")
    assert holds("party", "not_contains", "Cole")


def test_exists_and_not_exists_check_whether_a_variable_is_set() -> None:
    assert holds("flags.met_king", "exists")
    assert not holds("flags.met_queen", "exists")
    assert holds("flags.met_queen", "not_exists")


def test_a_missing_variable_fails_comparisons_but_not_negations() -> None:
    assert not holds("gold", "equals", 0)
    assert not holds("gold", "greater_than", 0)
    assert holds("gold", "not_equals", 0)
    assert holds("gold", "not_contains", "x")


def test_all_conditions_must_hold_and_the_failure_is_named() -> None:
    conditions = [
        TriggerCondition(variable="hp", operator="greater_than", value=1),
        TriggerCondition(variable="name", operator="equals", value="Bran"),
    ]
    outcome = evaluate_conditions(conditions, VARIABLES)
    assert not outcome.held
    assert 'name equals "Bran"' in outcome.detail and '"Aria"' in outcome.detail
    assert evaluate_conditions(conditions[:1], VARIABLES).held
