"""Edit in place with versions, and hiding messages from the prompt (SillyTavern's ghost):
in the turn tree, in the prompt's history, and through SillyTavern's chat files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storyloom.chat.service.mnemosyne import history_of
from storyloom.chat.store.message_marks import MAX_VERSIONS, is_hidden, versions_of
from storyloom.chat.store.st_chat import export_st_chat, import_st_chat
from storyloom.chat.store.turn_tree import ChatError, TurnTree, VersionConflict
from storyloom.sillytavern.chat_log import parse_chat_jsonl
from storyloom.store.database import Database


@pytest.fixture
def tree(tmp_path: Path) -> TurnTree:
    return TurnTree(Database(tmp_path / "chat.sqlite3"))


def chain(tree: TurnTree, texts: list[str]) -> tuple[str, list[str]]:
    conversation = tree.create_conversation(project_id="p", title="t")
    ids: list[str] = []
    parent: str | None = None
    for n, text in enumerate(texts):
        message = tree.add_message(
            conversation.id,
            parent_id=parent,
            role="user" if n % 2 else "assistant",
            content=text,
        )
        ids.append(message.id)
        parent = message.id
    return conversation.id, ids


def test_an_edit_in_place_keeps_the_message_its_children_and_the_old_text(tree: TurnTree) -> None:
    cid, ids = chain(tree, ["Hi", "one", "two", "three"])
    version = tree.conversation(cid).version
    edited = tree.rewrite_message(ids[1], "one, better", expected_version=version)
    assert edited.id == ids[1]
    assert [m.content for m in tree.active_path(cid)] == ["Hi", "one, better", "two", "three"]
    assert [v.content for v in versions_of(edited.extra)] == ["one"]
    assert tree.conversation(cid).version == version + 1
    assert len(tree.siblings(ids[1])) == 1


def test_an_edit_in_place_from_a_stale_tab_is_refused(tree: TurnTree) -> None:
    cid, ids = chain(tree, ["Hi", "one"])
    stale = tree.conversation(cid).version - 1
    with pytest.raises(VersionConflict):
        tree.rewrite_message(ids[1], "never", expected_version=stale)
    assert tree.message(ids[1]).content == "one"


def test_restoring_a_version_swaps_it_with_the_current_text(tree: TurnTree) -> None:
    _, ids = chain(tree, ["Hi", "v1"])
    tree.rewrite_message(ids[1], "v2")
    tree.rewrite_message(ids[1], "v3")
    restored = tree.restore_version(ids[1], 0)
    assert restored.content == "v1"
    assert [v.content for v in versions_of(restored.extra)] == ["v2", "v3"]
    with pytest.raises(ChatError, match="no version 2"):
        tree.restore_version(ids[1], 2)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.text(max_size=12), min_size=1, max_size=8), st.data())
def test_no_text_is_lost_across_edits_and_restores(
    tmp_path_factory: pytest.TempPathFactory, edits: list[str], data: st.DataObject
) -> None:
    tree = TurnTree(Database(tmp_path_factory.mktemp("db") / "chat.sqlite3"))
    _, ids = chain(tree, ["Hi", "start"])
    texts = ["start"]
    for text in edits:
        message = tree.message(ids[1])
        versions = versions_of(message.extra)
        restore = data.draw(st.booleans())
        if versions and restore:
            tree.restore_version(ids[1], data.draw(st.integers(0, len(versions) - 1)))
        else:
            tree.rewrite_message(ids[1], text)
            texts.append(text)
        message = tree.message(ids[1])
        kept = [message.content, *(v.content for v in versions_of(message.extra))]
        assert sorted(kept) == sorted(texts)


def test_versions_are_capped_oldest_first(tree: TurnTree) -> None:
    _, ids = chain(tree, ["Hi", "0"])
    for n in range(1, MAX_VERSIONS + 3):
        tree.rewrite_message(ids[1], str(n))
    versions = versions_of(tree.message(ids[1]).extra)
    assert len(versions) == MAX_VERSIONS
    assert versions[-1].content == str(MAX_VERSIONS + 1)


def test_a_hidden_message_is_left_out_of_the_prompt_history(tree: TurnTree) -> None:
    cid, ids = chain(tree, ["Hi", "one", "two", "three"])
    tree.set_hidden(ids[2], True)
    assert [m.content for m in history_of(tree.active_path(cid))] == ["Hi", "one", "three"]
    assert [m.content for m in tree.active_path(cid)] == ["Hi", "one", "two", "three"]
    tree.set_hidden(ids[2], False)
    assert not is_hidden(tree.message(ids[2]).extra)
    assert len(history_of(tree.active_path(cid))) == 4


def test_the_tree_marks_hidden_messages_on_every_branch(tree: TurnTree) -> None:
    cid, ids = chain(tree, ["Hi", "one", "two"])
    side = tree.add_message(cid, parent_id=ids[0], role="user", content="other way")
    tree.set_hidden(ids[1], True)
    tree.set_hidden(side.id, True)
    tree.set_hidden(ids[1], False)
    tree.set_hidden(ids[2], True)
    marks = {node.id: node.hidden for node in tree.tree(cid)}
    assert marks == {ids[0]: False, ids[1]: False, ids[2]: True, side.id: True}


def jsonl(*objects: dict[str, Any]) -> str:
    return "\n".join(json.dumps(o, ensure_ascii=False, separators=(",", ":")) for o in objects)


HEADER = {"user_name": "Ann", "character_name": "Sera", "create_date": "2024-09-19@20h03m29s"}
USER = {"name": "Ann", "is_user": True, "is_system": False, "send_date": "2024-09-19T12:04:00.000Z",
        "mes": "Hello", "extra": {}}  # fmt: skip
GHOST_REPLY = {"name": "Sera", "is_user": False, "is_system": True,
               "send_date": "2024-09-19T12:05:00.000Z", "mes": "Hidden reply",
               "extra": {}}  # fmt: skip
GHOST_USER = {**USER, "is_system": True, "mes": "Hidden question"}


def lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.strip()]


def test_sillytavern_ghost_lines_import_hidden_with_their_speaker_and_export_unchanged(
    tree: TurnTree,
) -> None:
    text = jsonl(HEADER, USER, GHOST_REPLY, GHOST_USER)
    cid = import_st_chat(tree, parse_chat_jsonl(text, "c.jsonl"), project_id="p").conversation_id
    path = tree.active_path(cid)
    assert [m.role for m in path] == ["user", "assistant", "user"]
    assert [is_hidden(m.extra) for m in path] == [False, True, True]
    assert [m.content for m in history_of(path)] == ["Hello"]
    assert lines(export_st_chat(tree, cid)) == lines(text)


def test_hiding_or_showing_an_imported_line_changes_only_its_is_system(tree: TurnTree) -> None:
    text = jsonl(HEADER, USER, GHOST_REPLY)
    cid = import_st_chat(tree, parse_chat_jsonl(text, "c.jsonl"), project_id="p").conversation_id
    first, second = tree.active_path(cid)
    tree.set_hidden(first.id, True)
    tree.set_hidden(second.id, False)
    out = [json.loads(line) for line in lines(export_st_chat(tree, cid))]
    assert out[1] == {**USER, "is_system": True}
    assert out[2] == {**GHOST_REPLY, "is_system": False}


def test_a_message_hidden_in_storyloom_exports_as_a_sillytavern_ghost(tree: TurnTree) -> None:
    cid, ids = chain(tree, ["Hi", "one"])
    tree.set_hidden(ids[1], True)
    out = [json.loads(line) for line in lines(export_st_chat(tree, cid))]
    assert [(o["is_user"], o["is_system"]) for o in out[1:]] == [(False, False), (True, True)]
