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
    template: Annotated[
        Path | None,
        typer.Option(
            help="Start from this project folder (an interaction template): its files and "
            "settings are copied, and templateUsed records its id."
        ),
    ] = None,
) -> None:
    """Create project.json and the folders of seed 000 section 3.1."""
    from storyloom.project.interaction_template import init_from_template
    from storyloom.project.project_file import LAYOUT_DIRS, PROJECT_FILE, init_project

    existed = (directory / PROJECT_FILE).exists()
    try:
        if template is not None:
            project = init_from_template(directory, template, name)
        else:
            project = init_project(directory, name)
    except StoryloomError as exc:
        raise fail(exc) from None
    verb = "already a project" if existed else "created"
    typer.echo(f"{directory}: {verb} ({project.name}, id {project.id})")
    if template is not None:
        typer.echo(f"from template {template} (id {project.templateUsed})")
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
