"""A seeded manuscript in ordinary prose, English or Chinese, with its facts known.

Characters get facts stated once, in passing, in varied sentences inside paragraphs that
name them by full name, first name or a by-name ("the smith"): eye and hair colour, a
scar, a brother, a hometown, where a ledger is hidden, a debt, an oath, an occupation;
some later marry, die, dye their hair or move (legal changes: a newer fact of the same
attribute). Filler paragraphs (weather, streets, other people) sit between. The
generator records every fact with its chapter and its exact sentence, so a probe can ask
whether a context holds it, and seeds contradictions of five kinds for Role C.

Used by ``bench/longform.py`` (the whole-path part) and ``tests/writing/test_passages.py``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal

Lang = Literal["en", "zh"]


@dataclass(frozen=True)
class ProseFact:
    subject: str
    """The character's full name."""
    attribute: str
    value: str
    chapter: int
    sentence: str
    change: bool = False
    """A legal progression (a newer value of an attribute stated before)."""


@dataclass(frozen=True)
class Character:
    name: str
    first: str
    alias: str
    slug: str


@dataclass(frozen=True)
class Probe:
    chapter: int
    prompt: str
    characters: tuple[str, ...]


@dataclass(frozen=True)
class Contradiction:
    kind: str
    """dead-acts | attribute | whereabouts | kin | lost-limb"""
    subject: str
    attribute: str
    sentence: str


@dataclass
class ProseBook:
    lang: Lang
    title: str
    characters: list[Character]
    chapters: list[tuple[str, str]]
    """(title, text) per chapter, in order."""
    facts: list[ProseFact] = field(default_factory=list)

    def words(self) -> int:
        if self.lang == "zh":
            return sum(len(t) for _, t in self.chapters)
        return sum(len(t.split()) for _, t in self.chapters)

    def markdown(self) -> str:
        head = "第{n}章 {t}" if self.lang == "zh" else "Chapter {n}: {t}"
        parts = [f"# {self.title}\n"]
        for n, (title, text) in enumerate(self.chapters, start=1):
            parts.append(f"## {head.format(n=n, t=title)}\n\n{text}\n")
        return "\n".join(parts)

    def newest(self, chapter: int) -> dict[tuple[str, str], ProseFact]:
        """The newest fact of each (subject, attribute) stated before ``chapter``."""
        out: dict[tuple[str, str], ProseFact] = {}
        for fact in sorted(self.facts, key=lambda f: f.chapter):
            if fact.chapter < chapter:
                out[(fact.subject, fact.attribute)] = fact
        return dict(sorted(out.items()))

    def needed(self, probe: Probe) -> list[ProseFact]:
        """The newest fact of each attribute of the probe's characters, before its chapter."""
        return [f for (s, _), f in self.newest(probe.chapter).items() if s in probe.characters]

    def future(self, chapter: int) -> list[ProseFact]:
        return [f for f in self.facts if f.chapter >= chapter]


_EN_FIRST = [
    "Mara",
    "Ivo",
    "Tessa",
    "Bram",
    "Odile",
    "Casimir",
    "Wren",
    "Jory",
    "Nell",
    "Anselm",
    "Petra",
    "Lucan",
    "Sabine",
    "Hugo",
    "Ilse",
    "Dario",
    "Maud",
    "Tobin",
    "Vera",
    "Emeric",
]
_EN_LAST = [
    "Quill",
    "Harrow",
    "Vance",
    "Ostrander",
    "Mercer",
    "Lisle",
    "Fenwick",
    "Caskell",
    "Dorne",
    "Ashby",
    "Renard",
    "Holloway",
    "Stroud",
    "Marlow",
    "Penhale",
    "Corvin",
    "Tallis",
    "Wexford",
    "Brannock",
    "Sallow",
]
_EN_ALIAS = (
    "the smith",
    "the ferryman",
    "the widow",
    "the clerk",
    "the captain",
    "the healer",
    "the chandler",
    "the archivist",
    "the boatwright",
    "the magistrate",
    "the cooper",
    "the lamplighter",
    "the cartographer",
    "the vintner",
    "the glazier",
    "the tanner",
    "the notary",
    "the fletcher",
    "the saddler",
    "the weaver",
)
_ZH_NAMES = (
    ("林枫", "枫"),
    ("苏婉", "婉儿"),
    ("陈默", "默哥"),
    ("赵青", "青姑"),
    ("周远", "远叔"),
    ("沈瑶", "瑶瑶"),
    ("顾川", "川子"),
    ("韩霜", "霜姐"),
    ("方寒", "寒哥"),
    ("叶岚", "岚姑"),
)
_ZH_ALIAS = ("铁匠", "船夫", "寡妇", "账房", "船长", "郎中", "掌柜", "书吏", "捕头", "绣娘")

_COLOURS_EN = ("green", "grey", "amber", "brown", "blue", "hazel", "violet", "black")
_HAIR_EN = ("black", "red", "auburn", "fair", "brown", "chestnut", "copper")
_TOWNS_EN = (
    "Lisbon",
    "Porto",
    "Harrowgate",
    "Kesmere",
    "Dunmarrow",
    "Aldwick",
    "Saltmere",
    "Corran",
    "Veyle",
    "Orsk",
)
_PLACES_EN = (
    "under the chapel floor",
    "behind the kiln",
    "in the well bucket",
    "beneath the third stair",
    "inside the organ pipes",
    "in the hollow oak",
    "under the mill wheel",
    "in the salt barrel",
)
_SCARS_EN = ("left cheek", "right hand", "chin", "left brow", "throat", "right forearm")
_JOBS_EN = ("smith", "ferryman", "clerk", "healer", "archivist", "cooper", "notary", "weaver")
_COLOURS_ZH = ("绿色", "灰色", "琥珀色", "褐色", "蓝色", "黑色")
_HAIR_ZH = ("黑色", "红色", "棕色", "栗色")
_TOWNS_ZH = ("临安", "扬州", "洛阳", "苏州", "金陵", "泉州", "汴京", "成都")
_PLACES_ZH = ("祠堂地板下", "窑炉后面", "井桶里", "第三级台阶下", "老槐树洞里", "盐桶里")
_SCARS_ZH = ("左脸", "右手", "下巴", "左眉")

_FILLER_EN = (
    "Rain came in off the estuary and the gutters ran brown with it.",
    "The market kept its shutters half open, as it always did in the wet months.",
    "Somewhere a dog barked at the carts, and somewhere else a bell answered it.",
    "Gulls worked the tide line for whatever the night had left.",
    "The lamps along the quay burned low and smelled of fish oil.",
    "A boy ran past with a basket of bread, shouting prices nobody listened to.",
    "The wind turned, carrying smoke from the tanneries up the hill.",
    "By noon the fog had thinned enough to show the towers across the water.",
    "The streets were narrow here, and the houses leaned together like gossips.",
    "Nobody spoke of the flood anymore, though the marks were still on the walls.",
    "A cart lost a wheel at the corner and the driver swore at the sky.",
    "The river ran high and fast, the color of weak tea.",
    "Evening came early, and with it the cold off the marshes.",
    "Two sailors argued about the price of rope outside the chandlery.",
    "The bells of the old church rang the hour a little late, as they had for years.",
    "Smoke hung over the roofs and the town smelled of wet ash.",
    "The ferry was late again, and the crowd on the steps grew loud and then quiet.",
    "Salt had crusted on every railing along the front, white as frost.",
    "In the square the fishwives were packing up, sluicing their boards with buckets.",
    "A fiddler played under the arcade for coins that did not come.",
    "The tide went out so far that morning that the old wreck showed its ribs.",
    "Lanterns swung on the masts of the herring boats, small and yellow.",
    "Someone had chalked a warning on the customs house door, and someone else had rubbed it out.",
    "The baker's oven smoked, and the smell of burnt crust hung in the lane.",
    "Carters cursed the mud at the bottom of the hill, where it never dried.",
    "The church clock said one thing and the harbour bell another.",
    "Clouds piled up over the headland, heavy and slate-coloured.",
    "A pair of customs men walked the quay slowly, looking at nothing in particular.",
    "Washing hung between the houses, stiff with the cold.",
    "The gulls were quieter than usual, as if they knew something.",
    "It was the sort of damp that got into boots and stayed there.",
    "At the chandlery they were out of tar again, and said so to everyone who asked.",
)
# What the cast does between the facts: characters are named in most paragraphs, as in a
# novel, so a keyword search for a name finds many paragraphs, not only the ones that state
# something about that person. Nothing here is a fact of the vocabulary.
_ACTIONS_EN = (
    "{a} poured {b} a cup of tea and said nothing.",
    "{a} and {b} argued about the price of salt.",
    "{a} watched the boats come in, counting them.",
    "{a} asked {b} whether the ferry would run.",
    "{a} laughed at something {b} said.",
    "{a} stacked the crates by the door.",
    "{a} read the harbour notices twice.",
    "{b} waited while {a} counted the coins.",
    "{a} mended a net on the steps.",
    "{a} told {b} the news from upriver.",
    "{a} bought bread and salt fish at the stall.",
    "{a} walked with {b} as far as the bridge.",
    "{a} swept the step and looked at the sky.",
    "{a} sent {b} a note about the tide tables.",
    "{a} wondered aloud where {b} had been all morning.",
    "{b} found {a} by the customs house.",
)
_ACTIONS_ZH = (
    "{a}给{b}倒了一杯茶，什么也没说。",
    "{a}和{b}为盐价争了几句。",
    "{a}看着船一条条进港。",
    "{a}问{b}渡船今天开不开。",
    "{a}听了{b}的话，笑了起来。",
    "{a}把木箱码在门边。",
    "{a}把码头的告示读了两遍。",
    "{b}等着{a}数铜钱。",
    "{a}坐在台阶上补渔网。",
    "{a}把上游的消息告诉了{b}。",
    "{a}陪{b}走到桥头。",
    "{b}在税关门口找到了{a}。",
)
_FILLER_ZH = (
    "雨从江口那边飘过来，街边的水沟里流着浑黄的水。",
    "集市的铺子半开着门，雨季里一向如此。",
    "远处有狗冲着车马叫，另一处的钟声回应着它。",
    "码头上的灯笼烧得很低，散出鱼油的气味。",
    "一个孩子提着一篮馒头跑过去，喊着没人听的价钱。",
    "风转了向，把染坊的烟吹上了山坡。",
    "到了正午，雾气散了些，能看见对岸的塔楼。",
    "这里的街巷很窄，房屋挤在一起，像在说闲话。",
    "傍晚来得早，沼泽那边的寒气也跟着来了。",
    "老庙的钟敲得晚了一些，这些年一直如此。",
    "渡船又晚了，台阶上的人先是吵嚷，后来也安静下来。",
    "栏杆上结了一层盐霜，白得像初冬的霜。",
    "广场上的鱼贩在收摊，用水桶冲洗案板。",
    "拱廊下有人拉胡琴，讨几个铜板，却没人理会。",
    "潮水退得很远，露出了那条旧沉船的龙骨。",
    "渔船桅杆上的灯笼晃来晃去，又小又黄。",
    "面铺的炉子冒着烟，巷子里一股焦糊味。",
    "山脚下的泥总也不干，赶车的人骂个不停。",
    "云层压在岬角上，又沉又灰。",
    "两个税丁沿着码头慢慢走，什么也不看。",
)


def _en_sentences() -> dict[str, list[str]]:
    """Sentence templates per attribute; ``{v}`` is the value, ``{n}`` a name."""
    return {
        "eyes": [
            "{n} looked up, and the lamplight caught eyes of a pale {v}.",
            "{n}'s eyes were {v}, people said, like the sea before a storm.",
            "There was something unsettling in {n}'s {v} eyes.",
        ],
        "hair": [
            "{n} pushed back a lock of {v} hair and frowned.",
            "The wind pulled at {n}'s {v} hair.",
        ],
        "scar": [
            "A thin scar ran along {n}'s {v}, pale against the skin.",
            "{n} touched the old scar on the {v} without thinking.",
        ],
        "brother": [
            "{n} had not written to {v}, the brother in the north, for a year.",
            "{n}'s brother {v} had gone to sea at fifteen.",
        ],
        "home": [
            "{n} had grown up in {v} and still spoke with its flat vowels.",
            "Home, for {n}, was a narrow house in {v}.",
        ],
        "hidden:ledger": [
            "{n} had hidden the ledger {v}, where no one would look.",
            "Only {n} knew the ledger lay {v}.",
        ],
        "owes": [
            "{n} still owed {v}, and the debt sat heavy.",
        ],
        "oath": [
            "{n} had sworn {v}, and meant to keep it.",
        ],
        "occupation": [
            "{n} had worked as a {v} since the war.",
            "By trade {n} was a {v}, and a good one.",
        ],
    }


def _zh_sentences() -> dict[str, list[str]]:
    return {
        "eyes": ["{n}抬起头，灯光照见一双{v}的眼睛。", "{n}的眸子是{v}的，像暴雨前的海。"],
        "hair": ["{n}拨开一缕{v}的头发，皱起了眉。"],
        "scar": ["{n}的{v}上有一道细细的疤。"],
        "brother": ["{n}的哥哥{v}十五岁就出海了。"],
        "home": ["{n}住在{v}，说话还带着那里的口音。"],
        "hidden:账本": ["{n}把账本藏在{v}，谁也不会去找。"],
        "owes": ["{n}还欠{v}，这笔债压在心头。"],
        "oath": ["{n}曾发誓{v}，一直记着。"],
    }


def generate_prose_book(
    *,
    lang: Lang = "en",
    chapters: int = 80,
    characters: int = 12,
    paragraphs: int = 14,
    sentences: int = 4,
    seed: int = 11,
) -> ProseBook:
    """A book of ``chapters`` chapters of ``paragraphs`` paragraphs, each of about
    ``sentences`` sentences of filler around what it states."""
    rng = random.Random(seed)
    cast: list[Character] = []
    if lang == "en":
        firsts = rng.sample(_EN_FIRST, characters)
        lasts = rng.sample(_EN_LAST, characters)
        aliases = rng.sample(_EN_ALIAS, characters)
        for first, last, alias in zip(firsts, lasts, aliases, strict=True):
            cast.append(Character(f"{first} {last}", first, alias, f"{first}-{last}".lower()))
    else:
        picks = rng.sample(range(len(_ZH_NAMES)), min(characters, len(_ZH_NAMES)))
        for i in picks:
            name, short = _ZH_NAMES[i]
            cast.append(Character(name, short, _ZH_ALIAS[i], name))
    templates = _en_sentences() if lang == "en" else _zh_sentences()
    filler = _FILLER_EN if lang == "en" else _FILLER_ZH
    # where each fact is stated: spread over the first 70% of the book
    span = max(2, int(chapters * 0.7))
    planned: dict[int, list[ProseFact]] = {}

    def plant(fact: ProseFact) -> None:
        planned.setdefault(fact.chapter, []).append(fact)

    for index, c in enumerate(cast):
        others = [o for o in cast if o is not c]
        values: dict[str, str]
        if lang == "en":
            values = {
                "eyes": rng.choice(_COLOURS_EN),
                "hair": rng.choice(_HAIR_EN),
                "scar": rng.choice(_SCARS_EN),
                "brother": f"{rng.choice([f for f in _EN_FIRST if f != c.first])}"
                f" {c.name.split()[1]}",
                "home": rng.choice(_TOWNS_EN[2:]),
                "owes": f"{rng.randint(3, 90) * 10} crowns to {rng.choice(others).name}",
                "oath": rng.choice(
                    (
                        "never to cross the river again",
                        "to find the drowned girl's killer",
                        "to keep the lighthouse lit",
                        "to bring the bells back to Veyle",
                    )
                ),
                "occupation": rng.choice(_JOBS_EN),
            }
            if index % 3 == 0:
                values["hidden:ledger"] = rng.choice(_PLACES_EN)
        else:
            values = {
                "eyes": rng.choice(_COLOURS_ZH),
                "hair": rng.choice(_HAIR_ZH),
                "scar": rng.choice(_SCARS_ZH),
                "brother": c.name[0] + rng.choice("山河海石松"),
                "home": rng.choice(_TOWNS_ZH[2:]),
                "owes": f"{rng.choice(others).name}{rng.randint(3, 90) * 10}两银子",
                "oath": rng.choice(("要替师父报仇", "永不再过江", "守住这座灯塔")),
            }
            if index % 3 == 0:
                values["hidden:账本"] = rng.choice(_PLACES_ZH)
        for attribute, value in sorted(values.items()):
            template = rng.choice(templates[attribute])
            name = rng.choice((c.name, c.first, c.name))
            sentence = template.format(n=name, v=value)
            if lang == "en":
                sentence = sentence[0].upper() + sentence[1:]
            plant(ProseFact(c.name, attribute, value, rng.randint(1, span), sentence))
    # legal progressions in the later part of the book
    late = max(span, 3)
    movers = rng.sample(cast, min(4, len(cast)))
    for i, c in enumerate(movers):
        chapter = rng.randint(late - 1, max(late, chapters - 4))
        # a change comes after what it changes, never beside it in the same chapter
        stated = [f.chapter for fs in planned.values() for f in fs if f.subject == c.name]
        chapter = min(max(chapter, max(stated, default=0) + 1), chapters)
        match i:
            case 0:
                v = "silver" if lang == "en" else "银色"
                s = (
                    f"{c.first} had dyed her hair silver over the winter, and it suited her."
                    if lang == "en"
                    else f"{c.name}把头发染成了银色。"
                )
                plant(ProseFact(c.name, "hair", v, chapter, s, change=True))
            case 1:
                v = "Porto" if lang == "en" else "扬州"
                s = (
                    f"{c.name} had moved to Porto by then, to a room above a cooper's yard."
                    if lang == "en"
                    else f"{c.name}后来搬到扬州，住在一间箍桶铺楼上。"
                )
                plant(ProseFact(c.name, "home", v, chapter, s, change=True))
            case 2:
                other = movers[3] if len(movers) > 3 else cast[0]
                s = (
                    f"{c.name} married {other.name} in the spring, quietly, at the chapel."
                    if lang == "en"
                    else f"{c.name}在春天嫁给了{other.name}。"
                )
                plant(ProseFact(c.name, "spouse", other.name, chapter, s, change=True))
            case _:
                s = (
                    f"{c.name} died of the fever before the thaw, and the town buried her."
                    if lang == "en"
                    else f"{c.name}在开春前病死了。"
                )
                plant(ProseFact(c.name, "status", "dead", chapter, s, change=True))
    book = ProseBook(lang, "The Salt Ledger" if lang == "en" else "盐账", cast, [], [])
    died = {
        f.subject: f.chapter
        for fs in planned.values()
        for f in fs
        if f.attribute == "status" and f.value == "dead"
    }
    actions = _ACTIONS_EN if lang == "en" else _ACTIONS_ZH

    def scene(number: int) -> str:
        """One of the living cast doing something, sometimes with another."""
        alive = [c for c in cast if died.get(c.name, chapters + 1) > number]
        a, b = rng.sample(alive, 2)
        forms = [
            (c.name, c.first, c.alias.capitalize() if lang == "en" else c.alias) for c in (a, b)
        ]
        return rng.choice(actions).format(a=rng.choice(forms[0]), b=rng.choice(forms[1]))

    for number in range(1, chapters + 1):
        facts = planned.get(number, [])
        slots = rng.sample(range(paragraphs), min(len(facts), paragraphs))
        paras: list[str] = []
        for p in range(paragraphs):
            body = rng.sample(filler, sentences)
            if p in slots:
                fact = facts[slots.index(p)]
                c = next(x for x in cast if x.name == fact.subject)
                lead = (
                    f"{rng.choice((c.name, c.first, c.alias.capitalize()))} came down to the"
                    " quay early."
                    if lang == "en"
                    else f"{rng.choice((c.name, c.first, c.alias))}一早就到了码头。"
                )
                half = max(1, (sentences - 2) // 2)
                body = [lead, *body[:half], fact.sentence, *body[half : sentences - 2]]
                book.facts.append(fact)
            else:
                body[1] = scene(number)
                body[-1] = scene(number)
            paras.append((" " if lang == "en" else "").join(body))
        for fact in facts[paragraphs:]:  # more facts than paragraphs: add one each
            paras.append(fact.sentence)
            book.facts.append(fact)
        title = f"Tide {number}" if lang == "en" else f"潮{number}"
        book.chapters.append((title, "\n\n".join(paras)))
    book.facts.sort(key=lambda f: (f.chapter, f.subject, f.attribute))
    return book


def probes(book: ProseBook, count: int, seed: int = 5) -> list[Probe]:
    """Scene requests at chapters in the second half, each with two characters."""
    rng = random.Random(seed)
    total = len(book.chapters)
    out: list[Probe] = []
    for i in range(count):
        chapter = total // 2 + 1 + (i * (total // 2)) // max(count, 1)
        a, b = rng.sample(book.characters, 2)
        if book.lang == "en":
            prompt = (
                f"Chapter {chapter}: {a.name} meets {b.first} on the quay at dusk;"
                f" they talk about the past."
            )
        else:
            prompt = f"第{chapter}章：{a.name}在黄昏的码头遇见{b.first}，说起旧事。"
        out.append(Probe(chapter, prompt, (a.name, b.name)))
    return out


def contradictions(book: ProseBook, chapter: int) -> list[Contradiction]:
    """Sentences for a new chapter ``chapter`` that break facts stated before it: a dead
    character who speaks or acts, an eye or hair colour that is not the newest, rooms in a
    town the character does not live in (or has moved away from), a wrong brother."""
    out: list[Contradiction] = []
    en = book.lang == "en"
    before = [f for f in book.facts if f.chapter < chapter]
    for (subject, attribute), fact in book.newest(chapter).items():
        match attribute:
            case "status" if fact.value == "dead":
                s = (
                    f'"Not tonight," {subject} said quietly.'
                    if en
                    else f"{subject}说：“今晚不行。”"
                )
                out.append(Contradiction("dead-speaks", subject, "status", s))
                s = (
                    f"{subject} opened the door and walked out into the rain."
                    if en
                    else f"{subject}推开门，走进了雨里。"
                )
                out.append(Contradiction("dead-acts", subject, "status", s))
            case "eyes":
                other = "violet" if fact.value != "violet" else "green"
                if not en:
                    other = "蓝色" if fact.value != "蓝色" else "绿色"
                s = (
                    f"{subject}'s {other} eyes narrowed."
                    if en
                    else f"{subject}眯起了{other}的眼睛。"
                )
                out.append(Contradiction("attribute", subject, "eyes", s))
            case "hair" if fact.change:
                s = (
                    f"{subject} pushed back a lock of black hair."
                    if en
                    else f"{subject}拨开一缕黑色的头发。"
                )
                out.append(Contradiction("attribute", subject, "hair", s))
            case "home":
                stale = [f.value for f in before if (f.subject, f.attribute) == (subject, "home")]
                place = stale[0] if len(stale) > 1 else ("Kesmere" if en else "洛阳")
                if place == fact.value:
                    place = "Orsk" if en else "成都"
                s = (
                    f"The rain had got into {subject}'s rooms in {place} again."
                    if en
                    else f"{subject}住在{place}。"
                )
                out.append(Contradiction("whereabouts", subject, "home", s))
            case "brother":
                s = (
                    f"{subject}'s brother Osric waited by the door."
                    if en
                    else f"{subject}的哥哥王五等在门口。"
                )
                out.append(Contradiction("kin", subject, "brother", s))
    return out


def consistent(book: ProseBook, chapter: int) -> list[str]:
    """Sentences for a new chapter ``chapter`` that agree with every newest fact, mention
    the dead only in memory, and make legal changes (a move, a dye): none may warn."""
    en = book.lang == "en"
    out: list[str] = []
    newest = book.newest(chapter)
    dead = {s for (s, a), f in newest.items() if a == "status" and f.value == "dead"}
    for (subject, attribute), fact in newest.items():
        v = fact.value
        if subject in dead:
            if attribute == "status":
                out.append(
                    f"Years ago, {subject} had walked these same streets."
                    if en
                    else f"{subject}生前常走这条街，大家都还记得。"
                )
            continue
        match attribute:
            case "eyes":
                out.append(
                    f"{subject}'s {v} eyes narrowed." if en else f"{subject}眯起了{v}的眼睛。"
                )
            case "hair":
                out.append(
                    f"{subject} pushed back a lock of {v} hair."
                    if en
                    else f"{subject}拨开一缕{v}的头发。"
                )
            case "home":
                out.append(
                    f"The rain had got into {subject}'s rooms in {v} again."
                    if en
                    else f"{subject}住在{v}。"
                )
            case "brother":
                out.append(
                    f"{subject}'s brother {v} waited by the door."
                    if en
                    else f"{subject}的哥哥{v}等在门口。"
                )
    living = sorted({c.name for c in book.characters} - dead)
    if living:
        out.append(
            f"{living[0]} moved to Veyle in the autumn, to be near the water."
            if en
            else f"{living[0]}秋天搬到了泉州。"
        )
    if len(living) > 1:
        out.append(
            f"{living[1]} had dyed her hair blue by midsummer."
            if en
            else f"{living[1]}把头发染成了蓝色。"
        )
    return out


def lost_limb(book: ProseBook) -> tuple[str, Contradiction]:
    """A sentence in which a living character loses his left arm, and one (for a later
    chapter) in which he uses it."""
    dead = {f.subject for f in book.facts if f.attribute == "status"}
    c = next(x for x in reversed(book.characters) if x.name not in dead)
    en = book.lang == "en"
    stated = f"{c.name} lost his left arm at the mill." if en else f"{c.name}在磨坊失去了左臂。"
    use = Contradiction(
        "lost-limb",
        c.name,
        "lost_limb",
        f"{c.name} raised his left arm to wave." if en else f"{c.name}举起左臂挥了挥手。",
    )
    return stated, use
