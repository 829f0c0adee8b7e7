"""``storyloom connections``: the named connections of settings.json, and the import of
SillyTavern's connection profiles."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from storyloom.cli.options import HomeOption, JsonOption, fail
from storyloom.core.errors import StoryloomError

connections_app = typer.Typer(
    help="Named connections (endpoint, model, API, templates, samplers) chats pick.",
    no_args_is_help=True,
)


@connections_app.command("list")
def list_connections(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """List the connections (keys never shown)."""
    from storyloom.core.home import resolve_home
    from storyloom.core.settings import SettingsStore

    try:
        settings = SettingsStore(resolve_home(home)).read_file()
    except StoryloomError as exc:
        raise fail(exc) from None
    views = settings.connection_views()
    if as_json:
        data = {n: v.model_dump(mode="json") for n, v in views.items()}
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    if not views:
        typer.echo("No connections.")
    for name, view in views.items():
        where = view.local_model.path if view.local_model else view.base_url
        typer.echo(f"{name}: {view.api} {where or '(no address)'} {view.model}".rstrip())


@connections_app.command("import-sillytavern")
def import_sillytavern(
    settings_json: Annotated[
        Path, typer.Argument(help="SillyTavern's settings.json (data/<user>/settings.json).")
    ],
    home: HomeOption = None,
    replace: Annotated[
        bool,
        typer.Option("--replace", help="Overwrite connections of the same name (keys kept)."),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Turn SillyTavern's connection profiles into connections. Profiles whose API
    storyloom cannot talk to are reported; no API keys come over (SillyTavern keeps them
    in secrets.json)."""
    from storyloom.core.home import ensure_home, resolve_home
    from storyloom.core.settings import SettingsStore
    from storyloom.project.connection_import import import_connections
    from storyloom.sillytavern.connection_profiles import read_connection_profiles

    try:
        profiles = read_connection_profiles(settings_json)
        if not profiles:
            raise fail(
                f"{settings_json}: no connection profiles (SillyTavern keeps them under "
                "extension_settings.connectionManager.profiles)"
            )
        store = SettingsStore(ensure_home(resolve_home(home)))
        new, result = import_connections(store.read_file(), profiles, replace=replace)
        if result.imported:
            store.save(new)
    except StoryloomError as exc:
        raise fail(exc) from None
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
        return
    for item in result.profiles:
        if item.name is not None:
            typer.echo(f"imported {item.name!r}: {item.api} {item.base_url} {item.model}".rstrip())
        else:
            typer.echo(f"not imported {item.source_name!r}")
        for note in item.notes:
            typer.echo(f"  - {note}")
    typer.echo(result.keys_note)
