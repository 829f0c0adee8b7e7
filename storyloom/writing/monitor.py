"""Role C (seed 002): checks a chapter against the book's facts as of that chapter.

Only what can be checked is checked, never style or creativity: the timeline (a dead
character acting), character state and details (hair, eyes, names, skills), world rules,
callbacks to earlier text (details of places and plot threads) and the narrative
perspective. These are the checkable parts of ConStory-Bench's five categories.

Claims (what a text says about an entity) come from the agent LLM
(:func:`claims_by_agent`) or, offline, from :func:`extract_claims`: a sentence naming an
entity (by name or alias) and a value some fact of the book ever gave one of its
attributes ("silver" is a hair colour because a fact once said so). :func:`check_claims`
compares them with :meth:`BookStore.facts_as_of`; a change cue ("dyed", "became", "染成")
makes a claim a progression that happens in this chapter, not a contradiction.
"""

from __future__ import annotations

import hashlib
import importlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from storyloom.core.errors import FieldProblem, InvalidInput
from storyloom.core.settings import ChatEndpoint
from storyloom.workflow.node_type import Evaluation, EvaluationCheck
from storyloom.writing.agent_json import AgentJsonError, ask_agent_json
from storyloom.writing.book_store import (
    FACT_CATEGORIES,
    BookStore,
    Fact,
    FactCategory,
    Resource,
)
from storyloom.writing.scene_entities import EntityMatcher, EntityMention
from storyloom.writing.uris import resource_uri

Dimension = Literal["timeline", "character-state", "world-rules", "callbacks", "perspective"]
DIMENSIONS: tuple[Dimension, ...] = (
    "timeline",
    "character-state",
    "world-rules",
    "callbacks",
    "perspective",
)
WORLD_SUBJECTS = ("/meta/world-rules", "/profiles/world-state/current")
STYLE_SUBJECTS = ("/profiles/style/narrative-voice", "/meta/style-guide")
POV_ATTRIBUTE = "pov"
_POV_ATTRIBUTES = frozenset(
    {"pov", "perspective", "point of view", "narrative perspective", "视角", "人称", "叙事视角"}
)
_CORPSE = frozenset({"body", "corpse", "尸体", "遗体"})
_DEAD = frozenset({"dead", "deceased", "died", "killed", "死亡", "已死", "死了", "身亡", "去世"})
_NEGATIVE_RULE = frozenset(
    {"impossible", "forbidden", "never", "none", "no", "不可能", "禁止", "无法", "不能", "没有"}
)
_ATTRIBUTE_WORDS: Mapping[str, tuple[str, ...]] = {
    "hair": ("hair", "头发", "发"),
    "eyes": ("eye", "eyes", "眼", "瞳"),
    "eye colour": ("eye", "eyes", "眼", "瞳"),
    "eye color": ("eye", "eyes", "眼", "瞳"),
    "status": ("alive", "dead", "活", "死"),
    "weapon": ("weapon", "sword", "blade", "武器", "剑"),
}
_COLOURS = (
    "black", "white", "silver", "grey", "gray", "red", "blue", "green", "brown", "golden",
    "gold", "blond", "blonde", "auburn", "hazel", "amber", "violet", "purple", "pink",
    "黑", "白", "银", "灰", "红", "蓝", "绿", "棕", "褐", "金", "紫", "琥珀",
)  # fmt: skip
_COLOUR_ATTRIBUTES = frozenset({"hair", "eyes", "eye colour", "eye color"})
"""Attributes whose common values are known without the book having used them: a book
that only ever said "green eyes" still has "blue eyes" read as a claim about eyes (only
right before the attribute word: "blue eyes", "蓝色的眼睛")."""
_CHANGE_EN = re.compile(
    r"\b(?:turned|turns|dyed|dyes|became|become|becomes|changed|changes|now|no longer|"
    r"bleached|grew|was reborn|revived)\b",
    re.IGNORECASE,
)
_CHANGE_ZH = ("变成", "染成", "变为", "不再", "成了", "变得", "化为", "复活")
_MEMORY_EN = re.compile(
    r"\b(?:remembered|remember|remembers|recalled|recalls|memory|memories|used to|back then|"
    r"the late|grave|tomb|funeral|mourned|ghost|years ago|in the past|dreamed|dreamt)\b",
    re.IGNORECASE,
)
_MEMORY_ZH = (
    "回忆",
    "想起",
    "记得",
    "曾经",
    "当年",
    "已故",
    "坟",
    "墓",
    "葬礼",
    "生前",
    "遗像",
    "怀念",
    "梦见",
)
_NEGATION_EN = re.compile(r"\b(?:not|never|no longer|no)\b|n't\b", re.IGNORECASE)
_NEGATION_ZH = ("不再", "不是", "没有", "并非", "不")
_SENTENCE = re.compile(r"[^.!?。！？…\n]+(?:[.!?。！？…]+[\"”’」』)）]*)?")
_QUOTED = re.compile(r"“[^”]*”|\"[^\"\n]*\"|「[^」]*」|『[^』]*』")
_FIRST_EN = re.compile(r"\bI\b|\b(?:me|my|mine|myself)\b", re.IGNORECASE)
_THIRD_EN = re.compile(r"\b(?:he|she|him|her|his|hers|himself|herself)\b", re.IGNORECASE)
_STOPWORDS = frozenset(
    {"a", "an", "the", "at", "in", "on", "of", "by", "during", "to", "is", "and"}
)
_CJK = re.compile(r"[\u3400-\u9fff]")


class MonitorError(InvalidInput):
    """The agent model's claims cannot be used (malformed JSON, unknown fields)."""


@dataclass(frozen=True)
class Claim:
    subject: str
    """An entity path (or a world/style subject such as ``/meta/world-rules``)."""
    attribute: str
    value: str
    category: FactCategory
    evidence: str
    change: bool = False
    """A progression that happens in this chapter (dyed, became), not a contradiction."""


@dataclass(frozen=True)
class Finding:
    dimension: Dimension
    category: FactCategory
    subject: str
    attribute: str
    expected: str
    found: str
    since_chapter: int
    """The chapter the expected (current) value comes from."""
    evidence: str
    """The sentence that says otherwise."""
    evidence_uri: str
    """Where the expected value was established (a chapter's URI, or the rule's)."""
    fingerprint: str
    intentional: bool = False
    earlier: str | None = None
    """When ``found`` is what the attribute was before a progression: since which chapter
    it no longer holds (shown as "was … until ch. N")."""
    subject_title: str = ""
    """The subject's name as the book gives it (its path's last part when it has none)."""

    @property
    def name(self) -> str:
        return self.subject_title or self.subject.rsplit("/", 1)[-1]

    @property
    def detail(self) -> str:
        name = self.name
        since = f"since ch. {self.since_chapter}"
        head = f"{name} · {self.attribute}: expected “{self.expected}” ({since})"
        found = f", found “{self.found}”"
        if self.earlier is not None:
            found += f" — {self.earlier}"
        evidence = f": “{self.evidence.strip()}”" if self.evidence.strip() else ""
        return head + found + evidence


def fingerprint(book_id: str, chapter: int, subject: str, attribute: str, found: str) -> str:
    """Recognises the same finding on a later check of the same chapter."""
    key = "\x1f".join((book_id, str(chapter), subject, attribute, _norm(found)))
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _norm(value: str) -> str:
    return value.strip().strip(".,;:!?。，；：！？\"'“”").casefold()


def dimension_of(subject: str, attribute: str, category: FactCategory) -> Dimension:
    if category == "narrative" or attribute == POV_ATTRIBUTE:
        return "perspective"
    if category == "world" or subject in WORLD_SUBJECTS:
        return "world-rules"
    if category == "timeline":
        return "timeline"
    if subject.startswith("/entities/characters/"):
        return "character-state"
    return "callbacks"


# -- text units ------------------------------------------------------------------------


def split_sentences(text: str) -> list[str]:
    """Sentences (and lines) of ``text``, stripped, in order."""
    return [s.strip() for s in _SENTENCE.findall(text) if s.strip()]


def _has_cue(sentence: str, en: re.Pattern[str], zh: Sequence[str]) -> bool:
    return en.search(sentence) is not None or any(cue in sentence for cue in zh)


def is_change(sentence: str) -> bool:
    return _has_cue(sentence, _CHANGE_EN, _CHANGE_ZH)


def is_memory(sentence: str) -> bool:
    return _has_cue(sentence, _MEMORY_EN, _MEMORY_ZH)


def _ascii_word_char(ch: str) -> bool:
    return ch.isascii() and (ch.isalnum() or ch == "_")


def _find_term(haystack: str, term: str, start: int = 0) -> int:
    """Where ``term`` (lower case) occurs in ``haystack`` (lower case) as a whole word
    when it is written in Latin letters; anywhere for CJK; -1 when it does not."""
    at = haystack.find(term, start)
    while at >= 0:
        before = haystack[at - 1] if at > 0 else " "
        after = haystack[at + len(term)] if at + len(term) < len(haystack) else " "
        left_ok = not (_ascii_word_char(term[0]) and _ascii_word_char(before))
        right_ok = not (_ascii_word_char(term[-1]) and _ascii_word_char(after))
        if left_ok and right_ok:
            return at
        at = haystack.find(term, at + 1)
    return -1


# -- what the book knows ---------------------------------------------------------------


@dataclass
class Lexicon:
    """What the offline extractor needs of a book, built once for many chapters."""

    entities: dict[str, Resource]
    matcher: EntityMatcher
    facts: list[Fact]
    attributes: dict[str, dict[str, FactCategory]] = field(default_factory=dict)
    """entity path → attribute → the category its facts have."""
    vocabulary: dict[str, set[str]] = field(default_factory=dict)
    """attribute → every value any fact ever gave it (lower case)."""

    @classmethod
    def build(cls, store: BookStore, book_id: str) -> Lexicon:
        entities = {r.path: r for r in store.entities(book_id)}
        facts = store.facts(book_id)
        lexicon = cls(entities, EntityMatcher(entities.values()), facts)
        for fact in facts:
            lexicon.attributes.setdefault(fact.subject, {})[fact.attribute] = fact.category
            lexicon.vocabulary.setdefault(fact.attribute, set()).add(fact.value.strip().casefold())
        return lexicon


def _attribute_words(attribute: str) -> tuple[str, ...]:
    key = attribute.strip().casefold()
    return (*_ATTRIBUTE_WORDS.get(key, ()), key)


@cache
def _terms(attribute: str) -> tuple[str, ...]:
    """The words of a rule's attribute a sentence must contain to be about it."""
    lower = attribute.strip().casefold()
    if _CJK.search(lower) and " " not in lower:
        # Imported by name (no type information), and only when a rule is in Chinese.
        jieba: Any = importlib.import_module("jieba")
        words = [str(w) for w in jieba.lcut(lower) if str(w).strip()]
    else:
        words = re.findall(r"[\w'-]+", lower)
    return tuple(w for w in words if w not in _STOPWORDS) or (lower,)


def _negated_before(sentence_lower: str, at: int) -> bool:
    window = sentence_lower[max(0, at - 16) : at]
    return _NEGATION_EN.search(window) is not None or any(
        cue in window for cue in _NEGATION_ZH if cue != "不"
    )


def _negated(sentence: str) -> bool:
    return _NEGATION_EN.search(sentence) is not None or any(cue in sentence for cue in _NEGATION_ZH)


def extract_claims(
    store: BookStore,
    book_id: str,
    text: str,
    chapter: int,
    *,
    lexicon: Lexicon | None = None,
) -> list[Claim]:
    """Claims the text makes, found lexically (no LLM): entity attributes whose value
    some fact of the book has used, dead characters who act, world rules, and the
    narrative person. One claim per (subject, attribute, value), with its first sentence."""
    lex = lexicon or Lexicon.build(store, book_id)
    current = store.facts_as_of(book_id, chapter)
    claims: dict[tuple[str, str, str], Claim] = {}

    def add(claim: Claim) -> None:
        key = (claim.subject, claim.attribute, _norm(claim.value))
        if key not in claims or (claim.change and not claims[key].change):
            claims[key] = claim

    for sentence in split_sentences(text):
        mentions = lex.matcher.mentions(sentence)
        memory = is_memory(sentence)
        change = is_change(sentence)
        if mentions and not memory:
            for claim in _attribute_claims(lex, sentence, mentions, change):
                add(claim)
            for claim in _dead_acting(current, sentence, mentions, change):
                add(claim)
        if not memory:
            for claim in _world_claims(lex, current, sentence, change):
                add(claim)
    pov = _perspective_claim(store, book_id, text, chapter, current)
    if pov is not None:
        add(pov)
    return list(claims.values())


def _attribute_claims(
    lex: Lexicon, sentence: str, mentions: Sequence[EntityMention], change: bool
) -> Iterable[Claim]:
    lower = sentence.casefold()
    for subject in dict.fromkeys(p for m in mentions for p in m.paths):
        known = lex.attributes.get(subject, {})
        occurrences: dict[str, list[tuple[str, int]]] = {}
        for attribute in known:
            for value in lex.vocabulary.get(attribute, ()):
                at = _find_term(lower, value)
                while at >= 0 and _negated_before(lower, at):
                    at = _find_term(lower, value, at + 1)
                if at >= 0 and subject in _nearest(mentions, at):
                    occurrences.setdefault(value, []).append((attribute, at))
        for attribute in known:
            if attribute.strip().casefold() not in _COLOUR_ATTRIBUTES:
                continue
            for value, at in _described_colours(lower, attribute):
                if value in lex.vocabulary.get(attribute, ()) or _negated_before(lower, at):
                    continue
                if subject in _nearest(mentions, at):
                    occurrences.setdefault(value, []).append((attribute, at))
        for value, places in occurrences.items():
            attributes = list(dict.fromkeys(a for a, _ in places))
            if len(attributes) > 1:
                # "black" may be hair or eyes: the sentence must say which.
                attributes = [
                    a
                    for a in attributes
                    if any(_find_term(lower, w) >= 0 for w in _attribute_words(a))
                ]
                if len(attributes) != 1:
                    continue
            attribute = attributes[0]
            yield Claim(subject, attribute, value, known[attribute], sentence, change)


def _described_colours(lower: str, attribute: str) -> list[tuple[str, int]]:
    """Common colours right before one of the attribute's words: ``blue eyes``,
    ``blue-grey eyes``, ``蓝色的眼睛``."""
    found: dict[tuple[str, int], None] = {}
    for word in dict.fromkeys(_attribute_words(attribute)):
        cjk = _CJK.search(word) is not None
        for colour in _COLOURS:
            if (_CJK.search(colour) is not None) != cjk:
                continue
            if cjk:
                # The value as the book would write it: 蓝色 in 蓝色的眼睛, 蓝 in 蓝眼睛.
                pattern = f"({re.escape(colour)}色?)的?{re.escape(word)}"
            else:
                pattern = rf"\b({re.escape(colour)})(?:[\s-]+[a-z]+)?[\s-]+{re.escape(word)}"
            for match in re.finditer(pattern, lower):
                found[(match.group(1), match.start())] = None
    return list(found)


def _nearest(mentions: Sequence[EntityMention], at: int) -> tuple[str, ...]:
    """The entity a value at ``at`` is about: the closest mention before it, else the
    closest after it ("silver-haired Lin Feng")."""
    before = [m for m in mentions if m.end <= at]
    if before:
        return max(before, key=lambda m: m.end).paths
    return min(mentions, key=lambda m: m.start).paths


def _dead_acting(
    current: Mapping[str, Mapping[str, Fact]],
    sentence: str,
    mentions: Sequence[EntityMention],
    change: bool,
) -> Iterable[Claim]:
    for subject in dict.fromkeys(p for m in mentions for p in m.paths):
        status = current.get(subject, {}).get("status")
        if status is None or _norm(status.value) not in _DEAD:
            continue
        if any(_find_term(sentence.casefold(), word) >= 0 for word in _DEAD | _CORPSE):
            continue
        yield Claim(subject, "status", "alive", "timeline", sentence, change)


def _world_claims(
    lex: Lexicon, current: Mapping[str, Mapping[str, Fact]], sentence: str, change: bool
) -> Iterable[Claim]:
    lower = sentence.casefold()
    for subject in WORLD_SUBJECTS:
        for attribute, rule in current.get(subject, {}).items():
            if not all(_find_term(lower, term) >= 0 for term in _terms(attribute)):
                continue
            said = [v for v in lex.vocabulary.get(attribute, ()) if _find_term(lower, v) >= 0]
            if said:
                yield Claim(subject, attribute, said[0], "world", sentence, change)
            elif _norm(rule.value) in _NEGATIVE_RULE and not _negated(sentence):
                yield Claim(subject, attribute, "possible", "world", sentence, change)


# -- perspective -----------------------------------------------------------------------


def normalize_pov(value: str) -> str | None:
    lower = value.casefold()
    if any(k in lower for k in ("first person", "first-person", "1st person", "第一人称")):
        return "first person"
    if any(k in lower for k in ("third person", "third-person", "3rd person", "第三人称")):
        return "third person"
    if lower.strip() in ("first", "third"):
        return f"{lower.strip()} person"
    return None


def book_pov(
    store: BookStore,
    book_id: str,
    chapter: int,
    current: Mapping[str, Mapping[str, Fact]] | None = None,
) -> Fact | None:
    """The book's narrative person as of ``chapter``: a ``pov`` fact of the style
    profile or guide, else what their texts say ("third person", "第一人称")."""
    facts = current if current is not None else store.facts_as_of(book_id, chapter)
    for subject in STYLE_SUBJECTS:
        for attribute, fact in facts.get(subject, {}).items():
            pov = normalize_pov(fact.value) if attribute.casefold() in _POV_ATTRIBUTES else None
            if pov is not None:
                return replace(fact, attribute=POV_ATTRIBUTE, value=pov, category="narrative")
    for subject in STYLE_SUBJECTS:
        for level in ("L1", "L2", "L0"):
            text = store.level(book_id, subject, level, before_chapter=chapter)
            pov = normalize_pov(text.text) if text is not None else None
            if text is not None and pov is not None:
                return Fact(
                    subject,
                    POV_ATTRIBUTE,
                    pov,
                    text.as_of_chapter,
                    "narrative",
                    resource_uri(book_id, subject),
                )
    return None


def narration_person(text: str) -> tuple[int, int, str, str]:
    """(first-person, third-person pronouns, first sentence with each) outside dialogue."""
    narration = _QUOTED.sub(" ", text)
    first = third = 0
    first_at = third_at = ""
    for sentence in split_sentences(narration):
        f = len(_FIRST_EN.findall(sentence)) + sentence.count("我")
        t = len(_THIRD_EN.findall(sentence)) + sentence.count("他") + sentence.count("她")
        if f and not first_at:
            first_at = sentence
        if t and not third_at:
            third_at = sentence
        first += f
        third += t
    return first, third, first_at, third_at


def _perspective_claim(
    store: BookStore,
    book_id: str,
    text: str,
    chapter: int,
    current: Mapping[str, Mapping[str, Fact]],
) -> Claim | None:
    pov = book_pov(store, book_id, chapter, current)
    if pov is None:
        return None
    first, third, first_at, third_at = narration_person(text)
    if pov.value == "third person" and first >= 3 and first >= 0.3 * (first + third):
        return Claim(pov.subject, POV_ATTRIBUTE, "first person", "narrative", first_at)
    if pov.value == "first person" and third >= 4 and first <= 0.05 * (first + third):
        return Claim(pov.subject, POV_ATTRIBUTE, "third person", "narrative", third_at)
    return None


# -- checking --------------------------------------------------------------------------


def check_claims(
    store: BookStore, book_id: str, claims: Sequence[Claim], chapter: int
) -> list[Finding]:
    """Findings: claims that contradict the book's facts from chapters before ``chapter``
    (a value other than the current one, unless the claim is a change), one per
    fingerprint."""
    current = store.facts_as_of(book_id, chapter)
    history: dict[tuple[str, str], list[Fact]] = {}
    for fact in store.facts(book_id, before_chapter=chapter):
        history.setdefault((fact.subject, fact.attribute), []).append(fact)
    pov: Fact | None = None
    pov_done = False
    chapter_uris: dict[int, str] = {c.ordinal: c.uri for c in store.chapters(book_id)}
    titles = {r.path: r.title for r in store.entities(book_id)}
    out: dict[str, Finding] = {}
    for claim in claims:
        expected = current.get(claim.subject, {}).get(claim.attribute)
        if expected is None and claim.attribute == POV_ATTRIBUTE:
            if not pov_done:
                pov, pov_done = book_pov(store, book_id, chapter, current), True
            expected = pov
        if expected is None or claim.change:
            continue
        found = normalize_pov(claim.value) if claim.attribute == POV_ATTRIBUTE else None
        if _norm(found or claim.value) == _norm(expected.value):
            continue
        earlier = None
        steps = history.get((claim.subject, claim.attribute), [])
        for index, step in enumerate(steps[:-1]):
            if _norm(step.value) == _norm(claim.value):
                until = steps[index + 1].chapter
                earlier = f"was “{step.value}” until ch. {until}; now “{expected.value}”"
        category: FactCategory = (
            expected.category if expected.category in FACT_CATEGORIES else claim.category
        )
        if claim.attribute.casefold() == "status" and _norm(expected.value) in _DEAD:
            category = "timeline"
        value = found or claim.value
        mark = fingerprint(book_id, chapter, claim.subject, claim.attribute, value)
        if mark in out:
            continue
        out[mark] = Finding(
            dimension=dimension_of(claim.subject, claim.attribute, category),
            category=category,
            subject=claim.subject,
            attribute=claim.attribute,
            expected=expected.value,
            found=value,
            since_chapter=expected.chapter,
            evidence=claim.evidence,
            evidence_uri=expected.source_uri
            or chapter_uris.get(expected.chapter)
            or resource_uri(book_id, claim.subject),
            fingerprint=mark,
            earlier=earlier,
            subject_title=titles.get(claim.subject, ""),
        )
    return list(out.values())


def evaluate(findings: Sequence[Finding], *, attempt: int, max_retries: int) -> Evaluation:
    """Role C's verdict: approve when nothing (unintended) was found; else retry while
    attempts remain, then hand the choice to the author."""
    active = [f for f in findings if not f.intentional]
    checks = []
    for dimension in DIMENSIONS:
        mine = [f for f in active if f.dimension == dimension]
        checks.append(
            EvaluationCheck(
                dimension=dimension,
                passed=not mine,
                detail="; ".join(f.detail for f in mine),
            )
        )
    if not active:
        quiet = len(findings)
        reason = "no contradiction with the book's facts"
        if quiet:
            reason += f" ({quiet} marked intentional)"
        return Evaluation(decision="approve", confidence=1.0, reason=reason, checks=checks)
    failed = [c.dimension for c in checks if not c.passed]
    summary = f"{len(active)} contradiction(s) in {', '.join(failed)}: " + "; ".join(
        f.detail for f in active[:3]
    )
    decision: Literal["retry", "flag-human"] = "retry" if attempt < max_retries else "flag-human"
    return Evaluation(decision=decision, confidence=0.9, reason=summary, checks=checks)


def findings_as_feedback(findings: Sequence[Finding]) -> str:
    """The findings as instructions for the retry prompt."""
    active = [f for f in findings if not f.intentional]
    if not active:
        return ""
    lines = ["The draft contradicts facts established earlier in the book. Fix these:"]
    for f in active:
        lines.append(
            f"- {f.name}'s {f.attribute} is “{f.expected}” (since chapter {f.since_chapter}),"
            f" but the draft says “{f.found}”: “{f.evidence.strip()}”"
        )
    lines.append("Keep everything else as it is.")
    return "\n".join(lines)


# -- the agent LLM ---------------------------------------------------------------------


class AgentClaim(BaseModel):
    """A fact as the agent model states it (Role C's claims, curation's facts)."""

    model_config = ConfigDict(extra="ignore")

    subject: str = Field(min_length=1)
    attribute: str = Field(min_length=1)
    value: str = Field(min_length=1)
    category: FactCategory = "factual"
    evidence: str = ""
    change: bool = False


class AgentClaims(BaseModel):
    model_config = ConfigDict(extra="ignore")

    claims: list[AgentClaim]


CLAIMS_SYSTEM = (
    "You check a novel's chapter for facts only: character state and appearance, who is "
    "alive, world rules, details of places and plot threads, the narrative person. "
    "Never judge style or quality. Answer only JSON: "
    '{"claims":[{"subject":"<entity path or name>","attribute":"...","value":"...",'
    '"category":"characterization|factual|narrative|timeline|world",'
    '"evidence":"<the sentence>","change":<true when the chapter shows the value changing>}]}'
)


def subject_names(store: BookStore, book_id: str) -> dict[str, str]:
    """Every name a subject goes by (lower case) → its path."""
    names: dict[str, str] = {}
    for entity in store.entities(book_id):
        for name in (entity.path, entity.path.rsplit("/", 1)[1], entity.title, *entity.aliases):
            names.setdefault(name.strip().casefold(), entity.path)
    for path in (*WORLD_SUBJECTS, *STYLE_SUBJECTS):
        names.setdefault(path, path)
    for name in ("world", "world rules", "世界", "世界规则"):
        names.setdefault(name, WORLD_SUBJECTS[0])
    for name in ("narrator", "narrative voice", "叙事"):
        names.setdefault(name, STYLE_SUBJECTS[0])
    return names


def _claims_prompt(store: BookStore, book_id: str, text: str, chapter: int) -> str:
    current = store.facts_as_of(book_id, chapter)
    lines = [f"Chapter {chapter}. What the book established before it:"]
    for subject, attributes in sorted(current.items()):
        facts = ", ".join(f"{a}={f.value}" for a, f in sorted(attributes.items()))
        lines.append(f"- {subject}: {facts}")
    entities = store.entities(book_id)
    lines.append(
        "Entities: " + "; ".join(f"{e.path} ({', '.join((e.title, *e.aliases))})" for e in entities)
    )
    lines += ["", "The chapter:", text]
    return "\n".join(lines)


async def claims_by_agent(
    endpoint: ChatEndpoint, store: BookStore, book_id: str, text: str, chapter: int
) -> list[Claim]:
    """The claims the agent model finds in ``text``, subjects resolved to paths (claims
    about subjects the book does not know are dropped: nothing to check them against).
    A malformed answer raises :class:`MonitorError` naming what was wrong."""
    try:
        answer = await ask_agent_json(
            endpoint,
            CLAIMS_SYSTEM,
            _claims_prompt(store, book_id, text, chapter),
            AgentClaims,
            what="claims",
        )
    except AgentJsonError as exc:
        raise MonitorError(str(exc), exc.problems) from None
    names = subject_names(store, book_id)
    out: list[Claim] = []
    for index, item in enumerate(answer.claims):
        subject = names.get(item.subject.strip().casefold())
        if subject is None:
            continue
        if item.category not in FACT_CATEGORIES:  # pragma: no cover - Literal guards it
            raise MonitorError(
                "bad claim category", [FieldProblem(f"claims[{index}].category", item.category)]
            )
        out.append(
            Claim(
                subject,
                item.attribute.strip(),
                item.value.strip(),
                item.category,
                item.evidence,
                item.change,
            )
        )
    return out
