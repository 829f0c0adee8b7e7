"""EJS templates (ST-Prompt-Template's syntax) rendered in the sandboxed script worker:
each tag kind, whitespace slurping, the variable scopes, and what a template that fails
leaves (its text as written, named with its line)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storyloom.chat.prompt.ejs_compiler import EjsSyntaxError, compile_ejs
from storyloom.chat.prompt.ejs_template import (
    TemplateResult,
    TemplateScopes,
    TemplateSource,
    WorldInfoText,
    render_templates,
    render_templates_blocking,
)


async def render(text: str, scopes: TemplateScopes | None = None, **options: Any) -> str:
    result = await one(text, scopes, **options)
    assert result.problem is None, result.problem
    return result.text


async def one(text: str, scopes: TemplateScopes | None = None, **options: Any) -> TemplateResult:
    results = await render_templates(
        [TemplateSource(name="entry", text=text)], scopes or TemplateScopes(), **options
    )
    return results[0]


async def test_each_tag_kind_writes_what_ejs_writes() -> None:
    text = "a<% const x = 2 %>b<%= x * 3 %>c<%- '<i>' %>d<%# a comment %>e"
    assert await render(text) == "ab6c<i>de"


async def test_escaped_output_escapes_html_only_in_a_displayed_message() -> None:
    assert await render("<%= '<b>&' %>") == "<b>&"
    assert await render("<%= '<b>&' %>", escape=True) == "&lt;b&gt;&amp;"
    assert await render("<%- '<b>' %>", escape=True) == "<b>"


async def test_null_and_undefined_write_nothing() -> None:
    assert await render("[<%= null %><%- undefined %>]") == "[]"


async def test_whitespace_slurping_and_newline_trimming() -> None:
    text = "A\n   <%_ if (true) { _%>   \nB\n<% } -%>\nC"
    assert await render(text) == "A\nB\nC"
    assert await render("x <%_ 1 %>y") == "xy"
    assert await render("x<% 1 -%>\ny") == "xy"
    assert await render("x<% 1 %>\ny") == "x\ny"


async def test_a_literal_open_and_close_tag() -> None:
    assert await render("<%% not code %%> <%= 1 %>") == "<% not code %> 1"


async def test_print_writes_where_the_code_runs() -> None:
    assert await render("a<% print('b', 'c') %>d") == "abcd"


async def test_the_message_scope_is_the_turns_variables_and_writes_are_reported() -> None:
    scopes = TemplateScopes(message={"hp": 10, "stat_data": {"系统": {"当前阶段": "损友成型"}}})
    text = (
        "<%_ const phase = getvar('stat_data.系统.当前阶段', { defaults: '磨合期' }); _%>"
        "<%= phase %>/<% incvar('hp', 5) %><%= getvar('hp') %>/<%= getvar('none', {defaults: 7}) %>"
    )
    result = await one(text, scopes)
    assert result.text == "损友成型/15/7"
    assert [(w.scope, w.key, w.value) for w in result.writes] == [("message", "hp", 15)]


async def test_local_and_chat_are_the_message_scope_and_global_is_the_users() -> None:
    scopes = TemplateScopes(message={"a": 1}, global_={"g": 2})
    text = (
        "<% setvar('b', getvar('a', {scope: 'local'}) + 1, {scope: 'chat'}) %>"
        "<% setvar('g', getvar('g', {scope: 'global'}) + 1, {scope: 'global'}) %>"
        "<%= variables.b %>,<%= variables.g %>"
    )
    result = await one(text, scopes)
    assert result.text == "2,3"
    assert {(w.scope, w.key, w.value) for w in result.writes} == {
        ("message", "b", 2),
        ("global", "g", 3),
    }


async def test_the_character_scope_is_read_only() -> None:
    scopes = TemplateScopes(character={"mood": "calm"})
    assert await render("<%= getvar('mood', {scope: 'character'}) %>", scopes) == "calm"
    text = "x\n<% setvar('mood', 'angry', {scope: 'character'}) %>"
    result = await one(text, scopes)
    assert result.text == text
    assert result.problem is not None and result.problem.line == 2
    assert "character scope is read only" in result.problem.message


async def test_an_unknown_scope_is_an_error_naming_it() -> None:
    result = await one("<% getvar('x', {scope: 'preset'}) %>")
    assert result.problem is not None
    assert "'preset' is not supported" in result.problem.message


async def test_lodash_functions_cards_call() -> None:
    scopes = TemplateScopes(message={"stat_data": {"好感": [40, "好感度"], "items": [3, 1, 2]}})
    text = (
        "<%= _.has(getvar('stat_data'), '好感') %>,<%= _.get(variables, 'stat_data.好感[0]') %>,"
        "<%= _.sum(variables.stat_data.items) %>,"
        "<%= _.sortBy(variables.stat_data.items).join('') %>,"
        "<%= _.clamp(120, 0, 100) %>,<%= _.isEqual({a: [1]}, {a: [1]}) %>,"
        "<%= _.uniq([1, 1, 2]).length %>,<%= _.range(3).join('') %>"
    )
    assert await render(text, scopes) == "true,40,6,123,100,true,2,012"


async def test_a_runtime_error_names_the_template_and_line_and_leaves_the_text() -> None:
    text = "one\ntwo\n<% null.x %>\nfour"
    result = await one(text)
    assert result.text == text
    assert result.problem is not None
    assert (result.problem.name, result.problem.line) == ("entry", 3)
    assert "TypeError" in result.problem.message
    assert result.writes == []


async def test_a_syntax_error_names_its_line() -> None:
    result = await one("a\nb\n<% if ( { %>\n<% } %>")
    assert result.problem is not None and result.problem.line == 3
    assert result.problem.message.startswith("SyntaxError")


async def test_an_unclosed_tag_names_the_line_it_opens_on() -> None:
    with pytest.raises(EjsSyntaxError) as caught:
        compile_ejs("a\n<% if (x) {")
    assert caught.value.line == 2
    result = await one("a\n<% if (x) {")
    assert result.problem is not None and result.problem.line == 2


async def test_one_failing_template_leaves_the_others_of_its_batch_rendered() -> None:
    results = await render_templates(
        [
            TemplateSource(name="first", text="<% setvar('n', 1) %>A"),
            TemplateSource(name="broken", text="<% throw new Error('boom') %>"),
            TemplateSource(name="third", text="<%= getvar('n') %>"),
        ],
        TemplateScopes(),
    )
    assert [r.text for r in results] == ["A", "<% throw new Error('boom') %>", "1"]
    assert results[1].problem is not None and results[1].problem.message == "Error: boom"


async def test_an_endless_loop_is_stopped_and_named_and_the_rest_renders() -> None:
    results = await render_templates(
        [
            TemplateSource(name="before", text="<% setvar('n', 2) %>B"),
            TemplateSource(name="loop", text="<% while (true) {} %>"),
            TemplateSource(name="after", text="<%= getvar('n') %>"),
        ],
        TemplateScopes(),
    )
    assert [r.text for r in results] == ["B", "<% while (true) {} %>", "2"]
    problem = results[1].problem
    assert problem is not None and problem.name == "loop" and problem.limit == "time"


async def test_a_condition_is_true_or_false() -> None:
    results = await render_templates(
        [
            TemplateSource(name="yes", text="variables.hp > 5", kind="condition"),
            TemplateSource(name="no", text="getvar('hp') > 50", kind="condition"),
        ],
        TemplateScopes(message={"hp": 10}),
    )
    assert [r.value for r in results] == [True, False]


async def test_the_names_and_the_message_a_template_sees() -> None:
    text = "<%= user %>/<%= char %>/<%= is_user %>"
    result = await render(text, names={"user": "Ann", "char": "Sera"}, message={"is_user": True})
    assert result == "Ann/Sera/true"


plain = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=200).filter(
    lambda t: "<%" not in t
)


@given(text=plain)
def test_text_without_a_tag_is_unchanged(text: str) -> None:
    assert (
        render_templates_blocking([TemplateSource(name="t", text=text)], TemplateScopes())[0].text
        == text
    )


pieces = st.lists(
    st.sampled_from(
        [
            "<%",
            "%>",
            "<%=",
            "<%-",
            "<%_",
            "_%>",
            "-%>",
            "<%#",
            "<%%",
            "%%>",
            "x",
            " ",
            "\n",
            "(",
            "}",
            "{",
            "'",
            "1",
            "getvar('a')",
            "print(2)",
            ";",
            "if (a) {",
        ]
    ),
    max_size=20,
).map("".join)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=pieces)
def test_any_template_renders_or_errors_without_raising(text: str) -> None:
    result = render_templates_blocking([TemplateSource(name="t", text=text)], TemplateScopes())[0]
    if result.problem is not None:
        assert result.text == text
    else:
        assert isinstance(result.text, str)


async def test_a_write_that_is_not_json_data_fails_only_its_template() -> None:
    results = await render_templates(
        [
            TemplateSource(name="big", text="<% setvar('n', 10n) %>x"),
            TemplateSource(name="next", text="<%= 1 %>"),
        ],
        TemplateScopes(),
    )
    assert results[0].problem is not None and "not JSON data" in results[0].problem.message
    assert results[1].text == "1"


async def test_random_is_seeded_so_the_same_turn_renders_the_same_text() -> None:
    text = "<%= _.random(1, 1000000) %>,<%= Math.random() %>"
    first = await render(text, seed=7)
    assert await render(text, seed=7) == first
    assert await render(text, seed=8) != first


WORLD = [
    WorldInfoText("kb_a", "Book A", "1", "Sword", "SWORD <%= typeof n === 'undefined' ? 0 : n %>"),
    WorldInfoText("kb_b", "Book B", "2", "Sword", "OTHER SWORD"),
    WorldInfoText("kb_a", "Book A", "3", "Loop", "<%- getwi('Loop') %>"),
]


async def test_getwi_reads_an_entry_by_title_id_regexp_and_book_rendered_with_its_data() -> None:
    text = (
        "<%- getwi('Sword', {n: 2}) %>|<%- getwi('Book B', 'Sword') %>|<%- getwi(/^Sw/) %>"
        "|<%- getwi(2) %>|[<%- getwi('none') %>]"
    )
    out = await render(text, world_info=lambda: WORLD)
    assert out == "SWORD 2|OTHER SWORD|SWORD 0|OTHER SWORD|[]"


async def test_getwi_entries_reading_each_other_stop_and_say_so() -> None:
    result = await one("<%- getwi('Loop') %>", world_info=lambda: WORLD)
    assert result.problem is not None and "more than 8 deep" in result.problem.message


async def test_the_entries_are_read_only_when_a_template_calls_getwi() -> None:
    asked: list[int] = []

    def world() -> list[WorldInfoText]:
        asked.append(1)
        return WORLD

    assert await render("<%= 1 %>", world_info=world) == "1"
    assert asked == []


async def test_getchar_gives_only_the_chat_s_card() -> None:
    card = {"name": "Maren", "description": "keeper", "system_prompt": "Be brief."}
    out = await render("<%- getchar() %>", card=card)
    assert out == "<Maren>\nSystem: Be brief.\nname: Maren\ndescription: keeper\n</Maren>"
    assert await render("[<%- getchar('Someone') %>]<%= getCharData('x') %>", card=card) == "[]"


async def test_define_is_seen_by_the_later_templates_of_the_batch() -> None:
    results = await render_templates(
        [
            TemplateSource(name="a", text="<% define('cfg', {a: 1}) %>"),
            TemplateSource(name="b", text="<% define('cfg', {b: 2}, true) %>"),
            TemplateSource(name="c", text="<%= JSON.stringify(cfg) %>"),
        ],
        TemplateScopes(),
    )
    assert results[2].text == '{"a":1,"b":2}'


@pytest.mark.parametrize("name", ["execute", "getqr", "getpreset", "activewi", "injectPrompt"])
async def test_a_sillytavern_only_function_fails_naming_itself(name: str) -> None:
    result = await one(f"<% {name}('x') %>")
    assert result.problem is not None
    assert f"{name} is not available" in result.problem.message
