"""Parsing of ``{{{...}}}`` reference bodies and finding them in text."""

from __future__ import annotations

import pytest

from storyloom.knowledge.reference_syntax import (
    ReferenceSyntaxError,
    Segment,
    find_references,
    format_reference,
    parse_reference,
)


def test_plain_name_is_one_name_segment_in_the_current_kb() -> None:
    target = parse_reference("Tavern")
    assert target.kb is None
    assert target.tag is None
    assert target.path == (Segment("name", "Tavern"),)


def test_id_segment_is_parsed_and_whitespace_around_segments_is_ignored() -> None:
    target = parse_reference(" id= caiu_1 / Child ")
    assert target.path == (Segment("id", "caiu_1"), Segment("name", "Child"))


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ("Group/Child", (Segment("name", "Group"), Segment("name", "Child"))),
        ("id=g/id=c", (Segment("id", "g"), Segment("id", "c"))),
        ("id=g/Child", (Segment("id", "g"), Segment("name", "Child"))),
        ("Group/id=c", (Segment("name", "Group"), Segment("id", "c"))),
        ("L1/L2/Item", (Segment("name", "L1"), Segment("name", "L2"), Segment("name", "Item"))),
    ],
)
def test_paths_mix_names_and_ids(body: str, path: tuple[Segment, ...]) -> None:
    assert parse_reference(body).path == path


def test_text_before_the_first_colon_qualifies_the_kb() -> None:
    target = parse_reference("World Lore:Group/id=c")
    assert target.kb == "World Lore"
    assert target.path == (Segment("name", "Group"), Segment("id", "c"))
    assert target.unqualified() == "Group/id=c"


def test_tag_form_with_and_without_kb() -> None:
    assert parse_reference("tag:city").tag == "city"
    assert parse_reference("tag:city").kb is None
    qualified = parse_reference("kb_1:tag:city")
    assert (qualified.kb, qualified.tag, qualified.path) == ("kb_1", "city", ())


def test_this_qualifier_means_the_current_kb() -> None:
    target = parse_reference("this:Tavern")
    assert target.kb is None
    assert target.path == (Segment("name", "Tavern"),)


def test_unqualified_parse_keeps_the_colon_in_the_name() -> None:
    assert parse_reference("Act 1: Dawn", qualified=False).path == (Segment("name", "Act 1: Dawn"),)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (" ", "empty reference"),
        ("Group//Child", "empty path segment"),
        ("id=", "'id=' needs an entry id"),
        (":Name", "nothing before ':'"),
        ("kb_1:", "nothing after ':'"),
        ("tag:", "'tag:' needs a tag"),
    ],
)
def test_malformed_bodies_raise_with_a_reason(body: str, reason: str) -> None:
    with pytest.raises(ReferenceSyntaxError) as info:
        parse_reference(body)
    assert reason in info.value.reason
    assert info.value.body == body


def test_find_references_reports_spans_raw_bodies_and_parse_errors() -> None:
    text = "A {{{Tavern}}} and {{{kb:id=x}}}, {{{a//b}}}, {{var}} and {{{ not\nclosed}}}"
    spans = find_references(text)
    assert [s.raw for s in spans] == ["Tavern", "kb:id=x", "a//b"]
    assert [text[s.start : s.end] for s in spans] == ["{{{Tavern}}}", "{{{kb:id=x}}}", "{{{a//b}}}"]
    assert spans[1].target is not None and spans[1].target.kb == "kb"
    assert spans[2].target is None
    assert spans[2].error is not None and "empty path segment" in spans[2].error


def test_format_reference_adds_the_qualifier_only_when_given() -> None:
    assert format_reference("Group/Child") == "{{{Group/Child}}}"
    assert format_reference("id=x", "Lore") == "{{{Lore:id=x}}}"
