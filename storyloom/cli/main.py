"""The ``storyloom`` command."""

from __future__ import annotations

import errno
import json
import socket
import sys
from pathlib import Path
from typing import Annotated

import typer
from pydantic import BaseModel

from storyloom import __version__
from storyloom.cli.chat import chat_app
from storyloom.cli.kb import kb_app
from storyloom.cli.options import HomeOption, fail
from storyloom.cli.project import project_app
from storyloom.cli.workflow import workflow_app
from storyloom.core.home import ensure_home, resolve_home
from storyloom.core.settings import SettingsStore

app = typer.Typer(
    help="storyloom: a local-first engine and web app for AI roleplay and long-form fiction.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(chat_app, name="chat")
app.add_typer(kb_app, name="kb")
app.add_typer(project_app, name="project")
app.add_typer(workflow_app, name="workflow")


def bind_socket(host: str, port: int) -> socket.socket:
    """Bind before starting uvicorn so a busy port is one clear line, not a traceback."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise fail(
                f"port {port} on {host} is already in use; stop what uses it or pass --port"
            ) from None
        raise fail(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


@app.command()
def serve(
    host: Annotated[
        str | None, typer.Option(help="Address to bind (default 127.0.0.1, from settings).")
    ] = None,
    port: Annotated[int | None, typer.Option(help="Port (default 8420, from settings).")] = None,
    token: Annotated[
        str | None,
        typer.Option(help="Access token; required off loopback (generated when not given)."),
    ] = None,
    project: Annotated[
        Path | None,
        typer.Option(
            help="Project folder the web app works on (default: <data dir>/projects/default).",
            show_default=False,
        ),
    ] = None,
    home: HomeOption = None,
) -> None:
    """Start the web server and print its address."""
    import uvicorn

    from storyloom.server.app import create_app
    from storyloom.server.token_auth import is_loopback, new_token

    data_dir = ensure_home(resolve_home(home))
    loaded = SettingsStore(data_dir).load()
    if loaded.error:
        typer.echo(
            f"storyloom: {loaded.error}\n  defaults are in use; the file was not changed",
            err=True,
        )
    bind_host = host or loaded.effective.server.host
    bind_port = loaded.effective.server.port if port is None else port
    if not is_loopback(bind_host) and not token:
        token = new_token()
    sock = bind_socket(bind_host, bind_port)
    actual_port = sock.getsockname()[1]
    shown_host = f"[{bind_host}]" if ":" in bind_host else bind_host
    address = f"http://{shown_host}:{actual_port}/"
    if token:
        address += f"?token={token}"
    application = create_app(
        data_dir, token=token, loopback_only=is_loopback(bind_host), project_dir=project
    )
    typer.echo(f"storyloom {__version__} serving {address}  (data: {data_dir})", err=False)
    sys.stdout.flush()
    config = uvicorn.Config(application, log_level="warning", ws="websockets-sansio")
    uvicorn.Server(config).run(sockets=[sock])


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(__version__)


@app.command()
def doctor(home: HomeOption = None) -> None:
    """Check the data directory, SQLite with sqlite-vec, the embedding model and endpoints."""
    from storyloom.cli.doctor import run_checks

    checks = run_checks(resolve_home(home))
    for check in checks:
        typer.echo(check.render())
    failed = [c for c in checks if c.status == "fail"]
    typer.echo(f"\n{len(checks) - len(failed)} ok or warnings, {len(failed)} failing")
    if failed:
        raise typer.Exit(1)


@app.command()
def openapi(
    output: Annotated[
        Path | None, typer.Argument(help="File to write (default: print).", show_default=False)
    ] = None,
) -> None:
    """Print the server's OpenAPI schema (the web app's types are generated from it)."""
    import tempfile

    from storyloom.core.atomic_io import atomic_write_text
    from storyloom.server.app import create_app

    with tempfile.TemporaryDirectory() as tmp:
        schema = create_app(Path(tmp), environ={}).openapi()
    text = json.dumps(schema, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
    if output is None:
        typer.echo(text, nl=False)
    else:
        atomic_write_text(output, text)


def _file_formats() -> dict[str, tuple[type[BaseModel], str]]:
    """Every user-editable file format: its model and the intro of its reference page."""
    from storyloom.core.settings import Settings
    from storyloom.knowledge.knowledge_base import KnowledgeBase
    from storyloom.project.project_file import ProjectFile
    from storyloom.workflow.workflow_file import Workflow

    return {
        "settings": (
            Settings,
            "`settings.json` in the data directory (`--home`, `$STORYLOOM_HOME` or "
            "`~/.storyloom`). Environment variables `STORYLOOM_<SECTION>__<FIELD>` override "
            "it, e.g. `STORYLOOM_USER_LLM__BASE_URL`.",
        ),
        "knowledge-base": (
            KnowledgeBase,
            "`knowledge.json` of a knowledge base folder (beside its `media/`): the KB's "
            "metadata and its CAIU entries. `storyloom kb schema` prints its JSON Schema.",
        ),
        "project": (
            ProjectFile,
            "`project.json` at the root of a project folder (`storyloom project init DIR`).",
        ),
        "workflow": (
            Workflow,
            "`workflows/<id>.json` in a project folder: a graph of nodes (config by name), "
            "edges from an output slot to an input slot, and the workflow's interface. "
            "See docs/workflows.md.",
        ),
    }


@app.command()
def schema(
    name: Annotated[
        str, typer.Argument(help="File format: settings, knowledge-base, project, workflow.")
    ],
    markdown: Annotated[
        bool, typer.Option("--markdown", help="A reference page instead of JSON Schema.")
    ] = False,
) -> None:
    """Print the JSON Schema (or a Markdown reference) of a file format."""
    from storyloom.core.model_reference import markdown_reference

    formats = _file_formats()
    if name not in formats:
        raise fail(f"no file format {name!r}; known: {', '.join(sorted(formats))}")
    model, intro = formats[name]
    if markdown:
        typer.echo(markdown_reference(model, f"{name} file format", intro), nl=False)
    else:
        typer.echo(json.dumps(model.model_json_schema(), indent=2, ensure_ascii=False))


def main() -> None:
    app()
