"""One SillyTavern world-info entry ↔ the CAIU it becomes.

An imported entry gets SillyTavern's template defaults for every field it lacks
(:data:`~storyloom.sillytavern.world_info_entry.WI_ENTRY_TEMPLATE`), as SillyTavern does
when it loads a book, and is then mapped field by field onto the CAIU.

The original entry is kept whole in ``CAIU.extensions["sillytavern"]``. Export starts from
it and writes back only the SillyTavern fields whose storyloom value changed: the kept
entry is converted again and compared with the current CAIU field by field, in
SillyTavern's field names. An untouched entry therefore comes back exactly as it was, even
where the mapping loses detail (``probability`` 50 with ``useProbability`` off, ``role``
null against 0), and an edit in storyloom shows up in the field it belongs to.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from storyloom.knowledge.caiu import (
    CAIU,
    ActivationCriteria,
    CharacterFilter,
    Content,
    GenerationType,
    ManagementMetadata,
    Placement,
    ScanSource,
    SecondaryLogic,
    UsageMetadata,
)
from storyloom.knowledge.st_decorators import apply_decorators, decorated_content
from storyloom.sillytavern.world_info_entry import (
    CHARACTER_FILTER_DEFAULT,
    WI_ENTRY_TEMPLATE,
    WorldInfoEntry,
    entry_label,
)

# How storyloom marks what came from SillyTavern: the CAIU's source and tag, and the
# extensions key (of CAIUs and KBs) that holds the original.
IMPORT_SOURCE = "st_import_v1"
ST_TAG = "sillytavern"
EXTENSION_KEY = "sillytavern"

# SillyTavern's world_info_position numbers.
POSITIONS: dict[int, Placement] = {
    0: Placement.BEFORE_CHARACTER,
    1: Placement.AFTER_CHARACTER,
    2: Placement.AUTHORS_NOTE_TOP,
    3: Placement.AUTHORS_NOTE_BOTTOM,
    4: Placement.AT_DEPTH,
    5: Placement.EXAMPLES_TOP,
    6: Placement.EXAMPLES_BOTTOM,
    7: Placement.OUTLET,
}
_POSITION_OF = {placement: index for index, placement in POSITIONS.items()}
# storyloom placements SillyTavern lacks, written as the nearest SillyTavern position.
_NEAREST_POSITION = {
    Placement.BEFORE_PROMPT: 0,
    Placement.SYSTEM_CONTEXT: 0,
    Placement.AFTER_PROMPT: 1,
    Placement.SCRATCHPAD_NOTES: 3,
}
# SillyTavern's extension_prompt_roles and world_info_logic numbers.
ROLES: dict[int, str] = {0: "system", 1: "user", 2: "assistant"}
_ROLE_OF = {name: index for index, name in ROLES.items()}
LOGIC: tuple[SecondaryLogic, ...] = (
    SecondaryLogic.AND_ANY,
    SecondaryLogic.NOT_ALL,
    SecondaryLogic.NOT_ANY,
    SecondaryLogic.AND_ALL,
)
SCAN_FLAGS: dict[str, ScanSource] = {
    "matchPersonaDescription": "persona_description",
    "matchCharacterDescription": "character_description",
    "matchCharacterPersonality": "character_personality",
    "matchCharacterDepthPrompt": "character_depth_prompt",
    "matchScenario": "scenario",
    "matchCreatorNotes": "creator_notes",
}
GENERATION_TRIGGERS: tuple[GenerationType, ...] = (
    "normal",
    "continue",
    "impersonate",
    "swipe",
    "regenerate",
    "quiet",
)


def display_name_from_comment(comment: str) -> str | None:
    """A reference-safe name: '/' becomes '／', ``this:``/``id=`` take full-width ':'/'=',
    ``{{{``/``}}}`` and line breaks go (see ``DISPLAY_NAME_FORBIDDEN``)."""
    name = comment.replace("/", "／").replace("{{{", "").replace("}}}", "")
    name = name.replace("this:", "this：").replace("id=", "id＝")
    name = " ".join(name.split())
    for prefix in ("tag:", "system:"):
        if name.startswith(prefix):
            name = prefix[:-1] + "：" + name[len(prefix) :]
    return name or None


def _value(entry: WorldInfoEntry, name: str) -> Any:
    value = getattr(entry, name)
    if value is None:
        return copy.deepcopy(WI_ENTRY_TEMPLATE.get(name))
    return value


def _non_negative(value: Any, field: str, label: str, warnings: list[str]) -> int:
    number = int(value or 0)
    if number < 0:
        warnings.append(f"entry {label}: {field} {number} is negative; read as 0")
        return 0
    return number


def _recursion_level(value: Any) -> int:
    if isinstance(value, bool):
        return 1 if value else 0
    return max(int(value or 0), 0)


def split_groups(group: str) -> list[str]:
    return [name.strip() for name in group.split(",") if name.strip()]


def wi_entry_to_caiu(
    raw: Mapping[str, Any],
    *,
    entry_id: str,
    warnings: list[str] | None = None,
) -> CAIU:
    """The CAIU of one world-info entry (raises ``pydantic.ValidationError`` on bad types)."""
    notes: list[str] = [] if warnings is None else warnings
    entry = WorldInfoEntry.model_validate(raw)
    label = entry_label(raw, entry_id)

    position = _value(entry, "position")
    placement = POSITIONS.get(position)
    if placement is None:
        notes.append(f"entry {label}: unknown position {position}; read as before_character")
        placement = Placement.BEFORE_CHARACTER
    role_index = _value(entry, "role")
    role = ROLES.get(role_index)
    if role is None:
        notes.append(f"entry {label}: unknown role {role_index}; read as system")
        role = "system"
    logic_index = _value(entry, "selectiveLogic")
    if 0 <= logic_index < len(LOGIC):
        logic = LOGIC[logic_index]
    else:
        notes.append(f"entry {label}: unknown selectiveLogic {logic_index}; read as AND_ANY")
        logic = SecondaryLogic.AND_ANY

    probability = 1.0
    if _value(entry, "useProbability"):
        probability = min(max(float(_value(entry, "probability")) / 100.0, 0.0), 1.0)

    triggers: list[GenerationType] = []
    for trigger in _value(entry, "triggers"):
        if trigger in GENERATION_TRIGGERS:
            triggers.append(trigger)
        else:
            notes.append(f"entry {label}: unknown generation trigger {trigger!r} ignored")

    character_filter = None
    if entry.characterFilter is not None:
        names = entry.characterFilter.names or []
        tags = entry.characterFilter.tags or []
        is_exclude = bool(entry.characterFilter.isExclude)
        if names or tags or is_exclude:
            character_filter = CharacterFilter(names=names, tags=tags, is_exclude=is_exclude)

    scan_depth = entry.scanDepth
    if scan_depth is not None and scan_depth < 0:
        notes.append(f"entry {label}: scanDepth {scan_depth} is negative; global setting used")
        scan_depth = None

    comment = _value(entry, "comment")
    activation = ActivationCriteria(
        keywords=list(entry.key),
        secondary_keywords=list(_value(entry, "keysecondary")),
        selective=bool(_value(entry, "selective")),
        secondary_logic=logic,
        constant=bool(_value(entry, "constant")),
        use_semantic_search=bool(_value(entry, "vectorized")),
        trigger_probability=probability,
        case_sensitive=entry.caseSensitive,
        match_whole_words=entry.matchWholeWords,
        scan_depth=scan_depth,
        also_scan=[source for flag, source in SCAN_FLAGS.items() if _value(entry, flag)],
        exclude_recursion=bool(_value(entry, "excludeRecursion")),
        prevent_recursion=bool(_value(entry, "preventRecursion")),
        delay_until_recursion=_recursion_level(_value(entry, "delayUntilRecursion")),
        sticky=_non_negative(entry.sticky, "sticky", label, notes),
        cooldown=_non_negative(entry.cooldown, "cooldown", label, notes),
        delay=_non_negative(entry.delay, "delay", label, notes),
        inclusion_groups=split_groups(_value(entry, "group")),
        group_override=bool(_value(entry, "groupOverride")),
        group_weight=max(int(_value(entry, "groupWeight")), 1),
        use_group_scoring=entry.useGroupScoring,
        character_filter=character_filter,
        generation_triggers=triggers,
    )
    usage = UsageMetadata(
        priority=round(_value(entry, "order")),
        placement=placement,
        token_budget_impact="critical" if _value(entry, "ignoreBudget") else None,
        depth=_non_negative(_value(entry, "depth"), "depth", label, notes),
        role=role,
        outlet_name=_value(entry, "outletName"),
    )
    caiu = CAIU(
        id=entry_id,
        displayName=display_name_from_comment(comment),
        content=Content(value=_value(entry, "content")),
        activation_criteria=activation,
        usage_metadata=usage,
        management_metadata=ManagementMetadata(
            tags=[ST_TAG],
            source=IMPORT_SOURCE,
            is_enabled=not _value(entry, "disable"),
        ),
        extensions={EXTENSION_KEY: copy.deepcopy(dict(raw))},
    )
    apply_decorators(caiu, label, notes)
    return caiu


def _comment_of(entry: CAIU, original: Any) -> str:
    # The comment keeps characters a display name cannot hold; it is rewritten only when
    # the display name no longer matches what the comment gives.
    if isinstance(original, str) and display_name_from_comment(original) == entry.displayName:
        return original
    return entry.displayName or ""


def _kept_entry(entry: CAIU) -> dict[str, Any] | None:
    raw = entry.extensions.get(EXTENSION_KEY)
    return raw if isinstance(raw, dict) else None


def _kept_comment(entry: CAIU) -> Any:
    raw = _kept_entry(entry)
    return raw.get("comment") if raw is not None else None


def caiu_to_wi_fields(entry: CAIU, warnings: list[str] | None = None) -> dict[str, Any]:
    """The SillyTavern value of every field storyloom models, from a CAIU."""
    notes: list[str] = [] if warnings is None else warnings
    act = entry.activation_criteria
    usage = entry.usage_metadata
    position = _POSITION_OF.get(usage.placement)
    if position is None:
        position = _NEAREST_POSITION[usage.placement]
        notes.append(
            f"entry {entry.id}: SillyTavern has no {usage.placement.value} position; "
            f"written as position {position}"
        )
    level = act.delay_until_recursion
    fields: dict[str, Any] = {
        "key": list(act.keywords),
        "keysecondary": list(act.secondary_keywords),
        "comment": _comment_of(entry, _kept_comment(entry)),
        "content": decorated_content(entry, _kept_entry(entry)),
        "constant": act.constant,
        "vectorized": act.use_semantic_search,
        "selective": act.selective,
        "selectiveLogic": LOGIC.index(act.secondary_logic),
        "order": usage.priority,
        "position": position,
        "disable": not entry.management_metadata.is_enabled,
        "ignoreBudget": usage.token_budget_impact == "critical",
        "excludeRecursion": act.exclude_recursion,
        "preventRecursion": act.prevent_recursion,
        "delayUntilRecursion": level if level > 1 else bool(level),
        "probability": round(act.trigger_probability * 100),
        "useProbability": True,
        "depth": usage.depth,
        "outletName": usage.outlet_name,
        "group": ", ".join(act.inclusion_groups),
        "groupOverride": act.group_override,
        "groupWeight": act.group_weight,
        "scanDepth": act.scan_depth,
        "caseSensitive": act.case_sensitive,
        "matchWholeWords": act.match_whole_words,
        "useGroupScoring": act.use_group_scoring,
        "role": _ROLE_OF[usage.role],
        "sticky": act.sticky,
        "cooldown": act.cooldown,
        "delay": act.delay,
        "triggers": list(act.generation_triggers),
        "characterFilter": None
        if act.character_filter is None
        else {
            "isExclude": act.character_filter.is_exclude,
            "names": list(act.character_filter.names),
            "tags": list(act.character_filter.tags),
        },
    }
    for flag, source in SCAN_FLAGS.items():
        fields[flag] = source in act.also_scan
    return fields


def unrepresentable(entry: CAIU) -> list[str]:
    """What SillyTavern cannot hold of this entry, in words for a warning."""
    act = entry.activation_criteria
    lost = []
    if act.key_groups:
        lost.append("key_groups")
    if act.trigger_conditions:
        lost.append("trigger_conditions")
    if act.semantic_threshold is not None:
        lost.append("semantic_threshold")
    return lost


def changed_wi_fields(
    base: Mapping[str, Any],
    entry: CAIU,
    warnings: list[str] | None = None,
    *,
    imported: Callable[[], CAIU] | None = None,
) -> dict[str, Any]:
    """The SillyTavern fields whose value in ``entry`` differs from what ``base`` gives.

    ``imported`` makes the CAIU ``base`` was imported as, where more than the entry went
    into it (a card book's own settings); by default ``base`` is converted alone.
    """
    try:
        before = imported() if imported is not None else wi_entry_to_caiu(base, entry_id=entry.id)
        baseline = caiu_to_wi_fields(before)
    except ValueError:
        # The kept entry was damaged by hand: every modelled field is written anew.
        baseline = {}
    current = caiu_to_wi_fields(entry, warnings)
    return {
        name: value
        for name, value in current.items()
        if name not in baseline or baseline[name] != value
    }


def overlay_wi_entry(
    base: Mapping[str, Any],
    entry: CAIU,
    *,
    fill_defaults: bool = True,
    warnings: list[str] | None = None,
    imported: Callable[[], CAIU] | None = None,
) -> dict[str, Any]:
    """``base`` (a world-info entry) with the changes of ``entry`` written into it.

    With ``fill_defaults`` every template field ``base`` lacks is added with SillyTavern's
    default, which is what SillyTavern itself saves after loading an old entry.
    """
    out = copy.deepcopy(dict(base))
    for name, value in changed_wi_fields(base, entry, warnings, imported=imported).items():
        if name == "characterFilter" and value is None:
            value = CHARACTER_FILTER_DEFAULT
        out[name] = copy.deepcopy(value)
    if fill_defaults:
        for name, default in WI_ENTRY_TEMPLATE.items():
            if name not in out:
                out[name] = copy.deepcopy(default)
    return out
