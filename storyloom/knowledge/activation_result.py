"""What one activation scan answers: the active entries, the dropped ones, and why.

Every decision is explained by :class:`Reason`\\ s: a stable rule name for programs and
words for a person.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, overload

from storyloom.knowledge.caiu import Placement
from storyloom.knowledge.timed_effects import EntryKey, TimedEffectsState

Outcome = Literal["activated", "kept", "dropped"]


ReasonValue = str | int | float | list[str]
"""A value of a reason's pattern; a list (of keys) is said as the page's language lists."""


@dataclass(frozen=True, slots=True)
class Reason:
    """One step of an explanation: a stable rule name and words for a person; where the
    words follow a pattern, its name (``term``) and values, for a page to say them in
    its own language."""

    rule: str
    detail: str
    outcome: Outcome
    term: str = ""
    values: Mapping[str, ReasonValue] = field(default_factory=dict, hash=False, compare=False)

    def as_record(self) -> dict[str, object]:
        """The reason as a lore record keeps it (``term`` and ``values`` only when set)."""
        record: dict[str, object] = {
            "rule": self.rule,
            "detail": self.detail,
            "outcome": self.outcome,
        }
        if self.term:
            record["term"] = self.term
            record["values"] = dict(self.values)
        return record


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


class DroppedEntry:
    """An entry that matched but was not activated, with the reasons.

    A scan may cut thousands of entries (a big book over its budget), and quoting where
    each one's keys matched costs more than the scan itself; so the engine passes a
    function instead of the list, and :attr:`reasons` builds them on first read.
    """

    __slots__ = ("_explain", "_reasons", "cut", "display_name", "entry_id", "kb_id")

    def __init__(
        self,
        kb_id: str,
        entry_id: str,
        display_name: str,
        reasons: list[Reason] | Callable[[], list[Reason]],
        cut: Sequence[Reason] | None = None,
    ) -> None:
        self.kb_id = kb_id
        self.entry_id = entry_id
        self.display_name = display_name
        self._reasons: list[Reason] | None = None
        self._explain: Callable[[], list[Reason]] | None = None
        if callable(reasons):
            self._explain = reasons
        else:
            self._reasons = reasons
        # What dropped it, without where its keys matched: cheap, so a chat turn can keep
        # it for every cut entry while the full explanation waits for a reader.
        self.cut: Sequence[Reason] = (
            cut if cut is not None else [r for r in self.reasons if r.outcome == "dropped"]
        )

    @property
    def reasons(self) -> list[Reason]:
        """Why the entry matched and why it was dropped (built on first read)."""
        if self._reasons is None:
            assert self._explain is not None
            self._reasons, self._explain = self._explain(), None
        return self._reasons

    @property
    def explained(self) -> bool:
        """Whether :attr:`reasons` has been built."""
        return self._reasons is not None

    def __repr__(self) -> str:
        return f"DroppedEntry({self.kb_id!r}, {self.entry_id!r}, {self.display_name!r})"


DroppedBrief = tuple[str, str, str, Sequence[Reason]]
"""A dropped entry in brief: kb_id, entry_id, display name, the reasons that cut it."""


class DroppedEntries(Sequence[DroppedEntry]):
    """The dropped entries of a scan, made when first read (a list to every reader)."""

    __slots__ = ("_brief", "_items", "_make")

    def __init__(
        self,
        count: int,
        make: Callable[[int], DroppedEntry],
        brief: Callable[[int], DroppedBrief] | None = None,
    ) -> None:
        self._items: list[DroppedEntry | None] = [None] * count
        self._make = make
        self._brief = brief

    def briefs(self) -> list[DroppedBrief]:
        """Every dropped entry in brief, without making an entry object for each: what a
        chat turn keeps of thousands of cut entries."""
        if self._brief is None:
            return [(d.kb_id, d.entry_id, d.display_name, d.cut) for d in self]
        return [self._brief(position) for position in range(len(self._items))]

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> DroppedEntry: ...

    @overload
    def __getitem__(self, index: slice) -> list[DroppedEntry]: ...

    def __getitem__(self, index: int | slice) -> DroppedEntry | list[DroppedEntry]:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self._items))[index]]
        item = self._items[index]
        if item is None:
            position = range(len(self._items))[index]
            item = self._items[position] = self._make(position)
        return item

    def __repr__(self) -> str:
        return f"DroppedEntries({len(self._items)} entries)"


@dataclass(frozen=True)
class ActivationResult:
    activated: list[ActivatedEntry]
    """In insertion order."""
    dropped: Sequence[DroppedEntry]
    """Matched but not activated; each entry's reasons are built when read."""
    timed_state: TimedEffectsState
    """The state to store with this turn and pass to the next scan."""
    tokens_used: int
    budget: int
    recursion_steps: int
    budget_overflowed: bool
    warnings: list[str] = field(default_factory=list)
    budget_cut: int = 0
    """How many entries the lore budget (the global one, not a book's own) cut."""
    budget_cut_constant: list[str] = field(default_factory=list)
    """The names of the constant entries among them, in priority order: what a player
    most needs to know was left out (a card's world setting, its rules)."""

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
