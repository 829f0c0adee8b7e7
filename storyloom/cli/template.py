"""``storyloom template ...``: the instruct and context templates of text-completion
connections (built in, or SillyTavern files imported into the data directory)."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from storyloom.cli.options import HomeOption, JsonOption, fail
from storyloom.core.errors import StoryloomError

if TYPE_CHECKING:
    from storyloom.llm.instruct import TemplateKind, TemplateLibrary

template_app = typer.Typer(
    help="Instruct and context templates for text-completion APIs (SillyTavern's files).",
    no_args_is_help=True,
)


class Kind(StrEnum):
    instruct = "instruct"
    context = "context"


KindArgument = Annotated[Kind, typer.Argument(help="instruct or context")]
NameArgument = Annotated[str, typer.Argument(help="The template's name, e.g. 'Llama 3 Instruct'")]


def _library(home: Path | None) -> TemplateLibrary:
    from storyloom.core.home import ensure_home, resolve_home
    from storyloom.llm.instruct import TemplateLibrary

    return TemplateLibrary(ensure_home(resolve_home(home)))


@template_app.command("list")
def list_templates(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """The templates of both kinds; built-in ones are marked."""
    kinds: tuple[TemplateKind, ...] = ("instruct", "context")
    try:
        library = _library(home)
        listing = {
            kind: [
                {"name": name, "builtin": library.is_builtin(kind, name)}
                for name in library.names(kind)
            ]
            for kind in kinds
        }
    except StoryloomError as exc:
        raise fail(exc) from None
    if as_json:
        typer.echo(json.dumps(listing, ensure_ascii=False))
        return
    for kind, entries in listing.items():
        typer.echo(f"{kind}:")
        for entry in entries:
            typer.echo(f"  {entry['name']}{' (built in)' if entry['builtin'] else ''}")


@template_app.command("import")
def import_templates(
    files: Annotated[
        list[Path], typer.Argument(help="SillyTavern instruct/*.json or context/*.json files")
    ],
    home: HomeOption = None,
) -> None:
    """Store SillyTavern template files in the data directory, each validated whole (a
    bad file is named with its field and reason, and nothing of it is written)."""
    library = _library(home)
    failed = False
    for file in files:
        try:
            kind, name = library.import_file(file)
        except StoryloomError as exc:
            fail(exc)
            failed = True
            continue
        typer.echo(f"{file}: imported the {kind} template {name!r}")
    if failed:
        raise typer.Exit(1)


@template_app.command("show")
def show(kind: KindArgument, name: NameArgument, home: HomeOption = None) -> None:
    """Print a template as SillyTavern's JSON."""
    try:
        library = _library(home)
        template = library.instruct(name) if kind is Kind.instruct else library.context(name)
    except StoryloomError as exc:
        raise fail(exc) from None
    typer.echo(json.dumps(template.model_dump(mode="json"), ensure_ascii=False, indent=2))


@template_app.command("delete")
def delete(kind: KindArgument, name: NameArgument, home: HomeOption = None) -> None:
    """Remove a stored template (a built-in one of that name shows again)."""
    try:
        _library(home).delete(kind.value, name)
    except StoryloomError as exc:
        raise fail(exc) from None
    typer.echo(f"deleted the {kind.value} template {name!r}")
