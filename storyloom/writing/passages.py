"""Passages: a chapter's text cut into paragraph windows, and the keyword index over them.

Role A reads the manuscript itself, not only what curation made of it: the paragraphs
that name the scene's people and things carry the facts a scene needs (an eye colour
said once in passing, where a ledger was hidden). A passage is a span of one version of
a chapter's L2, so it is named by the chapter's URI plus ``#p=<start>-<end>`` (character
offsets) and rebuilds byte for byte from (uri, L2, version).

Cutting a chapter into passages, counting its words and tokens, is a pure function of
the chapter's text, cached per (book, path, version) for the life of the process: a new
state version of the book re-reads only the chapters that changed.
:func:`prepare_passages` does that work ahead of time (the curation index step calls it
for the chapters it indexes), so the first context after a curation is not the one that
pays for it.

Scoring is BM25 over the passages of the chapters before the one being written, with the
document frequencies of those chapters only (text from the story's future never moves a
score), plus a weight for each of the scene's entities a passage names by any of its
names or aliases.
"""

from __future__ import annotations

import bisect
import math
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from storyloom.writing.book_store import BookStore
from storyloom.writing.tokens import count_tokens
from storyloom.writing.uris import is_under

PASSAGE_MIN_CHARS = 320
"""Shorter paragraphs join the next one (a line of dialogue alone carries little)."""
PASSAGE_MAX_CHARS = 1_400
"""Longer paragraphs split at sentence ends (about 350 tokens of English)."""

_FRAGMENT = re.compile(r"#p=(\d+)-(\d+)$")
_BLOCK = re.compile(r"[^\n]*\S[^\n]*(?:\n[^\n]*\S[^\n]*)*")
"""A run of non-blank lines: one paragraph."""
_SENTENCE_END = re.compile(r"(?<=[.!?。！？…])[\"'”’」』)\]]*\s*")

_WORD = re.compile(r"[a-z][a-z'\-]{2,}")
_HAN_RUN = re.compile(r"[\u3400-\u9fff]{2,}")
_STOP = frozenset(
    re.findall(
        r"\w+",
        "the and for with that this from into about over after before then than they them"
        " their there were was are his her him she has had have not but you your our its"
        " who what when where which while will would could should chapter scene write"
        " writes writing",
    )
)


def terms(text: str) -> frozenset[str]:
    """Keywords for scoring: Latin words of 3+ letters without stopwords, and Chinese
    character bigrams (no segmenter needed, and deterministic)."""
    return frozenset(term_counts(text))


def term_counts(text: str) -> Counter[str]:
    folded = text.casefold()
    counts: Counter[str] = Counter(w for w in _WORD.findall(folded) if w not in _STOP)
    for run in _HAN_RUN.findall(folded):
        counts.update(run[i : i + 2] for i in range(len(run) - 1))
    return counts


def split_passages(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` spans of ``text``: paragraphs, short ones joined to the next and
    long ones cut at sentence ends; each span starts and ends on a non-space."""
    pieces: list[tuple[int, int]] = []
    for block in _BLOCK.finditer(text):
        start, end = block.start(), block.end()
        start += len(block.group()) - len(block.group().lstrip())
        end -= len(block.group()) - len(block.group().rstrip())
        if end - start <= PASSAGE_MAX_CHARS:
            pieces.append((start, end))
            continue
        cut = start
        for stop in _SENTENCE_END.finditer(text, start, end):
            if stop.start() - cut >= PASSAGE_MAX_CHARS // 2 and stop.start() > cut:
                pieces.append((cut, stop.start()))
                cut = stop.end()
        if cut < end:
            pieces.append((cut, end))
    out: list[tuple[int, int]] = []
    for start, end in pieces:
        body = text[start:end]
        stripped = body.strip()
        if not stripped:
            continue
        start += len(body) - len(body.lstrip())
        end = start + len(stripped)
        if out and out[-1][1] - out[-1][0] < PASSAGE_MIN_CHARS:
            out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    if len(out) > 1 and out[-1][1] - out[-1][0] < PASSAGE_MIN_CHARS // 2:
        last = out.pop()
        out[-1] = (out[-1][0], last[1])
    return out


def passage_uri(chapter_uri: str, start: int, end: int) -> str:
    return f"{chapter_uri}#p={start}-{end}"


def split_passage_uri(uri: str) -> tuple[str, tuple[int, int] | None]:
    """``(uri without the fragment, (start, end))``; no fragment: ``(uri, None)``."""
    found = _FRAGMENT.search(uri)
    if found is None:
        return uri, None
    return uri[: found.start()], (int(found.group(1)), int(found.group(2)))


@dataclass(frozen=True)
class ChapterPassages:
    """One version of one chapter, cut and counted."""

    spans: tuple[tuple[int, int], ...]
    counts: tuple[Mapping[str, int], ...]
    lengths: tuple[int, ...]
    """Keywords per passage (BM25's document length)."""
    tokens: tuple[int, ...]
    doc_freq: Mapping[str, int]
    """In how many of this chapter's passages each keyword occurs."""


def cut_chapter(text: str) -> ChapterPassages:
    spans = tuple(split_passages(text))
    counts = tuple(term_counts(text[s:e]) for s, e in spans)
    doc_freq: Counter[str] = Counter()
    for c in counts:
        doc_freq.update(c.keys())
    return ChapterPassages(
        spans=spans,
        counts=counts,
        lengths=tuple(sum(c.values()) for c in counts),
        tokens=tuple(count_tokens(text[s:e]) for s, e in spans),
        doc_freq=doc_freq,
    )


_CACHE_LIMIT = 8_192
_cache_lock = threading.Lock()
_cut_cache: OrderedDict[tuple[str, str, str, int], ChapterPassages] = OrderedDict()


def chapter_passages(
    database_key: str, book_id: str, path: str, version: int, text: Callable[[], str]
) -> ChapterPassages:
    """The passages of ``path`` at ``version`` (``text`` reads it when not cached)."""
    key = (database_key, book_id, path, version)
    with _cache_lock:
        found = _cut_cache.get(key)
        if found is not None:
            _cut_cache.move_to_end(key)
            return found
    built = cut_chapter(text())
    with _cache_lock:
        _cut_cache[key] = built
        while len(_cut_cache) > _CACHE_LIMIT:
            _cut_cache.popitem(last=False)
    return built


@dataclass(frozen=True)
class IndexedChapter:
    path: str
    ordinal: int
    version: int
    passages: ChapterPassages


@dataclass(frozen=True)
class PassageHit:
    path: str
    version: int
    start: int
    end: int
    ordinal: int
    tokens: int
    score: float
    named: tuple[str, ...]
    """The scene entities the passage names."""
    words: tuple[str, ...]
    """Query keywords it has."""


class PassageIndex:
    """Postings over the passages of a set of chapters, in chapter order, so that the
    passages before any chapter are a prefix."""

    K1 = 1.2
    B = 0.75

    def __init__(self, chapters: Sequence[IndexedChapter]) -> None:
        self.chapters = sorted(chapters, key=lambda c: (c.ordinal, c.path))
        self._first: list[int] = []
        self._owner: list[int] = []
        postings: dict[str, list[int]] = {}
        total = 0
        self._length_sums = [0]
        for ci, ch in enumerate(self.chapters):
            self._first.append(total)
            for local, counts in enumerate(ch.passages.counts):
                self._owner.append(ci)
                for term in counts:
                    postings.setdefault(term, []).append(total + local)
                self._length_sums.append(self._length_sums[-1] + ch.passages.lengths[local])
            total += len(ch.passages.spans)
        self._first.append(total)
        self._postings = postings
        self._ordinals = [c.ordinal for c in self.chapters]
        self._chapter_index = {c.path: i for i, c in enumerate(self.chapters)}

    def _passage(self, index: int) -> tuple[IndexedChapter, int]:
        ch = self.chapters[self._owner[index]]
        return ch, index - self._first[self._owner[index]]

    def of_chapter(self, path: str) -> list[PassageHit]:
        """Every passage of one chapter, in order, unscored."""
        out: list[PassageHit] = []
        ci = self._chapter_index.get(path)
        if ci is not None:
            ch = self.chapters[ci]
            for (start, end), tokens in zip(ch.passages.spans, ch.passages.tokens, strict=True):
                out.append(
                    PassageHit(ch.path, ch.version, start, end, ch.ordinal, tokens, 0.0, (), ())
                )
        return out

    def search(
        self,
        before: int,
        query: Iterable[str],
        entity_names: Mapping[str, Sequence[frozenset[str]]],
        *,
        entity_weight: float,
        exclude: frozenset[str] = frozenset(),
    ) -> list[PassageHit]:
        """Passages of chapters with ordinal < ``before`` (and not in ``exclude``) that
        have a query keyword or name a scene entity, best first.

        ``entity_names``: entity path → the keyword sets of its names; a passage names
        the entity when it holds every keyword of one of them."""
        cut_chapter_index = bisect.bisect_left(self._ordinals, before)
        limit = self._first[cut_chapter_index]
        if limit == 0:
            return []
        skipped = [ci for ci in range(cut_chapter_index) if self.chapters[ci].path in exclude]
        count = limit - sum(len(self.chapters[ci].passages.spans) for ci in skipped)
        length = self._length_sums[limit] - sum(
            sum(self.chapters[ci].passages.lengths) for ci in skipped
        )
        if count <= 0:
            return []
        average = max(length / count, 1.0)
        skip_set = frozenset(skipped)

        def live(postings: list[int]) -> list[int]:
            found = postings[: bisect.bisect_left(postings, limit)]
            if not skip_set:
                return found
            return [p for p in found if self._owner[p] not in skip_set]

        scores: dict[int, float] = {}
        words: dict[int, list[str]] = {}
        for term in sorted(set(query)):
            hits = live(self._postings.get(term, []))
            if not hits:
                continue
            idf = math.log(1.0 + (count - len(hits) + 0.5) / (len(hits) + 0.5))
            for p in hits:
                ch, local = self._passage(p)
                tf = ch.passages.counts[local][term]
                norm = self.K1 * (1 - self.B + self.B * ch.passages.lengths[local] / average)
                scores[p] = scores.get(p, 0.0) + idf * tf * (self.K1 + 1) / (tf + norm)
                words.setdefault(p, []).append(term)
        named: dict[int, list[str]] = {}
        for path in entity_names:
            holders: set[int] = set()
            for name in entity_names[path]:
                if not name:
                    continue
                lists = sorted((live(self._postings.get(t, [])) for t in name), key=len)
                found = set(lists[0])
                for other in lists[1:]:
                    found.intersection_update(other)
                holders |= found
            for p in holders:
                scores[p] = scores.get(p, 0.0) + entity_weight
                named.setdefault(p, []).append(path)
        out: list[PassageHit] = []
        for p, score in scores.items():
            ch, local = self._passage(p)
            start, end = ch.passages.spans[local]
            out.append(
                PassageHit(
                    ch.path,
                    ch.version,
                    start,
                    end,
                    ch.ordinal,
                    ch.passages.tokens[local],
                    score,
                    tuple(named.get(p, ())),
                    tuple(words.get(p, ())),
                )
            )
        out.sort(key=lambda h: (-h.score, -h.ordinal, h.path, h.start))
        return out


__all__ = [
    "PASSAGE_MAX_CHARS",
    "PASSAGE_MIN_CHARS",
    "ChapterPassages",
    "IndexedChapter",
    "PassageHit",
    "PassageIndex",
    "chapter_passages",
    "cut_chapter",
    "passage_uri",
    "prepare_passages",
    "split_passage_uri",
    "split_passages",
    "term_counts",
    "terms",
]


def prepare_passages(store: BookStore, book_id: str, paths: Sequence[str] | None = None) -> int:
    """Cut the newest text of the book's chapters (those under ``paths``, or all) into
    passages ahead of the first context that needs them; returns how many chapters."""
    done = 0
    for path, level in sorted(store.latest_levels(book_id, "L2", under="/manuscript").items()):
        if paths is not None and not any(is_under(path, p) for p in paths):
            continue
        chapter_passages(
            str(store.database.path), book_id, path, level.version, partial(str, level.text)
        )
        done += 1
    return done
