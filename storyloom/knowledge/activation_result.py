"""What one activation scan answers: the active entries, the dropped ones, and why.

Every decision is explained by :class:`Reason`\\ s: a stable rule name for programs and
words for a person.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from storyloom.knowledge.caiu import Placement
from storyloom.knowledge.timed_effects import EntryKey, TimedEffectsState

Outcome = Literal["activated", "kept", "dropped"]


@dataclass(frozen=True, slots=True)
class Reason:
    """One step of an explanation: a stable rule name and words for a person."""

    rule: str
    detail: str
    outcome: Outcome


@dataclass(frozen=True, slots=True)
class ActivatedEntry:
    kb_id: str
    entry_id: str
    display_name: str
    text: str
    placement: Placement
    depth: int | None
    role: str | None
    outlet_name: str | None
    priority: int
    tokens: int
    recursion_level: int
    """0: found by the first scan step; n: by the n-th step after it."""
    reasons: list[Reason]


@dataclass(frozen=True, slots=True)
class DroppedEntry:
    """An entry that matched but was not activated, with the reasons."""

    kb_id: str
    entry_id: str
    display_name: str
    reasons: list[Reason]


@dataclass(frozen=True)
class ActivationResult:
    activated: list[ActivatedEntry]
    """In insertion order."""
    dropped: list[DroppedEntry]
    timed_state: TimedEffectsState
    """The state to store with this turn and pass to the next scan."""
    tokens_used: int
    budget: int
    recursion_steps: int
    budget_overflowed: bool
    warnings: list[str] = field(default_factory=list)

    def keys(self) -> list[EntryKey]:
        return [(entry.kb_id, entry.entry_id) for entry in self.activated]

    def by_placement(self) -> dict[Placement, list[ActivatedEntry]]:
        """Active entries per placement, each list in insertion order."""
        groups: dict[Placement, list[ActivatedEntry]] = {}
        for entry in self.activated:
            groups.setdefault(entry.placement, []).append(entry)
        return groups

    def at_depth(self) -> dict[tuple[int, str], list[ActivatedEntry]]:
        """``at_depth`` entries per (depth, role), like SillyTavern's depth prompts."""
        groups: dict[tuple[int, str], list[ActivatedEntry]] = {}
        for entry in self.activated:
            if entry.placement is Placement.AT_DEPTH:
                key = (entry.depth or 0, entry.role or "system")
                groups.setdefault(key, []).append(entry)
        return groups

    def outlets(self) -> dict[str, list[ActivatedEntry]]:
        """``outlet`` entries per outlet name."""
        groups: dict[str, list[ActivatedEntry]] = {}
        for entry in self.activated:
            if entry.placement is Placement.OUTLET:
                groups.setdefault(entry.outlet_name or "", []).append(entry)
        return groups
