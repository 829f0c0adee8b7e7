"""A seeded synthetic novel for the long-form benchmark, written through ``BookStore``.

``generate_book`` writes a book of about ``words`` words in ``chapters`` chapters (arcs of
25) with ``entities`` entities (characters, some with Chinese aliases; locations; plot
threads with planted/due/paid-off chapters), the way curation would have left it:
each chapter's L2 prose, L1 paragraph and L0 sentence, the facts it plants, the
relations it adds, and the profiles of the entities whose facts changed, rendered with
:func:`storyloom.writing.profiles.render_profile` as of that chapter: one
``commit_chapter_memory`` per chapter. Arc summaries, emotional arcs and the world
state are written at each arc's end.

It returns the ground truth the benchmark scores against:

- test chapters, each with a prompt naming its scene's entities and the facts the
  chapter depends on, planted 1, 10, 100 and 300 chapters earlier (unique made-up words
  in their values, so finding one in a context is unambiguous);
- every planted fact with its chapter, so a context for chapter c can be searched for
  facts (and chapter seals) from chapter c or later, which must never appear;
- legal progressions: facts that change on purpose (the protagonist's hair turns
  silver at chapter 120), the traps for Role C's false alarms.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from storyloom.writing.book_store import BookStore, Fact, LevelWrite, Relation, Resource
from storyloom.writing.profiles import profile_path, render_profile
from storyloom.writing.uris import arc_path, chapter_path, resource_uri, slug

ARC_LENGTH = 25
DISTANCES = (1, 10, 100, 300)

_NAME_SYL = (
    "ka", "lo", "ri", "an", "mor", "eth", "ul", "vi", "sa", "den",
    "tor", "ith", "bra", "nel", "os", "fa", "gim", "dra", "wen", "cel",
)  # fmt: skip
_UNIQUE_SYL = (
    "zu", "qo", "xi", "py", "vu", "jo", "ky", "wo", "ze", "qa", "xu", "fy", "gu", "hy", "jy",
    "vo", "zy", "qe",
)  # fmt: skip
_SURNAMES = "林王张李陈赵周吴郑孙钱冯蒋沈韩杨朱秦许何吕施"
_GIVEN = "枫雪云海明远霜岚川瑶青墨风竹星月"
_FILLER = [
    "lantern",
    "rain",
    "harbour",
    "bridge",
    "market",
    "letter",
    "candle",
    "river",
    "storm",
    "shadow",
    "silence",
    "road",
    "window",
    "tower",
    "bell",
    "garden",
    "mirror",
    "ember",
    "frost",
    "ledger",
    "map",
    "coin",
    "ship",
    "bread",
    "wine",
    "smoke",
    "forest",
    "gate",
    "stair",
    "courtyard",
    "whisper",
    "song",
    "thread",
    "needle",
    "wheel",
    "wall",
    "dust",
    "hill",
    "cloak",
    "stone",
    "feather",
    "chest",
    "key",
    "well",
    "arrow",
    "banner",
    "horse",
    "cart",
    "oath",
    "debt",
    "rumour",
    "promise",
]
_VERBS = (
    "watched", "followed", "argued with", "waited for", "questioned", "warned", "helped",
    "ignored", "thanked", "doubted",
)  # fmt: skip
_COLOURS = ("black", "brown", "red", "grey", "white", "golden", "silver", "blue")
_EYES = ("brown", "green", "grey", "blue", "amber", "black")
_WEAPONS = ("sword", "spear", "bow", "dagger", "axe", "staff")
_FACTIONS = ("the Crown", "the Guild", "the River Clans", "the Temple", "no one")
_RULERS = ("a duke", "a council", "a queen", "a merchant prince", "the temple")
_CLIMATES = ("foggy", "dry", "snowbound", "humid", "windswept")

# (attribute, category, template with {w} for a unique word)
_FREE_CHARACTER = (
    ("scar", "factual", "a scar shaped like a {w}"),
    ("keepsake", "factual", "a {w} locket"),
    ("debt", "factual", "nine coins owed to {w}"),
    ("oath", "characterization", "never to forgive the {w}"),
    ("hidden skill", "characterization", "reading {w} runes"),
    ("fear", "characterization", "the {w} bells"),
    ("left home", "timeline", "in the winter of {w}"),
    ("journal", "narrative", "letters signed {w}"),
)
_FREE_LOCATION = (
    ("local law", "world", "no {w} after dusk"),
    ("landmark", "world", "the {w} obelisk"),
    ("founded", "timeline", "in the {w} year"),
    ("guardian", "world", "a spirit called {w}"),
)
# (attribute, category, values)
_STRUCTURED_CHARACTER: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("hair", "factual", _COLOURS),
    ("eye colour", "factual", _EYES),
    ("weapon", "characterization", _WEAPONS),
    ("allegiance", "characterization", _FACTIONS),
    ("age", "timeline", tuple(str(n) for n in range(17, 71))),
    ("pov", "narrative", ("first person", "third person")),
)
_STRUCTURED_LOCATION: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("ruler", "world", _RULERS),
    ("climate", "world", _CLIMATES),
    ("gate count", "world", tuple(str(n) for n in range(2, 13))),
)


@dataclass(frozen=True)
class PlantedFact:
    subject: str
    attribute: str
    value: str
    chapter: int
    category: str
    structured: bool
    unique_word: str | None = None
    """The made-up word in the value (unstructured facts): found in a text, the fact is."""


@dataclass(frozen=True)
class Dependency:
    fact: PlantedFact
    distance: int


@dataclass(frozen=True)
class TestChapter:
    chapter: int
    prompt: str
    outline: str
    scene: tuple[str, ...]
    dependencies: tuple[Dependency, ...]
    """Unstructured facts the chapter depends on (recall), one per distance."""
    checks: tuple[Dependency, ...]
    """Structured and unstructured facts Role C's seeded contradictions alter."""


@dataclass(frozen=True)
class Progression:
    subject: str
    attribute: str
    category: str
    before: str
    after: str
    planted: int
    changed: int


@dataclass
class GeneratedBook:
    book_id: str
    chapters: int
    words: int
    names: dict[str, str]
    """Entity path → its title."""
    aliases: dict[str, tuple[str, ...]]
    introduced: dict[str, int]
    """Entity path → the chapter it first appears in (0: from the start)."""
    facts: list[PlantedFact]
    tests: list[TestChapter]
    progressions: list[Progression]
    seals: dict[int, str]
    """Chapter → a made-up word only that chapter's L2 and L1 contain."""
    relations: int = 0
    levels_written: int = 0
    extra: dict[str, int] = field(default_factory=dict)

    def future_markers(self, chapter: int) -> dict[str, int]:
        """Words that appear only in chapters ``chapter`` and later (fact words and
        chapter seals) → the chapter they come from."""
        out = {
            f.unique_word: f.chapter for f in self.facts if f.unique_word and f.chapter >= chapter
        }
        out.update({seal: k for k, seal in self.seals.items() if k >= chapter})
        return out

    def current_value(self, subject: str, attribute: str, before: int) -> PlantedFact | None:
        found = None
        for fact in self.facts:
            same = fact.subject == subject and fact.attribute == attribute
            if same and fact.chapter < before and (found is None or fact.chapter > found.chapter):
                found = fact
        return found


class _Words:
    """Made-up words of three syllables from their own alphabet: each used once, none a
    prefix of another, none a name."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._used: set[str] = set()

    def take(self) -> str:
        for _ in range(10_000):
            word = "".join(self._rng.choice(_UNIQUE_SYL) for _ in range(3))
            if word not in self._used:
                self._used.add(word)
                return word
        raise RuntimeError("ran out of unique words")


def _name(rng: random.Random, taken: set[str], parts: int) -> str:
    for attempt in range(100_000):
        # a crowded name space grows a syllable rather than looping forever
        size = parts + attempt // 500
        name = "".join(rng.choice(_NAME_SYL) for _ in range(size)).capitalize()
        if name not in taken and len(name) >= 4:
            taken.add(name)
            return name
    raise RuntimeError("no free name")


@dataclass
class _Entity:
    path: str
    kind: str
    title: str
    aliases: tuple[str, ...]
    introduced: int
    attrs: dict[str, object] = field(default_factory=dict)

    def resource(self, book_id: str) -> Resource:
        return Resource(
            book_id=book_id,
            path=self.path,
            kind=self.kind,  # type: ignore[arg-type]
            title=self.title,
            parent=self.path.rsplit("/", 1)[0],
            ordinal=0,
            chapter_from=self.introduced,
            aliases=self.aliases,
            attrs=self.attrs,
        )


def _entities(rng: random.Random, count: int, chapters: int) -> list[_Entity]:
    taken: set[str] = set()
    chinese = [s + g for s in _SURNAMES for g in _GIVEN]
    rng.shuffle(chinese)
    n_chars = max(4, count * 6 // 10)
    n_locs = max(2, count // 4)
    n_threads = max(1, count - n_chars - n_locs)
    out: list[_Entity] = []
    late_from = max(2, chapters * 8 // 10)
    for i in range(n_chars):
        first, last = _name(rng, taken, 2), _name(rng, taken, 3)
        aliases = [first]
        if i % 4 == 0 and chinese:
            aliases.append(chinese.pop())
        introduced = 0 if i < max(4, n_chars // 3) else rng.randint(1, late_from)
        out.append(
            _Entity(
                f"/entities/characters/{slug(first + ' ' + last)}",
                "character",
                f"{first} {last}",
                tuple(aliases),
                introduced,
            )
        )
    kinds = ("Keep", "Harbour", "Vale", "Market", "Tower", "Abbey", "Ford")
    for i in range(n_locs):
        title = f"{_name(rng, taken, 3)} {kinds[i % len(kinds)]}"
        introduced = 0 if i < max(2, n_locs // 3) else rng.randint(1, late_from)
        out.append(_Entity(f"/entities/locations/{slug(title)}", "location", title, (), introduced))
    for _ in range(n_threads):
        what = rng.choice(("Oath", "Debt", "Crown", "Letter", "Heir"))
        title = f"The {what} of {_name(rng, taken, 3)}"
        planted = rng.randint(1, max(1, chapters - 1))
        due = min(chapters, planted + rng.randint(5, 60))
        paid = due if rng.random() < 0.6 else None
        out.append(
            _Entity(
                f"/entities/plot-threads/{slug(title)}",
                "plot-thread",
                title,
                (),
                planted,
                {"planted": planted, "due": due, "paidOff": paid},
            )
        )
    return out


class _Planter:
    """Hands out (entity, attribute) pairs once each, so a planted fact stays current
    unless a progression changes it on purpose."""

    def __init__(self, rng: random.Random, words: _Words) -> None:
        self.rng = rng
        self.words = words
        self.used: set[tuple[str, str]] = set()

    def free(self, entity: _Entity, chapter: int) -> PlantedFact | None:
        table = _FREE_LOCATION if entity.kind == "location" else _FREE_CHARACTER
        options = [t for t in table if (entity.path, t[0]) not in self.used]
        if not options or entity.kind == "plot-thread":
            return None
        attribute, category, template = self.rng.choice(options)
        self.used.add((entity.path, attribute))
        word = self.words.take()
        return PlantedFact(
            entity.path, attribute, template.format(w=word), chapter, category, False, word
        )

    def structured(
        self, entity: _Entity, chapter: int, *, attribute: str | None = None
    ) -> PlantedFact | None:
        table = _STRUCTURED_LOCATION if entity.kind == "location" else _STRUCTURED_CHARACTER
        options = [
            t
            for t in table
            if (entity.path, t[0]) not in self.used and (attribute is None or t[0] == attribute)
        ]
        if not options or entity.kind == "plot-thread":
            return None
        name, category, values = self.rng.choice(options)
        self.used.add((entity.path, name))
        return PlantedFact(entity.path, name, self.rng.choice(values), chapter, category, True)


def _sentence(rng: random.Random, names: Sequence[str], place: str) -> str:
    a = rng.choice(names)
    b = rng.choice(names)
    w1, w2 = rng.choice(_FILLER), rng.choice(_FILLER)
    match rng.randrange(5):
        case 0:
            return f"{a} and {b} crossed {place}, talking of the {w1} and the {w2}."
        case 1:
            return f"{a} {rng.choice(_VERBS)} {b} beside the {w1}."
        case 2:
            return f"At {place} the {w1} smelled of {w2}, and {a} kept quiet."
        case 3:
            return f"{a} counted the {w1} twice before the {w2} came."
        case _:
            return f"Nobody at {place} spoke of the {w1} that night."


def _fact_sentence(name: str, fact: PlantedFact, change: bool = False) -> str:
    if change:
        return f"{name}'s {fact.attribute} turned {fact.value}."
    return f"{name}'s {fact.attribute} was {fact.value}."


def generate_book(
    store: BookStore,
    *,
    words: int = 1_000_000,
    chapters: int = 350,
    entities: int = 300,
    seed: int = 7,
    title: str = "The Long Book",
    tests: int = 24,
) -> GeneratedBook:
    rng = random.Random(seed)
    unique = _Words(rng)
    planter = _Planter(rng, unique)
    book = store.create_book(title, language="en")
    book_id = book.id
    cast_all = _entities(rng, entities, chapters)
    by_path = {e.path: e for e in cast_all}
    characters = [e for e in cast_all if e.kind == "character"]
    locations = [e for e in cast_all if e.kind == "location"]
    threads = [e for e in cast_all if e.kind == "plot-thread"]
    initial_chars = [e for e in characters if e.introduced == 0]
    initial_locs = [e for e in locations if e.introduced == 0]
    n_arcs = (chapters + ARC_LENGTH - 1) // ARC_LENGTH
    words_per_chapter = max(30, words // chapters)

    def call(e: _Entity) -> str:
        return rng.choice((e.title, *e.aliases))

    # -- plan the facts before writing anything --------------------------------------
    planted: dict[int, list[tuple[PlantedFact, bool]]] = {}  # chapter → (fact, is change)
    facts: list[PlantedFact] = []

    def plant(fact: PlantedFact, change: bool = False) -> None:
        planted.setdefault(fact.chapter, []).append((fact, change))
        facts.append(fact)

    progressions: list[Progression] = []
    hero = initial_chars[0]
    hair_change = 120 if chapters >= 140 else max(2, chapters * 2 // 3)
    pairs = [(hero, "hair", hair_change)]
    for e in rng.sample(initial_chars[1:], min(len(initial_chars) - 1, 9)):
        attr = rng.choice(("hair", "allegiance", "weapon", "eye colour"))
        pairs.append((e, attr, rng.randint(2, max(2, chapters - 1))))
    for entity, attribute, changed in pairs:
        first = planter.structured(entity, rng.randint(1, max(1, changed - 1)), attribute=attribute)
        if first is None or first.chapter >= changed:
            continue
        values = dict((t[0], t[2]) for t in _STRUCTURED_CHARACTER)[attribute]
        after = rng.choice([v for v in values if v != first.value])
        if entity is hero:
            first = PlantedFact(entity.path, "hair", "black", first.chapter, "factual", True)
            after = "silver"
        second = PlantedFact(entity.path, attribute, after, changed, first.category, True)
        plant(first)
        plant(second, change=True)
        progressions.append(
            Progression(
                entity.path, attribute, first.category, first.value, after, first.chapter, changed
            )
        )

    distances = [d for d in DISTANCES if d < chapters]
    lo = (max(distances) + 1) if distances else 2
    test_chapters = sorted(rng.sample(range(lo, chapters + 1), min(tests, chapters + 1 - lo)))
    casts: dict[int, list[_Entity]] = {}
    test_list: list[TestChapter] = []
    for c in test_chapters:
        scene = [*rng.sample(initial_chars, min(3, len(initial_chars))), rng.choice(initial_locs)]
        casts[c] = scene
        deps: list[Dependency] = []
        checks: list[Dependency] = []
        for i, d in enumerate(distances):
            for shift in range(len(scene)):
                member = scene[(i + shift) % len(scene)]
                fact = planter.free(member, c - d)
                if fact is not None:
                    plant(fact)
                    deps.append(Dependency(fact, d))
                    checks.append(Dependency(fact, d))
                    break
            for shift in range(len(scene)):
                member = scene[(i + shift + 1) % len(scene)]
                fact = planter.structured(member, c - d)
                if fact is not None:
                    plant(fact)
                    checks.append(Dependency(fact, d))
                    break
        a, b, who, place = scene[0], scene[1 % len(scene)], scene[2 % len(scene)], scene[-1]
        prompt = (
            f"Write chapter {c}: {call(a)} confronts {call(b)} at {place.title}"
            f" while {call(who)} watches."
        )
        topic, decider = rng.choice(_FILLER), rng.choice(_FILLER)
        outline = f"{call(a)} and {call(b)} argue about the {topic}; the {decider} decides it."
        test_list.append(
            TestChapter(
                c, prompt, outline, tuple(e.path for e in scene), tuple(deps), tuple(checks)
            )
        )

    # Background facts: a couple per chapter about whoever is on stage.
    for c in range(1, chapters + 1):
        if c not in casts:
            on_stage = [e for e in characters if e.introduced <= c]
            places = [e for e in locations if e.introduced <= c]
            casts[c] = [*rng.sample(on_stage, min(3, len(on_stage))), rng.choice(places)]
        for _ in range(2):
            member = rng.choice(casts[c])
            fact = planter.free(member, c) if rng.random() < 0.6 else planter.structured(member, c)
            if fact is not None:
                plant(fact)

    # -- the setup: /meta, entities, profiles' resources, relations from the start ----
    resources: list[Resource] = []
    levels: list[LevelWrite] = []
    relations: list[Relation] = []
    meta_text = {
        "/meta/outline": (
            "An outline of the long book: a city of bridges, rival houses, a debt that passes "
            "from parent to child, and the cost of keeping promises.",
            " ".join(
                f"Arc {n}: the {rng.choice(_FILLER)} and the {rng.choice(_FILLER)}."
                for n in range(1, n_arcs + 1)
            ),
        ),
        "/meta/style-guide": (
            "Close third person, past tense, plain words, short scenes that end on a turn.",
            "Keep sentences short. Dialogue carries the scene. Describe with one concrete detail. "
            "Avoid summary where a scene would do. Chapters are about 3,000 words.",
        ),
        "/meta/world-rules": (
            "Oaths bind: a broken oath marks the breaker. Bridges close at the ninth bell.",
            "Magic is paid for in memory. The river courts judge debts. No one crosses the "
            "Vale at night. Letters sealed in black wax may only be opened by their addressee.",
        ),
    }
    for path, (l0, l1) in meta_text.items():
        l2 = l1 + "\n\n" + " ".join(_sentence(rng, ["the narrator"], "the city") for _ in range(60))
        levels += [
            LevelWrite(path, "L0", l0),
            LevelWrite(path, "L1", l1),
            LevelWrite(path, "L2", l2),
        ]
    for e in cast_all:
        resources.append(e.resource(book_id))
        folder = profile_path(e.resource(book_id)).split("/")[2]
        resources.append(
            Resource(
                book_id,
                profile_path(e.resource(book_id)),
                "profile",
                f"{e.title} (profile)",
                "",
                0,
                e.introduced,
                (),
                {"profileType": folder, "subject": e.path},
            )
        )
        role = rng.choice(("a courier", "a judge", "a smuggler", "a scholar", "a guard", "an heir"))
        names = ", ".join(e.aliases) if e.aliases else e.title
        l0 = f"{e.title}: {role if e.kind == 'character' else e.kind.replace('-', ' ')}."
        l1 = f"{e.title} ({e.kind.replace('-', ' ')}), also called {names}. " + " ".join(
            f"Known for the {rng.choice(_FILLER)} and the {rng.choice(_FILLER)}." for _ in range(3)
        )
        l2 = l1 + "\n\n" + " ".join(_sentence(rng, [e.title], "the city") for _ in range(12))
        levels += [
            LevelWrite(e.path, "L0", l0),
            LevelWrite(e.path, "L1", l1),
            LevelWrite(e.path, "L2", l2),
        ]
    for n in range(1, n_arcs + 1):
        resources.append(
            Resource(book_id, arc_path(n), "arc", f"Arc {n}", "/manuscript", n, 0, (), {})
        )
        resources.append(
            Resource(
                book_id,
                f"/summaries/arc-{n:02d}",
                "summary",
                f"Arc {n} summary",
                "/summaries",
                n,
                0,
                (),
                {},
            )
        )
    leads = initial_chars[: min(10, len(initial_chars))]
    for e in leads:
        resources.append(
            Resource(
                book_id,
                f"/profiles/emotional-arcs/{e.path.rsplit('/', 1)[1]}",
                "profile",
                f"{e.title}'s emotional arc",
                "",
                0,
                0,
                (),
                {"profileType": "emotional-arcs", "subject": e.path},
            )
        )
    for i, theme in enumerate(("debt", "loyalty", "memory")):
        path = f"/profiles/themes/{theme}"
        resources.append(
            Resource(
                book_id, path, "profile", f"Theme: {theme}", "", i, 0, (), {"profileType": "themes"}
            )
        )
        levels += [
            LevelWrite(path, "L0", f"Theme of {theme}: what it costs and who pays."),
            LevelWrite(
                path,
                "L1",
                f"Theme of {theme}. "
                + " ".join(_sentence(rng, ["the book"], "the city") for _ in range(5)),
            ),
        ]
    levels += [
        LevelWrite(
            "/profiles/style/narrative-voice",
            "L0",
            "Close third person, past tense, plain and dry.",
        ),
        LevelWrite(
            "/profiles/style/narrative-voice",
            "L1",
            "Narrative voice: close third person, past tense. Short declaratives; irony through "
            "understatement; sensory detail one at a time.",
        ),
        LevelWrite("/profiles/world-state/current", "L0", "The city at peace, the bridges open."),
        LevelWrite(
            "/profiles/world-state/current",
            "L1",
            "World state at the start: the bridges open, the courts sitting, the houses at truce.",
        ),
    ]
    # Relations: home places, conflicts, threads involving characters.
    for e in characters:
        places = [p for p in locations if p.introduced <= e.introduced] or locations
        home = rng.choice(places)
        relations.append(
            Relation(e.path, home.path, "关联", "lives near", max(e.introduced, home.introduced))
        )
    for _ in range(len(characters) // 2):
        a, b = rng.sample(characters, 2)
        relations.append(
            Relation(a.path, b.path, "冲突", "old grudge", max(a.introduced, b.introduced))
        )
    for t in threads:
        who = rng.choice(characters)
        relations.append(
            Relation(
                t.path, who.path, "涉及", "at the heart of it", max(t.introduced, who.introduced)
            )
        )
    early = [r for r in relations if r.chapter == 0]
    later: dict[int, list[Relation]] = {}
    for r in relations:
        if r.chapter > 0:
            later.setdefault(r.chapter, []).append(r)
    store.commit_chapter_memory(book_id, levels=levels, relations=early, resources=resources)
    written = len(levels)

    # -- the chapters ------------------------------------------------------------------
    entity_facts: dict[str, list[Fact]] = {}
    seals: dict[int, str] = {}
    arc_l0s: dict[int, list[str]] = {}
    for c in range(1, chapters + 1):
        arc_n = (c - 1) // ARC_LENGTH + 1
        arc = arc_path(arc_n)
        path = chapter_path(arc, c)
        uri = resource_uri(book_id, path)
        cast = casts[c]
        stage = [call(e) for e in cast[:-1]]
        where = cast[-1].title
        seal = unique.take()
        seals[c] = seal
        new = [e for e in cast_all if e.introduced == c]
        todays = planted.get(c, [])
        fact_lines = [_fact_sentence(call(by_path[f.subject]), f, change) for f, change in todays]
        body: list[str] = []
        count = 0
        while count < words_per_chapter:
            line = _sentence(rng, stage, where)
            body.append(line)
            count += len(line.split())
        body[min(3, len(body) - 1)] += f" A carved sigil there read {seal}."
        for line in fact_lines:
            body.insert(rng.randrange(len(body) + 1), line)
        for e in new:
            body.append(f"That was the opening time anyone saw {e.title}.")
        l2 = " ".join(body)
        l1 = (
            f"Chapter {c}. {', '.join(stage)} meet at {where}. "
            + _sentence(rng, stage, where)
            + " "
            + " ".join(fact_lines)
            + f" The sigil {seal} is carved there."
        ).strip()
        l0 = f"Chapter {c}: {' and '.join(stage[:2])} at {where}."
        arc_l0s.setdefault(arc_n, []).append(l0)
        chapter_levels = [
            LevelWrite(path, "L2", l2, c, "curation:bench"),
            LevelWrite(path, "L1", l1, c, "curation:bench"),
            LevelWrite(path, "L0", l0, c, "curation:bench"),
        ]
        stored = [
            Fact(
                f.subject,
                f.attribute,
                f.value,
                c,
                f.category,  # type: ignore[arg-type]
                uri,
                _fact_sentence(by_path[f.subject].title, f, change),
            )
            for f, change in todays
        ]
        touched = sorted({f.subject for f in stored})
        for subject in touched:
            entity_facts.setdefault(subject, []).extend(s for s in stored if s.subject == subject)
            entity = by_path[subject]
            chapter_levels += render_profile(
                entity.resource(book_id), entity_facts[subject], c
            ).writes(c)
        chapter_relations = list(later.get(c, []))
        chapter_relations += [Relation(path, e.path, "引入", "opening appears", c) for e in new]
        if c % ARC_LENGTH == 0 or c == chapters:
            summary = f"/summaries/arc-{arc_n:02d}"
            opening = (arc_n - 1) * ARC_LENGTH + 1
            chapter_levels += [
                LevelWrite(summary, "L1", " ".join(arc_l0s[arc_n]), c, "curation:bench"),
                LevelWrite(
                    summary,
                    "L0",
                    f"Arc {arc_n} (chapters {opening}–{c}): "
                    f"{rng.choice(_FILLER)} and {rng.choice(_FILLER)}.",
                    c,
                    "curation:bench",
                ),
                LevelWrite(
                    "/profiles/world-state/current",
                    "L1",
                    f"World state after arc {arc_n}: the {rng.choice(_FILLER)} rules"
                    f" the {rng.choice(_FILLER)}.",
                    c,
                    "profile",
                ),
            ]
            for e in leads:
                chapter_levels.append(
                    LevelWrite(
                        f"/profiles/emotional-arcs/{e.path.rsplit('/', 1)[1]}",
                        "L1",
                        f"{e.title} after arc {arc_n}: "
                        f"{rng.choice(('hopeful', 'bitter', 'afraid', 'resolved'))}"
                        f" about the {rng.choice(_FILLER)}.",
                        c,
                        "profile",
                    )
                )
        store.commit_chapter_memory(
            book_id,
            levels=chapter_levels,
            facts=stored,
            relations=chapter_relations,
            resources=[Resource(book_id, path, "chapter", f"Chapter {c}", arc, c, c, (), {})],
        )
        written += len(chapter_levels)
    return GeneratedBook(
        book_id=book_id,
        chapters=chapters,
        words=words,
        names={e.path: e.title for e in cast_all},
        aliases={e.path: e.aliases for e in cast_all},
        introduced={e.path: e.introduced for e in cast_all},
        facts=facts,
        tests=test_list,
        progressions=progressions,
        seals=seals,
        relations=len(relations) + sum(1 for e in cast_all if e.introduced > 0),
        levels_written=written,
    )


def altered_value(fact: PlantedFact, rng: random.Random) -> str:
    """A value that contradicts ``fact``: another word of the same vocabulary for a
    structured attribute, another made-up word for a free one."""
    if fact.unique_word:
        return fact.value.replace(fact.unique_word, fact.unique_word[::-1] + "x")
    for name, _, values in (*_STRUCTURED_CHARACTER, *_STRUCTURED_LOCATION):
        if name == fact.attribute:
            return rng.choice([v for v in values if v != fact.value])
    return fact.value + " no more"
