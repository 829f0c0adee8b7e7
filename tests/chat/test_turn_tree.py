"""The turn tree: branches, swipes, edits, time travel and versioned writes in SQLite."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storyloom.chat.store.conversation import CharacterSnapshot, Conversation, ConversationSettings
from storyloom.chat.store.message import Message, Role
from storyloom.chat.store.state import ChatState
from storyloom.chat.store.turn_tree import (
    INTERRUPTED_ERROR,
    LADDER_STEP,
    ChatError,
    NewMessage,
    TurnRecord,
    TurnTree,
    VersionConflict,
    new_id,
)
from storyloom.core.errors import NotFound
from storyloom.store.database import Database


def new_chat(tree: TurnTree, **fields: Any) -> Conversation:
    return tree.create_conversation(project_id="p1", title="A chat", **fields)


def say(tree: TurnTree, chat: Conversation, parent: Message | None, text: str) -> Message:
    """Add a message alternating roles by depth (user first), as a chat does."""
    depth = 0 if parent is None else parent.depth + 1
    role: Role = "user" if depth % 2 == 0 else "assistant"
    return tree.add_message(
        chat.id, parent_id=None if parent is None else parent.id, role=role, content=text
    )


def line(tree: TurnTree, chat: Conversation, *texts: str) -> list[Message]:
    """Messages one under the other, continuing from the pointer."""
    pointer = tree.conversation(chat.id).pointer
    parent = None if pointer is None else tree.message(pointer)
    out = []
    for text in texts:
        parent = say(tree, chat, parent, text)
        out.append(parent)
    return out


def contents(messages: list[Message]) -> list[str]:
    return [m.content for m in messages]


def shown(tree: TurnTree, chat: Conversation) -> list[str]:
    return contents(tree.active_path(chat.id))


def ahead(tree: TurnTree, chat: Conversation) -> list[str]:
    return contents(tree.continuation(chat.id))


def test_new_id_is_sixteen_hex_characters() -> None:
    ids = {new_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(len(i) == 16 and int(i, 16) >= 0 for i in ids)


def test_add_message_builds_the_path_children_and_moves_the_pointer(tree: TurnTree) -> None:
    chat = new_chat(tree)
    assert tree.active_path(chat.id) == []
    hello, hi, how = line(tree, chat, "hello", "hi there", "how are you?")

    assert shown(tree, chat) == ["hello", "hi there", "how are you?"]
    assert [m.depth for m in tree.active_path(chat.id)] == [0, 1, 2]
    assert (hi.parent_id, how.parent_id) == (hello.id, hi.id)
    assert tree.conversation(chat.id).pointer == how.id
    assert tree.path(hi.id) == [hello, hi]
    assert tree.path(None) == []
    assert tree.children(chat.id, hello.id) == [hi]
    assert tree.children(chat.id, None) == [hello]
    assert tree.message(hi.id) == hi
    assert tree.continuation(chat.id) == []


def test_messages_read_back_equal_validated_ones_and_copy_safely(tree: TurnTree) -> None:
    chat = new_chat(tree)
    added = tree.add_message(
        chat.id,
        parent_id=None,
        role="assistant",
        name="Seraphina",
        content="你好",
        thought="be kind",
        original="raw",
        extra={"model": "m", "nested": {"a": [1, 2]}},
        created_at=123.5,
    )
    read = tree.message(added.id)
    assert read == Message.model_validate(added.model_dump())
    assert read.model_dump() == added.model_dump()
    changed = read.model_copy(update={"content": "other"})
    assert changed.content == "other"
    assert tree.message(added.id).content == "你好"
    assert changed.model_fields_set >= {"content"}
    with pytest.raises(ValueError, match="frozen"):
        read.content = "x"  # type: ignore[misc]


def test_add_message_refuses_a_parent_of_another_conversation_or_unknown(
    tree: TurnTree,
) -> None:
    first, second = new_chat(tree), new_chat(tree)
    (theirs,) = line(tree, first, "theirs")
    with pytest.raises(ChatError, match=f"belongs to conversation {first.id}"):
        tree.add_message(second.id, parent_id=theirs.id, role="user", content="x")
    with pytest.raises(NotFound, match="message nope not found"):
        tree.add_message(second.id, parent_id="nope", role="user", content="x")
    with pytest.raises(NotFound, match="conversation nope not found"):
        tree.add_message("nope", parent_id=None, role="user", content="x")
    with pytest.raises(ChatError, match="role"):
        tree.add_message(second.id, parent_id=None, role="narrator", content="x")  # type: ignore[arg-type]
    assert tree.active_path(second.id) == []
    assert tree.conversation(second.id).version == 0


def test_swipe_on_an_old_message_keeps_the_later_branches_of_the_other_sibling(
    tree: TurnTree,
) -> None:
    chat = new_chat(tree)
    question, answer, more, answer2 = line(tree, chat, "q", "a1", "more", "b1")
    # A second answer to the first question: a sibling of an old message.
    other = tree.add_message(chat.id, parent_id=question.id, role="assistant", content="a2")
    assert other.sibling_index == 1
    line(tree, chat, "more after a2")
    assert shown(tree, chat) == ["q", "a2", "more after a2"]

    tree.swipe(other.id, 0)
    assert shown(tree, chat) == ["q", "a1", "more", "b1"]
    assert tree.conversation(chat.id).pointer == answer2.id

    tree.swipe(answer.id, 1)
    assert shown(tree, chat) == ["q", "a2", "more after a2"]
    assert [m.content for m in tree.siblings(answer.id)] == ["a1", "a2"]
    assert tree.message(more.id).content == "more"


def test_swipe_out_of_range_is_refused_and_changes_nothing(tree: TurnTree) -> None:
    chat = new_chat(tree)
    _, answer = line(tree, chat, "q", "a1")
    before = tree.conversation(chat.id)
    for index in (1, -1):
        with pytest.raises(ChatError, match=f"has 1 sibling.*no sibling {index}"):
            tree.swipe(answer.id, index)
    assert tree.conversation(chat.id) == before


def test_edit_of_any_message_makes_a_sibling_and_keeps_the_original(tree: TurnTree) -> None:
    chat = new_chat(tree)
    first, reply, second, reply2 = line(tree, chat, "I walk in", "You see a door", "x", "y")
    edited = tree.edit_message(first.id, "I run in")

    assert edited.parent_id is None
    assert (edited.role, edited.sibling_index, edited.depth) == ("user", 1, 0)
    assert edited.extra["edited_from"] == first.id
    assert shown(tree, chat) == ["I run in"]
    assert tree.message(first.id).content == "I walk in"
    # Swiping back to the original brings its whole conversation back.
    tree.swipe(edited.id, 0)
    assert shown(tree, chat) == ["I walk in", "You see a door", "x", "y"]

    edited_reply = tree.edit_message(reply.id, "You see a gate")
    assert edited_reply.role == "assistant"
    assert shown(tree, chat) == ["I walk in", "You see a gate"]
    last = tree.edit_message(edited_reply.id, "You see a wall")
    assert (last.sibling_index, shown(tree, chat)) == (2, ["I walk in", "You see a wall"])
    tree.set_pointer(chat.id, first.id)
    assert ahead(tree, chat) == ["You see a wall"]
    assert tree.sibling_counts([reply.id, second.id, reply2.id]) == {
        reply.id: 3,
        second.id: 1,
        reply2.id: 1,
    }


def test_branch_from_an_old_message_keeps_the_old_continuation_intact(tree: TurnTree) -> None:
    chat = new_chat(tree)
    _, a, _, a2 = line(tree, chat, "q", "a", "q2", "a2")
    tree.set_pointer(chat.id, a.id)
    assert ahead(tree, chat) == ["q2", "a2"]

    branch = tree.add_message(chat.id, parent_id=a.id, role="user", content="other q2")
    assert branch.sibling_index == 1
    assert shown(tree, chat) == ["q", "a", "other q2"]
    assert ahead(tree, chat) == []
    assert contents(tree.path(a2.id)) == ["q", "a", "q2", "a2"]
    assert [m.content for m in tree.children(chat.id, a.id)] == ["q2", "other q2"]

    tree.swipe(branch.id, 0)
    assert shown(tree, chat) == ["q", "a", "q2", "a2"]


def test_time_travel_keeps_the_way_forward_and_moving_forward_restores_it(
    tree: TurnTree,
) -> None:
    chat = new_chat(tree)
    messages = line(tree, chat, "m0", "m1", "m2", "m3", "m4")
    tree.set_pointer(chat.id, messages[1].id)
    assert shown(tree, chat) == ["m0", "m1"]
    assert ahead(tree, chat) == ["m2", "m3", "m4"]

    tree.set_pointer(chat.id, messages[3].id)
    assert shown(tree, chat) == ["m0", "m1", "m2", "m3"]
    assert ahead(tree, chat) == ["m4"]

    tree.set_pointer(chat.id, None)
    assert shown(tree, chat) == []
    assert ahead(tree, chat) == ["m0", "m1", "m2", "m3", "m4"]
    tree.set_pointer(chat.id, messages[4].id)
    assert shown(tree, chat) == ["m0", "m1", "m2", "m3", "m4"]


def test_time_travel_onto_another_branch_makes_its_path_active(tree: TurnTree) -> None:
    chat = new_chat(tree)
    q, a = line(tree, chat, "q", "a")
    b = tree.add_message(chat.id, parent_id=q.id, role="assistant", content="b")
    line(tree, chat, "b-next")
    tree.set_pointer(chat.id, a.id)
    tree.set_pointer(chat.id, q.id)
    assert ahead(tree, chat) == ["a"]
    tree.swipe(a.id, 1)
    assert shown(tree, chat) == ["q", "b", "b-next"]
    assert tree.conversation(chat.id).pointer != b.id


def test_set_pointer_refuses_a_message_of_another_conversation(tree: TurnTree) -> None:
    first, second = new_chat(tree), new_chat(tree)
    (theirs,) = line(tree, first, "theirs")
    with pytest.raises(ChatError, match="belongs to conversation"):
        tree.set_pointer(second.id, theirs.id)
    with pytest.raises(NotFound):
        tree.set_pointer(second.id, "nope")
    assert tree.conversation(second.id).version == 0


def test_every_visible_write_bumps_the_version_once(tree: TurnTree) -> None:
    chat = new_chat(tree)
    assert chat.version == 0

    def version() -> int:
        return tree.conversation(chat.id).version

    a, b = line(tree, chat, "a", "b")
    assert version() == 2
    tree.set_pointer(chat.id, a.id, expected_version=2)
    assert version() == 3
    edited = tree.edit_message(b.id, "b'", expected_version=3)
    assert version() == 4
    tree.swipe(edited.id, 0, expected_version=4)
    assert version() == 5
    tree.update_conversation(chat.id, title="Renamed", expected_version=5)
    assert version() == 6
    tree.delete_message(edited.id, expected_version=6)
    assert version() == 7
    tree.add_messages(chat.id, [NewMessage(parent_id=b.id, role="user", content="c")])
    assert version() == 8
    reply = tree.add_message(
        chat.id, parent_id=tree.conversation(chat.id).pointer, role="assistant", content=""
    )
    assert version() == 9
    tree.update_message(reply.id, content="streamed so f", status="streaming")
    assert version() == 9
    tree.update_message(reply.id, content="streamed so far", status="complete", bump_version=True)
    assert version() == 10
    assert tree.conversation(chat.id).updated_at >= chat.updated_at


@pytest.mark.parametrize(
    "write",
    [
        "add_message",
        "add_messages",
        "edit",
        "swipe",
        "set_pointer",
        "delete",
        "update_conversation",
    ],
)
def test_a_stale_version_is_refused_and_changes_nothing(tree: TurnTree, write: str) -> None:
    chat = new_chat(tree)
    q, a = line(tree, chat, "q", "a")
    b = tree.add_message(chat.id, parent_id=q.id, role="assistant", content="b")
    before = tree.conversation(chat.id)
    path_before = tree.active_path(chat.id)
    tree_before = tree.tree(chat.id)
    stale = before.version - 1
    operations: dict[str, Callable[[], object]] = {
        "add_message": lambda: tree.add_message(
            chat.id, parent_id=b.id, role="user", content="x", expected_version=stale
        ),
        "add_messages": lambda: tree.add_messages(
            chat.id, [NewMessage(parent_id=b.id, role="user", content="x")], expected_version=stale
        ),
        "edit": lambda: tree.edit_message(a.id, "a'", expected_version=stale),
        "swipe": lambda: tree.swipe(b.id, 0, expected_version=stale),
        "set_pointer": lambda: tree.set_pointer(chat.id, q.id, expected_version=stale),
        "delete": lambda: tree.delete_message(b.id, expected_version=stale),
        "update_conversation": lambda: tree.update_conversation(
            chat.id, title="new", expected_version=stale
        ),
    }
    with pytest.raises(VersionConflict) as caught:
        operations[write]()
    assert (caught.value.expected, caught.value.actual) == (stale, before.version)
    assert chat.id in str(caught.value)
    assert f"expected version {stale}" in str(caught.value)
    assert f"at version {before.version}" in str(caught.value)
    assert tree.conversation(chat.id) == before
    assert tree.active_path(chat.id) == path_before
    assert tree.tree(chat.id) == tree_before


def test_two_writers_with_the_same_version_cannot_both_write(db: Database) -> None:
    tree = TurnTree(db)
    chat = new_chat(tree)
    (q,) = line(tree, chat, "q")
    version = tree.conversation(chat.id).version
    barrier = threading.Barrier(8)
    outcomes: list[str] = []
    lock = threading.Lock()

    def write(n: int) -> None:
        barrier.wait()
        try:
            tree.add_message(
                chat.id,
                parent_id=q.id,
                role="assistant",
                content=f"reply {n}",
                expected_version=version,
            )
            result = "written"
        except VersionConflict:
            result = "conflict"
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["conflict"] * 7 + ["written"]
    assert len(tree.children(chat.id, q.id)) == 1
    assert tree.conversation(chat.id).version == version + 1


def test_delete_of_a_subtree_moves_the_pointer_to_its_parent(tree: TurnTree) -> None:
    chat = new_chat(tree)
    q, a1, more, deeper = line(tree, chat, "q", "a1", "more", "deeper")
    a2 = tree.add_message(chat.id, parent_id=q.id, role="assistant", content="a2")
    a3 = tree.add_message(chat.id, parent_id=q.id, role="assistant", content="a3")
    tree.swipe(a1.id, 0)
    assert tree.conversation(chat.id).pointer == deeper.id

    conversation = tree.delete_message(a1.id)
    assert conversation.pointer == q.id
    for gone in (a1, more, deeper):
        with pytest.raises(NotFound):
            tree.message(gone.id)
        with pytest.raises(NotFound):
            tree.state_at(gone.id)
    assert [(m.content, m.sibling_index) for m in tree.children(chat.id, q.id)] == [
        ("a2", 0),
        ("a3", 1),
    ]
    assert shown(tree, chat) == ["q"]
    assert ahead(tree, chat) == ["a2"]
    assert (
        tree.add_message(chat.id, parent_id=q.id, role="assistant", content="a4").sibling_index == 2
    )
    assert tree.message(a2.id).sibling_index == 0
    assert tree.message(a3.id).sibling_index == 1


def test_delete_outside_the_path_keeps_the_pointer(tree: TurnTree) -> None:
    chat = new_chat(tree)
    q, a1 = line(tree, chat, "q", "a1")
    a2 = tree.add_message(chat.id, parent_id=q.id, role="assistant", content="a2")
    tree.swipe(a2.id, 0)
    assert tree.delete_message(a2.id).pointer == a1.id
    assert shown(tree, chat) == ["q", "a1"]
    with pytest.raises(NotFound):
        tree.delete_message(a2.id)


def test_delete_of_a_long_chain_works(tree: TurnTree) -> None:
    """Deep trees are deleted by the tree code, not by a cascade of trigger depth."""
    chat = new_chat(tree)
    rows = [
        NewMessage(
            message_id=f"m{i}",
            parent_id=None if i == 0 else f"m{i - 1}",
            role="user" if i % 2 == 0 else "assistant",
            content=str(i),
        )
        for i in range(2500)
    ]
    tree.add_messages(chat.id, rows)
    assert tree.delete_message("m1").pointer == "m0"
    assert shown(tree, chat) == ["0"]
    assert len(tree.tree(chat.id)) == 1


def test_recover_interrupted_marks_streaming_replies_partial(tree: TurnTree) -> None:
    chat = new_chat(tree)
    (q,) = line(tree, chat, "q")
    streaming = tree.add_message(
        chat.id, parent_id=q.id, role="assistant", content="", status="streaming"
    )
    tree.update_message(streaming.id, content="It was a dark")
    done = tree.add_message(chat.id, parent_id=q.id, role="assistant", content="done")
    version = tree.conversation(chat.id).version

    assert tree.recover_interrupted() == 1
    recovered = tree.message(streaming.id)
    assert (recovered.status, recovered.content) == ("partial", "It was a dark")
    assert recovered.error == INTERRUPTED_ERROR
    assert "interrupted" in INTERRUPTED_ERROR
    assert tree.message(done.id).status == "complete"
    assert tree.conversation(chat.id).version == version + 1
    assert tree.recover_interrupted() == 0


def test_sibling_counts_cover_roots_and_leave_out_unknown_ids(tree: TurnTree) -> None:
    chat = new_chat(tree)
    greeting = tree.add_message(chat.id, parent_id=None, role="assistant", content="g1")
    tree.add_message(chat.id, parent_id=None, role="assistant", content="g2")
    user = tree.add_message(chat.id, parent_id=greeting.id, role="user", content="u")
    replies = [
        tree.add_message(chat.id, parent_id=user.id, role="assistant", content=f"r{i}")
        for i in range(3)
    ]
    counts = tree.sibling_counts([greeting.id, user.id, replies[0].id, "unknown"])
    assert counts == {greeting.id: 2, user.id: 1, replies[0].id: 3}
    assert tree.sibling_counts([]) == {}


def test_conversations_list_newest_first_with_a_preview(tree: TurnTree) -> None:
    empty = new_chat(tree, created_at=1.0)
    card = CharacterSnapshot(card={"name": "Seraphina", "description": "a guardian"})
    chat = tree.create_conversation(project_id="p1", title="With her", character=card)
    other_project = tree.create_conversation(project_id="p2", title="Elsewhere")
    line(tree, chat, "hello", "  A   very long\nreply " + "x" * 300)
    tree.update_conversation(other_project.id, title="Elsewhere")

    listed = tree.conversations("p1")
    assert [c.id for c in listed] == [chat.id, empty.id]
    first = listed[0]
    assert (first.title, first.character_name, first.message_count) == ("With her", "Seraphina", 2)
    assert first.last_message.startswith("A very long reply xxx")
    assert len(first.last_message) == 120
    assert first.last_message.endswith("…")
    assert (listed[1].message_count, listed[1].last_message, listed[1].character_name) == (
        0,
        "",
        "",
    )
    assert {c.id for c in tree.conversations()} == {chat.id, empty.id, other_project.id}
    assert tree.conversations()[0].id == other_project.id


def test_the_preview_leaves_out_a_status_bar_placeholder(tree: TurnTree) -> None:
    # MVU cards end each reply with a placeholder their display regex turns into a page.
    chat = new_chat(tree)
    line(tree, chat, "早上好", "理轻轻合上祈祷书。\n<StatusPlaceHolderImpl/>")
    (listed,) = tree.conversations("p1")
    assert listed.last_message == "理轻轻合上祈祷书。"


def test_conversations_list_names_the_character_behind_each_face_and_marks_groups(
    tree: TurnTree,
) -> None:
    card = CharacterSnapshot(source_preset="sera", card={"name": "Seraphina"})
    one = tree.create_conversation(project_id="p", title="One", character=card)
    group = ConversationSettings.model_validate(
        {"group": {"members": [{"character_id": "sera"}, {"character_id": "kai"}]}}
    )
    three = tree.create_conversation(project_id="p", title="Band", character=card, settings=group)
    imported = tree.create_conversation(project_id="p", title="Imported")
    listed = {c.id: (c.character_id, c.group_size) for c in tree.conversations("p")}
    assert listed == {one.id: ("sera", 0), three.id: ("sera", 2), imported.id: (None, 0)}


def test_conversation_round_trips_its_settings_and_snapshots(tree: TurnTree) -> None:
    settings = ConversationSettings(user_name="Ann", keyframe_every=4, custom_key=1)
    chat = tree.create_conversation(
        project_id="p",
        title="t",
        settings=settings,
        character=CharacterSnapshot(base_persona="kind", card={"name": "N"}),
        metadata={"chat_metadata": {"note": "ü"}},
        conversation_id="fixed-id",
        created_at=10.0,
    )
    read = tree.conversation("fixed-id")
    assert read == chat
    assert read.settings.keyframe_every == 4
    assert read.settings.model_dump()["custom_key"] == 1
    assert read.metadata == {"chat_metadata": {"note": "ü"}}
    assert (read.created_at, read.version, read.pointer) == (10.0, 0, None)
    with pytest.raises(ChatError, match="already taken"):
        tree.create_conversation(project_id="p", title="t", conversation_id="fixed-id")
    with pytest.raises(NotFound):
        tree.conversation("missing")


def test_delete_conversation_removes_its_rows(tree: TurnTree, db: Database) -> None:
    chat, kept = new_chat(tree), new_chat(tree)
    line(tree, chat, "a", "b", "c")
    line(tree, kept, "k")
    tree.delete_conversation(chat.id)
    conn = db.connection()
    for table, column in (
        ("chat_conversation", "id"),
        ("chat_message", "conversation_id"),
        ("chat_state", "conversation_id"),
    ):
        count = conn.execute(f"SELECT COUNT(*) FROM {table} WHERE {column} = ?", (chat.id,))
        assert count.fetchall() == [(0,)]
    assert shown(tree, kept) == ["k"]
    with pytest.raises(NotFound):
        tree.delete_conversation(chat.id)


def test_alternate_greetings_are_sibling_roots_to_swipe_between(tree: TurnTree) -> None:
    chat = new_chat(tree)
    greetings = [
        tree.add_message(chat.id, parent_id=None, role="assistant", content=f"greeting {i}")
        for i in range(3)
    ]
    assert [g.sibling_index for g in greetings] == [0, 1, 2]
    assert shown(tree, chat) == ["greeting 2"]
    tree.swipe(greetings[2].id, 0)
    assert shown(tree, chat) == ["greeting 0"]
    line(tree, chat, "hi", "welcome")
    tree.swipe(greetings[0].id, 1)
    assert shown(tree, chat) == ["greeting 1"]
    tree.swipe(greetings[1].id, 0)
    assert shown(tree, chat) == ["greeting 0", "hi", "welcome"]
    assert [m.content for m in tree.children(chat.id, None)] == [
        "greeting 0",
        "greeting 1",
        "greeting 2",
    ]
    assert tree.sibling_counts([greetings[0].id]) == {greetings[0].id: 3}
    # Going back before the first message keeps the chosen greeting ahead.
    tree.set_pointer(chat.id, None)
    assert ahead(tree, chat) == ["greeting 0", "hi", "welcome"]


def test_tree_lists_every_message_and_marks_the_path(tree: TurnTree) -> None:
    chat = new_chat(tree)
    q, a1 = line(tree, chat, "q " * 60, "a1")
    a2 = tree.add_message(chat.id, parent_id=q.id, role="assistant", name="Bot", content="a2")
    tree.swipe(a2.id, 0)
    nodes = {node.id: node for node in tree.tree(chat.id)}
    assert set(nodes) == {q.id, a1.id, a2.id}
    assert (nodes[q.id].on_path, nodes[a1.id].on_path, nodes[a2.id].on_path) == (True, True, False)
    assert len(nodes[q.id].preview) == 80
    assert nodes[a2.id].model_dump() == {
        "id": a2.id,
        "parent_id": q.id,
        "role": "assistant",
        "name": "Bot",
        "preview": "a2",
        "status": "complete",
        "sibling_index": 1,
        "depth": 1,
        "on_path": False,
        "hidden": False,
    }
    assert [n.depth for n in tree.tree(chat.id)] == [0, 1, 1]


def test_add_messages_links_earlier_rows_and_makes_the_last_path_active(
    tree: TurnTree,
) -> None:
    """The shape a SillyTavern import writes: swipes as siblings, the chosen one active."""
    chat = new_chat(tree)
    (greeting,) = line(tree, chat, "greeting")
    rows = [
        NewMessage(message_id="u1", parent_id=greeting.id, role="user", content="u1"),
        NewMessage(message_id="s0", parent_id="u1", role="assistant", content="swipe 0"),
        NewMessage(message_id="s1", parent_id="u1", role="assistant", content="swipe 1"),
        NewMessage(message_id="s2", parent_id="u1", role="assistant", content="swipe 2"),
        NewMessage(message_id="u2", parent_id="s1", role="user", content="u2", created_at=5.0),
    ]
    added = tree.add_messages(chat.id, rows)
    assert [m.id for m in added] == ["u1", "s0", "s1", "s2", "u2"]
    assert [m.sibling_index for m in added] == [0, 0, 1, 2, 0]
    assert [m.depth for m in added] == [1, 2, 2, 2, 3]
    assert added[-1].created_at == 5.0
    assert [tree.message(m.id) for m in added] == added
    assert shown(tree, chat) == ["greeting", "u1", "swipe 1", "u2"]
    tree.swipe("s1", 2)
    assert shown(tree, chat) == ["greeting", "u1", "swipe 2"]
    tree.swipe("s2", 1)
    assert shown(tree, chat) == ["greeting", "u1", "swipe 1", "u2"]
    # More rows later continue the numbering.
    more = tree.add_messages(
        chat.id, [NewMessage(parent_id="u1", role="assistant", content="swipe 3")]
    )
    assert more[0].sibling_index == 3
    assert tree.add_messages(chat.id, []) == []


def test_add_messages_is_all_or_nothing(tree: TurnTree) -> None:
    chat = new_chat(tree)
    line(tree, chat, "kept")
    before = tree.conversation(chat.id)
    rows = [
        NewMessage(message_id="x1", parent_id=before.pointer, role="user", content="x1"),
        NewMessage(message_id="x2", parent_id="not-yet-there", role="user", content="x2"),
    ]
    with pytest.raises(NotFound, match="not-yet-there"):
        tree.add_messages(chat.id, rows)
    with pytest.raises(ChatError, match="x1 is already taken"):
        tree.add_messages(
            chat.id,
            [
                NewMessage(message_id="x1", parent_id=None, role="user", content="a"),
                NewMessage(message_id="x1", parent_id=None, role="user", content="b"),
            ],
        )
    assert tree.conversation(chat.id) == before
    assert shown(tree, chat) == ["kept"]
    with pytest.raises(NotFound):
        tree.message("x1")


def test_a_long_path_reads_back_in_order(tree: TurnTree) -> None:
    chat = new_chat(tree)
    rows = []
    parent: str | None = None
    for i in range(3000):
        if i % 2:
            rows += [
                NewMessage(parent_id=parent, role="assistant", content=f"swipe {i}.{k}")
                for k in range(2)
            ]
        rows.append(
            NewMessage(
                message_id=f"m{i}",
                parent_id=parent,
                role="user" if i % 2 == 0 else "assistant",
                content=f"m{i}",
            )
        )
        parent = f"m{i}"
    tree.add_messages(chat.id, rows)
    path = tree.active_path(chat.id)
    assert [m.content for m in path] == [f"m{i}" for i in range(3000)]
    assert [m.depth for m in path] == list(range(3000))
    counts = tree.sibling_counts([m.id for m in path])
    assert [counts[m.id] for m in path[:4]] == [1, 3, 1, 3]
    tree.set_pointer(chat.id, "m10")
    assert len(tree.continuation(chat.id)) == 2989
    assert len(tree.tree(chat.id)) == 3000 + 3000


def test_update_message_changes_in_place_and_validates(tree: TurnTree) -> None:
    chat = new_chat(tree)
    (q,) = line(tree, chat, "q")
    reply = tree.add_message(
        chat.id, parent_id=q.id, role="assistant", content="", status="streaming"
    )
    flushed = tree.update_message(reply.id, content="Hel")
    assert (flushed.content, flushed.status, flushed.sibling_index) == ("Hel", "streaming", 0)
    final = tree.update_message(
        reply.id,
        content="Hello",
        status="complete",
        thought="greet",
        extra={"prompt": {"blocks": []}},
        bump_version=True,
    )
    assert tree.message(reply.id) == final
    assert (final.thought, final.extra) == ("greet", {"prompt": {"blocks": []}})
    assert tree.update_message(reply.id) == final
    with pytest.raises(ChatError, match="status 'done'"):
        tree.update_message(reply.id, status="done")  # type: ignore[arg-type]
    with pytest.raises(NotFound):
        tree.update_message("nope", content="x")
    partial = tree.update_message(reply.id, status="partial", error="stopped by the user")
    assert (partial.content, partial.error) == ("Hello", "stopped by the user")


def test_add_message_with_move_pointer_false_keeps_the_user_where_they_are(
    tree: TurnTree,
) -> None:
    chat = new_chat(tree)
    q, a = line(tree, chat, "q", "a")
    other = tree.add_message(
        chat.id, parent_id=q.id, role="assistant", content="b", move_pointer=False
    )
    assert other.sibling_index == 1
    assert tree.conversation(chat.id).pointer == a.id
    assert shown(tree, chat) == ["q", "a"]
    # The path to the pointer stays the active one: going back shows "a" ahead.
    tree.set_pointer(chat.id, q.id)
    assert ahead(tree, chat) == ["a"]
    # Under the pointer itself, the new message becomes the way forward.
    tree.add_message(chat.id, parent_id=q.id, role="assistant", content="c", move_pointer=False)
    assert tree.conversation(chat.id).pointer == q.id
    assert ahead(tree, chat) == ["c"]
    # Alternate greetings added after the first leave the chat on the first.
    greeting = tree.add_message(chat.id, parent_id=None, role="assistant", content="g")
    tree.add_message(chat.id, parent_id=None, role="assistant", content="g2", move_pointer=False)
    assert shown(tree, chat) == ["g"]
    tree.set_pointer(chat.id, None)
    assert ahead(tree, chat) == ["g"]
    assert tree.sibling_counts([greeting.id]) == {greeting.id: 3}


def test_a_state_given_with_a_message_is_kept(tree: TurnTree) -> None:
    chat = new_chat(tree)
    state = ChatState(variables={"hp": 3})
    message = tree.add_message(chat.id, parent_id=None, role="user", content="x", state=state)
    assert tree.state_at(message.id) == state


class TreeModel:
    """The turn tree's rules in plain Python, to check the SQL against."""

    def __init__(self) -> None:
        self.parent: dict[str, str | None] = {}
        self.children: dict[str | None, list[str]] = {None: []}
        self.active: dict[str | None, str | None] = {None: None}
        self.pointer: str | None = None

    def path(self, node: str | None) -> list[str]:
        out = []
        while node is not None:
            out.append(node)
            node = self.parent[node]
        return out[::-1]

    def point_to(self, node: str | None) -> None:
        self.pointer = node
        previous: str | None = None
        for step in self.path(node):
            self.active[previous] = step
            previous = step

    def add(self, node: str, parent: str | None, *, move: bool) -> None:
        self.parent[node] = parent
        self.children[parent].append(node)
        self.children[node] = []
        self.active[node] = None
        if move:
            self.active[parent] = node
            self.point_to(node)
        elif parent not in self.path(self.pointer)[:-1] and not (
            parent is None and self.pointer is not None
        ):
            self.active[parent] = node

    def deepest(self, node: str) -> str:
        while self.active[node] is not None:
            node = self.active[node]  # type: ignore[assignment]
        return node

    def delete(self, node: str) -> None:
        doomed = [node]
        for item in doomed:
            doomed.extend(self.children[item])
        parent = self.parent[node]
        index = self.children[parent].index(node)
        self.children[parent].remove(node)
        if self.active[parent] == node:
            siblings = self.children[parent]
            self.active[parent] = siblings[max(0, index - 1)] if siblings else None
        if self.pointer in doomed:
            self.pointer = parent
        for item in doomed:
            del self.parent[item], self.children[item], self.active[item]

    def continuation(self) -> list[str]:
        out = []
        node = self.active[self.pointer]
        while node is not None:
            out.append(node)
            node = self.active[node]
        return out


@settings(max_examples=3, deadline=None)
@given(rnd=st.randoms(use_true_random=False))
def test_random_operations_on_a_deep_tree_match_the_rules(
    tmp_path_factory: pytest.TempPathFactory, rnd: random.Random
) -> None:
    """Swipes, edits, branches, deletes and time travel far apart in a deep chat (the
    pointer moves walk up only to where the old and new paths meet)."""
    db = Database(tmp_path_factory.mktemp("tree") / "chat.sqlite3")
    try:
        check_random_operations(TurnTree(db), db, rnd)
    finally:
        db.close()


def check_random_operations(tree: TurnTree, db: Database, rnd: random.Random) -> None:
    chat = new_chat(tree)
    model = TreeModel()
    chain = [
        NewMessage(
            message_id=f"c{i}", parent_id=None if i == 0 else f"c{i - 1}", role="user", content=""
        )
        for i in range(400)
    ]
    tree.add_messages(chat.id, chain)
    for row in chain:
        model.add(str(row.message_id), row.parent_id, move=True)
    for step in range(250):
        nodes = list(model.parent)
        action = rnd.random()
        target = rnd.choice(nodes)
        if action < 0.25:
            tree.set_pointer(chat.id, target)
            model.point_to(target)
        elif action < 0.3:
            tree.set_pointer(chat.id, None)
            model.point_to(None)
        elif action < 0.5:
            parent = rnd.choice([model.pointer, target, None]) if rnd.random() < 0.9 else None
            move = rnd.random() < 0.8
            added = tree.add_message(
                chat.id, parent_id=parent, role="user", content="", move_pointer=move
            )
            model.add(added.id, parent, move=move)
        elif action < 0.7:
            siblings = model.children[model.parent[target]]
            index = rnd.randrange(len(siblings))
            tree.swipe(target, index)
            model.point_to(model.deepest(siblings[index]))
        elif action < 0.8:
            edited = tree.edit_message(target, "edited")
            model.add(edited.id, model.parent[target], move=True)
        elif action < 0.85 and len(nodes) > 50:
            tree.delete_message(target)
            model.delete(target)
        else:
            continue
        conversation = tree.conversation(chat.id)
        assert conversation.pointer == model.pointer, step
        assert [m.id for m in tree.active_path(chat.id)] == model.path(model.pointer), step
        assert [m.id for m in tree.continuation(chat.id)] == model.continuation(), step
        # The ladder lists the pointer's ancestors at every 64th depth.
        assert ladder_of(db, chat) == model.path(model.pointer)[::LADDER_STEP], step
    for parent, kids in model.children.items():
        assert [m.id for m in tree.children(chat.id, parent)] == kids
        assert [m.sibling_index for m in tree.children(chat.id, parent)] == list(range(len(kids)))


def ladder_of(db: Database, chat: Conversation) -> list[str]:
    (ladder,) = (
        db.connection()
        .execute("SELECT ladder FROM chat_conversation WHERE id = ?", (chat.id,))
        .fetchall()[0]
    )
    found: list[str] = json.loads(str(ladder))
    return found


def test_the_ladder_lists_the_pointers_ancestors_at_every_step(
    tree: TurnTree, db: Database
) -> None:
    chat = new_chat(tree)

    def check() -> None:
        path = [m.id for m in tree.active_path(chat.id)]
        assert ladder_of(db, chat) == path[::LADDER_STEP]

    rows = [
        NewMessage(
            message_id=f"c{i}", parent_id=None if i == 0 else f"c{i - 1}", role="user", content=""
        )
        for i in range(LADDER_STEP - 1)
    ]
    tree.add_messages(chat.id, rows)
    check()
    line(tree, chat, "at the step", "after it")  # depths 63, 64
    check()
    assert len(ladder_of(db, chat)) == 2
    line(tree, chat, *(f"m{i}" for i in range(LADDER_STEP + 10)))
    check()
    assert len(ladder_of(db, chat)) == 3
    tree.delete_message("c40")
    check()
    assert ladder_of(db, chat) == ["c0"]
    tree.set_pointer(chat.id, "c10")
    check()
    tree.set_pointer(chat.id, None)
    check()
    assert ladder_of(db, chat) == []


def test_path_json_lists_the_path_root_first_with_sibling_counts(tree: TurnTree) -> None:
    conversation = tree.create_conversation(project_id="p", title="t")
    greeting = tree.add_message(conversation.id, parent_id=None, role="assistant", content="Hi")
    tree.add_message(conversation.id, parent_id=None, role="assistant", content="Hello")
    question = tree.add_message(conversation.id, parent_id=greeting.id, role="user", content="?")
    first = tree.add_message(
        conversation.id,
        parent_id=question.id,
        role="assistant",
        content="a",
        extra={"model": "m"},
    )
    tree.add_message(conversation.id, parent_id=question.id, role="assistant", content="b")
    tree.add_message(conversation.id, parent_id=question.id, role="assistant", content="c")
    tree.set_pointer(conversation.id, first.id)
    rows = json.loads(tree.path_json(first.id))
    assert [r["id"] for r in rows] == [m.id for m in tree.path(first.id)]
    assert [r["sibling_count"] for r in rows] == [2, 1, 3]
    assert rows[-1]["extra"] == {"model": "m"}
    assert {k: rows[-1][k] for k in Message.model_fields} == tree.path(first.id)[-1].model_dump(
        mode="json"
    )


def test_a_replys_turn_record_is_kept_apart_and_goes_with_the_message(tree: TurnTree) -> None:
    conversation = tree.create_conversation(project_id="p", title="t")
    reply = tree.add_message(conversation.id, parent_id=None, role="assistant", content="")
    assert tree.turn_record(reply.id) == TurnRecord()
    tree.update_message(reply.id, content="Hel", raw="<thought>x</thought>Hel")
    tree.update_message(reply.id, content="Hello", prompt={"blocks": [{"id": "main"}]})
    record = tree.turn_record(reply.id)
    assert record.raw == "<thought>x</thought>Hel"
    assert record.prompt == {"blocks": [{"id": "main"}]}
    assert "prompt" not in tree.message(reply.id).extra
    tree.delete_message(reply.id)
    with pytest.raises(NotFound):
        tree.turn_record(reply.id)
