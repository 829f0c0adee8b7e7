"""What do a card's scripts cost a turn?

(a) EJS templates (ST-Prompt-Template). A card whose book holds 30 template entries in the
    shape Chinese MVU cards use (``阶段指导``: ``getvar`` of an MVU path with a default,
    an if/else chain over the phase, lodash ``_.get``/``_.has``/``_.clamp``, a counter
    ``incvar``), all constant, so every turn renders all 30. Measured through the real
    path: ``ChatService.snapshot``, the step of a turn's prompt build where the
    templates run (one sandboxed call for all of them) and the lore is scanned and cut
    to the budget; and the template step alone (``evaluate_turn_templates``). Against the
    same 30 entries as plain text (what the templates render, no ``<%``: no sandbox call),
    in the same run. Target: the templates under 30 ms a turn. Ends with ``ratio:``
    (snapshot with EJS / snapshot with the plain entries).
(b) The corpus MVU card (``../shared/st-samples/zh_card_ai_v3json_mvu_27entries.json``),
    when that folder is there: its prompt build (snapshot + skein) at its initial state,
    how many lore entries went in and were cut, and what 阶段指导 became.
(c) A status bar after a reply, in the browser (``status_bar_render.py``: Chromium driving
    the real page over the real server): from the reply's end to the sandboxed frame
    showing the new value, against the same message with its page off (plain text), in
    the same run. Target: under 100 ms. Ends with its own ``ratio:`` line. ``--turns 0``
    leaves it out (it needs Debian's chromium, as the browser tests do).

Prints figures, asserts nothing.

    .venv/bin/python bench/card_scripts.py [--rounds 20] [--turns 10]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from storyloom.chat.prompt.skein_builder import build_skein
from storyloom.chat.service.conversations import ChatService
from storyloom.chat.service.mnemosyne import turn_lore_scope
from storyloom.chat.service.turn_templates import evaluate_turn_templates
from storyloom.core.settings import ChatEndpoint, Settings
from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.project.knowledge_import import import_knowledge_file
from storyloom.project.project_knowledge import add_local_knowledge_base
from storyloom.sandbox.script_host import close_script_workers
from storyloom.server.state import ServerState
from storyloom.testing.replay_server import ReplayLLMServer

if TYPE_CHECKING:
    from bench.status_bar_render import measure as measure_status_bar
else:  # run as a script: the browser half lies beside this file
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from status_bar_render import measure as measure_status_bar

ENTRIES = 30
TARGET_MS = 30.0
CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "st-samples"
CORPUS_CARD = CORPUS / "zh_card_ai_v3json_mvu_27entries.json"
PHASES = ("磨合期", "损友成型", "裂痕觉醒", "情感纠葛")


def template(n: int) -> str:
    """A template entry like 阶段指导: the phase from stat_data, one block per phase."""
    blocks = "".join(
        f"<%_ {'if' if i == 0 else '} else if'} (phase === '{name}') {{ _%>\n"
        f"{name}（{n}）：第 {i + 1} 阶段。好感 <%= favor %>。"
        "<%= _.has(stat, '小穗') ? '小穗在场' : '小穗未到' %>\n"
        for i, name in enumerate(PHASES)
    )
    return (
        f"<%_ const stat = getvar('stat_data', {{ defaults: {{}} }}); _%>\n"
        f"<%_ const phase = getvar('stat_data.系统.当前阶段', {{ defaults: '磨合期' }}); _%>\n"
        f"<%_ const favor = _.clamp(_.get(stat, '沈念.好感度', 0), 0, 100); _%>\n"
        f"<%_ incvar('visits.e{n}') _%>\n{blocks}<%_ }} _%>\n"
    )


def plain(n: int) -> str:
    """What :func:`template` renders at the bench's state: the same entry, EJS off."""
    return f"磨合期（{n}）：第 1 阶段。好感 35。小穗在场\n"


def book(kb_id: str, text: Callable[[int], str], initial: bool = False) -> KnowledgeBase:
    entries = [
        CAIU.model_validate(
            {
                "id": f"e{n}",
                "displayName": f"阶段指导 {n}",
                "content": {"value": text(n)},
                "activation_criteria": {"constant": True},
            }
        )
        for n in range(ENTRIES)
    ]
    if initial:
        # The card's starting state, as MVU cards ship it.
        start = {"value": json.dumps(STATE, ensure_ascii=False)}
        entries.append(
            CAIU.model_validate(
                {"id": "init", "displayName": "[InitialVariables] 初始", "content": start}
            )
        )
    return KnowledgeBase(kb_id=kb_id, kb_displayName=kb_id, entries=entries)


STATE = {
    "stat_data": {"系统": {"当前阶段": "磨合期"}, "沈念": {"好感度": 35}, "小穗": {"觉醒进度": 0}}
}


async def timed(work: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await work()
    return (time.perf_counter() - started) * 1000


def summary(label: str, values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]
    return f"    {label:<36} p50 {statistics.median(values):7.1f} ms   p95 {p95:7.1f} ms"


def open_state(home: Path, llm: ReplayLLMServer) -> ServerState:
    endpoint = ChatEndpoint(base_url=llm.url, model="bench", max_retries=0)
    state = ServerState.open(home, environ={})
    state.loaded = dataclasses.replace(
        state.loaded, effective=Settings(user_llm=endpoint, agent_llm=endpoint)
    )
    return state


def new_character(state: ServerState, character_id: str, kb_id: str) -> None:
    characters = state.project_dir / "presets" / "characters"
    characters.mkdir(parents=True, exist_ok=True)
    card = {"name": "沈念", "description": "玄天宗弟子。", "first_mes": "你好。"}
    card["knowledge_bases"] = [kb_id]  # type: ignore[assignment]
    (characters / f"{character_id}.json").write_text(json.dumps(card), encoding="utf-8")


async def templates_per_turn(rounds: int) -> None:
    print(f"(a) EJS templates: a card with {ENTRIES} template entries, every turn")
    with tempfile.TemporaryDirectory() as tmp, ReplayLLMServer(models=["bench"]) as llm:
        state = open_state(Path(tmp) / "home", llm)
        add_local_knowledge_base(state.project_dir, book("ejs", template, True), name="ejs")
        add_local_knowledge_base(state.project_dir, book("plain", plain), name="plain")
        new_character(state, "ejs", "ejs")
        new_character(state, "plain", "plain")
        service: ChatService = state.chat
        chats = {name: service.create_conversation(character_id=name) for name in ("ejs", "plain")}
        knowledge = state.knowledge
        assert knowledge is not None
        ejs = chats["ejs"]
        scope = turn_lore_scope(knowledge, ejs, ejs.character)
        names = {"user": "User", "char": "沈念"}

        async def snapshot(name: str) -> None:
            conversation = chats[name]
            snap = await service.snapshot(conversation, conversation.pointer)
            if name == "ejs" and len(snap.lore) != ENTRIES:
                raise RuntimeError(f"{len(snap.lore)} of {ENTRIES} entries went in")

        async def templates_alone() -> None:
            out = await evaluate_turn_templates(scope.kbs(), ejs.character, STATE, {}, names)
            if out.problems or len(out.lore_texts) != ENTRIES:
                raise RuntimeError(f"templates failed: {out.problems[:1]}")

        with_ejs: list[float] = []
        without: list[float] = []
        alone: list[float] = []
        for n in range(rounds + 1):
            # Interleaved, so both see the same machine; the first round warms the
            # worker pool and compiles the lore engines.
            times = (
                await timed(lambda: snapshot("ejs")),
                await timed(lambda: snapshot("plain")),
                await timed(templates_alone),
            )
            if n:
                with_ejs.append(times[0])
                without.append(times[1])
                alone.append(times[2])
        print("    measured: ChatService.snapshot (the prompt build's step that runs the")
        print("    templates and scans the lore), and the template step alone")
        print(summary(f"snapshot, {ENTRIES} EJS entries", with_ejs))
        print(summary(f"snapshot, the same {ENTRIES} as plain text", without))
        print(summary(f"templates alone ({ENTRIES}, one call)", alone))
        added = statistics.median(with_ejs) - statistics.median(without)
        print(f"    EJS adds {added:.1f} ms a turn (target < {TARGET_MS:.0f} ms)")
        print(f"ratio: {statistics.median(with_ejs) / statistics.median(without):.2f}")
        await state.chat.aclose()
        state.database.close()


async def corpus_card() -> None:
    if not CORPUS_CARD.is_file():
        print(f"(b) the corpus card: skipped ({CORPUS_CARD} is not there)")
        return
    print(f"(b) the corpus card {CORPUS_CARD.name}: its prompt build at its initial state")
    with tempfile.TemporaryDirectory() as tmp, ReplayLLMServer(models=["bench"]) as llm:
        state = open_state(Path(tmp) / "home", llm)
        summary_ = import_knowledge_file(
            CORPUS_CARD, project_dir=state.project_dir, global_folder=Path(tmp) / "global"
        )
        assert summary_.character_file is not None
        service = state.chat
        conversation = service.create_conversation(character_id=Path(summary_.character_file).stem)
        times: list[float] = []
        snap = None
        for _ in range(6):
            started = time.perf_counter()
            snap = await service.snapshot(conversation, conversation.pointer)
            build_skein(snap)
            times.append((time.perf_counter() - started) * 1000)
        assert snap is not None
        print(summary("snapshot + skein", times[1:]))
        print(f"    lore in the prompt: {len(snap.lore)}, cut: {len(snap.lore_dropped)}")
        guide = next((h for h in snap.lore if h.title == "阶段指导"), None)
        if guide is None:
            print("    阶段指导: not in the prompt")
        else:
            first = guide.content.strip().splitlines()[0] if guide.content.strip() else ""
            print(f"    阶段指导: {guide.tokens} tokens, opens with {first!r}")
        for problem in snap.template_problems:
            print(f"    template problem: {problem.name} line {problem.line}: {problem.message}")
        await state.chat.aclose()
        state.database.close()


async def templates(rounds: int) -> None:
    try:
        await templates_per_turn(rounds)
        await corpus_card()
    finally:
        close_script_workers()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--turns", type=int, default=10, help="status-bar turns (0: skip)")
    args = parser.parse_args()
    asyncio.run(templates(args.rounds))
    if args.turns:
        # sync Playwright: outside the event loop the template part ran in
        measure_status_bar(args.turns)


if __name__ == "__main__":
    main()
