"""Conditions on chat variables evaluate safely; {{#if}} blocks render."""

from __future__ import annotations

from typing import Any

import pytest

from storyloom.chat.prompt.conditions import (
    ConditionError,
    evaluate_condition,
    render_conditionals,
)

VARS: dict[str, Any] = {
    "hp": 20,
    "max_hp": 100,
    "name": "Ann",
    "healed": False,
    "count_text": "5",
    "flag_text": "false",
    "tags": ["brave", "tired"],
    "stat": {"系统": {"当前阶段": "磨合期"}, "levels": [1, 2, 3], "gold": 12.5},
}


def holds(expression: str, variables: dict[str, Any] | None = None) -> bool:
    return evaluate_condition(expression, VARS if variables is None else variables)


# --- operators --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("hp == 20", True),
        ("hp == 21", False),
        ("hp != 21", True),
        ("hp != 20", False),
        ("hp < 30", True),
        ("hp < 20", False),
        ("hp <= 20", True),
        ("hp <= 19", False),
        ("hp > 10", True),
        ("hp > 20", False),
        ("hp >= 20", True),
        ("hp >= 21", False),
        ("10 < hp < 30", True),
        ("10 < hp < 15", False),
    ],
)
def test_comparisons(expression: str, expected: bool) -> None:
    assert holds(expression) is expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("hp < 30 and not healed", True),
        ("hp < 30 and healed", False),
        ("hp > 30 or name == 'Ann'", True),
        ("hp > 30 or name == 'Bob'", False),
        ("not healed", True),
        ("hp < 30 && !healed", True),
        ("hp > 30 || healed", False),
        ("!healed", True),
        ("!(hp < 30 && healed)", True),
        ("name === 'Ann'", True),
        ("name !== 'Ann'", False),
        ("healed == false && true", True),
        ("missing == null", True),
        ("missing === undefined", True),
    ],
)
def test_boolean_operators_in_python_and_javascript_spelling(
    expression: str, expected: bool
) -> None:
    assert holds(expression) is expected


def test_javascript_not_binds_to_its_operand_only() -> None:
    # (!hp) == false in JavaScript, not !(hp == false)
    assert holds("!hp == false") is True
    assert holds("!!name") is True
    assert holds("!stat.gold") is False


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("hp + 5 == 25", True),
        ("max_hp - hp == 80", True),
        ("hp * 2 == 40", True),
        ("hp / max_hp < 0.5", True),
        ("hp % 3 == 2", True),
        ("-hp < 0", True),
        ("name + '!' == 'Ann!'", True),
        ("count_text + 1 == '51'", True),  # JavaScript: text + number is text
        ("count_text - 1 == 4", True),  # and other arithmetic is numeric
        ("(hp + 10) * 2 == 60", True),
    ],
)
def test_arithmetic(expression: str, expected: bool) -> None:
    assert holds(expression) is expected


def test_membership() -> None:
    assert holds("'brave' in tags") is True
    assert holds("'angry' not in tags") is True
    assert holds("'nn' in name") is True
    assert holds("name in ['Ann', 'Bob']") is True
    assert holds("'gold' in stat") is True
    assert holds("'x' in missing") is False


def test_numbers_in_text_compare_as_numbers() -> None:
    assert holds("count_text == 5") is True
    assert holds("count_text > 4") is True
    assert holds("5 == count_text") is True


def test_text_truthiness_follows_sillytavern() -> None:
    assert holds("name") is True
    assert holds("flag_text") is False
    assert holds("!flag_text") is True
    assert holds("'0'") is False
    assert holds("'off'") is False
    assert holds("''") is False
    assert holds("tags") is True
    assert holds("[]") is False


def test_dotted_paths_and_literal_indexes_read_nested_state() -> None:
    assert holds("stat.系统.当前阶段 == '磨合期'") is True
    assert holds("stat['系统']['当前阶段'] == '磨合期'") is True
    assert holds("stat.levels[2] == 3") is True
    assert holds("stat.levels[-1] == 3") is True
    assert holds("stat.gold > 12") is True
    assert holds("tags[0] == 'brave'") is True


# --- missing variables ------------------------------------------------------------------


def test_missing_variables_are_none_and_their_comparisons_false() -> None:
    assert holds("missing") is False
    assert holds("missing > 3") is False
    assert holds("missing < 3") is False
    assert holds("missing != 3") is True
    assert holds("stat.nothing.deeper == 1") is False
    assert holds("stat.levels[10]") is False
    assert holds("hp.inner") is False  # a number has no keys
    assert holds("missing > 3", {}) is False


def test_arithmetic_on_a_missing_variable_is_an_error() -> None:
    with pytest.raises(ConditionError, match=r"'missing \+ 1': '\+' needs numbers"):
        holds("missing + 1")


def test_incompatible_ordering_is_false() -> None:
    assert holds("name > 3") is False
    assert holds("tags < 3") is False


# --- what is refused --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("__import__('os')", "calling a function is not allowed"),
        ("__import__('os').system('true')", "calling a function is not allowed"),
        ("name.upper()", "calling a function is not allowed"),
        ("len(tags)", "calling a function is not allowed"),
        ("hp.__class__", "the name '__class__' is not allowed"),
        ("__builtins__", "the name '__builtins__' is not allowed"),
        ("stat['__class__']", "the name '__class__' is not allowed"),
        ("().__class__.__bases__", "cannot be indexed or have attributes"),
        ("'abc'.join", "cannot be indexed or have attributes"),
        ("tags[hp]", "an index must be a literal string or integer"),
        ("[x for x in tags]", "a comprehension is not allowed"),
        ("lambda: 1", "unexpected character ':'"),
        ("(y := 1)", "unexpected character ':'"),
        ("2 ** 10", "not a valid expression"),
        ("hp // 2", "not a valid expression"),
        ("1 if hp else 2", "'x if c else y' is not allowed"),
        ("{'a': 1}", "unexpected character '{'"),
        ("`cmd`", "unexpected character '`'"),
        ("hp is None", "the comparison Is is not allowed"),
        ("hp / 0", "division by zero"),
        ("'a' * 1000000000", "'*' needs numbers"),
        ("", "empty condition"),
        ("hp < (30", "never closed"),
        ("hp < 30)", "unbalanced ')'"),
    ],
)
def test_unsafe_or_invalid_expressions_raise_condition_error(expression: str, reason: str) -> None:
    with pytest.raises(ConditionError) as raised:
        holds(expression)
    assert raised.value.expression == expression
    assert reason in str(raised.value)
    assert repr(expression) in str(raised.value)


def test_an_overlong_expression_is_refused() -> None:
    with pytest.raises(ConditionError, match="longer than"):
        holds(" or ".join(["hp > 1"] * 200))


def test_huge_numbers_are_refused() -> None:
    with pytest.raises(ConditionError, match="too large"):
        holds("*".join(["99999999999"] * 30) + " > 1")


# --- {{#if}} blocks ---------------------------------------------------------------------


def render(text: str, variables: dict[str, Any] | None = None) -> tuple[str, list[str]]:
    return render_conditionals(text, VARS if variables is None else variables)


def test_if_else_chooses_a_branch() -> None:
    assert render("HP is {{#if hp < 30}}low{{else}}fine{{/if}}.") == ("HP is low.", [])
    assert render("{{#if healed}}healed{{else}}hurt{{/if}}") == ("hurt", [])
    assert render("[{{#if healed}}healed{{/if}}]") == ("[]", [])


def test_else_if_chains() -> None:
    text = "{{#if hp < 10}}dying{{else if hp < 50}}hurt{{else}}fine{{/if}}"
    assert render(text, {"hp": 5})[0] == "dying"
    assert render(text, {"hp": 20})[0] == "hurt"
    assert render(text, {"hp": 80})[0] == "fine"


def test_blocks_nest() -> None:
    text = "{{#if hp < 30}}low{{#if healed}}, healed{{else}}, bleeding{{/if}}{{else}}ok{{/if}}"
    assert render(text) == ("low, bleeding", [])
    assert render(text, {"hp": 10, "healed": True}) == ("low, healed", [])
    assert render(text, {"hp": 90})[0] == "ok"


def test_tags_alone_on_their_lines_take_the_line_with_them() -> None:
    text = "Status:\n{{#if hp < 30}}\n  Low health.\n{{else}}\n  Healthy.\n{{/if}}\nEnd."
    assert render(text)[0] == "Status:\n  Low health.\nEnd."
    assert render(text, {"hp": 90})[0] == "Status:\n  Healthy.\nEnd."


def test_javascript_spelling_works_in_blocks() -> None:
    text = "{{#if stat.系统.当前阶段 === '磨合期' && !healed}}磨合{{/if}}"
    assert render(text) == ("磨合", [])


def test_a_condition_that_cannot_be_evaluated_is_false_and_reported() -> None:
    text, problems = render("{{#if __import__('os')}}x{{else}}safe{{/if}}")
    assert text == "safe"
    assert len(problems) == 1
    assert "__import__('os')" in problems[0]
    assert "calling a function is not allowed" in problems[0]


def test_unclosed_and_stray_tags_are_left_as_written_and_reported() -> None:
    text, problems = render("a{{/if}}b{{#if hp < 30}}c")
    assert text == "a{{/if}}b{{#if hp < 30}}c"
    assert problems == [
        "{{/if}} without an open {{#if}}; left as written",
        "{{#if hp < 30}} is never closed with {{/if}}; left as written",
    ]
    text, problems = render("x{{else}}y")
    assert text == "x{{else}}y"
    assert problems == ["{{else}} without an open {{#if}}; left as written"]


def test_sillytaverns_own_if_is_left_for_the_macro_engine() -> None:
    text = "{{if description}}D{{else}}none{{/if}} {{#if hp > 1}}alive{{/if}} {{if::x::y}}"
    assert render(text) == ("{{if description}}D{{else}}none{{/if}} alive {{if::x::y}}", [])


def test_a_hash_if_on_no_chat_variable_is_left_for_the_macro_engine() -> None:
    # SillyTavern's {{#if}} is its {{if}} with the keep-whitespace flag: a lone word that
    # names no chat variable, ST's variable shorthand, a nested macro or text storyloom
    # cannot parse stay as written (with their whitespace) for the macro engine.
    for text in (
        "{{#if yes}}\n  kept  \n{{/if}}",
        "{{#if !yes}}x{{/if}}",
        "{{#if .flag}}x{{else}}y{{/if}}",
        "{{#if $flag}}x{{/if}}",
        "{{#if {{getvar::flag}}}}x{{/if}}",
        "{{#if some words}}x{{/if}}",
    ):
        assert render(text) == (text, []), text
    # The chat's own variables, comparisons and paths are storyloom's conditions.
    assert render("{{#if !healed}}hurt{{/if}}") == ("hurt", [])
    assert render("{{#if missing.path}}x{{else}}none{{/if}}") == ("none", [])
    assert render("{{#if missing == 1}}x{{else}}none{{/if}}") == ("none", [])


def test_text_without_blocks_is_unchanged() -> None:
    assert render("no blocks {{char}} here") == ("no blocks {{char}} here", [])
    assert render("") == ("", [])
