"""How fast is the activation engine, against a straight port of SillyTavern's scan loop?

Three scenarios, the same inputs for both (probability 1, so outcomes are fixed):

(a) a 250-entry book built from the shapes of three real books (their contents,
    positions, orders), with synthetic names as keys, regex keys, secondary keys of all
    four logics, inclusion groups and per-entry scan depths, over a 2,000-message chat,
    scan depth 10, recursion on;
(b) a synthetic 10,000-entry book over the same kind of chat (the baseline scans fewer
    times: it is slow);
(c) a 100-entry Chinese book whose entries name each other, budget unbounded: the
    recursion cascades through most of the book.

The books and the chat the filler text comes from are the real-user corpus when it is
there (``$STORYLOOM_CORPUS``, else ``../shared/st-samples``), else the test fixtures of
the same shapes (``tests/fixtures/sillytavern``); the first line says which. Figures are
comparable only between runs on the same source.

Prints the engine's compile time, ms per scan (median of rounds) for the baseline
(``st_baseline_scan.py``) and for storyloom, whether both activated the same entries,
and ends with ``ratio: X`` (baseline ms / storyloom ms for (a)).

    .venv/bin/python bench/activation.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from bench import st_baseline_scan
else:  # run as a script: the baseline lies beside this file
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import st_baseline_scan

from storyloom.knowledge.activation import (
    ActivationEngine,
    ActivationRequest,
    ScanMessage,
)
from storyloom.knowledge.activation_settings import ActivationSettings
from storyloom.knowledge.caiu import (
    CAIU,
    ActivationCriteria,
    Content,
    Placement,
    SecondaryLogic,
    UsageMetadata,
)
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.llm.tokens import token_counter

REPO = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("STORYLOOM_CORPUS") or REPO.parent / "shared" / "st-samples")
CORPUS_FILES = (
    "st-default_Eldoria_worldinfo_v1.18.0.json",
    "zh_worldinfo_chujuyiqinzhi_19entries.json",
    "worldinfo_EU4_imported_with_originalData_20entries.json",
    "chat_legacy_header_Seraphina_2024.jsonl",
)
FIXTURES = REPO / "tests" / "fixtures" / "sillytavern"
FIXTURE_FILES = (
    "world_info_lanternfall_v1.18.json",
    "world_info_tea_road_zh_original_data.json",
    "world_info_star_port_imported_original_data.json",
    "chat_maren_legacy_header.jsonl",
)
POSITIONS = list(Placement)[4:]  # before_character ... outlet, SillyTavern's 0..7
ROLES: dict[int, Literal["system", "user", "assistant"]] = {0: "system", 1: "user", 2: "assistant"}
LOGICS = list(SecondaryLogic)
SYLLABLES = [
    *("ka", "el", "mor", "tha", "rin", "dor", "vel", "ash", "lun", "qua", "zer", "mi"),
    *("ra", "tho", "gal", "ven", "ori", "syl", "bran", "cor", "fen", "hal", "ist", "jor"),
    *("kel", "nym", "pra", "sev", "tor", "ul", "wyn", "yar", "zo", "bel", "cai", "dru"),
]
SURNAMES = (
    "李王张刘陈杨赵黄周吴徐孙胡朱高林何郭马罗梁宋郑谢韩唐冯于董萧程曹袁邓许傅沈曾彭吕"
    "苏卢蒋蔡贾丁魏薛叶阎余潘杜戴夏钟汪田任姜范方石姚谭廖邹熊金陆郝孔白崔康毛邱秦江史"
    "顾侯邵孟龙万段漕钱汤尹黎易常武乔贺赖龚文"
)
GIVEN = "青云明轩子墨雨涵浩然若曦天佑思远嘉懿语嫣晨阳紫萱俊杰梓琪宇航欣怡一鸣婉清"


def source_files() -> list[Path]:
    """Three books and a chat: the corpus's when it has them all, else the fixtures'."""
    corpus = [CORPUS / name for name in CORPUS_FILES]
    if all(path.is_file() for path in corpus):
        return corpus
    return [FIXTURES / name for name in FIXTURE_FILES]


def sample_entries() -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    for path in source_files()[:3]:
        data = json.loads(path.read_text(encoding="utf-8"))
        entries.extend(data["entries"].values())
    return entries


def filler_sentences() -> list[str]:
    path = source_files()[3]
    sentences: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        message = json.loads(line).get("mes", "")
        sentences.extend(s.strip() for s in message.replace("\n", " ").split(". ") if s.strip())
    return sentences


def make_names(count: int, rng: random.Random) -> list[str]:
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < count:
        word = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))).capitalize()
        if word.lower() not in seen:
            seen.add(word.lower())
            names.append(word)
    return names


def shaped_entry(
    index: int, template: dict[str, Any], names: Sequence[str], rng: random.Random
) -> CAIU:
    """A CAIU in the shape of a SillyTavern entry, keyed by synthetic names."""
    count = len(names)
    name = names[index]
    keywords = [name, f"{name.lower()} clan"]
    if index % 10 == 0:
        keywords[1] = f"/\\b{name[:3]}\\w*{name[-2:]}s?\\b/i"
    secondary: list[str] = []
    if index % 5 == 0:
        secondary = [names[(index * 3 + 1) % count], names[(index * 5 + 2) % count]]
    content = str(template.get("content") or "")[:300]
    if index % 3 == 0:
        content += f" See also {names[(index * 7 + 3) % count]}."
    position = int(template.get("position") or 0)
    placement = POSITIONS[position] if 0 <= position < len(POSITIONS) else Placement.BEFORE_PROMPT
    criteria = ActivationCriteria(
        keywords=keywords,
        secondary_keywords=secondary,
        secondary_logic=LOGICS[index % 4],
        constant=index in (1, 120, 240),
        case_sensitive=True if index % 13 == 0 else None,
        match_whole_words=False if index % 11 == 0 else None,
        scan_depth=(4 if index % 17 == 0 else 20) if index % 17 in (0, 1) else None,
        inclusion_groups=[f"faction{index % 5}"] if index % 7 == 0 else [],
        group_override=index % 35 == 0,
        group_weight=50 + (index % 4) * 25,
        prevent_recursion=index % 19 == 0,
        exclude_recursion=index % 23 == 0,
        delay_until_recursion=1 if index % 29 == 0 else 0,
    )
    usage = UsageMetadata(
        priority=int(template.get("order") or 100) + index % 7,
        placement=placement,
        depth=int(template.get("depth") or 4),
        role=ROLES.get(template.get("role") or 0, "system"),
    )
    return CAIU(
        id=f"e{index}",
        displayName=name,
        content=Content(value=content),
        activation_criteria=criteria,
        usage_metadata=usage,
    )


def make_chat(names: Sequence[str], count: int, rng: random.Random) -> list[ScanMessage]:
    sentences = filler_sentences()
    chat: list[ScanMessage] = []
    for i in range(count):
        words = [rng.choice(sentences) for _ in range(2)]
        for _ in range(rng.randint(0, 2)):
            words.insert(rng.randint(0, len(words)), f"{rng.choice(names)} is here.")
        chat.append(ScanMessage("Seraphina" if i % 2 else "User", " ".join(words), i % 2 == 0))
    return chat


def scenario_a() -> tuple[KnowledgeBase, list[ScanMessage], ActivationSettings, int]:
    rng = random.Random(11)
    templates = sample_entries()
    names = make_names(250, rng)
    entries = [shaped_entry(i, templates[i % len(templates)], names, rng) for i in range(250)]
    book = KnowledgeBase(kb_id="kb_a", kb_displayName="shaped", entries=entries)
    chat = make_chat(names, 2000, rng)
    settings = ActivationSettings(scan_depth=10, recursive=True, match_whole_words=True)
    return book, chat, settings, 32768


def scenario_b() -> tuple[KnowledgeBase, list[ScanMessage], ActivationSettings, int]:
    rng = random.Random(22)
    names = make_names(10_000, rng)
    entries: list[CAIU] = []
    for i, name in enumerate(names):
        keywords = [name, f"{name.lower()} guild"]
        if i % 50 == 0:
            keywords.append(f"/{name[:4]}\\w+ of {name[-3:]}/i")
        content = f"{name} is a figure of the realm. " + (
            f"Allied with {names[(i * 31 + 7) % len(names)]}." if i % 4 == 0 else ""
        )
        entries.append(
            CAIU(
                id=f"b{i}",
                displayName=name,
                content=Content(value=content),
                activation_criteria=ActivationCriteria(
                    keywords=keywords,
                    secondary_keywords=[names[(i + 1) % len(names)]] if i % 9 == 0 else [],
                    secondary_logic=SecondaryLogic.NOT_ANY,
                    inclusion_groups=[f"g{i % 40}"] if i % 10 == 0 else [],
                ),
                usage_metadata=UsageMetadata(priority=100 + i % 10),
            )
        )
    book = KnowledgeBase(kb_id="kb_b", kb_displayName="synthetic", entries=entries)
    chat = make_chat(names, 2000, rng)
    settings = ActivationSettings(scan_depth=10, recursive=True, match_whole_words=True)
    return book, chat, settings, 32768


def scenario_c() -> tuple[KnowledgeBase, list[ScanMessage], ActivationSettings, int]:
    rng = random.Random(33)
    names: list[str] = []
    while len(names) < 100:
        name = rng.choice(SURNAMES) + rng.choice(GIVEN) + rng.choice(GIVEN)
        if name not in names and not any(name in other or other in name for other in names):
            names.append(name)
    lines = [
        str(e.get("content") or "")[:120].replace("\n", "")
        for e in sample_entries()
        if any("\u4e00" <= ch <= "\u9fff" for ch in str(e.get("content") or ""))
    ]
    entries: list[CAIU] = []
    for i, name in enumerate(names):
        links = [names[(i + 1) % 100]] + ([names[(i + 3) % 100]] if i % 5 == 0 else [])
        content = f"{name}：{rng.choice(lines)}。与{'、'.join(links)}交好。"
        entries.append(
            CAIU(
                id=f"c{i}",
                displayName=name,
                content=Content(value=content),
                activation_criteria=ActivationCriteria(keywords=[name]),
                usage_metadata=UsageMetadata(priority=100, placement=Placement.AT_DEPTH),
            )
        )
    book = KnowledgeBase(kb_id="kb_c", kb_displayName="人物志", entries=entries)
    chat = [
        ScanMessage("用户", "今天的天气很好。"),
        ScanMessage("旁白", f"{names[0]}推门而入，四下张望。"),
    ]
    settings = ActivationSettings(scan_depth=2, recursive=True, context_percent=100)
    return book, chat, settings, 10**9


def time_per_scan(run: Callable[[], object], scans: int, rounds: int) -> float:
    """Median over rounds of the mean ms per scan."""
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(scans):
            run()
        samples.append((time.perf_counter() - start) * 1000 / scans)
    return statistics.median(samples)


def run_scenario(
    label: str,
    setup: tuple[KnowledgeBase, list[ScanMessage], ActivationSettings, int],
    positions: Sequence[int],
    rounds: int,
    baseline_positions: Sequence[int],
) -> tuple[float, float]:
    book, chat, settings, max_context = setup
    count = token_counter("gpt-4o").count
    start = time.perf_counter()
    engine = ActivationEngine([book], settings, count_tokens=count)
    compile_ms = (time.perf_counter() - start) * 1000
    requests = [
        ActivationRequest(messages=chat[:p], max_context_tokens=max_context) for p in positions
    ]
    identical = True
    activated = []
    for position, request in zip(positions, requests, strict=True):
        ours = engine.activate(request).keys()
        activated.append(len(ours))
        if position in baseline_positions:
            theirs = st_baseline_scan.check_world_info(
                [book],
                settings,
                request.messages,
                max_context_tokens=max_context,
                count_tokens=count,
            )
            identical = identical and sorted(ours) == sorted(theirs)
    state = iter(range(10**9))

    def ours_once() -> None:
        engine.activate(requests[next(state) % len(requests)])

    ours_ms = time_per_scan(ours_once, len(requests), rounds)
    base_requests = [requests[positions.index(p)] for p in baseline_positions]
    cursor = iter(range(10**9))

    def theirs_once() -> None:
        request = base_requests[next(cursor) % len(base_requests)]
        st_baseline_scan.check_world_info(
            [book], settings, request.messages, max_context_tokens=max_context, count_tokens=count
        )

    base_ms = time_per_scan(theirs_once, len(base_requests), 1 if len(book.entries) > 1000 else 3)
    result = engine.activate(requests[-1])
    print(f"({label}) {len(book.entries)} entries, {len(chat)} messages")
    print(f"  compile: {compile_ms:.1f} ms ({len(engine.matcher.slots)} key slots, "
          f"{len(engine.matcher.regexes)} regexes)")  # fmt: skip
    print(f"  activated per scan: {min(activated)}..{max(activated)}; last scan: "
          f"{len(result.activated)} active, {len(result.dropped)} dropped, "
          f"{result.recursion_steps} steps, {result.tokens_used} tokens")  # fmt: skip
    print(f"  baseline:  {base_ms:9.2f} ms per scan ({len(base_requests)} scans)")
    print(f"  storyloom: {ours_ms:9.3f} ms per scan ({len(requests)} scans x {rounds} rounds)")
    print(f"  identical: {'yes' if identical else 'no'}")
    return base_ms, ours_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"books and chat from {source_files()[0].parent}")
    positions = list(range(200, 2001, 90))
    base_a, ours_a = run_scenario("a", scenario_a(), positions, args.rounds, positions)
    run_scenario("b", scenario_b(), positions, args.rounds, positions[-3:])
    run_scenario("c", scenario_c(), [2], args.rounds, [2])
    print(f"ratio: {base_a / ours_a:.1f}")


if __name__ == "__main__":
    main()
