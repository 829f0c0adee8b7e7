"""Recursion: entries activated by other entries' text, and the limits on it."""

from __future__ import annotations

from typing import Any

from storyloom.knowledge.activation import (
    ActivationEngine,
    ActivationRequest,
    ActivationResult,
    ScanMessage,
)
from storyloom.knowledge.activation_settings import ActivationSettings
from storyloom.knowledge.caiu import CAIU, ActivationCriteria, Content
from storyloom.knowledge.knowledge_base import KnowledgeBase


def entry(entry_id: str, text: str, **criteria: Any) -> CAIU:
    return CAIU(
        id=entry_id,
        displayName=entry_id,
        content=Content(value=text),
        activation_criteria=ActivationCriteria(**criteria),
    )


def scan(
    entries: list[CAIU], messages: list[str], settings: ActivationSettings | None = None
) -> ActivationResult:
    engine = ActivationEngine(
        [KnowledgeBase(kb_id="kb", entries=entries)],
        settings or ActivationSettings(),
        count_tokens=lambda text: len(text.split()),
    )
    chat = [ScanMessage("User", m) for m in messages]
    return engine.activate(ActivationRequest(messages=chat))


def levels(result: ActivationResult) -> dict[str, int]:
    return {item.entry_id: item.recursion_level for item in result.activated}


def chain(**b_criteria: Any) -> list[CAIU]:
    return [
        entry("dragon", "The dragon sleeps in the ember cave.", keywords=["dragon"]),
        entry("cave", "The cave hides the iron crown.", keywords=["ember cave"], **b_criteria),
        entry("crown", "The crown is cursed.", keywords=["iron crown"]),
    ]


def test_recursion_activates_cascaded_entries() -> None:
    result = scan(chain(), ["I fear the dragon."])
    assert levels(result) == {"dragon": 0, "cave": 1, "crown": 2}
    crown = next(item for item in result.activated if item.entry_id == "crown")
    assert "text of entry cave" in crown.reasons[0].detail
    assert crown.reasons[-1].rule == "recursion"
    assert result.recursion_steps == 4


def test_recursion_off_scans_the_chat_only() -> None:
    result = scan(chain(), ["I fear the dragon."], ActivationSettings(recursive=False))
    assert levels(result) == {"dragon": 0}


def test_exclude_recursion_entry_is_not_activated_by_other_entries() -> None:
    result = scan(chain(exclude_recursion=True), ["I fear the dragon."])
    assert levels(result) == {"dragon": 0}
    result = scan(chain(exclude_recursion=True), ["The dragon of the ember cave."])
    assert levels(result) == {"dragon": 0, "cave": 0, "crown": 1}


def test_prevent_recursion_entry_does_not_activate_others() -> None:
    entries = chain()
    entries[0].activation_criteria.prevent_recursion = True
    assert levels(scan(entries, ["I fear the dragon."])) == {"dragon": 0}


def test_delay_until_recursion_waits_for_its_level() -> None:
    entries = [
        entry("dragon", "The dragon sleeps.", keywords=["dragon"]),
        entry("lore1", "First layer.", keywords=["dragon"], delay_until_recursion=1),
        entry("lore2", "Second layer.", keywords=["dragon"], delay_until_recursion=2),
    ]
    result = scan(entries, ["a dragon"])
    found = levels(result)
    assert found["dragon"] == 0
    assert 0 < found["lore1"] < found["lore2"]


def test_delay_until_recursion_entry_is_dropped_when_the_scan_stops_first() -> None:
    entries = [
        entry("dragon", "The dragon sleeps.", keywords=["dragon"]),
        entry("late", "Later.", keywords=["dragon"], delay_until_recursion=1),
    ]
    result = scan(entries, ["a dragon"], ActivationSettings(max_recursion_steps=1))
    assert levels(result) == {"dragon": 0}
    assert [r.rule for r in result.dropped[0].reasons] == ["primary_key", "delay_until_recursion"]


def test_max_recursion_steps_bounds_the_cascade() -> None:
    result = scan(chain(), ["I fear the dragon."], ActivationSettings(max_recursion_steps=2))
    assert levels(result) == {"dragon": 0, "cave": 1}
    assert result.recursion_steps == 2


def test_min_activations_scans_deeper_until_enough_are_active() -> None:
    dragon = [entry("dragon", "x", keywords=["dragon"])]
    chat = ["a dragon", "nothing", "nothing", "nothing"]
    shallow = ActivationSettings(scan_depth=1, recursive=False)
    assert levels(scan(dragon, chat, shallow)) == {}
    seeking = ActivationSettings(scan_depth=1, recursive=False, min_activations=1)
    result = scan(dragon, chat, seeking)
    assert levels(result) == {"dragon": 3}
    assert "min activations" in result.activated[0].reasons[-1].detail
    capped = ActivationSettings(
        scan_depth=1, recursive=False, min_activations=1, min_activations_depth_max=2
    )
    assert levels(scan(dragon, chat, capped)) == {}
