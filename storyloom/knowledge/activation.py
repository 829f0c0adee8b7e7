"""The activation engine: which knowledge entries enter a prompt, and why.

It runs SillyTavern's World Info scan (``checkWorldInfo`` in ``world-info.js``) on CAIU
entries, plus the seed's additions, and explains every decision with :class:`Reason`\\ s.

One scan, as in SillyTavern:

1. Entries of all knowledge bases are ordered by ``usage_metadata.priority`` (SillyTavern's
   ``order``), highest first; ties keep knowledge-base order, then file order.
2. The scan text is the newest ``scan_depth`` messages (``"Name: text"`` with
   ``include_names``), plus, per entry, the character/persona fields it ``also_scan``\\ s,
   the request's ``extra_scan_texts`` (SillyTavern's scanned extension prompts) and, in
   recursion steps, the text of entries activated in earlier steps.
3. Step by step: an entry activates when it is ``constant``, sticky, its keys match
   (primary keys or a key group, then secondary keys by ``secondary_logic``), or its
   semantic score reaches its threshold, unless it is disabled, filtered by generation
   type or character, delayed, cooling down, used up (``once_per_session``) or its trigger
   conditions fail. ``delay_until_recursion`` entries wait for the recursion steps of
   their level; levels open one by one when a scan finds nothing more.
4. The step's matches are ordered sticky first, then by priority; inclusion groups keep
   one member per group (:mod:`inclusion_groups`); each remaining entry rolls its
   probability (sticky entries do not), then must fit the token budget
   (``context_percent`` of ``max_context_tokens``, at most ``budget_cap``) unless it is
   ``token_budget_impact == "critical"``. Once the budget overflows, only critical entries
   are still added and no recursion follows.
5. With ``recursive``, the text of the step's new entries (except ``prevent_recursion``
   ones) is scanned in the next step. When nothing new activates and ``min_activations``
   is not reached, the chat window grows by one message (recursion text is not scanned in
   such a step). ``max_recursion_steps`` bounds the number of steps (1: no recursion).
6. Active entries are returned in insertion order: ascending priority (the most
   important entry is closest to the end), ties in reverse activation order.

Matching: every plain key of every entry is in one Aho–Corasick automaton per case mode
(:mod:`keyword_matcher`); each message is scanned once per request, newest first, and
each key remembers the newest message it matched in, so an entry with its own scan depth
only checks "newest match < my depth". Recursion text is scanned once per step. Regex
keys are searched lazily, part by part (each message, field, step of recursion text),
and each result is kept for the rest of the request.

Where storyloom differs from SillyTavern, on purpose:

- probability and inclusion-group draws are seeded (:func:`seeded_unit` of the request's
  seed, the entry or group and the step): the same request gives the same result;
- the budget is the sum of the active entries' own token counts (cached by text); an
  entry fits while ``used + tokens <= budget`` (SillyTavern: ``< budget``, re-tokenising
  the joined text); every active entry counts (SillyTavern counts only text also used
  for recursion); only activated entries' text feeds recursion (SillyTavern also feeds
  entries the budget cut);
- ``exclude_recursion`` entries are matched against the chat part only, in every step
  (SillyTavern skips them in recursion steps);
- a regex key matches within one part of the scan text (a message, a character field,
  an extra text, one step's recursion text); SillyTavern searches the joined buffer,
  where a match may span messages and ``^`` never matches (the buffer starts with
  ``\\x01``);
- an invalid regex key is reported in :attr:`ActivationEngine.problems` and ignored
  (SillyTavern matches it as plain text); keys are trimmed, empty keys ignored, and keys
  are literal (no macros); CJK keys match as substrings (see :mod:`keyword_matcher`);
- seed additions: ``key_groups``, ``trigger_conditions``, semantic activation,
  ``once_per_session`` (sticky re-activations are exempt), placements beyond SillyTavern's;
- not supported: ``@@activate``/``@@dont_activate`` decorators and forced activations
  by extensions.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, Field

from storyloom.knowledge.activation_settings import MAX_SCAN_DEPTH, ActivationSettings
from storyloom.knowledge.caiu import CAIU, Placement, ScanSource, SecondaryLogic, TriggerCondition
from storyloom.knowledge.entry_text import injected_text
from storyloom.knowledge.inclusion_groups import GroupMember, filter_by_inclusion_groups
from storyloom.knowledge.keyword_matcher import KeywordMatcher, RegexKeyError, folds_oddly
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.timed_effects import (
    EntryKey,
    TimedConfig,
    TimedEffectsState,
    TimedStatus,
    check_timed_effects,
    is_delayed,
    record_activations,
)
from storyloom.knowledge.trigger_conditions import evaluate_conditions
from storyloom.knowledge.variables import apply_variables

__all__ = [
    "ActivatedEntry",
    "ActivationEngine",
    "ActivationRequest",
    "ActivationResult",
    "CharacterContext",
    "DroppedEntry",
    "KeyProblem",
    "Reason",
    "ScanMessage",
    "seeded_unit",
]

Outcome = Literal["activated", "kept", "dropped"]
Render = Callable[[KnowledgeBase, CAIU], str]

# SillyTavern's globalScanData order; each is a CharacterContext attribute.
SCAN_SOURCES: tuple[tuple[ScanSource, str, str], ...] = (
    ("persona_description", "persona_description", "persona description"),
    ("character_description", "description", "character description"),
    ("character_personality", "personality", "character personality"),
    ("character_depth_prompt", "depth_prompt", "character depth prompt"),
    ("scenario", "scenario", "scenario"),
    ("creator_notes", "creator_notes", "creator notes"),
)
_SOURCE_ORDER = {source: i for i, (source, _, _) in enumerate(SCAN_SOURCES)}
_SOURCE_ATTR = {source: attr for source, attr, _ in SCAN_SOURCES}
_SOURCE_LABEL = {source: label for source, _, label in SCAN_SOURCES}

_INITIAL, _RECURSION, _MIN_ACTIVATIONS = 1, 2, 3
_LOGIC_RULE = {
    SecondaryLogic.AND_ANY: "secondary_and_any",
    SecondaryLogic.NOT_ALL: "secondary_not_all",
    SecondaryLogic.NOT_ANY: "secondary_not_any",
    SecondaryLogic.AND_ALL: "secondary_and_all",
}
_TOKEN_CACHE_LIMIT = 100_000
_SNIPPET = 30


@dataclass(frozen=True, slots=True)
class ScanMessage:
    """One chat message as the scan sees it."""

    name: str
    text: str
    is_user: bool = False


class CharacterContext(BaseModel):
    """The character and persona of the chat: names, filters and ``also_scan`` texts."""

    name: str = ""
    description: str = ""
    personality: str = ""
    scenario: str = ""
    depth_prompt: str = ""
    creator_notes: str = ""
    persona_description: str = ""
    tags: list[str] = Field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class ActivationRequest:
    """Everything one scan depends on; the same request gives the same result."""

    messages: Sequence[ScanMessage] = ()
    """The chat, oldest first (at least the newest messages the scan needs)."""
    chat_length: int | None = None
    """Messages in the whole chat, for delay/sticky/cooldown; None: ``len(messages)``."""
    variables: Mapping[str, Any] = field(default_factory=dict)
    timed_state: TimedEffectsState = field(default_factory=TimedEffectsState)
    character: CharacterContext | None = None
    generation_type: str = "normal"
    max_context_tokens: int = 8192
    seed: int | str = 0
    semantic_scores: Mapping[tuple[str, str], float] = field(default_factory=dict)
    """Similarity per (kb_id, entry_id), computed by the caller."""
    extra_scan_texts: Sequence[str] = ()
    """More text scanned with the chat, e.g. an author's note that allows scanning."""


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


class KeyProblem(NamedTuple):
    """A key the engine could not use (it is ignored)."""

    kb_id: str
    entry_id: str
    field: str
    reason: str


def seeded_unit(*parts: object) -> float:
    """A number in [0, 1) fixed by ``parts``: the engine's replacement for Math.random."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


def _budget(settings: ActivationSettings, max_context_tokens: int) -> int:
    budget = math.floor(settings.context_percent * max_context_tokens / 100 + 0.5) or 1
    if settings.budget_cap > 0:
        budget = min(budget, settings.budget_cap)
    return budget


class _Entry:
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


class _Activation:
    __slots__ = ("kept", "match", "step", "text", "tokens", "where")

    def __init__(
        self,
        match: list[tuple[Any, ...]],
        where: tuple[int, bool, int],
        step: int,
        text: str,
        tokens: int,
        kept: list[Reason],
    ) -> None:
        self.match = match
        self.where = where
        self.step = step
        self.text = text
        self.tokens = tokens
        self.kept = kept


class ActivationEngine:
    """Compiles knowledge bases once; :meth:`activate` runs a scan (sync, pure).

    ``count_tokens`` defaults to the ``gpt-4o`` counter; ``render`` gives an entry's
    prompt text (default :func:`entry_text.injected_text`; plug reference resolution in
    here). ``{{variables}}`` in the rendered text are filled from the request.
    """

    def __init__(
        self,
        kbs: Sequence[KnowledgeBase],
        settings: ActivationSettings | None = None,
        *,
        count_tokens: Callable[[str], int] | None = None,
        render: Render | None = None,
    ) -> None:
        self.settings = settings or ActivationSettings()
        self.problems: list[KeyProblem] = []
        self.matcher = KeywordMatcher()
        self._count_tokens = count_tokens
        self._render: Render = render or injected_text
        self._token_cache: dict[str, int] = {}
        pairs = [(kb, entry) for kb in kbs for entry in kb.entries]
        ranked = sorted(pairs, key=lambda pair: -pair[1].usage_metadata.priority)
        owners: dict[int, list[int]] = {}
        always: list[int] = []
        self.entries: list[_Entry] = []
        for rank, (kb, caiu) in enumerate(ranked):
            entry = self._compile(rank, kb, caiu)
            self.entries.append(entry)
            regex_keys = any(code < 0 for code in entry.primary) or any(
                code < 0 for group in entry.groups for code in group[1]
            )
            if entry.constant or entry.semantic or regex_keys:
                always.append(rank)
            for code in itertools.chain(entry.primary, *(group[1] for group in entry.groups)):
                if code >= 0:
                    owners.setdefault(code, []).append(rank)
        self.matcher.build()
        self._owners: list[tuple[int, ...]] = [
            tuple(dict.fromkeys(owners.get(slot, ()))) for slot in range(len(self.matcher.slots))
        ]
        self._always = tuple(always)
        self._semantic = tuple(e.rank for e in self.entries if e.semantic)
        self._rank_by_key = {e.key: e.rank for e in self.entries}
        self._timed_configs = {
            e.key: TimedConfig(e.sticky, e.cooldown, e.once) for e in self.entries
        }
        enabled = [e for e in self.entries if e.enabled]
        self._max_entry_depth = max((e.depth for e in enabled if e.depth is not None), default=0)
        self._delay_levels = sorted({e.delay_recursion for e in enabled if e.delay_recursion})
        self._used_sources = frozenset(s for e in enabled for s in e.also_scan)

    def _key_code(self, key: str, entry: CAIU, kb: KnowledgeBase, path: str) -> int | None:
        text = key.strip()
        if not text:
            return None
        try:
            regex_id = self.matcher.add_regex(text)
        except RegexKeyError as exc:
            self.problems.append(KeyProblem(kb.kb_id, entry.id, path, str(exc)))
            return None
        if regex_id is not None:
            return ~regex_id
        criteria = entry.activation_criteria
        case = criteria.case_sensitive
        whole = criteria.match_whole_words
        return self.matcher.add_plain(
            text,
            case_sensitive=self.settings.case_sensitive if case is None else case,
            whole_words=self.settings.match_whole_words if whole is None else whole,
        )

    def _keys(
        self, keys: Sequence[str], caiu: CAIU, kb: KnowledgeBase, path: str
    ) -> tuple[tuple[int, ...], tuple[str, ...]]:
        codes: list[int] = []
        texts: list[str] = []
        for i, key in enumerate(keys):
            code = self._key_code(key, caiu, kb, f"{path}[{i}]")
            if code is not None:
                codes.append(code)
                texts.append(key.strip())
        return tuple(codes), tuple(texts)

    def _compile(self, rank: int, kb: KnowledgeBase, caiu: CAIU) -> _Entry:
        criteria = caiu.activation_criteria
        usage = caiu.usage_metadata
        e = _Entry()
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
        e.primary, e.primary_text = self._keys(criteria.keywords, caiu, kb, f"{path}.keywords")
        groups = []
        for i, group in enumerate(criteria.key_groups):
            codes, texts = self._keys(group.keys, caiu, kb, f"{path}.key_groups[{i}].keys")
            if codes:
                groups.append((group.logic == "AND", codes, texts, group.group_id or str(i + 1)))
        e.groups = tuple(groups)
        e.secondary, e.secondary_text = self._keys(
            criteria.secondary_keywords, caiu, kb, f"{path}.secondary_keywords"
        )
        e.selective = criteria.selective and bool(e.secondary)
        e.logic = criteria.secondary_logic
        e.depth = None if criteria.scan_depth is None else min(criteria.scan_depth, MAX_SCAN_DEPTH)
        e.also_scan = tuple(sorted(set(criteria.also_scan), key=_SOURCE_ORDER.__getitem__))
        e.exclude_recursion = criteria.exclude_recursion
        e.prevent_recursion = criteria.prevent_recursion
        e.delay_recursion = criteria.delay_until_recursion
        e.sticky = criteria.sticky
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
        e.semantic = criteria.use_semantic_search
        e.threshold = (
            self.settings.semantic_threshold_default
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
        return e

    def text_of(self, e: _Entry) -> str:
        """The entry's rendered text before variables (rendered once, then cached)."""
        template = e.template
        if template is None:
            template = self._render(e.kb, e.caiu)
            # has_variables first: another thread may read it as soon as template is set.
            e.has_variables = "{{" in template
            e.template = template
        return template

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text``, cached by text."""
        count = self._token_cache.get(text)
        if count is None:
            if self._count_tokens is None:
                from storyloom.llm.tokens import token_counter

                self._count_tokens = token_counter("gpt-4o").count
            if len(self._token_cache) >= _TOKEN_CACHE_LIMIT:
                self._token_cache.clear()
            count = self._token_cache[text] = self._count_tokens(text)
        return count

    def activate(self, request: ActivationRequest) -> ActivationResult:
        """Run one scan."""
        return _Run(self, request).run()


class _Run:
    """The state of one :meth:`ActivationEngine.activate` call."""

    def __init__(self, engine: ActivationEngine, request: ActivationRequest) -> None:
        self.engine = engine
        self.request = request
        self.settings = settings = engine.settings
        self.entries = engine.entries
        self.matcher = engine.matcher
        self.messages = request.messages
        self.chat_length = (
            len(request.messages) if request.chat_length is None else request.chat_length
        )
        self.texts: list[str] = []
        self.chat_first: dict[int, int] = {}
        self.candidates: set[int] = set(engine._always)
        self.depth = min(settings.scan_depth, MAX_SCAN_DEPTH)
        self.state = _INITIAL
        self.use_recursion = False
        self.chunks: list[tuple[str, list[tuple[int, str]]]] = []
        self.recursion_hits: set[int] = set()
        self.recursion_first: dict[int, int] = {}  # slot -> first chunk it is in
        self.inject_hits: set[int] = set()
        self.source_hits: dict[str, set[int]] = {}
        self.source_texts: dict[str, str] = {}
        # Regex keys are searched lazily, text by text, and the results kept.
        self.regex_first: dict[int, int] = {}
        self.regex_searched: dict[int, int] = {}
        self.regex_chunks: dict[int, tuple[int, int]] = {}  # (searched, found at or -1)
        self.regex_other: dict[tuple[int, str], bool] = {}
        self.fold_odd = False
        self.static: dict[int, Reason | None] = {}
        self.condition_detail: dict[int, str] = {}
        self.variables_text: dict[int, str] = {}
        self.timed: TimedStatus = check_timed_effects(
            request.timed_state, self.chat_length, engine._timed_configs
        )
        self.sticky: set[int] = set()
        for key in self.timed.sticky:
            rank = engine._rank_by_key.get(key)
            if rank is not None:
                self.sticky.add(rank)
                self.candidates.add(rank)
        self.semantic: dict[int, float] = {}
        scores = request.semantic_scores
        if scores:
            for rank in engine._semantic:
                e = self.entries[rank]
                score = scores.get(e.key)
                if score is not None and score >= e.threshold:
                    self.semantic[rank] = score

    # scanning ---------------------------------------------------------------

    def _add_owners(self, slots: Any) -> None:
        owners = self.engine._owners
        candidates = self.candidates
        for slot in slots:
            candidates.update(owners[slot])

    def ensure_depth(self, depth: int) -> None:
        """Scan messages until the newest ``depth`` are scanned."""
        messages = self.messages
        total = len(messages)
        depth = min(depth, total, MAX_SCAN_DEPTH)
        texts = self.texts
        if depth <= len(texts):
            return
        first = self.chat_first
        before = len(first)
        names = self.settings.include_names
        scan = self.matcher.scan_first
        for index in range(len(texts), depth):
            message = messages[total - 1 - index]
            text = (f"{message.name}: {message.text}" if names else message.text).strip()
            texts.append(text)
            scan(text, index, first)
            if not self.fold_odd and folds_oddly(text):
                self.drop_prefilter()
        if len(first) > before:
            self._add_owners(itertools.islice(first, before, None))

    def scan_context(self) -> None:
        request = self.request
        character = request.character
        if character is not None:
            for source in self.engine._used_sources:
                text = getattr(character, _SOURCE_ATTR[source])
                if text:
                    if not self.fold_odd and folds_oddly(text):
                        self.drop_prefilter()
                    self.source_texts[source] = text
                    hits = self.matcher.scan(text)
                    self.source_hits[source] = hits
                    self._add_owners(hits)
        for text in request.extra_scan_texts:
            if text:
                if not self.fold_odd and folds_oddly(text):
                    self.drop_prefilter()
                hits = self.matcher.scan(text)
                self.inject_hits |= hits
                self._add_owners(hits)

    def add_recursion(self, members: list[tuple[int, str]]) -> None:
        text = "\n".join(text for _, text in members)
        if not text:
            return
        if not self.fold_odd and folds_oddly(text):
            self.drop_prefilter()
        self.chunks.append((text, members))
        hits = self.matcher.scan(text)
        new = hits - self.recursion_hits
        if new:
            self.recursion_hits |= new
            chunk = len(self.chunks) - 1
            for slot in new:
                self.recursion_first[slot] = chunk
            self._add_owners(new)

    def drop_prefilter(self) -> None:
        """A text folds oddly: forget regex misses that relied on the literal prefilter."""
        self.fold_odd = True
        self.regex_searched = {
            r: n for r, n in self.regex_searched.items() if r in self.regex_first
        }
        self.regex_chunks = {r: v for r, v in self.regex_chunks.items() if v[1] >= 0}
        self.regex_other = {k: v for k, v in self.regex_other.items() if v}

    # matching ---------------------------------------------------------------

    def hit(self, code: int, e: _Entry, depth: int, recursion: bool) -> bool:
        if code >= 0:
            first = self.chat_first.get(code)
            if first is not None and first < depth:
                return True
            if code in self.inject_hits:
                return True
            for source in e.also_scan:
                hits = self.source_hits.get(source)
                if hits is not None and code in hits:
                    return True
            return recursion and code in self.recursion_hits
        return self.regex_hit(~code, e, depth, recursion)

    def regex_hit(self, regex_id: int, e: _Entry, depth: int, recursion: bool) -> bool:
        literal = -1 if self.fold_odd else self.matcher.regex_literals[regex_id]
        first = self.regex_first.get(regex_id)
        if first is None:
            searched = self.regex_searched.get(regex_id, 0)
            limit = min(depth, len(self.texts))
            if literal >= 0:
                # Newer messages than the literal's first one cannot match.
                seen = self.chat_first.get(literal)
                searched = max(searched, limit if seen is None else seen)
            if searched < limit:
                search = self.matcher.regex_search
                texts = self.texts
                for index in range(searched, limit):
                    if search(regex_id, texts[index]) is not None:
                        first = self.regex_first[regex_id] = index
                        limit = index + 1
                        break
                self.regex_searched[regex_id] = limit
        if first is not None and first < depth:
            return True
        if (
            self.request.extra_scan_texts
            and (literal < 0 or literal in self.inject_hits)
            and self._regex_other(regex_id, "")
        ):
            return True
        for source in e.also_scan:
            if (
                source in self.source_texts
                and (literal < 0 or literal in self.source_hits[source])
                and self._regex_other(regex_id, source)
            ):
                return True
        if not recursion or not self.chunks:
            return False
        searched, found = self.regex_chunks.get(regex_id, (0, -1))
        if found < 0 and literal >= 0 and literal not in self.recursion_hits:
            self.regex_chunks[regex_id] = (len(self.chunks), -1)
            return False
        if found < 0 and searched < len(self.chunks):
            search = self.matcher.regex_search
            for index in range(searched, len(self.chunks)):
                if search(regex_id, self.chunks[index][0]) is not None:
                    found = index
                    break
            self.regex_chunks[regex_id] = (len(self.chunks), found)
        return found >= 0

    def _regex_other(self, regex_id: int, source: str) -> bool:
        """A regex in a character field (``source``) or, for "", the extra scan texts."""
        key = (regex_id, source)
        found = self.regex_other.get(key)
        if found is None:
            texts = [self.source_texts[source]] if source else self.request.extra_scan_texts
            search = self.matcher.regex_search
            found = self.regex_other[key] = any(search(regex_id, t) is not None for t in texts)
        return found

    def where(self, e: _Entry) -> tuple[int, bool, int]:
        """(depth, recursion text included, recursion chunks) for ``e`` in this step."""
        depth = self.depth if e.depth is None else e.depth
        recursion = self.use_recursion and not e.exclude_recursion
        return depth, recursion, len(self.chunks) if recursion else 0

    def match(self, e: _Entry, sticky: bool) -> list[tuple[Any, ...]] | None:
        """Why ``e`` matches in this step, compactly; None when it does not."""
        if e.constant:
            return [("constant",)]
        if sticky:
            return [("sticky",)]
        found: list[tuple[Any, ...]] | None = None
        depth = self.depth if e.depth is None else e.depth
        if depth > 0 and (e.primary or e.groups):
            recursion = self.use_recursion and not e.exclude_recursion
            hit = self.hit
            for i, code in enumerate(e.primary):
                if hit(code, e, depth, recursion):
                    found = [("key", i)]
                    break
            else:
                for i, (need_all, codes, _, _) in enumerate(e.groups):
                    if need_all:
                        ok = all(hit(code, e, depth, recursion) for code in codes)
                    else:
                        ok = any(hit(code, e, depth, recursion) for code in codes)
                    if ok:
                        found = [("key_group", i)]
                        break
            if found is not None and e.selective:
                hits = [hit(code, e, depth, recursion) for code in e.secondary]
                logic = e.logic
                if logic is SecondaryLogic.AND_ANY:
                    ok = any(hits)
                elif logic is SecondaryLogic.NOT_ALL:
                    ok = not all(hits)
                elif logic is SecondaryLogic.NOT_ANY:
                    ok = not any(hits)
                else:
                    ok = all(hits)
                found = [*found, ("secondary", tuple(hits))] if ok else None
        if found is None:
            score = self.semantic.get(e.rank)
            if score is not None:
                found = [("semantic", score)]
        return found

    def score(self, rank: int) -> int:
        """SillyTavern's ``getScore``: matched keys, for group scoring."""
        e = self.entries[rank]
        if not e.primary and not e.groups:
            return 0
        depth, recursion, _ = self.where(e)
        if depth <= 0:
            return 0
        hit = self.hit
        primary = sum(hit(code, e, depth, recursion) for code in e.primary)
        for need_all, codes, _, _ in e.groups:
            hits = [hit(code, e, depth, recursion) for code in codes]
            primary += all(hits) if need_all else any(hits)
        if not e.secondary:
            return primary
        secondary = sum(hit(code, e, depth, recursion) for code in e.secondary)
        if e.logic is SecondaryLogic.AND_ANY:
            return primary + secondary
        if e.logic is SecondaryLogic.AND_ALL and secondary == len(e.secondary):
            return primary + secondary
        return primary

    def static_block(self, e: _Entry, sticky: bool) -> Reason | None:
        """A reason that keeps ``e`` out of this whole scan, or None."""
        request = self.request
        if not e.enabled:
            return Reason("disabled", "the entry is disabled", "dropped")
        if e.triggers and request.generation_type not in e.triggers:
            allowed = ", ".join(sorted(e.triggers))
            detail = f"only for {allowed} generations; this one is {request.generation_type}"
            return Reason("generation_type", detail, "dropped")
        if e.character_filter is not None:
            blocked = self._character_filtered(e.character_filter)
            if blocked:
                return Reason("character_filter", blocked, "dropped")
        if is_delayed(e.delay, self.chat_length):
            detail = f"waits until the chat has {e.delay} messages; it has {self.chat_length}"
            return Reason("delay", detail, "dropped")
        cooldown = self.timed.cooldown.get(e.key)
        if cooldown is not None and not sticky:
            detail = f"cooling down until the chat has {cooldown.end} messages"
            return Reason("cooldown", detail, "dropped")
        used = self.timed.used_once.get(e.key)
        if e.once and used is not None and not sticky:
            detail = f"once per session: already active when the chat had {used} messages"
            return Reason("once_per_session", detail, "dropped")
        if e.conditions:
            outcome = evaluate_conditions(e.conditions, request.variables)
            if not outcome.held:
                return Reason("trigger_condition", outcome.detail, "dropped")
            self.condition_detail[e.rank] = outcome.detail
        return None

    def _character_filtered(self, spec: tuple[frozenset[str], frozenset[str], bool]) -> str:
        names, tags, exclude = spec
        character = self.request.character
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

    def text(self, e: _Entry) -> str:
        text = self.variables_text.get(e.rank)
        if text is None:
            text = self.engine.text_of(e)
            if e.has_variables and self.request.variables:
                text = apply_variables(text, self.request.variables)
            self.variables_text[e.rank] = text
        return text

    # the scan ---------------------------------------------------------------

    def run(self) -> ActivationResult:
        engine = self.engine
        settings = self.settings
        request = self.request
        entries = self.entries
        seed = request.seed
        sticky_ranks = self.sticky
        budget = _budget(settings, request.max_context_tokens)
        self.ensure_depth(max(self.depth, engine._max_entry_depth))
        self.scan_context()

        levels = list(engine._delay_levels)
        level = levels.pop(0) if levels else 0
        activated: dict[int, _Activation] = {}
        dropped: dict[int, list[Reason]] = {}
        waiting: dict[int, list[Reason]] = {}
        failed: set[int] = set()
        blocked: set[int] = set()
        filled: dict[str, str] = {}
        used = 0
        overflowed = False
        step = 0
        skew = 0
        while self.state:
            if settings.max_recursion_steps and step >= settings.max_recursion_steps:
                break
            step += 1
            state = self.state
            self.use_recursion = state != _MIN_ACTIVATIONS
            matched: dict[int, list[tuple[Any, ...]]] = {}
            new: list[int] = []
            for rank in sorted(self.candidates):
                if rank in activated or rank in failed or rank in blocked:
                    continue
                e = entries[rank]
                sticky = rank in sticky_ranks
                reason = self.static.get(rank, _UNSET)
                if reason is _UNSET:
                    reason = self.static[rank] = self.static_block(e, sticky)
                if reason is not None:
                    found = self.match(e, sticky)
                    if found is not None:
                        dropped[rank] = [*self.describe(e, found, self.where(e)), reason]
                        blocked.add(rank)
                    continue
                if (
                    e.delay_recursion
                    and not sticky
                    and (state != _RECURSION or e.delay_recursion > level)
                ):
                    found = self.match(e, sticky)
                    if found is not None:
                        waiting[rank] = self.describe(e, found, self.where(e))
                    continue
                found = self.match(e, sticky)
                if found is None:
                    continue
                matched[rank] = found
                new.append(rank)
            if sticky_ranks:
                new.sort(key=lambda r: r not in sticky_ranks)

            won: dict[int, str] = {}
            grouped = [
                GroupMember(
                    rank,
                    entries[rank].name,
                    entries[rank].inclusion_groups,
                    entries[rank].group_override,
                    entries[rank].group_weight,
                    entries[rank].priority,
                    rank in sticky_ranks,
                    entries[rank].group_scoring,
                )
                for rank in new
                if entries[rank].inclusion_groups
            ]
            if grouped:
                outcome = filter_by_inclusion_groups(
                    grouped,
                    filled,
                    use_group_scoring=settings.use_group_scoring,
                    score=self.score,
                    roll=functools.partial(_group_roll, seed, step),
                )
                for rank, why in outcome.losers.items():
                    if rank in dropped:  # lost in an earlier step: keep the first reason
                        continue
                    e = entries[rank]
                    lost = Reason("inclusion_group", why, "dropped")
                    dropped[rank] = [*self.describe(e, matched[rank], self.where(e)), lost]
                new = [rank for rank in new if rank not in outcome.losers]
                won = outcome.winners

            critical_left = sum(entries[rank].critical for rank in new)
            for position, rank in enumerate(new):
                e = entries[rank]
                critical_left -= e.critical
                if overflowed and not e.critical:
                    cut = Reason(
                        "budget", f"the budget of {budget} tokens was already used up", "dropped"
                    )
                    dropped[rank] = [*self.describe(e, matched[rank], self.where(e)), cut]
                    if critical_left > 0:
                        continue
                    for later in new[position + 1 :]:
                        f = entries[later]
                        dropped[later] = [*self.describe(f, matched[later], self.where(f)), cut]
                    break
                kept: list[Reason] = []
                if rank in self.condition_detail:
                    kept.append(Reason("trigger_condition", self.condition_detail[rank], "kept"))
                if rank in won:
                    kept.append(Reason("inclusion_group", won[rank], "kept"))
                sticky = rank in sticky_ranks
                if e.probability < 1 and not sticky:
                    roll = seeded_unit(seed, "probability", e.kb_id, e.entry_id, step)
                    if roll >= e.probability:
                        failed.add(rank)
                        detail = f"rolled {roll:.3f}, needed below {e.probability:g}"
                        dropped[rank] = [
                            *self.describe(e, matched[rank], self.where(e)),
                            Reason("probability", detail, "dropped"),
                        ]
                        continue
                    detail = f"rolled {roll:.3f}, below {e.probability:g}"
                    kept.append(Reason("probability", detail, "kept"))
                text = self.text(e)
                tokens = engine.count_tokens(text)
                if e.critical:
                    kept.append(Reason("budget", "critical: outside the token budget", "kept"))
                elif used + tokens > budget:
                    overflowed = True
                    detail = f"needs {tokens} tokens; {used} of the budget of {budget} are used"
                    dropped[rank] = [
                        *self.describe(e, matched[rank], self.where(e)),
                        Reason("budget", detail, "dropped"),
                    ]
                    continue
                else:
                    used += tokens
                if step > 1:
                    kept.append(Reason("recursion", self._step_detail(step, state), "kept"))
                activated[rank] = _Activation(
                    matched[rank], self.where(e), step, text, tokens, kept
                )
                dropped.pop(rank, None)
                waiting.pop(rank, None)
                for group in e.inclusion_groups:
                    filled.setdefault(group, e.name)

            recursing = [
                (rank, activated[rank].text)
                for rank in new
                if rank in activated and not entries[rank].prevent_recursion
            ]
            next_state = 0
            if settings.recursive and not overflowed and recursing:
                next_state = _RECURSION
            if settings.recursive and not overflowed and state == _MIN_ACTIVATIONS and self.chunks:
                next_state = _RECURSION
            if (
                not next_state
                and not overflowed
                and settings.min_activations > 0
                and len(activated) < settings.min_activations
            ):
                reached = settings.scan_depth + skew
                deepest = settings.min_activations_depth_max
                if not ((deepest > 0 and reached > deepest) or reached > len(self.messages)):
                    next_state = _MIN_ACTIVATIONS
                    skew += 1
                    self.depth = min(settings.scan_depth + skew, MAX_SCAN_DEPTH)
                    self.ensure_depth(self.depth)
            if not next_state and levels:
                next_state = _RECURSION
                level = levels.pop(0)
            self.state = next_state
            if next_state:
                self.add_recursion(recursing)

        for rank, reasons in waiting.items():
            if rank not in activated:
                e = entries[rank]
                detail = (
                    f"waits for recursion level {e.delay_recursion}; "
                    f"the scan ended at level {level} after {step} step(s)"
                )
                dropped[rank] = [*reasons, Reason("delay_until_recursion", detail, "dropped")]
        return self._result(activated, dropped, used, budget, step, overflowed)

    @staticmethod
    def _step_detail(step: int, state: int) -> str:
        if state == _MIN_ACTIVATIONS:
            return f"found in scan step {step}, with a deeper chat window (min activations)"
        return f"found in scan step {step}, in the text of entries activated before"

    def _result(
        self,
        activated: dict[int, _Activation],
        dropped: dict[int, list[Reason]],
        used: int,
        budget: int,
        steps: int,
        overflowed: bool,
    ) -> ActivationResult:
        entries = self.entries
        order = sorted(activated, key=lambda rank: -entries[rank].priority)
        order.reverse()
        out: list[ActivatedEntry] = []
        for rank in order:
            e = entries[rank]
            info = activated[rank]
            reasons = self.describe(e, info.match, info.where)
            reasons.extend(info.kept)
            out.append(
                ActivatedEntry(
                    kb_id=e.kb_id,
                    entry_id=e.entry_id,
                    display_name=e.name,
                    text=info.text,
                    placement=e.placement,
                    depth=e.write_depth,
                    role=e.role,
                    outlet_name=e.outlet_name,
                    priority=e.priority,
                    tokens=info.tokens,
                    recursion_level=info.step - 1,
                    reasons=reasons,
                )
            )
        gone = [
            DroppedEntry(entries[rank].kb_id, entries[rank].entry_id, entries[rank].name, reasons)
            for rank, reasons in sorted(dropped.items())
            if rank not in activated
        ]
        timed_state = record_activations(
            self.timed.carried,
            self.chat_length,
            (entries[rank].key for rank in activated),
            self.engine._timed_configs,
        )
        warnings = []
        if overflowed and self.settings.overflow_alert:
            warnings.append(f"the lore budget of {budget} tokens was reached; entries were cut")
        return ActivationResult(
            activated=out,
            dropped=gone,
            timed_state=timed_state,
            tokens_used=used,
            budget=budget,
            recursion_steps=steps,
            budget_overflowed=overflowed,
            warnings=warnings,
        )

    # explanations -----------------------------------------------------------

    def describe(
        self, e: _Entry, match: list[tuple[Any, ...]], where: tuple[int, bool, int]
    ) -> list[Reason]:
        """The activating reasons of a compact match record, in words."""
        reasons: list[Reason] = []
        for item in match:
            kind = item[0]
            if kind == "constant":
                reasons.append(Reason("constant", "always active (constant)", "activated"))
            elif kind == "sticky":
                effect = self.timed.sticky[e.key]
                detail = f"sticky since the chat had {effect.start} messages, until {effect.end}"
                reasons.append(Reason("sticky", detail, "activated"))
            elif kind == "semantic":
                detail = f"semantic similarity {item[1]:.3f} reached the threshold {e.threshold:g}"
                reasons.append(Reason("semantic", detail, "activated"))
            elif kind == "key":
                code, key = e.primary[item[1]], e.primary_text[item[1]]
                rule = "regex_key" if code < 0 else "primary_key"
                label = "regex" if code < 0 else "key"
                detail = f'{label} "{key}" matched {self.locate(code, e, where)}'
                reasons.append(Reason(rule, detail, "activated"))
            elif kind == "key_group":
                need_all, codes, texts, group_id = e.groups[item[1]]
                hits = [
                    key
                    for code, key in zip(codes, texts, strict=True)
                    if self.hit_then(code, e, where)
                ]
                quoted = ", ".join(f'"{key}"' for key in hits)
                logic = "all keys" if need_all else "a key"
                detail = f"key group {group_id} ({logic}) matched: {quoted}"
                reasons.append(Reason("key_group", detail, "activated"))
            elif kind == "secondary":
                reasons.append(self._secondary_reason(e, item[1]))
        return reasons

    def _secondary_reason(self, e: _Entry, hits: tuple[bool, ...]) -> Reason:
        found = [k for k, hit in zip(e.secondary_text, hits, strict=True) if hit]
        missing = [k for k, hit in zip(e.secondary_text, hits, strict=True) if not hit]

        def quote(keys: list[str]) -> str:
            return ", ".join(f'"{k}"' for k in keys)

        logic = e.logic
        if logic is SecondaryLogic.AND_ANY:
            detail = f"and secondary key {quote(found[:1])} matched (AND ANY)"
        elif logic is SecondaryLogic.NOT_ALL:
            detail = f"and secondary key {quote(missing[:1])} did not match (NOT ALL)"
        elif logic is SecondaryLogic.NOT_ANY:
            detail = f"and none of the secondary keys {quote(missing)} matched (NOT ANY)"
        else:
            detail = f"and all secondary keys {quote(found)} matched (AND ALL)"
        return Reason(_LOGIC_RULE[logic], detail, "activated")

    def hit_then(self, code: int, e: _Entry, where: tuple[int, bool, int]) -> bool:
        """Whether ``code`` matched for ``e`` in the step described by ``where``."""
        depth, recursion, chunks = where
        if code < 0:
            regex_id = ~code
            first = self.regex_first.get(regex_id)
            if first is not None and first < depth:
                return True
            chunk = self.regex_chunks.get(regex_id, (0, -1))[1]
            if recursion and 0 <= chunk < chunks:
                return True
            # Extra texts and character fields do not change during a scan.
            return self.hit(code, e, depth, False)
        if not self.hit(code, e, depth, False):
            return recursion and self.recursion_first.get(code, chunks) < chunks
        return True

    def locate(self, code: int, e: _Entry, where: tuple[int, bool, int]) -> str:
        """Where a key matched, as '"…the red dragon…" in message 12 (Alice)'."""
        depth, recursion, chunks = where
        first = self.chat_first.get(code) if code >= 0 else self.regex_first.get(~code)
        places: list[tuple[str, str]] = []
        if first is not None and first < depth:
            places.append((self._message_label(first), self.texts[first]))
        places.extend(("the extra scanned text", t) for t in self.request.extra_scan_texts)
        for source in e.also_scan:
            if source in self.source_texts:
                places.append((f"the {_SOURCE_LABEL[source]}", self.source_texts[source]))
        if recursion:
            if code >= 0:
                chunk = self.recursion_first.get(code, -1)
            else:
                chunk = self.regex_chunks.get(~code, (0, -1))[1]
            if 0 <= chunk < chunks:
                for rank, text in self.chunks[chunk][1]:
                    places.append((f"the text of entry {self.entries[rank].name}", text))
        for label, text in places:
            if code >= 0:
                span = self.matcher.find(code, text)
                if span is not None and not self.matcher.slots[code].case_sensitive:
                    lowered = text.lower()
                    text = lowered if len(lowered) != len(text) else text
            else:
                span = self.matcher.regex_search(~code, text)
            if span is not None:
                return f'"{_snippet(text, *span)}" in {label}'
        return "in the scanned text"

    def _message_label(self, index: int) -> str:
        message = self.messages[len(self.messages) - 1 - index]
        number = self.chat_length - 1 - index
        return f"message {number} ({message.name})" if message.name else f"message {number}"


_UNSET: Any = object()


def _group_roll(seed: int | str, step: int, group: str) -> float:
    return seeded_unit(seed, "group", group, step)


def _snippet(text: str, start: int, end: int) -> str:
    left = max(0, start - _SNIPPET)
    right = min(len(text), end + _SNIPPET)
    body = text[left:right].replace("\n", " ")
    return f"{'…' if left else ''}{body}{'…' if right < len(text) else ''}"
