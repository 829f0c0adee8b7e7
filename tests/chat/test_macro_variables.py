"""Macro forms of SillyTavern's current engine: variable shorthand, global variables,
scoped macros paired by name, {{datetimeformat}} and {{idle_duration}}."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storyloom.chat.prompt.macros import MacroContext, expand_macros
from storyloom.chat.prompt.moment_format import format_moment, humanize

NOW = datetime(2026, 5, 3, 15, 5, 7, 250000, tzinfo=timezone(timedelta(hours=1)))


def run(
    text: str,
    local: dict[str, Any] | None = None,
    global_: dict[str, Any] | None = None,
    **fields: Any,
) -> str:
    ctx = MacroContext(
        char="Sera",
        user="Ann",
        variables=local if local is not None else {},
        global_variables=global_ if global_ is not None else {},
        now=NOW,
        **fields,
    )
    return expand_macros(text, ctx)


# --- {{.var}} and {{$var}} -------------------------------------------------------------------


def test_dot_reads_a_chat_variable_and_dollar_a_global_one() -> None:
    assert run("{{.mood}}/{{$mood}}", {"mood": "calm"}, {"mood": "wild"}) == "calm/wild"
    assert run("[{{.missing}}]") == "[]"


def test_assignment_stores_the_trimmed_value_with_macros_resolved() -> None:
    local: dict[str, Any] = {}
    assert run("{{ .greeting =  Hello {{user}}  }}{{.greeting}}", local) == "Hello Ann"
    assert local == {"greeting": "Hello Ann"}
    global_: dict[str, Any] = {}
    run("{{$count = 3}}", global_=global_)
    assert global_ == {"count": 3}


def test_increments_return_the_new_value_and_start_from_zero() -> None:
    local: dict[str, Any] = {"n": "5"}
    assert run("{{.n++}} {{.n++}} {{.n--}} {{.fresh++}}", local) == "6 7 6 1"
    assert local == {"n": 6, "fresh": 1}


def test_add_and_subtract_assign() -> None:
    local: dict[str, Any] = {"gold": 10, "name": "Ann"}
    assert run("{{.gold += 5}}{{.gold -= 3}}{{.gold}}", local) == "12"
    assert run("{{.name += Marie}}{{.name}}", local) == "AnnMarie"
    assert run("{{.gold -= lots}}{{.gold}}", local) == "12"  # not a number: ignored


def test_or_and_nullish_fallbacks() -> None:
    local: dict[str, Any] = {"empty": "", "zero": "0", "off": "false", "set": "yes"}
    text = "{{.empty || a}}|{{.zero || b}}|{{.off || c}}|{{.set || d}}|{{.none || e}}"
    assert run(text, local) == "a|b|c|yes|e"
    text = "[{{.empty ?? a}}]|{{.zero ?? b}}|{{.none ?? e}}"
    assert run(text, local) == "[]|0|e"


def test_fallback_assignments_store_only_when_they_apply() -> None:
    local: dict[str, Any] = {"empty": ""}
    assert run("{{.empty ||= x}}{{.none ??= y}}{{.none ??= z}}", local) == "xyy"
    assert local == {"empty": "x", "none": "y"}


def test_fallback_values_are_resolved_only_when_needed() -> None:
    local: dict[str, Any] = {"set": "yes"}
    run("{{.set || {{.touched = 1}}no}}{{.set ?? {{.touched2 = 1}}no}}", local)
    assert "touched" not in local and "touched2" not in local
    run("{{.unset || {{.touched = 1}}no}}", local)
    assert local["touched"] == 1


def test_comparisons() -> None:
    local: dict[str, Any] = {"hp": "10", "name": "Ann"}
    text = "{{.hp == 10}} {{.hp != 10}} {{.hp > 9.5}} {{.hp >= 11}} {{.hp < -1}} {{.hp <= 10}}"
    assert run(text, local) == "true false true false false true"
    assert run("{{.name > 1}} {{.name == Ann}} {{.missing < 1}}", local) == "false true true"


@pytest.mark.parametrize(
    "text",
    ["{{.}}", "{{.5x}}", "{{.hp++5}}", "{{.hp -- 5}}", "{{$}}", "{{.hp ~ 3}}", "{{.a{{user}}}}"],
)
def test_what_only_looks_like_a_variable_expression_stays_as_written(text: str) -> None:
    assert run(text, {"hp": 1}).startswith("{{")


def test_a_name_ending_in_dashes_and_a_digit_is_one_name() -> None:
    # as SillyTavern's lexer reads it: "hp--5" is a variable name, not "hp" minus 5
    assert run("[{{.hp--5}}]", {"hp": 10, "hp--5": "x"}) == "[x]"


def test_if_reads_shorthand_variables_of_both_scopes() -> None:
    text = "{{if .flag}}L{{/if}}{{if $flag}}G{{/if}}{{if !$flag}}-{{/if}}"
    assert run(text, {"flag": "1"}, {"flag": ""}) == "L-"


@settings(max_examples=100, deadline=None)
@given(
    name=st.from_regex(r"[A-Za-z](?:[A-Za-z0-9_-]{0,8}[A-Za-z0-9_])?", fullmatch=True),
    value=st.text(alphabet="ab Zé语=|?!:<>-+.,", max_size=20),
)
def test_what_is_assigned_reads_back_trimmed(name: str, value: str) -> None:
    local: dict[str, Any] = {}
    out = run(f"{{{{.{name} = {value}}}}}[{{{{.{name}}}}}]", local)
    assert out == f"[{value.strip()}]"
    assert local == {name: value.strip()}


# --- global variable macros ------------------------------------------------------------------


def test_global_variable_macros_work_on_the_global_variables_only() -> None:
    local: dict[str, Any] = {"x": "chat"}
    global_: dict[str, Any] = {}
    text = (
        "{{setglobalvar::x::1}}{{addglobalvar::x::2}}{{incglobalvar::x}}|{{decglobalvar::x}}"
        "|{{getglobalvar::x}}|{{hasglobalvar::x}}|{{globalvarexists::y}}"
        "{{deleteglobalvar::x}}|{{hasglobalvar::x}}|{{getvar::x}}"
    )
    assert run(text, local, global_) == "4|3|3|true|false|false|chat"
    assert global_ == {} and local == {"x": "chat"}


def test_flushglobalvar_deletes_too() -> None:
    global_: dict[str, Any] = {"x": 1}
    run("{{flushglobalvar::x}}", global_=global_)
    assert global_ == {}


# --- scoped macros ---------------------------------------------------------------------------


def test_a_scoped_macro_takes_its_content_as_the_last_argument() -> None:
    local: dict[str, Any] = {}
    text = "{{setvar::bio}}\n  Born in {{user}}'s town.\n{{/setvar}}{{getvar::bio}}"
    assert run(text, local) == "Born in Ann's town."


def test_an_opener_that_cannot_take_the_content_stays_as_written_with_its_closer() -> None:
    assert run("{{user}}Hi {{char}}{{/user}}") == "{{user}}Hi Sera{{/user}}"
    local: dict[str, Any] = {}
    assert run("{{setvar::a::b}}c{{/setvar}}", local) == "{{setvar::a::b}}c{{/setvar}}"
    assert local == {}
    assert run("{{random::a::b}}x{{/random}}") == "{{random::a::b}}x{{/random}}"


def test_closers_pair_by_name_outermost_first() -> None:
    local: dict[str, Any] = {}
    text = "{{setvar::o}}a{{setvar::i}}b{{/setvar}}c{{/setvar}}{{getvar::o}}|{{getvar::i}}"
    assert run(text, local) == "ac|b"
    assert run("{{reverse}}ab{{/getvar}}cd{{/reverse}}") == "dc}}rav" + "teg/{{ba"


def test_an_unknown_scoped_macro_stays_as_written() -> None:
    assert run("{{shout}}hi {{user}}{{/shout}}") == "{{shout}}hi Ann{{/shout}}"


# --- time ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("YYYY-MM-DD HH:mm:ss", "2026-05-03 15:05:07"),
        ("dddd, MMMM Do YYYY, h:mm:ss a", "Sunday, May 3rd 2026, 3:05:07 pm"),
        ("ddd MMM D YY", "Sun May 3 26"),
        ("[Today is] dddd", "Today is Sunday"),
        ("LT|LTS|L|LL|LLL|LLLL", "3:05 PM|3:05:07 PM|05/03/2026|May 3, 2026|"
         "May 3, 2026 3:05 PM|Sunday, May 3, 2026 3:05 PM"),
        ("l|ll|lll|llll", "5/3/2026|May 3, 2026|May 3, 2026 3:05 PM|Sun, May 3, 2026 3:05 PM"),
        ("Q Qo DDD DDDD d E w W gggg GGGG", "2 2nd 123 123 0 7 19 18 2026 2026"),
        ("k kk hh A", "15 15 03 PM"),
        ("S SS SSS SSSS", "2 25 250 2500"),
        ("Z ZZ", "+01:00 +0100"),
        ("X x", "1777817107 1777817107250"),
        ("\\YYYY YYYY", "YYYY 2026"),
    ],
)  # fmt: skip
def test_datetimeformat_writes_moment_tokens(pattern: str, expected: str) -> None:
    assert format_moment(NOW, pattern) == expected
    assert run("{{datetimeformat::" + pattern + "}}") == expected


def test_iso_weeks_roll_into_the_next_year() -> None:
    # Monday 2024-12-30 is in ISO week 1 of 2025, and in week 1 of 2025 by English weeks
    monday = datetime(2024, 12, 30)
    assert format_moment(monday, "W GGGG w gggg") == "1 2025 1 2025"


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (3, "a few seconds"),
        (44, "a few seconds"),
        (45, "a minute"),
        (89, "a minute"),
        (90, "2 minutes"),
        (44 * 60, "44 minutes"),
        (45 * 60, "an hour"),
        (90 * 60, "2 hours"),
        (21 * 3600, "21 hours"),
        (22 * 3600, "a day"),
        (36 * 3600, "2 days"),
        (25 * 86400, "25 days"),
        (26 * 86400, "a month"),
        (45 * 86400, "a month"),
        (46 * 86400, "2 months"),
        (319 * 86400, "10 months"),
        (320 * 86400, "a year"),
        (548 * 86400, "2 years"),
    ],
)
def test_durations_are_humanized_as_moment_does(seconds: int, expected: str) -> None:
    assert humanize(timedelta(seconds=seconds)) == expected
    assert humanize(timedelta(seconds=-seconds)) == expected


def test_idle_duration_measures_from_the_users_previous_message() -> None:
    assert run("{{idle_duration}}") == "just now"
    assert run("{{idle_duration}}", idle_since=NOW - timedelta(hours=3)) == "3 hours"
    naive = (NOW - timedelta(minutes=5)).astimezone().replace(tzinfo=None)
    assert run("{{idleDuration}}", idle_since=naive) == "5 minutes"
