"""Filament: the streaming reply parser (seed 001 §2) and its update vocabulary."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storyloom.chat.reply.filament import (
    MAX_TAG_LENGTH,
    FilamentEvent,
    FilamentParser,
    FilamentResult,
    FilamentTags,
    parse_filament,
)
from storyloom.chat.reply.mvu_values import apply_mvu_ops
from storyloom.chat.reply.state_ops import StateOp, apply_ops

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sillytavern"
MVU_CARD = FIXTURES / "card_academy_zh_v3_mvu.json"

# seed 001 §2.2's example as a model writes it (the seed annotates it with comments)
SEED_EXAMPLE = """<thought>
    分析用户意图...
    决定执行攻击动作...
</thought>

<state_update>
    <set key="hp" value="90"></set>
    <add key="gold" value="10"></add>
</state_update>

<reply>
    你挥舞长剑，击中了哥布林！
</reply>
"""

MVU_REPLY = """山长把一卷字帖递给阿砚。"今日先临这一卷。"

<UpdateVariable>
<Analysis>
- time passed: half a day
- dramatic updates allowed: no
- 阿砚.墨技进度: old_value (0) + delta (5) = new_value (5)
</Analysis>
<JSONPatch>
[
  { "op": "replace", "path": "/书院/当前课业", "value": "临帖" },
  { "op": "replace", "path": "/阿砚/墨技进度", "value": 5 },
  { "op": "add", "path": "/书院/同窗", "value": ["阿砚"] },
  { "op": "remove", "path": "/书院/当前地点" }
]
</JSONPatch>
</UpdateVariable>"""

# every edge case in one list: each must parse the same however the stream is cut
STREAMS = [
    SEED_EXAMPLE,
    MVU_REPLY,
    "1 < 2 and 3 > 2, <b>bold</b> <div class=x>box</div> a<<reply>b</reply>",
    "Hello [PROGRESS] world",
    "<thought>hmm</thought>\n\n<reply>  spaced   out  </reply>  \n",
    "before <reply a='1' b=\"2\">in</reply > after</reply>",
    "<reply>unclosed <thought>deep",
    "text <rep",
    "<state_update><set key='a' value='1'/><set key=\"b\">2</set></state_update>rest",
    "<state_update>\n<set key='x' value='1'/>\n<reply>swallowed?</reply>",
    "<progress></progress>Done. [progr",
    '<updatevariable><jsonpatch>[{"op":"delta","path":"/hp","value":-3}]</jsonpatch>'
    "</updatevariable>ok",
    "<reply>[PRO<thought>x</thought>GRESS]</reply>",
    "<reply>[PRO[PROGRESS]GRESS]</reply>",
    "中文<thought>思考</thought>回复<reply>正文</reply>",
]


def run(
    chunks: Iterable[str], tags: FilamentTags | None = None
) -> tuple[list[FilamentEvent], FilamentResult]:
    parser = FilamentParser(tags)
    events: list[FilamentEvent] = []
    for chunk in chunks:
        events += parser.feed(chunk)
    events += parser.close()
    return events, parser.result


def merged(events: Sequence[FilamentEvent]) -> list[tuple[str, str, str, bool, tuple[Any, ...]]]:
    """Events with neighbouring text events of one kind joined: how a stream was cut
    may change how text is split into events, never anything else. (A ``progress``
    event comes when the marker is seen, so where it falls among the text events does
    depend on the cut; it is compared on its own.)"""
    out: list[tuple[str, str, str, bool, tuple[Any, ...]]] = []
    progress = [e for e in events if e.kind == "progress"]
    if progress:
        out.append(("progress", "", "", False, (len(progress),)))
    for e in events:
        if e.kind == "progress":
            continue
        text_kind = e.kind in ("reply", "thought", "tag_text")
        if text_kind and out and out[-1][0] == e.kind and out[-1][2] == e.tag:
            kind, text, tag, auto, extra = out[-1]
            out[-1] = (kind, text + e.text, tag, auto, extra)
        else:
            out.append((e.kind, e.text, e.tag, e.auto_closed, (e.ops, e.problems)))
    return out


def visible(events: Iterable[FilamentEvent]) -> str:
    return "".join(e.text for e in events if e.kind == "reply")


# -- the seed's example ----------------------------------------------------------------------


def test_seed_example_gives_reply_thought_and_ops() -> None:
    result = parse_filament(SEED_EXAMPLE)
    assert result.reply == "你挥舞长剑，击中了哥布林！"
    assert result.thought == "分析用户意图...\n决定执行攻击动作..."
    assert result.ops == [
        StateOp(op="set", path="/hp", value=90),
        StateOp(op="add", path="/gold", value=10),
    ]
    assert result.problems == []
    assert result.progress is False
    assert result.raw == SEED_EXAMPLE
    assert apply_ops({"hp": 100, "gold": 5}, result.ops).variables == {"hp": 90, "gold": 15}


def test_comments_are_text_like_any_other_non_tag() -> None:
    result = parse_filament("<!-- 最终回复 (必须) -->\n<reply>Hi</reply>")
    assert result.reply == "<!-- 最终回复 (必须) -->\nHi"


def test_seed_example_events_stream_in_order() -> None:
    events, _ = run(SEED_EXAMPLE)  # one character at a time
    kinds = [(kind, tag) for kind, _, tag, _, _ in merged(events)]
    assert kinds == [
        ("open", "thought"),
        ("thought", "thought"),
        ("close", "thought"),
        ("open", "state_update"),
        ("close", "state_update"),
        ("update", "state_update"),
        ("open", "reply"),
        ("reply", ""),
        ("close", "reply"),
    ]
    update = next(e for e in events if e.kind == "update")
    assert [o.op for o in update.ops] == ["set", "add"]


# -- split anywhere ------------------------------------------------------------------------


@pytest.mark.parametrize("text", STREAMS)
def test_every_split_point_parses_like_one_piece(text: str) -> None:
    whole_events, whole = run([text])
    assert visible(whole_events) == whole.reply
    for cut in range(len(text) + 1):
        events, result = run([text[:cut], text[cut:]])
        assert result == whole, cut
        assert merged(events) == merged(whole_events), cut


@pytest.mark.parametrize("text", STREAMS)
def test_one_character_at_a_time_parses_like_one_piece(text: str) -> None:
    whole_events, whole = run([text])
    events, result = run(list(text))
    assert result == whole
    assert merged(events) == merged(whole_events)
    assert visible(events) == whole.reply


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_streams_joined_and_cut_anywhere_parse_like_one_piece(data: st.DataObject) -> None:
    pieces = data.draw(st.lists(st.sampled_from(STREAMS), min_size=1, max_size=4))
    text = "".join(pieces)
    whole_events, whole = run([text])
    cuts = sorted(data.draw(st.sets(st.integers(1, max(len(text) - 1, 1)), max_size=40)))
    chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    events, result = run(chunks)
    assert result == whole
    assert merged(events) == merged(whole_events)


# -- the whitelist -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "1 < 2",
        "x<y and y>z",
        "<b>bold</b>",
        '<div class="status">HP 90</div>',
        "<div class=x>hi</div>",
        "<replyx>no</replyx>",
        "<reply-to>no</reply-to>",
        "< reply>spaced</ reply>",
        "<Reply>case matters</Reply>",
        '<set key="hp" value="1"></set>',
        "<reply,>",
        "<reply foo>",
        "<reply a=>",
        "<>",
        "</>",
        "<3 you",
    ],
)
def test_anything_not_whitelisted_is_text(text: str) -> None:
    result = parse_filament(text)
    assert result.reply == text
    assert result.ops == []
    assert result.problems == []


def test_text_after_a_less_than_streams_once_it_cannot_be_a_tag() -> None:
    parser = FilamentParser()
    assert visible(parser.feed("1 <")) == "1"
    assert visible(parser.feed(" 2")) == " < 2"
    assert visible(parser.feed(" <b")) == " <b"  # no whitelisted tag starts with "b"
    assert visible(parser.feed(" <re")) == ""  # may still become <reply>
    assert visible(parser.feed("d>")) == " <red>"
    assert visible(parser.feed(" <thought")) == ""
    events = parser.feed(">x")
    assert [e.kind for e in events] == ["open", "thought"]
    parser.close()
    assert parser.result.reply == "1 < 2 <b <red>"


def test_a_tag_split_inside_its_attributes_is_still_a_tag() -> None:
    events, result = run(["<reply lang='e", "n' mood", '="calm">Hi', "</rep", "ly>"])
    assert result.reply == "Hi"
    assert [e.kind for e in events if e.kind in ("open", "close")] == ["open", "close"]


def test_a_held_back_prefix_is_bounded() -> None:
    parser = FilamentParser()
    parser.feed("start <reply note='")
    released = ""
    for _ in range(MAX_TAG_LENGTH + 10):
        released += visible(parser.feed("x"))
    # the quote never closes: once longer than any tag may be, it is text
    assert released.startswith(" <reply note='x")
    parser.close()
    assert parser.result.reply == "start <reply note='" + "x" * (MAX_TAG_LENGTH + 10)


def test_mvu_names_match_in_any_case_others_exactly() -> None:
    for name in ("UpdateVariable", "updatevariable", "UPDATEVARIABLE"):
        result = parse_filament(f"<{name}><JSONPatch>[]</JSONPatch></{name}>hi")
        assert result.reply == "hi", name
    assert parse_filament("<THOUGHT>x</THOUGHT>").reply == "<THOUGHT>x</THOUGHT>"


# -- text outside tags, whitespace ---------------------------------------------------------


def test_text_outside_any_tag_is_reply_text() -> None:
    result = parse_filament("She nods.<thought>she is lying</thought> Then she leaves.")
    assert result.reply == "She nods. Then she leaves."
    assert result.thought == "she is lying"


def test_reply_is_stripped_and_streamed_without_leading_or_trailing_whitespace() -> None:
    text = "\n\n  <reply>\n   Hello,\n\n  world.  \n</reply>\n\n"
    events, result = run(list(text))
    assert result.reply == "Hello,\n\n  world."
    texts = [e.text for e in events if e.kind == "reply"]
    assert texts[0] == "H"
    assert not any(t.isspace() for t in texts)
    assert "".join(texts) == result.reply


def test_whitespace_between_reply_pieces_is_kept() -> None:
    result = parse_filament("<reply>One.</reply>\n\n<thought>x</thought>\n\n<reply>Two.</reply>")
    assert result.reply == "One.\n\n\n\nTwo."


# -- truncated streams ---------------------------------------------------------------------


def test_truncated_stream_auto_closes_open_tags() -> None:
    events, result = run(["<reply>Hello <thought>hm", "m"])
    closes = [(e.tag, e.auto_closed) for e in events if e.kind == "close"]
    assert closes == [("thought", True), ("reply", True)]
    assert result.reply == "Hello"
    assert result.thought == "hmm"
    assert result.problems == []


def test_truncated_inside_a_tag_keeps_the_text() -> None:
    assert parse_filament("It was <thou").reply == "It was <thou"
    assert parse_filament("It was </rep").reply == "It was </rep"
    assert parse_filament("It was <reply class='a").reply == "It was <reply class='a"


def test_truncated_update_block_still_applies_with_a_problem() -> None:
    events, result = run(['Hi.<state_update><set key="hp" value="80"/><add key="g', 'old" va'])
    assert result.reply == "Hi."
    assert result.ops == [StateOp(op="set", path="/hp", value=80)]
    assert result.problems[0] == "<state_update> was not closed; applied what it held"
    assert result.problems[1] == '<state_update>: ignored text outside op tags: <add key="gold" va'
    update = next(e for e in events if e.kind == "update")
    assert update.problems == tuple(result.problems)


def test_close_twice_and_feed_after_close() -> None:
    parser = FilamentParser()
    parser.feed("<reply>x")
    assert [e.kind for e in parser.close()] == ["close"]
    assert parser.close() == []
    with pytest.raises(RuntimeError, match="closed"):
        parser.feed("more")


def test_result_before_close_is_what_has_arrived() -> None:
    parser = FilamentParser()
    parser.feed("<thought>a</thought>Hello wor")
    assert parser.result.reply == "Hello wor"
    assert parser.result.thought == "a"


# -- stray and nested tags -----------------------------------------------------------------


def test_stray_closing_tag_is_dropped_and_recorded() -> None:
    result = parse_filament("Hello</reply> there</thought>")
    assert result.reply == "Hello there"
    assert result.problems == [
        "</reply> without an open <reply> ignored",
        "</thought> without an open <thought> ignored",
    ]


def test_closing_an_outer_tag_auto_closes_the_inner_ones() -> None:
    events, result = run(["<reply>a<thought>b</reply>c"])
    closes = [(e.tag, e.auto_closed) for e in events if e.kind == "close"]
    assert closes == [("thought", True), ("reply", False)]
    assert result.reply == "ac"
    assert result.thought == "b"


def test_a_forgotten_update_close_does_not_swallow_the_reply() -> None:
    text = "<state_update>\n<set key='mood' value='happy'/>\n<reply>She smiles.</reply>"
    result = parse_filament(text)
    assert result.reply == "She smiles."
    assert result.ops == [StateOp(op="set", path="/mood", value="happy")]
    assert result.problems == ["<state_update> was not closed before <reply>"]


def test_self_closing_builtin_tags_open_and_close() -> None:
    result = parse_filament("Moving on.<progress/> <reply/>")
    assert result.reply == "Moving on."
    assert result.progress is True


# -- hidden and extra tags -----------------------------------------------------------------


def test_thought_never_reaches_reply_events_and_streams_as_thought() -> None:
    events, result = run(list("<thought>secret plan</thought>Hi"))
    assert visible(events) == "Hi"
    assert "".join(e.text for e in events if e.kind == "thought") == "secret plan"
    assert all(e.tag == "thought" for e in events if e.kind == "thought")
    assert result.thought == "secret plan"


def test_extra_tags_are_captured_and_hidden_ones_fold_into_thought() -> None:
    tags = FilamentTags(extra=("status", "状态栏"), hidden=("thought", "think"))
    text = (
        "<think>r1 style</think><status>HP 90</status><状态栏>好感 5</状态栏>"
        "Hi<status>MP 3</status>"
    )
    events, result = run(list(text), tags)
    assert result.reply == "Hi"
    assert result.thought == "r1 style"
    assert result.tags == {"status": "HP 90\n\nMP 3", "状态栏": "好感 5"}
    tag_text = "".join(e.text for e in events if e.kind == "tag_text" and e.tag == "status")
    assert tag_text == "HP 90MP 3"
    # without the configuration these are just text
    assert parse_filament(text).reply == text


def test_an_extra_tag_named_like_a_builtin_keeps_the_builtin_role() -> None:
    result = parse_filament("<reply>x</reply>", FilamentTags(extra=("reply",)))
    assert result.reply == "x"
    assert result.tags == {}


def test_bad_tag_names_are_refused() -> None:
    with pytest.raises(ValueError, match="not usable"):
        FilamentTags(extra=("a b",))
    with pytest.raises(ValueError, match="JSON Pointer"):
        FilamentTags(mvu_root="stat_data")


# -- progress ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["Done. [PROGRESS]", "[PROGRESS] Done.", "Done.\n[progress]", "<progress></progress>Done."],
)
def test_progress_marker_or_tag_sets_progress_and_leaves_the_reply(text: str) -> None:
    for chunks in ([text], list(text)):
        events, result = run(chunks)
        assert result.progress is True
        assert result.reply == "Done."
        assert visible(events) == "Done."
        assert [e.kind for e in events].count("progress") == 1


def test_an_incomplete_marker_is_text() -> None:
    result = parse_filament("Wait [PROGRES")
    assert result.progress is False
    assert result.reply == "Wait [PROGRES"


def test_marker_inside_thought_is_not_progress() -> None:
    result = parse_filament("<thought>[PROGRESS]?</thought>Hi")
    assert result.progress is False
    assert result.thought == "[PROGRESS]?"


def test_progress_tag_saying_false_is_not_progress() -> None:
    assert parse_filament("<progress>false</progress>Hi").progress is False
    assert parse_filament("<progress>yes</progress>Hi").progress is True


# -- state_update vocabulary ---------------------------------------------------------------


def test_state_update_op_tags() -> None:
    text = """<state_update>
        <set key="stats.hp" value="90"></set>
        <set key='name'>Alice</set>
        <set key="/flags/met~1bob" value='true'/>
        <add key="gold" value="10"/>
        <sub key="mp" value="2.5"></sub>
        <inc key="turns"/>
        <dec key="lives" value="2"/>
        <push key="inventory" value='"sword"'/>
        <pull key="inventory">shield</pull>
        <remove key="curse"/>
        <set key="list" value="[1, 2]">
    </state_update>Hi"""
    result = parse_filament(text)
    assert result.problems == []
    assert [(o.op, o.path, o.value) for o in result.ops] == [
        ("set", "/stats/hp", 90),
        ("set", "/name", "Alice"),
        ("set", "/flags/met~1bob", True),
        ("add", "/gold", 10),
        ("sub", "/mp", 2.5),
        ("add", "/turns", 1),
        ("sub", "/lives", 2),
        ("push", "/inventory", "sword"),
        ("pull", "/inventory", "shield"),
        ("remove", "/curse", None),
        ("set", "/list", [1, 2]),
    ]
    out = apply_ops({"mp": 10, "lives": 3, "inventory": ["shield"], "curse": 1}, result.ops)
    assert out.problems == []
    assert out.variables == {
        "stats": {"hp": 90},
        "name": "Alice",
        "flags": {"met/bob": True},
        "gold": 10,
        "mp": 7.5,
        "turns": 1,
        "lives": 1,
        "inventory": ["sword"],
        "list": [1, 2],
    }


def test_a_closing_tag_after_a_self_closing_op_is_harmless() -> None:
    result = parse_filament('<state_update><set key="a" value="1"/></set></state_update>')
    assert result.ops == [StateOp(op="set", path="/a", value=1)]
    assert result.problems == []


def test_absurdly_nested_json_is_a_problem_not_a_crash() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    result = parse_filament(f"<state_update>{deep}</state_update>Hi<JSONPatch>{deep}</JSONPatch>")
    assert result.reply == "Hi"
    assert result.ops == []
    assert len(result.problems) == 2


def test_attribute_values_may_hold_angle_brackets_and_other_quotes() -> None:
    result = parse_filament("""<state_update><set key="note" value="a<b>'c'"/></state_update>""")
    assert result.ops == [StateOp(op="set", path="/note", value="a<b>'c'")]


def test_state_update_accepts_json() -> None:
    obj = parse_filament('<state_update>{"hp": 5, "stats.mp": 2}</state_update>')
    assert obj.ops == [
        StateOp(op="set", path="/hp", value=5),
        StateOp(op="set", path="/stats/mp", value=2),
    ]
    patch = parse_filament('<state_update>[{"op": "add", "path": "/x", "value": 1}]</state_update>')
    assert patch.ops == [
        StateOp(op="patch", path="", patch=[{"op": "add", "path": "/x", "value": 1}])
    ]


def test_malformed_updates_are_problems_and_keep_the_reply() -> None:
    text = (
        "<reply>Before.</reply>"
        "<state_update>"
        '<set value="1"/>'
        '<add key="gold" value="lots"/>'
        '<inc key="x" value="two"/>'
        '<set key="empty"/>'
        "hp = 5"
        '<set key="ok" value="1"/>'
        "</state_update>"
        "<UpdateVariable><JSONPatch>[{op: replace}]</JSONPatch></UpdateVariable>"
        "<reply>After.</reply>"
    )
    for chunks in ([text], list(text)):
        events, result = run(chunks)
        assert result.reply == "Before.After."
        assert result.ops == [StateOp(op="set", path="/ok", value=1)]
        assert result.problems == [
            '<set value="1"/>: no key attribute',
            '<add key="gold" value="lots"/>: value "lots" is not a number',
            '<inc key="x" value="two"/>: value "two" is not a number',
            '<set key="empty"/>: no value',
            "<state_update>: ignored text outside op tags: hp = 5",
            "<JSONPatch>: not valid JSON (Expecting property name enclosed in double quotes: "
            "line 1 column 3 (char 2)): [{op: replace}]",
        ]
        updates = [e for e in events if e.kind == "update"]
        assert [len(e.problems) for e in updates] == [5, 1]


# -- MVU -----------------------------------------------------------------------------------


def mvu_card_format() -> str:
    card = json.loads(MVU_CARD.read_text(encoding="utf-8"))
    for entry in card["data"]["character_book"]["entries"]:
        if "<UpdateVariable>" in entry["content"]:
            return str(entry["content"])
    raise AssertionError("the MVU card no longer asks for <UpdateVariable>")


def test_the_mvu_card_asks_for_json_patch_inside_update_variable() -> None:
    wanted = mvu_card_format()
    assert "<JSONPatch>" in wanted and "</UpdateVariable>" in wanted
    for op_name in ("replace", "add", "remove"):
        assert f'"op": "{op_name}"' in wanted


def test_mvu_reply_updates_stat_data_and_hides_the_block() -> None:
    for chunks in ([MVU_REPLY], list(MVU_REPLY)):
        events, result = run(chunks)
        assert result.reply == '山长把一卷字帖递给阿砚。"今日先临这一卷。"'
        assert result.problems == []
        assert [(o.op, o.path) for o in result.ops] == [("patch", "/stat_data")]
        assert "Analysis" not in visible(events)
    # the card's [InitVar] entry, as MVU loads it
    start = {
        "stat_data": {
            "书院": {"当前季节": "春", "当前课业": "", "当前地点": "藏书楼"},
            "阿砚": {"墨技进度": 0},
        }
    }
    out = apply_ops(start, result.ops)
    assert out.problems == []
    assert out.variables == {
        "stat_data": {
            "书院": {"当前季节": "春", "当前课业": "临帖", "同窗": ["阿砚"]},
            "阿砚": {"墨技进度": 5},
        }
    }


def test_mvu_delta_insert_fences_and_lenient_json() -> None:
    text = """<UpdateVariable>
<json_patch>
```json
[
  {"op": "delta", "path": "/hp", "value": -3},  // took a hit
  {"op": "insert", "path": "/items/-", "value": "herb"},
  {"op": "replace", "path": "名字", "value": "阿念"},
  {"op": "replace", "path": "a/b", "value": 1},
  /* moved */ {"op": "move", "from": "/old", "path": "/new"},
]
```
</json_patch>
</UpdateVariable>"""
    result = parse_filament(text)
    assert result.problems == []
    assert result.reply == ""
    assert [(o.op, o.path, o.value) for o in result.ops] == [
        ("add", "/stat_data/hp", -3),
        ("patch", "/stat_data", None),
    ]
    assert result.ops[1].patch == [
        {"op": "add", "path": "/items/-", "value": "herb"},
        {"op": "replace", "path": "/名字", "value": "阿念"},
        {"op": "replace", "path": "/a/b", "value": 1},
        {"op": "move", "path": "/new", "from": "/old"},
    ]
    out = apply_ops(
        {"stat_data": {"hp": 10, "items": [], "名字": "沈念", "a": {"b": 0}, "old": 1}},
        result.ops,
    )
    assert out.problems == []
    assert out.variables["stat_data"] == {
        "hp": 7,
        "items": ["herb"],
        "名字": "阿念",
        "a": {"b": 1},
        "new": 1,
    }


def test_mvu_bad_patch_entries_are_problems() -> None:
    text = (
        "<UpdateVariable><JSONPatch>["
        '{"op": "delta", "path": "/hp", "value": "lots"},'
        '{"op": "explode", "path": "/x"},'
        '{"op": "replace", "value": 1},'
        '{"op": "replace", "path": "/y"},'
        '{"op": "move", "path": "/z"},'
        "7,"
        '{"op": "replace", "path": "/ok", "value": 1}'
        "]</JSONPatch></UpdateVariable>Hi"
    )
    result = parse_filament(text)
    assert result.reply == "Hi"
    assert result.ops == [
        StateOp(op="patch", path="/stat_data", patch=[{"op": "replace", "path": "/ok", "value": 1}])
    ]
    assert len(result.problems) == 6
    assert "is not a number" in result.problems[0]
    assert "unknown op 'explode'" in result.problems[1]
    assert "no 'path'" in result.problems[2]
    assert "no 'value'" in result.problems[3]
    assert "no 'from'" in result.problems[4]
    assert "not an object" in result.problems[5]


def test_mvu_older_set_commands() -> None:
    text = """<UpdateVariable>
<Analysis>_.set('ignored', 1, 2); is only analysis</Analysis>
_.set('系统.当前阶段', '磨合期', '损友成型');//凤轻笙登场
_.set('系统.当前任务', "护送");
_.add('小穗.觉醒进度', 5);
_.add('小穗.觉醒进度', 'lots');
_.insert('系统.同伴', '凤轻笙');
_.assign('系统.物品', 'key', {"n": 1});
_.remove('系统.当前地点');
_.remove('系统.同伴', 0);
</UpdateVariable>Hi"""
    result = parse_filament(text)
    assert result.reply == "Hi"
    # each command is resolved against the state it meets (mvu_values.apply_mvu_ops)
    assert [(o.op, o.patch[0]["command"]) for o in result.ops if o.patch] == [
        ("patch", "set"),
        ("patch", "set"),
        ("patch", "add"),
        ("patch", "add"),
        ("patch", "assign"),
        ("patch", "assign"),
        ("patch", "remove"),
        ("patch", "remove"),
    ]
    assert result.problems == []
    start = {
        "stat_data": {
            "系统": {"当前阶段": "磨合期", "当前地点": "玄天宗", "物品": {}, "同伴": []},
            "小穗": {"觉醒进度": 0},
        }
    }
    out = apply_mvu_ops(start, result.ops)
    assert len(out.problems) == 1 and "lots" in out.problems[0]
    assert out.variables == {
        "stat_data": {
            "系统": {
                "当前阶段": "损友成型",
                "当前任务": "护送",
                "物品": {"key": {"n": 1}},
                "同伴": [],
            },
            "小穗": {"觉醒进度": 5},
        }
    }


def test_mvu_root_is_configurable() -> None:
    patch = '[{"op":"add","path":"/x","value":1}]'
    text = f"<UpdateVariable><JSONPatch>{patch}</JSONPatch></UpdateVariable>"
    result = parse_filament(text, FilamentTags(mvu_root=""))
    assert apply_ops({}, result.ops).variables == {"x": 1}


def test_a_bare_json_patch_block_is_an_update_too() -> None:
    result = parse_filament('Hi<JSONPatch>[{"op":"add","path":"/x","value":1}]</JSONPatch>')
    assert result.reply == "Hi"
    assert apply_ops({}, result.ops).variables == {"stat_data": {"x": 1}}


def test_an_empty_json_patch_is_no_change_and_no_problem() -> None:
    result = parse_filament("<UpdateVariable><JSONPatch>[]</JSONPatch></UpdateVariable>")
    assert result.ops == []
    assert result.problems == []


def test_an_update_variable_without_commands_is_a_problem() -> None:
    result = parse_filament(
        "<UpdateVariable><Analysis>nothing changed</Analysis>oops</UpdateVariable>"
    )
    assert result.ops == []
    assert result.problems == ["<UpdateVariable>: no <JSONPatch> or _.set() commands found"]


# -- a long reply --------------------------------------------------------------------------


def test_a_long_reply_in_two_thousand_deltas_is_complete() -> None:
    words = ["word", "1 < 2", "<b>", "[note]", "你好", "\n\n"]
    body = " ".join(words[i % len(words)] for i in range(2000))
    text = f"<thought>plan</thought><reply>{body}[PROGRESS]</reply>"
    chunks = [text[i : i + 4] for i in range(0, len(text), 4)]
    assert len(chunks) > 2000
    events, result = run(chunks)
    assert result.reply == body.strip()
    assert visible(events) == result.reply
    assert result.progress is True
