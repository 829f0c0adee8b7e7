"""Who speaks next in a group chat: natural, list and manual order, as SillyTavern."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storyloom.chat.service.group_order import (
    TurnContext,
    activation_order,
    list_order,
    mentioned,
    natural_order,
    next_speaker,
)
from storyloom.chat.store.group import GroupMember, GroupSettings
from storyloom.core.errors import InvalidInput

NAMES = {"sera": "Seraphina", "kai": "Kai Storm", "mei": "Mei", "li": "李白"}
SILENT = dict.fromkeys(NAMES, 0.0)


def group(*ids: str, muted: tuple[str, ...] = (), **kwargs: object) -> GroupSettings:
    members = [GroupMember(character_id=i, muted=i in muted) for i in ids]
    return GroupSettings.model_validate({"members": members, **kwargs})


def test_mentioned_members_come_in_the_order_they_are_named() -> None:
    text = "Mei, ask kai what Seraphina said."
    assert mentioned(text, NAMES) == ["mei", "kai", "sera"]


def test_a_name_in_text_without_spaces_is_found() -> None:
    assert mentioned("我看见李白在喝酒", NAMES) == ["li"]


def test_a_shared_name_word_names_only_the_first_member() -> None:
    names = {"a": "John Smith", "b": "John Doe"}
    assert mentioned("john, come here", names) == ["a"]


def test_natural_order_puts_the_mentioned_member_first() -> None:
    context = TurnContext(text="What do you think, Mei?", last_speaker="sera")
    order = natural_order(["sera", "kai", "mei"], NAMES, SILENT, context, random.Random(1))
    assert order == ["mei"]


def test_the_last_speaker_does_not_answer_themself_unless_allowed() -> None:
    context = TurnContext(text="Seraphina smiles.", last_speaker="sera")
    members = ["sera", "kai"]
    chatty = {"sera": 1.0, "kai": 0.0}
    banned = natural_order(members, NAMES, chatty, context, random.Random(3))
    assert "sera" not in banned and banned == ["kai"]
    allowed = natural_order(
        members, NAMES, chatty, context, random.Random(3), allow_self_responses=True
    )
    assert allowed[0] == "sera"


def test_a_users_message_bans_nobody() -> None:
    context = TurnContext(text="Hello Seraphina", user_input=True, last_speaker=None)
    assert natural_order(["sera", "kai"], NAMES, SILENT, context, random.Random(0))[0] == "sera"


def test_talkative_members_join_after_the_mentioned_ones() -> None:
    context = TurnContext(text="Kai?", user_input=True)
    chance = {"sera": 1.0, "kai": 0.0, "mei": 1.0}
    order = natural_order(["sera", "kai", "mei"], NAMES, chance, context, random.Random(5))
    assert order[0] == "kai"
    assert set(order) == {"kai", "sera", "mei"}


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    chances=st.lists(st.floats(0, 1), min_size=3, max_size=3),
    last=st.sampled_from([None, "sera", "kai", "mei"]),
)
def test_natural_order_always_picks_someone_and_never_the_banned_speaker(
    seed: int, chances: list[float], last: str | None
) -> None:
    members = ["sera", "kai", "mei"]
    context = TurnContext(text="the wind blows", last_speaker=last)
    order = natural_order(
        members, NAMES, dict(zip(members, chances, strict=True)), context, random.Random(seed)
    )
    assert order, "someone always answers"
    assert last not in order
    assert len(order) == len(set(order))
    # The same seed is the same pick: a turn is reproducible.
    again = natural_order(
        members, NAMES, dict(zip(members, chances, strict=True)), context, random.Random(seed)
    )
    assert again == order


def test_list_order_goes_round_the_members_after_the_users_message() -> None:
    members = ["sera", "kai", "mei"]
    assert list_order(members, TurnContext(user_input=True))[0] == "sera"
    after_one = TurnContext(last_speaker="sera", spoken_since_user=("sera",))
    assert list_order(members, after_one)[0] == "kai"
    all_spoke = TurnContext(last_speaker="mei", spoken_since_user=("sera", "kai", "mei"))
    assert list_order(members, all_spoke)[0] == "sera"


def test_muted_members_are_never_picked_by_an_order() -> None:
    muted = group("sera", "kai", "mei", muted=("kai",))
    context = TurnContext(text="Kai, say something", user_input=True)
    for seed in range(30):
        order = activation_order(
            muted, NAMES, dict.fromkeys(NAMES, 1.0), context, random.Random(seed)
        )
        assert "kai" not in order


def test_a_muted_member_picked_by_name_speaks() -> None:
    muted = group("sera", "kai", muted=("kai",))
    picked = next_speaker(muted, NAMES, SILENT, TurnContext(), random.Random(0), requested="kai")
    assert picked == "kai"


def test_manual_order_waits_for_the_users_pick_after_their_message() -> None:
    manual = group("sera", "kai", activation_strategy="manual")
    context = TurnContext(text="Hi all", user_input=True)
    assert next_speaker(manual, NAMES, SILENT, context, random.Random(0)) is None
    asked = next_speaker(manual, NAMES, SILENT, TurnContext(text="Hi"), random.Random(0))
    assert asked in {"sera", "kai"}


def test_everyone_muted_means_nobody_answers() -> None:
    silent = group("sera", "kai", muted=("sera", "kai"))
    assert next_speaker(silent, NAMES, SILENT, TurnContext(), random.Random(0)) is None


def test_a_pick_outside_the_group_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidInput) as caught:
        next_speaker(
            group("sera", "kai"), NAMES, SILENT, TurnContext(), random.Random(0), requested="x"
        )
    assert caught.value.problems[0].field == "speaker"
