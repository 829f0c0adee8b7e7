"""run_script: what a Lua or JavaScript script sees, what comes back, and how it fails.

Everything is real: the worker process, lupa's Lua 5.4 and quickjs-ng. No test asserts
on time; a test about a limit asserts which limit stopped the script.
"""

from __future__ import annotations

import asyncio
import copy
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from storyloom.core.errors import InvalidInput
from storyloom.sandbox import SandboxStatus
from storyloom.sandbox.script_host import (
    WARM_WORKERS,
    WORKER_INSIDE,
    WORKER_MEMORY_MB,
    ScriptFailure,
    ScriptLimits,
    close_script_workers,
    engine_files,
    idle_worker_pids,
    run_script,
    worker_isolation,
)
from tests.sandbox.sandbox_support import alive, worker_tree

BLOCKS: dict[str, Any] = {
    "blocks": [
        {"id": "card", "role": "system", "content": "Alice is a knight.", "depth": None},
        {"id": "chat-1", "role": "user", "content": "Hello!", "depth": None},
    ],
    "variables": {"mood": "calm", "turns": 3},
    "macros": {"char": "Alice", "user": "Bob"},
}


async def test_a_lua_script_changes_ctx_in_place() -> None:
    code = """
ctx.variables.turns = ctx.variables.turns + 1
ctx.variables.mood = "angry"
table.insert(ctx.blocks, {id = "note", role = "system", content = "Mood: " .. ctx.variables.mood})
ctx.blocks[1].content = ctx.blocks[1].content:upper()
"""
    result = await run_script("lua", code, BLOCKS, name="mood.lua")

    assert result["variables"] == {"mood": "angry", "turns": 4}
    assert [b["id"] for b in result["blocks"]] == ["card", "chat-1", "note"]
    assert result["blocks"][0]["content"] == "ALICE IS A KNIGHT."
    assert result["blocks"][2] == {"content": "Mood: angry", "id": "note", "role": "system"}
    assert result["macros"] == BLOCKS["macros"]


async def test_a_javascript_script_changes_ctx_in_place() -> None:
    code = """
ctx.variables.turns += 1;
ctx.blocks.push({id: "note", role: "system", content: `Mood: ${ctx.variables.mood}`});
ctx.blocks = ctx.blocks.filter(b => b.id !== "chat-1");
"""
    result = await run_script("javascript", code, BLOCKS, name="mood.js")

    assert result["variables"] == {"mood": "calm", "turns": 4}
    assert [b["id"] for b in result["blocks"]] == ["card", "note"]
    assert result["blocks"][0]["depth"] is None


@pytest.mark.parametrize(
    ("language", "code"),
    [
        ("lua", "return {replaced = true, n = #ctx.blocks}"),
        ("javascript", "return {replaced: true, n: ctx.blocks.length};"),
        ("lua", "ctx = {replaced = true, n = #ctx.blocks}"),
        ("javascript", "ctx = {replaced: true, n: ctx.blocks.length};"),
    ],
)
async def test_a_returned_or_reassigned_ctx_replaces_the_data(language: Any, code: str) -> None:
    result = await run_script(language, code, BLOCKS, name="swap")

    assert result == {"replaced": True, "n": 2}


async def test_the_script_works_on_a_copy_of_the_data() -> None:
    before = copy.deepcopy(BLOCKS)

    await run_script("lua", "ctx.blocks = {}; ctx.variables.mood = nil", BLOCKS, name="a.lua")
    await run_script("javascript", "ctx.blocks.length = 0; delete ctx.macros", BLOCKS, name="a.js")

    assert before == BLOCKS


@pytest.mark.parametrize(
    ("language", "code", "expected"),
    [
        (
            "lua",
            'print("mood", ctx.variables.mood, 3, nil)\nprint("done")',
            "mood\tcalm\t3\tnil\ndone\n",
        ),
        (
            "javascript",
            'print("mood", ctx.variables.mood, 3); console.log("done")',
            "mood calm 3\ndone\n",
        ),
    ],
)
async def test_print_is_collected_as_the_output(language: Any, code: str, expected: str) -> None:
    result = await run_script(language, code, BLOCKS, name="talk")

    assert result["__output__"] == expected
    assert result["variables"] == BLOCKS["variables"]


@pytest.mark.parametrize("language", ["lua", "javascript"])
async def test_a_script_that_prints_nothing_has_no_output_key(language: Any) -> None:
    result = await run_script(language, "", {"a": 1}, name="quiet")

    assert result == {"a": 1}


@pytest.mark.parametrize(
    ("language", "code"),
    [
        ("lua", 'for i = 1, 10000 do print(string.rep("x", 99)) end'),
        ("javascript", 'for (let i = 0; i < 10000; i++) print("x".repeat(99));'),
    ],
)
async def test_printed_output_is_capped_at_16_kb(language: Any, code: str) -> None:
    result = await run_script(language, code, {}, name="chatty")

    output = result["__output__"]
    assert output.startswith("x" * 99 + "\n")
    assert output.endswith("[output truncated at 16 KB]\n")
    assert len(output) <= 16 * 1024 + 40


async def test_lua_tables_come_back_as_lists_or_objects_by_their_keys() -> None:
    data = {"kept_list": [1], "kept_object": {"a": 1}, "holes": [1, 2, 3], "nothing": None}
    code = """
ctx.kept_list = {}            -- the input had a list here: []
ctx.kept_object = {}          -- the input had an object here: {}
ctx.new_empty = {}            -- nothing was here: {}
ctx.sequence = {"a", "b"}     -- keys 1..n: a list
ctx.sparse = {[1] = "a", [3] = "c"}   -- not 1..n, nothing here before: an object
ctx.holes[2] = nil            -- a hole where the input had a list: null
ctx.mixed = {1, 2, x = 3}
"""
    result = await run_script("lua", code, data, name="shapes.lua")

    assert result == {
        "kept_list": [],
        "kept_object": {},
        "holes": [1, None, 3],
        "nothing": None,
        "mixed": {"1": 1, "2": 2, "x": 3},
        "new_empty": {},
        "sequence": ["a", "b"],
        "sparse": {"1": "a", "3": "c"},
    }


async def test_lua_numbers_and_strings_round_trip() -> None:
    data = {"int": 7, "float": 2.5, "big": 2**53 + 1, "text": "héllo ✓", "yes": True}
    result = await run_script("lua", "ctx.sum = ctx.int + ctx.float", data, name="n.lua")

    assert result == {**data, "sum": 9.5}
    assert isinstance(result["int"], int)


async def test_math_random_is_seeded_from_the_data() -> None:
    code = "ctx.rolls = {math.random(1000), math.random(1000), math.random(1000)}"

    first = await run_script("lua", code, {"seed": 42}, name="dice.lua")
    again = await run_script("lua", code, {"seed": 42}, name="dice.lua")
    other = await run_script("lua", code, {"seed": 7}, name="dice.lua")
    unseeded = await run_script("lua", code, {}, name="dice.lua")
    unseeded_again = await run_script("lua", code, {}, name="dice.lua")

    assert first["rolls"] == again["rolls"]
    assert first["rolls"] != other["rolls"]
    assert unseeded["rolls"] == unseeded_again["rolls"]


@pytest.mark.parametrize(
    ("language", "code", "line", "words"),
    [
        ("lua", "local x = 1\nx = = 2\n", 2, "unexpected symbol near '='"),
        ("javascript", "let x = 1;\nlet y = ;\n", 2, "SyntaxError"),
    ],
)
async def test_a_syntax_error_names_the_script_and_the_line(
    language: Any, code: str, line: int, words: str
) -> None:
    with pytest.raises(ScriptFailure) as caught:
        await run_script(language, code, {}, name="broken")

    failure = caught.value
    assert isinstance(failure, InvalidInput)
    assert failure.script == "broken"
    assert failure.line == line
    assert failure.limit is None
    assert words in failure.message
    assert str(failure) == f"script broken: {failure.message} (line {line})"


@pytest.mark.parametrize(
    ("language", "code", "line", "words"),
    [
        ("lua", "local a = 1\n\nlocal b = ctx.missing.field\n", 3, "attempt to index a nil value"),
        (
            "lua",
            'local function check()\n  error("mood must be set")\nend\ncheck()',
            2,
            "mood must be set",
        ),
        ("javascript", "const a = 1;\n\nctx.missing.field = 2;\n", 3, "TypeError"),
        (
            "javascript",
            'function check() {\n  throw new Error("mood must be set");\n}\ncheck();',
            2,
            "mood must be set",
        ),
    ],
)
async def test_a_runtime_error_gives_its_message_and_line(
    language: Any, code: str, line: int, words: str
) -> None:
    with pytest.raises(ScriptFailure) as caught:
        await run_script(language, code, {}, name="oops")

    assert caught.value.line == line
    assert words in caught.value.message
    assert caught.value.limit is None


@pytest.mark.parametrize(
    ("language", "code", "words"),
    [
        ("lua", "ctx.blocks[2].hook = print", "ctx.blocks[2].hook is a function, not JSON data"),
        ("lua", "ctx.co = coroutine.create(print)", "not JSON data"),
        ("lua", "ctx.bad = 0/0", "ctx.bad is nan, which JSON cannot hold"),
        ("lua", "ctx.t = {[true] = 1}", "ctx.t has a boolean key"),
        ("lua", "local t = {}; t.self = t; ctx.loop = t", "nested deeper than 100 levels"),
        ("lua", "return 42", "the script returned a number; ctx must be a table with named"),
        ("lua", "return {1, 2}", "the script returned a list; ctx must be a table with named"),
        ("lua", "ctx = 'text'", "ctx is a string; ctx must be a table with named fields"),
        (
            "javascript",
            "ctx.blocks[1].hook = () => 1;",
            "ctx.blocks[1].hook is a function, not JSON data",
        ),
        ("javascript", "ctx.when = new Date(0);", "ctx.when is a Date, not plain JSON data"),
        ("javascript", "ctx.big = 10n;", "ctx.big is a bigint, not JSON data"),
        ("javascript", "ctx.bad = 0/0;", "ctx.bad is NaN, which JSON cannot hold"),
        ("javascript", "ctx.list = [1, , 3];", "ctx.list[1] is undefined"),
        ("javascript", "ctx.self = ctx;", "nested deeper than 100 levels"),
        ("javascript", "return [1, 2];", "the script returned an array; ctx must be an object"),
        ("javascript", "ctx = 5;", "ctx is a number; ctx must be an object"),
    ],
)
async def test_a_result_that_is_not_json_names_where(language: Any, code: str, words: str) -> None:
    with pytest.raises(ScriptFailure) as caught:
        await run_script(language, code, BLOCKS, name="shape")

    assert words in caught.value.message
    assert caught.value.limit is None


async def test_javascript_leaves_out_properties_set_to_undefined() -> None:
    result = await run_script(
        "javascript", "ctx.a = undefined; ctx.b = null;", {"a": 1}, name="u.js"
    )

    assert result == {"b": None}


async def test_data_that_is_not_json_is_refused_before_it_runs() -> None:
    with pytest.raises(ScriptFailure, match="not JSON"):
        await run_script("lua", "", {"x": float("nan")}, name="nan.lua")


async def test_an_unknown_language_is_refused() -> None:
    with pytest.raises(ScriptFailure, match="unknown script language 'python'"):
        await run_script("python", "", {}, name="x.py")  # type: ignore[arg-type]


async def test_concurrent_calls_each_get_their_own_result_and_few_workers_stay() -> None:
    async def one(i: int) -> dict[str, Any]:
        language: Any = "lua" if i % 2 else "javascript"
        code = "ctx.n = ctx.n * 2" if i % 2 else "ctx.n = ctx.n * 2;"
        return await run_script(language, code, {"n": i}, name=f"s{i}")

    results = await asyncio.gather(*(one(i) for i in range(8)))

    assert [r["n"] for r in results] == [i * 2 for i in range(8)]
    assert len(idle_worker_pids()) <= WARM_WORKERS


def wait_until_dead(pid: int) -> None:
    """Wait until ``pid`` is a zombie (its parent, this process, has not reaped it yet)."""
    for _ in range(10_000):
        with open(f"/proc/{pid}/stat") as stat:
            if stat.read().rpartition(")")[2].split()[0] == "Z":
                return
        time.sleep(0.001)
    raise AssertionError(f"process {pid} did not die")


def proc_text(pid: int, name: str) -> str:
    return Path(f"/proc/{pid}/{name}").read_text()


async def test_a_worker_that_died_while_idle_is_replaced() -> None:
    await run_script("lua", "", {}, name="warm.lua")
    for pid in idle_worker_pids():
        ours = worker_tree(pid)[-1]
        os.kill(pid, signal.SIGKILL)
        # A sandboxed worker's bwrap exits once its init did (it follows the worker).
        wait_until_dead(ours)

    result = await run_script("lua", "ctx.ok = true", {}, name="after.lua")

    assert result == {"ok": True}


def environment_of(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


async def test_the_worker_has_an_empty_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    close_script_workers()
    monkeypatch.setenv("STORYLOOM_TEST_SECRET", "sk-do-not-leak")
    await run_script("javascript", "", {}, name="env.js")

    pids = idle_worker_pids()
    assert pids
    for pid in pids:
        environment = environment_of(pid)
        if worker_isolation() == "process":
            assert environment == b""
        else:
            # A sandbox's own minimal environment (bwrap adds PWD), nothing of the host's.
            names = {entry.split(b"=")[0] for entry in environment.split(b"\0") if entry}
            assert names <= {b"PATH", b"HOME", b"TMPDIR", b"LANG", b"PWD"}
            assert b"sk-do-not-leak" not in environment


# --- the worker in bubblewrap -------------------------------------------------------------


async def sandboxed_worker() -> int:
    """One fresh sandboxed worker, warm; its process id."""
    assert worker_isolation() == "bubblewrap"
    close_script_workers()
    await run_script("lua", "", {}, name="warm-up.lua")
    pids = idle_worker_pids()
    assert len(pids) == 1
    return pids[0]


async def test_with_the_sandbox_the_worker_runs_in_its_own_namespaces(
    sandbox_ready: SandboxStatus,
) -> None:
    pid = await sandboxed_worker()

    tree = worker_tree(pid)
    assert len(tree) == 3  # the worker, its sandbox's init, bwrap
    for namespace in ("user", "pid", "net", "ipc", "uts", "mnt"):
        ours = os.readlink(f"/proc/self/ns/{namespace}")
        assert os.readlink(f"/proc/{pid}/ns/{namespace}") != ours, namespace
    status = proc_text(pid, "status")
    assert "\nCapEff:\t0000000000000000\n" in status
    assert "\nNoNewPrivs:\t1\n" in status
    limits = proc_text(pid, "limits").splitlines()
    memory = next(line for line in limits if line.startswith("Max address space"))
    assert memory.split()[3] == str(WORKER_MEMORY_MB * 1024 * 1024)
    assert await run_script("lua", "ctx.ok = 1", {}, name="after.lua") == {"ok": 1}


async def test_with_the_sandbox_the_worker_sees_none_of_the_hosts_files(
    sandbox_ready: SandboxStatus, tmp_path: Path
) -> None:
    (tmp_path / "secret.txt").write_text("host data")
    pid = await sandboxed_worker()

    root = Path(f"/proc/{pid}/root")
    assert (root / WORKER_INSIDE.lstrip("/")).is_file()  # the view is the worker's own
    assert not (root / str(tmp_path).lstrip("/")).exists()
    assert not (root / str(Path.cwd()).lstrip("/")).exists()
    if sys.prefix != sys.base_prefix:
        assert not (root / sys.prefix.lstrip("/")).exists()  # the venv and its packages
    engines = sorted(path.name for path in engine_files())
    assert sorted(os.listdir(root / "worker" / "lib")) == engines


async def test_closing_the_workers_leaves_no_process_behind(sandbox_ready: SandboxStatus) -> None:
    pid = await sandboxed_worker()
    tree = worker_tree(pid)

    close_script_workers()

    assert not any(alive(each) for each in tree)


async def test_limits_are_validated() -> None:
    with pytest.raises(ValueError):
        ScriptLimits(time_ms=0)
    with pytest.raises(ValueError):
        ScriptLimits(memory_mb=100_000)


def test_a_sandboxed_worker_outlives_the_thread_that_asked_for_it(
    sandbox_ready: SandboxStatus,
) -> None:
    # bwrap dies with the thread that started it; asyncio.run ends its worker threads.
    close_script_workers()
    asyncio.run(run_script("lua", "", {}, name="first.lua"))
    pids = idle_worker_pids()
    assert len(pids) == 1

    after = asyncio.run(run_script("lua", "ctx.ok = 1", {}, name="second.lua"))

    assert after == {"ok": 1}
    assert idle_worker_pids() == pids
