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
from dataclasses import dataclass, field
from typing import Any, Literal

from storyloom.knowledge.caiu import TriggerCondition
from storyloom.knowledge.variables import lookup_variable

ConditionTerm = Literal[
    "condition_set",
    "condition_not_set",
    "condition_value",
    "condition_not_comparable",
    "conditions_held",
]
"""What a condition's outcome says: the variable is set / not set / has this value / has
a value that is no number; or (of them all) that every condition held."""


@dataclass(frozen=True, slots=True)
class ConditionOutcome:
    """Whether a condition held, and why: in words, and as a term with its values for a
    page to say in its own language (``chat.prompt.reason.<term>``)."""

    held: bool
    detail: str
    term: ConditionTerm
    values: dict[str, str | int] = field(default_factory=dict, hash=False, compare=False)


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
    # The condition as its parts: a page says the operator in its own language.
    said: dict[str, str | int] = {"variable": name, "operator": op}
    if op not in ("exists", "not_exists"):
        said["expected"] = _show(expected)

    def outcome(held: bool, term: ConditionTerm, detail: str) -> ConditionOutcome:
        return ConditionOutcome(held, f"{rule}: {detail}", term, said)

    if op in ("exists", "not_exists"):
        held = found if op == "exists" else not found
        if found:
            return outcome(held, "condition_set", "set")
        return outcome(held, "condition_not_set", "not set")
    if not found:
        held = op in ("not_equals", "not_contains")
        return outcome(held, "condition_not_set", f"{name} is not set")
    said["value"] = _show(value)
    shown = f"{name} is {_show(value)}"
    if op == "equals":
        return outcome(_equal(value, expected), "condition_value", shown)
    if op == "not_equals":
        return outcome(not _equal(value, expected), "condition_value", shown)
    if op == "contains":
        return outcome(_contains(value, expected), "condition_value", shown)
    if op == "not_contains":
        return outcome(not _contains(value, expected), "condition_value", shown)
    compare = _ORDERINGS[op]
    left, right = _number(value), _number(expected)
    if left is None or right is None:
        return outcome(False, "condition_not_comparable", f"{shown}, not comparable as numbers")
    return outcome(compare(left, right), "condition_value", shown)


def evaluate_conditions(
    conditions: Sequence[TriggerCondition], variables: Mapping[str, Any]
) -> ConditionOutcome:
    """All conditions must hold; the outcome names the first that does not."""
    for condition in conditions:
        outcome = evaluate_condition(condition, variables)
        if not outcome.held:
            return ConditionOutcome(
                False, f"condition failed: {outcome.detail}", outcome.term, outcome.values
            )
    count = len(conditions)
    detail = f"{'all ' if count > 1 else ''}{count} condition(s) held"
    return ConditionOutcome(True, detail, "conditions_held", {"count": count})
