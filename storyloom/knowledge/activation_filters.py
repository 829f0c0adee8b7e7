"""What keeps an entry out of a whole scan, whatever its keys say.

Disabled, another generation type, the character filter, a delay, a cooldown, once per
session, or trigger conditions that do not hold: each gives the :class:`Reason` the
entry is dropped for when its keys match.
"""

from __future__ import annotations

from storyloom.knowledge.activation_request import ActivationRequest, CharacterContext
from storyloom.knowledge.activation_result import Reason, ReasonValue
from storyloom.knowledge.compiled_entry import CompiledEntry
from storyloom.knowledge.timed_effects import TimedStatus, is_delayed
from storyloom.knowledge.trigger_conditions import evaluate_conditions


def static_block(
    e: CompiledEntry,
    sticky: bool,
    request: ActivationRequest,
    chat_length: int,
    timed: TimedStatus,
    conditions_held: dict[int, Reason],
) -> Reason | None:
    """A reason that keeps ``e`` out of this whole scan, or None.

    Trigger conditions that held leave their reason (kept) in ``conditions_held``."""
    if not e.enabled:
        return Reason("disabled", "the entry is disabled", "dropped", "disabled")
    template = request.template_excluded.get(e.key)
    if template is not None:
        detail = (
            "its @@if condition is false"
            if template == "template_if_false"
            else "a template entry that is only shown, never sent (render or initial variables)"
        )
        return Reason("template", detail, "dropped", template)
    if e.caiu.activation_criteria.never_activate:
        detail = "a scan never activates it (@@dont_activate)"
        return Reason("disabled", detail, "dropped", "never_activate")
    if e.triggers and request.generation_type not in e.triggers:
        allowed = sorted(e.triggers)
        detail = f"only for {', '.join(allowed)} generations; this one is {request.generation_type}"
        values: dict[str, ReasonValue] = {"allowed": allowed, "type": request.generation_type}
        return Reason("generation_type", detail, "dropped", "generation_type", values)
    if e.character_filter is not None:
        blocked = _character_filtered(e.character_filter, request.character)
        if blocked is not None:
            return blocked
    if is_delayed(e.delay, chat_length):
        detail = f"waits until the chat has {e.delay} messages; it has {chat_length}"
        values = {"delay": e.delay, "messages": chat_length}
        return Reason("delay", detail, "dropped", "delay", values)
    cooldown = timed.cooldown.get(e.key)
    if cooldown is not None and not sticky:
        detail = f"cooling down until the chat has {cooldown.end} messages"
        return Reason("cooldown", detail, "dropped", "cooldown", {"end": cooldown.end})
    used = timed.used_once.get(e.key)
    if e.once and used is not None and not sticky:
        detail = f"once per session: already active when the chat had {used} messages"
        return Reason("once_per_session", detail, "dropped", "once_per_session", {"messages": used})
    if e.conditions:
        outcome = evaluate_conditions(e.conditions, request.variables)
        term, values = outcome.term, dict(outcome.values)
        if not outcome.held:
            return Reason("trigger_condition", outcome.detail, "dropped", term, values)
        conditions_held[e.rank] = Reason("trigger_condition", outcome.detail, "kept", term, values)
    return None


def _character_filtered(
    spec: tuple[frozenset[str], frozenset[str], bool], character: CharacterContext | None
) -> Reason | None:
    names, tags, exclude = spec
    if names:
        included = character is not None and character.name in names
        if included == exclude:
            listed = ", ".join(sorted(names))
            values: dict[str, ReasonValue] = {"names": sorted(names)}
            if character is None:
                detail = f"there is no character; only for the characters {listed}"
                return Reason("character_filter", detail, "dropped", "no_character", values)
            values["name"] = character.name
            if exclude:
                detail = f"'{character.name}' is excluded ({listed})"
                return Reason("character_filter", detail, "dropped", "character_excluded", values)
            detail = f"'{character.name}' is not one of the characters {listed}"
            return Reason("character_filter", detail, "dropped", "character_not_listed", values)
    if tags and character is not None:
        tagged = any(tag in tags for tag in character.tags)
        if tagged == exclude:
            listed = ", ".join(sorted(tags))
            values = {"tags": sorted(tags)}
            if exclude:
                detail = f"the character has an excluded tag ({listed})"
                return Reason("character_filter", detail, "dropped", "tag_excluded", values)
            detail = f"the character has none of the tags {listed}"
            return Reason("character_filter", detail, "dropped", "tag_missing", values)
    return None
