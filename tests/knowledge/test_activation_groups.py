"""Inclusion groups and probability: one winner per group, seeded draws."""

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
from storyloom.knowledge.inclusion_groups import GroupMember, filter_by_inclusion_groups
from storyloom.knowledge.knowledge_base import KnowledgeBase


def entry(entry_id: str, text: str = "", priority: int = 100, **criteria: Any) -> CAIU:
    return CAIU(
        id=entry_id,
        displayName=entry_id,
        content=Content(value=text or f"about {entry_id}"),
        activation_criteria=ActivationCriteria(**criteria),
        usage_metadata=UsageMetadata(priority=priority),
    )


def engine_for(entries: list[CAIU], settings: ActivationSettings | None = None) -> ActivationEngine:
    return ActivationEngine(
        [KnowledgeBase(kb_id="kb", entries=entries)],
        settings or ActivationSettings(),
        count_tokens=lambda text: len(text.split()),
    )


def scan(engine: ActivationEngine, message: str, seed: int | str = 0) -> ActivationResult:
    return engine.activate(ActivationRequest(messages=[ScanMessage("User", message)], seed=seed))


def active(result: ActivationResult) -> set[str]:
    return {item.entry_id for item in result.activated}


def test_inclusion_group_keeps_one_member_drawn_by_weight_with_the_seed() -> None:
    engine = engine_for(
        [
            entry("rain", keywords=["sky"], inclusion_groups=["weather"], group_weight=1),
            entry("sun", keywords=["sky"], inclusion_groups=["weather"], group_weight=1000),
        ]
    )
    winners = [active(scan(engine, "the sky", seed)) for seed in range(60)]
    assert all(len(w) == 1 for w in winners)
    assert sum(w == {"sun"} for w in winners) >= 55
    assert winners == [active(scan(engine, "the sky", seed)) for seed in range(60)]
    result = scan(engine, "the sky", 0)
    loser = result.dropped[0]
    assert loser.reasons[-1].rule == "inclusion_group"
    assert "lost group 'weather'" in loser.reasons[-1].detail
    assert any(r.rule == "inclusion_group" for r in result.activated[0].reasons)


def test_inclusion_group_with_equal_weights_lets_either_win_across_seeds() -> None:
    engine = engine_for(
        [
            entry("rain", keywords=["sky"], inclusion_groups=["weather"]),
            entry("sun", keywords=["sky"], inclusion_groups=["weather"]),
        ]
    )
    winners = {frozenset(active(scan(engine, "sky", seed))) for seed in range(40)}
    assert winners == {frozenset({"rain"}), frozenset({"sun"})}


def test_group_override_wins_by_priority_whatever_the_seed() -> None:
    engine = engine_for(
        [
            entry("a", keywords=["sky"], inclusion_groups=["w"], group_weight=1000),
            entry("b", keywords=["sky"], inclusion_groups=["w"], group_override=True),
            entry("c", priority=300, keywords=["sky"], inclusion_groups=["w"], group_override=True),
        ]
    )
    assert all(active(scan(engine, "sky", seed)) == {"c"} for seed in range(20))


def test_group_scoring_keeps_the_members_with_most_matched_keys() -> None:
    entries = [
        entry("plain", keywords=["sky"], inclusion_groups=["w"]),
        entry("blue", keywords=["sky", "blue"], inclusion_groups=["w"]),
    ]
    scoring = engine_for(entries, ActivationSettings(use_group_scoring=True))
    assert all(active(scan(scoring, "blue sky", seed)) == {"blue"} for seed in range(20))
    result = scan(scoring, "blue sky")
    assert "scored 1" in result.dropped[0].reasons[-1].detail
    per_entry = [
        entry("plain", keywords=["sky"], inclusion_groups=["w"], use_group_scoring=True),
        entry("blue", keywords=["sky", "blue"], inclusion_groups=["w"]),
    ]
    assert all(
        active(scan(engine_for(per_entry), "blue sky", seed)) == {"blue"} for seed in range(20)
    )


def test_group_filled_in_an_earlier_step_drops_later_members() -> None:
    engine = engine_for(
        [
            entry("first", "the sea is calm", keywords=["sky"], inclusion_groups=["w"]),
            entry("second", keywords=["sea"], inclusion_groups=["w"]),
        ]
    )
    result = scan(engine, "the sky")
    assert active(result) == {"first"}
    assert "already filled by first" in result.dropped[0].reasons[-1].detail


def test_sticky_member_keeps_its_group() -> None:
    members = [
        GroupMember(1, "one", ("g",), weight=1000),
        GroupMember(2, "two", ("g",), sticky=True),
    ]
    outcome = filter_by_inclusion_groups(
        members, {}, use_group_scoring=False, score=lambda ref: 0, roll=lambda group: 0.0
    )
    assert list(outcome.losers) == [1]
    assert "sticky member two" in outcome.losers[1].detail


def test_probability_is_reproducible_for_a_seed() -> None:
    engine = engine_for([entry("maybe", keywords=["sky"], trigger_probability=0.5)])
    first = [active(scan(engine, "sky", seed)) for seed in range(50)]
    assert first == [active(scan(engine, "sky", seed)) for seed in range(50)]


def test_probability_differs_across_seeds_and_says_why() -> None:
    engine = engine_for([entry("maybe", keywords=["sky"], trigger_probability=0.5)])
    outcomes = [active(scan(engine, "sky", f"chat-{seed}")) for seed in range(50)]
    assert {"maybe"} in outcomes and set() in outcomes
    failed = next(scan(engine, "sky", f"chat-{s}") for s in range(50) if not outcomes[s])
    assert failed.dropped[0].reasons[-1].rule == "probability"
    passed = next(scan(engine, "sky", f"chat-{s}") for s in range(50) if outcomes[s])
    assert any(r.rule == "probability" and r.outcome == "kept" for r in passed.activated[0].reasons)


def test_probability_zero_never_activates() -> None:
    engine = engine_for([entry("never", keywords=["sky"], trigger_probability=0)])
    assert all(active(scan(engine, "sky", seed)) == set() for seed in range(20))
