"""``storyloom doctor``: check the data directory, the database, the models, the endpoints
and the sandbox.

Every check says what it found and, when something is wrong, how to fix it. The
endpoint checks load the openai SDK (over a second), so they import it when they run,
not when the command line starts.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import typer

from storyloom.cli.options import HomeOption
from storyloom.core.errors import StoryloomError
from storyloom.core.home import DataDirError, ensure_home, resolve_home
from storyloom.core.settings import (
    CHAT_ROLES,
    ChatEndpoint,
    EmbeddingEndpoint,
    Settings,
    SettingsStore,
)
from storyloom.llm.local_model import LocalModels
from storyloom.sandbox import sandbox_status
from storyloom.store.database import Database, SqliteVecUnavailable

if TYPE_CHECKING:
    from storyloom.llm.connection_check import ConnectionReport

Status = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""

    def render(self) -> str:
        mark = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}[self.status]
        line = f"[{mark}] {self.name}: {self.detail}"
        return f"{line}\n       fix: {self.fix}" if self.fix else line


def check_home(home: Path) -> Check:
    try:
        ensure_home(home)
        with tempfile.NamedTemporaryFile(dir=home, prefix=".doctor-"):
            pass
    except DataDirError as exc:
        detail, _, fix = str(exc).partition("; ")
        return Check("data directory", "fail", detail.removeprefix("data directory "), fix)
    except OSError as exc:
        return Check(
            "data directory",
            "fail",
            f"{home} is not writable ({exc.strerror})",
            "choose another with --home or STORYLOOM_HOME, or fix its permissions",
        )
    return Check("data directory", "ok", str(home))


def check_settings(store: SettingsStore) -> tuple[Check, Settings]:
    try:
        loaded = store.load()
    except DataDirError as exc:
        detail, _, fix = str(exc).partition("; ")
        return Check("settings", "fail", f"{detail}; nothing can be saved", fix), Settings()
    if loaded.error:
        return (
            Check(
                "settings",
                "fail",
                f"{loaded.error}; defaults are in use",
                f"edit {loaded.path} (the server never overwrites it on start), "
                "or save the settings again in the web app",
            ),
            loaded.effective,
        )
    where = (
        str(loaded.path) if loaded.path.exists() else f"{loaded.path} (not written yet: defaults)"
    )
    if loaded.env_overrides:
        where += f"; overridden by {', '.join(loaded.env_overrides)}"
    return Check("settings", "ok", where), loaded.effective


def check_database(home: Path) -> Check:
    try:
        db = Database.in_home(home)
    except SqliteVecUnavailable as exc:
        return Check(
            "database",
            "fail",
            str(exc),
            "reinstall with `make run` (sqlite-vec and apsw come from requirements.lock)",
        )
    except StoryloomError as exc:
        # The message is "what is wrong; how to fix it".
        detail, _, fix = str(exc).partition("; ")
        return Check("database", "fail", detail, fix or "see the message above")
    try:
        return Check(
            "database",
            "ok",
            f"{db.path} (schema {db.schema_version()}, journal {db.journal_mode()}, "
            f"sqlite-vec {db.vec_version()})",
        )
    finally:
        db.close()


def _chat_check(role: str, endpoint: ChatEndpoint, *, demo: bool) -> Check:
    """``demo``: with nothing set up, the embedded model would answer this role."""
    from storyloom.llm.connection_check import check_chat_endpoint
    from storyloom.llm.local_model import (
        LocalModelError,
        embedded_model_file,
        model_file,
        runtime_available,
    )

    if endpoint.local_model is not None:
        try:
            path = model_file(endpoint.local_model)
        except LocalModelError as exc:
            return Check(role, "fail", str(exc), f"fix {role}.local_model.path in Settings")
        if not runtime_available():
            return Check(role, "fail", "the llama.cpp runtime is not installed", "make setup")
        size = path.stat().st_size / 2**20
        return Check(
            role,
            "ok",
            f"local model {path} ({size:,.0f} MB, context {endpoint.local_model.context_size}); "
            "`storyloom serve` runs it",
        )
    if (
        demo
        and not endpoint.configured
        and embedded_model_file() is not None
        and runtime_available()
    ):
        return Check(
            role,
            "warn",
            "no model set up: `storyloom serve` answers with the embedded demo model "
            "(SmolLM2-135M, offline, tiny: enough to try storyloom, not for a good story)",
            "connect a real model in Settings (a base URL, or a .gguf file as Local model)",
        )
    if not endpoint.configured:
        env = f"STORYLOOM_{role.upper()}__BASE_URL and STORYLOOM_{role.upper()}__MODEL"
        return Check(
            role,
            "warn",
            "not configured",
            f"set base URL and model in Settings of the web app, or {env}",
        )
    return _from_report(role, asyncio.run(check_chat_endpoint(endpoint, role=role)))


def _embedding_check(endpoint: EmbeddingEndpoint) -> Check:
    from storyloom.llm.connection_check import check_embedding_endpoint

    return _from_report("embedding", asyncio.run(check_embedding_endpoint(endpoint)))


def _from_report(role: str, report: ConnectionReport) -> Check:
    if report.ok:
        return Check(role, "ok", report.message)
    return Check(role, "fail", report.message, _fix_for(report.kind, role))


def _fix_for(kind: str | None, role: str) -> str:
    return {
        "unreachable": f"start the model server, or correct {role}.base_url",
        "auth": f"set a valid API key for {role} in Settings",
        "model_not_found": f"set {role}.model to one the endpoint lists",
        "timeout": f"the endpoint is slow: raise {role}.timeout_s or check the server",
        "rate_limited": "wait, or use another key or endpoint",
        "not_configured": f"set {role}.base_url and {role}.model",
    }.get(kind or "", "see the message above")


def check_sandbox() -> Check:
    """A warning, not a failure, when it is missing: chats and workflows run without it;
    only plugin script tools, the CodeInterpreter and the isolation of chat scripts need
    it (``storyloom sandbox check`` runs a trial program)."""
    status = sandbox_status()
    if not status.available:
        return Check("sandbox", "warn", f"unavailable: {status.reason}", status.fix)
    limit = "pids cgroup" if status.process_limit == "cgroup" else "RLIMIT_NPROC"
    memory = "memory cgroup" if status.memory_limit == "cgroup" else "RLIMIT_AS per process"
    return Check(
        "sandbox",
        "ok",
        f"bubblewrap {status.bwrap} (seccomp filter on; process limit: {limit}; "
        f"memory limit: {memory})",
    )


def run_checks(home: Path, environ: Mapping[str, str] | None = None) -> list[Check]:
    env = os.environ if environ is None else environ
    checks = [check_home(home)]
    if checks[0].status == "fail":
        return checks
    settings_check, settings = check_settings(SettingsStore(home, env))
    checks += [settings_check, check_database(home), _embedding_check(settings.embedding)]
    local_models = LocalModels()
    for role in CHAT_ROLES:
        # The same decision the server makes: is it the embedded model that would answer?
        local = local_models.local_of(settings, role)
        demo = local is not None and not local.path
        checks.append(_chat_check(role, getattr(settings, role), demo=demo))
    checks.append(check_sandbox())
    return checks


def doctor(home: HomeOption = None) -> None:
    """Check the data directory, SQLite with sqlite-vec, the embedding model, the endpoints
    and the sandbox."""
    checks = run_checks(resolve_home(home))
    for check in checks:
        typer.echo(check.render())
    failed = [c for c in checks if c.status == "fail"]
    typer.echo(f"\n{len(checks) - len(failed)} ok or warnings, {len(failed)} failing")
    if failed:
        raise typer.Exit(1)
