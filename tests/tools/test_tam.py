"""TAM parsing: the seed's examples, the decisions the seed leaves open, and properties
over random values (unicode, Chinese, code, JSON)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from storyloom.tools.tam import (
    CLOSE,
    END,
    START,
    TamResult,
    format_tam_results,
    parse_tam,
)

SEED_SINGLE = """好的，我将使用 FileOperator.ApplyEdit 工具来修改文件。

<|[REQUEST_TOOL]|>
command:「始」FileOperator.ApplyEdit「末」
filePath:「始」/path/to/your/project/main.js「末」
search_string:「始」console.log("old message");「末」
replace_string:「始」console.log("new message");「末」
<|[END_TOOL]|>"""

SEED_CHAIN = """<|[REQUEST_TOOL]|>
# 步骤 1: 创建文件
command1:「始」FileOperator.WriteFile「末」
filePath1:「始」/logs/today.log「末」
content1:「始」任务开始...「末」

# 步骤 2: 追加日志
command2:「始」FileOperator.AppendFile「末」
filePath2:「始」/logs/today.log「末」
content2:「始」\\n添加新记录。「末」
<|[END_TOOL]|>"""


def block(*pairs: tuple[str, str]) -> str:
    body = "\n".join(f"{key}:「始」{value}「末」" for key, value in pairs)
    return f"{START}\n{body}\n{END}"


def calls_of(output: str) -> list[tuple[str, dict[str, str], int]]:
    return [(c.tool, c.arguments, c.step) for c in parse_tam(output).calls]


# --- the seed's examples ---------------------------------------------------------------


def test_the_seeds_single_call_gives_its_tool_arguments_and_the_text_before_it() -> None:
    parsed = parse_tam(SEED_SINGLE)
    assert calls_of(SEED_SINGLE) == [
        (
            "FileOperator.ApplyEdit",
            {
                "filePath": "/path/to/your/project/main.js",
                "search_string": 'console.log("old message");',
                "replace_string": 'console.log("new message");',
            },
            1,
        )
    ]
    assert parsed.text == "好的，我将使用 FileOperator.ApplyEdit 工具来修改文件。"
    assert parsed.problems == []


def test_the_seeds_chain_runs_in_number_order_with_suffixes_removed_and_comments_ignored() -> None:
    assert calls_of(SEED_CHAIN) == [
        ("FileOperator.WriteFile", {"filePath": "/logs/today.log", "content": "任务开始..."}, 1),
        (
            "FileOperator.AppendFile",
            {"filePath": "/logs/today.log", "content": "\\n添加新记录。"},
            2,
        ),
    ]


def test_the_json_dump_has_exactly_the_issues_shape() -> None:
    dumped = parse_tam("Rolling.\n" + block(("command", "chat:RollDice"), ("sides", "20")))
    assert dumped.model_dump(mode="json") == {
        "calls": [{"tool": "chat:RollDice", "arguments": {"sides": "20"}, "step": 1}],
        "text": "Rolling.",
        "problems": [],
    }
    truncated = parse_tam(f"{START}\ncommand:「始」x")
    assert json.loads(truncated.model_dump_json()).keys() == {"calls", "text", "problems"}
    assert set(truncated.model_dump()["problems"][0]) == {"message", "offset"}


# --- values and keys ------------------------------------------------------------------


def test_values_are_verbatim_multiline_code_json_and_xml() -> None:
    code = 'def f(x):\n    return {"a": [1, 2]}  # 注释\n'
    xml = '<entry id="1"><![CDATA[ a < b ]]></entry>'
    raw_json = '{"k": "v\\n", "list": [1, 2.5, null]}'
    output = block(
        ("command", "kb:CreateEntry"),
        ("code", code),
        ("xml", xml),
        ("json", raw_json),
        ("markers", f"「始」 and {START} inside a value"),
        ("padded", "  spaced  "),
    )
    assert calls_of(output)[0][1] == {
        "code": code,
        "xml": xml,
        "json": raw_json,
        "markers": f"「始」 and {START} inside a value",
        "padded": "  spaced  ",
    }


def test_command_is_recognised_case_and_underscore_insensitively() -> None:
    assert calls_of(block(("COMMAND", "a:b")))[0][0] == "a:b"
    assert calls_of(block(("Com_mand", " a:b \n")))[0][0] == "a:b"
    chain = block(("Command_1", "t:one"), ("file_path_1", "p"), ("COMMAND_2", "t:two"))
    assert calls_of(chain) == [("t:one", {"file_path": "p"}, 1), ("t:two", {}, 2)]


def test_keys_may_follow_each_other_on_one_line_and_after_the_start_marker() -> None:
    output = f"{START}command:「始」a:b「末」 x：「始」1「末」y : 「始」2「末」{END}"
    assert calls_of(output) == [("a:b", {"x": "1", "y": "2"}, 1)]


def test_a_key_that_does_not_start_a_line_is_ignored_with_its_line() -> None:
    output = f"{START}\ncommand:「始」a:b「末」\nnote that x:「始」1「末」\n{END}"
    assert calls_of(output) == [("a:b", {}, 1)]


def test_chain_steps_follow_the_numbers_not_the_order_written_and_allow_gaps() -> None:
    output = block(("command3", "t:c"), ("arg3", "z"), ("command1", "t:a"), ("arg1", "x"))
    assert calls_of(output) == [("t:a", {"arg": "x"}, 1), ("t:c", {"arg": "z"}, 2)]


def test_a_chained_key_with_digits_of_its_own_takes_the_suffix_that_names_a_command() -> None:
    output = block(("command1", "t:a"), ("line21", "first"), ("command2", "t:b"), ("x_2", "y"))
    assert calls_of(output) == [("t:a", {"line2": "first"}, 1), ("t:b", {"x": "y"}, 2)]


def test_in_a_single_call_a_key_ending_in_digits_is_kept_as_written() -> None:
    assert calls_of(block(("command", "t:a"), ("line2", "v")))[0][1] == {"line2": "v"}


# --- several blocks --------------------------------------------------------------------


def test_several_blocks_all_run_in_order_with_steps_continuing() -> None:
    output = (
        "First.\n"
        + block(("command", "t:a"))
        + "\nThen.\n"
        + block(("command1", "t:b"), ("command2", "t:c"))
        + "\nDone."
    )
    parsed = parse_tam(output)
    assert [(c.tool, c.step, c.block) for c in parsed.calls] == [
        ("t:a", 1, 0),
        ("t:b", 2, 1),
        ("t:c", 3, 1),
    ]
    assert [[c.tool for c in group] for group in parsed.blocks()] == [["t:a"], ["t:b", "t:c"]]
    assert parsed.text == "First.\nThen.\nDone."


def test_a_calls_offset_is_its_command_key() -> None:
    output = "abc " + block(("command", "t:a"))
    call = parse_tam(output).calls[0]
    assert output[call.offset :].startswith("command:")


# --- what does not run ---------------------------------------------------------------


def test_a_truncated_value_does_not_run_and_stays_in_the_text() -> None:
    output = (
        "Writing the entry.\n" + f"{START}\ncommand:「始」kb:CreateEntry「末」\ncontent:「始」龙"
    )
    parsed = parse_tam(output)
    assert parsed.calls == []
    assert parsed.text == output
    [problem] = parsed.problems
    assert "`content`" in problem.message and "「末」" in problem.message
    assert output[problem.offset :].startswith("content:")


def test_a_value_without_close_before_the_end_marker_fails_only_its_block() -> None:
    broken = f"{START}\ncommand:「始」t:a「末」\nx:「始」oops\n{END}"
    output = broken + "\n" + block(("command", "t:b"))
    parsed = parse_tam(output)
    assert [c.tool for c in parsed.calls] == ["t:b"]
    assert parsed.text == broken
    assert "`x`" in parsed.problems[0].message


def test_a_block_without_end_marker_does_not_run_whether_cut_by_the_end_or_another_block() -> None:
    unterminated = f"{START}\ncommand:「始」t:a「末」\n"
    assert calls_of(unterminated) == []
    assert parse_tam(unterminated).problems[0].offset == 0
    output = unterminated + block(("command", "t:b"))
    assert calls_of(output) == [("t:b", {}, 1)]
    assert "END_TOOL" in parse_tam(output).problems[0].message


def test_a_block_without_command_is_a_problem() -> None:
    output = f"{START}\ncommand: kb:Query\nquery: dragons\n{END}"
    parsed = parse_tam(output)
    assert parsed.calls == []
    assert "no `command`" in parsed.problems[0].message
    assert parsed.text == output


def test_key_problems_stop_the_whole_block() -> None:
    cases = {
        "mixes": block(("command", "t:a"), ("command1", "t:b")),
        "names no step": block(("command1", "t:a"), ("path", "x")),
        "given twice in one call": block(("command", "t:a"), ("filePath", "1"), ("file_path", "2")),
        "given twice in one block": block(("command1", "t:a"), ("command_1", "t:b")),
        "names no tool": block(("command", "  ")),
    }
    for expected, output in cases.items():
        parsed = parse_tam(output)
        assert parsed.calls == [], expected
        assert any(expected in p.message for p in parsed.problems), (expected, parsed.problems)


def test_blocks_in_code_fences_are_text_and_a_problem() -> None:
    call = block(("command", "t:a"))
    for fence in ("```", "~~~", "````tam"):
        output = f"Example:\n{fence}\n{call}\n{fence[:4].rstrip('tam')}\nafter"
        parsed = parse_tam(output)
        assert parsed.calls == [], fence
        assert parsed.text == output
        assert "code fence" in parsed.problems[0].message


def test_an_unclosed_fence_covers_the_rest_and_a_closed_one_does_not() -> None:
    call = block(("command", "t:a"))
    assert calls_of("```python\nprint(1)\n" + call) == []
    assert calls_of("```python\nprint(1)\n```\n" + call) == [("t:a", {}, 1)]
    # A shorter or different run does not close a fence.
    assert calls_of("````\n```\n~~~~\n" + call) == []


def test_a_fence_inside_a_value_does_not_open_a_fence() -> None:
    first = block(("command", "kb:CreateEntry"), ("content", "```python\nx = 1\n"))
    second = block(("command", "t:b"))
    assert [c[0] for c in calls_of(first + "\n" + second)] == ["kb:CreateEntry", "t:b"]


def test_blocks_in_inline_code_quoted_lines_and_quotation_marks_do_not_run() -> None:
    inline = f"Write `{START}command:「始」t:a「末」{END}` to call."
    quoted_line = "> " + block(("command", "t:a")).replace("\n", "\n> ")
    curly = f"他说：“{block(('command', 't:a'))}”"
    corner = f"「{block(('command', 't:a'))}」"
    ascii_quote = f'She typed: "{block(("command", "t:a"))}"'
    for output in (inline, quoted_line, curly, corner, ascii_quote):
        parsed = parse_tam(output)
        assert parsed.calls == [], output
        assert parsed.text == output
        assert len(parsed.problems) == 1, output


def test_closed_inline_code_before_a_block_does_not_stop_it() -> None:
    assert calls_of("Use `kb:Query` now: " + block(("command", "kb:Query"))) == [
        ("kb:Query", {}, 1)
    ]


def test_roleplay_that_mentions_markers_without_a_block_has_no_calls_and_no_problems() -> None:
    replies = [
        "她低声说：REQUEST_TOOL 这个词在古卷里出现过，「始」与「末」是封印的两端。",
        f"The scroll reads `{START}` at the top, nothing more.",
        f"He scribbled {START} on the wall and walked away.",
        "> The bard sings of 「始」 and 「末」.",
        f"```\n{START}\n```\nJust an example of the opening marker.",
    ]
    for reply in replies:
        parsed = parse_tam(reply)
        assert parsed.calls == [] and parsed.problems == [], reply
        assert parsed.text == reply


# --- text ------------------------------------------------------------------------------


def test_whitespace_around_removed_blocks_is_tidied_and_elsewhere_kept() -> None:
    call = block(("command", "t:a"))
    assert parse_tam(f"A.\n\n{call}\n\nB.").text == "A.\n\nB."
    assert parse_tam(f"A. {call} B.").text == "A. B."
    assert parse_tam(f"A.{call}B.").text == "A.B."
    assert parse_tam(f"\n\n{call}\n\nB.  ").text == "B.  "
    assert parse_tam(f"  A.\n{call}\n{call}\n\n").text == "  A."
    assert parse_tam(f"A.\n{call}\n\n{call}\nB.").text == "A.\n\nB."
    assert parse_tam("  plain text, no calls \n").text == "  plain text, no calls \n"


# --- results ---------------------------------------------------------------------------


def test_results_are_one_block_per_call_with_status_and_verbatim_values() -> None:
    text = format_tam_results(
        [
            TamResult("chat:RollDice", "ok", {"total": 14, "名字": "龙"}, step=1),
            TamResult("kb:ReadEntry", "ok", "line 1\nline 2", step=2),
            TamResult("kb:CreateEntry", "denied", error="denied by policy", step=3),
            TamResult("kb:UpdateEntry", "skipped", step=4),
        ]
    )
    assert text == (
        "<|[TOOL_RESULT]|>\ntool:「始」chat:RollDice「末」\nstep:「始」1「末」\n"
        'status:「始」ok「末」\nresult:「始」{"total": 14, "名字": "龙"}「末」\n'
        "<|[END_TOOL_RESULT]|>\n"
        "<|[TOOL_RESULT]|>\ntool:「始」kb:ReadEntry「末」\nstep:「始」2「末」\n"
        "status:「始」ok「末」\nresult:「始」line 1\nline 2「末」\n<|[END_TOOL_RESULT]|>\n"
        "<|[TOOL_RESULT]|>\ntool:「始」kb:CreateEntry「末」\nstep:「始」3「末」\n"
        "status:「始」denied「末」\nerror:「始」denied by policy「末」\n<|[END_TOOL_RESULT]|>\n"
        "<|[TOOL_RESULT]|>\ntool:「始」kb:UpdateEntry「末」\nstep:「始」4「末」\n"
        "status:「始」skipped「末」\nerror:「始」an earlier step of this block failed「末」\n"
        "<|[END_TOOL_RESULT]|>"
    )


def test_results_accept_the_tuple_form_and_results_never_parse_as_calls() -> None:
    text = format_tam_results([("t:a", True, None, None), ("t:b", False, None, "boom")])
    assert "status:「始」ok「末」\nresult:「始」null「末」" in text
    assert "status:「始」error「末」\nerror:「始」boom「末」" in text
    assert parse_tam(text).calls == []


# --- properties ------------------------------------------------------------------------

KEYS = st.from_regex(r"[A-Za-z][A-Za-z_]{0,10}[A-Za-z]", fullmatch=True).filter(
    lambda k: "command" not in k.lower().replace("_", "")
)
VALUES = st.one_of(
    st.text(),
    st.text(alphabet="龙骑士之剑「」始末『』，。！\n "),
    st.sampled_from(
        [
            '{"a": [1, {"b": "c"}], "d": null}',
            "def f():\n    return '「始」'\n",
            "<root><a x='1'/></root>",
            "```\ncode\n```",
            "> quoted\n",
            f"{START} inside",
        ]
    ),
).filter(lambda v: CLOSE not in v and END not in v)
PROSE = st.text(alphabet="abc 龙，。!?\n").filter(lambda t: START not in t)


@settings(max_examples=300)
@given(
    prose=PROSE,
    tool=st.from_regex(r"[a-z]{1,8}:[A-Za-z]{1,8}", fullmatch=True),
    pairs=st.dictionaries(KEYS, VALUES, max_size=5),
)
def test_any_values_come_back_verbatim(prose: str, tool: str, pairs: dict[str, str]) -> None:
    lowered = {k.lower().replace("_", "") for k in pairs}
    if len(lowered) < len(pairs):
        return
    output = prose + "\n" + block(("command", tool), *pairs.items()) + "\n" + prose
    parsed = parse_tam(output)
    assert [(c.tool, c.arguments) for c in parsed.calls] == [(tool, pairs)]
    assert parsed.problems == []


@settings(max_examples=300)
@given(
    steps=st.lists(
        st.dictionaries(KEYS, VALUES, max_size=3),
        min_size=1,
        max_size=4,
    )
)
def test_any_chain_comes_back_in_order(steps: list[dict[str, str]]) -> None:
    pairs: list[tuple[str, str]] = []
    for number, arguments in enumerate(steps, start=1):
        pairs.append((f"command{number}", f"t:step{number}"))
        pairs.extend((f"{key}{number}", value) for key, value in arguments.items())
    if any(len({k.lower().replace("_", "") for k in a}) < len(a) for a in steps):
        return
    parsed = parse_tam(block(*pairs))
    assert [(c.tool, c.arguments, c.step) for c in parsed.calls] == [
        (f"t:step{n}", arguments, n) for n, arguments in enumerate(steps, start=1)
    ]


@settings(max_examples=300)
@given(st.text())
def test_without_an_executed_block_the_text_is_the_output(output: str) -> None:
    parsed = parse_tam(output)
    if not parsed.calls:
        assert parsed.text == output


FRAGMENTS = st.lists(
    st.sampled_from(
        [
            START,
            END,
            "「始」",
            "「末」",
            "command:",
            "x:",
            "\n",
            "```",
            "`",
            "> ",
            "“",
            "龙",
            " ",
            "a",
        ]
    ),
    max_size=60,
).map("".join)


@settings(max_examples=300)
@given(FRAGMENTS)
def test_every_call_comes_from_a_command_key_and_the_text_is_never_longer(output: str) -> None:
    parsed = parse_tam(output)
    for call in parsed.calls:
        assert call.tool and output[call.offset :].lower().startswith("command")
    assert len(parsed.text) <= len(output)
