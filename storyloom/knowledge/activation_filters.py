"""What keeps an entry out of a whole scan, whatever its keys say.

Disabled, another generation type, the character filter, a delay, a cooldown, once per
session, or trigger conditions that do not hold: each gives the :class:`Reason` the
entry is dropped for when its keys match.
"""

from __future__ import annotations

from storyloom.knowledge.activation_request import ActivationRequest, CharacterContext
from storyloom.knowledge.activation_result import Reason
from storyloom.knowledge.compiled_entry import CompiledEntry
from storyloom.knowledge.timed_effects import TimedStatus, is_delayed
from storyloom.knowledge.trigger_conditions import evaluate_conditions


def static_block(
    e: CompiledEntry,
    sticky: bool,
    request: ActivationRequest,
    chat_length: int,
    timed: TimedStatus,
    condition_detail: dict[int, str],
) -> Reason | None:
    """A reason that keeps ``e`` out of this whole scan, or None.

    A trigger condition that held leaves its words in ``condition_detail``."""
    if not e.enabled:
        return Reason("disabled", "the entry is disabled", "dropped")
    if e.caiu.activation_criteria.never_activate:
        return Reason("disabled", "a scan never activates it (@@dont_activate)", "dropped")
    if e.triggers and request.generation_type not in e.triggers:
        allowed = ", ".join(sorted(e.triggers))
        detail = f"only for {allowed} generations; this one is {request.generation_type}"
        return Reason("generation_type", detail, "dropped")
    if e.character_filter is not None:
        blocked = _character_filtered(e.character_filter, request.character)
        if blocked:
            return Reason("character_filter", blocked, "dropped")
    if is_delayed(e.delay, chat_length):
        detail = f"waits until the chat has {e.delay} messages; it has {chat_length}"
        return Reason("delay", detail, "dropped")
    cooldown = timed.cooldown.get(e.key)
    if cooldown is not None and not sticky:
        detail = f"cooling down until the chat has {cooldown.end} messages"
        return Reason("cooldown", detail, "dropped")
    used = timed.used_once.get(e.key)
    if e.once and used is not None and not sticky:
        detail = f"once per session: already active when the chat had {used} messages"
        return Reason("once_per_session", detail, "dropped")
    if e.conditions:
        outcome = evaluate_conditions(e.conditions, request.variables)
        if not outcome.held:
            return Reason("trigger_condition", outcome.detail, "dropped")
        condition_detail[e.rank] = outcome.detail
    return None


def _character_filtered(
    spec: tuple[frozenset[str], frozenset[str], bool], character: CharacterContext | None
) -> str:
    names, tags, exclude = spec
    if names:
        included = character is not None and character.name in names
        if included == exclude:
            who = f"'{character.name}'" if character is not None else "no character"
            listed = ", ".join(sorted(names))
            return (
                f"{who} is excluded ({listed})"
                if exclude
                else f"{who} is not one of the characters {listed}"
            )
    if tags and character is not None:
        tagged = any(tag in tags for tag in character.tags)
        if tagged == exclude:
            listed = ", ".join(sorted(tags))
            return (
                f"the character has an excluded tag ({listed})"
                if exclude
                else f"the character has none of the tags {listed}"
            )
    return ""
