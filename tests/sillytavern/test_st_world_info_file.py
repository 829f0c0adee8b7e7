"""World-info books as files: their shape, entry shapes, SillyTavern's uid rule, key order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from storyloom.core.errors import FileFormatError
from storyloom.sillytavern.world_info import (
    UidAllocator,
    character_book_entries,
    is_book_entry,
    ordered_book,
    world_info_entries,
)
from storyloom.testing.st_documents import card_book_entry, world_info_entry

BOOK = Path("book.json")


def test_new_uids_fill_the_smallest_gaps_and_ignore_what_is_not_a_number() -> None:
    allocator = UidAllocator([0, "2", True, "x", None, 5])
    assert [allocator.take() for _ in range(3)] == [1, 3, 4]


@pytest.mark.parametrize(
    ("data", "field"),
    [({"name": "no entries"}, "entries"), ([], "entries"), ({"entries": "x"}, "entries")],
)
def test_a_file_without_an_entries_object_or_list_is_refused(data: Any, field: str) -> None:
    with pytest.raises(FileFormatError) as caught:
        world_info_entries(data, BOOK)
    assert caught.value.path == BOOK
    assert [problem.field for problem in caught.value.problems] == [field]


def test_entries_may_be_keyed_by_uid_or_a_bare_card_book_list() -> None:
    assert world_info_entries({"entries": {"0": {}}}, BOOK) == {"0": {}}
    assert world_info_entries({"entries": [{}]}, BOOK) == [{}]


def test_a_card_book_with_entries_that_are_not_a_list_is_refused_naming_where() -> None:
    with pytest.raises(FileFormatError) as caught:
        character_book_entries({"entries": {}}, BOOK)
    assert [problem.field for problem in caught.value.problems] == ["data.character_book.entries"]
    assert character_book_entries({"name": "empty"}, BOOK) == []


def test_card_book_entries_are_told_from_world_info_entries_by_their_keys() -> None:
    assert is_book_entry(card_book_entry(0, ["a"], "x"))
    assert not is_book_entry(world_info_entry(0, ["a"], "x"))


def test_a_book_is_written_in_the_given_key_order_with_unlisted_keys_after() -> None:
    book = {"name": "n", "extra": 1, "description": "d"}
    written = ordered_book(book, ["description", "entries", "name"], {"0": {}})
    assert list(written) == ["description", "entries", "name", "extra"]
    assert list(ordered_book(book, None, {})) == ["entries", "name", "extra", "description"]
