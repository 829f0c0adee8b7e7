"""SillyTavern's group file: what it holds, and a broken one refused with file, field, why."""

from __future__ import annotations

import json

import pytest

from storyloom.core.errors import FileFormatError
from storyloom.sillytavern.group_file import MANUAL, parse_group_file
from storyloom.testing.st_documents import group_document


def test_a_group_file_reads_its_members_order_and_join_options() -> None:
    document = group_document(
        ["Ann.png", "Bo.png"],
        activation_strategy=MANUAL,
        disabled_members=["Bo.png"],
        generation_mode=2,
        generation_mode_join_suffix="(end of <FIELDNAME>)",
        hideMutedSprites=True,
    )
    group = parse_group_file(json.dumps(document), "groups/1.json")
    assert group.members == ["Ann.png", "Bo.png"]
    assert group.activation_strategy == MANUAL and group.generation_mode == 2
    assert group.disabled_members == ["Bo.png"]
    assert group.generation_mode_join_suffix == "(end of <FIELDNAME>)"
    # Keys the model does not name are kept for a later export.
    assert group.model_dump()["hideMutedSprites"] is True


def test_older_numeric_ids_read_as_text() -> None:
    document = group_document(["Ann.png"], chat_id=None, chats=[1700000000000])
    document["id"] = 1700000000000
    group = parse_group_file(json.dumps(document).encode(), "g.json")
    assert group.id == "1700000000000"
    assert group.current_chat == "1700000000000" and group.chats == ["1700000000000"]


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"id": "1", "members": "Ann.png"}', "members"),
        ('{"id": "1", "members": [], "activation_strategy": 7}', "activation_strategy"),
        ('{"id": "1", "members": [], "disabled_members": [1]}', "disabled_members[0]"),
        ('{"members": []}', "id"),
        ("[1, 2]", ""),
        ('{"id": "1", "members": [', ""),
    ],
)
def test_a_broken_group_file_is_refused_naming_the_file_and_field(text: str, field: str) -> None:
    with pytest.raises(FileFormatError) as caught:
        parse_group_file(text, "groups/broken.json")
    assert "broken.json" in str(caught.value)
    assert field in [p.field for p in caught.value.problems]
