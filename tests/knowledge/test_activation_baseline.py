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
@given(book=books(), chat=chats, scan=scan_settings)
def test_the_engine_activates_the_entries_the_baseline_scan_activates(
    book: KnowledgeBase, chat: list[ScanMessage], scan: ActivationSettings
) -> None:
    engine = ActivationEngine([book], scan, count_tokens=len)
    ours = engine.activate(ActivationRequest(messages=chat, max_context_tokens=MAX_CONTEXT))
    theirs = BASELINE.check_world_info(
        [book], scan, chat, max_context_tokens=MAX_CONTEXT, count_tokens=len
    )
    assert sorted(ours.keys()) == sorted(theirs)
