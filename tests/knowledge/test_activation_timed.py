"""Timed effects: sticky, cooldown, delay, once per session; state in, state out."""

from __future__ import annotations

from typing import Any

from storyloom.knowledge.activation import (
    ActivationEngine,
    ActivationRequest,
    ActivationResult,
    ScanMessage,
)
from storyloom.knowledge.activation_settings import ActivationSettings
from storyloom.knowledge.caiu import CAIU, ActivationCriteria, Content, UsageMetadata
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.timed_effects import TimedEffectsState


def engine_with(**criteria: Any) -> ActivationEngine:
    once = criteria.pop("once_per_session", False)
    dragon = CAIU(
        id="dragon",
        displayName="Dragon",
        content=Content(value="The dragon."),
        activation_criteria=ActivationCriteria(keywords=["dragon"], **criteria),
        usage_metadata=UsageMetadata(once_per_session=once),
    )
    return ActivationEngine(
        [KnowledgeBase(kb_id="kb", entries=[dragon])],
        ActivationSettings(scan_depth=1),
        count_tokens=lambda text: len(text.split()),
    )


def turn(
    engine: ActivationEngine, chat_length: int, message: str, state: TimedEffectsState
) -> ActivationResult:
    return engine.activate(
        ActivationRequest(
            messages=[ScanMessage("User", message)], chat_length=chat_length, timed_state=state
        )
    )


def on(result: ActivationResult) -> bool:
    return any(item.entry_id == "dragon" for item in result.activated)


def dropped_rule(result: ActivationResult) -> str:
    return result.dropped[0].reasons[-1].rule if result.dropped else ""


def test_sticky_keeps_the_entry_active_for_n_messages() -> None:
    engine = engine_with(sticky=3)
    first = turn(engine, 10, "a dragon", TimedEffectsState())
    assert on(first)
    effect = first.timed_state.sticky["kb"]["dragon"]
    assert (effect.start, effect.end) == (10, 13)
    state = first.timed_state
    for length in (11, 12):
        result = turn(engine, length, "nothing here", state)
        assert on(result)
        assert result.activated[0].reasons[0].rule == "sticky"
        state = result.timed_state
    assert not on(turn(engine, 13, "nothing here", state))


def test_sticky_entry_skips_its_probability_roll() -> None:
    engine = engine_with(sticky=5, trigger_probability=0.5)
    seed = next(
        s
        for s in range(100)
        if on(
            engine.activate(
                ActivationRequest(messages=[ScanMessage("U", "a dragon")], chat_length=1, seed=s)
            )
        )
    )
    start = engine.activate(
        ActivationRequest(messages=[ScanMessage("U", "a dragon")], chat_length=1, seed=seed)
    )
    for later in range(2, 6):
        for s in range(10):
            result = engine.activate(
                ActivationRequest(
                    messages=[ScanMessage("U", "quiet")],
                    chat_length=later,
                    seed=s,
                    timed_state=start.timed_state,
                )
            )
            assert on(result)


def test_cooldown_blocks_the_entry_after_it_was_active() -> None:
    engine = engine_with(cooldown=2)
    first = turn(engine, 5, "a dragon", TimedEffectsState())
    assert on(first)
    blocked = turn(engine, 6, "a dragon again", first.timed_state)
    assert not on(blocked)
    assert dropped_rule(blocked) == "cooldown"
    assert on(turn(engine, 7, "a dragon again", blocked.timed_state))


def test_cooldown_starts_when_sticky_ends() -> None:
    engine = engine_with(sticky=2, cooldown=2)
    state = turn(engine, 1, "a dragon", TimedEffectsState()).timed_state
    second = turn(engine, 2, "a dragon", state)
    assert on(second) and second.activated[0].reasons[0].rule == "sticky"
    third = turn(engine, 3, "a dragon", second.timed_state)
    assert not on(third) and dropped_rule(third) == "cooldown"
    fourth = turn(engine, 4, "a dragon", third.timed_state)
    assert not on(fourth)
    assert on(turn(engine, 5, "a dragon", fourth.timed_state))


def test_delay_blocks_the_entry_until_the_chat_is_long_enough() -> None:
    engine = engine_with(delay=4)
    early = turn(engine, 3, "a dragon", TimedEffectsState())
    assert not on(early)
    assert dropped_rule(early) == "delay"
    assert on(turn(engine, 4, "a dragon", TimedEffectsState()))


def test_once_per_session_activates_only_once_per_chat() -> None:
    engine = engine_with(once_per_session=True)
    first = turn(engine, 2, "a dragon", TimedEffectsState())
    assert on(first)
    later = turn(engine, 3, "a dragon", first.timed_state)
    assert not on(later)
    assert dropped_rule(later) == "once_per_session"
    assert not on(turn(engine, 9, "a dragon", later.timed_state))


def test_redoing_a_turn_does_not_count_as_the_next_turn() -> None:
    engine = engine_with(once_per_session=True, cooldown=3)
    first = turn(engine, 2, "a dragon", TimedEffectsState())
    swipe = turn(engine, 2, "a dragon", first.timed_state)
    assert on(swipe)


def test_timed_state_follows_branches() -> None:
    engine = engine_with(sticky=3, cooldown=4)
    root = turn(engine, 1, "a dragon", TimedEffectsState())
    before = root.timed_state.model_dump()
    branch_a = turn(engine, 2, "quiet", root.timed_state)
    branch_b = turn(engine, 2, "quiet", root.timed_state)
    assert root.timed_state.model_dump() == before
    assert on(branch_a) and on(branch_b)
    assert branch_a.timed_state == branch_b.timed_state
    continued = turn(engine, 3, "quiet", branch_a.timed_state)
    other = turn(engine, 3, "quiet", branch_b.timed_state)
    assert continued.timed_state == other.timed_state
    fresh = turn(engine, 2, "quiet", TimedEffectsState())
    assert not on(fresh)


def test_timed_state_is_json() -> None:
    engine = engine_with(sticky=2, cooldown=1, once_per_session=True)
    state = turn(engine, 1, "a dragon", TimedEffectsState()).timed_state
    restored = TimedEffectsState.model_validate_json(state.model_dump_json())
    assert restored == state
    assert on(turn(engine, 2, "quiet", restored))


def test_effects_of_unknown_entries_are_kept_until_they_end() -> None:
    engine = engine_with()
    state = TimedEffectsState.model_validate(
        {"sticky": {"other_kb": {"x": {"start": 1, "end": 5}}}}
    )
    kept = turn(engine, 3, "quiet", state).timed_state
    assert kept.sticky == state.sticky
    assert turn(engine, 5, "quiet", kept).timed_state.sticky == {}
