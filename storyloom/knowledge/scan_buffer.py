"""The text one activation scan reads, and where each key of each entry matched in it.

A :class:`ScanBuffer` scans each chat message once, newest first, with the engine's
:class:`KeywordMatcher` and remembers, per plain key, the newest message it matched in;
character fields, extra texts and each recursion step's text are scanned once too. Regex
keys are searched lazily, part by part, and each result is kept for the rest of the
scan. :meth:`ScanBuffer.match` says whether an entry's keys (primary, key groups,
secondary by its logic) or its semantic score activate it in the current step;
:meth:`ScanBuffer.locate` finds the words a key matched, for the explanation.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any

from storyloom.knowledge.activation_request import SCAN_SOURCES, ActivationRequest
from storyloom.knowledge.activation_result import ReasonValue
from storyloom.knowledge.activation_settings import MAX_SCAN_DEPTH
from storyloom.knowledge.caiu import ScanSource, SecondaryLogic
from storyloom.knowledge.compiled_entry import CompiledEntry
from storyloom.knowledge.keyword_matcher import KeywordMatcher, folds_oddly

_SOURCE_ATTR = {source: attr for source, attr, _ in SCAN_SOURCES}
_SOURCE_LABEL: dict[str, str] = {source: label for source, _, label in SCAN_SOURCES}
Place = dict[str, ReasonValue]
"""Where a part of the scan text comes from: ``{"place": "message", "number": 12,
"speaker": "Alice"}``, ``{"place": "source", "source": "scenario"}``, ``{"place": "extra"}``,
``{"place": "entry", "entry": name}``, ``{"place": "recursion"}``; see :func:`place_words`."""
_SNIPPET = 30
# SillyTavern's WorldInfoBuffer: every part of the scan text starts with \x01.
_MATCHER = "\x01"
_JOINER = "\n" + _MATCHER
_JoinKey = tuple[int, tuple[ScanSource, ...], int]
"""(messages, character fields, recursion steps) of one joined scan text."""

Match = tuple[tuple[Any, ...], ...]
"""Why an entry matched, compactly: ``(("key", 0),)``, ``(("constant",),)``…"""
# A scan of a big book matches thousands of entries; shared records keep it from
# allocating (and the garbage collector from walking) one record per entry.
_SHARED = 32
_KEY_HITS: tuple[Match, ...] = tuple((("key", i),) for i in range(_SHARED))
_GROUP_HITS: tuple[Match, ...] = tuple((("key_group", i),) for i in range(_SHARED))
_CONSTANT: Match = (("constant",),)
_STICKY: Match = (("sticky",),)


class ScanBuffer:
    """The scanned text and key matches of one :meth:`ActivationEngine.activate` call.

    ``depth`` is the chat window of the current step and ``use_recursion`` whether the
    recursion text counts in it; the scan loop moves both.
    """

    def __init__(
        self,
        request: ActivationRequest,
        *,
        entries: Sequence[CompiledEntry],
        matcher: KeywordMatcher,
        owners: Sequence[tuple[int, ...]],
        used_sources: frozenset[ScanSource],
        include_names: bool,
        chat_length: int,
        depth: int,
        candidates: set[int],
        semantic: dict[int, float],
    ) -> None:
        self.request = request
        self.entries = entries
        self.matcher = matcher
        self.owners = owners
        self.used_sources = used_sources
        self.include_names = include_names
        self.messages = request.messages
        self.chat_length = chat_length
        self.depth = depth
        self.use_recursion = False
        self.candidates = candidates
        """Ranks of the entries that may match: an owner of a key found, or always."""
        self.semantic = semantic
        """Rank → similarity, for entries whose score reached their threshold."""
        self.texts: list[str] = []
        self.chat_first: dict[int, int] = {}
        self.chunks: list[tuple[str, list[tuple[int, str]]]] = []
        self.recursion_hits: set[int] = set()
        self.recursion_first: dict[int, int] = {}  # slot -> first chunk it is in
        self.inject_hits: set[int] = set()
        self.source_hits: dict[str, set[int]] = {}
        self.source_texts: dict[str, str] = {}
        # Regex keys search the joined scan text, as SillyTavern's do; each joined text
        # (window, the entry's character fields, recursion steps) is built once, and each
        # regex searched once per joined text.
        self.joined: dict[_JoinKey, str] = {}
        self.regex_found: dict[tuple[int, _JoinKey], bool] = {}
        self.fold_odd = False

    # scanning ---------------------------------------------------------------

    def _add_owners(self, slots: Iterable[int]) -> None:
        owners = self.owners
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
        names = self.include_names
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
            for source in self.used_sources:
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
        self.regex_found = {k: v for k, v in self.regex_found.items() if v}

    def joined_parts(self, e: CompiledEntry, depth: int, chunks: int) -> list[tuple[Place, str]]:
        """The parts of the text SillyTavern's ``WorldInfoBuffer.get`` gives ``e``, in its
        order, as (place, text): the newest ``depth`` messages, the character fields
        ``e`` also scans, the extra texts, then ``chunks`` recursion steps."""
        depth = min(depth, len(self.texts))
        parts = [(self.message_place(i), self.texts[i]) for i in range(depth)]
        for source in e.also_scan:
            text = self.source_texts.get(source)
            if text:
                parts.append(({"place": "source", "source": source}, text))
        parts.extend(({"place": "extra"}, t) for t in self.request.extra_scan_texts if t)
        parts.extend(({"place": "recursion"}, c[0]) for c in self.chunks[:chunks])
        return parts

    def joined_text(self, e: CompiledEntry, depth: int, chunks: int) -> str:
        """SillyTavern's scan text for ``e``: every part after ``\x01``, joined by newlines
        (so ``^`` never matches at a message's start, and a match may span messages)."""
        key = (min(depth, len(self.texts)), e.also_scan, chunks)
        text = self.joined.get(key)
        if text is None:
            parts = self.joined_parts(e, depth, chunks)
            text = self.joined[key] = _MATCHER + _JOINER.join(t for _, t in parts)
        return text

    # matching ---------------------------------------------------------------

    def hit(self, code: int, e: CompiledEntry, depth: int, recursion: bool) -> bool:
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

    def regex_hit(self, regex_id: int, e: CompiledEntry, depth: int, recursion: bool) -> bool:
        chunks = len(self.chunks) if recursion else 0
        key = (regex_id, (min(depth, len(self.texts)), e.also_scan, chunks))
        found = self.regex_found.get(key)
        if found is None:
            literal = -1 if self.fold_odd else self.matcher.regex_literals[regex_id]
            if literal >= 0 and not self.hit(literal, e, depth, recursion):
                # A text without the regex's literal cannot match it (the joiner adds only
                # "\n\x01", which no literal holds).
                found = False
            else:
                text = self.joined_text(e, depth, chunks)
                found = self.matcher.regex_search(regex_id, text) is not None
            self.regex_found[key] = found
        return found

    def where(self, e: CompiledEntry) -> tuple[int, bool, int]:
        """(depth, recursion text included, recursion chunks) for ``e`` in this step."""
        depth = self.depth if e.depth is None else e.depth
        recursion = self.use_recursion and not e.exclude_recursion
        return depth, recursion, len(self.chunks) if recursion else 0

    def match(self, e: CompiledEntry, sticky: bool) -> Match | None:
        """Why ``e`` matches in this step, compactly; None when it does not."""
        if e.constant:
            return _CONSTANT
        if sticky:
            return _STICKY
        found: Match | None = None
        depth = self.depth if e.depth is None else e.depth
        if depth > 0 and (e.primary or e.groups):
            recursion = self.use_recursion and not e.exclude_recursion
            hit = self.hit
            for i, code in enumerate(e.primary):
                if hit(code, e, depth, recursion):
                    found = _KEY_HITS[i] if i < _SHARED else (("key", i),)
                    break
            else:
                for i, (need_all, codes, _, _) in enumerate(e.groups):
                    if need_all:
                        ok = all(hit(code, e, depth, recursion) for code in codes)
                    else:
                        ok = any(hit(code, e, depth, recursion) for code in codes)
                    if ok:
                        found = _GROUP_HITS[i] if i < _SHARED else (("key_group", i),)
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
                found = (*found, ("secondary", tuple(hits))) if ok else None
        if found is None:
            score = self.semantic.get(e.rank)
            if score is not None:
                found = (("semantic", score),)
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

    def hit_then(self, code: int, e: CompiledEntry, where: tuple[int, bool, int]) -> bool:
        """Whether ``code`` matched for ``e`` in the step described by ``where``."""
        depth, recursion, chunks = where
        if code < 0:
            text = self.joined_text(e, depth, chunks if recursion else 0)
            return self.matcher.regex_search(~code, text) is not None
        if not self.hit(code, e, depth, False):
            return recursion and self.recursion_first.get(code, chunks) < chunks
        return True

    def locate(self, code: int, e: CompiledEntry, where: tuple[int, bool, int]) -> Place:
        """Where a key matched: its place and the words around it (``snippet``), e.g.
        ``{"place": "message", "number": 12, "speaker": "Alice", "snippet": "…red dragon…"}``;
        ``{"place": "scanned"}`` when the words are not found again."""
        depth, recursion, chunks = where
        if code < 0:
            return self._locate_regex(~code, e, depth, chunks if recursion else 0)
        first = self.chat_first.get(code)
        places: list[tuple[Place, str]] = []
        if first is not None and first < depth:
            places.append((self.message_place(first), self.texts[first]))
        places.extend(({"place": "extra"}, t) for t in self.request.extra_scan_texts)
        for source in e.also_scan:
            if source in self.source_texts:
                places.append(({"place": "source", "source": source}, self.source_texts[source]))
        if recursion:
            chunk = self.recursion_first.get(code, -1)
            if 0 <= chunk < chunks:
                for rank, text in self.chunks[chunk][1]:
                    places.append(({"place": "entry", "entry": self.entries[rank].name}, text))
        for place, text in places:
            span = self.matcher.find(code, text)
            if span is not None and not self.matcher.slots[code].case_sensitive:
                lowered = text.lower()
                text = lowered if len(lowered) != len(text) else text
            if span is not None:
                return {**place, "snippet": _snippet(text, *span)}
        return {"place": "scanned"}

    def _locate_regex(self, regex_id: int, e: CompiledEntry, depth: int, chunks: int) -> Place:
        """Where a regex matched the joined text: the part its match starts in."""
        parts = self.joined_parts(e, depth, chunks)
        text = _MATCHER + _JOINER.join(t for _, t in parts)
        span = self.matcher.regex_search(regex_id, text)
        if span is None:
            return {"place": "scanned"}
        offset = len(_MATCHER)
        for place, part in parts:
            end = offset + len(part)
            if span[0] < end + len(_JOINER):
                start = max(span[0] - offset, 0)
                stop = min(span[1] - offset, len(part))
                located: Place = {**place, "snippet": _snippet(part, start, max(stop, start))}
                if span[1] > end:
                    located["across"] = 1
                return located
            offset = end + len(_JOINER)
        return {"place": "scanned"}

    def message_place(self, index: int) -> Place:
        message = self.messages[len(self.messages) - 1 - index]
        number = message.number
        if number is None:
            number = self.chat_length - 1 - index
        return {"place": "message", "number": number, "speaker": message.name or ""}


def place_words(at: Place) -> str:
    """Where a key matched, in English: '"…the red dragon…" in message 12 (Alice)'."""
    match at["place"]:
        case "message":
            where = f"message {at['number']}" + (f" ({at['speaker']})" if at["speaker"] else "")
        case "source":
            where = f"the {_SOURCE_LABEL.get(str(at['source']), str(at['source']))}"
        case "extra":
            where = "the extra scanned text"
        case "entry":
            where = f"the text of entry {at['entry']}"
        case "recursion":
            where = "the text of entries activated before"
        case _:
            return "in the scanned text"
    across = " (and the parts after it)" if at.get("across") else ""
    return f'"{at["snippet"]}" in {where}{across}'


def _snippet(text: str, start: int, end: int) -> str:
    left = max(0, start - _SNIPPET)
    right = min(len(text), end + _SNIPPET)
    body = text[left:right].replace("\n", " ")
    return f"{'…' if left else ''}{body}{'…' if right < len(text) else ''}"
