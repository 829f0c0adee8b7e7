"""What does the sandbox cost?

(a) start: ``run_sandboxed`` of a trivial Python program (``python_argv("-c", "pass")``,
    a fresh bubblewrap sandbox with its namespaces, mounts and limits each time) against
    a bare asyncio subprocess of the same interpreter with the same flags, interleaved so
    both see the same machine load. Prints p50/p95 of both and the p95 against the 50 ms
    target.

More sections go in ``SECTIONS`` below: each is an async function taking the parsed
arguments and returning a dict of figures it has printed (the CodeInterpreter round
trip and the Lua/JS script shuttle cost are the ones to add next). ``ratio:`` stays
(a)'s p50 sandboxed / p50 bare.

Prints figures, asserts nothing.

    .venv/bin/python bench/sandbox.py [--runs 50]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from storyloom.sandbox import (
    PYTHON_INSIDE,
    SandboxRequest,
    python_argv,
    require_sandbox,
    run_sandboxed,
    sandbox_status,
)

START_TARGET_P95_MS = 50.0

Section = Callable[[argparse.Namespace], Awaitable[dict[str, float]]]


def percentile(values: list[float], share: float) -> float:
    """The ``share`` (0..1) percentile of ``values``, nearest rank."""
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))
    return ordered[index]


def summary(label: str, values: list[float]) -> str:
    return (
        f"  {label:<22} p50 {statistics.median(values):7.1f} ms   "
        f"p95 {percentile(values, 0.95):7.1f} ms   min {min(values):7.1f} ms"
    )


async def timed(work: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await work()
    return (time.perf_counter() - started) * 1000


async def bare_python() -> None:
    """The same interpreter, the same flags, no sandbox: the floor a sandbox adds to."""
    process = await asyncio.create_subprocess_exec(
        PYTHON_INSIDE,
        "-I",
        "-S",
        "-c",
        "pass",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    await process.communicate()


async def sandboxed_python() -> None:
    result = await run_sandboxed(SandboxRequest(python_argv("-c", "pass"), name="bench"))
    if result.exit_code != 0:
        raise RuntimeError(f"the sandboxed program failed: {result.describe()} {result.stderr}")


async def bench_start(args: argparse.Namespace) -> dict[str, float]:
    """(a) sandbox start against a bare interpreter start."""
    print(f"(a) start: python -I -S -c pass, {args.runs} runs each, interleaved")
    for _ in range(3):  # warm the page cache and the status probe
        await bare_python()
        await sandboxed_python()
    bare: list[float] = []
    sandboxed: list[float] = []
    for _ in range(args.runs):
        bare.append(await timed(bare_python))
        sandboxed.append(await timed(sandboxed_python))
    print(summary("bare subprocess", bare))
    print(summary("sandboxed", sandboxed))
    p95 = percentile(sandboxed, 0.95)
    verdict = "within" if p95 <= START_TARGET_P95_MS else "OVER"
    print(f"  sandboxed p95 {p95:.1f} ms: {verdict} the {START_TARGET_P95_MS:.0f} ms target")
    overhead = statistics.median(sandboxed) - statistics.median(bare)
    print(f"  the sandbox adds {overhead:.1f} ms at p50")
    return {
        "ratio": statistics.median(sandboxed) / statistics.median(bare),
        "start_p50_ms": statistics.median(sandboxed),
        "start_p95_ms": p95,
    }


# -- CodeInterpreter round trip (added by the code-interpreter helper) ---------------------


async def bench_code_interpreter(args: argparse.Namespace) -> dict[str, float]:
    """CodeInterpreter round trip for ``print(6*7)``: ``execute_code`` alone, and the tool
    ``CodeInterpreter:execute`` through the ToolManager (schema, policy, an audit row in
    a temporary data directory), interleaved."""
    import tempfile
    from pathlib import Path

    from storyloom.plugins import node_registry
    from storyloom.project.project_file import init_project
    from storyloom.sandbox.code_interpreter import execute_code
    from storyloom.tools.tool_host import open_tool_host
    from storyloom.tools.tool_manager import ToolCallContext, ToolCaller
    from storyloom.tools.tool_policy import ToolPolicy

    print(f"(b) CodeInterpreter round trip: print(6*7), {args.runs} calls each, interleaved")
    arguments = {"language": "python", "code": "print(6*7)"}
    with tempfile.TemporaryDirectory() as folder:
        home, project = Path(folder) / "home", Path(folder) / "project"
        home.mkdir()
        init_project(project)
        host = open_tool_host(home, project, node_registry=node_registry(entry_points=False))
        context = ToolCallContext(caller=ToolCaller("cli", "bench"), policy=ToolPolicy())

        async def direct() -> None:
            result = await execute_code("python", "print(6*7)")
            if result.stdout != "42\n":
                raise RuntimeError(f"unexpected result: {result}")

        async def through_manager() -> None:
            done = await host.manager.call("CodeInterpreter:execute", arguments, context)
            if not done.ok or done.result["stdout"] != "42\n":
                raise RuntimeError(f"the tool call failed: {done.error}")

        try:
            for _ in range(3):  # warm the page cache
                await direct()
                await through_manager()
            alone: list[float] = []
            managed: list[float] = []
            for _ in range(args.runs):
                alone.append(await timed(direct))
                managed.append(await timed(through_manager))
        finally:
            await host.aclose()
            if host.knowledge is not None:
                await host.knowledge.aclose()
            host.database.close()
    print(summary("execute_code", alone))
    print(summary("via the ToolManager", managed))
    return {
        "interpreter_p50_ms": statistics.median(alone),
        "interpreter_p95_ms": percentile(alone, 0.95),
        "tool_p50_ms": statistics.median(managed),
        "tool_p95_ms": percentile(managed, 0.95),
    }


# -- chat:Script shuttle per turn (added by the shuttle helper) -----------------------------

SHUTTLE_TARGET_P95_MS = 5.0
SHUTTLE_LUA = """
local kept = {}
for _, b in ipairs(ctx.blocks) do
  if not (b.kind == "lore" and b.priority < 20) then table.insert(kept, b) end
end
ctx.blocks = kept
table.insert(ctx.blocks, 2, {id = "mood", content = "Mood: " .. (ctx.variables.mood or "calm")})
ctx.variables.turns = (ctx.variables.turns or 0) + 1
"""
SHUTTLE_JS = """
ctx.blocks = ctx.blocks.filter(b => !(b.kind === "lore" && b.priority < 20));
ctx.blocks.splice(1, 0, {id: "mood", content: "Mood: " + (ctx.variables.mood || "calm")});
ctx.variables.turns = (ctx.variables.turns || 0) + 1;
"""


def _shuttle_turn() -> dict[str, Any]:
    """The Script node's inputs on a realistic turn: the default Skein of a chat with 40
    messages, 12 lore entries and a long card (about 60 blocks), and its snapshot."""
    from storyloom.chat.prompt.skein import BlockKind, BlockSource, SkeinBlock
    from storyloom.chat.prompt.skein_builder import build_skein
    from storyloom.chat.store.conversation import CharacterSnapshot, ConversationSettings
    from storyloom.chat.store.snapshot import ContextSnapshot, HistoryMessage
    from storyloom.chat.store.state import ChatState

    history = [
        HistoryMessage(
            id=f"m{i}",
            role="user" if i % 2 else "assistant",
            content=f"Message {i}: " + "the road winds on through the hills. " * 8,
        )
        for i in range(40)
    ]
    snapshot = ContextSnapshot(
        conversation_id="bench",
        pointer="m39",
        history=history,
        state=ChatState(variables={"mood": "calm", "gold": 12, "hp": 30}),
        character=CharacterSnapshot(
            card={"name": "Mara", "description": "Mara runs the inn. " * 20, "scenario": "An inn."}
        ),
        settings=ConversationSettings(user_name="Finn", persona="A traveller."),
    )
    skein = build_skein(snapshot)
    for i in range(12):
        skein.blocks.insert(
            3,
            SkeinBlock(
                id=f"lore:{i}",
                kind=BlockKind.LORE,
                content=f"Lore entry {i}: " + "an old legend of the valley. " * 6,
                priority=i * 5,
                source=BlockSource(kind="lore", id=f"kb/{i}", label=f"Lore {i}"),
            ),
        )
    return {"skein": skein.as_json(), "snapshot": snapshot.model_dump(mode="json")}


class _ShuttleContext:
    """The part of a NodeContext the Script node reads."""

    node_id = "script"

    def __init__(self, interface_inputs: dict[str, Any]) -> None:
        from storyloom.workflow.node_type import WorkflowServices

        self.services = WorkflowServices()
        self.interface_inputs = interface_inputs


async def bench_script_shuttle(args: argparse.Namespace) -> dict[str, float]:
    """Per-turn cost of the chat:Script node (``Script.run``: the ctx built, the script
    run in the warm worker, the result checked and applied) on a ~60-block Skein, for a
    Lua and a JavaScript script that drop low-priority lore, add a block and set a
    variable, against the same node with no code (it passes the Skein through);
    interleaved. Target: p95 ≤ 5 ms per script."""
    from storyloom.chat.prompt.shuttle_nodes import Script

    inputs = _shuttle_turn()
    runs = args.runs * 4
    blocks = len(inputs["skein"]["blocks"])
    print(f"(c) chat:Script shuttle on a {blocks}-block Skein, {runs} turns each, interleaved")
    node = Script()
    ctx = _ShuttleContext(inputs)
    configs = {
        "pass-through (no code)": Script.parse_config({}),
        "Lua script": Script.parse_config({"language": "lua", "code": SHUTTLE_LUA}),
        "JavaScript script": Script.parse_config({"language": "javascript", "code": SHUTTLE_JS}),
    }

    def turn(label: str) -> Callable[[], Awaitable[Any]]:
        config = configs[label]
        return lambda: node.run(ctx, dict(inputs), config)  # type: ignore[arg-type]

    for _ in range(5):  # warm the worker pool
        for label in configs:
            await turn(label)()
    times: dict[str, list[float]] = {label: [] for label in configs}
    for _ in range(runs):
        for label in configs:
            times[label].append(await timed(turn(label)))
    for label, values in times.items():
        print(
            f"  {label:<22} p50 {statistics.median(values):7.3f} ms   "
            f"p95 {percentile(values, 0.95):7.3f} ms   min {min(values):7.3f} ms"
        )
    for label in ("Lua script", "JavaScript script"):
        p95 = percentile(times[label], 0.95)
        verdict = "within" if p95 <= SHUTTLE_TARGET_P95_MS else "OVER"
        print(f"  {label} p95 {p95:.2f} ms: {verdict} the {SHUTTLE_TARGET_P95_MS:.0f} ms target")
    base = statistics.median(times["pass-through (no code)"])
    lua = statistics.median(times["Lua script"])
    js = statistics.median(times["JavaScript script"])
    print(
        f"  ratio: Lua/pass-through = {lua / base:.0f}, JavaScript/pass-through = {js / base:.0f}"
    )
    return {
        "lua_p50_ms": lua,
        "lua_p95_ms": percentile(times["Lua script"], 0.95),
        "js_p50_ms": js,
        "js_p95_ms": percentile(times["JavaScript script"], 0.95),
        "pass_through_p50_ms": base,
    }


# -- CodeInterpreter per language (issue 29: nodejs) --------------------------------------

LANGUAGE_CODE = {
    "python": "sum(i * i for i in range(1000))",
    "javascript": "let t = 0; for (let i = 0; i < 1000; i++) t += i * i; t",
    "nodejs": "let t = 0; for (let i = 0; i < 1000; i++) t += i * i; t",
}


async def bench_languages(args: argparse.Namespace) -> dict[str, float]:
    """The same small computation in each CodeInterpreter language, ``execute_code``
    interleaved: what choosing ``nodejs`` (the machine's node in the sandbox) costs over
    ``javascript`` (quickjs-ng inside the sandbox's Python)."""
    from storyloom.sandbox.code_interpreter import LANGUAGES, CodeLanguage, execute_code

    print(f"(d) CodeInterpreter per language: sum of squares to 1000, {args.runs} calls each")
    expected = '"332833500"'  # the completion value, as the report gives it

    def call(language: CodeLanguage) -> Callable[[], Awaitable[None]]:
        async def one() -> None:
            result = await execute_code(language, LANGUAGE_CODE[language])
            if result.error is not None or result.value not in (expected, "332833500"):
                raise RuntimeError(f"{language}: unexpected result {result}")

        return one

    times: dict[str, list[float]] = {language: [] for language in LANGUAGES}
    for language in LANGUAGES:  # warm the page cache
        await call(language)()
    for _ in range(args.runs):
        for language in LANGUAGES:
            times[language].append(await timed(call(language)))
    for language in LANGUAGES:
        print(summary(language, times[language]))
    node, quickjs = statistics.median(times["nodejs"]), statistics.median(times["javascript"])
    print(f"  ratio: nodejs/javascript = {node / quickjs:.2f}")
    return {f"{language}_p50_ms": statistics.median(times[language]) for language in LANGUAGES}


# Extension point: append (name, section) pairs; each runs in order after (a).
SECTIONS: list[tuple[str, Section]] = [
    ("start", bench_start),
    ("code_interpreter", bench_code_interpreter),
    ("script_shuttle", bench_script_shuttle),
    ("languages", bench_languages),
]


async def run(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    require_sandbox()
    status = sandbox_status()
    print(f"sandbox: bwrap {status.bwrap}, process limit by {status.process_limit}")
    figures: dict[str, dict[str, float]] = {}
    for name, section in SECTIONS:
        if args.only and name not in args.only:
            continue
        figures[name] = await section(args)
        print()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=50, help="runs of each kind (default 50)")
    parser.add_argument(
        "--only", nargs="*", default=[], help="run only these sections (default: all)"
    )
    args = parser.parse_args()
    figures = asyncio.run(run(args))
    if "start" in figures:
        print(f"ratio: sandboxed/bare = {figures['start']['ratio']:.2f}")


if __name__ == "__main__":
    main()
