"""The ``storyloom`` command: the command groups and top-level commands, assembled.

Each group (``chat``, ``kb``, ``project``, ``workflow``) and each top-level command has
its own module; they share only what sits below them (``options``, ``context``) and
never import each other.
"""

from __future__ import annotations

import sys

import typer

from storyloom import __version__
from storyloom.cli.chat import chat_app
from storyloom.cli.connections import connections_app
from storyloom.cli.doctor import doctor
from storyloom.cli.kb import kb_app
from storyloom.cli.mcp import mcp_app
from storyloom.cli.options import fail
from storyloom.cli.plugin import plugin_app
from storyloom.cli.project import project_app
from storyloom.cli.sandbox import sandbox_app
from storyloom.cli.schemas import openapi, schema
from storyloom.cli.serve import serve
from storyloom.cli.sillytavern import import_sillytavern
from storyloom.cli.template import template_app
from storyloom.cli.tools import tools_app
from storyloom.cli.workflow import workflow_app
from storyloom.core.errors import StoryloomError

app = typer.Typer(
    help="storyloom: a local-first engine and web app for AI roleplay and long-form fiction.",
    no_args_is_help=True,
    add_completion=False,
)


def version() -> None:
    """Print the version."""
    typer.echo(__version__)


app.command()(serve)
app.command()(version)
app.command()(doctor)
app.command()(openapi)
app.command()(schema)
app.command("import-sillytavern")(import_sillytavern)
app.add_typer(chat_app, name="chat")
app.add_typer(connections_app, name="connections")
app.add_typer(kb_app, name="kb")
app.add_typer(plugin_app, name="plugin")
app.add_typer(mcp_app, name="mcp")
app.add_typer(project_app, name="project")
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(template_app, name="template")
app.add_typer(tools_app, name="tools")
app.add_typer(workflow_app, name="workflow")


def main() -> None:
    try:
        app()
    except StoryloomError as exc:
        # A domain error no command caught (the data directory unusable, say) is still one
        # clear message, never a traceback.
        fail(exc)
        sys.exit(1)
