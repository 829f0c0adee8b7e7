"""What every ``storyloom`` command shares: the common options and how a failure is shown."""

from __future__ import annotations

from collections.abc import Coroutine
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from storyloom.core.errors import FileFormatError, StoryloomError

_T = TypeVar("_T")

HomeOption = Annotated[
    Path | None,
    typer.Option(
        "--home",
        help="Data directory (default: $STORYLOOM_HOME, else ~/.storyloom).",
        show_default=False,
    ),
]
ProjectOption = Annotated[
    Path | None,
    typer.Option(
        "--project",
        help="Project folder (default: the current folder when it has project.json).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


def fail(problem: Exception | str) -> typer.Exit:
    """Print ``problem`` on stderr (a bad file: one line per field) and exit with 1."""
    if isinstance(problem, FileFormatError):
        typer.echo(f"storyloom: {problem.path}:", err=True)
        for field_problem in problem.problems:
            typer.echo(f"  {field_problem}", err=True)
    elif isinstance(problem, OSError) and problem.filename is not None:
        # A file or folder the command needs (the project, the data directory) is unusable.
        typer.echo(f"storyloom: cannot use {problem.filename} ({problem.strerror})", err=True)
    else:
        typer.echo(f"storyloom: {problem}", err=True)
    return typer.Exit(1)


def run_async(work: Coroutine[Any, Any, _T]) -> _T:
    """Run ``work`` to its end; a :class:`StoryloomError` it raises exits as :func:`fail`."""
    import asyncio

    try:
        return asyncio.run(work)
    except StoryloomError as exc:
        raise fail(exc) from None
