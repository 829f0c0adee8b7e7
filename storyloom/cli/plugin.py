"""``storyloom plugin ...``: list the plugins found, write an example one, check one."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from storyloom.cli.context import project_or_cwd
from storyloom.cli.options import HomeOption, JsonOption, ProjectOption, fail
from storyloom.core.errors import StoryloomError
from storyloom.core.home import resolve_home

if TYPE_CHECKING:
    from storyloom.tools.plugin_loader import FoundPlugin, PluginProblem, Risk

plugin_app = typer.Typer(
    help="Plugins: list those found, write an example, validate a plugin folder.",
    no_args_is_help=True,
)


def _problem_json(problem: PluginProblem) -> dict[str, str]:
    return problem.model_dump()


def _plugin_json(plugin: FoundPlugin, problems: list[PluginProblem]) -> dict[str, Any]:
    manifest = plugin.manifest
    return {
        "name": plugin.name,
        "displayName": manifest.title,
        "version": manifest.version,
        "description": manifest.description,
        "folder": str(plugin.folder),
        "origin": plugin.origin,
        "enabled": plugin.enabled,
        "risk": plugin.risk,
        "riskReasons": list(plugin.risk_reasons),
        "granted": list(plugin.granted),
        "networkGranted": plugin.network_granted,
        "problems": [_problem_json(p) for p in problems],
    }


@plugin_app.command("list")
def list_(
    project: ProjectOption = None, home: HomeOption = None, as_json: JsonOption = False
) -> None:
    """Every plugin found in the project's and the user's plugins/ folders: version,
    where it comes from, whether it is enabled, its risk and its problems. Runs none of
    their code."""
    from storyloom.core.settings import SettingsStore
    from storyloom.tools.plugin_loader import discover_plugins

    data_dir = resolve_home(home)
    loaded = SettingsStore(data_dir).load()
    if loaded.error is not None:
        typer.echo(
            f"storyloom: {loaded.error} (defaults used: every plugin shows as off)", err=True
        )
    plugins, problems = discover_plugins(project_or_cwd(project), data_dir, loaded.effective)
    folders = {str(p.folder) for p in plugins}
    rows = [_plugin_json(p, [x for x in problems if x.folder == str(p.folder)]) for p in plugins]
    unloaded = [x for x in problems if x.folder not in folders]
    if as_json:
        document = {"plugins": rows, "problems": [_problem_json(p) for p in problems]}
        typer.echo(json.dumps(document, ensure_ascii=False, indent=2))
        return
    if not plugins and not problems:
        typer.echo("No plugins found (in <project>/plugins and <data dir>/plugins).")
        return
    for row in rows:
        state = "enabled" if row["enabled"] else "off"
        typer.echo(
            f"{row['name']} {row['version']}  [{row['origin']}, {state}, risk {row['risk']}]"
        )
        for reason in row["riskReasons"]:
            typer.echo(f"    {reason}")
        for problem in row["problems"]:
            typer.echo(f"    problem: {problem['field'] or problem['file']}: {problem['reason']}")
    if unloaded:
        typer.echo("Not loaded:")
        for problem in unloaded:
            field = f" {problem.field}:" if problem.field else ""
            typer.echo(f"  {problem.file}:{field} {problem.reason}")


@plugin_app.command("new")
def new(
    name: Annotated[str, typer.Argument(help="Plugin name, kebab-case (my-plugin).")],
    folder: Annotated[
        Path | None,
        typer.Option(
            "--dir",
            help="Where to write it (default: <project>/plugins/NAME, or <data dir>/plugins/"
            "NAME outside a project).",
            show_default=False,
        ),
    ] = None,
    project: ProjectOption = None,
    home: HomeOption = None,
) -> None:
    """Write a working example plugin: a node, two tools, a workflow, a config option and
    a web part. It is off until enabled."""
    from storyloom.tools.plugin_loader import PLUGINS_DIR
    from storyloom.tools.plugin_scaffold import write_example_plugin

    if folder is None:
        base = project_or_cwd(project) or resolve_home(home)
        folder = base / PLUGINS_DIR / name
    try:
        written = write_example_plugin(folder, name)
    except StoryloomError as exc:
        raise fail(exc) from None
    typer.echo(f"Wrote plugin {name!r} in {folder}:")
    for path in written:
        typer.echo(f"  {path.relative_to(folder)}")
    typer.echo(
        f"Check it with `storyloom plugin validate {folder}`, then enable it on the Tools page."
    )


@plugin_app.command("validate")
def validate(
    folder: Annotated[Path, typer.Argument(help="A plugin folder (holding plugin.yaml).")],
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Check a plugin: its manifest, its Python (imported to check it), its tool files and
    its workflows. Exits 1 listing each problem as file, field and reason."""
    from storyloom.plugins import node_registry
    from storyloom.tools.plugin_validation import validate_plugin

    if not folder.is_dir():
        raise fail(f"{folder} is not a folder")
    check = validate_plugin(folder, node_registry(entry_points=False), resolve_home(home))
    if as_json:
        document = {
            "ok": check.ok,
            "plugin": check.plugin.name if check.plugin is not None else None,
            "nodeTypes": check.node_types,
            "tools": check.tools,
            "workflows": check.workflows,
            "problems": [_problem_json(p) for p in check.problems],
        }
        typer.echo(json.dumps(document, ensure_ascii=False, indent=2))
        if not check.ok:
            raise typer.Exit(1)
        return
    if not check.ok:
        typer.echo(f"storyloom: {folder}: {len(check.problems)} problem(s):", err=True)
        for problem in check.problems:
            field = f" {problem.field}:" if problem.field else ""
            typer.echo(f"  {problem.file}:{field} {problem.reason}", err=True)
        raise typer.Exit(1)
    assert check.plugin is not None
    manifest = check.plugin.manifest
    typer.echo(
        f"ok: {manifest.name} {manifest.version}: {len(check.node_types)} node type(s), "
        f"{len(check.tools)} tool(s), {len(check.workflows)} workflow(s); "
        f"risk {check.plugin.risk}"
    )


def _set_enabled(
    project: Path | None,
    home: Path | None,
    name: str,
    enabled: bool,
    grant: bool,
    grant_network: bool = False,
    accept_risk: Risk | None = None,
) -> None:
    from storyloom.core.home import ensure_home
    from storyloom.core.settings import SettingsStore
    from storyloom.tools.plugin_host import set_plugin_enabled
    from storyloom.tools.plugin_loader import check_risk_accepted, discover_plugins

    data_dir = ensure_home(resolve_home(home))
    store = SettingsStore(data_dir)
    try:
        settings = store.read_file()
    except StoryloomError as exc:
        raise fail(exc) from None
    plugins, _ = discover_plugins(project_or_cwd(project), data_dir, settings)
    plugin = next((p for p in plugins if p.name == name), None)
    if plugin is None:
        known = ", ".join(p.name for p in plugins) or "none"
        raise fail(f"no plugin named {name!r} (found: {known}); see `storyloom plugin list`")
    if enabled:
        try:
            check_risk_accepted(
                plugin, accept_risk or _asked_risk(plugin), "pass --accept-risk high"
            )
        except StoryloomError as exc:
            raise fail(exc) from None
    overrides = plugin.manifest.permissions.grants()
    network = plugin.manifest.permissions.network
    set_plugin_enabled(
        store, name, enabled, grant, overrides, grant_network=grant_network and network
    )
    if not enabled:
        typer.echo(f"Disabled {name}.")
        return
    typer.echo(f"Enabled {name} (risk {plugin.risk}); it loads when storyloom next starts.")
    if overrides and not grant:
        typer.echo(
            "  wraps and overrides refused (pass --grant-overrides to allow): "
            + ", ".join(overrides)
        )
    if network:
        if grant_network:
            typer.echo("  network granted: its script tools may connect to other machines")
        else:
            typer.echo(
                "  network refused (pass --grant-network to allow): its script tools run offline"
            )
    elif grant_network:
        typer.echo("  --grant-network ignored: the plugin does not declare permissions.network")


def _asked_risk(plugin: FoundPlugin) -> Risk | None:
    """On a terminal, what the user answers when told a high-risk plugin's reasons; elsewhere
    (a script, CI) nothing: there only ``--accept-risk high`` accepts it."""
    if plugin.risk != "high" or not sys.stdin.isatty():
        return None
    typer.echo(f"{plugin.name} is high risk:")
    for reason in plugin.risk_reasons:
        typer.echo(f"  - {reason}")
    return "high" if typer.confirm("Enable it, trusting it with your account?") else None


@plugin_app.command("enable")
def enable(
    name: Annotated[str, typer.Argument(help="The plugin's name.")],
    grant_overrides: Annotated[
        bool,
        typer.Option(
            "--grant-overrides",
            help="Also allow the core components it wraps or replaces and the services it "
            "replaces (exactly what it declares).",
        ),
    ] = False,
    grant_network: Annotated[
        bool,
        typer.Option(
            "--grant-network",
            help="Let its script tools connect to other machines (if it declares "
            "permissions.network).",
        ),
    ] = False,
    accept_risk: Annotated[
        Literal["low", "medium", "high"] | None,
        typer.Option(
            "--accept-risk",
            help="Accept the plugin's risk by name: a high-risk one (Python inside "
            "storyloom, or overrides of core parts) needs 'high' (on a terminal you are "
            "asked instead).",
        ),
    ] = None,
    project: ProjectOption = None,
    home: HomeOption = None,
) -> None:
    """Turn a plugin on (its Python runs inside storyloom from then on)."""
    _set_enabled(project, home, name, True, grant_overrides, grant_network, accept_risk)


@plugin_app.command("disable")
def disable(
    name: Annotated[str, typer.Argument(help="The plugin's name.")],
    project: ProjectOption = None,
    home: HomeOption = None,
) -> None:
    """Turn a plugin off."""
    _set_enabled(project, home, name, False, False)
