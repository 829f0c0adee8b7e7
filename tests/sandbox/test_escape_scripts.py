"""The escape suite for Lua and JavaScript scripts: each case tries to get out or run away.

Each asserts containment (nothing reachable, the limit that stopped it, the worker still
usable or replaced) and a clear error. Everything is real: the worker process, lupa's
Lua 5.4, quickjs-ng. No test asserts on time; limit tests assert which limit fired.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from storyloom.sandbox.script_host import (
    ScriptFailure,
    ScriptLimits,
    close_script_workers,
    idle_worker_pids,
    run_script,
    worker_isolation,
)
from tests.sandbox.sandbox_support import alive, worker_tree

# A runaway gets a long wall clock, so the limit under test is the one that fires.
ROOMY = ScriptLimits(time_ms=20_000, instructions=2_000_000)
SHORT = ScriptLimits(time_ms=400)


async def fresh_worker() -> int:
    """Start from one warm worker and return its process id."""
    close_script_workers()
    await run_script("lua", "", {}, name="warm-up.lua")
    pids = idle_worker_pids()
    assert len(pids) == 1
    return pids[0]


def run_cgroup(pid: int) -> Path | None:
    """The pids cgroup of ``pid``'s sandboxed run (as root), else ``None``."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "storyloom-sandbox-" in path and controllers in ("pids", ""):
            return Path("/sys/fs/cgroup", *(["pids"] if controllers else []), path.lstrip("/"))
    return None


async def failure_of(language: Any, code: str, limits: ScriptLimits = ROOMY) -> ScriptFailure:
    with pytest.raises(ScriptFailure) as caught:
        await run_script(language, code, {"secret": "data"}, name="escape", limits=limits)
    return caught.value


# --- Lua --------------------------------------------------------------------------------


async def test_lua_cannot_reset_the_instruction_hook() -> None:
    code = "debug.sethook()\nwhile true do end"

    failure = await failure_of("lua", code)

    assert failure.limit is None
    assert failure.line == 1
    assert "attempt to index a nil value (global 'debug')" in failure.message


@pytest.mark.parametrize(
    "expression",
    ["python.eval('1')", "python.builtins.open('/etc/passwd')", "python.import_module('os')"],
)
async def test_lua_has_no_python_bridge(expression: str) -> None:
    failure = await failure_of("lua", f"local x = {expression}")

    assert "global 'python'" in failure.message
    assert failure.limit is None


async def test_lua_has_no_loader_file_or_process_functions() -> None:
    names = [
        "load",
        "loadstring",
        "loadfile",
        "dofile",
        "require",
        "package",
        "os",
        "io",
        "debug",
        "collectgarbage",
        "python",
        "warn",
    ]
    code = (
        "ctx.types = {}\nfor _, name in ipairs(ctx.names) do ctx.types[name] = type(_G[name]) end\n"
    )
    code += "ctx.dump = type(string.dump)\nctx.hidden = type(rawget(_G, 'debug'))"

    result = await run_script("lua", code, {"names": names}, name="probe.lua")

    assert result["types"] == dict.fromkeys(names, "nil")
    assert result["dump"] == "nil"
    assert result["hidden"] == "nil"


@pytest.mark.parametrize(
    ("call", "missing"),
    [
        ('load("return 1")()', "global 'load'"),
        ('loadstring("return 1")()', "global 'loadstring'"),
        ('dofile("/etc/passwd")', "global 'dofile'"),
        ('require("os")', "global 'require'"),
        ('os.execute("touch /tmp/escaped")', "global 'os'"),
        ('io.open("/etc/passwd")', "global 'io'"),
    ],
)
async def test_lua_escape_calls_fail_with_a_clear_error(call: str, missing: str) -> None:
    failure = await failure_of("lua", f"\n{call}")

    assert missing in failure.message
    assert failure.line == 2


async def test_lua_string_rep_memory_bomb_hits_the_memory_limit_and_the_worker_survives() -> None:
    pid = await fresh_worker()

    failure = await failure_of("lua", 'local s = string.rep("x", 1e9)')

    assert failure.limit == "memory"
    assert "memory limit (32 MB)" in str(failure)
    assert idle_worker_pids() == [pid]
    assert await run_script("lua", "ctx.ok = 1", {}, name="after.lua") == {"ok": 1}


async def test_lua_table_growth_hits_the_memory_limit() -> None:
    code = "local t = {}\nfor i = 1, 1e9 do t[i] = {i} end"

    failure = await failure_of("lua", code, ScriptLimits(time_ms=20_000, memory_mb=8))

    assert failure.limit == "memory"


async def test_lua_string_find_backtracking_is_killed_at_the_time_limit() -> None:
    pid = await fresh_worker()
    tree = worker_tree(pid)
    cgroup = run_cgroup(pid)
    if worker_isolation() == "bubblewrap" and os.geteuid() == 0:
        assert cgroup is not None
    code = 'local s = string.rep("a", 1e5)\nreturn string.find(s, ".-.-.-.-.-.-.-b")'

    failure = await failure_of("lua", code, SHORT)

    assert failure.limit == "time"
    assert str(failure) == "script escape: stopped by the time limit (400 ms)"
    # The worker running it was killed (in C, no hook could stop it), with its whole
    # sandbox (bwrap and its init; as root, its pids cgroup), and replaced.
    assert not any(alive(each) for each in tree)
    if cgroup is not None:
        assert not cgroup.exists()
    replacement = idle_worker_pids()
    assert replacement and pid not in replacement
    assert await run_script("lua", "ctx.ok = 1", {}, name="after.lua") == {"ok": 1}


async def test_lua_infinite_loop_hits_the_instruction_limit() -> None:
    pid = await fresh_worker()

    failure = await failure_of("lua", "local n = 0\nwhile true do n = n + 1 end")

    assert failure.limit == "instructions"
    assert failure.line == 2
    assert "instruction limit (2,000,000 instructions)" in failure.message
    assert idle_worker_pids() == [pid]


async def test_lua_infinite_loop_with_a_short_time_hits_the_time_limit() -> None:
    limits = ScriptLimits(time_ms=300, instructions=10**12)

    failure = await failure_of("lua", "while true do end", limits)

    # The hook stops it on the CPU clock, or the host kills it on the wall clock.
    assert failure.limit == "time"
    assert "time limit (300 ms)" in str(failure)


@pytest.mark.parametrize(
    "code",
    [
        "local co = coroutine.wrap(function() while true do end end)\nco()",
        "local co = coroutine.create(function() while true do end end)\n"
        "local ok, err = coroutine.resume(co)\nctx.err = err",
        # Each coroutine made inside a coroutine gets the hook too.
        "coroutine.wrap(function()\n  coroutine.wrap(function() while true do end end)()\nend)()",
    ],
)
async def test_lua_coroutines_do_not_evade_the_instruction_hook(code: str) -> None:
    pid = await fresh_worker()

    failure = await failure_of("lua", code)

    # Hooks are per thread in Lua; the worker installs one in every coroutine, so the
    # instruction budget (not the host's wall-clock kill) is what stops it.
    assert failure.limit == "instructions"
    assert idle_worker_pids() == [pid]


async def test_lua_pcall_cannot_swallow_the_budget_error() -> None:
    code = """
while true do
  pcall(function() while true do end end)
  xpcall(function() while true do end end, function() while true do end end)
end
"""
    failure = await failure_of("lua", code)

    assert failure.limit == "instructions"


async def test_lua_metatable_tricks_reach_no_host_value_and_do_not_leak() -> None:
    code = """
ctx.ctx_meta = type(getmetatable(ctx))
ctx.string_index = getmetatable("").__index == string
getmetatable("").__index = {upper = function() return "pwned" end}
string.upper = function() return "pwned" end
ctx.now = ("a"):upper()
setmetatable(ctx, {__index = function() error("read through __index") end,
                   __pairs = function() error("read through __pairs") end})
"""
    result = await run_script("lua", code, {}, name="meta.lua")

    assert result == {"ctx_meta": "nil", "string_index": True, "now": "pwned"}
    # A fresh Lua state per call: the string metatable and library are whole again.
    after = await run_script("lua", 'ctx.up = ("a"):upper()', {}, name="after.lua")
    assert after == {"up": "A"}


async def test_lua_cannot_set_a_finalizer_which_would_run_without_hooks() -> None:
    # Lua runs __gc with hooks off: a finalizer that loops would escape every limit
    # but the host's kill, so a metatable with __gc is refused.
    code = "local mt = {}\nmt.__gc = function() while true do end end\nsetmetatable({}, mt)"

    failure = await failure_of("lua", code)

    assert failure.limit is None
    assert failure.line == 3
    assert "__gc metamethods are not allowed" in failure.message


@pytest.mark.parametrize(
    "code",
    [
        "do local x <close> = setmetatable({}, {__close = function() while true do end end}) end",
        "local t = setmetatable({}, {__index = function() while true do end end})\nlocal y = t.x",
        "table.sort({3, 2, 1}, function(a, b) while true do end end)",
        'string.gsub("abc", ".", function() while true do end end)',
        "print(setmetatable({}, {__tostring = function() while true do end end}))",
    ],
)
async def test_lua_callbacks_run_from_c_are_still_counted(code: str) -> None:
    failure = await failure_of("lua", code)

    assert failure.limit == "instructions"


async def test_lua_deep_recursion_is_stopped_by_a_limit() -> None:
    code = "local function f() return 1 + f() end\nf()"

    failure = await failure_of("lua", code, ScriptLimits(time_ms=20_000))

    assert failure.limit in ("memory", "stack")


# --- JavaScript -------------------------------------------------------------------------


async def test_javascript_runaway_regex_hits_the_time_limit() -> None:
    failure = await failure_of("javascript", '/(a+)+$/.test("a".repeat(30) + "b");', SHORT)

    assert failure.limit == "time"
    assert "time limit (400 ms)" in str(failure)
    assert await run_script("javascript", "ctx.ok = 1;", {}, name="after.js") == {"ok": 1}


async def test_javascript_infinite_loop_hits_the_time_limit() -> None:
    failure = await failure_of("javascript", "for (;;) {}", ScriptLimits(time_ms=300))

    assert failure.limit == "time"
    assert await run_script("javascript", "ctx.ok = 1;", {}, name="after.js") == {"ok": 1}


async def test_javascript_deep_recursion_hits_the_stack_limit() -> None:
    code = "function down(n) {\n  return down(n + 1) + 1;\n}\ndown(0);"

    failure = await failure_of("javascript", code)

    assert failure.limit == "stack"
    assert failure.line == 2
    assert "stack limit (512 KB)" in failure.message
    assert "Maximum call stack size exceeded" in failure.message


async def test_javascript_out_of_memory_then_the_next_call_works() -> None:
    pid = await fresh_worker()
    code = 'const hoard = [];\nwhile (true) hoard.push("x".repeat(100) + hoard.length);'

    failure = await failure_of("javascript", code)

    assert failure.limit == "memory"
    assert "memory limit (32 MB)" in str(failure)
    assert idle_worker_pids() == [pid]
    after = await run_script("javascript", "ctx.ok = ctx.n + 1;", {"n": 1}, name="after.js")
    assert after == {"n": 1, "ok": 2}


async def test_javascript_prototype_pollution_does_not_reach_the_next_call() -> None:
    code = """
Object.prototype.polluted = 1;
Array.prototype.push = function () { return "pwned"; };
ctx.__proto__.alsoPolluted = 2;
JSON.parse = () => ({hijacked: true});
"""
    await run_script("javascript", code, {"a": 1}, name="pollute.js")

    check = """
ctx.polluted = ({}).polluted === undefined && ctx.polluted === undefined;
ctx.also = ({}).alsoPolluted === undefined;
const list = []; list.push(1); ctx.push = list.length === 1;
ctx.parse = JSON.parse("{}").hijacked === undefined;
"""
    result = await run_script("javascript", check, {"a": 1}, name="check.js")
    assert result == {"a": 1, "polluted": True, "also": True, "push": True, "parse": True}


async def test_javascript_replacing_json_built_ins_does_not_change_how_ctx_is_read() -> None:
    code = """
JSON.stringify = function () { return '{"forged": true}'; };
Array.prototype.join = function () { return "forged"; };
Object.keys = function () { return []; };
Function.prototype.call = function () { return "forged"; };
ctx.list = [1, 2];
"""
    result = await run_script("javascript", code, {"a": {"b": 1}}, name="json.js")

    assert result == {"a": {"b": 1}, "list": [1, 2]}


@pytest.mark.parametrize(
    ("code", "where"),
    [
        ('Object.prototype.toJSON = function () { return "forged"; };', "ctx has"),
        ('Array.prototype.toJSON = function () { return "forged"; };', "ctx.list has"),
        (
            'ctx.a = {}; Object.defineProperty(ctx.a, "toJSON", {value: () => "forged"});',
            "ctx.a has",
        ),
    ],
)
async def test_javascript_a_forged_to_json_is_refused_not_written(code: str, where: str) -> None:
    failure = await failure_of("javascript", code + "\nctx.list = [1];")

    assert failure.message == f"{where} a toJSON method, so it is not plain JSON data"


async def test_javascript_data_with_a_proto_key_stays_data() -> None:
    data = {"__proto__": {"polluted": True}, "x": 1}
    code = "ctx.seen = ({}).polluted === undefined;"

    result = await run_script("javascript", code, data, name="proto.js")

    assert result["seen"] is True


async def test_javascript_has_no_module_or_host_access() -> None:
    code = """
ctx.types = {
  std: typeof std, os: typeof os, require: typeof require, process: typeof process,
  module: typeof module, fetch: typeof fetch, XMLHttpRequest: typeof XMLHttpRequest,
  setTimeout: typeof setTimeout,
};
ctx.imported = "pending";
import("os").then(() => { ctx.imported = "loaded"; }, (e) => { ctx.imported = String(e); });
"""
    result = await run_script("javascript", code, {}, name="modules.js")

    assert set(result["types"].values()) == {"undefined"}
    assert result["imported"] == "ReferenceError: could not load module 'os'"


async def test_javascript_import_statement_is_a_syntax_error() -> None:
    failure = await failure_of("javascript", 'import * as std from "std";')

    assert failure.limit is None
    assert "SyntaxError" in failure.message
    assert failure.line == 1


async def test_javascript_promise_loop_is_stopped() -> None:
    code = "function again() { Promise.resolve().then(again); }\nagain();"

    failure = await failure_of("javascript", code, SHORT)

    assert failure.limit == "time"
