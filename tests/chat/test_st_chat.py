"""SillyTavern chats into the turn tree and back: both headers, swipes, dates."""

import json
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from storyloom.chat.store.st_chat import (
    EXTRA_KEY,
    SWIPE_INFO_KEY,
    conversation_importer,
    export_st_chat,
    import_st_chat,
)
from storyloom.chat.store.turn_tree import TurnTree
from storyloom.core.errors import FileFormatError
from storyloom.project.knowledge_import import CHATS_DIR, import_knowledge_file
from storyloom.project.project_file import init_project
from storyloom.sillytavern.chat_log import ChatLog, parse_chat_jsonl
from storyloom.store.database import Database

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sillytavern"
SAMPLE_CHATS = [
    FIXTURES / "chat_maren_legacy_header.jsonl",
    FIXTURES / "chat_maren_modern_header.jsonl",
]
ISO_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
HUMANIZED = re.compile(r"^\d{4}-\d{2}-\d{2}@\d{2}h\d{2}m\d{2}s\d{3}ms$")


@pytest.fixture
def tree(tmp_path: Path) -> TurnTree:
    return TurnTree(Database(tmp_path / "chat.sqlite3"))


def lines_of(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.split("\n") if line.strip()]


def swipe_counts(objects: list[dict[str, Any]]) -> tuple[int, int]:
    """(messages, extra swipes) of a chat file, counted from its JSON lines."""
    messages = [o for o in objects if "mes" in o]
    extra = sum(max(len(o.get("swipes") or []) - 1, 0) for o in messages)
    return len(messages), extra


def same_lines(exported: str, original: str) -> None:
    """Equal JSON objects line by line, keys in the same order at every level."""
    ours, theirs = lines_of(exported), lines_of(original)
    assert ours == theirs
    for mine, source in zip(ours, theirs, strict=True):
        assert json.dumps(mine, ensure_ascii=False) == json.dumps(source, ensure_ascii=False)


def import_text(tree: TurnTree, text: str, name: str = "chat.jsonl") -> str:
    return import_st_chat(tree, parse_chat_jsonl(text, name), project_id="p").conversation_id


def jsonl(*objects: dict[str, Any]) -> str:
    return "\n".join(json.dumps(o, ensure_ascii=False, separators=(",", ":")) for o in objects)


HEADER: dict[str, Any] = {
    "user_name": "Ann",
    "character_name": "Sera",
    "create_date": "2024-09-19@20h03m29s",
    "chat_metadata": {"note_prompt": "Stay in the forest.", "note_depth": 2, "tainted": True},
}
GREETING: dict[str, Any] = {
    "name": "Sera",
    "is_user": False,
    "is_system": False,
    "send_date": "September 19, 2024 8:03pm",
    "mes": "Greeting B",
    "extra": {},
    "swipe_id": 1,
    "swipes": ["Greeting A", "Greeting B", "Greeting C"],
}
HELLO: dict[str, Any] = {
    "name": "Ann",
    "is_user": True,
    "is_system": False,
    "send_date": "September 19, 2024 8:04pm",
    "mes": "Hello",
    "extra": {"isSmallSys": False},
    "force_avatar": "User Avatars/user-default.png",
}
REPLY: dict[str, Any] = {
    "extra": {"api": "openai", "model": "m1", "reasoning": "think one"},
    "name": "Sera",
    "is_user": False,
    "send_date": "2024-09-19T12:05:00.000Z",
    "mes": "Reply one",
    "gen_started": "2024-09-19T12:04:50.000Z",
    "gen_finished": "2024-09-19T12:05:00.000Z",
    "swipe_id": 0,
    "swipes": ["Reply one", "Reply two"],
    "swipe_info": [
        {
            "send_date": "2024-09-19T12:05:00.000Z",
            "gen_started": "2024-09-19T12:04:50.000Z",
            "gen_finished": "2024-09-19T12:05:00.000Z",
            "extra": {"api": "openai", "model": "m1", "reasoning": "think one"},
        },
        {
            "send_date": "2024-09-19T12:07:00.000Z",
            "gen_started": "2024-09-19T12:06:50.000Z",
            "gen_finished": "2024-09-19T12:07:00.000Z",
            "extra": {"api": "openai", "model": "m2"},
        },
    ],
    "variables": [{"hp": 3}, {"hp": 4}],
}
SWIPED_CHAT = jsonl(HEADER, GREETING, HELLO, REPLY)


@pytest.mark.parametrize("sample", SAMPLE_CHATS, ids=lambda p: p.stem)
def test_both_headers_import_with_the_counts_of_the_file(tree: TurnTree, sample: Path) -> None:
    text = sample.read_text(encoding="utf-8")
    messages, extra_swipes = swipe_counts(lines_of(text))
    imported = import_st_chat(tree, parse_chat_jsonl(text, sample), project_id="p")
    assert (imported.messages, imported.siblings) == (messages, extra_swipes)
    assert imported.total == messages + extra_swipes
    path = tree.active_path(imported.conversation_id)
    assert len(path) == messages
    counts = tree.sibling_counts([m.id for m in path])
    file_swipes = [max(len(o.get("swipes") or []), 1) for o in lines_of(text) if "mes" in o]
    assert [counts[m.id] for m in path] == file_swipes
    assert [m.content for m in path] == [o["mes"] for o in lines_of(text) if "mes" in o]


@pytest.mark.parametrize("sample", SAMPLE_CHATS, ids=lambda p: p.stem)
def test_an_unchanged_chat_exports_back_line_by_line(tree: TurnTree, sample: Path) -> None:
    text = sample.read_text(encoding="utf-8")
    conversation_id = import_text(tree, text, sample.name)
    exported = export_st_chat(tree, conversation_id)
    same_lines(exported, text)
    assert exported == text  # SillyTavern's own bytes: no spaces, no final newline


def test_legacy_header_metadata_and_names_are_kept(tree: TurnTree) -> None:
    sample = SAMPLE_CHATS[0]
    text = sample.read_text(encoding="utf-8")
    conversation = tree.conversation(import_text(tree, text, sample.name))
    header = lines_of(text)[0]
    assert {k: v for k, v in conversation.metadata.items() if k != "st_header"} == header[
        "chat_metadata"
    ]
    assert conversation.settings.user_name == header["user_name"]
    assert conversation.character.card["name"] == "Maren"
    # The chat's variables (kept once per chat by SillyTavern) start every branch.
    last = tree.active_path(conversation.id)[-1]
    assert tree.state_at(last.id).variables == header["chat_metadata"]["variables"]
    assert conversation.title == "Maren - 2024-10-02@21h14m07s"


def test_swipes_become_ordered_siblings_with_the_shown_one_active(tree: TurnTree) -> None:
    conversation_id = import_text(tree, SWIPED_CHAT)
    roots = tree.children(conversation_id, None)
    assert [m.content for m in roots] == ["Greeting A", "Greeting B", "Greeting C"]
    assert [m.sibling_index for m in roots] == [0, 1, 2]
    path = tree.active_path(conversation_id)
    assert [m.content for m in path] == ["Greeting B", "Hello", "Reply one"]
    assert path[1].parent_id == roots[1].id
    assert [m.role for m in path] == ["assistant", "user", "assistant"]
    replies = tree.siblings(path[2].id)
    assert [m.content for m in replies] == ["Reply one", "Reply two"]
    for reply, info in zip(replies, REPLY["swipe_info"], strict=True):
        assert reply.extra[SWIPE_INFO_KEY] == info
        assert reply.extra[EXTRA_KEY] == info["extra"]
        sent = datetime.fromisoformat(info["send_date"]).timestamp()
        assert reply.created_at == pytest.approx(sent)
    assert [m.thought for m in replies] == ["think one", None]
    assert path[1].extra[EXTRA_KEY] == {"isSmallSys": False}
    conversation = tree.conversation(conversation_id)
    assert conversation.settings.authors_note == "Stay in the forest."
    assert conversation.settings.authors_note_depth == 2


def test_a_chat_with_swipes_exports_back_unchanged(tree: TurnTree) -> None:
    same_lines(export_st_chat(tree, import_text(tree, SWIPED_CHAT)), SWIPED_CHAT)


def test_a_swipe_chosen_in_storyloom_is_the_shown_swipe_on_export(tree: TurnTree) -> None:
    conversation_id = import_text(tree, SWIPED_CHAT)
    reply = tree.active_path(conversation_id)[-1]
    tree.swipe(reply.id, 1)
    greeting = tree.active_path(conversation_id)[0]
    exported = lines_of(export_st_chat(tree, conversation_id))
    line = exported[-1]
    second = REPLY["swipe_info"][1]
    assert line["mes"] == "Reply two"
    assert line["swipe_id"] == 1
    assert line["swipes"] == REPLY["swipes"]
    assert line["swipe_info"] == REPLY["swipe_info"]
    for key in ("send_date", "gen_started", "gen_finished", "extra"):
        assert line[key] == second[key]
    assert list(line) == list(REPLY)  # SillyTavern's key order of the line is kept
    assert line["variables"] == REPLY["variables"]
    # Swiping the greeting (an old message) moves to another root: its own branch.
    tree.swipe(greeting.id, 2)
    exported = lines_of(export_st_chat(tree, conversation_id))
    assert len(exported) == 2
    assert exported[1]["mes"] == "Greeting C"
    assert exported[1]["swipe_id"] == 2
    assert exported[1]["send_date"] == GREETING["send_date"]


def test_a_new_reply_made_in_storyloom_exports_as_one_more_swipe(tree: TurnTree) -> None:
    conversation_id = import_text(tree, SWIPED_CHAT)
    path = tree.active_path(conversation_id)
    before = time.time()
    tree.add_message(conversation_id, parent_id=path[1].id, role="assistant", content="Three")
    line = lines_of(export_st_chat(tree, conversation_id))[-1]
    assert line["mes"] == "Three"
    assert line["swipes"] == ["Reply one", "Reply two", "Three"]
    assert line["swipe_id"] == 2
    assert line["swipe_info"][:2] == REPLY["swipe_info"]
    added = line["swipe_info"][2]
    assert ISO_Z.match(added["send_date"])
    assert datetime.fromisoformat(added["send_date"]).timestamp() >= before - 1
    assert added["extra"] == {}
    assert line["send_date"] == added["send_date"]
    assert line["extra"] == {}
    assert parse_chat_jsonl(export_st_chat(tree, conversation_id), "x.jsonl").messages


def test_a_sibling_by_another_speaker_exports_under_its_own_name(tree: TurnTree) -> None:
    group_chat = "\n".join(
        json.dumps(line)
        for line in [
            {"name": "User", "is_user": True, "is_system": False, "mes": "Ready?"},
            {"name": "Aria", "is_user": False, "is_system": False, "mes": "Always.",
             "original_avatar": "Aria.png", "force_avatar": "/thumbnail?file=Aria.png"},
        ]
    )  # fmt: skip
    conversation_id = import_text(tree, group_chat)
    path = tree.active_path(conversation_id)
    tree.add_message(
        conversation_id, parent_id=path[0].id, role="assistant", content="Hm.", name="Bram"
    )
    line = lines_of(export_st_chat(tree, conversation_id))[-1]
    assert (line["name"], line["mes"]) == ("Bram", "Hm.")
    assert "original_avatar" not in line and "force_avatar" not in line
    tree.set_pointer(conversation_id, path[-1].id)
    kept = lines_of(export_st_chat(tree, conversation_id))[-1]
    assert (kept["name"], kept["original_avatar"]) == ("Aria", "Aria.png")


def test_export_to_a_leaf_follows_that_branch(tree: TurnTree) -> None:
    conversation_id = import_text(tree, SWIPED_CHAT)
    other_root = tree.children(conversation_id, None)[0]
    exported = lines_of(export_st_chat(tree, conversation_id, leaf=other_root.id))
    assert [line.get("mes") for line in exported[1:]] == ["Greeting A"]
    assert exported[1]["swipe_id"] == 0
    # The active branch is untouched by exporting another one.
    assert len(tree.active_path(conversation_id)) == 3


def test_a_conversation_made_in_storyloom_exports_as_a_sillytavern_chat(
    tree: TurnTree,
) -> None:
    conversation = tree.create_conversation(project_id="p", title="Tea with Sera")
    first = tree.add_message(
        conversation.id, parent_id=None, role="assistant", content="Welcome.", name="Sera"
    )
    question = tree.add_message(conversation.id, parent_id=first.id, role="user", content="Hi")
    tree.add_message(
        conversation.id, parent_id=question.id, role="assistant", content="Tea?", thought="hmm"
    )
    text = export_st_chat(tree, conversation.id)
    header, *messages = lines_of(text)
    assert list(header) == ["user_name", "character_name", "create_date", "chat_metadata"]
    assert header["user_name"] == "User"
    assert HUMANIZED.match(header["create_date"])
    assert [list(m) for m in messages] == [
        ["name", "is_user", "is_system", "send_date", "mes", "extra"]
    ] * 3
    assert [m["name"] for m in messages] == ["Sera", "User", "Tea with Sera"]
    assert [m["is_user"] for m in messages] == [False, True, False]
    assert all(ISO_Z.match(m["send_date"]) for m in messages)
    sent = datetime.fromisoformat(messages[0]["send_date"])
    assert sent.timestamp() == pytest.approx(first.created_at, abs=0.001)
    assert messages[2]["extra"] == {"reasoning": "hmm"}
    # SillyTavern's reader (and ours) takes it; importing it again gives the same chat.
    again = import_st_chat(tree, parse_chat_jsonl(text, "x.jsonl"), project_id="p")
    assert (again.messages, again.siblings) == (3, 0)
    same_lines(export_st_chat(tree, again.conversation_id), text)


def test_every_send_date_form_sets_the_time_and_is_kept(tree: TurnTree) -> None:
    base = {"name": "Sera", "is_user": False, "is_system": False, "extra": {}}
    forms: list[Any] = [
        "September 19, 2024 8:03pm",
        "2024-09-19T12:05:00.250Z",
        1726747529000,
        "2024-09-19@20h03m29s",
        "2024-09-19@20h03m29s123ms",
        None,
    ]
    rows = [{**base, "mes": f"m{i}"} for i in range(len(forms))]
    for row, form in zip(rows, forms, strict=True):
        if form is not None:
            row["send_date"] = form
    text = jsonl(HEADER, *rows)
    before = time.time()
    conversation_id = import_text(tree, text)
    after = time.time()
    times = [m.created_at for m in tree.active_path(conversation_id)]
    assert times[0] == datetime(2024, 9, 19, 20, 3).timestamp()  # local time, as written
    assert times[1] == datetime(2024, 9, 19, 12, 5, 0, 250000, UTC).timestamp()
    assert times[2] == 1726747529.0
    assert times[3] == datetime(2024, 9, 19, 20, 3, 29).timestamp()
    assert times[4] == datetime(2024, 9, 19, 20, 3, 29, 123000).timestamp()
    assert before <= times[5] - 5 / 1000 <= after  # no date: import time + order
    same_lines(export_st_chat(tree, conversation_id), text)


def test_system_and_hidden_lines_become_system_messages(tree: TurnTree) -> None:
    note = {"name": "SillyTavern System", "is_user": False, "is_system": True, "mes": "Note"}
    text = jsonl(HEADER, HELLO, note)
    conversation_id = import_text(tree, text)
    assert [m.role for m in tree.active_path(conversation_id)] == ["user", "system"]
    same_lines(export_st_chat(tree, conversation_id), text)


def test_inconsistent_swipes_keep_the_shown_text_and_export_as_read(tree: TurnTree) -> None:
    odd = {**HELLO, "is_user": False, "mes": "edited", "swipes": ["old", "other"], "swipe_id": 0}
    empty = {**HELLO, "is_user": False, "mes": "solo", "swipes": [], "swipe_id": 5}
    short_info = {**REPLY, "swipe_info": REPLY["swipe_info"][:1]}
    text = jsonl(HEADER, odd, empty, short_info)
    conversation_id = import_text(tree, text)
    assert [m.content for m in tree.active_path(conversation_id)] == [
        "edited",
        "solo",
        "Reply one",
    ]
    same_lines(export_st_chat(tree, conversation_id), text)


def test_a_file_without_a_header_gets_one_on_export(tree: TurnTree) -> None:
    conversation_id = import_text(tree, jsonl(HELLO, GREETING))
    header, *rest = lines_of(export_st_chat(tree, conversation_id))
    assert header["user_name"] == "Ann"
    assert header["character_name"] == "Sera"
    assert rest == [HELLO, GREETING]


def test_a_bad_line_is_refused_before_anything_is_written(tree: TurnTree) -> None:
    text = jsonl(HEADER, HELLO) + '\n{"name": "Sera", "mes": 3\n'
    with pytest.raises(FileFormatError) as caught:
        import_st_chat(tree, parse_chat_jsonl(text, "broken.jsonl"), project_id="p")
    assert "broken.jsonl" in str(caught.value)
    assert "line 3" in str(caught.value)
    assert tree.conversations() == []


def test_knowledge_import_makes_a_chat_a_conversation_when_given_the_importer(
    tmp_path: Path, tree: TurnTree
) -> None:
    project = tmp_path / "project"
    init_project(project)
    sample = SAMPLE_CHATS[0]
    summary = import_knowledge_file(
        sample,
        project_dir=project,
        global_folder=tmp_path / "global",
        chat_importer=conversation_importer(tree, project_id="proj"),
    )
    assert summary.conversation_id is not None
    assert summary.chat_file is None
    assert not (project / CHATS_DIR).exists()
    messages, _ = swipe_counts(lines_of(sample.read_text(encoding="utf-8")))
    assert summary.chat_messages == messages
    [listed] = tree.conversations("proj")
    assert listed.id == summary.conversation_id
    # Named from the chat's header (character and creation date), not the file name.
    chat = parse_chat_jsonl(sample.read_text(encoding="utf-8"), sample)
    assert chat.header is not None
    assert listed.title == f"{chat.character_name} - {chat.header.create_date}"
    assert listed.message_count >= messages


def test_knowledge_import_keeps_the_chat_file_without_an_importer(tmp_path: Path) -> None:
    project = tmp_path / "project"
    init_project(project)
    summary = import_knowledge_file(
        SAMPLE_CHATS[1], project_dir=project, global_folder=tmp_path / "global"
    )
    assert summary.conversation_id is None
    assert summary.chat_file is not None
    assert Path(summary.chat_file).read_text(encoding="utf-8") == SAMPLE_CHATS[1].read_text(
        encoding="utf-8"
    )


def test_an_empty_chat_imports_as_an_empty_conversation(tree: TurnTree) -> None:
    chat = ChatLog.model_validate({"header": HEADER, "messages": []})
    imported = import_st_chat(tree, chat, project_id="p")
    assert (imported.messages, imported.siblings, imported.total) == (0, 0, 0)
    assert tree.conversation(imported.conversation_id).pointer is None
    assert lines_of(export_st_chat(tree, imported.conversation_id)) == [HEADER]
