"""The offline prose reader: people and places found in a manuscript, and the fact
vocabulary read from its sentences, English and Chinese.

Measured (subject, attribute, value all right) on prose written for these tests, several
phrasings per kind:

- ENGLISH / CHINESE below, the prose the patterns were tuned on: English 30 facts, all
  read, none wrong (precision 1.00, recall 1.00); Chinese 17 facts, likewise 1.00 / 1.00.
- HELD_OUT / HELD_OUT_ZH, written afterwards, on first reading: English precision 1.00,
  recall 0.63 (12 of 19: "worked as a cooper", "later moved", "Cal's son" with Cal named
  once, an oath holding "never"); Chinese 1.00 / 0.85 (11 of 13). After fixing those
  general gaps: English 18 of 18 right, recall 0.95 ("kept a lodging house in Dunmore" is
  not read as home); Chinese 12 of 12, recall 0.92 (a debt to 钱庄, not a person).

The tests hold the reader to precision ≥ 0.9 and recall ≥ 0.85 on all four.
"""

from __future__ import annotations

from storyloom.writing.prose_reader import (
    FoundEntity,
    discover_entities,
    people_of,
    read_facts,
)

ENGLISH = [
    # chapter 1
    """Mara Quell had lived in Lisbon since the flood. Mara's eyes were a deep green, and
people in the market remembered them. Her brother Tomas sold rope on the quay.

Tomas Quell was a short man with black hair. He owed Edric Vance forty silver crowns, and
everybody on the quay knew it. A scar ran across his left jaw.

Edric Vance, the harbourmaster, stood very tall beside the customs house. Vance had grey
eyes. His daughter Hanne kept his ledgers.

Hanne Vance was a clerk. She kept her rooms in Porto, though she worked in Lisbon. A small
tattoo of an anchor sat inside her left wrist.
""",
    # chapter 2
    """Captain Ilse Brandt came ashore at dawn. Brandt had a birthmark on her right hand
and eyes the blue of a winter sky.

Mara watched the captain from the window. She swore to find out what Brandt carried.
Tomas, her younger brother, said nothing.

Edric Vance was murdered that night in the customs house. Hanne found him at dawn.
""",
    # chapter 3
    """Three years later Mara dyed her hair red and moved to Porto, where she lived with
Hanne Vance. Hanne owned a small bookshop near the river.

Tomas had lost his right hand in the rope works. He hid the letters beneath a loose
stone in the chapel wall. He borrowed ten crowns from Ilse Brandt.

Ilse Brandt was promoted to commander in the spring. Brandt married Tomas before the
summer was out. Hanne Vance died of a fever in the winter.
""",
]

# (subject title, attribute, value, change)
ENGLISH_FACTS = {
    ("Mara Quell", "home", "Lisbon", False),
    ("Mara Quell", "eyes", "green", False),
    ("Mara Quell", "brother", "Tomas", False),
    ("Tomas Quell", "height", "short", False),
    ("Tomas Quell", "hair", "black", False),
    ("Tomas Quell", "owes", "forty silver crowns to Edric Vance", False),
    ("Tomas Quell", "scar", "left jaw", False),
    ("Edric Vance", "occupation", "harbourmaster", False),
    ("Edric Vance", "height", "tall", False),
    ("Edric Vance", "eyes", "grey", False),
    ("Edric Vance", "daughter", "Hanne", False),
    ("Hanne Vance", "occupation", "clerk", False),
    ("Hanne Vance", "home", "Porto", False),
    ("Hanne Vance", "mark", "left wrist", False),
    ("Ilse Brandt", "rank", "captain", False),
    ("Ilse Brandt", "mark", "right hand", False),
    ("Ilse Brandt", "eyes", "blue", False),
    ("Mara Quell", "oath", "to find out what Brandt carried", True),
    ("Mara Quell", "brother", "Tomas", False),
    ("Edric Vance", "status", "dead", True),
    ("Edric Vance", "death", "murdered", True),
    ("Mara Quell", "hair", "red", True),
    ("Mara Quell", "home", "Porto", True),
    ("Hanne Vance", "owns", "a small bookshop near the river", False),
    ("Tomas Quell", "lost_limb", "right hand", True),
    ("Tomas Quell", "hidden:letters", "beneath a loose stone in the chapel wall", True),
    ("Tomas Quell", "owes", "ten crowns to Ilse Brandt", True),
    ("Ilse Brandt", "rank", "commander", True),
    ("Ilse Brandt", "spouse", "Tomas", True),
    ("Hanne Vance", "death", "a fever", True),
    ("Hanne Vance", "status", "dead", True),
}

CHINESE = [
    """苏晴住在杭州的一条小巷里。苏晴有一双灰色的眼睛。她的哥哥苏木是一名铁匠。

苏木的左脸颊上有一道长长的疤。他欠了赵四五十两银子。赵四是一个商人。

赵四留着一头白色的短发。赵四的女儿赵小满喜欢苏木。
""",
    """三年后，苏晴把头发染成了银色，搬到了长安。她发誓要找到杀害父亲的凶手。

苏木在战场上失去了左臂。他把地图藏在了祠堂的地板下。赵四死于一场瘟疫。

赵小满个子很高。苏晴看着赵小满，笑了。苏木也笑了。赵四也来了。
""",
]

CHINESE_FACTS = {
    ("苏晴", "home", "杭州", False),
    ("苏晴", "eyes", "灰色", False),
    ("苏晴", "brother", "苏木", False),
    ("苏木", "occupation", "铁匠", False),
    ("苏木", "scar", "左脸颊", False),
    ("苏木", "owes", "赵四五十两银子", False),
    ("赵四", "occupation", "商人", False),
    ("赵四", "hair", "白色", False),
    ("赵四", "daughter", "赵小满", False),
    ("苏晴", "hair", "银色", True),
    ("苏晴", "home", "长安", True),
    ("苏晴", "oath", "要找到杀害父亲的凶手", True),
    ("苏木", "lost_limb", "左臂", True),
    ("苏木", "hidden:地图", "祠堂的地板下", True),
    ("赵四", "death", "死于一场瘟疫", True),
    ("赵四", "status", "dead", True),
    ("赵小满", "height", "高", False),
}


def _read_book(chapters: list[str]) -> tuple[list[FoundEntity], set[tuple[str, str, str, bool]]]:
    found = discover_entities(chapters)
    people = people_of([], found)
    title = {f.path: f.title for f in found}
    read: set[tuple[str, str, str, bool]] = set()
    for number, text in enumerate(chapters, start=1):
        for claim in read_facts(text, people, number).facts:
            read.add((title[claim.subject], claim.attribute, claim.value, claim.change))
    return found, read


def _scores(
    read: set[tuple[str, str, str, bool]], gold: set[tuple[str, str, str, bool]]
) -> tuple[float, float]:
    plain = {f[:3] for f in read}
    wanted = {f[:3] for f in gold}
    right = plain & wanted
    return len(right) / len(plain), len(right) / len(wanted)


def test_english_prose_gives_its_people_places_and_aliases() -> None:
    found = {f.title: f for f in discover_entities(ENGLISH)}
    assert {t for t, f in found.items() if f.kind == "character"} >= {
        "Mara Quell",
        "Tomas Quell",
        "Edric Vance",
        "Hanne Vance",
        "Ilse Brandt",
    }
    assert {t for t, f in found.items() if f.kind == "location"} >= {"Lisbon", "Porto"}
    assert set(found["Mara Quell"].aliases) == {"Mara"}
    assert {"Brandt", "Captain Brandt"} <= set(found["Ilse Brandt"].aliases)
    assert found["Ilse Brandt"].first_chapter == 2
    # Words that merely open sentences are no one.
    assert not {"Three", "Her", "She", "The"} & set(found)


def test_english_facts_are_read_with_their_subjects_at_measured_precision_and_recall() -> None:
    _, read = _read_book(ENGLISH)
    precision, recall = _scores(read, ENGLISH_FACTS)
    assert precision >= 0.9, sorted({f[:3] for f in read} - {f[:3] for f in ENGLISH_FACTS})
    assert recall >= 0.85, sorted({f[:3] for f in ENGLISH_FACTS} - {f[:3] for f in read})


def test_english_progressions_are_changes_and_pronouns_find_their_person() -> None:
    _, read = _read_book(ENGLISH)
    facts = {f[:3]: f[3] for f in read}
    # "Mara dyed her hair red and moved to Porto": both changes, both Mara's.
    assert facts[("Mara Quell", "hair", "red")] is True
    assert facts[("Mara Quell", "home", "Porto")] is True
    assert facts[("Tomas Quell", "lost_limb", "right hand")] is True
    # "He owed Edric Vance ..." after "Tomas Quell was a short man": he is Tomas.
    assert ("Tomas Quell", "owes", "forty silver crowns to Edric Vance") in facts
    # "She kept her rooms in Porto" follows "Hanne Vance was a clerk".
    assert ("Hanne Vance", "home", "Porto") in facts
    assert facts[("Mara Quell", "home", "Lisbon")] is False


def test_kin_becomes_a_fact_and_a_relation_between_the_two_people() -> None:
    found = discover_entities(ENGLISH)
    people = people_of([], found)
    reading = read_facts(ENGLISH[0], people, 1)
    kin = {(r.from_path, r.to_path, r.kind, r.chapter) for r in reading.relations}
    mara, tomas = "/entities/characters/mara-quell", "/entities/characters/tomas-quell"
    edric, hanne = "/entities/characters/edric-vance", "/entities/characters/hanne-vance"
    assert (mara, tomas, "kin:brother", 1) in kin
    assert (edric, hanne, "kin:daughter", 1) in kin


def test_what_is_denied_or_supposed_is_not_a_fact() -> None:
    found = discover_entities(ENGLISH)
    people = people_of([], found)
    text = (
        "Mara Quell never lived in Lisbon. If Tomas Quell had lost his left arm, he would"
        " have said so. Mara Quell was not dead."
    )
    assert read_facts(text, people, 4).facts == []


def test_chinese_prose_gives_its_people_through_jieba_and_recurrence() -> None:
    found = {f.title: f for f in discover_entities(CHINESE)}
    assert {t for t, f in found.items() if f.kind == "character"} >= {"苏晴", "苏木", "赵四"}


def test_chinese_facts_are_read_at_measured_precision_and_recall() -> None:
    found = discover_entities(CHINESE)
    # 赵小满 is named twice; jieba may not tag her, the author's entity list would.
    people = people_of([], [*found, FoundEntity("character", "赵小满", (), 1, 2)])
    title = {p.path: p.names[0] for p in people}
    read = {
        (title[c.subject], c.attribute, c.value, c.change)
        for number, text in enumerate(CHINESE, start=1)
        for c in read_facts(text, people, number).facts
    }
    precision, recall = _scores(read, CHINESE_FACTS)
    assert precision >= 0.9, sorted({f[:3] for f in read} - {f[:3] for f in CHINESE_FACTS})
    assert recall >= 0.85, sorted({f[:3] for f in CHINESE_FACTS} - {f[:3] for f in read})
    changes = {f[:3] for f in read if f[3]}
    assert {
        ("苏晴", "hair", "银色"),
        ("苏晴", "home", "长安"),
        ("苏木", "lost_limb", "左臂"),
    } <= changes


HELD_OUT = [
    """Orla Finch kept a lodging house in Dunmore. Orla had pale blue eyes and a laugh that
carried down the street. Her husband Cal Finch worked as a cooper.

Cal Finch, a broad and quiet man, was tall enough to duck under every door. He had brown
hair going to grey at the temples. His sister Nell lived in Carrow.

Nell Finch was a midwife. She had a burn scar across her right forearm from a kitchen
fire. Nell owed Orla twelve shillings.
""",
    """In the winter Cal Finch broke his left leg on the ice. Orla nursed him.

Nell swore an oath that she would never set foot in Dunmore again. Nell Finch later
moved to Ashby. Her nephew Pip Finch was Cal's son.

Pip Finch hid the money in the cellar of the lodging house. Cal died of his fever at
Candlemas. Orla Finch was dead by the spring.
""",
]
HELD_OUT_FACTS = {
    ("Orla Finch", "home", "Dunmore"),
    ("Orla Finch", "eyes", "pale blue"),
    ("Orla Finch", "spouse", "Cal Finch"),
    ("Cal Finch", "occupation", "cooper"),
    ("Cal Finch", "height", "tall"),
    ("Cal Finch", "hair", "brown"),
    ("Cal Finch", "sister", "Nell"),
    ("Nell Finch", "home", "Carrow"),
    ("Nell Finch", "occupation", "midwife"),
    ("Nell Finch", "scar", "right forearm"),
    ("Nell Finch", "owes", "twelve shillings to Orla"),
    ("Cal Finch", "injury", "broke his left leg"),
    ("Nell Finch", "oath", "that she would never set foot in Dunmore again"),
    ("Nell Finch", "home", "Ashby"),
    ("Cal Finch", "son", "Pip Finch"),
    ("Pip Finch", "hidden:money", "in the cellar of the lodging house"),
    ("Cal Finch", "death", "his fever"),
    ("Cal Finch", "status", "dead"),
    ("Orla Finch", "status", "dead"),
}
HELD_OUT_ZH = [
    """韩梅住在扬州。韩梅的眼睛是琥珀色，笑起来很好看。她的丈夫周正是一位郎中。

周正有一头黑色的头发。周正欠了钱庄三百两。他的妹妹周兰嫁到了苏州。
""",
    """那年冬天，周正的右腿骨折了。韩梅发誓再也不回扬州。后来韩梅搬到了金陵。

周兰把账本藏在床底下。周正去世了。周兰看着韩梅。
""",
]
HELD_OUT_ZH_FACTS = {
    ("韩梅", "home", "扬州"),
    ("韩梅", "eyes", "琥珀色"),
    ("韩梅", "spouse", "周正"),
    ("周正", "occupation", "郎中"),
    ("周正", "hair", "黑色"),
    ("周正", "owes", "钱庄三百两"),
    ("周正", "sister", "周兰"),
    ("周兰", "home", "苏州"),
    ("周正", "injury", "右腿骨折"),
    ("韩梅", "oath", "再也不回扬州"),
    ("韩梅", "home", "金陵"),
    ("周兰", "hidden:账本", "床底下"),
    ("周正", "status", "dead"),
}


def test_prose_written_after_the_patterns_is_read_at_measured_precision_and_recall() -> None:
    for chapters, gold in ((HELD_OUT, HELD_OUT_FACTS), (HELD_OUT_ZH, HELD_OUT_ZH_FACTS)):
        _, read = _read_book(chapters)
        plain = {f[:3] for f in read}
        right = plain & gold
        assert len(right) / len(plain) >= 0.9, sorted(plain - gold)
        assert len(right) / len(gold) >= 0.85, sorted(gold - plain)


def _facts_of(chapters: list[str]) -> set[tuple[str, str, str]]:
    return {f[:3] for f in _read_book(chapters)[1]}


def test_a_possessive_name_is_the_person_and_a_shared_first_name_goes_to_the_one_named_most() -> (
    None
):
    chapters = [
        "Wren Ashby came down to the quay early. The wind pulled at Wren Ashby's red hair. "
        "Wren Ashby had not written to Wren Dorne, the brother in the north, for a year.",
        "Wren laughed at something the ferryman said. Wren Ashby bought bread at the stall. "
        "Wren read the harbour notices twice. Wren Ashby mended a net on the steps.",
        "There was something unsettling in Wren's grey eyes. Wren Ashby watched the boats.",
    ]
    found = {f.title: f for f in discover_entities(chapters)}
    assert "Wren Ashby's" not in found
    assert found["Wren Ashby"].aliases == ("Wren",)
    assert _facts_of(chapters) >= {
        ("Wren Ashby", "hair", "red"),
        ("Wren Ashby", "eyes", "grey"),
        ("Wren Ashby", "brother", "Wren Dorne"),
    }


def test_a_relative_named_once_is_a_fact_even_in_a_negated_sentence_about_something_else() -> None:
    chapters = [
        "Ilse Corvin came early. Ilse's brother Jory Corvin had gone to sea at fifteen. "
        "Ilse Corvin had grown up in Harrowgate. Ilse Corvin had worked as a cooper since the war.",
        "Home, for Tessa Vance, was a narrow house in Kesmere. Tessa Vance had not written to "
        "Bram Vance, the brother in the north, for a year. Tessa asked Ilse Corvin about the "
        "tide. Ilse Corvin was not her sister.",
        "Only Tessa knew the ledger lay under the mill wheel. Tessa had sworn never to cross "
        "the river again. Tessa Vance pushed back a lock of fair hair and frowned.",
    ]
    facts = _facts_of(chapters)
    assert facts >= {
        ("Ilse Corvin", "brother", "Jory Corvin"),
        ("Ilse Corvin", "home", "Harrowgate"),
        ("Ilse Corvin", "occupation", "cooper"),
        ("Tessa Vance", "home", "Kesmere"),
        ("Tessa Vance", "brother", "Bram Vance"),
        ("Tessa Vance", "hidden:ledger", "under the mill wheel"),
        ("Tessa Vance", "oath", "never to cross the river again"),
        ("Tessa Vance", "hair", "fair"),
    }
    assert not any(f[1] == "sister" for f in facts)


def test_chinese_names_jieba_misses_and_the_nicknames_friends_use_are_found() -> None:
    chapters = [
        "方寒一早就到了码头。寒哥住在泉州，说话还带着那里的口音。远处传来钟声，钟声回应着它。",
        "沈瑶抬起头，灯光照见一双琥珀色的眼睛。瑶瑶的左脸上有一道细细的疤。拱廊下有人拉胡琴。",
        "方寒的哥哥方海十五岁就出海了。瑶瑶拨开一缕红色的头发。寒哥还欠沈瑶130两银子。"
        "拱廊下有人拉胡琴，讨几个铜板。",
    ]
    found = {f.title: f for f in discover_entities(chapters)}
    assert found["方寒"].kind == "character" and "寒哥" in found["方寒"].aliases
    assert "瑶瑶" in found["沈瑶"].aliases
    assert not {"钟声", "胡琴", "寒哥", "瑶瑶"} & set(found)
    assert _facts_of(chapters) >= {
        ("方寒", "home", "泉州"),
        ("方寒", "brother", "方海"),
        ("方寒", "owes", "沈瑶130两银子"),
        ("沈瑶", "eyes", "琥珀色"),
        ("沈瑶", "scar", "左脸"),
        ("沈瑶", "hair", "红色"),
    }


def test_a_chinese_move_keeps_the_town_not_the_room_above_the_shop() -> None:
    chapters = ["叶岚住在金陵。叶岚常去码头。", "叶岚后来搬到扬州，住在一间箍桶铺楼上。叶岚笑了。"]
    read = _read_book(chapters)[1]
    homes = {(f[2], f[3]) for f in read if f[1] == "home"}
    assert homes == {("金陵", False), ("扬州", True)}


def test_a_chinese_death_read_across_words_but_not_a_near_death_or_a_mistaken_one() -> None:
    chapters = [
        "周远在开春前病死了。陈默以为他快死了。苏婉差点死了。",
        "陈默和苏婉在码头说话。苏婉看着陈默。陈默笑了。周远的坟在山坡上，周远走了一年了。",
    ]
    deaths = {f[0] for f in _read_book(chapters)[1] if f[1] == "status"}
    assert deaths == {"周远"}
