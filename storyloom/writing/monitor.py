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
from functools import cache, cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from storyloom.core.errors import FieldProblem, InvalidInput
from storyloom.core.settings import ChatEndpoint
from storyloom.workflow.node_type import Evaluation, EvaluationCheck, EvaluationNote
from storyloom.writing.agent_json import AgentJsonError, ask_agent_json
from storyloom.writing.book_store import (
    FACT_CATEGORIES,
    BookStore,
    Fact,
    FactCategory,
    Resource,
)
from storyloom.writing.referents import KIN_GENDER, Genders, Referent, Topics
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
    "hair": ("hair", "haired", "头发", "长发", "短发", "发"),
    "eyes": ("eye", "eyes", "eyed", "眼睛", "眼眸", "眸子", "双眸", "瞳孔", "眼", "眸", "瞳"),
    "eye colour": ("eye", "eyes", "眼", "瞳"),
    "eye color": ("eye", "eyes", "眼", "瞳"),
    "status": ("alive", "dead", "活", "死"),
    "weapon": ("weapon", "sword", "blade", "武器", "剑"),
}
_COLOURS = (
    "black", "white", "silver", "grey", "gray", "red", "blue", "green", "brown", "golden",
    "gold", "blond", "blonde", "auburn", "hazel", "amber", "violet", "purple", "pink",
    "chestnut", "copper", "ginger", "platinum", "raven", "sandy",
    "黑", "白", "银", "灰", "红", "蓝", "绿", "棕", "褐", "金", "紫", "琥珀", "乌",
)  # fmt: skip
_COLOUR_ATTRIBUTES = frozenset({"hair", "eyes", "eye colour", "eye color"})
"""Attributes whose common values are known without the book having used them: a book
that only ever said "green eyes" still has "blue eyes" read as a claim about eyes (only
said of the attribute word: "blue eyes", "eyes were blue", "蓝色的眼睛")."""
_COLOUR_FAMILY: Mapping[str, str] = {
    "hair": "hair",
    "eyes": "eyes",
    "eye colour": "eyes",
    "eye color": "eyes",
}
_SORE_EYES = frozenset({"red", "pink", "红"})
_FILLER = (
    r"was|were|is|are|had|have|gone|turned|now|still|looked|seemed|shone|glinted|gleamed|"
    r"flashed|burned|as|so|very|bright|dark|pale|deep|light|a|the|same|of"
)
_ZH_FILLER = r"是|呈|依然是|仍是|还是|泛着|透着|都是|染成了|染成|变成了|变成|变得|变为|成了"
_VOCABULARY_ATTRIBUTES = frozenset(
    {
        "eyes", "hair", "height", "scar", "mark", "brother", "sister", "father", "mother",
        "son", "daughter", "spouse", "home", "occupation", "rank", "status", "death",
        "injury", "lost_limb", "owns", "owes", "oath",
    }
)  # fmt: skip
"""The fact vocabulary's attributes (docs/writing.md): each is checked by a reader of its
own, never by a bare value standing near a name ("Anna visited Lisbon" says nothing of
where she lives; "Anna hugged Tomas" names nobody's brother)."""
_KIN_ATTRIBUTES = ("brother", "sister", "father", "mother", "son", "daughter", "spouse")
_KIN_WORDS: Mapping[str, str] = {
    "brother": "brother", "sister": "sister", "father": "father", "mother": "mother",
    "son": "son", "daughter": "daughter", "husband": "spouse", "wife": "spouse",
    "spouse": "spouse", "dad": "father", "papa": "father", "mum": "mother", "mom": "mother",
    "mama": "mother",
    "哥哥": "brother", "弟弟": "brother", "兄长": "brother", "姐姐": "sister",
    "妹妹": "sister", "父亲": "father", "爸爸": "father", "母亲": "mother", "妈妈": "mother",
    "儿子": "son", "女儿": "daughter", "丈夫": "spouse", "妻子": "spouse",
}  # fmt: skip
_KIN_EN = r"brother|sister|father|mother|son|daughter|husband|wife|spouse|dad|papa|mum|mom|mama"
_ZH_KIN = "哥哥|弟弟|兄长|姐姐|妹妹|父亲|爸爸|母亲|妈妈|儿子|女儿|丈夫|妻子"
_KIN_ADJECTIVES = r"older|younger|elder|eldest|youngest|little|big|baby|twin|late|only|dear"
_NAME = r"[A-Z][\w'’-]+(?:\s+[A-Z][\w'’-]+)?"
_EN_KIN_NAME = re.compile(rf"\b(?P<kin>{_KIN_EN})\b(?!['’])\s*,?\s+(?P<name>{_NAME})")
_EN_NAME_KIN = re.compile(
    rf"(?P<name>{_NAME}),\s+(?:his|her|[A-Z][\w'’-]*['’]s)\s+(?:(?:{_KIN_ADJECTIVES})\s+)?"
    rf"(?P<kin>{_KIN_EN})\b(?!['’])"
)
_KIN_GAP = re.compile(rf"(?:['’]s)?\s+(?:(?:{_KIN_ADJECTIVES})\s+)?")
_ZH_KIN_GAP = re.compile(r"的?")
_NOT_NAMES = frozenset(
    {"And", "But", "Then", "The", "He", "She", "I", "It", "They", "We", "You", "When", "As"}
)
_MARRY_EN = re.compile(
    r"\b(?:married|marries|remarried|wed|new (?:husband|wife)|widow|widower)\b", re.IGNORECASE
)
_MARRY_ZH = ("嫁给", "娶了", "再婚", "新婚", "改嫁")
_HOME_NOUNS = r"home|house|flat|apartment|rooms|room|lodgings|place|quarters|villa|cottage|studio"
_HOME_GAP = re.compile(r"(?:['’]s)?\s+(?:(?:own|little|small|new|tiny|rented|big)\s+)*")
_ZH_HOME_NOUNS = r"家|公寓|住处|寓所|房子|宅子|住所|小屋"
_ZH_HOME_GAP = re.compile(r"的?(?:在|回到|住在)?")
_PAST_HOME = re.compile(r"\b(?:had|once|formerly|used to)\s*$")
_MOVE_EN = re.compile(
    r"\b(?:moved|moves|moving|relocated|settled|emigrated|new (?:home|house|flat|apartment))\b",
    re.IGNORECASE,
)
_MOVE_ZH = ("搬到", "搬去", "搬进", "迁居", "定居", "移居", "新家")
_LIMB_PARTS: Mapping[str, tuple[str, ...]] = {
    "arm": ("arm", "forearm", "elbow", "臂", "胳膊"),
    "hand": ("hand", "fist", "palm", "finger", "wrist", "手", "拳", "掌"),
    "leg": ("leg", "knee", "thigh", "shin", "腿"),
    "foot": ("foot", "feet", "ankle", "toe", "脚", "足"),
    "eye": ("eye", "眼"),
}
_LIMB_COVERS: Mapping[str, tuple[str, ...]] = {
    "arm": ("arm", "hand"),
    "hand": ("hand",),
    "leg": ("leg", "foot"),
    "foot": ("foot",),
    "eye": ("eye",),
}
_LIMB_USE = re.compile(
    r"\b(?:left|right)\s+(?:hand|arm|fist|palm|fingers|finger|wrist|elbow|forearm|leg|foot|"
    r"knee|ankle|eye)\b|\b(?:both|two)\s+(?:hands|arms|fists|palms|legs|feet|eyes)\b|"
    r"(?:左|右)(?:手臂|胳膊|臂|手|拳|掌|腿|脚|眼)|(?:双手|两只手|两手|双臂|双腿|两条腿|双眼|两只眼)"
)
_LIMB_GAP = re.compile(r"(?:['’]s)?\s+|的?(?:用)?")
_LIMB_GONE_EN = re.compile(
    r"\b(?:stump|missing|lost|empty|pinned|sleeve|phantom|prosthetic|wooden|false|patch|"
    r"socket|gone|remaining|once|used to|where .* had been)\b"
)
_LIMB_GONE_ZH = (
    "空荡荡",
    "空袖",
    "袖管",
    "断臂",
    "断肢",
    "残",
    "失去",
    "没了",
    "假肢",
    "义肢",
    "眼罩",
)
_HYPOTHETICAL_EN = re.compile(
    r"\b(?:if|wish|wished|imagine|imagined|pictured|as though|as if|would have|might have|"
    r"could almost|half expected|the way)\b",
    re.IGNORECASE,
)
_HYPOTHETICAL_ZH = ("如果", "假如", "要是", "仿佛", "好像", "想象", "似乎")
_REVIVE_EN = re.compile(
    r"\b(?:revived|reborn|resurrected|came back to life|rose from the dead|"
    r"returned from the dead)\b",
    re.IGNORECASE,
)
_REVIVE_ZH = ("复活", "起死回生", "死而复生")
_EN_VERBS = (
    r"said|says|asked|asks|went|goes|came|comes|ran|runs|stood|stands|sat|sits|took|takes|"
    r"gave|gives|made|makes|got|gets|held|holds|told|tells|spoke|speaks|saw|sees|knew|"
    r"knows|thought|felt|left|brought|began|kept|let|put|set|led|met|paid|rose|drew|drove|"
    r"rode|threw|caught|fought|bought|wrote|swore|shook|woke|wore|opens|closes|walks|turns|"
    r"looks|smiles|nods|laughs|reaches|pulls|pushes|lifts|steps|waits|whispers|shouts|"
    r"answers|leans|picks|grabs|sighs|shrugs|grins|frowns"
)
_EN_NOT_VERBS = (
    r"(?:need|feed|seed|bed|red|shed|indeed|speed|breed|tired|sacred|naked|wicked|beloved|"
    r"aged|learned|ragged)\b"
)
_EN_ACTION = re.compile(
    rf"\s+(?:(?:then|also|just|only|still|quietly|slowly|finally|suddenly|[a-z]+ly)\s+)?"
    rf"(?:(?!{_EN_NOT_VERBS})[a-z]{{2,}}ed\b|(?:{_EN_VERBS})\b|(?:was|is|were)\s+[a-z]{{2,}}ing\b)"
)
_EN_SPEECH_BEFORE = re.compile(
    r"\b(?:said|asked|whispered|shouted|called|replied|answered|murmured|cried|muttered|"
    r"added|snapped|sighed|laughed|says|asks)\s+$",
    re.IGNORECASE,
)
_ZH_ACTION = re.compile(
    r"(?:又|也|就|便|正|还|才|却|忽然|突然|猛地|轻轻地?|慢慢地?|缓缓地?|默默地?|低声|大声|笑着|冷冷地?|一把|伸手)*"
    r"(?:说|道|问|喊|叫|笑|走|跑|站|坐|推|拉|拿|握|举|抓|打开|关上|点头|摇头|看着|望着|转身|回头|"
    r"递|抱|拍|敲|开口|答|回答|冲|跳|骑|吃|喝|写|读|唱|哭|叹|端|提|披|穿|踏|迈|扶|接过|掏出|放下|挥)"
)
_CHANGE_EN = re.compile(
    r"\b(?:(?:turned|turns)(?!\s+(?:to|toward|towards|away|around|round|back|on|off|over|up|"
    r"down|and|her|his|their|the|a|an)\b)|dyed|dyes|became|become|becomes|changed|changes|"
    r"now|no longer|bleached|grew|was reborn|revived|moved|moves)\b",
    re.IGNORECASE,
)
_CHANGE_ZH = ("变成", "染成", "变为", "不再", "成了", "变得", "化为", "复活", "搬到", "搬去")
_MEMORY_EN = re.compile(
    r"\b(?:remembered|remember|remembers|recalled|recalls|memory|memories|used to|back then|"
    r"the late|grave|tomb|funeral|mourned|ghost|years ago|in the past|dreamed|dreamt|"
    r"years before|long ago|as a child|as a boy|as a girl)\b",
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
    "以前",
    "从前",
    "小时候",
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
    uses: bool = False
    """The text has the subject use the body part ``value`` ("lifted it with his left
    hand"): a contradiction when a ``lost_limb`` fact covers it, whatever its value."""


WarningKind = Literal["contradiction", "lost", "dead"]
"""A warning's frame: the text says another value; uses a body part the subject lost;
has a dead subject act or speak."""


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
    earlier: tuple[str, int] | None = None
    """When ``found`` is what the attribute was before a progression: that value and the
    chapter until which it held (shown as "was … until ch. N")."""
    subject_title: str = ""
    """The subject's name as the book gives it (its path's last part when it has none)."""
    fact_evidence: str = ""
    """The sentence of chapter ``since_chapter`` that established ``expected`` (empty
    when the fact was stored without one)."""
    uses: bool = False
    """``found`` is a body part the text has the subject use (``expected`` was lost)."""

    @property
    def name(self) -> str:
        return self.subject_title or self.subject.rsplit("/", 1)[-1]

    @property
    def kind(self) -> WarningKind:
        """Which frame the warning is said in (the values are the finding's fields)."""
        if self.uses:
            return "lost"
        if self.attribute.casefold() == "status" and _norm(self.expected) in _DEAD:
            return "dead"
        return "contradiction"

    @property
    def note(self) -> EvaluationNote:
        """The finding's frame as a term (:attr:`kind`) and values, for a page to say."""
        value, until = self.earlier if self.earlier is not None else (None, None)
        return EvaluationNote(
            term=self.kind,
            values={
                "name": self.name,
                "attribute": self.attribute,
                "expected": self.expected,
                "found": self.found,
                "since": self.since_chapter,
                "earlierValue": value,
                "earlierUntil": until,
            },
        )

    @property
    def detail(self) -> str:
        name = self.name
        since = f"since ch. {self.since_chapter}"
        kind = self.kind
        if kind == "lost":
            head = f"{name} · {self.attribute}: lost “{self.expected}” ({since})"
            found = f", yet uses “{self.found}”"
        elif kind == "dead":
            head = f"{name} · {self.attribute}: “{self.expected}” ({since})"
            found = ", yet acts or speaks"
        else:
            head = f"{name} · {self.attribute}: expected “{self.expected}” ({since})"
            found = f", found “{self.found}”"
        if self.earlier is not None:
            value, until = self.earlier
            found += f" — was “{value}” until ch. {until}; now “{self.expected}”"
        evidence = f": “{self.evidence.strip()}”" if self.evidence.strip() else ""
        established = ""
        if self.fact_evidence.strip():
            established = (
                f" — established in ch. {self.since_chapter}: “{self.fact_evidence.strip()}”"
            )
        return head + found + evidence + established


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
    genders: Genders = field(default_factory=Genders)
    """Each character's gender as the book's fact sentences and kin facts tell it."""
    people: set[str] = field(default_factory=set)
    """The characters' paths (pronouns resolve only to them)."""
    places: tuple[str, ...] = ()
    """Place names a whereabouts claim may name (lower case, longest first): every value
    of a ``home`` fact and every location's names."""
    kin_names: tuple[str, ...] = ()
    """Names (lower case, longest first) a kin claim may name in Chinese, where a name
    has no capital letter to find it by: every kin value and every character's names."""

    @classmethod
    def build(cls, store: BookStore, book_id: str) -> Lexicon:
        entities = {r.path: r for r in store.entities(book_id)}
        facts = store.facts(book_id)
        lexicon = cls(entities, EntityMatcher(entities.values()), facts)
        lexicon.people = {p for p, r in entities.items() if r.kind == "character"}
        for fact in facts:
            lexicon.attributes.setdefault(fact.subject, {})[fact.attribute] = fact.category
            lexicon.vocabulary.setdefault(fact.attribute, set()).add(fact.value.strip().casefold())
            gender = KIN_GENDER.get(fact.attribute.casefold())
            if gender is not None:
                for path in lexicon.matcher.match(fact.value):
                    lexicon.genders.vote(path, gender, 3)
        lexicon.genders.read(
            (f.evidence for f in facts if f.evidence), lexicon.matcher, lexicon.people
        )
        places = set(lexicon.vocabulary.get("home", ()))
        names = {v for a in _KIN_ATTRIBUTES for v in lexicon.vocabulary.get(a, ())}
        for entity in entities.values():
            own = {n.strip().casefold() for n in (entity.title, *entity.aliases) if n.strip()}
            if entity.kind == "location":
                places |= own
            if entity.kind == "character":
                names |= own
        lexicon.places = tuple(sorted((p for p in places if p), key=lambda p: (-len(p), p)))
        lexicon.kin_names = tuple(sorted((n for n in names if n), key=lambda n: (-len(n), n)))
        return lexicon

    # The patterns below depend on the lexicon only: compiled once for all its sentences.

    @cached_property
    def home_patterns(self) -> _HomePatterns | None:
        """The whereabouts patterns over :attr:`places` (None when there are none)."""
        return _HomePatterns.of(self.places) if self.places else None

    @cached_property
    def zh_kin_pattern(self) -> re.Pattern[str] | None:
        """A kin word then one of the Chinese :attr:`kin_names` (None when there are none)."""
        names = "|".join(re.escape(n) for n in self.kin_names if _CJK.search(n))
        return re.compile(rf"({_ZH_KIN})[，,]?({names})") if names else None

    @cached_property
    def colour_patterns(self) -> dict[str, tuple[set[str], list[tuple[str, re.Pattern[str]]]]]:
        """Colour family → (the values the book's facts gave it, the patterns of
        :func:`_described_colours`)."""
        out: dict[str, tuple[set[str], list[tuple[str, re.Pattern[str]]]]] = {}
        for family in ("hair", "eyes"):
            values = {
                v
                for a, f in _COLOUR_FAMILY.items()
                if f == family
                for v in self.vocabulary.get(a, ())
            }
            out[family] = (values, _colour_patterns(family, values))
        return out


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
    """Claims the text makes, found lexically (no LLM): hair and eye colours described,
    dead characters acting or speaking, where characters live, kin named, lost limbs
    used, other attributes whose value some fact of the book has used, world rules and
    the narrative person. Pronouns are resolved (:mod:`storyloom.writing.referents`);
    sentences of memory or flashback say nothing about now. One claim per (subject,
    attribute, value), with its first sentence, except that every sentence in which the
    dead act or a lost limb is used is a claim of its own."""
    lex = lexicon or Lexicon.build(store, book_id)
    current = store.facts_as_of(book_id, chapter)
    lost: dict[str, list[Fact]] = {}
    for fact in lex.facts:
        if fact.chapter < chapter and fact.attribute.casefold() == "lost_limb":
            lost.setdefault(fact.subject, []).append(fact)
    sentences = split_sentences(text)
    genders = Genders({p: dict(v) for p, v in lex.genders.votes.items()})
    genders.read(sentences, lex.matcher, lex.people)
    topics = Topics(genders, lex.people)
    claims: dict[tuple[str, str, str], Claim] = {}

    def add(claim: Claim) -> None:
        key = (claim.subject, claim.attribute, _norm(claim.value))
        if claim.uses or (claim.attribute == "status" and claim.value == "alive"):
            key = (*key[:2], f"{key[2]}\x1f{claim.evidence}")  # each such sentence needs a fix
        if key not in claims or (claim.change and not claims[key].change):
            claims[key] = claim

    for sentence in sentences:
        mentions = lex.matcher.mentions(sentence)
        refs = topics.referents(sentence, mentions)
        agents = _agents(sentence, refs)
        memory = is_memory(sentence)
        change = is_change(sentence)
        if not memory:
            found: list[Claim] = []
            if mentions:
                found += _attribute_claims(lex, sentence, mentions, change)
            if refs:
                found += _colour_claims(lex, sentence, refs, change)
                found += _dead_acting(current, sentence, agents)
                found += _home_claims(lex, sentence, refs, change)
                found += _kin_claims(lex, sentence, refs, change)
                found += _limb_claims(lost, sentence, refs)
            found += _world_claims(lex, current, sentence, change)
            for claim in found:
                add(claim)
        for ref in agents:
            topics.acted(ref.path)
        if not agents and mentions and mentions[0].start <= 2:
            topics.acted(mentions[0].paths[0])
    pov = _perspective_claim(store, book_id, text, chapter, current)
    if pov is not None:
        add(pov)
    return list(claims.values())


def _attribute_claims(
    lex: Lexicon, sentence: str, mentions: Sequence[EntityMention], change: bool
) -> Iterable[Claim]:
    """Attributes outside the fact vocabulary (skills, weapons...) whose value, one some
    fact of the book used, stands near the entity. The vocabulary's own kinds have
    their own readers: a place or a name near someone says nothing about them."""
    lower = sentence.casefold()
    for subject in dict.fromkeys(p for m in mentions for p in m.paths):
        known = {a: c for a, c in lex.attributes.get(subject, {}).items() if _generic(a)}
        occurrences: dict[str, list[tuple[str, int]]] = {}
        for attribute in known:
            for value in lex.vocabulary.get(attribute, ()):
                at = _find_term(lower, value)
                while at >= 0 and _negated_before(lower, at):
                    at = _find_term(lower, value, at + 1)
                if at >= 0 and subject in _nearest(mentions, at):
                    occurrences.setdefault(value, []).append((attribute, at))
        for value, places in occurrences.items():
            attributes = list(dict.fromkeys(a for a, _ in places))
            if len(attributes) > 1:
                # One value of two attributes: the sentence must say which.
                attributes = [
                    a
                    for a in attributes
                    if any(_find_term(lower, w) >= 0 for w in _attribute_words(a))
                ]
                if len(attributes) != 1:
                    continue
            attribute = attributes[0]
            yield Claim(subject, attribute, value, known[attribute], sentence, change)


def _generic(attribute: str) -> bool:
    key = attribute.strip().casefold()
    return key not in _VOCABULARY_ATTRIBUTES and not key.startswith("hidden:")


def _owner(refs: Sequence[Referent], at: int) -> str | None:
    """Whose is the thing at ``at``: the nearest referent before it, else the first
    after it ("silver-haired Lin Feng")."""
    before = [r for r in refs if r.end <= at]
    if before:
        return max(before, key=lambda r: r.end).path
    after = [r for r in refs if r.start >= at]
    return min(after, key=lambda r: r.start).path if after else None


def _possessor(
    sentence: str, refs: Sequence[Referent], at: int, gap: re.Pattern[str]
) -> str | None:
    """The referent whose possessive ("his", "Anna's", "她的", "林枫") stands right
    before ``at``, with only what ``gap`` allows in between; None when there is none."""
    before = [r for r in refs if r.end <= at]
    if not before:
        return None
    ref = max(before, key=lambda r: r.end)
    between = sentence[ref.end : at]
    return ref.path if gap.fullmatch(between.casefold()) else None


def _colour_claims(
    lex: Lexicon, sentence: str, refs: Sequence[Referent], change: bool
) -> Iterable[Claim]:
    """Hair and eye colours described: "her blue eyes", "his eyes were grey as ash",
    "silver-haired Lin Feng", "她蓝色的眼睛", "眼睛是绿色的"."""
    lower = sentence.casefold()
    for family, (values, patterns) in lex.colour_patterns.items():
        for value, at in _described_colours(lower, patterns):
            if _negated_before(lower, at):
                continue
            if family == "eyes" and value in _SORE_EYES and value not in values:
                continue  # "eyes red from crying" is not an eye colour
            subject = _owner(refs, at)
            known = lex.attributes.get(subject or "", {})
            stored = [a for a in known if _COLOUR_FAMILY.get(a.casefold()) == family]
            if subject is not None and stored:
                yield Claim(subject, stored[0], value, known[stored[0]], sentence, change)


def _colour_patterns(attribute: str, values: set[str]) -> list[tuple[str, re.Pattern[str]]]:
    """(side, pattern) finding colours said of one of the attribute's words, before it
    (``blue eyes``, ``blue-grey eyes``, ``silver-haired``, ``蓝色的眼睛``) or after it
    (``eyes were grey``, ``头发是银色的``): the common colours and ``values``."""
    colours = sorted({*_COLOURS, *values}, key=len, reverse=True)
    en = "|".join(re.escape(c) for c in colours if not _CJK.search(c))
    zh = "|".join(re.escape(c) for c in colours if _CJK.search(c))
    words = _ATTRIBUTE_WORDS.get(attribute, (attribute,))
    en_words = "|".join(re.escape(w) for w in words if not _CJK.search(w))
    zh_words = "|".join(re.escape(w) for w in words if _CJK.search(w))
    patterns: list[tuple[str, str]] = []
    if en and en_words:
        patterns.append(("before", rf"\b({en})(?:[\s-]+[a-z]+)?[\s-]+(?:{en_words})\b"))
        patterns.append(("after", rf"\b(?:{en_words})\b[\s,]+(?:(?:{_FILLER})\s+){{0,3}}({en})\b"))
    if zh and zh_words:
        patterns.append(("before", rf"((?:{zh})+色?)的?(?:{zh_words})"))
        patterns.append(("after", rf"(?:{zh_words})(?:{_ZH_FILLER})?((?:{zh})+色?)"))
    return [(side, re.compile(pattern)) for side, pattern in patterns]


def _described_colours(
    lower: str, patterns: Sequence[tuple[str, re.Pattern[str]]]
) -> list[tuple[str, int]]:
    """Colours the :func:`_colour_patterns` find in ``lower``; a compound colour counts
    once ("silver-white hair")."""
    by_word: dict[int, tuple[str, int]] = {}
    for side, pattern in patterns:
        for match in pattern.finditer(lower):
            key = match.end() if side == "before" else match.start()
            found = (match.group(1), match.start(1))
            if key not in by_word or found[1] < by_word[key][1]:
                by_word[key] = found
    return sorted(set(by_word.values()), key=lambda f: f[1])


def _nearest(mentions: Sequence[EntityMention], at: int) -> tuple[str, ...]:
    """The entity a value at ``at`` is about: the closest mention before it, else the
    closest after it ("silver-haired Lin Feng")."""
    before = [m for m in mentions if m.end <= at]
    if before:
        return max(before, key=lambda m: m.end).paths
    return min(mentions, key=lambda m: m.start).paths


def _agents(sentence: str, refs: Sequence[Referent]) -> list[Referent]:
    """Referents that act or speak in ``sentence``: a name or "he"/"she"/"他"/"她"
    followed by a verb ("Tomas opened", "she said", "托马斯推开"), or named after a
    verb of speech ("'Go,' said Tomas")."""
    out = []
    for ref in refs:
        word = sentence[ref.start : ref.end].casefold()
        if ref.pronoun and word not in ("he", "she", "他", "她"):
            continue
        after = sentence[ref.end :]
        before = sentence[: ref.start]
        if _CJK.search(word):
            acts = _ZH_ACTION.match(after) is not None
        else:
            acts = _EN_ACTION.match(after) is not None or (
                not ref.pronoun and _EN_SPEECH_BEFORE.search(before) is not None
            )
        if acts:
            out.append(ref)
    return out


def _dead_acting(
    current: Mapping[str, Mapping[str, Fact]], sentence: str, agents: Sequence[Referent]
) -> Iterable[Claim]:
    """A character the book has dead as of the chapter who acts or speaks now (unless
    the sentence is hypothetical, about their body, or brings them back)."""
    lower = sentence.casefold()
    if _HYPOTHETICAL_EN.search(sentence) or any(c in sentence for c in _HYPOTHETICAL_ZH):
        return
    if any(_find_term(lower, word) >= 0 for word in _DEAD | _CORPSE):
        return
    revived = _REVIVE_EN.search(sentence) is not None or any(c in sentence for c in _REVIVE_ZH)
    for subject in dict.fromkeys(r.path for r in agents):
        status = current.get(subject, {}).get("status")
        if status is None or _norm(status.value) not in _DEAD:
            continue
        yield Claim(subject, "status", "alive", "timeline", sentence, revived)


@dataclass(frozen=True)
class _HomePatterns:
    """Whereabouts patterns over a book's place names (see :func:`_home_claims`)."""

    noun_in: re.Pattern[str]
    place_noun: re.Pattern[str]
    lives_in: re.Pattern[str]
    zh_place_noun: re.Pattern[str]
    zh_lives_in: re.Pattern[str]

    @classmethod
    def of(cls, places: Sequence[str]) -> _HomePatterns:
        names = "|".join(re.escape(p) for p in places)
        return cls(
            re.compile(rf"\b(?:{_HOME_NOUNS})\s+(?:in|at|on)\s+(?:the\s+)?({names})\b"),
            re.compile(rf"\b({names})\s+(?:{_HOME_NOUNS})\b"),
            re.compile(
                rf"\b(?:(?:back|at)\s+home\s+(?:in|to)|home\s+(?:in|to)|(?:lives|lived|living|"
                rf"live|resides|resided)\s+in)\s+({names})\b"
            ),
            re.compile(rf"(?:在|回到|住在)?({names})的(?:{_ZH_HOME_NOUNS})"),
            re.compile(rf"(?:住在|回到|回)({names})(?:的?家)?"),
        )


def _home_claims(
    lex: Lexicon, sentence: str, refs: Sequence[Referent], change: bool
) -> Iterable[Claim]:
    """Where someone lives, as the text says it: "her rooms in Lisbon", "in her Lisbon
    flat", "back home in Lisbon", "lives in Lisbon", "她在里斯本的公寓", "住在里斯本".
    Someone else's home ("her sister's flat"), a former one ("her old flat", "had
    lived") and a move ("moved to Porto": a progression) are not contradictions."""
    patterns = lex.home_patterns
    if patterns is None:
        return
    lower = sentence.casefold()
    moved = change or _MOVE_EN.search(sentence) is not None or any(c in sentence for c in _MOVE_ZH)
    found: list[tuple[str | None, str, int]] = []
    for match in patterns.noun_in.finditer(lower):
        owner = _possessor(sentence, refs, match.start(), _HOME_GAP)
        if owner is not None:
            found.append((owner, sentence[match.start(1) : match.end(1)], match.start(1)))
    for match in patterns.place_noun.finditer(lower):
        owner = _possessor(sentence, refs, match.start(), _HOME_GAP)
        if owner is not None:
            found.append((owner, sentence[match.start(1) : match.end(1)], match.start(1)))
    for match in patterns.lives_in.finditer(lower):
        if _PAST_HOME.search(lower[max(0, match.start() - 12) : match.start()]):
            continue
        place = sentence[match.start(1) : match.end(1)]
        found.append((_owner(refs, match.start()), place, match.start(1)))
    for match in patterns.zh_place_noun.finditer(lower):
        owner = _possessor(sentence, refs, match.start(), _ZH_HOME_GAP)
        if owner is not None:
            found.append((owner, sentence[match.start(1) : match.end(1)], match.start(1)))
    for match in patterns.zh_lives_in.finditer(lower):
        if match.group(0).startswith("回") and not match.group(0).endswith("家"):
            continue
        place = sentence[match.start(1) : match.end(1)]
        found.append((_owner(refs, match.start()), place, match.start(1)))
    for owner, place, at in found:
        if owner is None or owner not in lex.people or _negated_before(lower, at):
            continue
        known = lex.attributes.get(owner, {})
        if "home" not in known:
            continue
        yield Claim(owner, "home", place, known["home"], sentence, moved)


def _kin_claims(
    lex: Lexicon, sentence: str, refs: Sequence[Referent], change: bool
) -> Iterable[Claim]:
    """Kin named: "her brother Marco", "Marco, her brother,", "Anna's elder sister
    Inês", "她的哥哥马可", "她哥哥马可"."""
    lower = sentence.casefold()
    married = (
        change or _MARRY_EN.search(sentence) is not None or any(c in sentence for c in _MARRY_ZH)
    )
    found: list[tuple[str | None, str, str]] = []
    for match in _EN_KIN_NAME.finditer(sentence):
        owner = _possessor(sentence, refs, match.start(), _KIN_GAP)
        found.append((owner, match.group("kin"), match.group("name")))
    for match in _EN_NAME_KIN.finditer(sentence):
        at = match.start("kin")
        owner = _possessor(sentence, refs, at, _KIN_GAP)
        found.append((owner, match.group("kin"), match.group("name")))
    zh_kin = lex.zh_kin_pattern if _CJK.search(sentence) else None
    if zh_kin is not None:
        for match in zh_kin.finditer(lower):
            owner = _possessor(sentence, refs, match.start(), _ZH_KIN_GAP)
            found.append((owner, match.group(1), sentence[match.start(2) : match.end(2)]))
    for owner, kin, name in found:
        attribute = _KIN_WORDS.get(kin.casefold())
        name = re.sub(r"['’]s$", "", name.strip())
        if owner is None or attribute is None or name in _NOT_NAMES:
            continue
        known = lex.attributes.get(owner, {})
        if attribute not in known or owner in lex.matcher.match(name):
            continue
        yield Claim(owner, attribute, name, known[attribute], sentence, married)


def _limb_claims(
    lost: Mapping[str, Sequence[Fact]], sentence: str, refs: Sequence[Referent]
) -> Iterable[Claim]:
    """A body part used ("with his left hand", "both hands", "用左手", "双手") by
    someone who has lost a limb; the stump, the empty sleeve or the missing arm itself
    is not a use."""
    if not lost:
        return
    lower = sentence.casefold()
    if _LIMB_GONE_EN.search(lower) or any(c in sentence for c in _LIMB_GONE_ZH):
        return
    for match in _LIMB_USE.finditer(lower):
        if _negated_before(lower, match.start()):
            continue
        owner = _possessor(sentence, refs, match.start(), _LIMB_GAP) or _owner(refs, match.start())
        if owner is None or owner not in lost:
            continue
        side, part = _limb(match.group(0))
        if part is None:
            continue
        if any(_covers(_limb(f.value), (side, part)) for f in lost[owner]):
            yield Claim(owner, "lost_limb", match.group(0).strip(), "factual", sentence, uses=True)


def _limb(text: str) -> tuple[str, str | None]:
    """(side: left | right | both | "", part) of "left arm", "both hands", "左臂"."""
    lower = text.casefold()
    side = ""
    if re.search(r"\bleft\b|左", lower):
        side = "left"
    elif re.search(r"\bright\b|右", lower):
        side = "right"
    elif re.search(r"\b(?:both|two)\b|双|两", lower):
        side = "both"
    for part, words in _LIMB_PARTS.items():
        if any((w in lower) if _CJK.search(w) else re.search(rf"\b{w}", lower) for w in words):
            return side, part
    return side, None


def _covers(lost: tuple[str, str | None], used: tuple[str, str | None]) -> bool:
    lost_side, lost_part = lost
    used_side, used_part = used
    if lost_part is None or used_part is None:
        return False
    if used_part not in _LIMB_COVERS.get(lost_part, (lost_part,)):
        return False
    return lost_side in ("", "both") or used_side in (lost_side, "both")


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
    (a value other than the current one, unless the claim is a change; a body part used
    that a ``lost_limb`` fact took), one per fingerprint. Each names the fact: its value,
    its chapter and the sentence that established it."""
    current = store.facts_as_of(book_id, chapter)
    history: dict[tuple[str, str], list[Fact]] = {}
    for fact in store.facts(book_id, before_chapter=chapter):
        history.setdefault((fact.subject, fact.attribute), []).append(fact)
    pov: Fact | None = None
    pov_done = False
    chapter_uris: dict[int, str] = {c.ordinal: c.uri for c in store.chapters(book_id)}
    entities = store.entities(book_id)
    titles = {r.path: r.title for r in entities}
    matcher = EntityMatcher(entities)
    out: dict[str, Finding] = {}
    for claim in claims:
        expected = current.get(claim.subject, {}).get(claim.attribute)
        if claim.uses:
            expected = next(
                (
                    f
                    for f in reversed(history.get((claim.subject, claim.attribute), []))
                    if _covers(_limb(f.value), _limb(claim.value))
                ),
                None,
            )
        if expected is None and claim.attribute == POV_ATTRIBUTE:
            if not pov_done:
                pov, pov_done = book_pov(store, book_id, chapter, current), True
            expected = pov
        if expected is None or claim.change:
            continue
        found = normalize_pov(claim.value) if claim.attribute == POV_ATTRIBUTE else None
        if not claim.uses and _same_value(
            claim.attribute, found or claim.value, expected.value, matcher
        ):
            continue
        earlier: tuple[str, int] | None = None
        steps = history.get((claim.subject, claim.attribute), [])
        for index, step in enumerate(steps[:-1]):
            if not claim.uses and _same_value(claim.attribute, claim.value, step.value, matcher):
                until = steps[index + 1].chapter
                earlier = (step.value, until)
        category: FactCategory = (
            expected.category if expected.category in FACT_CATEGORIES else claim.category
        )
        if claim.attribute.casefold() == "status" and _norm(expected.value) in _DEAD:
            category = "timeline"
        value = found or claim.value
        # Each sentence in which the dead act or a lost limb is used needs its own fix.
        per_sentence = claim.uses or category == "timeline"
        said = f"{value}\x1f{claim.evidence}" if per_sentence else value
        mark = fingerprint(book_id, chapter, claim.subject, claim.attribute, said)
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
            fact_evidence=expected.evidence,
            uses=claim.uses,
        )
    return list(out.values())


def _same_value(attribute: str, found: str, expected: str, matcher: EntityMatcher) -> bool:
    """Whether the text's value is the fact's: equal; for colours, names and places also
    one inside the other ("brown" of "dark brown", "银" of "银色", "Tomas" of "Tomas
    Vale"); for names, two names of one entity."""
    a, b = _norm(found), _norm(expected)
    if a == b:
        return True
    key = attribute.strip().casefold()
    if key not in _COLOUR_FAMILY and key not in _KIN_ATTRIBUTES and key != "home":
        return False
    if key in _COLOUR_FAMILY:
        a, b = a.removesuffix("色"), b.removesuffix("色")
    if _CJK.search(a) or _CJK.search(b):
        if a and b and (a in b or b in a):
            return True
    else:
        words_a, words_b = set(re.findall(r"[\w'-]+", a)), set(re.findall(r"[\w'-]+", b))
        if words_a and words_b and (words_a <= words_b or words_b <= words_a):
            return True
    if key in _KIN_ATTRIBUTES:
        return bool(set(matcher.match(found)) & set(matcher.match(expected)))
    return False


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
                findings=[f.note for f in mine],
            )
        )
    if not active:
        quiet = len(findings)
        reason = "no contradiction with the book's facts"
        if quiet:
            reason += f" ({quiet} marked intentional)"
        note = EvaluationNote(term="consistent", values={"quiet": quiet})
        return Evaluation(
            decision="approve", confidence=1.0, reason=reason, reason_note=note, checks=checks
        )
    failed = [c.dimension for c in checks if not c.passed]
    summary = f"{len(active)} contradiction(s) in {', '.join(failed)}: " + "; ".join(
        f.detail for f in active[:3]
    )
    note = EvaluationNote(
        term="contradictions", values={"count": len(active), "dimensions": failed}
    )
    decision: Literal["retry", "flag-human"] = "retry" if attempt < max_retries else "flag-human"
    return Evaluation(
        decision=decision, confidence=0.9, reason=summary, reason_note=note, checks=checks
    )


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
