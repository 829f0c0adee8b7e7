"""On any small book and chat, the engine activates what SillyTavern's scan loop does.

The loop is ``bench/st_baseline_scan.py``, a line-for-line port of SillyTavern's
``checkWorldInfo`` with storyloom's documented departures. Books and chats are drawn
from a small vocabulary (Latin and CJK words, a regex key) so that keys do match, and
entry texts name other keys so that recursion has something to find.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from hypothesis import given, settings
from hypothesis import strategies as st

from storyloom.knowledge.activation import ActivationEngine, ActivationRequest, ScanMessage
from storyloom.knowledge.activation_settings import ActivationSettings
from storyloom.knowledge.caiu import (
    CAIU,
    ActivationCriteria,
    Content,
    SecondaryLogic,
    UsageMetadata,
)
from storyloom.knowledge.knowledge_base import KnowledgeBase

BASELINE_FILE = Path(__file__).resolve().parents[2] / "bench" / "st_baseline_scan.py"
WORDS = ["harbour", "Wraith", "wraiths", "tide", "lamp", "gull", "灯塔", "潮汐"]
KEYS = [*WORDS, "/ti.e/i", "/^lamp/"]
MAX_CONTEXT = 10**6


def load_baseline() -> ModuleType:
    spec = importlib.util.spec_from_file_location("st_baseline_scan", BASELINE_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BASELINE = load_baseline()
phrases = st.lists(st.sampled_from(WORDS), max_size=4).map(" ".join)


@st.composite
def entries(draw: st.DrawFn, index: int) -> CAIU:
    criteria = ActivationCriteria(
        keywords=draw(st.lists(st.sampled_from(KEYS), max_size=3)),
        secondary_keywords=draw(st.lists(st.sampled_from(WORDS), max_size=2)),
        secondary_logic=draw(st.sampled_from(list(SecondaryLogic))),
        selective=draw(st.booleans()),
        constant=draw(st.booleans().map(lambda b: b and index % 4 == 0)),
        case_sensitive=draw(st.none() | st.booleans()),
        match_whole_words=draw(st.none() | st.booleans()),
        scan_depth=draw(st.none() | st.integers(1, 3)),
        inclusion_groups=draw(st.lists(st.sampled_from(["g1", "g2"]), max_size=1)),
        prevent_recursion=draw(st.booleans()),
    )
    return CAIU(
        id=f"e{index}",
        displayName=f"e{index}",
        content=Content(value=draw(phrases)),
        activation_criteria=criteria,
        usage_metadata=UsageMetadata(priority=draw(st.integers(0, 3)) * 50),
    )


@st.composite
def books(draw: st.DrawFn) -> KnowledgeBase:
    count = draw(st.integers(1, 8))
    return KnowledgeBase(
        kb_id="kb", kb_displayName="drawn", entries=[draw(entries(i)) for i in range(count)]
    )


chats = st.lists(
    st.builds(ScanMessage, st.sampled_from(["User", "Maren"]), phrases), min_size=1, max_size=4
)
scan_settings = st.builds(
    ActivationSettings,
    scan_depth=st.integers(1, 4),
    recursive=st.booleans(),
    match_whole_words=st.booleans(),
    case_sensitive=st.booleans(),
)


@settings(max_examples=60, deadline=None)
@given(
    book=books(),
    chat=chats,
    scan=scan_settings,
    context=st.sampled_from([MAX_CONTEXT, 60, 200]),
)
def test_the_engine_activates_the_entries_the_baseline_scan_activates(
    book: KnowledgeBase, chat: list[ScanMessage], scan: ActivationSettings, context: int
) -> None:
    # A small context (a budget of 15 or 50 characters) makes the budget cut, so its
    # rule (earlier steps' recursion text + this step so far) is compared too.
    engine = ActivationEngine([book], scan, count_tokens=len)
    ours = engine.activate(ActivationRequest(messages=chat, max_context_tokens=context))
    theirs = BASELINE.check_world_info(
        [book], scan, chat, max_context_tokens=context, count_tokens=len
    )
    assert sorted(ours.keys()) == sorted(theirs)


# -- where storyloom used to differ, it now does as SillyTavern 1.18 does ------------------


TEN = "one two three four five six seven eight nine ten"


def both(
    book: KnowledgeBase, chat: list[ScanMessage], scan: ActivationSettings, max_context: int
) -> tuple[set[str], set[str]]:
    """The entry ids the engine and the port of SillyTavern's loop activate."""
    engine = ActivationEngine([book], scan, count_tokens=lambda text: len(text.split()))
    ours = engine.activate(ActivationRequest(messages=chat, max_context_tokens=max_context))
    theirs = BASELINE.check_world_info(
        [book],
        scan,
        chat,
        max_context_tokens=max_context,
        count_tokens=lambda text: len(text.split()),
    )
    return {item.entry_id for item in ours.activated}, {e for _, e in theirs}


def keyed(
    entry_id: str, keys: list[str], text: str, priority: int = 100, **criteria: object
) -> CAIU:
    return CAIU(
        id=entry_id,
        displayName=entry_id,
        content=Content(value=text),
        activation_criteria=ActivationCriteria(keywords=keys, **criteria),
        usage_metadata=UsageMetadata(priority=priority),
    )


def test_an_earlier_steps_prevent_recursion_entry_is_not_charged_to_later_steps() -> None:
    # Budget 25 (25% of 100), one token per word. Step 1: "quiet" (prevents recursion)
    # and "gate", 10 words each (20 < 25). Step 2 finds "beacon" in gate's text; SillyTavern
    # charges it only gate's 10 words (allActivatedText), so 10 + 10 < 25 and it fits.
    book = KnowledgeBase(
        kb_id="kb",
        entries=[
            keyed("quiet", ["alpha"], TEN, 300, prevent_recursion=True),
            keyed("gate", ["gamma"], "the gate opens to the beacon on the far hill", 200),
            keyed("beacon", ["beacon"], TEN, 100),
        ],
    )
    chat = [ScanMessage("User", "alpha and gamma")]
    ours, theirs = both(book, chat, ActivationSettings(scan_depth=1), 100)
    assert ours == theirs == {"quiet", "gate", "beacon"}


def test_the_budget_refuses_an_entry_that_reaches_it_exactly() -> None:
    # SillyTavern stops at tokens >= budget: two 10-word entries, a budget of 20.
    book = KnowledgeBase(
        kb_id="kb",
        entries=[
            keyed("first", ["key"], TEN, 200),
            keyed("second", ["key"], TEN, 100),
        ],
    )
    chat = [ScanMessage("User", "key")]
    ours, theirs = both(book, chat, ActivationSettings(recursive=False), 80)
    assert ours == theirs == {"first"}


def test_whole_word_chinese_keys_need_a_non_ascii_word_neighbour() -> None:
    whole = ActivationSettings(match_whole_words=True, recursive=False)
    book = KnowledgeBase(
        kb_id="kb",
        entries=[
            keyed("dragon", ["龙"], "dragon"),
            keyed("ai", ["AI"], "assistant"),
            keyed("zhang", ["张三"], "zhang"),
        ],
    )
    cases = {
        "巨龙飞过山谷": {"dragon"},
        "a龙b": set(),
        "我是AI助手": {"ai"},
        "张三123号": set(),
        "张三，你好": {"zhang"},
    }
    for text, expected in cases.items():
        ours, theirs = both(book, [ScanMessage("User", text)], whole, MAX_CONTEXT)
        assert ours == theirs == expected, text


def test_regex_keys_search_the_joined_scan_text() -> None:
    scan = ActivationSettings(scan_depth=2, recursive=False)
    book = KnowledgeBase(
        kb_id="kb",
        entries=[
            keyed("span", ["/lamp[\\s\\S]+tide/"], "spans two messages"),
            keyed("anchored", ["/^lamp/"], "never at a message start"),
            keyed("joiner", ["/\\n\\x01Maren: tide/"], "the message joiner"),
        ],
    )
    # Newest first: "User: lamp lit" then "Maren: tide rises", joined by "\n\x01".
    chat = [ScanMessage("Maren", "tide rises"), ScanMessage("User", "lamp lit")]
    ours, theirs = both(book, chat, scan, MAX_CONTEXT)
    assert ours == theirs == {"span", "joiner"}
