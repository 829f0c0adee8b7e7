"""The keyword matcher: one automaton pass for every key, regex keys beside it."""

from __future__ import annotations

import pytest

from storyloom.knowledge.keyword_matcher import (
    KeywordMatcher,
    RegexKeyError,
    is_word_char,
    needs_word_boundaries,
    parse_regex_key,
    required_literal,
)


def built(*keys: tuple[str, bool, bool]) -> tuple[KeywordMatcher, list[int]]:
    matcher = KeywordMatcher()
    slots = [matcher.add_plain(k, case_sensitive=cs, whole_words=ww) for k, cs, ww in keys]
    matcher.build()
    return matcher, slots


def test_one_pass_finds_the_newest_message_of_every_key() -> None:
    matcher, (dragon, cave) = built(("dragon", False, False), ("cave", False, False))
    first: dict[int, int] = {}
    for index, text in enumerate(["the Cave", "a dragon in a cave", "dragon"]):
        matcher.scan_first(text, index, first)
    assert first == {cave: 0, dragon: 1}


def test_identical_keys_share_a_slot() -> None:
    _, (one, two, cased) = built(
        ("Dragon", False, False), ("dragon", False, False), ("Dragon", True, False)
    )
    assert one == two != cased


def test_case_sensitive_keys_match_their_exact_case_in_the_same_pass() -> None:
    matcher, (cased, loose) = built(("Rose", True, False), ("rose", False, False))
    assert matcher.scan("a rose") == {loose}
    assert matcher.scan("a Rose") == {cased, loose}


def test_lower_casing_that_changes_length_still_matches_case_sensitive_keys() -> None:
    # "İ" lower-cases to two characters: positions in the lower-cased text shift.
    matcher, (cased,) = built(("Rose", True, False))
    assert matcher.scan("İİ Rose") == {cased}


def test_whole_word_slots_check_boundaries() -> None:
    matcher, (cat,) = built(("cat", False, True))
    assert matcher.scan("concatenate") == set()
    assert matcher.scan("cat, dog") == {cat}
    assert matcher.scan("(cat)") == {cat}
    assert matcher.scan("my_cat") == set()
    assert matcher.find(cat, "concat the cat") == (11, 14)


def test_word_characters_are_javascripts_ascii_ones() -> None:
    assert is_word_char("a") and is_word_char("Z") and is_word_char("7") and is_word_char("_")
    assert not is_word_char("é") and not is_word_char("龙") and not is_word_char(" ")
    assert not is_word_char("。")
    assert not needs_word_boundaries("black cat")
    assert needs_word_boundaries("cat") and needs_word_boundaries("红龙")


def test_regex_keys_parse_like_sillytavern() -> None:
    assert parse_regex_key("/dra+gon/i") == ("dra+gon", "i")
    assert parse_regex_key("/a\\/b/") == ("a\\/b", "")
    assert parse_regex_key("/a/b/") is None  # an unescaped slash: plain text
    assert parse_regex_key("w/o") is None
    assert parse_regex_key("/x/q") is None


def test_a_key_with_a_newline_after_the_closing_slash_is_plain_text() -> None:
    # JavaScript's $ (no m flag) matches only at the very end: "/foo/\n" is no regex key.
    assert parse_regex_key("/foo/\n") is None
    assert parse_regex_key("/foo/i\n") is None
    assert KeywordMatcher().add_regex("/foo/\n") is None


def test_invalid_regex_raises_a_regex_key_error() -> None:
    with pytest.raises(RegexKeyError, match="invalid regular expression"):
        KeywordMatcher().add_regex("/(unclosed/")


def test_required_literal_is_the_longest_plain_run() -> None:
    assert required_literal("dra+gon", "i") == ("gon", True)
    assert required_literal(r"\bKing\s+Arthur", "") == ("Arthur", False)
    assert required_literal("a|bcd", "") is None
    assert required_literal(r"\p{Han}+", "") is None
    assert required_literal("Straße", "i") is None  # non-ASCII folding: no prefilter


def test_regex_search_reports_the_span() -> None:
    matcher = KeywordMatcher()
    regex_id = matcher.add_regex("/dra+gon/i")
    assert regex_id is not None
    matcher.build()
    assert matcher.regex_search(regex_id, "a DRAAGON") == (2, 9)
    assert matcher.regex_search(regex_id, "a dog") is None
