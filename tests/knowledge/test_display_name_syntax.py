"""A display name is a reference key (seed 000 2.2.4): whatever a CAIU accepts as its
``displayName`` must come back out of the reference parser as that one name, and what the
syntax would read as something else is refused with the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from storyloom.core.errors import FileFormatError
from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.knowledge_base import load_knowledge_base
from storyloom.knowledge.reference_syntax import Segment, parse_reference
from storyloom.knowledge.st_world_info_entry import display_name_from_comment

# Names built from the pieces the reference syntax gives meaning to, plus ordinary text.
_PIECES = st.sampled_from(
    ["this:", "id=", "tag:", "system:", "/", "{{{", "}}}", ":", "=", "this", "id", " ", "a", "名"]
)
NAMES = st.lists(st.one_of(_PIECES, st.text(min_size=1, max_size=3)), min_size=1, max_size=6).map(
    "".join
)


def _accepted(name: str) -> bool:
    try:
        CAIU(displayName=name)
    except ValidationError:
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(NAMES)
def test_an_accepted_display_name_is_one_name_segment_of_a_this_reference(name: str) -> None:
    if not _accepted(name) or not name.strip():
        return
    target = parse_reference(f"this:{name}")
    assert target.kb is None
    assert target.tag is None
    assert target.path == (Segment("name", name.strip()),)


@settings(max_examples=400, deadline=None)
@given(NAMES)
def test_a_name_holding_reference_syntax_is_refused_naming_the_field(name: str) -> None:
    holds = any(m in name for m in ("/", "{{{", "}}}", "this:", "id=", "\n", "\r")) or (
        name.strip().startswith(("tag:", "system:"))
    )
    if not holds:
        assert _accepted(name)
        return
    with pytest.raises(ValidationError) as caught:
        CAIU(displayName=name)
    assert caught.value.errors()[0]["loc"] == ("displayName",)


@pytest.mark.parametrize("name", ["this:x", "id=foo", "tag:x", "system:tools", "a/b"])
def test_the_named_forms_are_refused(name: str) -> None:
    with pytest.raises(ValidationError, match="displayName"):
        CAIU(displayName=name)


@given(st.text(max_size=30))
@settings(max_examples=300, deadline=None)
def test_a_sillytavern_comment_always_becomes_an_accepted_name(comment: str) -> None:
    assert _accepted(display_name_from_comment(comment) or "x")


def test_a_kb_file_with_a_this_name_is_refused_naming_file_field_and_reason(
    tmp_path: Path,
) -> None:
    doc = {"kb_id": "kb_x", "entries": [{"id": "e1", "displayName": "this:x"}]}
    (tmp_path / "knowledge.json").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(FileFormatError) as caught:
        load_knowledge_base(tmp_path)
    message = str(caught.value)
    assert "knowledge.json" in message
    assert "displayName" in message
    assert "this:" in message
