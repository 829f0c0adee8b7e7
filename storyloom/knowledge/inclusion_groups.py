"""Inclusion groups: of the entries matched in one scan step that share a group, keep one.

SillyTavern's ``filterByInclusionGroups``, in its order:

1. a group with a sticky member keeps only its sticky members;
2. with group scoring (global, or the entry's own setting), members whose score (keys
   matched) is below the group's best are removed;
3. a group that an entry activated in an earlier step already filled loses all members;
4. of the rest, a member with ``group_override`` wins (highest priority first); else one
   is drawn with chance proportional to ``group_weight``.

Differences: the draw comes from ``roll`` (seeded by the caller) instead of
``Math.random``; a member removed by one of its groups is out of all its groups (in
SillyTavern it can still "win" another group it is in, leaving that group empty); and
"already filled" means any active entry lists the group (SillyTavern compares the whole
comma-separated group field).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True, slots=True)
class GroupMember:
    """A matched entry that belongs to inclusion groups; ``ref`` is the caller's id."""

    ref: int
    name: str
    groups: tuple[str, ...]
    override: bool = False
    weight: int = 100
    priority: int = 100
    sticky: bool = False
    scoring: bool | None = None


GroupTerm = Literal[
    "group_sticky",
    "group_scored_below",
    "group_filled",
    "group_lost",
    "group_won_override",
    "group_won_weight",
]
"""Why a member lost its group (a sticky member kept it, a better score, an earlier step
filled it, another member won it), or how it won (override, weighted draw)."""


@dataclass(frozen=True, slots=True)
class GroupVerdict:
    """One member's fate in a group: in words, and as a term with its values for a page
    to say in its own language (``chat.prompt.reason.<term>``)."""

    term: GroupTerm
    values: dict[str, str | int | float]
    detail: str


@dataclass
class GroupOutcome:
    """Removed members with the reason, and how each winner won."""

    losers: dict[int, GroupVerdict] = field(default_factory=dict)
    winners: dict[int, GroupVerdict] = field(default_factory=dict)


def filter_by_inclusion_groups(
    members: Sequence[GroupMember],
    filled_groups: Mapping[str, str],
    *,
    use_group_scoring: bool,
    score: Callable[[int], int],
    roll: Callable[[str], float],
) -> GroupOutcome:
    """Decide which grouped members stay.

    ``members`` come in the step's order (sticky first, then priority); ``filled_groups``
    maps a group filled in an earlier step to the entry that filled it; ``score(ref)``
    counts a member's matched keys; ``roll(group)`` gives a number in [0, 1).
    """
    grouped: dict[str, list[GroupMember]] = {}
    for member in members:
        for group in member.groups:
            grouped.setdefault(group, []).append(member)
    outcome = GroupOutcome()
    if not grouped:
        return outcome
    losers = outcome.losers

    with_sticky: set[str] = set()
    for group, entries in grouped.items():
        sticky = [m for m in entries if m.sticky]
        if sticky:
            with_sticky.add(group)
            for member in entries:
                if not member.sticky:
                    losers.setdefault(
                        member.ref,
                        GroupVerdict(
                            "group_sticky",
                            {"group": group, "entry": sticky[0].name},
                            f"group '{group}' keeps its sticky member {sticky[0].name}",
                        ),
                    )

    scores: dict[int, int] = {}
    for group, entries in grouped.items():
        if group in with_sticky:
            continue
        if not use_group_scoring and not any(m.scoring for m in entries):
            continue
        live = [m for m in entries if m.ref not in losers]
        if not live:
            continue
        for member in live:
            if member.ref not in scores:
                scores[member.ref] = score(member.ref)
        best = max(scores[m.ref] for m in live)
        for member in live:
            scored = member.scoring if member.scoring is not None else use_group_scoring
            if scored and scores[member.ref] < best:
                losers[member.ref] = GroupVerdict(
                    "group_scored_below",
                    {"group": group, "score": scores[member.ref], "best": best},
                    f"scored {scores[member.ref]} in group '{group}', below the best {best}",
                )

    for group, entries in grouped.items():
        if group in with_sticky:
            continue
        live = [m for m in entries if m.ref not in losers]
        filler = filled_groups.get(group)
        if filler is not None:
            for member in live:
                losers[member.ref] = GroupVerdict(
                    "group_filled",
                    {"group": group, "entry": filler},
                    f"group '{group}' is already filled by {filler}",
                )
            continue
        if len(live) <= 1:
            continue
        overriding = sorted((m for m in live if m.override), key=lambda m: -m.priority)
        if overriding:
            winner = overriding[0]
            how = GroupVerdict(
                "group_won_override",
                {"group": group, "priority": winner.priority},
                f"won group '{group}' by override (priority {winner.priority})",
            )
        else:
            total = sum(m.weight for m in live)
            drawn = roll(group) * total
            winner = live[-1]
            reached = 0
            for member in live:
                reached += member.weight
                if drawn <= reached:
                    winner = member
                    break
            how = GroupVerdict(
                "group_won_weight",
                {"group": group, "weight": winner.weight, "total": total, "draw": round(drawn, 1)},
                f"won group '{group}' by weight {winner.weight} of {total} (draw {drawn:.1f})",
            )
        for member in live:
            if member is not winner:
                losers[member.ref] = GroupVerdict(
                    "group_lost",
                    {"group": group, "entry": winner.name},
                    f"lost group '{group}' to {winner.name}",
                )
        outcome.winners[winner.ref] = how
    for ref in list(outcome.winners):
        if ref in losers:
            del outcome.winners[ref]
    return outcome
