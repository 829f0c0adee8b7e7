"""SillyTavern regex scripts apply where, when and how SillyTavern applies them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from storyloom.chat.prompt.macros import MacroContext, expand_macros
from storyloom.chat.prompt.regex_scripts import (
    RegexPlacement,
    RegexScript,
    apply_regex_scripts,
    card_regex_scripts,
    compile_find_regex,
    parse_regex_scripts,
    run_regex_script,
)
from storyloom.sillytavern.character import CharacterDefinition

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sillytavern"
MVU_CARD = FIXTURES / "card_academy_zh_v3_mvu.json"

AI = RegexPlacement.AI_OUTPUT
USER = RegexPlacement.USER_INPUT


def script(find: str, replace: str = "", **fields: Any) -> RegexScript:
    data: dict[str, Any] = {"findRegex": find, "replaceString": replace, "placement": [2]}
    data.update(fields)
    return RegexScript.model_validate(data)


def run(find: str, replace: str, text: str, **fields: Any) -> str:
    return run_regex_script(script(find, replace, **fields), text)


def load_card() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(MVU_CARD.read_text(encoding="utf-8"))
    return data


# --- an MVU card ------------------------------------------------------------------------


def test_every_script_of_an_mvu_card_loads() -> None:
    card = load_card()
    raw = card["data"]["extensions"]["regex_scripts"]
    scripts = card_regex_scripts(card)
    assert len(scripts) == len(raw) == 5
    assert [s.scriptName for s in scripts] == [r["scriptName"] for r in raw]
    for loaded in scripts:
        assert compile_find_regex(loaded.findRegex) is not None
        assert loaded.placement == [2]
        assert loaded.promptOnly and not loaded.markdownOnly
        assert (loaded.minDepth, loaded.maxDepth) == (0, 999)


def test_card_scripts_load_from_the_preset_and_the_conversation_snapshot() -> None:
    card = load_card()
    preset = CharacterDefinition.from_card(card).model_dump(mode="json", exclude={"source_card"})
    from_preset = card_regex_scripts(preset)
    from_snapshot = card_regex_scripts({"base_persona": "", "card": preset})
    assert [s.id for s in from_preset] == [s.id for s in card_regex_scripts(card)]
    assert [s.id for s in from_snapshot] == [s.id for s in from_preset]


def mvu_reply(card: dict[str, Any]) -> tuple[str, str]:
    """A reply as this card's model writes it: story, variable update, status placeholder."""
    story: str = card["data"]["first_mes"]
    update = (
        "<VariableUpdateImpl>\n"
        "_.set('书院.当前季节', '春', '夏');//阿砚入学已满一季\n"
        "_.set('阿砚.墨技进度', 0, 5);\n"
        "</VariableUpdateImpl>"
    )
    return story, f"{story}\n\n{update}\n<StatusPlaceHolderImpl/>"


def test_mvu_card_hides_its_status_bar_and_variable_updates_from_the_prompt() -> None:
    card = load_card()
    scripts = card_regex_scripts(card)
    story, reply = mvu_reply(card)
    prompt = apply_regex_scripts(reply, scripts, placement=AI, phase="prompt", depth=0)
    assert prompt == f"{story}\n\n\n"
    # the stored message and what is displayed keep both (the status bar renders there)
    assert apply_regex_scripts(reply, scripts, placement=AI, phase="stored", depth=0) == reply
    assert apply_regex_scripts(reply, scripts, placement=AI, phase="display", depth=0) == reply
    # the scripts are for AI output only
    assert apply_regex_scripts(reply, scripts, placement=USER, phase="prompt", depth=0) == reply


def test_status_bar_script_renders_html_from_the_reply() -> None:
    """The usual shape of a card's status bar: a display-only script building HTML."""
    card = load_card()
    story, _reply = mvu_reply(card)
    reply = f"{story}\n<status>地点:藏书楼|季节:夏|墨技:5</status>"
    status_bar = script(
        r"/<status>地点:(?<where>[^|]*)\|季节:([^|]*)\|墨技:(\d+)<\/status>/g",
        '<div class="status"><b>{{char}}</b> @ $<where> · $2 · {{match}}|$3%</div>',
        markdownOnly=True,
        trimStrings=["<status>", "</status>"],
    )
    ctx = MacroContext(char="阿砚", user="山长")
    shown = apply_regex_scripts(
        reply,
        [status_bar],
        placement=AI,
        phase="display",
        depth=0,
        macros=lambda text: expand_macros(text, ctx),
    )
    assert shown == (
        f"{story}\n"
        '<div class="status"><b>阿砚</b> @ 藏书楼 · 夏 · '
        "地点:藏书楼|季节:夏|墨技:5|5%</div>"
    )
    assert apply_regex_scripts(reply, [status_bar], placement=AI, phase="prompt") == reply


# --- loading ----------------------------------------------------------------------------


def test_card_regex_scripts_reads_preset_json_raw_cards_and_snapshots() -> None:
    item = {"scriptName": "s", "findRegex": "a", "replaceString": "b", "placement": [1]}
    assert len(card_regex_scripts({"extensions": {"regex_scripts": [item]}})) == 1
    assert len(card_regex_scripts({"data": {"extensions": {"regex_scripts": [item]}}})) == 1
    assert len(card_regex_scripts({"card": {"extensions": {"regex_scripts": [item]}}})) == 1
    assert card_regex_scripts({"name": "no scripts"}) == []


def test_bad_scripts_are_skipped_and_named() -> None:
    items = [
        {"scriptName": "fine", "findRegex": "a"},
        {"scriptName": "no pattern"},
        "not an object",
        {"scriptName": "bad placement", "findRegex": "a", "placement": ["user"]},
    ]
    scripts, problems = parse_regex_scripts(items)
    assert [s.scriptName for s in scripts] == ["fine"]
    assert len(problems) == 3
    assert "regex_scripts[1] (no pattern): findRegex" in problems[0]
    assert "regex_scripts[2]: not an object" in problems[1]
    assert "regex_scripts[3] (bad placement): placement" in problems[2]
    assert [s.scriptName for s in card_regex_scripts({"extensions": {"regex_scripts": items}})] == [
        "fine"
    ]


def test_loose_field_values_of_older_exports_are_accepted() -> None:
    loaded = RegexScript.model_validate(
        {
            "findRegex": "a",
            "replaceString": None,
            "trimStrings": None,
            "placement": None,
            "substituteRegex": True,
            "minDepth": "",
            "maxDepth": "3",
            "runOnEdit": None,
            "someNewField": 1,
        }
    )
    assert loaded.replaceString == "" and loaded.trimStrings == [] and loaded.placement == []
    assert loaded.substituteRegex == 1 and loaded.runOnEdit is True
    assert (loaded.minDepth, loaded.maxDepth) == (None, 3)
    assert loaded.model_dump()["someNewField"] == 1


# --- where scripts apply ----------------------------------------------------------------


def test_scripts_apply_only_at_their_placements() -> None:
    user_only = script("/secret/g", "***", placement=[1])
    ai_and_wi = script("/secret/g", "###", placement=[2, 5])
    reasoning = script("/secret/g", "~~~", placement=[6])
    scripts = [user_only, ai_and_wi, reasoning]

    def at(placement: RegexPlacement) -> str:
        return apply_regex_scripts("a secret", scripts, placement=placement, phase="stored")

    assert at(RegexPlacement.USER_INPUT) == "a ***"
    assert at(RegexPlacement.AI_OUTPUT) == "a ###"
    assert at(RegexPlacement.WORLD_INFO) == "a ###"
    assert at(RegexPlacement.REASONING) == "a ~~~"
    assert at(RegexPlacement.SLASH_COMMAND) == "a secret"


def test_the_three_phases() -> None:
    stored = script("/x/g", "S")
    display = script("/x/g", "D", markdownOnly=True)
    prompt = script("/x/g", "P", promptOnly=True)
    both = script("/y/g", "B", markdownOnly=True, promptOnly=True)
    scripts = [stored, display, prompt, both]
    text = "x y"
    assert apply_regex_scripts(text, scripts, placement=AI, phase="stored") == "S y"
    assert apply_regex_scripts(text, scripts, placement=AI, phase="display") == "D B"
    assert apply_regex_scripts(text, scripts, placement=AI, phase="prompt") == "P B"


def test_scripts_run_in_order_each_on_the_previous_result() -> None:
    scripts = [script("/a/g", "b"), script("/b/g", "c")]
    assert apply_regex_scripts("ab", scripts, placement=AI, phase="stored") == "cc"


@pytest.mark.parametrize(
    ("min_depth", "max_depth", "applies_at"),
    [
        (None, None, {0, 1, 2, 3, 4}),
        (2, None, {2, 3, 4}),
        (None, 1, {0, 1}),
        (1, 3, {1, 2, 3}),
        (-1, -1, {0, 1, 2, 3, 4}),  # -1: no limit
        (0, 0, {0}),
    ],
)
def test_min_and_max_depth(
    min_depth: int | None, max_depth: int | None, applies_at: set[int]
) -> None:
    limited = script("/x/", "y", minDepth=min_depth, maxDepth=max_depth, promptOnly=True)
    applied = {
        depth
        for depth in range(5)
        if apply_regex_scripts("x", [limited], placement=AI, phase="prompt", depth=depth) == "y"
    }
    assert applied == applies_at
    # without a depth (not a chat message) the limits do not apply
    assert apply_regex_scripts("x", [limited], placement=AI, phase="prompt") == "y"


def test_disabled_scripts_do_not_run() -> None:
    off = script("/x/g", "y", disabled=True)
    assert apply_regex_scripts("x", [off], placement=AI, phase="stored") == "x"


def test_edits_skip_scripts_that_do_not_run_on_edit() -> None:
    no_edit = script("/x/g", "y", runOnEdit=False)
    assert apply_regex_scripts("x", [no_edit], placement=AI, phase="stored") == "y"
    assert apply_regex_scripts("x", [no_edit], placement=AI, phase="stored", is_edit=True) == "x"


# --- how scripts replace ----------------------------------------------------------------


def test_without_the_g_flag_only_the_first_match_is_replaced() -> None:
    assert run("/o/", "0", "foo boo") == "f0o boo"
    assert run("o", "0", "foo boo") == "f0o boo"  # a bare pattern has no flags
    assert run("/o/g", "0", "foo boo") == "f00 b00"


def test_numbered_named_and_whole_match_references() -> None:
    text = "Ann: 30 hp"
    assert run(r"/(\w+): (?<hp>\d+) hp/", "$<hp> for $1 [{{match}}] [$0]", text) == (
        "30 for Ann [Ann: 30 hp] [Ann: 30 hp]"
    )


def test_missing_groups_are_empty_and_javascript_patterns_stay_literal() -> None:
    assert run(r"/(a)(x)?/", "[$2][$<nope>][$&][$$]", "a") == "[][][$&][$$]"


def test_trim_strings_are_removed_from_the_match_before_substitution() -> None:
    text = "<thought>hmm</thought>"
    replaced = run(
        "/<thought>.*?<\\/thought>/g", "({{match}})", text, trimStrings=["<thought>", "</thought>"]
    )
    assert replaced == "(hmm)"


def test_macros_resolve_in_replacements_and_trim_strings() -> None:
    ctx = MacroContext(char="Sera", user="Ann")
    trims = script("/(Sera says: .*)/", "{{user}} hears: $1", trimStrings=["{{char}} says: "])
    replaced = run_regex_script(trims, "Sera says: hi", macros=lambda t: expand_macros(t, ctx))
    assert replaced == "Ann hears: hi"
    # without a macro function they stay as written
    assert run_regex_script(trims, "Sera says: hi") == "{{user}} hears: Sera says: hi"


def test_substitute_regex_resolves_macros_in_the_pattern() -> None:
    ctx = MacroContext(char="A.B", user="Ann")

    def macros(text: str) -> str:
        return expand_macros(text, ctx)

    def replaced(mode: int) -> str:
        find = script("/{{char}}/g", "X", substituteRegex=mode)
        return run_regex_script(find, "A.B AxB {{char}}", macros=macros)

    assert replaced(0) == "A.B AxB X"  # the pattern as written: literal braces
    assert replaced(1) == "X X {{char}}"  # raw: "A.B" is a pattern, the dot matches x
    assert replaced(2) == "X AxB {{char}}"  # escaped: the name matches only itself


def test_a_bad_pattern_skips_its_script_and_says_so() -> None:
    problems: list[str] = []
    bad = script("/(unclosed/g", "x", scriptName="broken")
    good = script("/a/g", "b")
    result = apply_regex_scripts(
        "a(unclosed", [bad, good], placement=AI, phase="stored", problems=problems
    )
    assert result == "b(unclosed"
    assert problems == [
        "regex script 'broken': findRegex '/(unclosed/g' is not a valid regular expression"
    ]


def test_a_catastrophic_pattern_times_out_and_skips_its_script() -> None:
    problems: list[str] = []
    evil = script("/(a|aa)+$/", "x", scriptName="evil")
    after = script("/b/", "c")
    text = "a" * 40 + "b"
    result = apply_regex_scripts(
        text, [evil, after], placement=AI, phase="stored", problems=problems
    )
    assert result == "a" * 40 + "c"
    assert len(problems) == 1
    assert problems[0].startswith("regex script 'evil': matching took longer than")


# --- JavaScript regular expressions -----------------------------------------------------


def test_flags() -> None:
    assert run("/hello/gi", "hi", "Hello HELLO") == "hi hi"
    assert run("/^x/gm", "-", "x\nx") == "-\n-"
    assert run("/^x/g", "-", "x\nx") == "-\nx"
    assert run("/a.b/g", "-", "a\nb") == "a\nb"
    assert run("/a.b/gs", "-", "a\nb") == "-"
    assert run(r"/\p{Script=Han}+/gu", "字", "abc中文def") == "abc字def"


def test_unsupported_flags_follow_sillytavern() -> None:
    # flags JavaScript rejects: the script is skipped
    assert compile_find_regex("/a/x") is None
    # flags outside SillyTavern's set: the whole string is the pattern
    assert run("/a/y", "-", "a /a/y") == "a -"


def test_javascript_semantics_where_python_differs() -> None:
    assert run(r"/\d+/g", "#", "12 ٣٤") == "# ٣٤"  # \d is ASCII
    assert run(r"/\w+/g", "#", "abc 中文") == "# 中文"  # \w is ASCII
    assert run("/end$/", "!", "the end\n") == "the end\n"  # $ is the very end
    assert run("/a.c/g", "-", "a\rc") == "a\rc"  # . excludes every line terminator
    assert run("/{{char}}/g", "X", "{{char}}") == "X"  # braces that are no quantifier
    assert run("/a{,2}/g", "X", "a{,2}") == "X"
    assert run("/[^]+/", "X", "a\nb") == "X"  # [^] is anything
    assert run("/[]/g", "X", "ab") == "ab"  # [] is nothing
    assert run(r"/(?<q>['\"]).*?\k<q>/g", "Q", "say 'hi' now") == "say Q now"
    assert run(r"/<\/b>/g", "", "<b>x</b>") == "<b>x"


def test_the_pattern_of_a_bare_string_may_contain_slashes() -> None:
    assert run("a/b", "-", "a/b a/b") == "- a/b"


def test_empty_text_is_returned_as_is() -> None:
    assert apply_regex_scripts("", [script("/^/", "x")], placement=AI, phase="stored") == ""
