"""The state chain: keyframes and deltas reconstruct the state at every message exactly."""

from __future__ import annotations

import json
import random
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storyloom.chat.store.conversation import Conversation, ConversationSettings
from storyloom.chat.store.message import Message
from storyloom.chat.store.state import ChatState, PlotState
from storyloom.chat.store.state_chain import StateChain, state_delta
from storyloom.chat.store.turn_tree import NewMessage, TurnTree
from storyloom.core.errors import NotFound
from storyloom.knowledge.timed_effects import TimedEffect, TimedEffectsState
from storyloom.store.database import Database


def new_chat(tree: TurnTree, keyframe_every: int = 32) -> Conversation:
    settings = ConversationSettings(keyframe_every=keyframe_every)
    return tree.create_conversation(project_id="p", title="t", settings=settings)


def world(turn: int, *, hp: int, items: list[str], plot_index: int | None = None) -> ChatState:
    """A state touching every part: variables, timed effects and the plot."""
    return ChatState(
        variables={"turn": turn, "hero": {"hp": hp, "items": items}, "名字": "林"},
        timed_effects=TimedEffectsState(
            sticky={"kb": {f"e{turn % 3}": TimedEffect(start=turn, end=turn + 2)}},
            cooldown={"kb": {"c": TimedEffect(start=turn, end=turn + 5, protected=True)}}
            if turn % 2
            else {},
            once_per_session={"kb": {"intro": 1}} if turn > 2 else {},
        ),
        plot=None
        if plot_index is None
        else PlotState(current_plot_index=plot_index, no_update_count=turn % 4),
    )


def random_state(rnd: random.Random, parent: ChatState) -> ChatState:
    """A random change of ``parent``: added, changed and removed keys, lists, effects, plot."""
    data = parent.as_json()
    variables: dict[str, Any] = data["variables"]
    for _ in range(rnd.randrange(4)):
        key = rnd.choice(["a", "b", "c", "list", "nested", "x/y", "t~0", "ü"])
        action = rnd.random()
        if action < 0.2:
            variables.pop(key, None)
        elif action < 0.4:
            items = variables.get("list")
            items = items if isinstance(items, list) else []
            if items and rnd.random() < 0.5:
                items.pop(rnd.randrange(len(items)))
            else:
                items.insert(rnd.randrange(len(items) + 1), rnd.randrange(5))
            variables["list"] = items
        elif action < 0.6:
            variables["nested"] = {"k": rnd.randrange(3), "deep": {"v": [rnd.random()]}}
        else:
            variables[key] = rnd.choice([rnd.randrange(100), "text", None, True, 1.5, [1, 2]])
    if rnd.random() < 0.3:
        entry = f"e{rnd.randrange(3)}"
        start = rnd.randrange(50)
        data["timed_effects"]["sticky"] = {"kb": {entry: {"start": start, "end": start + 3}}}
    if rnd.random() < 0.2:
        data["timed_effects"]["once_per_session"] = {"kb": {"x": rnd.randrange(9)}}
    if rnd.random() < 0.15:
        data["plot"] = (
            None
            if rnd.random() < 0.3
            else {"current_plot_index": rnd.randrange(1, 5), "no_update_count": rnd.randrange(4)}
        )
    return ChatState.from_json(data)


@settings(max_examples=5, deadline=None)
@given(rnd=st.randoms(use_true_random=False), keyframe_every=st.integers(1, 32))
def test_state_at_every_message_equals_the_state_written(
    tmp_path_factory: pytest.TempPathFactory, rnd: random.Random, keyframe_every: int
) -> None:
    """Random trees with branches, swipes, edits, time travel and unchanged turns."""
    db = Database(tmp_path_factory.mktemp("chain") / "chat.sqlite3")
    try:
        check_states_of_random_tree(db, rnd, keyframe_every)
    finally:
        db.close()


def check_states_of_random_tree(db: Database, rnd: random.Random, keyframe_every: int) -> None:
    tree = TurnTree(db)
    chat = new_chat(tree, keyframe_every)
    written: dict[str, ChatState] = {}
    messages: list[Message] = []
    for step in range(160):
        action = rnd.random()
        if messages and action < 0.1:
            original = rnd.choice(messages)
            edited = tree.edit_message(original.id, f"edit {step}")
            written[edited.id] = written[original.id]
            messages.append(edited)
            continue
        if messages and action < 0.15:
            target = rnd.choice(messages)
            new_state = random_state(rnd, written[target.id])
            tree.update_message(target.id, state=new_state, bump_version=True)
            written[target.id] = new_state
            continue
        if messages and action < 0.25:
            tree.set_pointer(chat.id, rnd.choice(messages).id)
        pointer = tree.conversation(chat.id).pointer
        parent_id: str | None = pointer
        if messages and action < 0.35:
            parent_id = rnd.choice([*(m.id for m in messages), None])
        parent_state = ChatState() if parent_id is None else written[parent_id]
        state = None if rnd.random() < 0.3 else random_state(rnd, parent_state)
        message = tree.add_message(
            chat.id, parent_id=parent_id, role="user", content=f"m{step}", state=state
        )
        written[message.id] = parent_state if state is None else state
        messages.append(message)

    for message in messages:
        assert tree.state_at(message.id) == written[message.id], message.id
    # A fresh tree has an empty cache: everything is rebuilt from the rows.
    fresh = TurnTree(db)
    shuffled = list(messages)
    rnd.shuffle(shuffled)
    for message in shuffled:
        assert fresh.state_at(message.id) == written[message.id], message.id
        assert fresh.state_at(message.id).as_json() == written[message.id].as_json()
    # The deltas agree with the states.
    for message in messages:
        before = (
            ChatState() if message.parent_id is None else written[message.parent_id]
        ).as_json()
        after = jsonpatch.apply_patch(before, fresh.delta_of(message.id))
        assert after == written[message.id].as_json()


def test_keyframes_sit_at_multiples_of_the_interval_and_deltas_between(
    tree: TurnTree, db: Database
) -> None:
    chat = new_chat(tree, keyframe_every=4)
    parent: str | None = None
    for turn in range(10):
        parent = tree.add_message(
            chat.id,
            parent_id=parent,
            role="user",
            content=str(turn),
            state=world(turn, hp=10 - turn, items=["sword"] * (turn % 3)),
        ).id
    rows = (
        db.connection()
        .execute(
            "SELECT m.depth, s.kind FROM chat_state AS s JOIN chat_message AS m "
            "ON m.id = s.message_id ORDER BY m.depth"
        )
        .fetchall()
    )
    assert rows == [(d, "keyframe" if d % 4 == 0 else "delta") for d in range(10)]


def test_time_travel_restores_the_state_exactly_on_two_branches(
    tree: TurnTree, db: Database
) -> None:
    chat = new_chat(tree, keyframe_every=3)
    expected: dict[str, ChatState] = {}
    trunk: list[Message] = []
    parent: Message | None = None
    for turn in range(7):
        state = world(turn, hp=20 - turn, items=["rope"] * turn, plot_index=1 + turn // 3)
        parent = tree.add_message(
            chat.id,
            parent_id=None if parent is None else parent.id,
            role="user" if turn % 2 == 0 else "assistant",
            content=f"trunk {turn}",
            state=state,
        )
        expected[parent.id] = state
        trunk.append(parent)
    # A branch from turn 2 goes another way: the hero loses everything.
    tree.set_pointer(chat.id, trunk[2].id)
    branch: list[Message] = []
    parent = trunk[2]
    for turn in range(3, 9):
        state = world(100 + turn, hp=1, items=[], plot_index=4)
        parent = tree.add_message(
            chat.id, parent_id=parent.id, role="user", content=f"branch {turn}", state=state
        )
        expected[parent.id] = state
        branch.append(parent)

    for message in [*trunk, *branch, *reversed(trunk), *reversed(branch)]:
        conversation = tree.set_pointer(chat.id, message.id)
        assert conversation.pointer == message.id
        state = tree.state_at(conversation.pointer)
        assert state == expected[message.id]
        assert state.variables == expected[message.id].variables
        assert state.timed_effects == expected[message.id].timed_effects
        assert state.plot == expected[message.id].plot
    fresh = TurnTree(db)  # a second reader, with a cold cache
    for message in [*branch, *trunk]:
        assert fresh.state_at(message.id) == expected[message.id]


def test_a_turn_after_time_travel_starts_from_the_old_state(tree: TurnTree) -> None:
    chat = new_chat(tree, keyframe_every=2)
    states = [world(t, hp=10 - t, items=["coin"] * t) for t in range(5)]
    parent: str | None = None
    ids = []
    for turn, state in enumerate(states):
        parent = tree.add_message(
            chat.id, parent_id=parent, role="user", content=str(turn), state=state
        ).id
        ids.append(parent)
    tree.set_pointer(chat.id, ids[1])
    pointer = tree.conversation(chat.id).pointer
    assert pointer == ids[1]
    # A turn that changes nothing has the state of the turn it continues from, not the
    # state of the future the user left.
    unchanged = tree.add_message(chat.id, parent_id=pointer, role="assistant", content="same")
    assert tree.state_at(unchanged.id) == states[1]
    assert tree.delta_of(unchanged.id) == []
    changed_state = states[1].model_copy(update={"variables": {"turn": 1, "new": True}})
    changed = tree.add_message(
        chat.id, parent_id=unchanged.id, role="user", content="x", state=changed_state
    )
    assert tree.state_at(changed.id) == changed_state
    assert tree.state_at(ids[4]) == states[4]
    ops = tree.delta_of(changed.id)
    assert jsonpatch.apply_patch(states[1].as_json(), ops) == changed_state.as_json()


def test_a_swipe_has_its_own_state_and_swiping_back_restores_the_other(tree: TurnTree) -> None:
    chat = new_chat(tree)
    question = tree.add_message(chat.id, parent_id=None, role="user", content="open the chest")
    gold = tree.add_message(
        chat.id,
        parent_id=question.id,
        role="assistant",
        content="gold!",
        state=ChatState(variables={"gold": 100}),
    )
    trap = tree.add_message(
        chat.id,
        parent_id=question.id,
        role="assistant",
        content="a trap!",
        state=ChatState(variables={"hp": -5}),
    )
    assert tree.state_at(tree.conversation(chat.id).pointer).variables == {"hp": -5}
    tree.swipe(trap.id, 0)
    assert tree.state_at(tree.conversation(chat.id).pointer).variables == {"gold": 100}
    assert tree.state_at(gold.id) != tree.state_at(trap.id)


def test_an_edit_keeps_the_state_of_the_original(tree: TurnTree, db: Database) -> None:
    chat = new_chat(tree, keyframe_every=3)
    parent: str | None = None
    for turn in range(5):
        parent = tree.add_message(
            chat.id,
            parent_id=parent,
            role="user",
            content=str(turn),
            state=world(turn, hp=turn, items=[]),
        ).id
    assert parent is not None
    for message in tree.active_path(chat.id):
        edited = tree.edit_message(message.id, "edited")
        assert tree.state_at(edited.id) == tree.state_at(message.id)
        expected = world(message.depth, hp=message.depth, items=[])
        assert TurnTree(db).state_at(edited.id) == expected


def test_finalising_a_reply_with_a_state_keeps_its_childrens_states(
    tree: TurnTree, db: Database
) -> None:
    chat = new_chat(tree, keyframe_every=32)
    root = tree.add_message(
        chat.id, parent_id=None, role="user", content="u", state=ChatState(variables={"a": 1})
    )
    reply = tree.add_message(
        chat.id, parent_id=root.id, role="assistant", content="", status="streaming"
    )
    assert tree.state_at(reply.id) == ChatState(variables={"a": 1})
    child_state = ChatState(variables={"a": 1, "child": True})
    child = tree.add_message(
        chat.id, parent_id=reply.id, role="user", content="c", state=child_state
    )
    grandchild = tree.add_message(chat.id, parent_id=child.id, role="assistant", content="g")

    final_state = ChatState(variables={"a": 2, "b": [1, 2]})
    tree.update_message(
        reply.id, content="done", status="complete", state=final_state, bump_version=True
    )
    for reader in (tree, TurnTree(db)):
        assert reader.state_at(reply.id) == final_state
        assert reader.state_at(child.id) == child_state
        assert reader.state_at(grandchild.id) == child_state
        assert reader.state_at(root.id) == ChatState(variables={"a": 1})


def test_bulk_added_messages_keep_their_states(tree: TurnTree, db: Database) -> None:
    chat = new_chat(tree, keyframe_every=8)
    rnd = random.Random(7)
    rows: list[NewMessage] = []
    expected: dict[str, ChatState] = {}
    parent: str | None = None
    state = ChatState()
    for i in range(200):
        swipes = [f"s{i}.{k}" for k in range(2)] if i % 2 else []
        for swipe in swipes:
            swipe_state = random_state(rnd, state)
            rows.append(
                NewMessage(
                    message_id=swipe,
                    parent_id=parent,
                    role="assistant",
                    content=swipe,
                    state=swipe_state,
                )
            )
            expected[swipe] = swipe_state
        if rnd.random() < 0.6:
            state = random_state(rnd, state)
            given: ChatState | None = state
        else:
            given = None
        rows.append(
            NewMessage(
                message_id=f"m{i}",
                parent_id=parent,
                role="user" if i % 2 == 0 else "assistant",
                content=f"m{i}",
                state=given,
            )
        )
        expected[f"m{i}"] = state
        parent = f"m{i}"
    tree.add_messages(chat.id, rows)
    fresh = TurnTree(db)
    for message_id, state in expected.items():
        assert fresh.state_at(message_id) == state, message_id


def test_the_returned_state_is_a_copy(tree: TurnTree) -> None:
    chat = new_chat(tree)
    message = tree.add_message(
        chat.id,
        parent_id=None,
        role="user",
        content="x",
        state=ChatState(variables={"bag": ["apple"]}),
    )
    state = tree.state_at(message.id)
    state.variables["bag"].append("stolen")
    assert tree.state_at(message.id).variables == {"bag": ["apple"]}


def test_state_before_the_first_message_is_empty_and_unknown_ids_are_not_found(
    tree: TurnTree,
) -> None:
    assert tree.state_at(None) == ChatState()
    with pytest.raises(NotFound, match="message nope not found"):
        tree.state_at("nope")
    with pytest.raises(NotFound):
        tree.delta_of("nope")


def test_delta_of_a_keyframe_is_the_change_from_the_parent(tree: TurnTree) -> None:
    chat = new_chat(tree, keyframe_every=1)
    first = tree.add_message(
        chat.id, parent_id=None, role="user", content="a", state=ChatState(variables={"x": 1})
    )
    second = tree.add_message(
        chat.id,
        parent_id=first.id,
        role="user",
        content="b",
        state=ChatState(variables={"x": 2}),
    )
    assert tree.delta_of(second.id) == [{"op": "replace", "path": "/variables/x", "value": 2}]
    assert tree.delta_of(first.id) == [{"op": "add", "path": "/variables/x", "value": 1}]


def test_a_state_chain_without_a_cache_reads_what_another_wrote(
    tree: TurnTree, db: Database
) -> None:
    chat = new_chat(tree, keyframe_every=3)
    parent: str | None = None
    expected = {}
    for turn in range(8):
        state = world(turn, hp=turn, items=["x"] * turn)
        parent = tree.add_message(
            chat.id, parent_id=parent, role="user", content=str(turn), state=state
        ).id
        expected[parent] = state
    chain = StateChain(db, cache_size=0)
    for message_id, state in expected.items():
        assert chain.state_at(message_id) == state
    # write() stores a state computed elsewhere for a message (here: the last one again).
    last = tree.message(str(parent))
    previous = expected[str(last.parent_id)]
    replaced = ChatState(variables={"rewritten": True})
    with db.transaction() as conn:
        chain.write(conn, last, previous, replaced, keyframe_every=3)
    assert chain.state_at(last.id) == replaced
    assert (
        chain.delta_of(last.id)
        == jsonpatch.make_patch(previous.as_json(), replaced.as_json()).patch
    )
    with pytest.raises(KeyError):
        chain.state_at("missing")


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ({"a": 1}, {"a": True}),
        ({"a": [1, 2]}, {"a": [True, 2]}),
        ({"a": 1}, {"a": 1.0}),
        ({"a/b": {"c~d": 1}}, {"a/b": {"c~d": 2}}),
        ({"x": {"y": 1}}, {"x": [1]}),
        ({"gone": 1, "kept": {"n": [1, {"m": 2}]}}, {"kept": {"n": [1, {"m": 3}]}, "new": None}),
    ],
)
def test_a_delta_reproduces_json_values_exactly(before: Any, after: Any) -> None:
    ops = state_delta(before, after)
    result = jsonpatch.apply_patch(before, ops)
    assert json.dumps(result, sort_keys=True) == json.dumps(after, sort_keys=True)
    assert state_delta(after, after) == []


# JSON as a state holds it; ``+ 0.0`` folds -0.0 into 0.0, which JSON Patch cannot tell apart.
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False).map(lambda x: x + 0.0)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)
JSON_OBJECTS = st.dictionaries(st.text(max_size=4), JSON_VALUES, max_size=5)


@settings(max_examples=50, deadline=None)
@given(before=JSON_OBJECTS, after=JSON_OBJECTS)
def test_a_delta_turns_any_state_into_any_other_and_the_reverse_delta_undoes_it(
    before: dict[str, Any], after: dict[str, Any]
) -> None:
    forward = jsonpatch.apply_patch(before, state_delta(before, after))
    assert json.dumps(forward, sort_keys=True) == json.dumps(after, sort_keys=True)
    back = jsonpatch.apply_patch(forward, state_delta(after, before))
    assert json.dumps(back, sort_keys=True) == json.dumps(before, sort_keys=True)
    assert state_delta(before, before) == []
