"""SillyTavern macros expand as SillyTavern's macro engine expands them."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from storyloom.chat.prompt.macros import MacroContext, expand_macros, macro_spans

NOW = datetime(2026, 5, 3, 15, 5, tzinfo=timezone(timedelta(hours=1)))


def context(**overrides: object) -> MacroContext:
    values: dict[str, object] = {
        "char": "Seraphina",
        "user": "Ann",
        "description": "A guardian of the forest.",
        "personality": "kind, protective",
        "scenario": "A glade at dusk.",
        "persona": "A lost traveller.",
        "now": NOW,
        "seed": 7,
    }
    values.update(overrides)
    return MacroContext(**values)  # type: ignore[arg-type]


def expand(text: str, ctx: MacroContext | None = None) -> str:
    return expand_macros(text, ctx if ctx is not None else context())


# --- names and card fields --------------------------------------------------------------


def test_names_and_card_fields_resolve() -> None:
    text = "{{char}}|{{user}}|{{description}}|{{personality}}|{{scenario}}|{{persona}}"
    assert expand(text) == (
        "Seraphina|Ann|A guardian of the forest.|kind, protective|A glade at dusk.|"
        "A lost traveller."
    )


def test_card_field_aliases_resolve_like_the_short_names() -> None:
    assert expand("{{charDescription}}/{{charPersonality}}/{{charScenario}}") == (
        "A guardian of the forest./kind, protective/A glade at dusk."
    )


def test_group_names_fall_back_to_the_character_in_a_solo_chat() -> None:
    assert expand("{{group}} {{charIfNotGroup}}") == "Seraphina Seraphina"


def test_macro_names_are_case_insensitive_and_may_have_blanks_inside_braces() -> None:
    assert expand("{{CHAR}} {{User}} {{ char }}") == "Seraphina Ann Seraphina"


def test_legacy_angle_tokens_become_names() -> None:
    assert expand("<USER> meets <BOT>, <char> smiles at <user>") == (
        "Ann meets Seraphina, Seraphina smiles at Ann"
    )


def test_original_is_substituted_once_per_expansion() -> None:
    ctx = context(original="Be nice.")
    assert expand("{{original}} Extra. {{original}}", ctx) == "Be nice. Extra. "
    assert expand("{{original}}", ctx) == "Be nice."


def test_extra_values_resolve_case_insensitively_and_win_over_built_ins() -> None:
    ctx = context(extra={"mesExamples": "<START>\nHi", "lastMessage": "bye", "char": "Sera"})
    assert expand("{{mesexamples}}|{{LastMessage}}|{{char}}", ctx) == "<START>\nHi|bye|Sera"


# --- time -------------------------------------------------------------------------------


def test_time_and_date_macros_read_the_context_time() -> None:
    text = "{{time}}|{{date}}|{{weekday}}|{{isotime}}|{{isodate}}"
    assert expand(text) == "3:05 PM|May 3, 2026|Sunday|15:05|2026-05-03"


def test_time_with_a_utc_offset_converts_from_the_context_time() -> None:
    # 15:05 at UTC+1 is 14:05 UTC
    assert expand("{{time::UTC+2}}|{{time::UTC-3}}|{{time_UTC+0}}") == "4:05 PM|11:05 AM|2:05 PM"


def test_time_of_midnight_and_noon_read_as_twelve() -> None:
    assert expand("{{time}}", context(now=datetime(2026, 1, 1, 0, 7))) == "12:07 AM"
    assert expand("{{time}}", context(now=datetime(2026, 1, 1, 12, 30))) == "12:30 PM"


def test_without_a_context_time_the_current_date_is_used() -> None:
    before = date.today().isoformat()
    value = expand("{{isodate}}", context(now=None))
    after = date.today().isoformat()
    assert value in (before, after)


# --- randomness -------------------------------------------------------------------------


def test_random_picks_an_item_and_the_same_seed_repeats_the_sequence() -> None:
    choices = "::".join(str(n) for n in range(100))
    text = " ".join([f"{{{{random::{choices}}}}}"] * 6)
    first = expand(text, context(seed=11)).split()
    assert all(item in {str(n) for n in range(100)} for item in first)
    assert len(set(first)) > 1, "each {{random}} draws again"
    assert expand(text, context(seed=11)).split() == first
    assert expand(text, context(seed=12)).split() != first


def test_random_draws_continue_across_expansions_with_one_context() -> None:
    ctx = context(seed=3)
    choices = "::".join(str(n) for n in range(1000))
    first = expand(f"{{{{random::{choices}}}}}", ctx)
    second = expand(f"{{{{random::{choices}}}}}", ctx)
    assert first != second
    again = context(seed=3)
    assert [expand(f"{{{{random::{choices}}}}}", again) for _ in range(2)] == [first, second]


def test_legacy_random_splits_on_commas_and_keeps_escaped_commas() -> None:
    for seed in range(20):
        value = expand(r"{{random:red, green\, blue}}", context(seed=seed))
        assert value in ("red", "green, blue")
    values = {expand("{{random:a,b,c}}", context(seed=seed)) for seed in range(30)}
    assert values == {"a", "b", "c"}


def test_pick_is_stable_for_the_same_seed_text_and_position() -> None:
    text = "{{pick::a::b::c::d::e::f::g::h}} and {{pick::a::b::c::d::e::f::g::h}}"
    results = [expand(text, context(seed=seed)) for seed in range(10)]
    assert results == [expand(text, context(seed=seed)) for seed in range(10)]
    # the two macros sit at different positions, so they are drawn independently
    assert any(result.split(" and ")[0] != result.split(" and ")[1] for result in results)
    # the same text with the same seed never changes, however many times it is expanded
    ctx = context(seed=4)
    assert len({expand("{{pick::x::y::z}}", ctx) for _ in range(5)}) == 1


def test_roll_uses_dice_notation() -> None:
    for seed in range(50):
        ctx = context(seed=seed)
        two_d6 = int(expand("{{roll::2d6+1}}", ctx))
        d20 = int(expand("{{roll:d20}}", ctx))
        six = int(expand("{{roll 6}}", ctx))
        minus = int(expand("{{roll::3d4-2}}", ctx))
        assert 3 <= two_d6 <= 13
        assert 1 <= d20 <= 20
        assert 1 <= six <= 6
        assert 1 <= minus <= 10
    assert expand("{{roll::1d1+5}}") == "6"
    assert {expand("{{roll::d6}}", context(seed=s)) for s in range(200)} == {
        str(n) for n in range(1, 7)
    }


def test_roll_is_reproducible_with_the_same_seed() -> None:
    text = "{{roll::4d100}} {{roll::4d100}} {{roll::4d100}}"
    assert expand(text, context(seed="chat-1")) == expand(text, context(seed="chat-1"))


def test_roll_with_an_invalid_formula_or_too_many_dice_is_empty() -> None:
    assert expand("[{{roll::two dice}}][{{roll::0d6}}][{{roll::1001d6}}]") == "[][][]"


# --- variables --------------------------------------------------------------------------


def test_setvar_then_getvar_and_a_missing_variable_is_empty() -> None:
    ctx = context()
    assert expand("{{setvar::mood::calm}}[{{getvar::mood}}][{{getvar::nothing}}]", ctx) == (
        "[calm][]"
    )
    assert ctx.variables == {"mood": "calm"}


def test_setvar_stores_numbers_as_numbers() -> None:
    ctx = context()
    expand("{{setvar::hp::30}}{{setvar::ratio::0.5}}{{setvar::name::007 agent}}", ctx)
    assert ctx.variables == {"hp": 30, "ratio": 0.5, "name": "007 agent"}


def test_nested_macro_inside_an_argument_expands_first() -> None:
    ctx = context()
    assert expand("{{setvar::who::{{char}}}}{{getvar::who}} meets {{user}}", ctx) == (
        "Seraphina meets Ann"
    )
    assert ctx.variables["who"] == "Seraphina"


def test_macros_resolve_left_to_right_so_later_reads_see_earlier_writes() -> None:
    ctx = context(variables={"n": 1})
    assert expand("{{getvar::n}} {{incvar::n}} {{getvar::n}}", ctx) == "1 2 2"


def test_a_variable_name_can_itself_come_from_a_macro() -> None:
    ctx = context(variables={"Seraphina_hp": 12})
    assert expand("{{getvar::{{char}}_hp}}", ctx) == "12"


def test_addvar_adds_numbers() -> None:
    ctx = context(variables={"gold": 10, "text_number": "5"})
    expand("{{addvar::gold::5}}{{addvar::gold::-2.5}}{{addvar::text_number::1}}", ctx)
    expand("{{addvar::fresh::3}}", ctx)
    assert ctx.variables == {"gold": 12.5, "text_number": 6, "fresh": 3}
    assert expand("{{getvar::gold}} {{getvar::fresh}}", ctx) == "12.5 3"


def test_addvar_appends_to_text() -> None:
    ctx = context(variables={"log": "woke"})
    expand("{{addvar::log::, ate}}{{addvar::new::hello}}{{addvar::log::{{space}}slept}}", ctx)
    assert ctx.variables == {"log": "woke, ate slept", "new": "hello"}


def test_addvar_on_a_number_with_text_appends_as_sillytavern_does() -> None:
    ctx = context(variables={"n": 5})
    expand("{{addvar::n::abc}}", ctx)
    assert ctx.variables["n"] == "5abc"


def test_addvar_appends_to_lists_including_json_list_text() -> None:
    ctx = context(variables={"items": ["sword"], "json_items": '["map"]'})
    expand("{{addvar::items::shield}}{{addvar::items::3}}{{addvar::json_items::rope}}", ctx)
    assert ctx.variables == {"items": ["sword", "shield", 3], "json_items": ["map", "rope"]}
    assert expand("{{getvar::items}}", ctx) == '["sword","shield",3]'


def test_incvar_and_decvar_return_the_new_value() -> None:
    ctx = context(variables={"turns": 4})
    assert expand("{{incvar::turns}} {{incvar::turns}} {{decvar::turns}}", ctx) == "5 6 5"
    assert expand("{{decvar::new}}", ctx) == "-1"
    assert ctx.variables == {"turns": 5, "new": -1}


def test_getvar_reads_a_dotted_path_into_nested_state() -> None:
    ctx = context(variables={"stat": {"系统": {"当前阶段": "磨合期"}, "hp": 3.0}, "a.b": "flat"})
    assert expand("{{getvar::stat.系统.当前阶段}} {{getvar::stat.hp}} {{getvar::a.b}}", ctx) == (
        "磨合期 3 flat"
    )
    assert expand("[{{getvar::stat.missing.deeper}}]", ctx) == "[]"
    assert expand("{{getvar::stat}}", ctx) == '{"系统":{"当前阶段":"磨合期"},"hp":3}'


def test_hasvar_and_deletevar() -> None:
    ctx = context(variables={"x": 0})
    assert expand("{{hasvar::x}} {{hasvar::y}}", ctx) == "true false"
    assert expand("{{deletevar::x}}{{hasvar::x}}", ctx) == "false"
    assert ctx.variables == {}


def test_variable_arguments_are_trimmed_but_inner_blanks_kept() -> None:
    ctx = context()
    expand("{{setvar:: motto ::  slow and steady  }}", ctx)
    assert ctx.variables == {"motto": "slow and steady"}


# --- formatting macros ------------------------------------------------------------------


def test_comment_is_removed_even_across_lines() -> None:
    assert expand("a{{// a note for the author}}b{{//\nline one\nline two}}c") == "abc"


def test_scoped_comment_removes_its_content_without_running_it() -> None:
    ctx = context()
    assert expand("a{{//}}hidden {{setvar::x::1}}{{///}}b", ctx) == "ab"
    assert ctx.variables == {}


def test_trim_removes_itself_and_the_newlines_around_it() -> None:
    assert expand("first\n\n{{trim}}\n\nsecond") == "firstsecond"
    assert expand("keep  {{trim}}  spaces") == "keep    spaces"


def test_scoped_trim_trims_its_content() -> None:
    assert expand("[{{trim}}\n   inner text  \n{{/trim}}]") == "[inner text]"


def test_newline_and_space_insert_characters() -> None:
    assert expand("a{{newline}}b{{newline::2}}c{{space}}d{{space::3}}e") == "a\nb\n\nc d   e"


def test_noop_is_empty_and_keeps_trim_from_eating_the_newline_before_it() -> None:
    assert expand("a{{noop}}b") == "ab"
    assert expand("a\n{{noop}}\n{{trim}}\nb") == "a\nb"


def test_reverse() -> None:
    assert expand("{{reverse::{{char}}}}") == "anihpareS"


# --- SillyTavern's {{if}} ---------------------------------------------------------------


def test_if_macro_chooses_a_branch_on_a_macro_value() -> None:
    assert expand("{{if description}}Has: {{description}}{{else}}none{{/if}}") == (
        "Has: A guardian of the forest."
    )
    assert expand("{{if !scenario}}no scenario{{else}}scenario{{/if}}") == "scenario"
    assert expand("{{if persona}}x{{/if}}", context(persona="")) == ""


def test_if_macro_reads_variables_and_only_runs_the_chosen_branch() -> None:
    ctx = context(variables={"met": "true", "off": "false"})
    text = (
        "{{if .met}}again{{else}}{{setvar::first::1}}first{{/if}}|{{if .off}}on{{else}}off{{/if}}"
    )
    assert expand(text, ctx) == "again|off"
    assert "first" not in ctx.variables


def test_if_macro_nests_and_trims_its_branches() -> None:
    text = "{{if char}}\n  outer\n  {{if !user}}inner{{else}}other{{/if}}\n{{/if}}"
    assert expand(text) == "outer\nother"


def test_inline_if_takes_its_content_as_second_argument() -> None:
    assert expand("{{if::char::Hello {{char}}}}") == "Hello Seraphina"
    assert expand("[{{if::!char::Hello}}]") == "[]"


# --- what is not a macro ----------------------------------------------------------------


def test_unknown_macros_are_left_as_written_with_inner_macros_resolved() -> None:
    assert expand("{{unknown}} {{wi_entry::{{char}}}}") == "{{unknown}} {{wi_entry::Seraphina}}"


def test_macros_called_with_wrong_arguments_are_left_as_written() -> None:
    assert expand("{{char::x}} {{getvar}} {{setvar::only_name}}") == (
        "{{char::x}} {{getvar}} {{setvar::only_name}}"
    )


def test_macros_nested_in_one_left_as_written_run_once() -> None:
    ctx = context(variables={"n": 0})
    text = "{{setvar::x::{{incvar::n}}::extra}} {{unknown::{{incvar::n}}}} {{getvar::n}}"
    assert expand(text, ctx) == "{{setvar::x::1::extra}} {{unknown::2}} 2"


def test_text_that_only_looks_like_a_macro_is_untouched() -> None:
    for text in ("{{char's}}", "{{ }}", "{{中文}}", "{{char", "}} {{/if}}", "{{/trim}}"):
        assert expand(text) == text


def test_unclosed_braces_keep_the_macros_inside_them() -> None:
    assert expand("{{start {{char}} end") == "{{start Seraphina end"


def test_a_brace_before_a_macro_is_text() -> None:
    assert expand("{{{char}}}") == "{Seraphina}"
    assert expand('{"name": "{{char}}"}') == '{"name": "Seraphina"}'


def test_escaped_braces_stay_literal() -> None:
    assert expand(r"\{\{char\}\} is {{char}}") == "{{char}} is Seraphina"


def test_text_without_macros_is_returned_unchanged() -> None:
    text = "Plain text with { single } braces and <b>tags</b>."
    assert expand(text) == text
    assert expand("") == ""


def test_macro_spans_are_the_outermost_macros() -> None:
    text = "a {{user}} b {{setvar::x::{{char}}}} {{unclosed"
    assert [text[s:e] for s, e in macro_spans(text)] == ["{{user}}", "{{setvar::x::{{char}}}}"]


@pytest.mark.parametrize("text", ["{{" * 5000, "{{a" * 3000 + "}}" * 10, "}}" * 5000])
def test_pathological_braces_do_not_break_the_parser(text: str) -> None:
    assert isinstance(expand(text), str)


def test_pick_follows_the_chats_seed_while_random_follows_the_replys() -> None:
    text = "{{pick::a::b::c::d::e::f::g::h}} {{random::a::b::c::d::e::f::g::h}}"
    seen = {
        expand_macros(text, MacroContext(seed=reply, pick_seed="chat-1")) for reply in range(40)
    }
    assert len({s.split()[0] for s in seen}) == 1
    assert len({s.split()[1] for s in seen}) > 1
