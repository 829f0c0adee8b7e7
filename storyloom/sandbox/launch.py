"""The sandbox's first process: set the run's resource limits, then become the program.

Runs INSIDE the sandbox, as ``python -I -S /sandbox/launch.py``, where storyloom is not
importable: the standard library only. What to run is in ``/sandbox/request`` (bwrap
copies it in from a pipe, so every run's command line is the same): NUL-separated, the
limits first, then the program's argv.

The limits are set here, not before bwrap, because RLIMIT_NPROC counts the processes of
a user per user namespace: set before bwrap made the sandbox's namespace, it would count
every process the host user has.

The limits are ``key=value`` pairs joined by commas (``cpu=10,memory=536870912,kind=as,
nproc=32,fsize=16777216,nofile=256,python=1``), not JSON: this file is on the path of
every sandboxed run, and importing ``json`` (which imports ``re``) would cost more than
the rest of it. For the same reason it imports only modules that ``python -I -S`` has
loaded already, plus ``resource`` (and ``runpy`` for ``-m``, folders and zips).

When ``python=1``, ARGV is the sandbox's own interpreter (``python -I -S ...``) and the
script, ``-c`` code or ``-m`` module runs in this process, with ``sys.argv`` as that
``python`` would give it: one interpreter start instead of two. Any other program (or
interpreter flags this does not know) is exec'd.
"""

import _signal  # type: ignore[import-not-found]  # signal's wrapper imports enum: slow
import io
import posix
import resource
import sys

# Interpreter flags that change nothing here: the launcher already runs with -I -S, and
# writing bytecode fails quietly on the read-only mounts anyway.
IGNORED_FLAGS = frozenset("ISEsBq")
REQUEST = "/sandbox/request"


def parse_limits(text: str) -> dict[str, int]:
    """``"cpu=10,kind=as,..."`` as a dict (``kind`` is 1 for RLIMIT_AS, 0 for RLIMIT_DATA)."""
    limits: dict[str, int] = {}
    for pair in text.split(","):
        key, _, value = pair.partition("=")
        limits[key] = (1 if value == "as" else 0) if key == "kind" else int(value)
    return limits


def set_limits(limits: dict[str, int]) -> None:
    """Lower this process's resource limits to the run's; children inherit them."""
    cpu = limits["cpu"]
    # SIGXCPU at the soft limit; SIGKILL a second later if it is caught or ignored.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    memory = limits["memory"]
    kind = resource.RLIMIT_AS if limits["kind"] else resource.RLIMIT_DATA
    resource.setrlimit(kind, (memory, memory))
    if "nproc" in limits:
        resource.setrlimit(resource.RLIMIT_NPROC, (limits["nproc"], limits["nproc"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["fsize"], limits["fsize"]))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["nofile"], limits["nofile"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def find_program(name: str) -> str:
    """``name`` itself when it has a slash, else the first match on PATH (as execvp)."""
    if "/" in name:
        return name
    for folder in posix.environ.get(b"PATH", b"/usr/bin:/bin").decode().split(":"):
        candidate = f"{folder or '.'}/{name}"
        if posix.access(candidate, posix.X_OK):
            return candidate
    return name


def exec_program(argv: list[str]) -> None:
    """Replace this process with ``argv``; on failure say why and exit 126/127."""
    # Python ignores SIGPIPE and SIGXFSZ; an exec'd program must get the defaults back
    # (SIGXFSZ is how RLIMIT_FSIZE stops a C program).
    for name in ("SIGPIPE", "SIGXFSZ", "SIGXFZ"):
        number = getattr(_signal, name, None)
        if number is not None:
            _signal.signal(number, _signal.SIG_DFL)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        posix.execv(find_program(argv[0]), argv)
    except OSError as exc:
        sys.stderr.write(f"sandbox: cannot run {argv[0]!r}: {exc.strerror}\n")
        sys.stderr.flush()
        posix._exit(126 if isinstance(exc, PermissionError) else 127)


def run_python(argv: list[str]) -> None:
    """Run ``python [flags] (-c CODE | -m MODULE | SCRIPT | -) ARGS`` in this process."""
    args = argv[1:]
    unbuffered = False
    while args and args[0].startswith("-") and args[0] not in ("-", "-c", "-m"):
        letters = args[0][1:]
        if not letters or not set(letters) <= IGNORED_FLAGS | {"u"}:
            exec_program(argv)
            return
        unbuffered = unbuffered or "u" in letters
        args = args[1:]
    if unbuffered:
        sys.stdout = io.TextIOWrapper(
            io.FileIO(1, "w", closefd=False), encoding="utf-8", write_through=True
        )
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False),
            encoding="utf-8",
            errors="backslashreplace",
            write_through=True,
        )
    if args[:1] == ["-m"] and len(args) >= 2:
        import runpy

        sys.argv = [args[1], *args[2:]]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    elif args[:1] == ["-c"] and len(args) >= 2:
        sys.argv = ["-c", *args[2:]]
        run_source(args[1], "<string>", None)
    elif not args or args[0] == "-":
        sys.argv = args or [""]
        run_source(sys.stdin.read(), "<stdin>", None)
    else:
        sys.argv = list(args)
        path = args[0]
        # As `python script.py` does (and -I does not): a script imports its neighbours.
        folder = path.rpartition("/")[0] or "."
        sys.path.insert(0, folder if folder.startswith("/") else f"{posix.getcwd()}/{folder}")
        try:
            with io.open_code(path) as file:
                source = file.read()
        except IsADirectoryError:
            source = None
        if source is None or source[:4] == b"PK\x03\x04":
            import runpy  # a folder or a zip with __main__.py

            runpy.run_path(path, run_name="__main__")
        else:
            run_source(source, path, path)


def run_source(source: str | bytes, filename: str, file: str | None) -> None:
    """Run ``source`` as a fresh ``__main__`` module, as ``python -c`` or a script does."""
    import builtins

    main = type(sys)("__main__")
    main.__dict__["__builtins__"] = builtins
    if file is not None:
        main.__dict__["__file__"] = file
    sys.modules["__main__"] = main
    exec(compile(source, filename, "exec"), main.__dict__)


def report_uncaught(exc: BaseException) -> None:
    """Print the traceback as python would, without the launcher's own frames; exit 1."""
    own = {__file__, "<frozen runpy>"}
    runpy_module = sys.modules.get("runpy")
    if runpy_module is not None and getattr(runpy_module, "__file__", None):
        own.add(str(runpy_module.__file__))
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename in own:
        tb = tb.tb_next
    sys.excepthook(type(exc), exc.with_traceback(tb), tb)
    sys.exit(1)


def read_request() -> tuple[dict[str, int], list[str]]:
    """The limits and the argv from :data:`REQUEST`."""
    with open(REQUEST, "rb") as file:
        fields = file.read().split(b"\0")
    # The same decoding Python gives its own argv (UTF-8 under LANG=C.UTF-8).
    argv = [field.decode("utf-8", "surrogateescape") for field in fields[1:]]
    return parse_limits(fields[0].decode()), argv


def main() -> None:
    limits, argv = read_request()
    set_limits(limits)
    if not limits.get("python"):
        exec_program(argv)
        return
    try:
        run_python(argv)
    except SystemExit:
        raise
    except BaseException as exc:
        report_uncaught(exc)


if __name__ == "__main__":
    main()
