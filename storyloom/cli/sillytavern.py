"""``storyloom import-sillytavern DIR``: a SillyTavern user folder moved in, in one go."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from storyloom.cli.context import project_or_default
from storyloom.cli.options import HomeOption, JsonOption, ProjectOption, fail
from storyloom.core.errors import StoryloomError
from storyloom.core.home import ensure_home, resolve_home

if TYPE_CHECKING:
    from storyloom.server.st_move_in_views import StFolderPreview, StImportReport, StProblem


def import_sillytavern(
    folder: Annotated[
        Path,
        typer.Argument(
            metavar="DIR",
            help="A SillyTavern user folder (data/<user>), or SillyTavern's root (with "
            "data/<user>/ or the old public/ layout).",
        ),
    ],
    user: Annotated[
        str | None,
        typer.Option(help="Which data/<user> of a root to take (default: default-user)."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print what would come; write nothing.")
    ] = False,
    as_json: JsonOption = False,
    project: ProjectOption = None,
    home: HomeOption = None,
) -> None:
    """Move a SillyTavern user in: characters, worlds, personas, chats (checkpoints and
    branches as branches of their chat), groups, presets, templates, variables. Every
    chat continues with its persona, books, regex allowance, preset and lore timers.
    Running it again brings only what changed; a broken file is named and skipped."""
    from storyloom.core.settings import SettingsStore
    from storyloom.knowledge.global_library import global_folders
    from storyloom.server.st_move_in import MoveInTarget, import_folder, preview_folder
    from storyloom.store.database import Database

    data_dir = ensure_home(resolve_home(home))
    settings = SettingsStore(data_dir).load().effective
    database = Database.in_home(data_dir)
    # A move-in writes rows all over the chat tables' indexes (ids are random): with the
    # file mapped, every page it touched would stay counted as this process's memory, up
    # to the whole database. Read through a bounded page cache (32 MiB) instead: as fast
    # here, and the memory stays flat however large the folder.
    database.connection().execute("PRAGMA mmap_size=0")
    database.connection().execute("PRAGMA cache_size=-32768")
    # Copy the log into the database every 64 MiB, not every 4 MiB (SQLite's default): a
    # chat's rows dirty pages all over the indexes, and each copy writes and syncs them.
    database.connection().execute("PRAGMA wal_autocheckpoint=16384")
    try:
        from storyloom.chat.store.turn_tree import TurnTree

        target = MoveInTarget(
            home=data_dir,
            project_dir=project_or_default(project, data_dir),
            tree=TurnTree(database),
            database=database,
            global_folders=global_folders(data_dir, settings.knowledge.global_folders),
        )
        if dry_run:
            preview = preview_folder(target, folder, user)
            typer.echo(preview.model_dump_json(indent=2) if as_json else _preview_text(preview))
            return
        report = import_folder(target, folder, user)
    except (StoryloomError, OSError) as exc:
        raise fail(exc) from None
    finally:
        database.close()
    typer.echo(report.model_dump_json(indent=2) if as_json else _report_text(report))


def _preview_text(preview: StFolderPreview) -> str:
    lines = [f"{preview.path} ({preview.layout} layout) would bring:"]
    for kind in preview.kinds:
        if kind.found:
            lines.append(
                f"  {kind.kind}: {kind.found} found, {kind.new} new, {kind.changed} changed"
            )
    lines += _problem_lines(preview.problems)
    return "\n".join(lines)


def _report_text(report: StImportReport) -> str:
    lines = [f"moved in from {report.path}:"]
    for count in report.counts:
        if count.added or count.updated or count.unchanged:
            lines.append(
                f"  {count.kind}: {count.added} added, {count.updated} updated, "
                f"{count.unchanged} unchanged"
            )
    if report.inactive:
        lines.append("kept but inactive:")
        lines += [f"  {item.what}: {item.why}" for item in report.inactive]
    lines += _problem_lines(report.problems)
    return "\n".join(lines)


def _problem_lines(problems: list[StProblem]) -> list[str]:
    if not problems:
        return []
    lines = ["could not be read (skipped):"]
    for problem in problems:
        where = f" {problem.field}" if problem.field else ""
        lines.append(f"  {problem.file}{where}: {problem.reason}")
    return lines
