"""An entry compiled for scanning: the CAIU fields a scan reads, as plain attributes.

The activation engine compiles every entry of its knowledge bases once; a scan then reads
slotted attributes instead of walking pydantic models, and keys are slot codes of the
engine's :class:`KeywordMatcher` (``~code`` for a regex).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from storyloom.knowledge.activation_request import SCAN_SOURCES
from storyloom.knowledge.activation_settings import MAX_SCAN_DEPTH, ActivationSettings
from storyloom.knowledge.caiu import CAIU, Placement, ScanSource, SecondaryLogic, TriggerCondition
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.timed_effects import EntryKey

CompileKeys = Callable[
    [Sequence[str], CAIU, KnowledgeBase, str], tuple[tuple[int, ...], tuple[str, ...]]
]
"""Key texts of an entry (and the field path, for problems) → their codes and texts."""

_SOURCE_ORDER = {source: i for i, (source, _, _) in enumerate(SCAN_SOURCES)}


class CompiledEntry:
    """An entry compiled for scanning: plain attributes, keys as slot codes.

    A key code >= 0 is a :class:`KeywordMatcher` slot; ``~code`` is a regex id.
    """

    __slots__ = (
        "also_scan",
        "caiu",
        "character_filter",
        "conditions",
        "constant",
        "cooldown",
        "critical",
        "delay",
        "delay_recursion",
        "depth",
        "enabled",
        "entry_id",
        "exclude_recursion",
        "group_override",
        "group_scoring",
        "group_weight",
        "groups",
        "has_variables",
        "inclusion_groups",
        "kb",
        "kb_id",
        "key",
        "logic",
        "name",
        "once",
        "outlet_name",
        "placement",
        "prevent_recursion",
        "primary",
        "primary_text",
        "priority",
        "probability",
        "rank",
        "role",
        "secondary",
        "secondary_text",
        "selective",
        "semantic",
        "simple",
        "sticky",
        "template",
        "threshold",
        "triggers",
        "write_depth",
    )

    rank: int
    kb: KnowledgeBase
    caiu: CAIU
    kb_id: str
    entry_id: str
    key: EntryKey
    name: str
    enabled: bool
    constant: bool
    primary: tuple[int, ...]
    primary_text: tuple[str, ...]
    groups: tuple[tuple[bool, tuple[int, ...], tuple[str, ...], str], ...]
    secondary: tuple[int, ...]
    secondary_text: tuple[str, ...]
    selective: bool
    logic: SecondaryLogic
    depth: int | None
    also_scan: tuple[ScanSource, ...]
    exclude_recursion: bool
    prevent_recursion: bool
    delay_recursion: int
    sticky: int
    cooldown: int
    delay: int
    inclusion_groups: tuple[str, ...]
    group_override: bool
    group_weight: int
    group_scoring: bool | None
    probability: float
    character_filter: tuple[frozenset[str], frozenset[str], bool] | None
    triggers: frozenset[str]
    conditions: tuple[TriggerCondition, ...]
    semantic: bool
    simple: bool
    """Nothing but timed state can keep it out of a scan (no filter, delay, condition)."""
    threshold: float
    priority: int
    placement: Placement
    write_depth: int | None
    role: str | None
    outlet_name: str | None
    critical: bool
    once: bool
    template: str | None
    has_variables: bool


def compile_entry(
    rank: int, kb: KnowledgeBase, caiu: CAIU, settings: ActivationSettings, keys: CompileKeys
) -> CompiledEntry:
    """``caiu`` as the scan reads it; ``keys`` turns each key list into slot codes."""
    criteria = caiu.activation_criteria
    usage = caiu.usage_metadata
    e = CompiledEntry()
    e.rank = rank
    e.kb = kb
    e.caiu = caiu
    e.kb_id = kb.kb_id
    e.entry_id = caiu.id
    e.key = (kb.kb_id, caiu.id)
    e.name = caiu.displayName or caiu.id
    e.enabled = caiu.management_metadata.is_enabled
    e.constant = criteria.constant
    path = "activation_criteria"
    e.primary, e.primary_text = keys(criteria.keywords, caiu, kb, f"{path}.keywords")
    groups = []
    for i, group in enumerate(criteria.key_groups):
        codes, texts = keys(group.keys, caiu, kb, f"{path}.key_groups[{i}].keys")
        if codes:
            groups.append((group.logic == "AND", codes, texts, group.group_id or str(i + 1)))
    e.groups = tuple(groups)
    e.secondary, e.secondary_text = keys(
        criteria.secondary_keywords, caiu, kb, f"{path}.secondary_keywords"
    )
    e.selective = criteria.selective and bool(e.secondary)
    e.logic = criteria.secondary_logic
    e.depth = None if criteria.scan_depth is None else min(criteria.scan_depth, MAX_SCAN_DEPTH)
    e.also_scan = tuple(sorted(set(criteria.also_scan), key=_SOURCE_ORDER.__getitem__))
    e.exclude_recursion = criteria.exclude_recursion
    e.prevent_recursion = criteria.prevent_recursion
    e.delay_recursion = criteria.delay_until_recursion
    # An entry for one turn only (seed 000 2.2.1 exclude_from_history): lore is scanned
    # anew each turn, so the one thing that would carry it into later turns is sticky.
    e.sticky = 0 if usage.exclude_from_history else criteria.sticky
    e.cooldown = criteria.cooldown
    e.delay = criteria.delay
    e.inclusion_groups = tuple(
        dict.fromkeys(g.strip() for g in criteria.inclusion_groups if g.strip())
    )
    e.group_override = criteria.group_override
    e.group_weight = criteria.group_weight
    e.group_scoring = criteria.use_group_scoring
    e.probability = criteria.trigger_probability
    flt = criteria.character_filter
    e.character_filter = (
        (frozenset(flt.names), frozenset(flt.tags), flt.is_exclude)
        if flt is not None and (flt.names or flt.tags)
        else None
    )
    e.triggers = frozenset(criteria.generation_triggers)
    e.conditions = tuple(criteria.trigger_conditions)
    # Similarity activates only where the user turned vector activation on for the book,
    # as SillyTavern's Vector Storage does for world info (off by default).
    e.semantic = criteria.use_semantic_search and kb.vector_activation
    e.threshold = (
        settings.semantic_threshold_default
        if criteria.semantic_threshold is None
        else criteria.semantic_threshold
    )
    e.priority = usage.priority
    e.placement = usage.placement
    e.write_depth = usage.depth if usage.placement is Placement.AT_DEPTH else None
    e.role = usage.role if usage.placement is Placement.AT_DEPTH else None
    e.outlet_name = usage.outlet_name if usage.placement is Placement.OUTLET else None
    e.critical = usage.ignores_budget
    e.once = usage.once_per_session
    e.template = None
    e.has_variables = False
    e.simple = (
        e.enabled
        and not criteria.never_activate
        and not e.triggers
        and e.character_filter is None
        and e.delay <= 0
        and not e.conditions
    )
    return e
