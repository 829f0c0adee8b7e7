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
keys search the joined scan text, built once per (window, character fields, recursion
steps), and only when the regex's literal occurs in one of its parts; each result is
kept for the rest of the request. Dropped entries keep a compact match record: their
reasons in words are built when read (:class:`DroppedEntry`).

This module holds the engine and the step loop (points 3 to 6 above). The rest of a scan
lives beside it: :mod:`activation_request` and :mod:`activation_result` (what a scan is
asked and answers), :mod:`compiled_entry` (entries as the scan reads them),
:mod:`scan_buffer` (the scanned text and the key matching), :mod:`activation_filters`
(what keeps an entry out of a whole scan) and :mod:`activation_reasons` (the reasons in
words).

Where storyloom differs from SillyTavern, on purpose:

- probability and inclusion-group draws are seeded (:func:`seeded_unit` of the request's
  seed, the entry or group and the step): the same request gives the same result;
- tokens are counted per entry text (cached by text) and summed; SillyTavern re-counts
  the joined text. The rule is SillyTavern's: an entry is cut once the tokens charged by
  earlier steps (the text they passed to recursion, so not ``prevent_recursion``
  entries) plus this step's entries so far, itself included, reach the budget;
- only activated entries' text feeds recursion (SillyTavern also feeds entries the
  budget cut when a delayed recursion level opens after the budget ran out);
- ``exclude_recursion`` entries are matched against the chat part only, in every step
  (SillyTavern skips them in recursion steps);
- an invalid regex key is reported in :attr:`ActivationEngine.problems` and ignored
  (SillyTavern matches it as plain text); keys are trimmed, empty keys ignored, and keys
  are literal (no macros);
- semantic activation compares a calibrated similarity (:mod:`activation_calibration`)
  and only in books with ``vector_activation`` on.

As in SillyTavern, regex keys search the joined scan text (``\\x01`` before every part,
parts joined by newlines: a match may span messages, ``^`` never matches at a message's
start) and whole-word matching uses JavaScript's ASCII word characters (see
:mod:`keyword_matcher`).
- seed additions: ``key_groups``, ``trigger_conditions``, semantic activation,
  ``once_per_session`` (sticky re-activations are exempt), placements beyond SillyTavern's;
- decorators (``@@activate``, ``@@dont_activate``, ``@@depth``...) are read at import
  into the entry's fields (:mod:`st_decorators`), not at scan time; a knowledge base's own
  ``token_budget`` (a Character Card V3 book's) cuts its entries inside the global budget;
- not supported: forced activations by extensions.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from storyloom.knowledge.activation_filters import static_block
from storyloom.knowledge.activation_reasons import describe
from storyloom.knowledge.activation_request import (
    ActivationRequest,
    CharacterContext,
    ScanMessage,
)
from storyloom.knowledge.activation_result import (
    ActivatedEntry,
    ActivationResult,
    DroppedBrief,
    DroppedEntries,
    DroppedEntry,
    Reason,
    ReasonValue,
)
from storyloom.knowledge.activation_settings import MAX_SCAN_DEPTH, ActivationSettings
from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.compiled_entry import CompiledEntry, compile_entry
from storyloom.knowledge.entry_text import injected_text, with_affixes
from storyloom.knowledge.inclusion_groups import (
    GroupMember,
    GroupVerdict,
    filter_by_inclusion_groups,
)
from storyloom.knowledge.keyword_matcher import KeywordMatcher, UnusableKeyError
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.scan_buffer import Match, ScanBuffer
from storyloom.knowledge.timed_effects import (
    TimedConfig,
    TimedStatus,
    check_timed_effects,
    record_activations,
)
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

Render = Callable[[KnowledgeBase, CAIU], str]

_INITIAL, _RECURSION, _MIN_ACTIVATIONS = 1, 2, 3
_TOKEN_CACHE_LIMIT = 100_000

_Cut = tuple[Match, tuple[int, bool, int], list[Reason]]
"""A dropped entry's match record, where it matched, and the reasons it was dropped."""


class _Drops:
    """Dropped (or waiting) entries by rank: their :data:`_Cut` records, kept in three
    dicts. A scan of a big book over its budget drops thousands of entries; storing no
    object per entry keeps the garbage collector from walking them all again and again."""

    __slots__ = ("match", "tail", "where")

    def __init__(self) -> None:
        self.match: dict[int, Match] = {}
        self.where: dict[int, tuple[int, bool, int]] = {}
        self.tail: dict[int, list[Reason]] = {}

    def __setitem__(self, rank: int, cut: _Cut) -> None:
        self.match[rank], self.where[rank], self.tail[rank] = cut

    def __getitem__(self, rank: int) -> _Cut:
        return self.match[rank], self.where[rank], self.tail[rank]

    def __contains__(self, rank: object) -> bool:
        return rank in self.match

    def pop(self, rank: int, default: None = None) -> None:
        if self.match.pop(rank, None) is not None:
            del self.where[rank], self.tail[rank]

    def ranks(self) -> list[int]:
        return sorted(self.match)


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


class _Activation:
    __slots__ = ("kept", "match", "step", "text", "tokens", "where")

    def __init__(
        self,
        match: Match,
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
    here). ``{{variables}}`` in the rendered text are filled from the request. ``kb_rank``
    orders whole books before priority (lower first; missing: 0).
    """

    def __init__(
        self,
        kbs: Sequence[KnowledgeBase],
        settings: ActivationSettings | None = None,
        *,
        count_tokens: Callable[[str], int] | None = None,
        render: Render | None = None,
        kb_rank: Mapping[str, int] | None = None,
    ) -> None:
        self.settings = settings or ActivationSettings()
        self.problems: list[KeyProblem] = []
        self.matcher = KeywordMatcher()
        self._count_tokens = count_tokens
        self._render: Render = render or injected_text
        self._token_cache: dict[str, int] = {}
        pairs = [(kb, entry) for kb in kbs for entry in kb.entries]
        # kb_rank (lower first) groups the books by lore scope before priority, as
        # SillyTavern's insertion strategy does (chat lore, persona lore, then the rest).
        rank_of = kb_rank or {}
        ranked = sorted(
            pairs,
            key=lambda pair: (rank_of.get(pair[0].kb_id, 0), -pair[1].usage_metadata.priority),
        )
        owners: dict[int, list[int]] = {}
        always: list[int] = []
        self.entries: list[CompiledEntry] = []
        for rank, (kb, caiu) in enumerate(ranked):
            entry = compile_entry(rank, kb, caiu, self.settings, self._keys)
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
        except UnusableKeyError as exc:
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

    def text_of(self, e: CompiledEntry) -> str:
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
    """One :meth:`ActivationEngine.activate` call: the step loop, inclusion groups,
    probability and the token budget over what its :class:`ScanBuffer` matches."""

    def __init__(self, engine: ActivationEngine, request: ActivationRequest) -> None:
        self.engine = engine
        self.request = request
        self.settings = settings = engine.settings
        self.entries = entries = engine.entries
        self.chat_length = (
            len(request.messages) if request.chat_length is None else request.chat_length
        )
        self.state = _INITIAL
        self.static: dict[int, Reason | None] = {}
        self.conditions_held: dict[int, Reason] = {}
        self.variables_text: dict[int, str] = {}
        self.timed: TimedStatus = check_timed_effects(
            request.timed_state, self.chat_length, engine._timed_configs
        )
        candidates: set[int] = set(engine._always)
        self.sticky: set[int] = set()
        for key in self.timed.sticky:
            rank = engine._rank_by_key.get(key)
            if rank is not None:
                self.sticky.add(rank)
                candidates.add(rank)
        semantic: dict[int, float] = {}
        scores = request.semantic_scores
        if scores:
            for rank in engine._semantic:
                e = entries[rank]
                score = scores.get(e.key)
                if score is not None and score >= e.threshold:
                    semantic[rank] = score
        self.scan = ScanBuffer(
            request,
            entries=entries,
            matcher=engine.matcher,
            owners=engine._owners,
            used_sources=engine._used_sources,
            include_names=settings.include_names,
            chat_length=self.chat_length,
            depth=min(settings.scan_depth, MAX_SCAN_DEPTH),
            candidates=candidates,
            semantic=semantic,
        )
        self.explain = functools.partial(describe, self.scan, self.timed.sticky)

    def text(self, e: CompiledEntry) -> str:
        text = self.variables_text.get(e.rank)
        if text is None:
            rendered = self.request.template_texts.get(e.key)
            if rendered is not None:
                # The template's output stands for the content (prefix and suffix kept).
                text = with_affixes(e.caiu, rendered)
                if "{{" in text and self.request.variables:
                    text = apply_variables(text, self.request.variables)
                self.variables_text[e.rank] = text
                return text
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
        scan = self.scan
        match, where = scan.match, scan.where
        budget = _budget(settings, request.max_context_tokens)
        scan.ensure_depth(max(scan.depth, engine._max_entry_depth))
        scan.scan_context()

        levels = list(engine._delay_levels)
        level = levels.pop(0) if levels else 0
        activated: dict[int, _Activation] = {}
        # Dropped and waiting entries keep their compact match record; the reasons in
        # words are built only when someone reads them (DroppedEntry.reasons).
        dropped = _Drops()
        waiting = _Drops()
        cut_tail: list[Reason] = []  # shared by every entry cut after the budget ran out
        # Without cooldowns or once-per-session marks, a simple entry is never blocked.
        untimed = not self.timed.cooldown and not self.timed.used_once
        failed: set[int] = set()
        blocked: set[int] = set()
        filled: dict[str, str] = {}
        used = 0  # tokens of the active entries the budget counts (reported)
        # SillyTavern's textToScanTokens: what earlier steps charge to the budget, i.e.
        # the text of their entries that feeds recursion (prevent_recursion ones do not).
        charged = 0
        book_used: dict[str, int] = {}
        overflowed = False
        step = 0
        skew = 0
        while self.state:
            if settings.max_recursion_steps and step >= settings.max_recursion_steps:
                break
            step += 1
            state = self.state
            scan.use_recursion = state != _MIN_ACTIVATIONS
            matched: dict[int, Match] = {}
            new: list[int] = []
            for rank in sorted(scan.candidates):
                if rank in activated or rank in failed or rank in blocked:
                    continue
                e = entries[rank]
                sticky = rank in sticky_ranks
                simple = e.simple and untimed and e.key not in request.template_excluded
                reason = None if simple else self.static.get(rank, _UNSET)
                if reason is _UNSET:
                    reason = self.static[rank] = static_block(
                        e, sticky, request, self.chat_length, self.timed, self.conditions_held
                    )
                if reason is not None:
                    found = match(e, sticky)
                    if found is not None:
                        dropped[rank] = (found, where(e), [reason])
                        blocked.add(rank)
                    continue
                if (
                    e.delay_recursion
                    and not sticky
                    and (state != _RECURSION or e.delay_recursion > level)
                ):
                    found = match(e, sticky)
                    if found is not None:
                        waiting[rank] = (found, where(e), [])
                    continue
                found = match(e, sticky)
                if found is None:
                    continue
                matched[rank] = found
                new.append(rank)
            if sticky_ranks:
                new.sort(key=lambda r: r not in sticky_ranks)

            won: dict[int, GroupVerdict] = {}
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
                    score=scan.score,
                    roll=functools.partial(_group_roll, seed, step),
                )
                for rank, why in outcome.losers.items():
                    if rank in dropped:  # lost in an earlier step: keep the first reason
                        continue
                    lost = Reason("inclusion_group", why.detail, "dropped", why.term, why.values)
                    dropped[rank] = (matched[rank], where(entries[rank]), [lost])
                new = [rank for rank in new if rank not in outcome.losers]
                won = outcome.winners

            critical_left = sum(entries[rank].critical for rank in new)
            # SillyTavern's newContent: every entry of this step that passed its roll,
            # critical ones too, counts against the entries after it.
            step_tokens = 0
            for position, rank in enumerate(new):
                e = entries[rank]
                critical_left -= e.critical
                if overflowed and not e.critical:
                    if not cut_tail:
                        used_up = f"the budget of {budget} tokens was already used up"
                        cut_tail.append(
                            Reason(
                                "budget", used_up, "dropped", "budget_used_up", {"budget": budget}
                            )
                        )
                    dropped[rank] = (matched[rank], where(e), cut_tail)
                    if critical_left > 0:
                        continue
                    for later in new[position + 1 :]:
                        dropped[later] = (matched[later], where(entries[later]), cut_tail)
                    break
                kept: list[Reason] = []
                if rank in self.conditions_held:
                    kept.append(self.conditions_held[rank])
                if rank in won:
                    how = won[rank]
                    kept.append(Reason("inclusion_group", how.detail, "kept", how.term, how.values))
                sticky = rank in sticky_ranks
                if e.probability < 1 and not sticky:
                    roll = seeded_unit(seed, "probability", e.kb_id, e.entry_id, step)
                    if roll >= e.probability:
                        failed.add(rank)
                        detail = f"rolled {roll:.3f}, needed below {e.probability:g}"
                        rolled = {"roll": round(roll, 3), "chance": e.probability}
                        dropped[rank] = (
                            matched[rank],
                            where(e),
                            [
                                Reason(
                                    "probability", detail, "dropped", "probability_failed", rolled
                                )
                            ],
                        )
                        continue
                    detail = f"rolled {roll:.3f}, below {e.probability:g}"
                    rolled = {"roll": round(roll, 3), "chance": e.probability}
                    kept.append(Reason("probability", detail, "kept", "probability_passed", rolled))
                text = self.text(e)
                tokens = engine.count_tokens(text)
                step_tokens += tokens
                if e.critical:
                    critical = "critical: outside the token budget"
                    kept.append(Reason("budget", critical, "kept", "budget_critical"))
                elif charged + step_tokens >= budget:
                    overflowed = True
                    counted = charged + step_tokens - tokens
                    detail = f"needs {tokens} tokens; {counted} of the budget of {budget} are used"
                    need: dict[str, ReasonValue] = {
                        "tokens": tokens,
                        "used": counted,
                        "budget": budget,
                    }
                    cut = Reason("budget", detail, "dropped", "budget_needs", need)
                    dropped[rank] = (matched[rank], where(e), [cut])
                    continue
                elif (
                    e.kb.token_budget is not None
                    and book_used.get(e.kb_id, 0) + tokens > e.kb.token_budget
                ):
                    # A book's own budget (Character Card V3) cuts only that book's entries.
                    step_tokens -= tokens  # not in the prompt: not charged globally either
                    detail = (
                        f"needs {tokens} tokens; {book_used.get(e.kb_id, 0)} of its book's"
                        f" budget of {e.kb.token_budget} are used"
                    )
                    need = {
                        "tokens": tokens,
                        "used": book_used.get(e.kb_id, 0),
                        "budget": e.kb.token_budget,
                    }
                    cut = Reason("budget", detail, "dropped", "budget_book_needs", need)
                    dropped[rank] = (matched[rank], where(e), [cut])
                    continue
                else:
                    used += tokens
                    book_used[e.kb_id] = book_used.get(e.kb_id, 0) + tokens
                if step > 1:
                    kept.append(self._step_reason(step, state))
                activated[rank] = _Activation(matched[rank], where(e), step, text, tokens, kept)
                dropped.pop(rank, None)
                waiting.pop(rank, None)
                for group in e.inclusion_groups:
                    filled.setdefault(group, e.name)

            recursing = [
                (rank, activated[rank].text)
                for rank in new
                if rank in activated and not entries[rank].prevent_recursion
            ]
            charged += sum(activated[rank].tokens for rank, _ in recursing)
            next_state = 0
            if settings.recursive and not overflowed and recursing:
                next_state = _RECURSION
            if settings.recursive and not overflowed and state == _MIN_ACTIVATIONS and scan.chunks:
                next_state = _RECURSION
            if (
                not next_state
                and not overflowed
                and settings.min_activations > 0
                and len(activated) < settings.min_activations
            ):
                reached = settings.scan_depth + skew
                deepest = settings.min_activations_depth_max
                if not ((deepest > 0 and reached > deepest) or reached > len(request.messages)):
                    next_state = _MIN_ACTIVATIONS
                    skew += 1
                    scan.depth = min(settings.scan_depth + skew, MAX_SCAN_DEPTH)
                    scan.ensure_depth(scan.depth)
            if not next_state and levels:
                next_state = _RECURSION
                level = levels.pop(0)
            self.state = next_state
            if next_state:
                scan.add_recursion(recursing)

        for rank in waiting.ranks():
            if rank not in activated:
                e = entries[rank]
                detail = (
                    f"waits for recursion level {e.delay_recursion}; "
                    f"the scan ended at level {level} after {step} step(s)"
                )
                values: dict[str, ReasonValue] = {
                    "level": e.delay_recursion,
                    "reached": level,
                    "steps": step,
                }
                late = Reason(
                    "delay_until_recursion", detail, "dropped", "delay_until_recursion", values
                )
                found, at, _ = waiting[rank]
                dropped[rank] = (found, at, [late])
        return self._result(activated, dropped, used, budget, step, overflowed)

    def _explain_cut(self, rank: int, cut: _Cut) -> list[Reason]:
        found, where, tail = cut
        return [*self.explain(self.entries[rank], found, where), *tail]

    def _dropped_entry(self, ranks: list[int], dropped: _Drops, index: int) -> DroppedEntry:
        rank = ranks[index]
        e = self.entries[rank]
        explain = functools.partial(self._explain_cut, rank, dropped[rank])
        return DroppedEntry(e.kb_id, e.entry_id, e.name, explain, cut=dropped.tail[rank])

    def _dropped_brief(self, ranks: list[int], dropped: _Drops, index: int) -> DroppedBrief:
        rank = ranks[index]
        e = self.entries[rank]
        return e.kb_id, e.entry_id, e.name, dropped.tail[rank]

    @staticmethod
    def _step_reason(step: int, state: int) -> Reason:
        if state == _MIN_ACTIVATIONS:
            detail = f"found in scan step {step}, with a deeper chat window (min activations)"
            return Reason("recursion", detail, "kept", "recursion_min_activations", {"step": step})
        detail = f"found in scan step {step}, in the text of entries activated before"
        return Reason("recursion", detail, "kept", "recursion_step", {"step": step})

    def _result(
        self,
        activated: dict[int, _Activation],
        dropped: _Drops,
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
            reasons = self.explain(e, info.match, info.where)
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
        ranks = [rank for rank in dropped.ranks() if rank not in activated]
        gone = DroppedEntries(
            len(ranks),
            functools.partial(self._dropped_entry, ranks, dropped),
            functools.partial(self._dropped_brief, ranks, dropped),
        )
        timed_state = record_activations(
            self.timed.carried,
            self.chat_length,
            (entries[rank].key for rank in activated),
            self.engine._timed_configs,
        )
        # SillyTavern cuts in the same order (sticky first, then priority): a constant
        # entry of low priority is cut before keyword entries of higher priority, so
        # the player is told which constant ones went.
        budget_cut = [
            rank
            for rank in ranks
            if any(reason.term in _GLOBAL_BUDGET_CUTS for reason in dropped.tail[rank])
        ]
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
            budget_cut=len(budget_cut),
            budget_cut_constant=[
                entries[rank].name or entries[rank].entry_id
                for rank in sorted(budget_cut)
                if entries[rank].constant
            ],
        )


_UNSET: Any = object()
_GLOBAL_BUDGET_CUTS = frozenset({"budget_needs", "budget_used_up"})


def _group_roll(seed: int | str, step: int, group: str) -> float:
    return seeded_unit(seed, "group", group, step)
