"""Trigger conditions: rules on chat variables that an entry needs to activate.

A variable is looked up by dotted name (:func:`variables.lookup_variable`). Comparisons:

- ``equals`` / ``not_equals``: numbers compare as numbers, also when one side is a
  numeric string (``"5"`` equals ``5``); booleans match ``true``/``false`` strings;
  anything else compares by value;
- ``greater_than``, ``greater_or_equal``, ``less_than``, ``less_or_equal``: both sides
  must be numbers (or numeric strings); otherwise the condition fails;
- ``contains`` / ``not_contains``: a substring of a string, an item of a list, a key of
  an object;
- ``exists`` / ``not_exists``: whether the variable is set.

A missing variable fails every operator except ``not_exists``, ``not_equals`` and
``not_contains``.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from storyloom.knowledge.caiu import TriggerCondition
from storyloom.knowledge.variables import lookup_variable


@dataclass(frozen=True, slots=True)
class ConditionOutcome:
    """Whether a condition held, and why, in words."""

    held: bool
    detail: str


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if not math.isnan(value) else None
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if not math.isnan(number) else None
    return None


def _equal(left: Any, right: Any) -> bool:
    if left == right and type(left) is type(right):
        return True
    left_number, right_number = _number(left), _number(right)
    if left_number is not None and right_number is not None:
        return left_number == right_number
    if isinstance(left, bool) or isinstance(right, bool):
        flag, other = (left, right) if isinstance(left, bool) else (right, left)
        return isinstance(other, str) and other.strip().lower() == str(flag).lower()
    return bool(left == right)


def _contains(container: Any, item: Any) -> bool:
    if isinstance(container, str):
        return str(item) in container
    if isinstance(container, Mapping):
        return str(item) in container
    if isinstance(container, Sequence):
        return any(_equal(element, item) for element in container)
    return False


def _show(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


_ORDERINGS: dict[str, Callable[[float, float], bool]] = {
    "greater_than": operator.gt,
    "greater_or_equal": operator.ge,
    "less_than": operator.lt,
    "less_or_equal": operator.le,
}


def evaluate_condition(
    condition: TriggerCondition, variables: Mapping[str, Any]
) -> ConditionOutcome:
    """Evaluate one condition against the chat variables."""
    name, op, expected = condition.variable, condition.operator, condition.value
    found, value = lookup_variable(variables, name)
    rule = f"{name} {op}" + ("" if op in ("exists", "not_exists") else f" {_show(expected)}")
    if op == "exists":
        return ConditionOutcome(found, f"{rule}: {'set' if found else 'not set'}")
    if op == "not_exists":
        return ConditionOutcome(not found, f"{rule}: {'set' if found else 'not set'}")
    if not found:
        held = op in ("not_equals", "not_contains")
        return ConditionOutcome(held, f"{rule}: {name} is not set")
    shown = f"{name} is {_show(value)}"
    if op == "equals":
        return ConditionOutcome(_equal(value, expected), f"{rule}: {shown}")
    if op == "not_equals":
        return ConditionOutcome(not _equal(value, expected), f"{rule}: {shown}")
    if op == "contains":
        return ConditionOutcome(_contains(value, expected), f"{rule}: {shown}")
    if op == "not_contains":
        return ConditionOutcome(not _contains(value, expected), f"{rule}: {shown}")
    compare = _ORDERINGS[op]
    left, right = _number(value), _number(expected)
    if left is None or right is None:
        return ConditionOutcome(False, f"{rule}: {shown}, not comparable as numbers")
    return ConditionOutcome(compare(left, right), f"{rule}: {shown}")


def evaluate_conditions(
    conditions: Sequence[TriggerCondition], variables: Mapping[str, Any]
) -> ConditionOutcome:
    """All conditions must hold; the outcome names the first that does not."""
    for condition in conditions:
        outcome = evaluate_condition(condition, variables)
        if not outcome.held:
            return ConditionOutcome(False, f"condition failed: {outcome.detail}")
    count = len(conditions)
    return ConditionOutcome(True, f"{'all ' if count > 1 else ''}{count} condition(s) held")
