"""``storyloom export-sillytavern DIR``: the project written as a SillyTavern user folder.

Leaving is as easy as coming: DIR becomes a ``data/<user>/`` folder SillyTavern opens with
the project's characters, worlds, personas and chats (each chat's main path as the chat,
its other branches as branch files), its regex scripts, quick replies, backgrounds and
sprites. See :mod:`storyloom.server.st_move_out`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from storyloom.cli.context import project_or_default
from storyloom.cli.options import HomeOption, JsonOption, ProjectOption, fail
from storyloom.core.errors import StoryloomError
from storyloom.core.home import ensure_home, resolve_home


def export_sillytavern(
    dest: Annotated[
        Path,
        typer.Argument(
            metavar="DIR",
            help="The user folder to write (new or empty; SillyTavern's data/<user>/).",
        ),
    ],
    project: ProjectOption = None,
    home: HomeOption = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace DIR when it has files in it.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Write the project as a SillyTavern user folder: characters, worlds, personas, chats,
    regex scripts, quick replies, backgrounds, sprites."""
    from storyloom.server.st_move_out import export_user_folder

    data_dir = ensure_home(resolve_home(home))
    try:
        report = export_user_folder(
            data_dir, project_or_default(project, data_dir), dest, overwrite=overwrite
        )
    except (StoryloomError, OSError) as exc:
        raise fail(exc) from None
    if as_json:
        typer.echo(json.dumps(report.model_dump(mode="json"), ensure_ascii=False, indent=2))
        return
    counts = report.counts
    typer.echo(
        f"{report.dest}: {counts.characters} characters, {counts.worlds} worlds, "
        f"{counts.personas} personas, {counts.chats} chats + {counts.branches} branches, "
        f"{counts.groups} groups ({counts.group_chats} group chats), "
        f"{counts.regex_scripts} global regex scripts ({counts.allowed_regex} cards allowed), "
        f"{counts.quick_replies} quick reply sets, {counts.backgrounds} backgrounds, "
        f"{counts.sprites} sprites, {counts.themes} themes"
    )
    for problem in report.problems:
        typer.echo(f"  {problem.what}: {problem.reason}", err=True)
