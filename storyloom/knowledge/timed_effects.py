"""Sticky, cooldown, delay and once-per-session: the state that outlives one scan.

SillyTavern keeps sticky and cooldown effects in the chat's metadata and changes them in
place. Here the state is a value: :func:`check_timed_effects` reads the state a turn
starts from, :func:`record_activations` returns the state after it. The chat layer stores
the state with each turn, so a branch or a swipe starts from its own parent's state.

The rules are SillyTavern's (``WorldInfoTimedEffects``), with ``chat_length`` the number
of messages in the chat at the scan:

- an effect starts at ``chat_length`` and ends at ``chat_length + n``; it is active while
  ``start < chat_length < end``. An effect whose ``start`` is not behind ``chat_length``
  is dropped unless protected: the chat did not advance (a swipe or a regenerate), so the
  turn that set it is being redone;
- when a sticky effect ends and the entry has a cooldown, a protected cooldown starts;
- an effect is dropped once it ends, or when its entry no longer has that effect; an
  effect of an entry the engine does not know (another character's book) is kept until
  it ends;
- delay is not state: an entry with ``delay = n`` is blocked while ``chat_length < n``.

``once_per_session`` (a storyloom addition) remembers the chat length at which the entry
activated; it blocks later turns. Redoing that turn (same or shorter chat) forgets it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

EntryKey = tuple[str, str]
"""(kb_id, entry_id)"""


class TimedEffect(BaseModel):
    """One running effect: from ``start`` to ``end`` (chat lengths)."""

    model_config = ConfigDict(frozen=True)

    start: int
    end: int
    protected: bool = Field(default=False, description="Kept even if the chat did not advance")


EffectTable = dict[str, dict[str, TimedEffect]]


class TimedEffectsState(BaseModel):
    """Timed effects by ``kb_id`` then ``entry_id``; store it with the chat turn."""

    model_config = ConfigDict(frozen=True)

    sticky: EffectTable = Field(default_factory=dict)
    cooldown: EffectTable = Field(default_factory=dict)
    once_per_session: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="Chat length at which the entry activated"
    )

    def is_empty(self) -> bool:
        return not (self.sticky or self.cooldown or self.once_per_session)


@dataclass(frozen=True, slots=True)
class TimedConfig:
    """An entry's timed settings (0: off)."""

    sticky: int = 0
    cooldown: int = 0
    once_per_session: bool = False


@dataclass(frozen=True)
class TimedStatus:
    """What the state means for one scan, and the state to build the next one from."""

    sticky: Mapping[EntryKey, TimedEffect]
    cooldown: Mapping[EntryKey, TimedEffect]
    used_once: Mapping[EntryKey, int]
    carried: TimedEffectsState


def _flatten(table: Mapping[str, Mapping[str, TimedEffect]]) -> dict[EntryKey, TimedEffect]:
    return {
        (kb_id, entry_id): effect
        for kb_id, effects in table.items()
        for entry_id, effect in effects.items()
    }


def _nest(flat: Mapping[EntryKey, TimedEffect]) -> EffectTable:
    table: EffectTable = {}
    for (kb_id, entry_id), effect in flat.items():
        table.setdefault(kb_id, {})[entry_id] = effect
    return table


def _check(
    effects: Mapping[EntryKey, TimedEffect],
    chat_length: int,
    configs: Mapping[EntryKey, TimedConfig],
    kind: str,
) -> tuple[dict[EntryKey, TimedEffect], dict[EntryKey, TimedEffect], list[EntryKey]]:
    """(effects kept, effects active now, entries whose effect just ended)."""
    kept: dict[EntryKey, TimedEffect] = {}
    active: dict[EntryKey, TimedEffect] = {}
    ended: list[EntryKey] = []
    for key, effect in effects.items():
        if chat_length <= effect.start and not effect.protected:
            continue
        config = configs.get(key)
        if config is None:
            if chat_length < effect.end:
                kept[key] = effect
            continue
        if not getattr(config, kind):
            continue
        if chat_length >= effect.end:
            ended.append(key)
            continue
        kept[key] = effect
        active[key] = effect
    return kept, active, ended


def check_timed_effects(
    state: TimedEffectsState, chat_length: int, configs: Mapping[EntryKey, TimedConfig]
) -> TimedStatus:
    """Which entries are sticky, cooling down or used up at ``chat_length``."""
    sticky_kept, sticky_active, sticky_ended = _check(
        _flatten(state.sticky), chat_length, configs, "sticky"
    )
    cooldown_kept, cooldown_active, _ = _check(
        _flatten(state.cooldown), chat_length, configs, "cooldown"
    )
    for key in sticky_ended:
        cooldown = configs[key].cooldown
        if cooldown:
            effect = TimedEffect(start=chat_length, end=chat_length + cooldown, protected=True)
            cooldown_kept[key] = effect
            cooldown_active[key] = effect
    used_once = {
        (kb_id, entry_id): at
        for kb_id, entries in state.once_per_session.items()
        for entry_id, at in entries.items()
        if at < chat_length
    }
    once_table: dict[str, dict[str, int]] = {}
    for (kb_id, entry_id), at in used_once.items():
        once_table.setdefault(kb_id, {})[entry_id] = at
    carried = TimedEffectsState(
        sticky=_nest(sticky_kept), cooldown=_nest(cooldown_kept), once_per_session=once_table
    )
    return TimedStatus(sticky_active, cooldown_active, used_once, carried)


def is_delayed(delay: int, chat_length: int) -> bool:
    """Whether an entry with ``delay`` is still blocked at ``chat_length``."""
    return delay > 0 and chat_length < delay


def record_activations(
    carried: TimedEffectsState,
    chat_length: int,
    activated: Iterable[EntryKey],
    configs: Mapping[EntryKey, TimedConfig],
) -> TimedEffectsState:
    """The state after a scan that activated ``activated`` (from ``TimedStatus.carried``).

    A running sticky or cooldown effect is not restarted by a new activation.
    """
    sticky = _flatten(carried.sticky)
    cooldown = _flatten(carried.cooldown)
    once = {kb_id: dict(entries) for kb_id, entries in carried.once_per_session.items()}
    changed = False
    for key in activated:
        config = configs.get(key)
        if config is None:
            continue
        if config.sticky and key not in sticky:
            sticky[key] = TimedEffect(start=chat_length, end=chat_length + config.sticky)
            changed = True
        if config.cooldown and key not in cooldown:
            cooldown[key] = TimedEffect(start=chat_length, end=chat_length + config.cooldown)
            changed = True
        if config.once_per_session and key[1] not in once.get(key[0], {}):
            once.setdefault(key[0], {})[key[1]] = chat_length
            changed = True
    if not changed:
        return carried
    return TimedEffectsState(sticky=_nest(sticky), cooldown=_nest(cooldown), once_per_session=once)
