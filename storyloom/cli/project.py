"""``storyloom project ...``: create and inspect projects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from storyloom.cli.options import fail
from storyloom.core.errors import StoryloomError

project_app = typer.Typer(
    help="Projects: project.json and the project layout.", no_args_is_help=True
)


@project_app.command("init")
def init(
    directory: Annotated[Path, typer.Argument(help="Project folder (created if missing).")],
    name: Annotated[str | None, typer.Option(help="Project name (default: folder name).")] = None,
) -> None:
    """Create project.json and the folders of seed 000 section 3.1."""
    from storyloom.project.project_file import LAYOUT_DIRS, PROJECT_FILE, init_project

    existed = (directory / PROJECT_FILE).exists()
    try:
        project = init_project(directory, name)
    except StoryloomError as exc:
        raise fail(exc) from None
    verb = "already a project" if existed else "created"
    typer.echo(f"{directory}: {verb} ({project.name}, id {project.id})")
    if not existed:
        typer.echo("folders: " + ", ".join(f"{d}/" for d in LAYOUT_DIRS))


@project_app.command("show")
def show(
    directory: Annotated[Path, typer.Argument(help="Project folder.")] = Path("."),
) -> None:
    """Print project.json as storyloom reads it (defaults filled in)."""
    from storyloom.project.project_file import load_project

    try:
        project = load_project(directory)
    except StoryloomError as exc:
        raise fail(exc) from None
    typer.echo(json.dumps(project.model_dump(mode="json"), ensure_ascii=False, indent=2))
