"""The CodeInterpreter's program inside the sandbox: runs one piece of Python, JavaScript
or Node.js and reports what happened as one JSON object.

It runs under ``python -I -S`` in the sandbox, so it imports only the standard library
(and, for JavaScript, the ``_quickjs`` extension mounted read-only at ``/interpreter/pylib``);
nothing of the host's packages is reachable from here. For ``nodejs`` the forked child
execs the host's node (bound read-only at ``request["node"]``) on ``node_boot.js``, which
sends the outcome as JSON instead of marshal.

Protocol: stdin holds one request ``{language, code, timeout_s, output_bytes,
js_memory_mb, seed, persist}`` in ``marshal`` format (the host runs this same
interpreter; importing json would cost milliseconds of every call). When ``seed`` is
true the scratch of an earlier call is mounted read-only at ``/interpreter/seed`` and copied
into ``/scratch`` first. The user's code then runs in a forked child whose stdout and
stderr (fds 1 and 2, so the output of its own child processes too) are pipes this
parent drains, keeping the first ``output_bytes`` of each. The child runs in a process
group of its own: at the time limit, or once the child has ended, the whole group is
killed. Running the code in a child keeps the report safe from whatever the code does to
its own process (``os._exit``, a crash in ``ctypes``, closing fds, an endless loop).
Last, the parent lists ``/scratch`` and writes the report, JSON, as the last line of its
own stdout::

    {"stdout", "stderr", "value", "error", "exit_code", "limit",
     "files": [{"name", "size", "text"?}], "contents"?: [{"name", "data"}]}

``contents`` (base64 of every regular file in the scratch) is there only when
``persist`` is true: the host keeps the scratch for the next call of the same run.
The report is data written by a process the user's code shared a sandbox with, so the
host validates it before it writes anything.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal itself imports enum: slow
import binascii
import marshal
import os
import select
import sys
import time
from _json import encode_basestring_ascii

# Every import here costs each call's start: what the common path does not need
# (shutil, re, traceback, signal's enums) is imported where it is needed; contextlib,
# typing and json (whose import of re alone costs milliseconds) are not imported at
# all: annotations are never evaluated at run time, and the report's few JSON shapes
# are written below.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

SCRATCH = "/scratch"
SEED = "/interpreter/seed"
PYLIB = "/interpreter/pylib"
NODE_BOOT = "/interpreter/node_boot.js"
NODE_CODE = "/tmp/storyloom-code.js"
FILENAME = "<code>"

VALUE_MAX = 4096
"""Characters of the last expression's repr (or JSON) kept."""
ERROR_MAX = 1000
INLINE_MAX = 4096
"""A scratch file up to this size that is UTF-8 text is shown inline."""
INLINE_TOTAL = 64 * 1024
"""All inline texts together; past it files are listed without their text."""
DEPTH_MAX = 64  # folders deep a listed file may be: the host's cap (code_interpreter.py)
FILES_MAX = 500
"""Files listed (and persisted); a scratch with more is cut here."""
EXIT_GRACE_S = 0.2
"""How long the output of left-over grandchildren is still read after the child ends."""
JS_STACK_BYTES = 1024 * 1024


class _suppressed:
    """``contextlib.suppress``, without importing contextlib."""

    def __init__(self, *kinds: type[BaseException]) -> None:
        self.kinds = kinds

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> bool:
        return kind is not None and issubclass(kind, self.kinds)


# -- the child: runs the user's code ---------------------------------------------------


def _line_of_traceback(tb: Any) -> int | None:
    """The line of the innermost frame that is the user's code."""
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _user_frames(tb: Any) -> Any:
    """The traceback from the first frame of the user's code on (this runner's frames
    are noise to the reader)."""
    start = tb
    while start is not None and start.tb_frame.f_code.co_filename != FILENAME:
        start = start.tb_next
    return start if start is not None else tb


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _with_line(message: str, line: int | None) -> str:
    return _short(message, ERROR_MAX) + (f" (line {line})" if line else "")


def _run_python(code: str) -> dict[str, Any]:
    # _ast is the compiler's own (built-in) module; ast would import much more.
    import _ast
    import builtins
    import errno

    try:
        tree: Any = compile(code, FILENAME, "exec", _ast.PyCF_ONLY_AST)
        last = None
        final = tree.body[-1] if tree.body else None
        if isinstance(final, _ast.Expr):
            # The value of a final expression is the result, as in a notebook cell.
            tree.body.pop()
            last = compile(_ast.Expression(final.value), FILENAME, "eval")
        body = compile(tree, FILENAME, "exec")
    except (SyntaxError, ValueError) as exc:
        traceback = _traceback_module(code)
        sys.stderr.write("".join(traceback.format_exception_only(type(exc), exc)))
        if isinstance(exc, SyntaxError):
            message = f"{type(exc).__name__}: {exc.msg}"
            return {"error": _with_line(message, exc.lineno), "exit_code": 1}
        return {"error": f"{type(exc).__name__}: {exc}", "exit_code": 1}

    # A module of its own, as ``python script.py`` gives: pickle, dataclasses and
    # friends look classes up through sys.modules["__main__"].
    main = type(sys)("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    namespace = main.__dict__
    sys.argv = [FILENAME]
    try:
        exec(body, namespace)
        value = eval(last, namespace) if last is not None else None
    except SystemExit as exc:
        return _system_exit(exc)
    except BaseException as exc:
        traceback = _traceback_module(code)
        traceback.print_exception(type(exc), exc, _user_frames(exc.__traceback__))
        summary = traceback.format_exception_only(type(exc), exc)[-1].strip()
        outcome: dict[str, Any] = {
            "error": _with_line(summary, _line_of_traceback(exc.__traceback__)),
            "exit_code": 1,
        }
        if isinstance(exc, MemoryError):
            outcome["limit"] = "memory"
        elif isinstance(exc, OSError) and exc.errno == errno.EFBIG:
            outcome["limit"] = "file_size"
        return outcome
    if value is None:
        return {"exit_code": 0}
    try:
        shown = repr(value)
    except BaseException as exc:
        shown = f"<repr failed: {type(exc).__name__}: {exc}>"
    return {"value": _short(shown, VALUE_MAX), "exit_code": 0}


def _traceback_module(code: str) -> Any:
    """The traceback module, with the user's code known as the source of "<code>" so
    tracebacks show its lines."""
    import linecache
    import traceback

    linecache.cache[FILENAME] = (len(code), None, code.splitlines(True), FILENAME)
    return traceback


def _system_exit(exc: SystemExit) -> dict[str, Any]:
    code = exc.code
    if code is None or code == 0:
        return {"exit_code": 0}
    if isinstance(code, int):
        return {"error": f"SystemExit: exit code {code}", "exit_code": code & 0xFF}
    sys.stderr.write(f"{code}\n")
    return {"error": _short(f"SystemExit: {code}", ERROR_MAX), "exit_code": 1}


_JS_SETUP = """
(function (write) {
  const show = (v) => {
    if (typeof v === "string") return v;
    try {
      const text = JSON.stringify(v);
      return text === undefined ? String(v) : text;
    } catch (e) {
      return String(v);
    }
  };
  const to = (fd) => (...args) => { write(fd, args.map(show).join(" ") + "\\n"); };
  globalThis.console = { log: to(1), info: to(1), debug: to(1), warn: to(2), error: to(2) };
  globalThis.print = to(1);
})(globalThis.__write);
delete globalThis.__write;
"""

_JS_LINE = r"<input>:(\d+)"


def _run_javascript(code: str, memory_mb: int) -> dict[str, Any]:
    sys.path.insert(0, PYLIB)
    import _quickjs  # type: ignore[import-not-found]  # the extension quickjs-ng ships

    def write(fd: int, text: str) -> None:
        (sys.stdout if fd == 1 else sys.stderr).write(str(text))

    context = _quickjs.Context()
    context.set_memory_limit(memory_mb * 1024 * 1024)
    context.set_max_stack_size(JS_STACK_BYTES)
    context.add_callable("__write", write)
    context.eval(_JS_SETUP)
    # No quickjs time limit: with one set, JS cannot call into Python (console.log).
    # The parent kills this whole process at the time limit instead.
    try:
        value = context.eval(code)
        # Promise callbacks (an async function's awaits) run now, in order.
        while context.execute_pending_job():
            pass
    except _quickjs.JSException as exc:
        text = str(exc)
        sys.stderr.write(text if text.endswith("\n") else text + "\n")
        first = text.strip().splitlines()[0] if text.strip() else "Error"
        if ":" not in first:
            first = f"Uncaught {first}"
        import re

        found = re.search(_JS_LINE, text)
        outcome: dict[str, Any] = {
            "error": _with_line(first, int(found.group(1)) if found else None),
            "exit_code": 1,
        }
        if "out of memory" in first:
            outcome["limit"] = "memory"
        return outcome
    return {"value": _js_value(context, value), "exit_code": 0}


def _js_value(context: Any, value: Any) -> str | None:
    """The script's completion value as JSON (``String(v)`` where JSON cannot hold it);
    ``undefined`` and ``null`` are no value."""
    if value is None:
        return None
    if isinstance(value, bool | int | float | str):
        import json

        return _short(json.dumps(value, ensure_ascii=False), VALUE_MAX)
    text = value.json()
    if text is None:
        context.set("__value", value)
        text = context.eval("String(globalThis.__value)")
    return _short(str(text), VALUE_MAX)


def _child(request: dict[str, Any], out_w: int, err_w: int, outcome_w: int) -> None:
    """Run the code with fds 1 and 2 on the pipes; send the outcome; never return."""
    code = 1
    try:
        os.setpgid(0, 0)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        for fd in (null, out_w, err_w):
            os.close(fd)
        os.chdir(SCRATCH)
        # Line by line, so what was printed before a time limit stopped the code is seen.
        with _suppressed(AttributeError, ValueError):
            sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
        if request["language"] == "nodejs":
            _exec_node(request, outcome_w)
        elif request["language"] == "javascript":
            outcome = _run_javascript(request["code"], int(request["js_memory_mb"]))
        else:
            outcome = _run_python(request["code"])
        code = int(outcome.get("exit_code", 0))
        for stream in (sys.stdout, sys.stderr):
            # The user's code may have closed or replaced it.
            with _suppressed(Exception):
                stream.flush()
        _write_all(outcome_w, marshal.dumps(outcome))
    except BaseException as exc:
        with _suppressed(OSError):
            _write_all(2, f"interpreter runner: {type(exc).__name__}: {exc}\n".encode())
    finally:
        os._exit(code)


def _exec_node(request: dict[str, Any], outcome_w: int) -> NoReturn:
    """Become node running the code (never returns; an exec that fails raises)."""
    fd = os.open(NODE_CODE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    _write_all(fd, request["code"].encode("utf-8", "surrogatepass"))
    os.close(fd)
    os.set_inheritable(outcome_w, True)
    node = request["node"]
    heap = f"--max-old-space-size={int(request['js_memory_mb'])}"
    os.execv(node, [node, heap, NODE_BOOT, str(outcome_w), NODE_CODE])


# -- the parent: drains the pipes, enforces the time, reports ---------------------------


class _Capped:
    """The first ``limit`` bytes of a stream, and how many came in all."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kept = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.limit - len(self.kept)
        if room > 0:
            self.kept += data[:room]

    def text(self) -> str:
        text = self.kept.decode("utf-8", errors="replace")
        if self.total > len(self.kept):
            text += (
                f"\n[output truncated: {self.total} bytes in all, the first {len(self.kept)} shown]"
            )
        return text


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _restore_seed() -> str:
    """Copy the earlier call's scratch in; a problem is reported on stderr, not fatal."""
    if not os.path.isdir(SEED):
        return ""
    import shutil

    try:
        shutil.copytree(SEED, SCRATCH, dirs_exist_ok=True, symlinks=True)
    except (OSError, shutil.Error) as exc:
        return f"the scratch of the earlier calls could not be restored whole: {exc}\n"
    return ""


def _run_child(request: dict[str, Any], cap: int) -> tuple[_Capped, _Capped, bytes, int, bool]:
    """Fork the child and drain it: (stdout, stderr, outcome bytes, wait status, timed out)."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    res_r, res_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        # fd 1 (the report's) is replaced by the stdout pipe in the child.
        for fd in (out_r, err_r, res_r):
            os.close(fd)
        _child(request, out_w, err_w, res_w)
    for fd in (out_w, err_w, res_w):
        os.close(fd)
    # Also here: the child may not have done it yet. (OSError: it did, or is gone.)
    with _suppressed(OSError):
        os.setpgid(pid, pid)
    streams = {out_r: _Capped(cap), err_r: _Capped(cap), res_r: _Capped(1024 * 1024)}
    watched = set(streams)
    pidfd = os.pidfd_open(pid)
    deadline = time.monotonic() + float(request["timeout_s"])
    status: int | None = None
    ended_at = 0.0
    timed_out = False
    while True:
        now = time.monotonic()
        if status is None:
            if now >= deadline:
                timed_out = True
                _kill_group(pid)
                with _suppressed(OSError):  # the code may have left its group
                    os.kill(pid, _signal.SIGKILL)
                status = os.waitpid(pid, 0)[1]
                ended_at = time.monotonic()
                continue
            wait = deadline - now
            ready = select.select([*watched, pidfd], [], [], wait)[0]
        else:
            wait = ended_at + EXIT_GRACE_S - now
            if not watched or wait <= 0:
                break
            ready = select.select(list(watched), [], [], wait)[0]
        for fd in ready:
            if fd == pidfd:
                status = os.waitpid(pid, 0)[1]
                ended_at = time.monotonic()
                # What the code left running in its group ends with it.
                _kill_group(pid)
                continue
            data = os.read(fd, 65536)
            if data:
                streams[fd].feed(data)
            else:
                watched.discard(fd)
    os.close(pidfd)
    for fd in streams:
        os.close(fd)
    return streams[out_r], streams[err_r], bytes(streams[res_r].kept), status, timed_out


def _kill_group(pid: int) -> None:
    with _suppressed(OSError):  # nothing is left in the group
        os.killpg(pid, _signal.SIGKILL)


_SIGNAL_LIMITS: dict[int, str] = {_signal.SIGXCPU: "cpu_time", _signal.SIGXFSZ: "file_size"}


def _outcome(raw: bytes, status: int, timed_out: bool, *, node: bool) -> dict[str, Any]:
    """What ended the child, from its wait status and what it sent (marshal, or JSON from
    node; which the user's code could forge: only the expected keys and types are taken
    from it)."""
    outcome: dict[str, Any] = {}
    try:
        sent = _sent_by_node(raw) if node else marshal.loads(raw) if raw else {}
    except (ValueError, EOFError, TypeError):
        sent = {}
    if isinstance(sent, dict) and sent:
        outcome = {
            key: _short(sent[key], VALUE_MAX if key == "value" else ERROR_MAX)
            for key in ("value", "error")
            if isinstance(sent.get(key), str)
        }
        if sent.get("limit") in ("memory", "file_size"):
            outcome["limit"] = sent["limit"]
    if timed_out:
        return {"limit": "wall_time", "exit_code": None, "error": None}
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        import signal

        name = signal.Signals(number).name if number in signal.valid_signals() else str(number)
        limit = _SIGNAL_LIMITS.get(number)
        error = None if limit else f"the interpreter was killed by {name}"
        return {"limit": limit, "exit_code": None, "error": error}
    code = os.WEXITSTATUS(status)
    if not raw:
        # The code ended the process itself (os._exit) before any outcome was sent.
        return {"exit_code": code, "error": None if code == 0 else f"exit code {code}"}
    outcome["exit_code"] = code
    return outcome


def _sent_by_node(raw: bytes) -> object:
    if not raw:
        return {}
    import json

    return json.loads(raw.decode("utf-8", "replace"))


NODE_OUT_OF_MEMORY = "JavaScript heap out of memory"


def _scratch_files(persist: bool) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Every regular file under /scratch, by path relative to it (symlinks are not
    followed nor listed): name, size, and the text of small UTF-8 files; with
    ``persist`` also every file's content in base64."""
    files: list[dict[str, Any]] = []
    contents: list[dict[str, str]] = []
    inline_left = INLINE_TOTAL
    for folder, dirs, names in os.walk(SCRATCH):
        if folder.count("/") - SCRATCH.count("/") >= DEPTH_MAX - 1:
            # Deeper than the host keeps (and than os.walk's recursion reaches).
            dirs.clear()
        dirs.sort()
        for name in sorted(names):
            if len(files) >= FILES_MAX:
                return files, contents
            path = os.path.join(folder, name)
            relative = os.path.relpath(path, SCRATCH)
            try:
                if os.path.islink(path) or not os.path.isfile(path):
                    continue
                size = os.path.getsize(path)
                data = None
                if persist or (size <= INLINE_MAX and size <= inline_left):
                    with open(path, "rb") as handle:
                        data = handle.read()
            except OSError:
                continue
            entry: dict[str, Any] = {"name": relative, "size": size}
            if data is not None and size <= INLINE_MAX and size <= inline_left:
                try:
                    entry["text"] = data.decode("utf-8")
                    inline_left -= size
                except UnicodeDecodeError:
                    pass
            files.append(entry)
            if persist and data is not None:
                contents.append(
                    {"name": relative, "data": binascii.b2a_base64(data, newline=False).decode()}
                )
    return files, contents


def _json_string(text: str) -> str:
    # A lone surrogate (an undecodable file name, a str the code built) becomes "?":
    # the host takes text that UTF-8 can hold.
    clean = text.encode("utf-8", "replace").decode("utf-8")
    quoted: str = encode_basestring_ascii(clean)
    return quoted


def _json_text(value: object) -> str:
    """``value`` (dicts, lists, strings, ints, booleans and None: the report's shapes) as
    ASCII JSON."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, dict):
        items = (f"{_json_string(str(k))}:{_json_text(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_json_text(item) for item in value) + "]"
    raise TypeError(f"not reportable as JSON: {type(value).__name__}")


def main() -> None:
    # marshal: the host wrote it with this same interpreter (a trusted direction).
    request = marshal.loads(sys.stdin.buffer.read())
    cap = int(request["output_bytes"])
    notes = _restore_seed() if request.get("seed") else ""
    stdout, stderr, raw, status, timed_out = _run_child(request, cap)
    node = request["language"] == "nodejs"
    report = _outcome(raw, status, timed_out, node=node)
    if node and report.get("limit") is None and NODE_OUT_OF_MEMORY in stderr.text():
        # V8 aborts at its heap limit: that is the memory limit, not a crash.
        report.update(limit="memory", error=None)
    files, contents = _scratch_files(bool(request.get("persist")))
    report.update(
        stdout=stdout.text(),
        stderr=notes + stderr.text(),
        files=files,
    )
    if request.get("persist"):
        report["contents"] = contents
    _write_all(1, ("\n" + _json_text(report) + "\n").encode())


if __name__ == "__main__":
    main()
