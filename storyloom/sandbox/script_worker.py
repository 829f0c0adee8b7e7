"""The script worker: runs Lua and JavaScript shuttle scripts for the host, one at a time.

Runs as ``python -I -S script_worker.py MEMORY_BYTES PATH...`` in its own process
(started by :mod:`storyloom.sandbox.script_host`; inside a bubblewrap sandbox, run by its
launcher, where the host has one), where storyloom is not importable: it
imports only the standard library, ``lupa`` and ``_quickjs``, found through the PATH
entries the host passes. ``_quickjs`` rather than ``quickjs``: the wrapper package starts
a thread at import, and this process stays single-threaded.

Protocol: a first line ``{"ready": true}`` once the engines are loaded (or
``{"ready": false, "error": "..."}``), then, per request, two JSON lines on stdin (the
request, then the data as JSON text, which the JavaScript engine parses itself) and one
JSON reply line on stdout::

    {"language": "lua"|"javascript", "code": "...", "name": "mood.lua",
     "limits": {"time_ms": .., "memory_mb": .., "instructions": .., "stack_kb": ..}}
    {...the data...}
    {"ok": true, "result": {...}, "output": "..."}
    {"ok": false, "message": "...", "line": 3 | null, "limit": "time" | ... | null}

Why a process of its own: Lua's hooks and quickjs's interrupt handler only run between
instructions, and some library calls run in C for as long as they like
(``string.find`` with a backtracking pattern). The host kills this process at the time
limit and starts a fresh one; the limits enforced in here end most runaway scripts
first, so the worker usually survives them. A SIGALRM backstop (default action:
terminate) ends a request that runs far past its limit even if the host is gone.

Only data crosses into the engines: every value is built from JSON inside a fresh Lua
state or JavaScript context, and read back as JSON, so no Python object or function is
reachable from a script.
"""

import json
import re
import resource
import signal
import sys
import time
import zlib
from typing import Any

OUTPUT_LIMIT = 16 * 1024
"""Bytes of ``print`` output a script may leave; the rest is dropped."""
MAX_DEPTH = 100
"""Deepest nesting a result may have (it also stops a table that contains itself)."""
MAX_NODES = 1_000_000
"""Values a result may hold (it also stops tables shared so often they blow up as JSON)."""
HOOK_STEP = 10_000
"""Lua instructions between two runs of the budget hook."""
ALARM_MARGIN_S = 2.0
"""How long past its limits a request may run before SIGALRM ends this process."""
TRUNCATED = "\n[output truncated at 16 KB]\n"


class Failure(Exception):
    """A script that failed: the reply the host turns into a ScriptFailure."""

    def __init__(self, message: str, line: int | None = None, limit: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.limit = limit


# ---------------------------------------------------------------------------------------
# Lua

# Runs once in every fresh Lua state, before the script, with the instruction budget,
# the seconds, the random seed, the hook step and the output cap. It captures what it
# needs (debug.sethook, os.clock, load, collectgarbage) in locals no script can reach and
# installs the budget hook; then it builds the script's environment, a table of its own
# holding only: assert error getmetatable ipairs next pairs pcall rawequal rawget rawlen
# rawset select setmetatable (refusing __gc) tonumber tostring type xpcall _VERSION, the
# coroutine (hooked), math (seeded), string (no dump), table and utf8 libraries, print
# (collected) and ctx. debug, os, io, load, loadstring, loadfile, dofile, require,
# package, python, collectgarbage and warn are removed from the state's own globals too.
# setmetatable stays: only plain data tables exist, no host object to dress up.
# Returns the function that runs a script and the table the host reads the outcome from.
LUA_PRELUDE = r"""
local budget, seconds, seed, step, output_limit = ...
local sethook, getinfo, clock = debug.sethook, debug.getinfo, os.clock
local error, type, tostring, select, pcall, xpcall = error, type, tostring, select, pcall, xpcall
local rawget, concat, sub, load, gc = rawget, table.concat, string.sub, load, collectgarbage
local create, wrap = coroutine.create, coroutine.wrap

local state = {used = 0, output = {}, output_size = 0}
local deadline = clock() + seconds

-- The budget hook. Once a limit is hit it fires on every instruction of whichever
-- thread runs, so a pcall that catches its error cannot make progress either.
local hook
hook = function()
  if not state.limit then
    state.used = state.used + step
    local hit = nil
    if state.used > budget then hit = "instructions" elseif clock() > deadline then hit = "time" end
    if hit then
      state.limit = hit
      local info = getinfo(2, "Sl")
      if info and info.what ~= "C" then state.line = info.currentline end
      step = 1
    end
  end
  if state.limit then
    sethook(hook, "", 1)
    error("stopped by the " .. state.limit .. " limit", 0)
  end
end
sethook(hook, "", step)

-- Hooks belong to one thread: a coroutine starts without one. Every coroutine the
-- script makes installs the hook on itself before running the script's function.
local function hooked(f)
  if type(f) ~= "function" then return f end
  return function(...)
    sethook(hook, "", step)
    return f(...)
  end
end
coroutine.create = function(f) return create(hooked(f)) end
coroutine.wrap = function(f) return wrap(hooked(f)) end

local function print(...)
  if state.truncated then return end
  local parts = {}
  for i = 1, select("#", ...) do parts[i] = tostring((select(i, ...))) end
  local line = concat(parts, "\t") .. "\n"
  if state.output_size + #line > output_limit then
    line = sub(line, 1, output_limit - state.output_size)
    state.truncated = true
  end
  state.output[#state.output + 1] = line
  state.output_size = state.output_size + #line
end

-- Lua runs finalizers with hooks off, so a __gc loop would run past every limit
-- in here. An object is marked for finalization only if its metatable has __gc
-- when setmetatable is called, so refusing it there closes that door.
local setmetatable_ = setmetatable
setmetatable = function(t, mt)
  if type(mt) == "table" and rawget(mt, "__gc") ~= nil then
    error("__gc metamethods are not allowed in scripts", 2)
  end
  return setmetatable_(t, mt)
end

math.randomseed(seed)
string.dump = nil

local env = {}
for _, name in ipairs({
  "assert", "error", "getmetatable", "ipairs", "next", "pairs", "pcall", "rawequal",
  "rawget", "rawlen", "rawset", "select", "setmetatable", "tonumber", "tostring", "type",
  "xpcall", "_VERSION", "coroutine", "math", "string", "table", "utf8",
}) do
  env[name] = _G[name]
end
env._G = env
env.print = print
for _, name in ipairs({
  "debug", "os", "io", "load", "loadstring", "loadfile", "dofile", "require", "package",
  "python", "collectgarbage", "warn",
}) do
  _G[name] = nil
end

local function message_of(e)
  if type(e) == "string" then return e end
  if e == nil then return "error called with nil" end
  local ok, text = pcall(tostring, e)
  return ok and ("error object: " .. text) or ("error object: a " .. type(e))
end

-- Returns ok, value, returned: ok false with a message for a syntax or runtime error;
-- returned true when value is what the script returned rather than its ctx. The
-- garbage collector stops after the script, so no __gc finalizer runs while the host
-- reads the result back.
local function run(code, name, ctx)
  local fn, problem = load(code, "=" .. name, "t", env)
  if not fn then return false, problem, false end
  env.ctx = ctx
  local ok, result = xpcall(fn, message_of)
  gc("stop")
  if not ok then return false, result, false end
  if result == nil then return true, rawget(env, "ctx"), false end
  return true, result, true
end

return run, state
"""


def lua_seed(data: dict[str, Any]) -> int:
    """The seed of ``math.random``: the data's ``seed`` when it has one, else 0.

    Deterministic, so a script's random choices repeat when the same turn is replayed.
    """
    seed = data.get("seed")
    if isinstance(seed, bool):
        return int(seed)
    if isinstance(seed, int):
        return seed & 0x7FFF_FFFF_FFFF_FFFF
    if isinstance(seed, float) and seed == seed and abs(seed) != float("inf"):
        return int(seed) & 0x7FFF_FFFF_FFFF_FFFF
    if isinstance(seed, str):
        return zlib.crc32(seed.encode("utf-8", "surrogatepass"))
    return 0


def refuse_attributes(obj: object, name: object, is_setting: bool) -> object:
    """lupa's attribute filter: no Python attribute is readable or writable from Lua.

    No Python object is handed to a script, so this only closes the door behind that.
    """
    raise AttributeError("Python objects are not accessible from scripts")


class LuaEngine:
    """Runs one Lua script in a fresh Lua 5.4 state.

    A fresh state per call costs tens of microseconds and means nothing a script changes
    (the string metatable, the libraries, globals) reaches the next call.
    """

    def __init__(self) -> None:
        import lupa.lua54  # type: ignore[import-untyped]

        self.lupa = lupa.lua54

    def run(self, code: str, name: str, data_text: str, limits: dict[str, int]) -> Any:
        data = json.loads(data_text)
        lupa = self.lupa
        lua = lupa.LuaRuntime(
            encoding=None,
            register_eval=False,
            register_builtins=False,
            unpack_returned_tuples=True,
            attribute_filter=refuse_attributes,
            max_memory=limits["memory_mb"] * 1024 * 1024,
        )
        run, state = lua.execute(
            LUA_PRELUDE,
            limits["instructions"],
            limits["time_ms"] / 1000,
            lua_seed(data),
            HOOK_STEP,
            OUTPUT_LIMIT,
        )
        try:
            ok, value, returned = run(
                code.encode("utf-8", "surrogatepass"),
                name.encode("utf-8", "surrogatepass"),
                self.to_lua(lua, data),
            )
        except lupa.LuaMemoryError:
            raise Failure(self.limit_message("memory", limits), limit="memory") from None
        except lupa.LuaError as error:
            # The hook's error escaped the script's own pcall/xpcall handlers.
            if state[b"limit"]:
                raise self.limit_failure(state, limits) from None
            raise Failure(self.text(str(error))) from None
        if state[b"limit"]:
            raise self.limit_failure(state, limits)
        if not ok:
            message, line = self.split_position(self.text(value), name)
            if "not enough memory" in message:
                raise Failure(self.limit_message("memory", limits), line, "memory")
            if "stack overflow" in message:
                raise Failure(f"stack overflow: {message}", line, "stack")
            raise Failure(message, line)
        what = "the script returned" if returned else "ctx is"
        if lupa.lua_type(value) != "table":
            kind = lupa.lua_type(value) or self.lua_kind(value)
            raise Failure(f"{what} a {kind}; ctx must be a table with named fields")
        result = self.from_lua(value, data, "ctx", 0, [0])
        if not isinstance(result, dict):
            raise Failure(f"{what} a list; ctx must be a table with named fields")
        output = b"".join(state[b"output"][i] for i in range(1, len(state[b"output"]) + 1))
        text = self.text(output)
        if state[b"truncated"]:
            text += TRUNCATED
        return result, text

    @staticmethod
    def limit_message(limit: str, limits: dict[str, int]) -> str:
        if limit == "memory":
            return f"stopped by the memory limit ({limits['memory_mb']} MB)"
        if limit == "instructions":
            return f"stopped by the instruction limit ({limits['instructions']:,} instructions)"
        return f"stopped by the time limit ({limits['time_ms']} ms)"

    def limit_failure(self, state: Any, limits: dict[str, int]) -> Failure:
        limit = self.text(state[b"limit"])
        return Failure(self.limit_message(limit, limits), state[b"line"], limit)

    @staticmethod
    def text(value: object) -> str:
        if isinstance(value, bytes):
            return value.decode("utf-8", "replace")
        return str(value)

    @staticmethod
    def lua_kind(value: object) -> str:
        if value is None:
            return "nil"
        if isinstance(value, bool):
            return "boolean"
        if isinstance(value, (int, float)):
            return "number"
        if isinstance(value, bytes):
            return "string"
        return type(value).__name__

    @staticmethod
    def split_position(message: str, name: str) -> tuple[str, int | None]:
        """``"mood.lua:3: boom"`` as ``("boom", 3)``; a message without a position as is."""
        prefix = name + ":"
        if message.startswith(prefix):
            line, sep, rest = message[len(prefix) :].partition(": ")
            if sep and line.isdigit():
                return rest, int(line)
        return message, None

    def to_lua(self, lua: Any, value: Any) -> Any:
        """A JSON value as Lua values: objects and arrays become tables, null is nil."""
        if isinstance(value, dict):
            return lua.table_from(
                {
                    k.encode("utf-8", "surrogatepass"): self.to_lua(lua, v)
                    for k, v in value.items()
                    if v is not None
                }
            )
        if isinstance(value, list):
            return lua.table_from([self.to_lua(lua, v) for v in value])
        if isinstance(value, str):
            return value.encode("utf-8", "surrogatepass")
        if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
            return float(value)
        return value

    def from_lua(self, value: Any, shape: Any, path: str, depth: int, count: list[int]) -> Any:
        """A Lua value as JSON, ``shape`` being the input's value at the same place.

        The rules: a table whose keys are exactly 1..n is a list; an empty table is a
        list where the input had a list, else an object; where the input had a list, a
        table whose keys are all positive integers is a list with its holes as null
        (nil in a list is a hole); any other table is an object, integer keys written
        as decimal strings. Strings that are not UTF-8 have the bad bytes replaced.
        Keys the input had as null and the script left nil come back as null. An
        object's keys come in the input's order, then the new ones sorted.
        """
        count[0] += 1
        if count[0] > MAX_NODES:
            raise Failure(f"the result has more than {MAX_NODES:,} values")
        if value is None or isinstance(value, (bool, int)):
            return value
        if isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")):
                raise Failure(f"{path} is {value}, which JSON cannot hold")
            return value
        if isinstance(value, bytes):
            return value.decode("utf-8", "replace")
        kind = self.lupa.lua_type(value)
        if kind != "table":
            raise Failure(f"{path} is a {kind or 'host value'}, not JSON data")
        if depth >= MAX_DEPTH:
            raise Failure(
                f"{path} is nested deeper than {MAX_DEPTH} levels (a table that contains itself?)"
            )
        items = list(value.items())
        if not items:
            return [] if isinstance(shape, list) else {}
        keys = [k for k, _ in items]
        if all(isinstance(k, int) and not isinstance(k, bool) and k >= 1 for k in keys):
            highest = max(keys)
            if highest == len(keys) or (isinstance(shape, list) and highest <= MAX_NODES):
                out: list[Any] = [None] * highest
                for k, v in items:
                    sub = shape[k - 1] if isinstance(shape, list) and k <= len(shape) else None
                    out[k - 1] = self.from_lua(v, sub, f"{path}[{k}]", depth + 1, count)
                count[0] += highest - len(keys)
                return out
        result: dict[str, Any] = {}
        for k, v in items:
            if isinstance(k, bytes):
                key = k.decode("utf-8", "replace")
            elif isinstance(k, int) and not isinstance(k, bool):
                key = str(k)
            else:
                kind = self.lupa.lua_type(k) or self.lua_kind(k)
                raise Failure(f"{path} has a {kind} key; JSON keys are strings")
            if key in result:
                raise Failure(f"{path} has the key {key!r} both as a number and as a string")
            sub = shape.get(key) if isinstance(shape, dict) else None
            result[key] = self.from_lua(v, sub, f"{path}.{key}", depth + 1, count)
        # Lua tables have no order: the input's keys keep theirs, new keys come sorted.
        ordered: dict[str, Any] = {}
        if isinstance(shape, dict):
            for key, old in shape.items():
                if key in result:
                    ordered[key] = result[key]
                elif old is None:
                    ordered[key] = None
        for key in sorted(result):
            if key not in ordered:
                ordered[key] = result[key]
        return ordered


# ---------------------------------------------------------------------------------------
# JavaScript

# Runs first in every fresh context. It defines print/console.log (collecting into an
# array inside the context: nothing from Python crosses) and two non-writable globals:
# the runner that calls the script (wrapped in a function so it may `return` a new ctx)
# and the finisher that writes ctx back as JSON text, or "!" and why it cannot. The
# finisher uses only built-ins captured here, before the script could replace them.
# Both return strings made by Array.prototype.join: the Python binding cannot read the
# rope strings that concatenation makes of long texts ("Unknown quickjs tag: -6").
JS_PRELUDE = (
    r"""
(function () {
  "use strict";
  const g = globalThis;
  const define = Object.defineProperty, keys = Object.keys, isArray = Array.isArray;
  const protoOf = Object.getPrototypeOf, ObjectProto = Object.prototype;
  const quote = JSON.stringify, finite = Number.isFinite, str = String;
  const call = Function.prototype.call;
  const slice = call.bind(String.prototype.slice), join = call.bind(Array.prototype.join);
  const test = call.bind(RegExp.prototype.test), IDENT = /^[A-Za-z_$][\w$]*$/;
  const LIMIT = @OUTPUT_LIMIT@, MAX_DEPTH = @MAX_DEPTH@, MAX_NODES = @MAX_NODES@;
  const output = [];
  let size = 0, truncated = false, returned, nodes = 0;
  const print = function (...args) {
    if (truncated) return;
    let line = "";
    for (let i = 0; i < args.length; i++) line += (i ? " " : "") + str(args[i]);
    line += "\n";
    if (size + line.length > LIMIT) { line = slice(line, 0, LIMIT - size); truncated = true; }
    output[output.length] = line;
    size += line.length;
  };
  g.print = print;
  g.console = { log: print, info: print, warn: print, error: print, debug: print };
  const path = [];
  const where = (depth) => {
    let s = "ctx";
    for (let i = 0; i < depth; i++) {
      const k = path[i];
      s += typeof k === "number" ? "[" + k + "]" : test(IDENT, k) ? "." + k : "[" + quote(k) + "]";
    }
    return s;
  };
  class NotJSON { constructor(message) { this.message = message; } }
  const fail = (depth, what) => { throw new NotJSON(where(depth) + " " + what); };
  // Checks that v is plain JSON data, naming where it is not; JSON.stringify (captured
  // before the script ran) then writes it. toJSON is refused, as stringify would call it.
  const check = (v, depth) => {
    if (v === null) return;
    const t = typeof v;
    if (t === "string" || t === "boolean") return;
    if (t === "number") {
      if (!finite(v)) fail(depth, "is " + str(v) + ", which JSON cannot hold");
      return;
    }
    if (t !== "object") fail(depth, "is a " + t + ", not JSON data");
    if (depth >= MAX_DEPTH)
      fail(depth, "is nested deeper than " + MAX_DEPTH + " levels (does it contain itself?)");
    if (++nodes > MAX_NODES) throw new NotJSON("the result has more than " + MAX_NODES + " values");
    if (isArray(v)) {
      if ("toJSON" in v) fail(depth, "has a toJSON method, so it is not plain JSON data");
      for (let i = 0; i < v.length; i++) {
        path[depth] = i;
        const item = v[i];
        if (item === undefined) fail(depth + 1, "is undefined (use null)");
        check(item, depth + 1);
      }
      return;
    }
    const proto = protoOf(v);
    if (proto !== ObjectProto && proto !== null) {
      const ctor = proto && proto.constructor && proto.constructor.name;
      fail(depth, "is " + (ctor ? "a " + ctor : "an object") + ", not plain JSON data");
    }
    if ("toJSON" in v) fail(depth, "has a toJSON method, so it is not plain JSON data");
    const names = keys(v);
    for (let i = 0; i < names.length; i++) {
      const k = names[i];
      path[depth] = k;
      const item = v[k];
      // As JSON.stringify: a property set to undefined is left out.
      if (item !== undefined) check(item, depth + 1);
    }
  };
  define(g, "__storyloom_run", {
    value: function (script) { returned = script(); },
  });
  define(g, "__storyloom_finish", {
    value: function () {
      const value = returned === undefined ? g.ctx : returned;
      const what = returned === undefined ? "!ctx is " : "!the script returned ";
      try {
        if (value === null || typeof value !== "object" || isArray(value)) {
          const kind = value === null ? "null" : isArray(value) ? "an array" : "a " + typeof value;
          return join([what, kind, "; ctx must be an object"], "");
        }
        check(value, 0);
        return join([quote(value)], "");
      } catch (e) {
        if (e instanceof NotJSON) return join(["!", e.message], "");
        throw e;
      }
    },
  });
  define(g, "__storyloom_output", {
    value: function () { return join([join(output, ""), truncated ? @TRUNCATED@ : ""], ""); },
  });
})();
""".replace("@OUTPUT_LIMIT@", str(OUTPUT_LIMIT))
    .replace("@MAX_DEPTH@", str(MAX_DEPTH))
    .replace("@MAX_NODES@", str(MAX_NODES))
    .replace("@TRUNCATED@", json.dumps(TRUNCATED))
)

JS_POSITION = re.compile(r"<input>:(\d+)")
JS_PENDING_JOBS = 100_000
"""Promise jobs a script may queue before it counts as a runaway."""


class JavaScriptEngine:
    """Runs one JavaScript script in a fresh quickjs-ng context.

    Fresh per call: a context is unusable after an out-of-memory error, and nothing one
    script changes (prototypes, globals) may reach the next.
    """

    def __init__(self) -> None:
        import _quickjs  # type: ignore[import-not-found]  # the extension quickjs-ng ships

        self.quickjs = _quickjs

    def run(self, code: str, name: str, data_text: str, limits: dict[str, int]) -> Any:
        quickjs = self.quickjs
        context = quickjs.Context()
        context.set_memory_limit(limits["memory_mb"] * 1024 * 1024)
        context.set_max_stack_size(limits["stack_kb"] * 1024)
        seconds = limits["time_ms"] / 1000
        # quickjs's limit is CPU time per eval; the deadline covers the whole call.
        context.set_time_limit(seconds)
        deadline = time.process_time() + seconds
        try:
            context.eval(JS_PRELUDE)
            # JSON.parse's semantics: a "__proto__" key is a plain property.
            context.set("ctx", context.parse_json(data_text))
            # On the first line, so the script's line numbers are its own.
            context.eval("__storyloom_run(function () {" + code + "\n});")
            jobs = 0
            while context.execute_pending_job():
                jobs += 1
                if jobs > JS_PENDING_JOBS or time.process_time() > deadline:
                    raise Failure(LuaEngine.limit_message("time", limits), limit="time")
            text = context.eval("__storyloom_finish()")
            output = context.eval("__storyloom_output()")
        except quickjs.StackOverflow as error:
            message, line = self.describe(str(error))
            raise Failure(
                f"stopped by the stack limit ({limits['stack_kb']} KB): {message}", line, "stack"
            ) from None
        except quickjs.JSException as error:
            raise self.failure(str(error), limits) from None
        if not isinstance(text, str):
            raise Failure("ctx could not be read back as JSON")
        if text.startswith("!"):
            raise Failure(text[1:])
        result = json.loads(text)
        if "\\ud" in text:
            # JSON.stringify writes a lone surrogate as an escape; Python would keep it
            # and fail later when the text is written as UTF-8.
            result = self.without_lone_surrogates(result)
        return result, output if isinstance(output, str) else ""

    def failure(self, text: str, limits: dict[str, int]) -> Failure:
        message, line = self.describe(text)
        if message == "InternalError: interrupted":
            return Failure(LuaEngine.limit_message("time", limits), line, "time")
        if "out of memory" in message:
            return Failure(LuaEngine.limit_message("memory", limits), line, "memory")
        if message == "RangeError: Maximum call stack size exceeded":
            return Failure(
                f"stopped by the stack limit ({limits['stack_kb']} KB): {message}", line, "stack"
            )
        if message == "null":
            # quickjs throws null when it runs out of memory (it cannot allocate an Error
            # object), and the memory is freed before anything here can look. So does
            # `throw null`, which reads as the memory limit too.
            return Failure(LuaEngine.limit_message("memory", limits), line, "memory")
        return Failure(message, line)

    @staticmethod
    def describe(text: str) -> tuple[str, int | None]:
        """quickjs's ``"TypeError: ...\\n    at f (<input>:3:5)"`` as message and line."""
        message = text.split("\n", 1)[0].strip() or "error"
        found = JS_POSITION.search(text)
        return message, int(found.group(1)) if found else None

    def without_lone_surrogates(self, value: Any) -> Any:
        if isinstance(value, str):
            return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        if isinstance(value, list):
            return [self.without_lone_surrogates(v) for v in value]
        if isinstance(value, dict):
            return {
                self.without_lone_surrogates(k): self.without_lone_surrogates(v)
                for k, v in value.items()
            }
        return value


# ---------------------------------------------------------------------------------------
# The request loop


def handle(engines: dict[str, Any], request: dict[str, Any], data_text: str) -> dict[str, Any]:
    """One request's reply; ``data_text`` is ctx as JSON text."""
    limits = request["limits"]
    # The backstop: the default action of SIGALRM ends this process, even in C code.
    backstop = limits["time_ms"] / 1000 * 2 + ALARM_MARGIN_S
    signal.setitimer(signal.ITIMER_REAL, backstop)
    try:
        engine = engines[request["language"]]
        result, output = engine.run(request["code"], request["name"], data_text, limits)
    except Failure as failure:
        return {
            "ok": False,
            "message": failure.message,
            "line": failure.line,
            "limit": failure.limit,
        }
    except RecursionError:
        return {
            "ok": False,
            "message": "the data is nested too deeply",
            "line": None,
            "limit": None,
        }
    except Exception as error:  # a bug here must not cost the host its worker
        message = f"the script engine failed: {type(error).__name__}: {error}"
        return {"ok": False, "message": message, "line": None, "limit": None}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return {"ok": True, "result": result, "output": output}


def main() -> None:
    memory = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.path.extend(sys.argv[2:])
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    try:
        engines = {"lua": LuaEngine(), "javascript": JavaScriptEngine()}
    except ImportError as error:
        stdout.write(json.dumps({"ready": False, "error": str(error)}).encode() + b"\n")
        stdout.flush()
        return
    # The host starts a script's clock only once the engines are loaded.
    stdout.write(b'{"ready": true}\n')
    stdout.flush()
    while header := stdin.readline():
        data_text = stdin.readline().decode("utf-8")
        reply = handle(engines, json.loads(header), data_text)
        stdout.write(json.dumps(reply, ensure_ascii=True).encode("ascii") + b"\n")
        stdout.flush()


if __name__ == "__main__":
    main()
