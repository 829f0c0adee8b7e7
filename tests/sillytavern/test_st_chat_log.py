"""SillyTavern chat .jsonl: headers, messages, byte-exact export, send_date forms."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from storyloom.core.errors import FileFormatError
from storyloom.sillytavern.chat_log import (
    ChatMessage,
    export_chat_jsonl,
    parse_chat_header,
    parse_chat_jsonl,
    parse_send_date,
)
from storyloom.testing.st_documents import chat_jsonl, chat_message

CHAT = Path("chat.jsonl")


def test_chat_round_trips_byte_for_byte_with_key_order_and_unicode() -> None:
    text = chat_jsonl(
        [
            chat_message("Aria", "*waves* Hallo — 你好", extra={"api": "openai", "model": "m1"}),
            {
                "extra": {"reasoning": "think"},
                "name": "User",
                "is_user": True,
                "mes": "hi",
                "is_system": False,
                "send_date": 1726776180000,
                "custom_ext": {"x": [1, 2.5]},
            },
            chat_message(
                "Aria",
                "one",
                swipes=["one", "two"],
                swipe_id=0,
                swipe_info=[{"send_date": "x", "extra": {}}, {"send_date": "y", "extra": {}}],
                gen_started="2024-09-19T12:03:29.123Z",
                gen_finished="2024-09-19T12:03:31.456Z",
            ),
        ]
    )
    chat = parse_chat_jsonl(text, CHAT)
    assert export_chat_jsonl(chat) == text
    assert chat.messages[1].reasoning == "think"
    assert chat.messages[2].swipes == ["one", "two"]


def test_an_edited_message_is_written_with_its_new_text_in_the_same_place() -> None:
    text = chat_jsonl([chat_message("Aria", "old")])
    chat = parse_chat_jsonl(text, CHAT)
    chat.messages[0].mes = "new"
    lines = export_chat_jsonl(chat).split("\n")
    assert list(json.loads(lines[1])) == list(json.loads(text.split("\n")[1]))
    assert json.loads(lines[1])["mes"] == "new"


def test_a_message_made_in_storyloom_has_sillytavern_fields_and_no_nulls() -> None:
    chat = parse_chat_jsonl(chat_jsonl([]), CHAT)
    chat.messages.append(ChatMessage(name="User", is_user=True, mes="hello", send_date="now"))
    written = json.loads(export_chat_jsonl(chat).split("\n")[-1])
    assert written == {
        "name": "User",
        "is_user": True,
        "is_system": False,
        "send_date": "now",
        "mes": "hello",
        "extra": {},
    }


def test_modern_header_exposes_integrity_and_names_from_messages() -> None:
    header = {
        "chat_metadata": {"integrity": "abc"},
        "user_name": "unused",
        "character_name": "unused",
    }
    chat = parse_chat_jsonl(
        chat_jsonl(
            [chat_message("Me", "hi", is_user=True), chat_message("Aria", "yo")], header=header
        ),
        CHAT,
    )
    assert chat.header is not None and chat.header.integrity == "abc" and chat.header.is_modern
    assert (chat.user_name, chat.character_name) == ("Me", "Aria")


def test_a_file_without_header_is_all_messages() -> None:
    text = "\n".join(json.dumps(m) for m in [chat_message("A", "1"), chat_message("B", "2")])
    chat = parse_chat_jsonl(text, CHAT)
    assert chat.header is None and [m.name for m in chat.messages] == ["A", "B"]


def test_a_bad_line_refuses_the_chat_naming_the_line() -> None:
    text = chat_jsonl([chat_message("Aria", "hi")]) + '\n{"name": "x", "mes": [1]}\nnot json'
    with pytest.raises(FileFormatError) as caught:
        parse_chat_jsonl(text, CHAT)
    fields = [p.field for p in caught.value.problems]
    assert fields == ["line 3.mes", "line 4"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("September 19, 2024 8:03pm", datetime(2024, 9, 19, 20, 3)),
        ("October 1, 2024 12:05am", datetime(2024, 10, 1, 0, 5)),
        ("Sep 19, 2024 8:03 PM", datetime(2024, 9, 19, 20, 3)),
        ("2024-09-19@20h03m29s", datetime(2024, 9, 19, 20, 3, 29)),
        ("2023-5-12 @21h 32m 29s 224ms", datetime(2023, 5, 12, 21, 32, 29, 224000)),
        ("2026-07-12T05:59:53.290Z", datetime(2026, 7, 12, 5, 59, 53, 290000, tzinfo=UTC)),
        (1726776180000, datetime(2024, 9, 19, 20, 3, tzinfo=UTC)),
        (1726776180, datetime(2024, 9, 19, 20, 3, tzinfo=UTC)),
        ("yesterday", None),
        (None, None),
    ],
)
def test_send_date_forms_are_all_read(value: str | int | None, expected: datetime | None) -> None:
    assert parse_send_date(value) == expected


LINES = [
    chat_message("Aria", "Hi.", extra={"api": "openai"}),
    {"mes": "x", "name": "Aria", "swipes": ["x", "y"], "swipe_id": 1, "send_date": 1726776209000,
     "swipe_info": [{"send_date": "a", "extra": {}}, {"extra": {"model": "m"}}], "gen_started": 1.5,
     "force_avatar": None, "ext_field": {"kept": [1, {"deep": True}]}},
    {"name": "User", "is_user": True},
    {},
]  # fmt: skip


@pytest.mark.parametrize("line", LINES)
def test_a_line_writes_back_in_its_key_order_with_blanked_keys_in_place(
    line: dict[str, Any],
) -> None:
    read = ChatMessage.from_json(line)
    validated = ChatMessage.model_validate(line)
    validated._key_order = list(line)  # as the validating reader keeps it
    assert read == validated
    assert read.model_fields_set == validated.model_fields_set
    assert list(read.__dict__) == list(validated.__dict__)
    assert list(read.to_json()) == list(line)  # the file's key order
    assert read.to_json() == line
    assert read.extra is not line.get("extra", {})  # the parsed object is not shared
    blank = frozenset({"mes", "swipes", "swipe_info", "extra"})
    kept = {k: (None if k in blank else v) for k, v in read.to_json().items()}
    assert read.to_json(blank=blank) == kept and list(read.to_json(blank=blank)) == list(kept)
    read.name, read.force_avatar = "Bram", "bram.png"  # changed after reading
    again = {k: (None if k in blank else v) for k, v in read.to_json().items()}
    assert read.to_json(blank=blank) == again and list(read.to_json(blank=blank)) == list(again)


def test_a_line_of_other_types_is_coerced_or_refused_by_field() -> None:
    assert ChatMessage.from_json({"is_user": "true", "mes": "x"}).is_user is True  # coerced
    text = chat_jsonl([chat_message("Aria", "ok"), {"name": None, "mes": "x"}])
    with pytest.raises(FileFormatError) as caught:
        parse_chat_jsonl(text, CHAT)
    assert [p.field for p in caught.value.problems] == ["line 3.name"]


def test_the_header_reads_from_the_first_line_alone() -> None:
    text = chat_jsonl([chat_message("Aria", "Hi.")], header={"chat_metadata": {"main_chat": "M"}})
    header = parse_chat_header(("\ufeff\n" + text + "\n{broken").encode())
    assert header is not None and header.chat_metadata == {"main_chat": "M"}
    assert parse_chat_header(b'{"mes": "no header"}') is None
    assert parse_chat_header(b"{cut short") is None  # the whole file's parse names it
    assert parse_chat_header(b"") is None
