"""SillyTavern's World Info scan loop, ported line for line to Python: the baseline.

``checkWorldInfo`` walks every entry for every scan step; for each entry it builds the
scan text (``WorldInfoBuffer.get``) and tests each key with ``matchKeys``: parse the key
as a regex, else lower-case haystack and needle and use ``includes`` or, for whole
words, a fresh boundary regex. This module does exactly that, on CAIU entries.

It follows the rules of :mod:`storyloom.knowledge.activation` where that engine departs
from SillyTavern on purpose (seeded draws, token counts summed per entry rather than
re-counted on the joined text, ``exclude_recursion`` matching the chat part, invalid
regex keys ignored), so both must activate the same entries. As in SillyTavern, the
budget test is ``tokens of earlier steps' recursion text + tokens of this step so far >=
budget``, regex keys search the joined buffer, and whole words use JavaScript's ASCII
``\\W``. Covered: disabled, constant,
primary keys, key groups, secondary logic, regex keys, case and whole-word settings,
scan depth, recursion (prevent/exclude/delay levels), max steps, min activations,
inclusion groups (override, weight, scoring), probability, budget. Not covered (the
benchmark does not use them): timed effects, character and generation filters, trigger
conditions, ``also_scan``, semantic scores, extra scan texts.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import regex

from storyloom.knowledge.activation import ScanMessage, seeded_unit
from storyloom.knowledge.activation_settings import MAX_SCAN_DEPTH, ActivationSettings
from storyloom.knowledge.caiu import CAIU, SecondaryLogic
from storyloom.knowledge.entry_text import injected_text
from storyloom.knowledge.knowledge_base import KnowledgeBase

INITIAL, RECURSION, MIN_ACTIVATIONS = 1, 2, 3
_FLAGS = {"i": regex.IGNORECASE, "s": regex.DOTALL, "m": regex.MULTILINE}

Entry = tuple[KnowledgeBase, CAIU]


@functools.cache
def parse_regex_from_string(text: str) -> Any:
    """SillyTavern's parseRegexFromString: a compiled regex, None, or False if invalid.

    Cached, like every compiled pattern here: V8 caches compiled regexps by source, and
    Python's own cache (512 patterns) thrashes on a big book, which would time the
    regex compiler instead of the scan loop.
    """
    match = re.match(r"^/([\s\S]+?)/([gimsuy]*)$", text)
    if not match or re.search(r"(?:^|[^\\])/", match.group(1)):
        return None
    flags = 0
    for flag in match.group(2):
        flags |= _FLAGS.get(flag, 0)
    try:
        return regex.compile(match.group(1), flags)
    except (regex.error, ValueError, OverflowError):
        return False  # invalid: ignored, like the engine does


@functools.cache
def _whole_word(needle: str) -> re.Pattern[str]:
    """SillyTavern's ``(?:^|\\W)needle(?:$|\\W)``; JavaScript's ``\\w`` is ASCII."""
    return re.compile(rf"(?:^|[^A-Za-z0-9_]){re.escape(needle)}(?:$|[^A-Za-z0-9_])")


class WorldInfoBuffer:
    def __init__(self, chat: Sequence[str], settings: ActivationSettings) -> None:
        self.settings = settings
        self.depth_buffer = [message.strip() for message in chat[:MAX_SCAN_DEPTH]]
        self.recurse_buffer: list[str] = []
        self.skew = 0

    def get_depth(self) -> int:
        return self.settings.scan_depth + self.skew

    def get(self, entry: CAIU, scan_state: int) -> str:
        criteria = entry.activation_criteria
        depth = criteria.scan_depth if criteria.scan_depth is not None else self.get_depth()
        if depth <= 0:
            return ""
        depth = min(depth, MAX_SCAN_DEPTH)
        result = "\x01" + "\n\x01".join(self.depth_buffer[:depth])
        if self.recurse_buffer and scan_state != MIN_ACTIVATIONS and not criteria.exclude_recursion:
            result += "\n\x01" + "\n\x01".join(self.recurse_buffer)
        return result

    def match_keys(self, haystack: str, needle: str, entry: CAIU) -> bool:
        key_regex = parse_regex_from_string(needle)
        if key_regex is False:
            return False
        if key_regex is not None:
            return key_regex.search(haystack) is not None
        criteria = entry.activation_criteria
        case_sensitive = criteria.case_sensitive
        if case_sensitive is None:
            case_sensitive = self.settings.case_sensitive
        if not case_sensitive:
            haystack = haystack.lower()
            needle = needle.lower()
        whole_words = criteria.match_whole_words
        if whole_words is None:
            whole_words = self.settings.match_whole_words
        if whole_words:
            if len(needle.split()) > 1:
                return needle in haystack
            return _whole_word(needle).search(haystack) is not None
        return needle in haystack

    def get_score(self, entry: CAIU, scan_state: int) -> int:
        criteria = entry.activation_criteria
        haystack = self.get(entry, scan_state)
        if not haystack:
            return 0
        keys = [k.strip() for k in criteria.keywords if k.strip()]
        groups = [[k.strip() for k in g.keys if k.strip()] for g in criteria.key_groups]
        groups_logic = [g.logic for g in criteria.key_groups]
        if not keys and not any(groups):
            return 0
        primary = sum(self.match_keys(haystack, key, entry) for key in keys)
        for group, logic in zip(groups, groups_logic, strict=True):
            if group:
                hits = [self.match_keys(haystack, key, entry) for key in group]
                primary += all(hits) if logic == "AND" else any(hits)
        secondary_keys = [k.strip() for k in criteria.secondary_keywords if k.strip()]
        if not secondary_keys:
            return primary
        secondary = sum(self.match_keys(haystack, key, entry) for key in secondary_keys)
        if criteria.secondary_logic is SecondaryLogic.AND_ANY:
            return primary + secondary
        if criteria.secondary_logic is SecondaryLogic.AND_ALL and secondary == len(secondary_keys):
            return primary + secondary
        return primary


def _groups(entry: CAIU) -> list[str]:
    return list(
        dict.fromkeys(g.strip() for g in entry.activation_criteria.inclusion_groups if g.strip())
    )


def filter_by_inclusion_groups(
    new_entries: list[Entry],
    filled: dict[str, str],
    buffer: WorldInfoBuffer,
    scan_state: int,
    seed: int | str,
    step: int,
) -> None:
    grouped: dict[str, list[Entry]] = {}
    for item in new_entries:
        for group in _groups(item[1]):
            grouped.setdefault(group, []).append(item)
    if not grouped:
        return
    removed: list[Entry] = []

    def remove(item: Entry) -> None:
        if item in new_entries:
            new_entries.remove(item)
            removed.append(item)

    use_scoring = buffer.settings.use_group_scoring
    for group_members in grouped.values():
        live = [x for x in group_members if x not in removed]
        if not use_scoring and not any(x[1].activation_criteria.use_group_scoring for x in live):
            continue
        if not live:
            continue
        scores = [buffer.get_score(x[1], scan_state) for x in live]
        best = max(scores)
        for item, score in zip(live, scores, strict=True):
            scored = item[1].activation_criteria.use_group_scoring
            if (scored if scored is not None else use_scoring) and score < best:
                remove(item)

    for group, group_members in grouped.items():
        live = [x for x in group_members if x not in removed]
        if group in filled:
            for item in live:
                remove(item)
            continue
        if len(live) <= 1:
            continue
        prios = sorted(
            (x for x in live if x[1].activation_criteria.group_override),
            key=lambda x: -x[1].usage_metadata.priority,
        )
        if prios:
            winner = prios[0]
        else:
            total = sum(x[1].activation_criteria.group_weight for x in live)
            roll = seeded_unit(seed, "group", group, step) * total
            current = 0
            winner = live[-1]
            for item in live:
                current += item[1].activation_criteria.group_weight
                if roll <= current:
                    winner = item
                    break
        for item in live:
            if item is not winner:
                remove(item)


def check_world_info(
    kbs: Sequence[KnowledgeBase],
    settings: ActivationSettings,
    messages: Sequence[ScanMessage],
    *,
    max_context_tokens: int,
    count_tokens: Callable[[str], int],
    seed: int | str = 0,
    render: Callable[[KnowledgeBase, CAIU], str] = injected_text,
) -> list[tuple[str, str]]:
    """The activated (kb_id, entry_id) in activation order."""
    chat = [f"{m.name}: {m.text}" if settings.include_names else m.text for m in reversed(messages)]
    buffer = WorldInfoBuffer(chat, settings)
    budget = math.floor(settings.context_percent * max_context_tokens / 100 + 0.5) or 1
    if settings.budget_cap > 0 and budget > settings.budget_cap:
        budget = settings.budget_cap
    sorted_entries: list[Entry] = sorted(
        ((kb, entry) for kb in kbs for entry in kb.entries),
        key=lambda x: -x[1].usage_metadata.priority,
    )
    levels = sorted(
        {
            x[1].activation_criteria.delay_until_recursion
            for x in sorted_entries
            if x[1].activation_criteria.delay_until_recursion
            and x[1].management_metadata.is_enabled
        }
    )
    current_level = levels.pop(0) if levels else 0
    scan_state = INITIAL
    overflowed = False
    count = 0
    all_activated: dict[tuple[str, str], Entry] = {}
    failed_probability: set[tuple[str, str]] = set()
    filled: dict[str, str] = {}
    all_activated_tokens = 0  # textToScanTokens: the text of allActivatedText

    while scan_state:
        if settings.max_recursion_steps and settings.max_recursion_steps <= count:
            break
        count += 1
        next_state = 0
        activated_now: list[Entry] = []
        for item in sorted_entries:
            kb, entry = item
            key = (kb.kb_id, entry.id)
            criteria = entry.activation_criteria
            if key in failed_probability or key in all_activated:
                continue
            if not entry.management_metadata.is_enabled:
                continue
            delay_level = criteria.delay_until_recursion
            if scan_state != RECURSION and delay_level:
                continue
            if scan_state == RECURSION and delay_level and delay_level > current_level:
                continue
            if criteria.constant:
                activated_now.append(item)
                continue
            keys = [k.strip() for k in criteria.keywords if k.strip()]
            groups = [
                ([k.strip() for k in g.keys if k.strip()], g.logic) for g in criteria.key_groups
            ]
            if not keys and not any(group_keys for group_keys, _ in groups):
                continue
            text_to_scan = buffer.get(entry, scan_state)
            if not text_to_scan:
                continue
            primary = next((k for k in keys if buffer.match_keys(text_to_scan, k, entry)), None)
            if primary is None:
                for group_keys, group_logic in groups:
                    if not group_keys:
                        continue
                    hits = [buffer.match_keys(text_to_scan, k, entry) for k in group_keys]
                    if all(hits) if group_logic == "AND" else any(hits):
                        primary = group_keys[0]
                        break
            if primary is None:
                continue
            secondary = [k.strip() for k in criteria.secondary_keywords if k.strip()]
            if not (criteria.selective and secondary):
                activated_now.append(item)
                continue
            logic = criteria.secondary_logic
            has_any, has_all, ok = False, True, False
            for key_text in secondary:
                hit = buffer.match_keys(text_to_scan, key_text, entry)
                has_any = has_any or hit
                has_all = has_all and hit
                if logic is SecondaryLogic.AND_ANY and hit:
                    ok = True
                    break
                if logic is SecondaryLogic.NOT_ALL and not hit:
                    ok = True
                    break
            if logic is SecondaryLogic.NOT_ANY and not has_any:
                ok = True
            if logic is SecondaryLogic.AND_ALL and has_all:
                ok = True
            if ok:
                activated_now.append(item)

        new_entries = list(activated_now)
        filter_by_inclusion_groups(new_entries, filled, buffer, scan_state, seed, count)
        ignores_budget = sum(x[1].usage_metadata.ignores_budget for x in new_entries)
        activated_texts: list[tuple[Entry, str]] = []
        text_to_scan_tokens = all_activated_tokens
        new_content_tokens = 0
        for item in new_entries:
            kb, entry = item
            key = (kb.kb_id, entry.id)
            critical = entry.usage_metadata.ignores_budget
            ignores_budget -= critical
            if overflowed and not critical:
                if ignores_budget > 0:
                    continue
                break
            probability = entry.activation_criteria.trigger_probability
            if probability < 1:
                roll = seeded_unit(seed, "probability", kb.kb_id, entry.id, count)
                if roll >= probability:
                    failed_probability.add(key)
                    continue
            content = render(kb, entry)
            new_content_tokens += count_tokens(content)
            if not critical and text_to_scan_tokens + new_content_tokens >= budget:
                overflowed = True
                continue
            all_activated[key] = item
            activated_texts.append((item, content))
            for group_name in _groups(entry):
                filled.setdefault(group_name, entry.displayName or entry.id)

        for_recursion = [
            text
            for item, text in activated_texts
            if not item[1].activation_criteria.prevent_recursion
        ]
        all_activated_tokens += sum(count_tokens(text) for text in for_recursion)
        if settings.recursive and not overflowed and for_recursion:
            next_state = RECURSION
        if (
            settings.recursive
            and not overflowed
            and scan_state == MIN_ACTIVATIONS
            and buffer.recurse_buffer
        ):
            next_state = RECURSION
        if (
            not next_state
            and not overflowed
            and settings.min_activations > 0
            and len(all_activated) < settings.min_activations
        ):
            depth = buffer.get_depth()
            over_max = (
                settings.min_activations_depth_max > 0
                and depth > settings.min_activations_depth_max
            ) or depth > len(chat)
            if not over_max:
                next_state = MIN_ACTIVATIONS
                buffer.skew += 1
        if not next_state and levels:
            next_state = RECURSION
            current_level = levels.pop(0)
        scan_state = next_state
        if scan_state:
            text = "\n".join(for_recursion)
            if text:
                buffer.recurse_buffer.append(text)
    return list(all_activated)
