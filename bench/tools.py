"""Tool calling: the TAM parser on a corpus, the ToolManager's cost per call, and MCP.

(a) TAM: ``bench/tool_outputs.py`` builds a seeded corpus (360 outputs by default: single,
    chained and several calls; the same calls code-fenced, in inline code, quoted and in
    quotation marks; truncated and malformed blocks; roleplay that mentions tools without
    calling them). Parse success = outputs whose executed calls (tool, arguments, order)
    are exactly the expected ones (target ≥ 99%); false-positive executions = calls
    executed that were not expected (target 0). Also µs per output for ``parse_tam`` and
    for the streaming filter fed 4-character chunks, and whether the filter showed
    exactly ``parse_tam``'s text.
(b) Dispatch: a trivial async service tool called through the ToolManager (lookup, schema
    check, policy, dispatch, an audit row in a temporary SQLite database) against awaiting
    the same function directly; overhead per call (target ≤ 2 ms). A plain (sync)
    function, which the ToolManager runs in a worker thread, is shown too.
(c) MCP: per-call latency of the SDK's own client (``mcp`` 2.x ``Client``) calling that
    tool on storyloom's MCP server (through the ToolManager), in memory and over loopback
    Streamable HTTP (uvicorn in a thread), against the same client calling a bare SDK
    low-level server whose tool returns at once (targets: ≤ 1 ms and ≤ 3 ms).

Prints figures, asserts nothing. ``ratio:`` is (b)'s ToolManager time / direct call time.

    .venv/bin/python bench/tools.py [--calls 2000] [--mcp-calls 300] [--size 360]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.client.client import Client
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.routing import Route

if TYPE_CHECKING:
    from bench.tool_outputs import CorpusOutput, build_corpus
else:  # run as a script: the corpus builder lies beside this file
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from tool_outputs import CorpusOutput, build_corpus

from storyloom.core.settings import Settings
from storyloom.plugins import node_registry
from storyloom.project.knowledge_service import KnowledgeService
from storyloom.project.project_file import init_project
from storyloom.store.database import Database
from storyloom.testing.loopback import serve_in_thread
from storyloom.tools.audit_log import AuditLog
from storyloom.tools.mcp_server import build_mcp_server, mcp_http_app
from storyloom.tools.tam import parse_tam
from storyloom.tools.tam_stream import TamStreamFilter
from storyloom.tools.tool_definition import ServiceTool
from storyloom.tools.tool_manager import ToolCallContext, ToolCaller, ToolManager
from storyloom.tools.tool_names import to_mcp_name
from storyloom.tools.tool_policy import ToolPolicy
from storyloom.tools.tool_registry import ToolRegistry
from storyloom.workflow.node_type import WorkflowServices
from storyloom.workflow.runner import WorkflowRunner

TOOL_ID = "bench:echo"
SYNC_TOOL_ID = "bench:echo_sync"
PARAMETERS = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "text": {"type": "string"}},
    "required": ["n"],
}
ARGUMENTS: dict[str, Any] = {"n": 7, "text": "龙"}


# --- (a) TAM ---------------------------------------------------------------------------


def bench_tam(size: int, seed: int) -> None:
    corpus = build_corpus(size, seed)
    matched = 0
    false_positives = 0
    by_kind: Counter[str] = Counter()
    failed_kinds: Counter[str] = Counter()
    stream_agrees = 0
    for item in corpus:
        parsed = parse_tam(item.output)
        got = [(call.tool, call.arguments) for call in parsed.calls]
        by_kind[item.kind] += 1
        if got == item.expected:
            matched += 1
        else:
            failed_kinds[item.kind] += 1
        unmatched = list(item.expected)
        for call in got:
            if call in unmatched:
                unmatched.remove(call)
            else:
                false_positives += 1
        shown = TamStreamFilter()
        text = "".join(shown.feed(item.output[i : i + 4]) for i in range(0, len(item.output), 4))
        if text + shown.finish() == parsed.text:
            stream_agrees += 1
    expected_calls = sum(len(item.expected) for item in corpus)
    parse_us = _per_item_us(corpus, lambda output: parse_tam(output))
    stream_us = _per_item_us(corpus, _stream_all)
    print(f"(a) TAM corpus: {len(corpus)} outputs (seed {seed}), {expected_calls} expected calls")
    print("    kinds: " + ", ".join(f"{kind} {n}" for kind, n in by_kind.items()))
    print(
        f"    parse success: {matched}/{len(corpus)} = {matched / len(corpus):.2%} (target ≥ 99%)"
    )
    if failed_kinds:
        print("    failed by kind: " + ", ".join(f"{k} {n}" for k, n in failed_kinds.items()))
    print(f"    false-positive executions: {false_positives} (target 0)")
    print(
        f"    stream filter (4-char chunks) shows parse_tam's text: {stream_agrees}/{len(corpus)}"
    )
    chars = sum(len(item.output) for item in corpus) / len(corpus)
    print(f"    parse_tam: {parse_us:.1f} µs per output ({chars:.0f} characters on average)")
    print(f"    stream filter, 4-character chunks: {stream_us:.1f} µs per output")


def _stream_all(output: str) -> str:
    shown = TamStreamFilter()
    text = "".join(shown.feed(output[i : i + 4]) for i in range(0, len(output), 4))
    return text + shown.finish()


def _per_item_us(
    corpus: list[CorpusOutput], run: Callable[[str], object], rounds: int = 5
) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        for item in corpus:
            run(item.output)
        times.append((time.perf_counter() - started) / len(corpus) * 1e6)
    return statistics.median(times)


# --- a ToolManager over a temporary project ------------------------------------------


async def echo(arguments: dict[str, Any], _context: Any) -> dict[str, Any]:
    return {"n": arguments["n"]}


def echo_sync(arguments: dict[str, Any], _context: Any) -> dict[str, Any]:
    return {"n": arguments["n"]}


def _tool(tool_id: str, function: Callable[..., Any]) -> ServiceTool:
    return ServiceTool.of(tool_id, function, description="Returns its n", parameters=PARAMETERS)


@dataclass
class BenchHost:
    """What the ToolManager and the MCP server need of a ToolHost."""

    home: Path
    project_dir: Path
    database: Database
    knowledge: KnowledgeService
    manager: ToolManager

    def policy(self) -> ToolPolicy:
        return ToolPolicy(default="allow")


def make_host(folder: Path) -> BenchHost:
    home = folder / "home"
    home.mkdir(parents=True)
    project = folder / "project"
    init_project(project)
    settings = Settings()
    database = Database(folder / "db" / "storyloom.sqlite3")
    knowledge = KnowledgeService(home, project, settings=lambda: settings, database=database)
    services = WorkflowServices(
        settings=lambda: settings, project_dir=project, database=database, knowledge=knowledge
    )
    nodes = node_registry(entry_points=False)
    tools = [_tool(TOOL_ID, echo), _tool(SYNC_TOOL_ID, echo_sync)]
    registry = ToolRegistry(node_registry=nodes, builtin=lambda: list(tools))
    manager = ToolManager(
        registry,
        AuditLog(database),
        WorkflowRunner(nodes, services),
        policy=lambda: ToolPolicy(default="allow"),
        knowledge=knowledge,
    )
    return BenchHost(home, project, database, knowledge, manager)


def _context() -> ToolCallContext:
    return ToolCallContext(
        caller=ToolCaller(kind="agent", name="bench"), policy=ToolPolicy(default="allow")
    )


async def _time_calls(
    calls: int, *runs: Callable[[], Awaitable[object]], batches: int = 5
) -> list[float]:
    """Median µs per call of each of ``runs``, their batches interleaved so that load on
    the machine falls on all of them alike (after a warm-up batch each)."""
    batch = max(1, calls // batches)
    for call in runs:
        for _ in range(min(batch, 50)):
            await call()
    times: list[list[float]] = [[] for _ in runs]
    for _ in range(batches):
        for index, call in enumerate(runs):
            started = time.perf_counter()
            for _ in range(batch):
                await call()
            times[index].append((time.perf_counter() - started) / batch * 1e6)
    return [statistics.median(values) for values in times]


# --- (b) dispatch ----------------------------------------------------------------------


async def bench_dispatch(host: BenchHost, calls: int) -> float:
    context = _context()
    manager = host.manager
    first = await manager.call(TOOL_ID, ARGUMENTS, context)
    if not first.ok or first.result != {"n": 7}:
        raise RuntimeError(f"the bench tool failed through the ToolManager: {first.error}")

    direct_us, managed_us, direct_sync_us, managed_sync_us = await _time_calls(
        calls,
        lambda: echo(ARGUMENTS, context),
        lambda: manager.call(TOOL_ID, ARGUMENTS, context),
        lambda: _async_of(echo_sync, ARGUMENTS, context),
        lambda: manager.call(SYNC_TOOL_ID, ARGUMENTS, context),
    )
    _entries, audited = manager.audit.list(limit=1, offset=0)
    print("(b) ToolManager dispatch, trivial service tool, µs per call (median of 5 batches)")
    print(f"    {'':<34}{'direct':>10}{'manager':>10}{'overhead':>11}")
    for name, direct, managed in (
        ("async function", direct_us, managed_us),
        ("plain function (worker thread)", direct_sync_us, managed_sync_us),
    ):
        print(f"    {name:<34}{direct:>10.2f}{managed:>10.1f}{managed - direct:>11.1f}")
    print(
        f"    overhead per call: {(managed_us - direct_us) / 1000:.3f} ms (target ≤ 2 ms); "
        f"{audited} audit rows written"
    )
    return managed_us / direct_us


async def _async_of(function: Callable[..., Any], *args: Any) -> Any:
    return function(*args)


# --- (c) MCP ---------------------------------------------------------------------------


def bare_server() -> Server[Any]:
    """The least an SDK server can do: one tool that answers at once."""
    tool = types.Tool(name="echo", description="Returns its n", input_schema=PARAMETERS)

    async def list_tools(
        _ctx: Any, _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool])

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        n = (params.arguments or {}).get("n")
        return types.CallToolResult(
            content=[types.TextContent(text=f'{{"n": {n}}}')], structured_content={"n": n}
        )

    return Server("bare", on_list_tools=list_tools, on_call_tool=call_tool)


@contextlib.contextmanager
def _serve(
    endpoint: Any, lifespan: Callable[[], contextlib.AbstractAsyncContextManager[None]]
) -> Iterator[str]:
    """``endpoint`` at /mcp on a free loopback port (uvicorn in a thread); yields its URL."""

    @contextlib.asynccontextmanager
    async def app_lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with lifespan():
            yield

    app = Starlette(routes=[Route("/mcp", endpoint=endpoint)], lifespan=app_lifespan)
    with serve_in_thread(app) as base_url:
        yield f"{base_url}/mcp"


def _bare_http() -> contextlib.AbstractContextManager[str]:
    manager = StreamableHTTPSessionManager(app=bare_server())

    @contextlib.asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        async with manager.run():
            yield

    return _serve(StreamableHTTPASGIApp(manager), lifespan)


def _caller(client: Client, name: str) -> Callable[[], Awaitable[None]]:
    async def call() -> None:
        result = await client.call_tool(name, ARGUMENTS)
        if result.is_error:
            raise RuntimeError(f"MCP call failed: {result.content}")

    return call


async def bench_mcp(host: BenchHost, calls: int) -> None:
    name = to_mcp_name(TOOL_ID)
    served: Any = host  # the parts of a ToolHost the MCP server uses
    results: dict[str, list[float]] = {}
    async with (
        Client(bare_server(), mode="legacy") as bare,
        Client(build_mcp_server(served), mode="legacy") as ours,
    ):
        results["in memory"] = await _time_calls(calls, _caller(bare, "echo"), _caller(ours, name))
    storyloom_http = mcp_http_app(served)
    with (
        _bare_http() as bare_url,
        _serve(storyloom_http.app, storyloom_http.lifespan) as our_url,
    ):
        async with (
            Client(bare_url, mode="legacy") as bare,
            Client(our_url, mode="legacy") as ours,
        ):
            results["loopback HTTP"] = await _time_calls(
                calls, _caller(bare, "echo"), _caller(ours, name)
            )
    print("(c) MCP, the SDK's Client calling one trivial tool, ms per call (median of 5 batches)")
    print(f"    {'':<16}{'bare SDK':>10}{'storyloom':>11}{'difference':>12}{'target':>9}")
    for transport, target in (("in memory", "≤ 1"), ("loopback HTTP", "≤ 3")):
        bare_ms, ours_ms = (us / 1000 for us in results[transport])
        difference = ours_ms - bare_ms
        print(f"    {transport:<16}{bare_ms:>10.3f}{ours_ms:>11.3f}{difference:>12.3f}{target:>9}")


async def run(args: argparse.Namespace) -> float:
    with tempfile.TemporaryDirectory(prefix="storyloom-bench-tools-") as folder:
        host = make_host(Path(folder))
        try:
            ratio = await bench_dispatch(host, args.calls)
            if not args.skip_mcp:
                await bench_mcp(host, args.mcp_calls)
        finally:
            host.database.close()
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size", type=int, default=360, help="outputs in the TAM corpus")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--calls", type=int, default=2000, help="ToolManager calls per run")
    parser.add_argument("--mcp-calls", type=int, default=300, help="MCP calls per run")
    parser.add_argument("--skip-mcp", action="store_true")
    args = parser.parse_args()
    bench_tam(args.size, args.seed)
    ratio = asyncio.run(run(args))
    print(f"ratio: {ratio:.1f}")


if __name__ == "__main__":
    main()
