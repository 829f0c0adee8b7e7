"""The streaming filter: shows what parse_tam keeps, under any chunking, and never a block
that runs, not even for a moment."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from storyloom.tools.tam import END, START, parse_tam
from storyloom.tools.tam_stream import TamStreamFilter

FRAGMENTS = [
    START,
    END,
    "<|[",
    "<|[REQUEST",
    "「始」",
    "「末」",
    "command:",
    "command1:",
    "x2:",
    "# 步骤 1\n",
    "\n",
    "\n\n",
    "```",
    "~~~",
    "`",
    "> ",
    "“",
    "”",
    "龙骑士",
    " ",
    "\t",
    "abc",
    "t:a",
]

OUTPUTS = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS), max_size=80).map("".join),
    st.text(),
    st.text(alphabet="<|[]>「始末」`~\n abc:"),
)


def chunked(output: str, cuts: list[int]) -> list[str]:
    points = sorted({min(c, len(output)) for c in cuts} | {0, len(output)})
    return [output[a:b] for a, b in itertools.pairwise(points)]


def stream(chunks: list[str]) -> tuple[list[str], str]:
    f = TamStreamFilter()
    shown = [f.feed(chunk) for chunk in chunks]
    shown.append(f.finish())
    return shown, "".join(shown)


@settings(max_examples=600)
@given(output=OUTPUTS, cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=40))
def test_any_chunking_shows_exactly_the_text_parse_tam_keeps(output: str, cuts: list[int]) -> None:
    _, shown = stream(chunked(output, cuts))
    assert shown == parse_tam(output).text


@settings(max_examples=300)
@given(
    before=st.text(alphabet="abc 龙，。\n"),
    after=st.text(alphabet="abc 龙，。\n<|[`"),
    value=st.text(alphabet="abc龙\n`>“「始」<|[]~").filter(lambda v: END not in v),
    sizes=st.lists(st.integers(min_value=1, max_value=7), min_size=1, max_size=30),
)
def test_an_executed_blocks_content_never_shows(
    before: str, after: str, value: str, sizes: list[int]
) -> None:
    secret = "SECRET-VALUE"
    output = (
        f"{before}\n{START}\ncommand:「始」t:a「末」\nnote:「始」{value}{secret}{value}「末」\n"
        f"{END}{after}"
    )
    assert len(parse_tam(output).calls) == 1
    chunks, p, i = [], 0, 0
    while p < len(output):
        size = sizes[i % len(sizes)]
        chunks.append(output[p : p + size])
        p += size
        i += 1
    shown, whole = stream(chunks)
    assert not any(secret in "".join(shown[:k]) for k in range(len(shown) + 1))
    assert whole == parse_tam(output).text


def test_a_possible_marker_is_held_until_it_is_decided() -> None:
    f = TamStreamFilter()
    assert f.feed("Rolling <|[REQ") == "Rolling"
    assert not f.holding_block
    assert f.feed("UEST_TOOL]|>\ncommand:「始」chat:RollDice") == ""
    assert f.holding_block
    assert f.feed("「末」\n<|[END_TOOL]|>") == ""
    assert f.executed_blocks == 1
    assert f.feed(" now.") == " now."
    assert f.finish() == ""


def test_something_that_only_starts_like_a_marker_is_released() -> None:
    f = TamStreamFilter()
    assert f.feed("a <|") == "a"
    assert f.feed("x") == " <|x"


def test_a_fenced_block_shows_as_it_streams() -> None:
    f = TamStreamFilter()
    # Only trailing whitespace waits (a block might follow it).
    assert f.feed("```\n") == "```"
    assert f.feed(f"{START}\ncommand:") == f"\n{START}\ncommand:"
    assert f.feed("「始」t:a「末」") == "「始」t:a「末」"


def test_a_block_that_will_not_run_shows_once_that_is_certain() -> None:
    f = TamStreamFilter()
    assert f.feed(f"{START}\nquery: dragons\n") == ""
    assert f.feed(END) == f"{START}\nquery: dragons\n{END}"
    truncated = TamStreamFilter()
    assert truncated.feed(f"{START}\ncommand:「始」t:a「末」\nx:「始」cut") == ""
    assert truncated.finish() == f"{START}\ncommand:「始」t:a「末」\nx:「始」cut"


def test_whitespace_before_a_block_waits_for_what_follows() -> None:
    f = TamStreamFilter()
    assert f.feed("A.\n\n") == "A."
    assert f.feed(f"{START}command:「始」t:a「末」{END}\n") == ""
    assert f.feed("B.") == "\n\nB."
