"""Who speaks next in a group chat, as SillyTavern's group activation strategies decide.

- **natural**: the members named in the last message, in the order they are named; then
  each member in a shuffled order whose talkativeness beats a roll; and when nobody was
  chosen, one member at random (among those with talkativeness above zero, if any). The
  member who wrote the last message is left out unless ``allow_self_responses``.
- **list**: the members in list order, each once after the user's message, round again.
- **manual**: nobody answers the user on their own; the user picks who speaks ("speaks
  next" in the group bar). Asked for a reply without a pick, one member at random.

SillyTavern answers one user message with every member it activates, one after another:
:func:`activation_order` gives that list (the chat service runs its replies in turn), and
:func:`next_speaker` its first or the user's pick. The rolls come from a
:class:`random.Random` the caller seeds from the stored chat, so the same chat at the same
point picks the same members. A muted member is never picked by an order, only by the
user by name.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from storyloom.chat.store.group import GroupSettings
from storyloom.core.errors import FieldProblem, InvalidInput

_WORD = re.compile(r"\w+")
_SPACELESS = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\uac00-\ud7af]")
"""Scripts written without spaces (CJK): a name there is found as a substring, since the
text has no word breaks to find it by (SillyTavern's ASCII ``\\w`` never finds it)."""


@dataclass(frozen=True)
class TurnContext:
    """What the order reads of the chat at the point a reply is asked for."""

    text: str = ""
    """The activation text: the user's message, or the last message when none was typed."""
    user_input: bool = False
    """The reply answers a message the user just wrote."""
    last_speaker: str | None = None
    """The member who wrote the last message (None: the user, or nobody)."""
    spoken_since_user: Sequence[str] = field(default_factory=tuple)
    """Members who spoke since the user's last message, oldest first."""


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def mentioned(text: str, names: Mapping[str, str], *, banned: str | None = None) -> list[str]:
    """The members (id → name, in list order) named in ``text``, in the order named.

    As SillyTavern, a word of the text names the first member with that word in its name
    (so "John" in a group with "John Smith" and "John Doe" names only the first); names in
    scripts without spaces are found wherever they occur.
    """
    found: list[tuple[int, int, str]] = []
    name_words = {mid: set(_words(name)) for mid, name in names.items() if mid != banned}
    for position, match in enumerate(_WORD.finditer(text)):
        word = match.group().lower()
        for mid, words in name_words.items():
            if word in words:
                found.append((match.start(), position, mid))
                break
    lowered = text.lower()
    for mid, name in names.items():
        if mid == banned or not name.strip() or not _SPACELESS.search(name):
            continue
        at = lowered.find(name.lower())
        if at >= 0:
            found.append((at, -1, mid))
    order: list[str] = []
    for _, _, mid in sorted(found):
        if mid not in order:
            order.append(mid)
    return order


def natural_order(
    members: Sequence[str],
    names: Mapping[str, str],
    talkativeness: Mapping[str, float],
    context: TurnContext,
    rng: random.Random,
    *,
    allow_self_responses: bool = False,
) -> list[str]:
    """SillyTavern's natural order over the unmuted ``members`` (list order)."""
    banned = None
    if not context.user_input and not allow_self_responses:
        banned = context.last_speaker
    chosen = mentioned(context.text, {m: names.get(m, m) for m in members}, banned=banned)
    shuffled = list(members)
    rng.shuffle(shuffled)
    chatty: list[str] = []
    for member in shuffled:
        if member == banned:
            continue
        roll = rng.random()
        chance = talkativeness.get(member, 0.5)
        if chance >= roll and member not in chosen:
            chosen.append(member)
        if chance > 0:
            chatty.append(member)
    if not chosen:
        pool = chatty or [m for m in members if m != banned] or list(members)
        if pool:
            chosen.append(pool[rng.randrange(len(pool))])
    return chosen


def list_order(members: Sequence[str], context: TurnContext) -> list[str]:
    """The unmuted ``members`` in list order, starting with the first who has not spoken
    since the user's message (all have: the one after the last speaker, round again)."""
    if not members:
        return []
    spoken = set(context.spoken_since_user)
    waiting = [m for m in members if m not in spoken]
    if waiting:
        start = members.index(waiting[0])
    elif context.last_speaker in members:
        start = (members.index(context.last_speaker) + 1) % len(members)
    else:
        start = 0
    return list(members[start:]) + list(members[:start])


def activation_order(
    group: GroupSettings,
    names: Mapping[str, str],
    talkativeness: Mapping[str, float],
    context: TurnContext,
    rng: random.Random,
) -> list[str]:
    """Who the group's strategy activates, first speaker first (empty: nobody answers)."""
    members = group.unmuted()
    if not members:
        return []
    if group.activation_strategy == "natural":
        return natural_order(
            members,
            names,
            talkativeness,
            context,
            rng,
            allow_self_responses=group.allow_self_responses,
        )
    if group.activation_strategy == "list":
        return list_order(members, context)
    # manual: the user's message waits for the user's pick; asked anyway, one at random
    if context.user_input:
        return []
    return [members[rng.randrange(len(members))]]


def next_speaker(
    group: GroupSettings,
    names: Mapping[str, str],
    talkativeness: Mapping[str, float],
    context: TurnContext,
    rng: random.Random,
    *,
    requested: str | None = None,
) -> str | None:
    """The member who writes the next reply: ``requested`` when the user picked one
    (a muted member too: the user asked for them by name), else the first the strategy
    activates. None: nobody answers (manual mode after the user's message, all muted)."""
    if requested is not None:
        if group.member(requested) is None:
            raise InvalidInput(
                f"{requested!r} is not a member of this group",
                problems=[FieldProblem("speaker", f"{requested!r} is not a member")],
            )
        return requested
    order = activation_order(group, names, talkativeness, context, rng)
    return order[0] if order else None
