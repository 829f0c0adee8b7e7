"""Reading a book's memory from its prose, offline: who is in it, and what it says of them.

Two halves, both plain patterns over the text (no model, no download):

- :func:`discover_entities` finds the people and places a manuscript names: recurring
  capitalised names that are not merely sentence openers ("Mara", "Captain Ilse Varga",
  "Porto"), with their aliases (first name, surname, "Captain Varga"); Chinese names
  through ``jieba.posseg`` (``nr`` people, ``ns`` places) kept only when they recur.
  Whether a name is a place is judged by how it is used ("lived in Porto", "住在里斯本").
- :func:`read_facts` reads the fact vocabulary of docs/writing.md (eyes, hair, height, scar,
  mark, kin, home, occupation, rank, status, death, injury, lost_limb, owns, hidden:<item>,
  owes, oath) from each sentence, English and Chinese, with the sentence as evidence.
  A fact belongs to the person the sentence says it of: a name, a possessive ("Mara's",
  "her"), or a pronoun, which stands for the most recent person of the paragraph its
  gender fits. A progression ("dyed her hair silver", "moved to Porto", "染成了银色") is a
  ``change``.

Why patterns: no maintained English NER model ships inside a wheel on PyPI (spaCy's
``en_core_web_sm`` is published on GitHub releases, and PyPI holds only third-party
re-uploads), and what memory needs is this fixed vocabulary, which patterns read well.
What they do not read: facts stated only by implication, across several sentences, or
in phrasings far from the ones below; an agent model reads those (see curation).
"""

from __future__ import annotations

import importlib
import itertools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Literal

import regex

from storyloom.writing.book_store import FactCategory, Relation, Resource
from storyloom.writing.monitor import Claim, is_change, split_sentences
from storyloom.writing.referents import HE, KIN_GENDER, SHE, Gender
from storyloom.writing.scene_entities import EntityMatcher
from storyloom.writing.uris import slug

EntityKind = Literal["character", "location"]

_CJK = regex.compile(r"\p{Han}")

# -- entities --------------------------------------------------------------------------

TITLES: Mapping[str, Gender | None] = {
    "captain": None, "lord": "m", "lady": "f", "doctor": None, "dr": None, "mr": "m",
    "mrs": "f", "miss": "f", "ms": "f", "sir": "m", "dame": "f", "king": "m", "queen": "f",
    "prince": "m", "princess": "f", "general": None, "colonel": None, "lieutenant": None,
    "sergeant": None, "commander": None, "admiral": None, "major": None, "professor": None,
    "inspector": None, "master": "m", "mistress": "f", "father": "m", "mother": "f",
    "brother": "m", "sister": "f", "aunt": "f", "uncle": "m", "duke": "m", "duchess": "f",
    "count": "m", "countess": "f", "baron": "m", "baroness": "f", "madam": "f",
}  # fmt: skip
"""Titles before a name: a rank, sometimes a gender; "Captain Varga" is an alias."""
RANKS = frozenset(
    {"captain", "general", "colonel", "lieutenant", "sergeant", "commander", "admiral",
     "major", "inspector"}
)  # fmt: skip


# Capitalised words that are not names wherever they stand.
def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


_NOT_NAMES = _word_set(
    """i a an the he she it we they you his her hers its our their my your him them me us
    this that these those there here then when where what who whom whose which why how
    and but or nor so yet for if as at by in on of to up from with into onto upon over
    under after before while though although because since until unless once not no yes
    all any each every some none both either neither one two three four five six seven
    eight nine ten first second third last next other another such only even still just
    monday tuesday wednesday thursday friday saturday sunday january february march april
    may june july august september october november december spring summer autumn winter
    god chapter part book prologue epilogue mr mrs ms dr sir madam oh ah well now later
    perhaps maybe somewhere someone something nothing everyone everything english french
    latin north south east west outside inside above below behind beside beyond between
    without within across around through toward towards near along among against about
    let do did does was were is are be been had has have could would should might must
    shall will can"""
)
_WORD = r"[A-Z][a-z'’\-]*[a-z]"
_NAME_RUN = regex.compile(rf"\b{_WORD}(?:\s+{_WORD})*")
_SENTENCE_START = regex.compile(r"(?:^|[.!?…]\s*[\"”’]?\s+|[\"“‘]\s*)$")
_PLACE_BEFORE = regex.compile(
    r"\b(?:in|at|to|from|into|toward|towards|near|across|through|reached|left|past|of"
    r" the city of|outside|beyond|around)\s+$"
)
_PERSON_AFTER = regex.compile(
    r"^(?:'s|’s|\s*,\s*(?:her|his)\b|\s+(?:said|says|asked|answered|replied|smiled|laughed|"
    r"nodded|shrugged|looked|turned|walked|ran|sat|stood|felt|thought|knew|wanted|whispered|"
    r"shouted|cried|had|was|is|did|could|would|took|gave|came|went|told|saw|watched|"
    r"sighed|frowned|died|swore|owed|hid|lived|married|moved|lost|kept))\b"
)
_PLACE_SUFFIX = regex.compile(
    r"(?:port|ton|burg|bury|ford|ham|haven|wick|mouth|shire|land|vale|dale|gate|"
    r"\s(?:Street|Road|Bridge|Harbour|Harbor|Square|Hill|Castle|Abbey|Bay|River|Lake|"
    r"Island|Isles|Market|Gate|Tower|Hall|Quarter|Lane))$"
)
_ZH_NOT_NAMES = _word_set(
    "哥哥 弟弟 姐姐 妹妹 父亲 母亲 爸爸 妈妈 儿子 女儿 丈夫 妻子 先生 小姐 夫人 老师 师父 "
    "大人 公子 姑娘 东西 时候 地方 这里 那里 后来 然后 突然 已经"
)
# The commonest Chinese surnames (single characters), for names jieba does not know.
_ZH_SURNAMES = frozenset(
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程"
    "苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝"
    "龚邵万钱严覃武戴莫孔向汤柳楚燕岳柏"
)
# Characters that end a name run rather than continue it (numbers, verbs, particles).
_ZH_NOT_IN_NAME = "一二三四五六七八九十百千两等在是的了就也都还已曾正便又说把被和与从向对"
_ZH_PERSON_AFTER = regex.compile(
    r"^(?:说|笑|看|望|把|欠|失去|死|也|站|走|喜欢|发誓|搬|住|留着|有|是一|想|问|答|点头|摇头|"
    r"的(?:哥哥|弟弟|姐姐|妹妹|父亲|母亲|女儿|儿子|丈夫|妻子|左|右|脸|眼|头发|手))"
)
_ZH_PERSON_BEFORE = regex.compile(r"(?:哥哥|弟弟|姐姐|妹妹|父亲|母亲|女儿|儿子|丈夫|妻子|看着|对)$")
_ZH_PLACE_BEFORE = regex.compile(r"(?:住在|搬到了?|来到|前往|回到|到了|去了|离开了?|在|到|去|于)$")


@dataclass(frozen=True)
class FoundEntity:
    """A person or place the prose names often enough to be one of the book's entities."""

    kind: EntityKind
    title: str
    aliases: tuple[str, ...]
    first_chapter: int
    """The first chapter (1-based) that names it: it is not known before."""
    mentions: int
    gender: Gender | None = None

    @property
    def path(self) -> str:
        folder = "characters" if self.kind == "character" else "locations"
        return f"/entities/{folder}/{slug(self.title)}"


@dataclass
class _Candidate:
    name: str
    count: int = 0
    inner: int = 0
    """Occurrences not at a sentence start (where any word is capitalised)."""
    place: int = 0
    person: int = 0
    cued: int = 0
    """Occurrences a person's word stands beside (说, 的哥哥, 看着...)."""
    first: int = 0
    titles: Counter[str] = field(default_factory=Counter)


def is_chinese(text: str) -> bool:
    """Whether ``text`` is mostly Chinese (CJK ideographs outnumber Latin letters)."""
    sample = text[:4000]
    han = len(_CJK.findall(sample))
    latin = sum(1 for ch in sample if ch.isascii() and ch.isalpha())
    return han > latin


def discover_entities(
    chapters: Sequence[str], *, first_chapter: int = 1, min_mentions: int = 2
) -> list[FoundEntity]:
    """The people and places ``chapters`` name, each with the chapter it first appears in
    (``first_chapter`` is the number of ``chapters[0]``). A name must occur at least
    ``min_mentions`` times, at least once not opening a sentence (a title before it, or
    a place word, counts as well)."""
    chinese = is_chinese("\n".join(chapters[:3]))
    if chinese:
        return _discover_zh(chapters, first_chapter, min_mentions)
    return _discover_en(chapters, first_chapter, min_mentions)


def _discover_en(
    chapters: Sequence[str], first_chapter: int, min_mentions: int
) -> list[FoundEntity]:
    found: dict[str, _Candidate] = {}
    for offset, text in enumerate(chapters):
        for match in _NAME_RUN.finditer(text):
            words = match.group(0).split()
            start = match.start()
            # "Mara Quill's" is Mara Quill, said with a possessive.
            if words and words[-1].endswith(("'s", "’s")):
                words[-1] = words[-1][:-2]
            # Strip sentence-opening function words and titles off the front.
            title = ""
            while words and (words[0].casefold() in _NOT_NAMES or words[0].casefold() in TITLES):
                word = words.pop(0)
                if word.casefold() in TITLES and not title:
                    title = word.casefold()
                start = text.find(words[0], start + len(word)) if words else start
            while words and words[-1].casefold() in _NOT_NAMES:
                words.pop()
            if not words or len(words) > 4:
                continue
            name = " ".join(words)
            end = start + len(name)
            candidate = found.setdefault(name, _Candidate(name, first=offset))
            candidate.count += 1
            before = text[max(0, start - 40) : start]
            opener = title == "" and _SENTENCE_START.search(before) is not None
            if not opener:
                candidate.inner += 1
            if title:
                candidate.titles[title] += 1
            if _PLACE_BEFORE.search(before):
                candidate.place += 1
            if _PERSON_AFTER.match(text[end : end + 20]) or title:
                candidate.person += 1
    return _merge_en(found, first_chapter, min_mentions)


def _merge_en(
    found: Mapping[str, _Candidate], first_chapter: int, min_mentions: int
) -> list[FoundEntity]:
    keep = {
        n: c
        for n, c in found.items()
        if c.inner > 0 and (c.count >= min_mentions or c.titles) and len(n) > 1
    }
    # "Mara Voss" said once, at a sentence start, is still Mara's full name.
    singles = {n for n in keep if " " not in n}
    keep.update(
        {n: c for n, c in found.items() if " " in n and any(w in singles for w in n.split())}
    )
    # A single word that is part of exactly one kept longer name is that name's alias.
    full = sorted((n for n in keep if " " in n), key=lambda n: (-len(n.split()), n))
    # A first name or surname of a kept full name is an alias even when said once.
    keep.update(
        {n: c for n, c in found.items() if " " not in n and sum(n in f.split() for f in full) == 1}
    )
    owner: dict[str, str] = {}
    for name in keep:
        if " " in name:
            continue
        holders = sorted((f for f in full if name in f.split()), key=lambda f: -keep[f].count)
        # "Wren" is Wren Ashby's, named on every page, not Wren Dorne's, her cousin named
        # once: a name two full names share goes to one that far outnumbers the rest.
        if len(holders) == 1 or (
            len(holders) > 1
            and keep[holders[0]].count >= 3 * sum(keep[h].count for h in holders[1:])
        ):
            owner[name] = holders[0]
    out: list[FoundEntity] = []
    for name in sorted(keep):
        if name in owner:
            continue
        parts = [keep[name], *(keep[a] for a, o in owner.items() if o == name)]
        aliases = [a for a, o in sorted(owner.items()) if o == name]
        titles: Counter[str] = Counter()
        for part in parts:
            titles.update(part.titles)
        place = sum(p.place for p in parts)
        person = sum(p.person for p in parts)
        kind: EntityKind = "character"
        if not titles and (place > person or (_PLACE_SUFFIX.search(name) and person == 0)):
            kind = "location"
        gender: Gender | None = None
        if titles:
            title = titles.most_common(1)[0][0]
            gender = TITLES.get(title)
            surname = name.split()[-1]
            aliases.append(f"{title.capitalize()} {surname}")
            if title in RANKS:
                aliases.append(f"{title.capitalize()} {name}")
        out.append(
            FoundEntity(
                kind,
                name,
                tuple(dict.fromkeys(a for a in aliases if a != name)),
                first_chapter + min(p.first for p in parts),
                sum(p.count for p in parts),
                gender if kind == "character" else None,
            )
        )
    return out


def _discover_zh(
    chapters: Sequence[str], first_chapter: int, min_mentions: int
) -> list[FoundEntity]:
    posseg: Any = _posseg()
    posseg.dt.tokenizer.check_initialized()
    frequency: Mapping[str, int] = posseg.dt.tokenizer.FREQ
    found: dict[str, _Candidate] = {}
    for offset, text in enumerate(chapters):
        position = 0
        for pair in posseg.cut(text):
            word, flag = str(pair.word), str(pair.flag)
            before = text[max(0, position - 3) : position]
            position += len(word)
            if not 2 <= len(word) <= 4 or word in _ZH_NOT_NAMES:
                continue
            # jieba tags a name it has never seen as a noun now and then (方寒): a word
            # that opens with a surname and is in no dictionary is a name as well.
            if flag not in ("nr", "ns") and not (
                word[0] in _ZH_SURNAMES and len(word) <= 3 and not frequency.get(word)
            ):
                continue
            if not all(_CJK.match(ch) for ch in word):
                continue
            candidate = found.setdefault(word, _Candidate(word, first=offset))
            candidate.count += 1
            candidate.inner += 1
            # How the name is used outweighs jieba's guess (it calls many names places).
            after = text[position : position + 4]
            if _ZH_PERSON_AFTER.match(after) or _ZH_PERSON_BEFORE.search(before):
                candidate.person += 2
                candidate.cued += 1
            elif _ZH_PLACE_BEFORE.search(before):
                candidate.place += 2
            elif flag == "ns":
                candidate.place += 1
            else:
                candidate.person += 1
    # jieba glues a following one-character verb onto a name now and then (陈默欠):
    # such a run is the shorter name when that name is found on its own.
    for name in sorted(found, key=len, reverse=True):
        stem = name[:-1]
        if len(stem) >= 2 and stem in found and name in found:
            merged = found.pop(name)
            found[stem].count += merged.count
            found[stem].place += merged.place
            found[stem].person += merged.person
            found[stem].cued += merged.cued
            found[stem].first = min(found[stem].first, merged.first)
    out = []
    text = "\n".join(chapters)
    claimed: Counter[str] = Counter()
    kept: list[tuple[str, _Candidate, EntityKind, list[str]]] = []
    for name, c in sorted(found.items()):
        if c.count < min_mentions:
            continue
        kind: EntityKind = "location" if c.place > c.person else "character"
        # A dictionary word jieba calls a name (钟声, 胡琴), or a run it glued together
        # (上结), is a name only when used as one.
        known = frequency.get(name, 0) > 0
        if kind == "character" and c.cued < 2 and (known or name[0] not in _ZH_SURNAMES):
            continue
        nicknames = _zh_nicknames(name) if kind == "character" else []
        aliases = [a for a in nicknames if text.count(a) >= 2]
        claimed.update(aliases)
        kept.append((name, c, kind, aliases))
    # A nickname of exactly one person is theirs, not an entity of its own.
    taken = {a for a, n in claimed.items() if n == 1}
    for name, c, kind, aliases in kept:
        if name in taken:
            continue
        mine = tuple(a for a in aliases if a in taken)
        out.append(FoundEntity(kind, name, mine, first_chapter + c.first, c.count))
    return out


def _zh_nicknames(name: str) -> list[str]:
    """What a Chinese name 姓名 is called by among friends and kin: the given name (two
    characters), 婉儿, 瑶瑶, 小瑶, 阿瑶, 寒哥, 青姑, 远叔, 川子, 老林."""
    if not 2 <= len(name) <= 3 or name[0] not in _ZH_SURNAMES:
        return []
    given = name[1:]
    last = given[-1]
    out = [given] if len(given) == 2 else []
    out += [given + "儿", last * 2, "小" + last, "阿" + last, "老" + name[0]]
    out += [last + suffix for suffix in "哥姐叔姑婶伯妹弟爷娘嫂子"]
    return [a for a in out if a != name]


@lru_cache(maxsize=1)
def _posseg() -> Any:
    jieba: Any = importlib.import_module("jieba")
    jieba.setLogLevel(60)
    return importlib.import_module("jieba.posseg")


# -- facts -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Person:
    """What the reader knows of an entity: its path, its names, its gender if known."""

    path: str
    names: tuple[str, ...]
    kind: EntityKind = "character"
    gender: Gender | None = None


def people_of(entities: Iterable[Resource], found: Iterable[FoundEntity] = ()) -> list[Person]:
    """The reader's view of a book's entities (characters and places) and newly found ones."""
    out: dict[str, Person] = {}
    for r in entities:
        if r.kind in ("character", "location"):
            kind: EntityKind = "character" if r.kind == "character" else "location"
            gender = r.attrs.get("gender")
            out[r.path] = Person(
                r.path,
                tuple(dict.fromkeys((r.title, *r.aliases))),
                kind,
                gender if gender in ("f", "m") else None,
            )
    for f in found:
        out.setdefault(f.path, Person(f.path, (f.title, *f.aliases), f.kind, f.gender))
    return list(out.values())


@dataclass(frozen=True)
class Reading:
    """What :func:`read_facts` found: facts (as claims) and kin relations."""

    facts: list[Claim]
    relations: list[Relation]


_COLOURS_EN = (
    "green|blue|grey|gray|brown|hazel|amber|black|silver|red|auburn|blond|blonde|golden|"
    "gold|white|copper|chestnut|violet|ginger|sandy|fair|dark|dark brown|light brown|steel grey|"
    "iron grey|ash blonde|jet black|pale blue|sea green|ice blue|coal black|raven black"
)
_COLOURS_ZH = "绿|蓝|灰|黑|褐|棕|琥珀|金|银|红|白|紫|赤|碧"
_KIN_EN: Mapping[str, str] = {
    "brother": "brother", "sister": "sister", "father": "father", "mother": "mother",
    "son": "son", "daughter": "daughter", "husband": "spouse", "wife": "spouse",
}  # fmt: skip
_KIN_ZH: Mapping[str, str] = {
    "哥哥": "brother", "弟弟": "brother", "兄长": "brother", "兄弟": "brother",
    "姐姐": "sister", "妹妹": "sister", "父亲": "father", "爸爸": "father",
    "母亲": "mother", "妈妈": "mother", "儿子": "son", "女儿": "daughter",
    "丈夫": "spouse", "妻子": "spouse",
}  # fmt: skip
_GENDER_OF_KIN: Mapping[str, Gender] = {**KIN_GENDER, "husband": "m", "wife": "f"}
_KIN_ADJ = (
    r"(?:(?:older|younger|elder|little|big|baby|twin|beloved|dead|late|only|half-|step-?)\s*)*"
)
_BODY = (
    r"(?:left |right )?(?:cheek|jaw|jawline|eye|eyebrow|brow|forehead|chin|lip|neck|arm|"
    r"forearm|hand|wrist|temple|throat|shoulder|chest|back|face|palm|thigh|leg|side|ear)"
)
_LIMB = r"(?:left|right) (?:arm|hand|leg|foot|eye|ear)"
_CURRENCY = (
    r"(?:crowns|crown|coins|gold|silver|marks|pounds|dollars|florins|ducats|shillings|"
    r"sovereigns|thalers|euros|escudos|guilders|pieces of (?:gold|silver))"
)
_AMOUNT = rf"(?:(?:a|an|\d[\d,]*|[a-z]+-?[a-z]*)\s+){{1,4}}{_CURRENCY}"
_OCCUPATIONS = (
    r"(?:sea )?captain|sailor|blacksmith|smith|doctor|physician|healer|merchant|soldier|"
    r"priest|priestess|teacher|clerk|thief|baker|fisherman|fisherwoman|lawyer|scribe|"
    r"apothecary|innkeeper|cartographer|engineer|pilot|nurse|farmer|carpenter|mason|"
    r"tailor|seamstress|jeweller|jeweler|banker|spy|smuggler|mercenary|knight|guard|"
    r"watchman|detective|journalist|painter|musician|singer|actor|actress|writer|poet|"
    r"librarian|archivist|scholar|professor|student|midwife|butcher|cook|chef|maid|"
    r"servant|steward|shipwright|navigator|surgeon|hunter|miner|weaver|potter|printer|"
    r"translator|ferryman|lighthouse keeper|harbourmaster|harbour master|magistrate|judge|"
    r"cooper|notary|chandler|lamplighter|glazier|tanner|fletcher|saddler|vintner|boatwright|"
    r"wheelwright|shoemaker|cobbler|brewer|miller|bookbinder|locksmith|goldsmith|"
    r"silversmith|stonemason|ropemaker|sailmaker|dockhand|porter|courier|herbalist|"
    r"alchemist|bailiff|constable|sheriff|governess|tutor|gardener|shepherd|fishwife|"
    r"ostler|groom|coachman|boatman|bargeman|lockkeeper|mapmaker|clockmaker|watchmaker"
)
_CLAUSE_END = r"(?=\s*(?:[,.;:!?—–\"”]|\band\b|\bbut\b|\bwhen\b|\bwhere\b|\bafter\b|\bbefore\b|$))"
_RANK_WORDS = (
    r"captain|lieutenant|sergeant|commander|colonel|general|admiral|major|corporal|"
    r"inspector|chief inspector|superintendent|bishop|abbess|abbot"
)

# A name the book does not know as an entity: one or two capitalised words (case-sensitive
# even inside the patterns' IGNORECASE).
_CAPITALISED_NAME = r"(?-i:[A-Z][a-z'’\-]+(?:\s+[A-Z][a-z'’\-]+)?)"

# Each pattern: (attribute, category, change, compiled-with-{P}-placeholders). P is the
# person group (a name, a possessive or a pronoun); its resolution decides the subject.
_PRONOUN_EN = r"(?:she|he|her|his|him|hers)"


def _en_patterns(person: str) -> list[tuple[str, FactCategory, bool, regex.Pattern[str]]]:
    # The person, an appositive after it ("Tomas, her older brother,"), and an earlier
    # verb of the same subject ("Mara dyed her hair and moved to Porto").
    P = (
        rf"(?P<who>{person}|{_PRONOUN_EN})(?:,\s+[^,.;]{{1,40}}?,)?(?:\s+[^.;,]{{0,60}}?\s+and)?"
        r"(?:\s+(?:later|then|soon|finally|once|eventually|already|never\s+again|\w+ly))?"
    )
    POSS = rf"(?P<who>(?:{person})(?:'s|’s)|her|his)"
    N = rf"(?P<name>{person})"
    # A relative's name need not be one of the book's entities: a brother named once.
    # "Ilse's brother Jory Corvin"; "Tobin's brother Sabine Lisle" is not Sabine Harrow.
    KN = rf"(?P<name>(?:{person})(?:\s+(?-i:[A-Z][a-z'’\-]+))?|{_CAPITALISED_NAME})"
    C = rf"(?P<v>{_COLOURS_EN})"
    flags = regex.IGNORECASE
    raw: list[tuple[str, FactCategory, bool, str]] = [
        # appearance
        ("hair", "characterization", True,
         rf"\b{P}\s+(?:had\s+)?dyed\s+(?:her|his|(?:{person})(?:'s|’s))\s+hair\s+(?:a\s+)?{C}"),
        ("hair", "characterization", True,
         rf"\b{POSS}\s+hair\s+(?:had\s+)?(?:turned|gone|faded|greyed|gone\s+to|faded\s+to)\s+(?:to\s+)?{C}"),
        ("eyes", "characterization", False,
         rf"\b{POSS}\s+(?:\w+\s+){{0,2}}?{C}(?:-flecked)?\s+eyes\b"),
        ("hair", "characterization", False,
         rf"\b{POSS}\s+(?:\w+\s+){{0,2}}?{C}(?:-streaked)?\s+(?:hair|curls|braids?|plaits?)\b"),
        ("eyes", "characterization", False,
         rf"\b{POSS}\s+eyes\s+(?:were|was|are|had\s+been|looked|shone|gleamed)\s+(?:a\s+|an\s+)?(?:\w+\s+)?{C}\b"),
        ("hair", "characterization", False,
         rf"\b{POSS}\s+hair\s+(?:was|is|had\s+been|fell|hung)\s+(?:a\s+|an\s+)?(?:\w+\s+)?{C}\b"),
        ("eyes", "characterization", False,
         rf"\b{P}\s+(?:had|has)\s+(?:\w+\s+){{0,2}}?{C}\s+eyes\b"),
        ("hair", "characterization", False,
         rf"\b{P}\s+(?:had|has|wore)\s+(?:her|his)?\s*(?:\w+\s+){{0,2}}?{C}\s+hair\b"),
        ("eyes", "characterization", False, rf"\b{P}\b[^.;]{{0,60}}?\beyes\s+the\s+{C}\s+of\b"),
        ("eyes", "characterization", False,
         rf"\b{P}\b[^.;]{{0,60}}?\beyes\s+of\s+(?:a\s+|an\s+)?(?:\w+\s+)?{C}\b"),
        ("hair", "characterization", False,
         rf"\b{P}\b[^.;]{{0,40}}?\b(?:lock|strand|curl|wisp|tuft|coil|braid)s?\s+of\s+(?:her\s+|his\s+)?(?:\w+\s+)?{C}\s+hair\b"),
        ("eyes", "characterization", False, rf"\b{P}\b[^.;]{{0,40}}?\bwith\s+{C}\s+eyes\b"),
        ("hair", "characterization", False, rf"\b{P}\b[^.;]{{0,40}}?\bwith\s+{C}\s+hair\b"),
        ("height", "characterization", False,
         rf"\b{P}\s+(?:was|stood|is)\s+(?:very\s+|quite\s+|unusually\s+|rather\s+|too\s+)?(?P<v>tall|short)\b"),
        ("height", "characterization", False,
         rf"\b{P}\s+(?:was|is)\s+(?:a|an)\s+(?:\w+\s+)?(?P<v>tall|short)\s+(?:man|woman|girl|boy|figure)\b"),
        ("height", "characterization", False,
         rf"\b{P},\s+(?:a|an)\s+(?:\w+\s+)?(?P<v>tall|short)\s+(?:man|woman|girl|boy)\b"),
        ("height", "characterization", False,
         rf"\b{P}\s+stood\s+(?P<v>(?:\w+|\d+)\s+(?:feet|foot|metres|meters)(?:\s+\w+)?)\s+tall\b"),
        ("scar", "characterization", False,
         rf"\bscar\b[^.;]{{0,30}}?\b(?:down|across|along|on|over|through|split|splitting|marking|crossed|crossing)\s+{POSS}\s+(?P<v>{_BODY})"),
        ("scar", "characterization", False,
         rf"\b(?P<who>(?:{person}))(?:'s|’s)?\b[^.;]{{0,40}}?\bscar\b[^.;]{{0,30}}?\b(?:down|across|along|on|over|through|split|splitting|marking|crossed|crossing)\s+the\s+(?P<v>{_BODY})"),
        ("mark", "characterization", False,
         rf"\b(?:tattoo|birthmark)\b[^.;]{{0,40}}?\b(?:on|across|along|inside|over)\s+(?P<who>her|his)\s+(?P<v>{_BODY})"),
        ("mark", "characterization", False,
         rf"\b(?P<who>(?:{person}))(?:'s|’s)?\b[^.;]{{0,40}}?\b(?:tattoo|birthmark)\b[^.;]{{0,40}}?\b(?:on|across|along|inside|over)\s+the\s+(?P<v>{_BODY})"),
        # whereabouts
        ("home", "factual", True,
         rf"\b{P}\s+(?:had\s+)?(?:moved|relocated|gone\s+to\s+live|went\s+to\s+live)\s+(?:back\s+)?(?:to|in)\s+(?P<v>{person}|{_PLACE_NAME})"),
        ("home", "factual", False,
         rf"\b{P}\s+(?:had\s+)?(?:lived|lives|was\s+living|has\s+lived|dwelt|settled|kept\s+(?:her|his)?\s*rooms|made\s+(?:her|his)\s+home|grew\s+up|grown\s+up|was\s+born|been\s+born|was\s+raised|been\s+raised)\s+(?:\w+\s+){{0,3}}?in\s+(?P<v>{person}|{_PLACE_NAME})"),
        ("home", "factual", False,
         rf"\bhome,?\s+for\s+{P},?\s+(?:was|had\s+been|is)\s+(?:[^.;]{{0,40}}?\s+)?in\s+(?P<v>{person}|{_PLACE_NAME})"),
        ("home", "factual", False,
         rf"\b{POSS}\s+(?:\w+\s+)?(?:rooms|house|flat|apartment|home|lodgings|cottage|quarters)\s+(?:in|at)\s+(?P<v>{person}|{_PLACE_NAME})"),
        # occupation and rank
        ("rank", "factual", False,
         rf"\b(?-i:(?P<v>Captain|Lieutenant|Sergeant|Commander|Colonel|General|Admiral|Major|Inspector))\s+(?P<who>{person})"),
        ("rank", "factual", True,
         rf"\b{P}\s+(?:was|had\s+been)\s+promoted\s+to\s+(?P<v>{_RANK_WORDS})\b"),
        ("occupation", "factual", True,
         rf"\b{P}\s+(?:became|had\s+become)\s+(?:a|an|the)\s+(?P<v>(?:\w+\s+)?(?:{_OCCUPATIONS}))\b"),
        ("occupation", "factual", False,
         rf"\b{P}\s+(?:was|is|(?:had\s+|has\s+)?worked\s+as|(?:had\s+|has\s+)?served\s+as|had\s+been)\s+(?:a|an|the\s+(?:town's|village's|city's|ship's)?)\s*(?P<v>(?:\w+\s+)?(?:{_OCCUPATIONS}))\b"),
        ("occupation", "factual", False,
         rf"\b{P}\s+(?:had\s+|has\s+)?(?:worked|works|served)\s+as\s+(?:a|an|the)\s+(?P<v>[a-z]+(?:\s+[a-z]+)?){_CLAUSE_END}"),
        ("occupation", "factual", False,
         rf"\b{P},\s+(?:a|an|the)\s+(?P<v>(?:\w+\s+)?(?:{_OCCUPATIONS}))\s*[,.]"),
        # life
        ("death", "timeline", True,
         rf"\b{P}\s+(?:had\s+)?died\s+(?:of|from)\s+(?P<v>[^,.;]{{2,40}}?)(?:{_CLAUSE_END}|(?=\s+(?:in|at|on|during|that|last|within|the\s+next)\b))"),
        ("death", "timeline", True,
         rf"\b{P}\s+(?:was|had\s+been)\s+(?P<v>(?:killed|murdered|slain|executed|hanged|poisoned|stabbed\s+to\s+death|shot\s+dead)(?:\s+by\s+(?:the\s+|a\s+|an\s+)?[\w'’-]+(?:\s+[A-Z][\w'’-]+)*)?)"),
        ("status", "timeline", True, rf"\b{P}\s+(?:had\s+)?(?P<v>died|drowned|perished)\b"),
        ("status", "timeline", True,
         rf"\b{P}\s+(?:was|had\s+been)\s+(?P<v>killed|murdered|slain|executed|hanged|poisoned)\b"),
        ("status", "timeline", False,
         rf"\b{P}\s+(?:is|was|had\s+been|lay)\s+(?:already\s+|long\s+)?(?P<v>dead)\b"),
        # injuries
        ("lost_limb", "factual", True,
         rf"\b{P}\s+(?:had\s+)?lost\s+(?:her|his)\s+(?P<v>{_LIMB})\b"),
        ("lost_limb", "factual", True,
         rf"\b{POSS}\s+(?P<v>{_LIMB})\s+(?:was|had\s+been)\s+(?:gone|amputated|cut\s+off|taken|severed)\b"),
        ("injury", "factual", True,
         rf"\b{P}\s+(?:had\s+)?(?P<v>(?:broke|broken|fractured|sprained|burned|burnt|injured|wounded|twisted)\s+(?:her|his)\s+{_BODY})\b"),
        ("injury", "factual", True,
         rf"\b{P}\s+(?:was|had\s+been)\s+(?P<v>(?:wounded|stabbed|shot|cut|burned)\s+in\s+the\s+{_BODY})\b"),
        # possessions
        ("owns", "factual", False,
         rf"\b{P}\s+(?:owned|owns|possessed|inherited|bought|had\s+bought|had\s+inherited)\s+(?P<v>(?:a|an|the|her|his)\s+[^,.;]{{2,40}}?){_CLAUSE_END}"),
        ("hidden", "factual", True,
         rf"\b{P}\s+(?:had\s+)?hid(?:den)?\s+(?:the|a|an|her|his)\s+(?P<item>[a-z]+(?:\s+[a-z]+)?)\s+(?P<v>(?:under|beneath|behind|inside|in|below|within|among|beside|above)\s+[^,.;]{{2,50}}?){_CLAUSE_END}"),
        ("hidden", "factual", False,
         rf"\b{P}\s+(?:alone\s+)?knew\s+(?:that\s+)?(?:the|her|his)\s+(?P<item>[a-z]+)\s+(?:lay|was\s+hidden|lay\s+hidden|was\s+kept|was)\s+(?P<v>(?:under|beneath|behind|inside|in|below|within)\s+[^,.;]{{2,50}}?){_CLAUSE_END}"),
        # debts
        ("owes", "factual", False,
         rf"\b{P}\s+(?:still\s+)?(?:owed|owes)\s+{N}\s+(?P<amt>{_AMOUNT})"),
        ("owes", "factual", False,
         rf"\b{P}\s+(?:still\s+)?(?:owed|owes)\s+(?P<amt>{_AMOUNT})\s+to\s+{N}"),
        ("owes", "factual", True,
         rf"\b{P}\s+(?:had\s+)?borrowed\s+(?P<amt>{_AMOUNT})\s+from\s+{N}"),
        # oaths
        ("oath", "narrative", True,
         rf"\b{P}\s+(?:had\s+)?(?:swore|sworn|vowed|pledged|promised)\s+(?:an\s+oath\s+|a\s+vow\s+|on\s+[^,.;]{{2,30}}?\s+)?(?P<v>(?:never\s+)?(?:to|that)\s+[^.;!?]{{3,80}}?){_CLAUSE_END}"),
        # kin: the person (who) has a relative (name)
        ("kin", "factual", False,
         rf"\b{POSS}\s+{_KIN_ADJ}(?P<kin>brother|sister|father|mother|son|daughter|husband|wife),?\s+{KN}"),
        ("kin", "factual", False,
         rf"\b(?P<who>{person})\b[^.;]{{0,60}}?\b{KN},\s+(?:the|her|his)\s+{_KIN_ADJ}(?P<kin>brother|sister|father|mother|son|daughter|husband|wife)\b"),
        ("kin", "factual", False,
         rf"\b{KN},\s+{POSS}\s+{_KIN_ADJ}(?P<kin>brother|sister|father|mother|son|daughter|husband|wife)\b"),
        ("kin", "factual", False,
         rf"\b{KN}\s+(?:was|is|had\s+been)\s+{POSS}\s+{_KIN_ADJ}(?P<kin>brother|sister|father|mother|son|daughter|husband|wife)\b"),
        ("kin", "factual", True, rf"\b{P}\s+(?:had\s+)?married\s+{N}"),
    ]  # fmt: skip
    return [(a, c, ch, regex.compile(p, flags)) for a, c, ch, p in raw]


# A place's name: capitalised words, with "of", "de", "upon"... between them.
_PLACE_NAME = (
    r"(?-i:[A-Z][\w'’\-]+(?:\s+(?:[A-Z][\w'’\-]+|de|da|do|of|on|upon)(?=\s+[A-Z]|$|\W))*"
    r"(?:\s+[A-Z][\w'’\-]+)?)"
)


def _zh_patterns(person: str) -> list[tuple[str, FactCategory, bool, regex.Pattern[str]]]:
    P = rf"(?P<who>{person}|她|他)"
    N = rf"(?P<name>{person})"
    # A relative named only here: a surname and one or two more characters (叶海十五岁).
    surname = "".join(sorted(_ZH_SURNAMES))
    KN = rf"(?P<name>{person}|[{surname}]\p{{Han}}(?:(?![{_ZH_NOT_IN_NAME}])\p{{Han}})?)"
    C = rf"(?P<v>{_COLOURS_ZH})"
    # Words between a person and what is said of them, as long as no one else is named and
    # nothing is only said or thought (陈默听说苏婉嫁给了他, 他以为她死了).
    GAP = rf"[^，。！？“”说道听想以她他{_MARK_LETTER}]"
    KIN = "|".join(sorted(_KIN_ZH, key=len, reverse=True))
    PLACE = rf"(?P<v>{person}|[\p{{Han}}]{{2,8}}?)(?=[，。！？；、的里]|$|居住|定居|生活)"
    raw: list[tuple[str, FactCategory, bool, str]] = [
        ("hair", "characterization", True,
         rf"{P}[^，。！？]{{0,6}}?(?:头发|长发|短发|发丝)[^，。！？]{{0,4}}?(?:染成|变成|变为)了?{C}色?"),
        ("eyes", "characterization", True,
         rf"{P}[^，。！？]{{0,6}}?(?:眼睛|眸子|双眸|眼眸)[^，。！？]{{0,4}}?(?:变成|变为)了?{C}色?"),
        ("eyes", "characterization", False,
         rf"{P}(?:的|有|有着|生着)?(?:一双)?{C}色?的?(?:眼睛|眸子|双眸|眼眸|眸)"),
        ("hair", "characterization", False,
         rf"{P}(?:的|有|有着|留着)?(?:一头)?{C}色?的?(?:长|短|卷)?(?:头发|发)"),
        ("eyes", "characterization", False,
         rf"{P}的(?:眼睛|眸子|双眸|眼眸)(?:是|呈)?{C}色"),
        ("eyes", "characterization", False,
         rf"{P}[^。！？]{{0,16}}?一双{C}色?的?(?:眼睛|眸子|眼眸)"),
        ("hair", "characterization", False,
         rf"{P}[^。！？]{{0,12}}?一(?:缕|头|把|绺)?{C}色?的?(?:头发|发丝|长发|短发)"),
        ("hair", "characterization", False, rf"{P}的(?:头发|长发|短发)(?:是|呈)?{C}色"),
        ("height", "characterization", False,
         rf"{P}(?:个子|身材|长得)(?:很|十分|非常)?(?P<v>高|矮)"),
        ("scar", "characterization", False,
         rf"{P}的?(?P<v>(?:左|右)?(?:脸颊|脸|额头|额角|眉|下巴|脖子|脖颈|手臂|手背|手腕|手|肩膀|肩|胸口|眼角|耳朵|耳后))上有一道[^，。]{{0,6}}?疤"),
        ("home", "factual", True, rf"{P}[^，。！？的]{{0,6}}?(?:搬到|嫁到|迁到|迁居)了?{PLACE}"),
        ("home", "factual", False,
         rf"{P}(?:一直|从小)?(?:住在|居住在|生活在|定居在|定居于){PLACE}"),
        ("occupation", "factual", False,
         rf"{P}是(?:一名|一个|一位|一|名|个|位)(?P<v>[\p{{Han}}]{{1,5}}?)(?=[，。！？；]|$)"),
        ("death", "timeline", True, rf"{P}[^，。！？]{{0,4}}?(?P<v>死于[^，。！？；]{{1,12}})"),
        ("status", "timeline", True,
         rf"{P}{GAP}{{0,8}}?(?:已经|早已|终于)?(?P<v>死了|去世|身亡|死去|病死|被杀|遇害|牺牲|已死)"),
        ("lost_limb", "factual", True,
         rf"{P}[^，。！？]{{0,4}}?(?:失去了|失去|断了|没了)(?P<v>(?:左|右)(?:臂|手臂|手|腿|脚|眼|耳))"),
        ("injury", "factual", True,
         rf"{P}[^，。！？]{{0,4}}?(?P<v>(?:左|右)?(?:腿|手臂|手|肩|肋骨|脚踝)(?:骨折|受了伤|受伤))"),
        ("owes", "factual", False, rf"{P}(?:还)?欠(?:了)?{N}(?P<amt>[^，。！？；]{{1,12}})"),
        ("hidden", "factual", True,
         rf"{P}[^，。！？]{{0,4}}?把(?P<item>[\p{{Han}}]{{1,6}}?)藏(?:在|到)了?(?P<v>[^，。！？；]{{2,16}})"),
        ("oath", "narrative", True,
         rf"{P}[^，。！？]{{0,4}}?(?:发誓|立誓|起誓|发下誓言)(?:说|，)?(?P<v>[^，。！？；]{{2,30}})"),
        ("owns", "factual", False, rf"{P}(?:拥有|继承了|买下了)(?P<v>[^，。！？；]{{2,12}})"),
        ("kin", "factual", False, rf"{P}的(?P<kin>{KIN}){KN}"),
        ("kin", "factual", False, rf"{KN}是{P}的(?P<kin>{KIN})"),
        ("kin", "factual", True, rf"{P}(?:和|与|嫁给了|娶了){N}(?:结婚|成亲)?"),
        ("kin", "factual", True, rf"{P}{GAP}{{1,8}}?(?:嫁给了|娶了){N}"),
    ]  # fmt: skip
    # The last pattern is only marriage when a marriage word is in it.
    return [(a, c, ch, regex.compile(p)) for a, c, ch, p in raw]


# Before the patterns run, every name a sentence mentions is replaced by a marker naming
# its place in the sentence's mention list: the patterns are compiled once, whatever the
# book's cast, and a name of any length or script is one "word" to them. The marker's
# letter is a (rare) Latin letter, so ``\b`` and ``\w`` treat it as a word.
_MARK_LETTER = "Ʞ"
MARK = rf"{_MARK_LETTER}\d+{_MARK_LETTER}"
_MARK = regex.compile(MARK)


@lru_cache(maxsize=2)
def _compiled(chinese: bool) -> list[tuple[str, FactCategory, bool, regex.Pattern[str]]]:
    return _zh_patterns(MARK) if chinese else _en_patterns(rf"(?-i:{MARK})")


_OPENING_PRONOUN = regex.compile(r"^[\"“‘']?\s*(she|he|her|his|她|他)\b", regex.IGNORECASE)


def shared_words(people: Sequence[Person]) -> list[str]:
    """Words of several people's full names that none goes by alone ("Vance" of Edric and
    Hanne Vance): a sentence saying "Vance" means whichever was named last."""
    counts: Counter[str] = Counter()
    names = {n.casefold() for p in people for n in p.names}
    for person in people:
        if person.kind == "character" and not _CJK.search(person.names[0]):
            counts.update(set(person.names[0].split()))
    return sorted(
        w for w, c in counts.items() if c > 1 and len(w) > 2 and w.casefold() not in names
    )


_ZH_COLOUR_WORD = {"绿": "绿色", "蓝": "蓝色", "灰": "灰色", "黑": "黑色", "褐": "褐色",
                   "棕": "棕色", "琥珀": "琥珀色", "金": "金色", "银": "银色", "红": "红色",
                   "白": "白色", "紫": "紫色", "赤": "红色", "碧": "绿色"}  # fmt: skip
_ZH_STATUS = frozenset({"死了", "去世", "身亡", "死去", "病死", "被杀", "遇害", "牺牲", "已死"})


class _Resolver:
    """Who a name or pronoun stands for, as the paragraph reads so far."""

    def __init__(self, people: Sequence[Person], chinese: bool) -> None:
        self.chinese = chinese
        self.gender: dict[str, Gender] = {p.path: p.gender for p in people if p.gender is not None}
        self.by_path = {p.path: p for p in people}
        shared = shared_words(people)
        # One pass over a sentence finds every name, however many people the book has;
        # a surname several people share is a name too, resolved by recency.
        self.matcher = EntityMatcher(
            [
                *(Resource("", p.path, p.kind, p.names[0], "", 0, 0, p.names[1:]) for p in people),
                *(Resource("", _SHARED + w, "character", w, "", 0, 0) for w in shared),
            ]
        )
        self.recent: list[Person] = []
        self.last_subject: Person | None = None
        self.shared: dict[str, list[Person]] = {}
        for person in people:
            for word in shared:
                if person.kind == "character" and word in person.names[0].split():
                    self.shared.setdefault(word.casefold(), []).append(person)

    def learn_gender(self, sentences: Sequence[str]) -> None:
        """A person named alone in a sentence is the she or he of the next one."""
        counts: dict[str, Counter[Gender]] = {}
        for sentence, following in itertools.pairwise(sentences):
            named = self.named(sentence)
            if len(named) != 1 or named[0].kind != "character":
                continue
            votes = counts.setdefault(named[0].path, Counter())
            head = following[:60]
            if self.chinese:
                if "她" in head and "他" not in head:
                    votes["f"] += 1
                elif "他" in head and "她" not in head:
                    votes["m"] += 1
            else:
                f, m = SHE.search(head), HE.search(head)
                if f and not m:
                    votes["f"] += 1
                elif m and not f:
                    votes["m"] += 1
        for path, votes in counts.items():
            if path not in self.gender and votes:
                self.gender[path] = votes.most_common(1)[0][0]

    def named(self, text: str) -> list[Person]:
        """The people ``text`` names, in order of first mention."""
        return [self.by_path[p] for p in self.matcher.match(text) if p in self.by_path]

    def mark(self, sentence: str) -> tuple[str, list[tuple[str, str]]]:
        """``sentence`` with each name replaced by a marker, and the (path, name as
        written) of each marker in order."""
        if len(sentence.casefold()) != len(sentence):
            return sentence, []  # offsets of the folded text would not fit this one
        out: list[str] = []
        table: list[tuple[str, str]] = []
        at = 0
        for mention in self.matcher.mentions(sentence):
            out.append(sentence[at : mention.start])
            out.append(f"{_MARK_LETTER}{len(table)}{_MARK_LETTER}")
            table.append((mention.paths[0], sentence[mention.start : mention.end]))
            at = mention.end
        out.append(sentence[at:])
        return "".join(out), table

    def see(self, text: str) -> None:
        """Record the people ``text`` names, in order, as the most recent ones; the first
        is the sentence's subject, whom a "she" or "he" opening the next one stands for."""
        named = [p for p in self.named(text) if p.kind == "character"]
        opener = _OPENING_PRONOUN.match(text)
        referent = self.resolve(opener.group(1), text, 0, []) if opener else None
        if referent is not None:
            self.last_subject = referent
        elif named:
            self.last_subject = named[0]
        for person in named:
            if person in self.recent:
                self.recent.remove(person)
            self.recent.append(person)

    def new_paragraph(self) -> None:
        """A paragraph names its people afresh; one that opens with "she" or "he" goes on
        about the last paragraph's subject, who is kept."""
        self.recent = [self.last_subject] if self.last_subject is not None else []

    def _marked(self, path: str, written: str) -> Person | None:
        if path.startswith(_SHARED):
            sharing = self.shared.get(written.casefold(), [])
            # A surname two people share ("Vance"): the one named most recently.
            for candidate in reversed(self.recent):
                if candidate in sharing:
                    return candidate
            return sharing[0] if sharing else None
        return self.by_path.get(path)

    def resolve(
        self,
        word: str,
        marked: str,
        at: int,
        table: Sequence[tuple[str, str]],
        exclude: str | None = None,
    ) -> Person | None:
        """Who ``word`` (a marker, possessive or pronoun at ``at`` in the marked sentence)
        stands for."""
        token = word.strip()
        for suffix in ("'s", "’s"):
            if token.endswith(suffix):
                token = token[: -len(suffix)]
        if _MARK.fullmatch(token):
            person = self._marked(*table[int(token[1:-1])])
            return person if person is not None and person.kind == "character" else None
        gender: Gender | None
        low = token.casefold()
        if low in ("she", "her", "hers", "她"):
            gender = "f"
        elif low in ("he", "him", "his", "他"):
            gender = "m"
        else:
            return None
        # People named earlier in this sentence come first; a pronoun opening the sentence
        # is the last sentence's subject; then the paragraph's people, latest first.
        before = [
            p
            for p in (self._marked(*table[int(m[1:-1])]) for m in _MARK.findall(marked[:at]))
            if p is not None and p.kind == "character" and p.path != exclude
        ]
        last = [self.last_subject] if self.last_subject is not None and not before else []
        for candidate in [*reversed(before), *last, *reversed(self.recent)]:
            if candidate.path == exclude:
                continue
            if self.gender.get(candidate.path, gender) == gender:
                return candidate
        return None


def read_facts(text: str, people: Sequence[Person], chapter: int) -> Reading:
    """The facts ``text`` (chapter ``chapter``) states of ``people``, with kin relations."""
    chinese = is_chinese(text)
    patterns = _compiled(chinese)
    resolver = _Resolver(people, chinese)
    # English paragraphs are separated by blank lines (a line break inside one is only
    # wrapping); Chinese novels put one paragraph on a line.
    if chinese:
        paragraphs = [p.strip() for p in text.split("\n") if p.strip()]
    else:
        paragraphs = [" ".join(p.split()) for p in regex.split(r"\n\s*\n", text) if p.strip()]
    sentences = [split_sentences(p) for p in paragraphs]
    resolver.learn_gender([s for paragraph in sentences for s in paragraph])
    facts: dict[tuple[str, str, str], Claim] = {}
    relations: dict[tuple[str, str, str], Relation] = {}
    for paragraph in sentences:
        resolver.new_paragraph()
        for sentence in paragraph:
            for claim, relation in (
                _sentence_facts(sentence, patterns, resolver, chinese)
                if not chinese
                else _chinese_sentence_facts(sentence, patterns, resolver)
            ):
                key = (claim.subject, claim.attribute, claim.value.casefold())
                if key not in facts or (claim.change and not facts[key].change):
                    facts[key] = claim
                if relation is not None:
                    relations.setdefault(
                        (relation.from_path, relation.to_path, relation.kind), relation
                    )
            resolver.see(sentence)
    return Reading(
        list(facts.values()),
        [replace(r, chapter=chapter) for r in relations.values()],
    )


_NEGATED_EN = regex.compile(r"\b(?:not|never|no longer|wasn't|isn't|hadn't|didn't)\b", regex.I)
_HYPOTHETICAL_EN = regex.compile(r"\b(?:if|unless|whether|as if|as though|might|would)\b", regex.I)
_NEGATED_ZH = (
    *("没有", "不是", "并非", "没", "不曾", "如果", "假如", "要是"),
    *("以为", "差点", "险些", "几乎", "快死", "要死"),  # thought so, or nearly
)


def _sentence_facts(
    sentence: str,
    patterns: Sequence[tuple[str, FactCategory, bool, regex.Pattern[str]]],
    resolver: _Resolver,
    chinese: bool,
) -> Iterable[tuple[Claim, Relation | None]]:
    evidence = sentence.strip()
    sentence_change = is_change(sentence)
    marked, table = resolver.mark(sentence)
    sentence = marked

    def unmark(text: str) -> str:
        return _MARK.sub(lambda m: table[int(m.group(0)[1:-1])][1], text)

    def resolve(group: str, exclude: str | None = None) -> Person | None:
        return resolver.resolve(match.group(group), marked, match.start(group), table, exclude)

    for path, written in table:
        # "Captain Ilse Varga" is one name to the matcher; its title is her rank.
        title = written.split()[0].casefold() if " " in written else ""
        person = resolver.by_path.get(path)
        if title in RANKS and person is not None and person.kind == "character":
            yield Claim(person.path, "rank", title, "factual", evidence, sentence_change), None
    for attribute, category, change, pattern in patterns:
        for match in pattern.finditer(marked):
            head = sentence[max(0, match.start() - 12) : match.end()]
            if chinese:
                if any(cue in head for cue in _NEGATED_ZH):
                    continue
            elif (attribute != "oath" and _NEGATED_EN.search(_asserted(match, attribute))) or (
                _HYPOTHETICAL_EN.search(sentence[: match.start()][-20:]) is not None
            ):
                continue
            groups = match.groupdict()
            # A kin pattern's relative is read first: the person cannot be their own kin.
            other = resolve("name") if attribute == "kin" else None
            who = resolve("who", other.path if other is not None else None)
            if who is None:
                continue
            value = _clean(unmark(groups.get("v") or ""))
            relation: Relation | None = None
            attr = attribute
            if attribute == "kin":
                kin_word = groups.get("kin") or ("spouse" if _marriage(match.group(0)) else "")
                if not kin_word or (other is not None and other.path == who.path):
                    continue
                if other is None and not _unknown_name(unmark(groups["name"])):
                    continue
                attr = (_KIN_ZH if chinese else _KIN_EN).get(kin_word.casefold(), kin_word)
                value = _clean(unmark(groups["name"]))
                gender = _GENDER_OF_KIN.get(kin_word.casefold())
                # A relative the book knows as an entity is a relation too; one named only
                # here is a fact of the person's (their brother's name).
                if other is not None:
                    kind = "spouse" if attr == "spouse" else f"kin:{attr}"
                    relation = Relation(who.path, other.path, kind, evidence, 0)
                    if gender is not None and other.path not in resolver.gender:
                        resolver.gender[other.path] = gender
            elif attribute == "owes":
                amount, creditor = _clean(unmark(groups["amt"])), _clean(unmark(groups["name"]))
                # 欠沈瑶130两银子: a Chinese debt reads creditor first.
                value = f"{creditor}{amount}" if chinese else f"{amount} to {creditor}"
            elif attribute == "hidden":
                attr = f"hidden:{_clean(unmark(groups['item']))}"
            elif attribute in ("eyes", "hair"):
                value = _ZH_COLOUR_WORD.get(value, value) if chinese else value.casefold()
                if value == "gray":
                    value = "grey"
                if value == "blonde":
                    value = "blond"
            elif attribute == "status":
                value = "dead" if (value in _ZH_STATUS or not chinese) else value
            elif attribute == "lost_limb" and chinese and value.endswith("手臂"):
                value = value[0] + "臂"
            elif attribute in ("occupation", "rank"):
                value = value.casefold()
            elif attribute == "home" and chinese and not _zh_place(value):
                continue
            if not value:
                continue
            yield (
                Claim(who.path, attr, value, category, evidence, change or sentence_change),
                relation,
            )
            if attribute == "death":
                yield Claim(who.path, "status", "dead", "timeline", evidence, True), None


def _zh_place(value: str) -> bool:
    """Whether ``value`` reads as a place's name (扬州), not a description of a spot
    (一间箍桶铺楼上, 楼上)."""
    return (
        value[:1] not in "一二三四五六七八九十这那几每某" and value[-1:] not in "上下里中内外旁边头"
    )


def _asserted(match: regex.Match[str], attribute: str) -> str:
    """The part of a match a negation would deny: for kin, from the relative's name on
    ("Mara had not written to Ivo, the brother in the north" still names her brother)."""
    groups = match.groupdict()
    if attribute != "kin" or groups.get("name") is None:
        return match.group(0)
    start = min(match.start("name"), match.start("kin") if groups.get("kin") else match.end())
    return match.string[start : match.end()]


def _unknown_name(written: str) -> bool:
    """Whether ``written`` reads as a person's name (not a capitalised function word or
    title)."""
    words = written.split()
    return (
        bool(words) and words[0].casefold() not in _NOT_NAMES and words[0].casefold() not in TITLES
    )


_ZH_CLAUSE = regex.compile(r"[，,；;]")
_ZH_PRONOUN_START = regex.compile(r"^(?:她|他)")


def _chinese_sentence_facts(
    sentence: str,
    patterns: Sequence[tuple[str, FactCategory, bool, regex.Pattern[str]]],
    resolver: _Resolver,
) -> Iterable[tuple[Claim, Relation | None]]:
    """A Chinese sentence's facts; a clause with no subject of its own ("苏晴把头发染成了
    银色，搬到了长安") is read with the sentence's subject before it."""
    yield from _sentence_facts(sentence, patterns, resolver, True)
    clauses = _ZH_CLAUSE.split(sentence)
    if len(clauses) < 2:
        return
    subject: Person | None = None
    for index, clause in enumerate(clauses):
        if subject is None:
            named = [p for p in resolver.named(clause) if p.kind == "character"]
            subject = named[0] if named else None
            continue
        if index == 0 or not clause.strip() or _ZH_PRONOUN_START.match(clause):
            continue
        if any(clause.startswith(n) for p in resolver.named(clause) for n in p.names):
            continue
        for claim, relation in _sentence_facts(subject.names[0] + clause, patterns, resolver, True):
            if claim.subject == subject.path:
                yield replace(claim, evidence=sentence.strip()), relation


_SHARED = "shared:"


def _marriage(text: str) -> bool:
    return any(w in text for w in ("married", "Married", "结婚", "成亲", "嫁给", "娶了"))


def _clean(value: str) -> str:
    return " ".join(value.split()).strip(" ,.;:—–\"“”'’。，；：")


def found_entity_resources(book_id: str, found: Iterable[FoundEntity]) -> list[Resource]:
    """New entity resources for ``found`` (the book's memory writes them)."""
    out = []
    for f in found:
        attrs: dict[str, Any] = {"foundBy": "prose"}
        if f.gender is not None:
            attrs["gender"] = f.gender
        out.append(
            Resource(
                book_id,
                f.path,
                f.kind,
                f.title,
                f.path.rsplit("/", 1)[0],
                0,
                f.first_chapter,
                f.aliases,
                attrs,
            )
        )
    return out
