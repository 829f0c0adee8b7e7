"""Role A: the context a generating node sees, under a hard token budget (seed 002).

``assemble_context`` is a pure function of the request and the book's state version:
it reads only level rows stamped at or before that version, and only what is valid
before the chapter being written (rows with ``as_of_chapter < chapter``, entities and
relations from earlier chapters, earlier chapters). The same request at the same
version gives the same bytes, which is what lets a node cache on it.

The plan follows seed 002's 层次化检索: always ``/meta``; the scene's entities (named in
the prompt or outline, or given by intent analysis) with their profiles as of the
chapter before; the profiles the scene type calls for; relation links one hop; the
chapters in brief (arc summaries first past ``chapter_scan_limit`` chapters); the best
chapters' overviews, then one or two in full. As OpenViking's budget assembler does, a
piece too big for what is left falls back to a cheaper level, never to cut text, and
budget left over upgrades the best pieces and then takes more candidates, so a budget
the candidates exceed is nearly filled.

Every piece is rendered as ``<<uri level vN>>`` plus the level's text, so the context
can be rebuilt byte for byte from its sources (:func:`rebuild_context`).
"""

from __future__ import annotations

import bisect
import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Literal, cast

from storyloom.core.errors import NotFound
from storyloom.store.database import Database
from storyloom.workflow.node_type import ContextSource
from storyloom.writing.book_store import (
    ENTITY_KINDS,
    LEVELS,
    BookStore,
    Level,
    Relation,
    Resource,
)
from storyloom.writing.passages import (
    IndexedChapter,
    PassageHit,
    PassageIndex,
    chapter_passages,
    passage_uri,
    split_passage_uri,
    terms,
)
from storyloom.writing.profiles import profile_path, subject_of
from storyloom.writing.scene_entities import EntityMatcher
from storyloom.writing.tokens import count_tokens
from storyloom.writing.uris import invalid, is_under, parse_uri, resource_uri

SceneType = Literal["any", "dialogue", "action", "emotional", "exposition"]
SCENE_TYPES: tuple[SceneType, ...] = ("any", "dialogue", "action", "emotional", "exposition")

SCENE_PROFILE_FOLDERS: Mapping[SceneType, tuple[str, ...]] = {
    "any": ("world-state", "plot-threads"),
    "dialogue": ("characters", "emotional-arcs"),
    "action": ("world-state", "locations"),
    "emotional": ("emotional-arcs", "themes"),
    "exposition": ("world-state", "plot-threads"),
}
"""Which profile folders each kind of scene reads (seed 002 多角度组装)."""


@dataclass(frozen=True)
class ContextRequest:
    book_id: str
    chapter: int
    """The chapter being written: the context sees only what comes before it."""
    prompt: str = ""
    outline: str = ""
    scene_type: SceneType = "any"
    entities: tuple[str, ...] | None = None
    """Entity paths from intent analysis; None: the names and aliases in prompt and outline."""
    budget_tokens: int = 25_000
    state_version: int | None = None
    """The book as it stood at this version; None: as it stands now."""


@dataclass(frozen=True)
class AssemblySettings:
    chapter_scan_limit: int = 300
    """Past this many earlier chapters, arc summaries come before chapter L0s."""
    best_chapters: int = 4
    deep_chapters: int = 2
    recent_chapters: int = 5
    best_arcs: int = 2
    planned_links: int = 12
    """Relation links planned for sure; further ones only take leftover budget."""
    passage_share: float = 0.5
    """The share of the budget the plan gives to passages of earlier chapters; better
    ones beyond it come before anything is widened."""
    entity_weight: float = 6.0
    """What naming one of the scene's entities adds to a passage's score (a keyword
    match adds its BM25 weight, about 1 to 8)."""


DEFAULT_SETTINGS = AssemblySettings()


@dataclass(frozen=True)
class ContextPiece:
    uri: str
    path: str
    level: Level
    version: int
    reason: str
    text: str
    """The rendered piece (:func:`render_piece`), as it appears in the context."""
    tokens: int
    """Its own count (the context's count is taken on the joined text, which may differ
    by a token where pieces meet)."""


@dataclass(frozen=True)
class AssembledContext:
    book_id: str
    chapter: int
    state_version: int
    budget_tokens: int
    pieces: tuple[ContextPiece, ...]
    text: str
    tokens: int
    candidate_tokens: int
    """What every candidate at its richest level would have cost (the demand)."""

    def sources(self) -> list[ContextSource]:
        return [
            ContextSource(uri=p.uri, reason=p.reason, level=p.level, version=p.version)
            for p in self.pieces
        ]


def render_piece(uri: str, level: Level, version: int, text: str) -> str:
    return f"<<{uri} {level} v{version}>>\n{text.rstrip()}\n\n"


def rebuild_context(store: BookStore, sources: Sequence[ContextSource]) -> str:
    """The context text again, from each source's (uri, level, version)."""
    out: list[str] = []
    for source in sources:
        base, span = split_passage_uri(source.uri)
        book_id, path = parse_uri(base)
        if source.version is None:
            raise invalid("version", f"{source.uri} {source.level}: a source needs its version")
        row = store.level(book_id, path, source.level, version=source.version)
        if row is None:
            raise NotFound(f"{source.uri} has no {source.level} version {source.version}")
        text = row.text
        if span is not None:
            start, end = span
            if not 0 <= start < end <= len(text):
                raise invalid("uri", f"{source.uri}: the passage is outside the text")
            text = text[start:end]
        out.append(render_piece(source.uri, source.level, source.version, text))
    return "".join(out)


# -- the book at one state version ---------------------------------------------------


@dataclass(frozen=True)
class _Row:
    path: str
    level: Level
    version: int
    as_of: int
    tokens: int
    text: str | None
    """None for big texts read only when chosen (chapter and profile L2)."""


_PIECE_SLACK = 2
"""Tokens allowed per piece for BPE merges at its edges; the joined text is counted
exactly at the end anyway."""
_terms = terms
_MIN_PASSAGE_TOKENS = 40
"""Below this much budget left, no passage is looked for."""


class _View:
    """The rows valid before one chapter: ``(path, level)`` → row."""

    def __init__(self, rows: dict[tuple[str, Level], _Row]) -> None:
        self.rows = rows

    def get(self, path: str, level: Level) -> _Row | None:
        return self.rows.get((path, level))

    def levels(self, path: str, top: Level = "L2") -> tuple[Level, ...]:
        """The levels ``path`` has, cheapest first, up to ``top``."""
        limit = LEVELS.index(top)
        return tuple(lv for lv in LEVELS[: limit + 1] if (path, lv) in self.rows)


class _Snapshot:
    """Everything assembly reads of one book at one state version, immutable once
    built; per-chapter views and derived indexes are cached inside it."""

    def __init__(self, store: BookStore, book_id: str, state_version: int) -> None:
        self.store = store
        self.book_id = book_id
        self.state_version = state_version
        self._lock = threading.Lock()
        series: dict[tuple[str, Level], list[_Row]] = {}
        rows = store.database.connection().execute(
            "SELECT path, level, version, as_of_chapter, tokens, CASE WHEN level != 'L2'"
            " OR path LIKE '/meta/%' OR path LIKE '/entities/%' OR path LIKE '/summaries/%'"
            " THEN text END FROM writing_level WHERE book_id = ? AND state_version <= ?"
            " ORDER BY path, level, as_of_chapter, version",
            (book_id, state_version),
        )
        for path, level, version, as_of, tokens, text in rows:
            series.setdefault((path, level), []).append(
                _Row(path, level, version, as_of, tokens, text)
            )
        self._series = series
        self._as_ofs = {key: [r.as_of for r in rs] for key, rs in series.items()}
        written = {path for path, _ in series}
        self.resources: dict[str, Resource] = {
            r.path: r for r in store.resources(book_id, state_version=state_version)
        }
        self.chapters = sorted(
            (r for r in self.resources.values() if r.kind == "chapter"),
            key=lambda r: (r.ordinal, r.path),
        )
        self.arcs = sorted(
            (r for r in self.resources.values() if r.kind == "arc"),
            key=lambda r: (r.ordinal, r.path),
        )
        self.meta = sorted(
            (r for r in self.resources.values() if r.path.startswith("/meta/")),
            key=lambda r: (r.ordinal, r.path),
        )
        self.profiles = sorted(
            (r for r in self.resources.values() if r.path.startswith("/profiles/")),
            key=lambda r: r.path,
        )
        self.profile_of: dict[str, str] = {}
        for profile in self.profiles:
            subject = subject_of(profile)
            if subject is not None:
                self.profile_of.setdefault(subject, profile.path)
        candidates = sorted(
            (
                r
                for r in self.resources.values()
                if r.kind in ENTITY_KINDS and r.path.startswith("/entities/")
            ),
            key=lambda r: r.path,
        )
        for entity in candidates:
            fallback = profile_path(entity)
            if entity.path not in self.profile_of and fallback in self.resources:
                self.profile_of[entity.path] = fallback
        # Resources carry no version of their own: one with no text at this version (its
        # own or its profile's: curation may know an entity only through its facts) did
        # not exist yet as far as this state is concerned.
        self.entities = [
            r for r in candidates if r.path in written or self.profile_of.get(r.path, "") in written
        ]
        self.relations: list[Relation] = store.relations(book_id, state_version=state_version)
        self.matcher = EntityMatcher(self.entities)
        self._views: OrderedDict[int, _View] = OrderedDict()
        self._big_texts: dict[tuple[str, Level, int], str] = {}
        self._row_terms: dict[tuple[str, Level, int], frozenset[str]] = {}
        self._row_mentions: dict[tuple[str, Level, int], frozenset[str]] = {}
        self._header_tokens: dict[tuple[str, Level, int], int] = {}
        self._passage_headers: dict[tuple[str, int, int, int], int] = {}
        self._passages: PassageIndex | None = None

    def passage_index(self) -> PassageIndex:
        """Every chapter's newest text at this state, cut into passages (built once)."""
        with self._lock:
            if self._passages is not None:
                return self._passages
        database_key = str(self.store.database.path)
        indexed: list[IndexedChapter] = []
        for ch in self.chapters:
            series = self._series.get((ch.path, "L2"))
            if not series:
                continue
            row = series[-1]
            cut = chapter_passages(
                database_key, self.book_id, ch.path, row.version, partial(self.text, row)
            )
            indexed.append(IndexedChapter(ch.path, ch.ordinal, row.version, cut))
        built = PassageIndex(indexed)
        with self._lock:
            self._passages = built
        return built

    def view(self, chapter: int) -> _View:
        with self._lock:
            cached = self._views.get(chapter)
            if cached is not None:
                self._views.move_to_end(chapter)
                return cached
        rows: dict[tuple[str, Level], _Row] = {}
        for key, series in self._series.items():
            index = bisect.bisect_left(self._as_ofs[key], chapter) - 1
            if index >= 0:
                rows[key] = series[index]
        view = _View(rows)
        with self._lock:
            self._views[chapter] = view
            while len(self._views) > 32:
                self._views.popitem(last=False)
        return view

    def text(self, row: _Row) -> str:
        if row.text is not None:
            return row.text
        key = (row.path, row.level, row.version)
        found = self._big_texts.get(key)
        if found is None:
            level = self.store.level(self.book_id, row.path, row.level, version=row.version)
            if level is None:  # deleted since the snapshot was taken
                raise NotFound(f"{row.path} {row.level} v{row.version} is gone")
            found = level.text
            with self._lock:
                self._big_texts[key] = found
        return found

    def terms(self, row: _Row) -> frozenset[str]:
        key = (row.path, row.level, row.version)
        found = self._row_terms.get(key)
        if found is None:
            found = _terms(self.text(row))
            self._row_terms[key] = found
        return found

    def mentions(self, row: _Row) -> frozenset[str]:
        key = (row.path, row.level, row.version)
        found = self._row_mentions.get(key)
        if found is None:
            found = self.matcher.names_in([self.text(row)])
            self._row_mentions[key] = found
        return found

    def passage_estimate(self, hit: PassageHit) -> int:
        # Asked of every hit, and again each time the planner weighs one: its header
        # is counted once per snapshot.
        key = (hit.path, hit.start, hit.end, hit.version)
        header = self._passage_headers.get(key)
        if header is None:
            uri = passage_uri(resource_uri(self.book_id, hit.path), hit.start, hit.end)
            header = count_tokens(f"<<{uri} L2 v{hit.version}>>\n")
            self._passage_headers[key] = header
        return header + hit.tokens + _PIECE_SLACK

    def passage_text(self, hit: PassageHit) -> str:
        row = _Row(hit.path, "L2", hit.version, 0, 0, None)
        return self.text(row)[hit.start : hit.end]

    def piece_estimate(self, row: _Row) -> int:
        key = (row.path, row.level, row.version)
        header = self._header_tokens.get(key)
        if header is None:
            header = count_tokens(
                f"<<{resource_uri(self.book_id, row.path)} {row.level} v{row.version}>>\n"
            )
            self._header_tokens[key] = header
        return header + row.tokens + _PIECE_SLACK


_CACHE_SIZE = 4
_cache_lock = threading.Lock()
_snapshots: weakref.WeakKeyDictionary[Database, OrderedDict[tuple[str, int], _Snapshot]] = (
    weakref.WeakKeyDictionary()
)


def _snapshot(store: BookStore, book_id: str, state_version: int) -> _Snapshot:
    key = (book_id, state_version)
    with _cache_lock:
        per_db = _snapshots.setdefault(store.database, OrderedDict())
        found = per_db.get(key)
        if found is not None:
            per_db.move_to_end(key)
            return found
    built = _Snapshot(store, book_id, state_version)
    with _cache_lock:
        per_db = _snapshots.setdefault(store.database, OrderedDict())
        found = per_db.setdefault(key, built)
        per_db.move_to_end(key)
        while len(per_db) > _CACHE_SIZE:
            per_db.popitem(last=False)
    return found


# -- planning ------------------------------------------------------------------------

_META, _SCENE, _PROFILES, _RELATED, _ARCS, _PASSAGES, _CHAPTERS = range(7)
"""Sections of the context, in reading order: the chapters, closest to the writing,
come last."""


@dataclass
class _Candidate:
    path: str
    levels: tuple[Level, ...]
    """Levels it may be read at, cheapest first."""
    plan: Level | None
    """The level the plan asks for; None: only if budget is left over."""
    reason: str
    section: int
    order: tuple[int, ...]
    score: float
    chosen: Level | None = None
    cost: int = 0
    passage: PassageHit | None = None
    """Set for a passage: a span of its chapter's L2 (the candidate's key is its URI
    fragment path, ``<chapter path>#p=<start>-<end>``)."""


def _passage_key(hit: PassageHit) -> str:
    """A passage candidate's key: its chapter path with the URI fragment."""
    return f"{hit.path}#p={hit.start}-{hit.end}"


@dataclass
class _Planner:
    snapshot: _Snapshot
    view: _View
    budget: int
    candidates: dict[str, _Candidate] = field(default_factory=dict)
    planned: list[_Candidate] = field(default_factory=list)
    used: int = 0
    passages_of: dict[str, list[_Candidate]] = field(default_factory=dict)
    """Chapter path → its passage candidates (read whole, a chapter needs none of them)."""

    def add_passage(
        self, hit: PassageHit, *, planned: bool, reason: str, score: float
    ) -> _Candidate | None:
        key = _passage_key(hit)
        if key in self.candidates:
            return None
        candidate = _Candidate(
            key,
            ("L2",),
            "L2" if planned else None,
            reason,
            _PASSAGES,
            (hit.ordinal, hit.start),
            score,
            passage=hit,
        )
        self.candidates[key] = candidate
        self.passages_of.setdefault(hit.path, []).append(candidate)
        if planned:
            self.planned.append(candidate)
        return candidate

    def add(
        self,
        path: str,
        *,
        top: Level,
        plan: Level | None,
        reason: str,
        section: int,
        order: tuple[int, ...],
        score: float,
    ) -> _Candidate | None:
        """A candidate for ``path`` (the first reason given for a path stays)."""
        if path in self.candidates:
            return None
        levels = tuple(lv for lv in self.view.levels(path, top) if self._row(path, lv).tokens > 0)
        if not levels:
            return None
        candidate = _Candidate(path, levels, plan, reason, section, order, score)
        self.candidates[path] = candidate
        if plan is not None:
            self.planned.append(candidate)
        return candidate

    def _row(self, path: str, level: Level) -> _Row:
        return cast(_Row, self.view.get(path, level))

    def cost(self, candidate: _Candidate, level: Level) -> int:
        hit = candidate.passage
        if hit is not None:
            return self.snapshot.passage_estimate(hit)
        return self.snapshot.piece_estimate(self._row(candidate.path, level))

    def take(self, candidate: _Candidate, ceiling: Level) -> bool:
        """Read ``candidate`` at the richest level up to ``ceiling`` that fits (never
        lower than it is read already). A chapter read whole gives back the budget of
        its passages; a passage of a chapter read whole is not taken."""
        if candidate.passage is not None:
            whole = self.candidates.get(candidate.passage.path)
            if whole is not None and whole.chosen == "L2":
                return False
        limit = LEVELS.index(ceiling)
        floor = -1 if candidate.chosen is None else LEVELS.index(candidate.chosen)
        for level in reversed(candidate.levels):
            rank = LEVELS.index(level)
            if rank > limit:
                continue
            if rank <= floor:
                return False
            cost = self.cost(candidate, level)
            parts: list[_Candidate] = []
            if level == "L2" and candidate.passage is None:
                parts = [p for p in self.passages_of.get(candidate.path, ()) if p.chosen]
            freed = sum(p.cost for p in parts)
            if self.used - candidate.cost - freed + cost <= self.budget:
                self.used += cost - candidate.cost - freed
                candidate.chosen, candidate.cost = level, cost
                for part in parts:
                    part.chosen, part.cost = None, 0
                return True
        return False

    def fill_with_passages(
        self, chapters: Sequence[Resource], reason: Callable[[Resource], str]
    ) -> None:
        """Budget no whole chapter fits into any more: passages of the most relevant
        chapters not read whole, in their order."""
        index = self.snapshot.passage_index()
        for rank, ch in enumerate(chapters):
            if self.budget - self.used < _MIN_PASSAGE_TOKENS:
                return
            whole = self.candidates.get(ch.path)
            if whole is not None and whole.chosen == "L2":
                continue
            for hit in index.of_chapter(ch.path):
                candidate = self.candidates.get(_passage_key(hit)) or self.add_passage(
                    hit, planned=False, reason=f"{reason(ch)} (a passage)", score=60.0 - rank
                )
                if candidate is not None and candidate.chosen is None:
                    self.take(candidate, "L2")

    def upgrade_all(self) -> None:
        for candidate in self._by_score():
            if candidate.chosen is not None and candidate.chosen != candidate.levels[-1]:
                self.take(candidate, candidate.levels[-1])

    def add_extras(self, min_score: float = -math.inf) -> None:
        for candidate in self._by_score():
            if candidate.chosen is None and candidate.score >= min_score:
                self.take(candidate, candidate.levels[-1])

    def _by_score(self) -> list[_Candidate]:
        return sorted(self.candidates.values(), key=lambda c: (-c.score, c.path))

    def demand(self) -> int:
        """What every candidate costs at its richest level (a passage of a chapter that
        can be read whole adds nothing)."""
        return sum(
            self.cost(c, c.levels[-1])
            for c in self.candidates.values()
            if c.passage is None
            or (whole := self.candidates.get(c.passage.path)) is None
            or whole.levels[-1] != "L2"
        )


def _chapter_scores(
    snapshot: _Snapshot,
    view: _View,
    chapters: Sequence[Resource],
    chapter: int,
    scene: Sequence[str],
    query_terms: frozenset[str],
    introduced: Mapping[str, float],
) -> dict[str, tuple[float, list[str], list[str]]]:
    """path → (score, scene entities it mentions, query words it has)."""
    term_sets: dict[str, frozenset[str]] = {}
    mention_sets: dict[str, frozenset[str]] = {}
    for ch in chapters:
        terms: frozenset[str] = frozenset()
        mentions: frozenset[str] = frozenset()
        levels: tuple[Level, ...] = ("L0", "L1")
        for level in levels:
            row = view.get(ch.path, level)
            if row is not None:
                terms |= snapshot.terms(row)
                mentions |= snapshot.mentions(row)
        term_sets[ch.path] = terms
        mention_sets[ch.path] = mentions
    total = max(len(chapters), 1)
    idf = {
        term: math.log(1 + total / (1 + sum(1 for s in term_sets.values() if term in s)))
        for term in sorted(query_terms)
    }
    out: dict[str, tuple[float, list[str], list[str]]] = {}
    for ch in chapters:
        named = [p for p in scene if p in mention_sets[ch.path]]
        words = [t for t in sorted(idf) if t in term_sets[ch.path]]
        keyword = sum(idf[t] for t in words)
        distance = chapter - ch.ordinal
        recency = 2.0 / (1.0 + (distance - 1) / 10.0)
        bonus = 1.5 * introduced.get(ch.path, 0)
        score = 3.0 * len(named) + keyword + recency + bonus
        out[ch.path] = (score, named, words)
    return out


def _stale_chapters(snapshot: _Snapshot, view: _View, chapter: int) -> frozenset[str]:
    """Earlier chapters whose newest text is not the one valid before ``chapter``
    (rewritten later in the story's time): they are read only through their levels."""
    return frozenset(
        c.path
        for c in snapshot.passage_index().chapters
        if c.ordinal < chapter
        and ((row := view.get(c.path, "L2")) is None or row.version != c.version)
    )


def _passage_hits(
    snapshot: _Snapshot,
    chapter: int,
    scene: Sequence[str],
    visible: Mapping[str, Resource],
    query_terms: frozenset[str],
    settings: AssemblySettings,
    stale: frozenset[str],
) -> list[PassageHit]:
    index = snapshot.passage_index()
    names = {
        path: [
            found
            for name in dict.fromkeys((visible[path].title, *visible[path].aliases))
            if (found := _terms(name))
        ]
        for path in scene
    }
    return index.search(
        chapter, query_terms, names, entity_weight=settings.entity_weight, exclude=stale
    )


def _passage_reason(hit: PassageHit, title: Callable[[str], str]) -> str:
    things = [title(p) for p in hit.named[:3]]
    said = {t.casefold() for t in things}
    things += [f"“{w}”" for w in hit.words if w not in said and not any(w in t for t in said)][
        : max(0, 3 - len(things))
    ]
    listed = things[0] if len(things) == 1 else ", ".join(things[:-1]) + " and " + things[-1]
    return f"a passage of chapter {hit.ordinal} on {listed}"


def assemble_context(
    store: BookStore, request: ContextRequest, settings: AssemblySettings = DEFAULT_SETTINGS
) -> AssembledContext:
    """The context for writing ``request.chapter``: see the module's docstring."""
    if request.chapter < 1:
        raise invalid("chapter", "chapters are numbered from 1")
    if request.budget_tokens < 1:
        raise invalid("budgetTokens", "the budget must be at least one token")
    if request.scene_type not in SCENE_TYPES:
        raise invalid("sceneType", f"{request.scene_type!r} is not one of {', '.join(SCENE_TYPES)}")
    state = (
        request.state_version
        if request.state_version is not None
        else store.state_version(request.book_id)
    )
    snapshot = _snapshot(store, request.book_id, state)
    chapter = request.chapter
    view = snapshot.view(chapter)
    planner = _Planner(snapshot, view, request.budget_tokens)
    visible = {e.path: e for e in snapshot.entities if e.chapter_from < chapter}

    def title(path: str) -> str:
        found = snapshot.resources.get(path)
        return found.title if found is not None else path.rsplit("/", 1)[-1]

    # 1. /meta, always.
    for index, meta in enumerate(snapshot.meta):
        planner.add(
            meta.path,
            top="L2",
            plan="L2",
            reason=f"always included: {meta.title.lower()}",
            section=_META,
            order=(index,),
            score=1000.0 - index,
        )

    # 2. The scene's entities and their profiles as of the chapter before.
    if request.entities is not None:
        scene = [p for p in dict.fromkeys(request.entities) if p in visible]
        how = "is in the scene (intent analysis)"
    else:
        scene = [
            p
            for p in snapshot.matcher.match(f"{request.prompt}\n{request.outline}")
            if p in visible
        ]
        how = "appears in the scene"
    for index, path in enumerate(scene):
        name = visible[path].title
        planner.add(
            path,
            top="L2",
            plan="L1",
            reason=f"{name} {how}",
            section=_SCENE,
            order=(index, 0),
            score=900.0 - index,
        )
        profile = snapshot.profile_of.get(path)
        if profile is not None:
            planner.add(
                profile,
                top="L2",
                plan="L1",
                reason=f"profile of {name} as of chapter {chapter - 1}",
                section=_SCENE,
                order=(index, 1),
                score=899.5 - index,
            )

    # 3. Profiles the scene type calls for, and the narrative voice.
    scene_set = set(scene)
    folders = SCENE_PROFILE_FOLDERS[request.scene_type]
    position = 0
    for folder in folders:
        if folder == "locations":
            for index, path in enumerate(scene):
                if visible[path].kind == "location":
                    planner.add(
                        path,
                        top="L2",
                        plan="L1",
                        reason=f"{request.scene_type} scene: the setting",
                        section=_SCENE,
                        order=(index, 0),
                        score=850.0,
                    )
            continue
        for resource in snapshot.profiles:
            if resource.path == f"/profiles/{folder}" or not is_under(
                resource.path, f"/profiles/{folder}"
            ):
                continue
            subject = subject_of(resource)
            if subject is not None and subject in snapshot.resources and subject not in visible:
                continue  # about an entity the story has not reached
            relevant = subject is None or subject in scene_set
            position += 1
            what = folder.replace("-", " ")
            planner.add(
                resource.path,
                top="L2" if relevant else "L1",
                plan="L1" if relevant else None,
                reason=f"{request.scene_type} scene: {what} — {resource.title}",
                section=_PROFILES,
                order=(position,),
                score=(800.0 if relevant else 250.0) - position / 1000,
            )
    styles = [p for p in snapshot.profiles if is_under(p.path, "/profiles/style")]
    for index, style in enumerate(styles):
        if style.path == "/profiles/style":
            continue
        planner.add(
            style.path,
            top="L1",
            plan="L0",
            reason="always included: style — " + style.title,
            section=_PROFILES,
            order=(10_000 + index,),
            score=700.0 - index,
        )

    # 4. Relation links one hop from the scene's entities.
    relations = [r for r in snapshot.relations if r.chapter < chapter]
    introduced: dict[str, float] = {}
    links = 0
    for index, path in enumerate(scene):
        touching = sorted(
            (r for r in relations if path in (r.from_path, r.to_path)),
            key=lambda r: (r.kind, r.to_path if r.from_path == path else r.from_path),
        )
        for relation in touching:
            other = relation.to_path if relation.from_path == path else relation.from_path
            if other in scene_set:
                continue
            if other.startswith("/manuscript/"):
                introduced[other] = introduced.get(other, 0) + 1
                continue
            target = snapshot.resources.get(other)
            if target is None or (other.startswith("/entities/") and other not in visible):
                continue
            detail = f" ({relation.reason})" if relation.reason else ""
            reason = f"linked to {visible[path].title}: {relation.kind}{detail}"
            planned = links < settings.planned_links
            added = planner.add(
                other,
                top="L1",
                plan="L0" if planned else None,
                reason=reason,
                section=_RELATED,
                order=(index, links),
                score=600.0 - links / 100,
            )
            if added is None:
                continue
            links += 1
            profile = snapshot.profile_of.get(other)
            if profile is not None:
                planner.add(
                    profile,
                    top="L1",
                    plan="L0" if planned else None,
                    reason=f"profile of {target.title}, linked to {visible[path].title}",
                    section=_RELATED,
                    order=(index, links),
                    score=599.0 - links / 100,
                )

    # 5. Passages of earlier chapters: the paragraphs that name the scene's entities (by
    # any alias) or share the request's words, best first.
    earlier = [c for c in snapshot.chapters if c.ordinal < chapter]
    query_terms = _terms(f"{request.prompt}\n{request.outline}")
    stale = _stale_chapters(snapshot, view, chapter)
    hits = _passage_hits(snapshot, chapter, scene, visible, query_terms, settings, stale)
    share = int(request.budget_tokens * settings.passage_share)
    planned_cost = 0
    passage_weight: dict[str, float] = {}
    for hit in hits:
        cost = snapshot.passage_estimate(hit)
        planned = planned_cost + cost <= share
        if planned:
            planned_cost += cost
        passage_weight[hit.path] = passage_weight.get(hit.path, 0.0) + hit.score
        planner.add_passage(
            hit,
            planned=planned,
            reason=_passage_reason(hit, title),
            score=450.0 + min(hit.score, 49.0),
        )
    # A chapter with many good passages is worth reading whole.
    weights = dict(introduced)
    for path, weight in passage_weight.items():
        weights[path] = weights.get(path, 0.0) + min(weight / 20.0, 5.0)

    # 6 and 7. Chapters: the best ones deeper, the rest in brief (arcs first when long).
    scores = _chapter_scores(snapshot, view, earlier, chapter, scene, query_terms, weights)
    ranked = sorted(earlier, key=lambda c: (-scores[c.path][0], -c.ordinal, c.path))
    recent = {c.path for c in earlier[-settings.recent_chapters :]}

    def chapter_reason(ch: Resource) -> str:
        _, named, words = scores[ch.path]
        names = [title(p) for p in named[:3]]
        # A keyword that is one of the names already listed says nothing more.
        said = {n.casefold() for n in names}
        things = names + [f"“{w}”" for w in words if w.casefold() not in said][:2]
        if things:
            listed = (
                things[0] if len(things) == 1 else ", ".join(things[:-1]) + " and " + things[-1]
            )
            return f"chapter {ch.ordinal} mentions {listed}"
        if ch.path in recent:
            return f"recent chapter ({ch.ordinal})"
        if introduced.get(ch.path):
            return f"chapter {ch.ordinal} introduces a scene entity"
        return f"the story so far: chapter {ch.ordinal} in brief"

    best = ranked[: settings.best_chapters]
    for rank, ch in enumerate(best):
        planner.add(
            ch.path,
            top="L2",
            plan="L1",
            reason=chapter_reason(ch),
            section=_CHAPTERS,
            order=(ch.ordinal,),
            score=500.0 + scores[ch.path][0] - rank / 100,
        )
    long_book = len(earlier) > settings.chapter_scan_limit
    in_brief: list[Resource] = earlier
    if long_book:
        by_arc: dict[str, list[Resource]] = {}
        for ch in earlier:
            by_arc.setdefault(ch.parent, []).append(ch)
        arc_score = {arc: max(scores[c.path][0] for c in chs) for arc, chs in by_arc.items()}
        unsummarized: set[str] = set()
        for index, arc in enumerate(a for a in snapshot.arcs if a.path in by_arc):
            summary = "/summaries/" + arc.path.rsplit("/", 1)[1]
            source = summary if view.levels(summary) else arc.path
            chs = by_arc[arc.path]
            added = planner.add(
                source,
                top="L1",
                plan="L1",
                reason=f"arc summary: {arc.title} (chapters {chs[0].ordinal}–{chs[-1].ordinal})",
                section=_ARCS,
                order=(index,),
                score=400.0 + arc_score[arc.path],
            )
            if added is None:
                unsummarized.add(arc.path)
        best_arcs = sorted(arc_score, key=lambda a: (-arc_score[a], a))[: settings.best_arcs]
        keep = set(best_arcs) | unsummarized
        in_brief = [c for c in earlier if c.parent in keep or c.path in recent]
        for ch in earlier:
            if ch.parent not in keep and ch.path not in recent:
                planner.add(
                    ch.path,
                    top="L2",
                    plan=None,
                    reason=chapter_reason(ch),
                    section=_CHAPTERS,
                    order=(ch.ordinal,),
                    score=100.0 + scores[ch.path][0],
                )
    for ch in sorted(in_brief, key=lambda c: (-scores[c.path][0], -c.ordinal, c.path)):
        planner.add(
            ch.path,
            top="L2",
            plan="L0",
            reason=chapter_reason(ch),
            section=_CHAPTERS,
            order=(ch.ordinal,),
            score=200.0 + scores[ch.path][0],
        )

    # Everything else the story has reached, for budget left over.
    for entity in visible.values():
        planner.add(
            entity.path,
            top="L1",
            plan=None,
            reason=f"also in the story: {entity.title}",
            section=_RELATED,
            order=(100_000,),
            score=40.0,
        )
        profile = snapshot.profile_of.get(entity.path)
        if profile is not None:
            planner.add(
                profile,
                top="L1",
                plan=None,
                reason=f"profile of {entity.title} as of chapter {chapter - 1}",
                section=_RELATED,
                order=(100_001,),
                score=39.0,
            )

    # The plan, in priority order, each at the richest planned level that still fits;
    # then the deep reads, the passages past the plan's share, the upgrades (chapters
    # read whole, the most relevant first), more candidates, and upgrades once more.
    for candidate in planner.planned:
        planner.take(candidate, cast(Level, candidate.plan))
    for ch in best[: settings.deep_chapters]:
        deep = planner.candidates.get(ch.path)
        if deep is not None and deep.chosen is not None:
            planner.take(deep, "L2")
    planner.add_extras(min_score=450.0)
    planner.upgrade_all()
    planner.add_extras()
    planner.upgrade_all()
    fill = [ch for ch in ranked if ch.path not in stale]
    planner.fill_with_passages(fill, chapter_reason)
    assembled = _render(planner, request, state)
    # The estimates carry slack per piece; what the exact count leaves over goes to one
    # more round of upgrades and candidates (the final count still holds the cap).
    if request.budget_tokens - assembled.tokens > _PIECE_SLACK * 4:
        before = {path: c.chosen for path, c in planner.candidates.items()}
        planner.used = assembled.tokens
        planner.upgrade_all()
        planner.add_extras()
        planner.fill_with_passages(fill, chapter_reason)
        if any(c.chosen != before.get(path) for path, c in planner.candidates.items()):
            assembled = _render(planner, request, state)
    return assembled


def _render(planner: _Planner, request: ContextRequest, state: int) -> AssembledContext:
    snapshot = planner.snapshot
    chosen = [c for c in planner.candidates.values() if c.chosen is not None]
    chosen.sort(key=lambda c: (c.section, c.order, c.path))
    pieces: list[ContextPiece] = []
    seen: set[str] = set()
    value: dict[str, float] = {}
    for candidate in chosen:
        level = cast(Level, candidate.chosen)
        hit = candidate.passage
        if hit is not None:
            body = snapshot.passage_text(hit)
            version = hit.version
            uri = passage_uri(resource_uri(request.book_id, hit.path), hit.start, hit.end)
        else:
            row = planner._row(candidate.path, level)
            body = snapshot.text(row)
            version = row.version
            uri = resource_uri(request.book_id, candidate.path)
        key = body.strip()
        if key in seen:  # the same text under two paths is read once
            continue
        seen.add(key)
        text = render_piece(uri, level, version, body)
        path = hit.path if hit is not None else candidate.path
        pieces.append(
            ContextPiece(uri, path, level, version, candidate.reason, text, count_tokens(text))
        )
        value[uri] = candidate.score
    text = "".join(p.text for p in pieces)
    tokens = count_tokens(text)
    # The estimate keeps slack for merges at piece edges; should the joined count still
    # exceed the budget, the least valuable pieces go, whole.
    while tokens > request.budget_tokens and pieces:
        drop = min(pieces, key=lambda p: (value[p.uri], p.uri))
        pieces.remove(drop)
        text = "".join(p.text for p in pieces)
        tokens = count_tokens(text)
    return AssembledContext(
        book_id=request.book_id,
        chapter=request.chapter,
        state_version=state,
        budget_tokens=request.budget_tokens,
        pieces=tuple(pieces),
        text=text,
        tokens=tokens,
        candidate_tokens=planner.demand(),
    )


__all__ = [
    "AssembledContext",
    "AssemblySettings",
    "ContextPiece",
    "ContextRequest",
    "SceneType",
    "assemble_context",
    "rebuild_context",
    "render_piece",
]
