"""Regex scripts match as JavaScript's RegExp does, where Python's regex differs.

Expected values are what JavaScript gives (checked against node): ``\\s`` is ECMAScript's
white space, ``i`` without ``u`` folds case by upper-casing UTF-16 units, ``.`` without
``u`` is one UTF-16 unit, ``\\1`` with no group 1 is an octal escape.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storyloom.chat.prompt.regex_scripts import RegexScript, compile_find_regex, run_regex_script

JS_WHITE_SPACE = (
    "\t\n\x0b\x0c\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def replace(find: str, text: str, replacement: str = "<$0>") -> str:
    script = RegexScript.model_validate(
        {"findRegex": find, "replaceString": replacement.replace("$0", "{{match}}")}
    )
    return run_regex_script(script, text)


# --- \s -----------------------------------------------------------------------------------


def test_white_space_includes_the_byte_order_mark_and_not_next_line() -> None:
    text = "a\ufeffb\x85c\x1cd\xa0e"
    assert replace(r"/\s/g", text, "_") == "a_b\x85c\x1cd_e"
    assert replace(r"/\S+/g", text, "[$0]") == "[a]\ufeff[b\x85c\x1cd]\xa0[e]"


def test_white_space_inside_classes_too() -> None:
    text = "x\ufeff\x85y"
    assert replace(r"/[\s]/g", text, "_") == "x_\x85y"
    assert replace(r"/[^\s]/g", text, "_") == "_\ufeff__"
    assert replace(r"/[\S]/g", text, "_") == "_\ufeff__"


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x3100), max_size=30))
def test_white_space_is_exactly_ecmascripts(text: str) -> None:
    expected = "".join("_" if char in JS_WHITE_SPACE else char for char in text)
    assert replace(r"/\s/g", text, "_") == expected


# --- case folding -------------------------------------------------------------------------


def test_without_u_long_s_and_kelvin_sign_are_not_s_and_k() -> None:
    text = "s S \u017f k K \u212a"
    assert replace("/s/gi", text) == "<s> <S> \u017f k K \u212a"
    assert replace("/k/gi", text) == "s S \u017f <k> <K> \u212a"
    assert replace("/[a-z]/gi", text) == "<s> <S> \u017f <k> <K> \u212a"
    assert replace("/\u017f/gi", text) == "s S <\u017f> k K \u212a"


def test_without_u_non_ascii_letters_still_fold_with_each_other() -> None:
    assert replace("/é/gi", "é É") == "<é> <É>"
    assert replace("/σ/gi", "σ Σ ς") == "<σ> <Σ> <ς>"
    assert replace("/ß/gi", "ß ẞ SS") == "<ß> ẞ SS"
    assert replace("/[à-ÿ]+/gi", "ÀÉÎ abc") == "<ÀÉÎ> abc"


def test_with_u_case_folds_by_unicodes_simple_folding() -> None:
    text = "s \u017f k \u212a ß ẞ İ ı"
    assert replace("/s/giu", text) == "<s> <\u017f> k \u212a ß ẞ İ ı"
    assert replace("/k/giu", text) == "s \u017f <k> <\u212a> ß ẞ İ ı"
    assert replace("/ß/giu", text) == "s \u017f k \u212a <ß> <ẞ> İ ı"
    assert replace("/i/giu", text) == text  # the Turkish i's are not folded
    assert replace(r"/\w+/giu", "\u017f\u212a") == "<\u017f\u212a>"


def test_a_backreference_folds_case_under_i() -> None:
    assert replace(r"/(a)\1/gi", "aA Aa aa") == "<aA> <Aa> <aa>"


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="abcxyzABCXYZ", min_size=1, max_size=6))
def test_ascii_letters_match_in_either_case(word: str) -> None:
    assert replace(f"/{word}/i", word.swapcase()) == f"<{word.swapcase()}>"


# --- . and UTF-16 ----------------------------------------------------------------------------


def test_a_dot_without_u_takes_half_an_astral_character() -> None:
    # JavaScript leaves a lone surrogate, which cannot be stored: it becomes U+FFFD
    assert replace("/./", "😀a", "x") == "x\ufffda"
    assert replace("/^.$/", "😀", "x") == "😀"
    assert replace("/^..$/", "😀", "x") == "x"


def test_a_dot_with_u_takes_the_whole_character() -> None:
    assert replace("/./u", "😀a", "x") == "xa"
    assert replace("/^.$/u", "😀", "x") == "x"


def test_an_astral_character_in_a_class_without_u_is_its_two_halves() -> None:
    assert replace("/[😀]/g", "😀", "x") == "xx"
    assert replace("/[😀]/gu", "😀", "x") == "x"


def test_astral_text_untouched_by_a_match_comes_back_whole() -> None:
    assert replace("/a/g", "😀a🐉", "b") == "😀b🐉"


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=20))
def test_a_dot_without_u_counts_utf16_units(text: str) -> None:
    units = len(text.encode("utf-16-le")) // 2
    assert replace("/[\\s\\S]/g", text, "x") == "x" * units
    assert replace("/[\\s\\S]/gu", text, "x") == "x" * len(text)


# --- \1 without a group -----------------------------------------------------------------------


def test_a_backreference_to_a_missing_group_is_an_octal_escape() -> None:
    assert replace(r"/\1/g", "a\x01b") == "a<\x01>b"
    assert replace(r"/\12/g", "a\nb") == "a<\n>b"
    assert replace(r"/\477/g", "'7") == "<'7>"  # \47 then a 7
    assert replace(r"/\8/g", "8") == "<8>"
    assert replace(r"/[\1]/g", "\x01") == "<\x01>"


def test_a_backreference_to_a_group_not_matched_yet_matches_nothing() -> None:
    assert replace(r"/\1(a)/g", "a") == "<a>"
    assert replace(r"/(?:(a)|b)\1c/g", "bc aac") == "<bc> <aac>"


def test_with_u_a_missing_group_is_a_syntax_error() -> None:
    assert compile_find_regex(r"/\1/u") is None
    assert compile_find_regex(r"/\k<x>(?<y>a)/") is None
    assert replace(r"/\k<x>/", "k<x>") == "<k<x>>"  # no named groups: just "k"


# --- the replace loop ------------------------------------------------------------------------


def test_after_an_empty_match_the_search_moves_on_one_character() -> None:
    assert replace("/x*/g", "abxd", "-") == "-a-b--d-"
    assert replace("/[^a]*?/g", "ba", "-") == "-b-a-"


# --- what JavaScript refuses -----------------------------------------------------------------


@pytest.mark.parametrize(
    "find",
    ["/^*/", "/a**/", "/(?<=a)+/", "/\\b?/", "/{2}/", "/a|*b/", "/(?=a)*/u", "/a{/u", "/\\a/u",
     "/]/u", "/(?<n>a)(?<n>b)/", "/\\k(?<n>a)/"],
)  # fmt: skip
def test_a_pattern_javascript_refuses_skips_its_script(find: str) -> None:
    assert compile_find_regex(find) is None


@pytest.mark.parametrize("find", ["/(?=a)*/", "/a{/", "/a}/", "/]/", "/\\a/", "/a*?/", "/\\k/"])
def test_what_javascript_allows_without_u_compiles(find: str) -> None:
    assert compile_find_regex(find) is not None
