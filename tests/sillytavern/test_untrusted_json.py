"""JSON from strangers' files: parsed within limits, or refused naming the value and why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from storyloom.core.errors import FileFormatError
from storyloom.sillytavern.chat_log import parse_chat_jsonl
from storyloom.sillytavern.untrusted_json import (
    MAX_DEPTH,
    JsonSyntaxError,
    UntrustedJsonError,
    loads_untrusted,
)

DEEP = '{"a": ' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}"


def test_ordinary_json_parses_as_the_standard_library_does() -> None:
    text = '{"a": [1, 2.5, -3, "ü", null, true], "b": {"c": "汉字 😀"}}'
    assert loads_untrusted(text) == json.loads(text)
    assert loads_untrusted(("\ufeff" + text).encode()) == json.loads(text)


@pytest.mark.parametrize(
    ("text", "where", "reason"),
    [
        ('{"a": {"b": "x\\ud800"}}', "a.b", "lone UTF-16 surrogate"),
        ('{"a": [0, "\\udc00"]}', "a[1]", "lone UTF-16 surrogate"),
        ('{"\\ud800": 1}', "", "key holds a lone"),
        (DEEP, "a" + "[0]" * (MAX_DEPTH - 2), "deeper"),
        ("[" * 100_000 + "]" * 100_000, "", "deeper"),
        ('{"n": ' + "7" * 5000 + "}", "", "5000 digits"),
        ('{"n": NaN}', "", "NaN"),
        ('{"n": -Infinity}', "", "-Infinity"),
        ('{"n": 1e400}', "", "too large"),
    ],
)
def test_hostile_values_are_refused_with_where_and_why(text: str, where: str, reason: str) -> None:
    with pytest.raises(UntrustedJsonError) as caught:
        loads_untrusted(text)
    assert reason in caught.value.reason
    assert caught.value.where.startswith(where)


def test_text_that_is_not_json_is_a_syntax_error() -> None:
    with pytest.raises(JsonSyntaxError, match="line 1 column 2"):
        loads_untrusted("{nope")
    with pytest.raises(UntrustedJsonError, match="not UTF-8"):
        loads_untrusted(b"\xff\xfe{")


def test_a_chat_line_with_deep_extensions_or_broken_text_names_the_line() -> None:
    header = json.dumps({"user_name": "U", "character_name": "C"})
    deep = '{"name": "C", "mes": "hi", "extra": ' + "[" * 900 + "]" * 900 + "}"
    broken = '{"name": "C", "mes": "cut \\ud83d"}'
    with pytest.raises(FileFormatError) as caught:
        parse_chat_jsonl("\n".join([header, deep, broken]), Path("chat.jsonl"))
    fields = [problem.field for problem in caught.value.problems]
    assert fields[0].startswith("line 2.extra") and fields[1] == "line 3.mes"


def test_nesting_up_to_the_limit_parses_and_many_shallow_brackets_too() -> None:
    at_limit = "[" * MAX_DEPTH + "]" * MAX_DEPTH  # innermost at depth MAX_DEPTH - 1
    assert loads_untrusted(at_limit) == json.loads(at_limit)
    wide = json.dumps({"rows": [[] for _ in range(3 * MAX_DEPTH)], "s": "[[[{{{"})
    assert loads_untrusted(wide) == json.loads(wide)
    with pytest.raises(UntrustedJsonError, match="deeper"):
        loads_untrusted("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    with pytest.raises(JsonSyntaxError, match="BOM"):
        loads_untrusted("\ufeff{}")
