"""Finding plugins: every ``plugins/<folder>/plugin.yaml`` of the project and of the data
directory, read, checked and rated for risk, without running any of their code.

A plugin that does not load is a :class:`PluginProblem` (its folder, the file, the field,
the reason) and is left out; the others load. Unlike the seed's sample loader, an
unusable ``frontend`` section costs the plugin its web part only: its nodes and tools
still load. A plugin whose name another plugin already has is reported and left out
(the project's plugins are read before the user's, so the project's wins).

Risk tells the user what enabling a plugin lets it do:

- **high**: it ships Python (``nodes/*.py`` runs inside the server process, with the
  user's rights) or asks to replace core UI components or services (overrides);
- **medium**: it hooks into storyloom's work (``permissions.hooks``), wraps core UI
  components, or talks to other machines (``permissions.network``);
- **low**: anything else (web parts in outlets, tool files, workflows).

A high-risk plugin is enabled only when the user accepted that risk by name
(:func:`check_risk_accepted`): the Tools page's confirmation, ``acceptRisk: "high"`` over
REST, ``storyloom plugin enable --accept-risk high`` (or the CLI's question on a terminal).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel

from storyloom.core.errors import Conflict, FieldProblem, FileFormatError
from storyloom.core.settings import Settings
from storyloom.tools.plugin_manifest import (
    DEV_ENTRY_REFUSED,
    MANIFEST_FILE,
    PluginManifest,
    parse_manifest,
    read_manifest_data,
)
from storyloom.tools.tool_definition import TOOL_FILE_SUFFIX

PLUGINS_DIR = "plugins"
DEFAULT_NODES = "nodes"
DEFAULT_TOOLS = "tools"
DEFAULT_WORKFLOWS = "workflows"

Origin = Literal["project", "user"]
Risk = Literal["low", "medium", "high"]
_RISK_ORDER: dict[Risk, int] = {"low": 0, "medium": 1, "high": 2}


class RiskNotAccepted(Conflict):
    """A high-risk plugin was asked to be enabled without the user accepting the risk."""

    def __init__(self, plugin: FoundPlugin, how: str) -> None:
        super().__init__(
            f"plugin {plugin.name!r} is {plugin.risk} risk: {'; '.join(plugin.risk_reasons)}. "
            f"Enabling it trusts it with your account: {how}"
        )
        self.plugin = plugin.name
        self.risk = plugin.risk


def check_risk_accepted(plugin: FoundPlugin, accepted: Risk | None, how: str) -> None:
    """Refuse to enable a high-risk plugin unless ``accepted`` is its risk (``how`` tells
    the user the way to accept it where they are)."""
    if plugin.risk == "high" and accepted != "high":
        raise RiskNotAccepted(plugin, how)


class PluginProblem(BaseModel):
    """Something wrong with a plugin: where (folder, file, field) and why."""

    folder: str
    file: str
    field: str = ""
    reason: str

    def __str__(self) -> str:
        where = f"{self.file}: {self.field}" if self.field else self.file
        return f"{where}: {self.reason}"


@dataclass(frozen=True)
class FoundPlugin:
    """A plugin found on disk whose manifest is valid; enabled or not."""

    manifest: PluginManifest
    folder: Path
    origin: Origin
    enabled: bool
    granted: tuple[str, ...]
    risk: Risk
    risk_reasons: tuple[str, ...]
    node_modules: tuple[Path, ...]
    tool_files: tuple[Path, ...]
    workflow_files: tuple[Path, ...]
    network_granted: bool = False
    """It declares ``permissions.network`` and the user granted it when enabling."""

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def manifest_path(self) -> Path:
        return self.folder / MANIFEST_FILE


def plugin_roots(project_dir: Path | None, home: Path) -> list[tuple[Path, Origin]]:
    roots: list[tuple[Path, Origin]] = []
    if project_dir is not None:
        roots.append((project_dir / PLUGINS_DIR, "project"))
    roots.append((home / PLUGINS_DIR, "user"))
    return roots


def discover_plugins(
    project_dir: Path | None, home: Path, settings: Settings
) -> tuple[list[FoundPlugin], list[PluginProblem]]:
    """Every plugin of the project (``<project>/plugins``) and of the user
    (``<home>/plugins``), and the problems of those that did not load."""
    found: list[FoundPlugin] = []
    problems: list[PluginProblem] = []
    names: dict[str, Path] = {}
    for root, origin in plugin_roots(project_dir, home):
        for folder in _folders(root):
            plugin = read_plugin(folder, origin, settings, problems)
            if plugin is None:
                continue
            first = names.get(plugin.name)
            if first is not None:
                problems.append(
                    PluginProblem(
                        folder=str(folder),
                        file=str(plugin.manifest_path),
                        field="name",
                        reason=f"plugin {plugin.name!r} is already loaded from {first}; "
                        "rename one of them",
                    )
                )
                continue
            names[plugin.name] = folder
            found.append(plugin)
    return found, problems


def _folders(root: Path) -> list[Path]:
    try:
        return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return []


def read_plugin(
    folder: Path, origin: Origin, settings: Settings, problems: list[PluginProblem]
) -> FoundPlugin | None:
    """One plugin folder, or None (with its problems added) when it cannot load."""
    manifest_path = folder / MANIFEST_FILE

    def report(field: str, reason: str, file: Path = manifest_path) -> None:
        problems.append(
            PluginProblem(folder=str(folder), file=str(file), field=field, reason=reason)
        )

    if not manifest_path.is_file():
        report("", f"no {MANIFEST_FILE}: a plugin folder needs one")
        return None
    try:
        manifest = _manifest_sparing_the_rest(manifest_path, report)
    except FileFormatError as exc:
        for problem in exc.problems:
            report(problem.field, problem.reason)
        return None

    if manifest.frontend is not None:
        if manifest.frontend.dev is not None:
            report("frontend.dev.entry", DEV_ENTRY_REFUSED)
        missing = manifest.frontend.missing()
        if missing is not None:
            report("frontend", f"{missing}; the plugin loads without its web part")
        else:
            _check_frontend_files(folder, manifest, report)

    node_modules = _entries(folder, manifest.nodes, DEFAULT_NODES, "nodes", report, ".py")
    tool_files = _entries(folder, manifest.tools, DEFAULT_TOOLS, "tools", report, TOOL_FILE_SUFFIX)
    workflow_files = _entries(
        folder, manifest.workflows, DEFAULT_WORKFLOWS, "workflows", report, ".json"
    )
    risk, reasons = assess_risk(manifest, node_modules, folder)
    declared = set(manifest.permissions.grants())
    granted = tuple(g for g in settings.plugins.granted.get(manifest.name, []) if g in declared)
    return FoundPlugin(
        manifest=manifest,
        folder=folder,
        origin=origin,
        enabled=manifest.name in settings.plugins.enabled,
        granted=granted,
        risk=risk,
        risk_reasons=reasons,
        node_modules=node_modules,
        tool_files=tool_files,
        workflow_files=workflow_files,
        network_granted=manifest.permissions.network and manifest.name in settings.plugins.network,
    )


class _Report(Protocol):
    def __call__(self, field: str, reason: str, file: Path = ...) -> None: ...


def _manifest_sparing_the_rest(path: Path, report: _Report) -> PluginManifest:
    """The manifest; when only its ``frontend`` section is bad, the manifest without it
    (the frontend problems reported)."""
    data = read_manifest_data(path)
    try:
        return parse_manifest(data, path)
    except FileFormatError as exc:
        if not isinstance(data, dict) or "frontend" not in data:
            raise
        if not all(_under(p, "frontend") for p in exc.problems):
            raise
        manifest = parse_manifest({k: v for k, v in data.items() if k != "frontend"}, path)
        for problem in exc.problems:
            report(problem.field, f"{problem.reason}; the plugin loads without its web part")
        return manifest


def _under(problem: FieldProblem, field: str) -> bool:
    return problem.field == field or problem.field.startswith((f"{field}.", f"{field}["))


def _check_frontend_files(folder: Path, manifest: PluginManifest, report: _Report) -> None:
    assert manifest.frontend is not None
    served = manifest.frontend.served()
    assert served is not None
    root, entry, styles = served
    section = "frontend.vanilla" if manifest.frontend.vanilla is not None else "frontend.build"
    base = folder / root
    if not base.is_dir():
        key = "rootDir" if section == "frontend.vanilla" else "outputDir"
        report(f"{section}.{key}", f"no folder {root!r} in the plugin")
        return
    for field, name in ((f"{section}.entry", entry), *((f"{section}.styles", s) for s in styles)):
        if not (base / name).is_file():
            report(field, f"no file {name!r} in {root!r}")


def _entries(
    folder: Path,
    declared: object,
    default: str,
    section: str,
    report: _Report,
    suffix: str,
) -> tuple[Path, ...]:
    entry = getattr(declared, "entry", None)
    path = folder / (entry or default)
    if not path.exists():
        if entry is not None:
            report(f"{section}.entry", f"no file or folder {entry!r} in the plugin")
        return ()
    if path.is_file():
        if not path.name.endswith(suffix):
            report(f"{section}.entry", f"{entry!r} is not a {suffix} file")
            return ()
        return (path,)
    return tuple(
        sorted(
            p
            for p in path.iterdir()
            if p.is_file() and p.name.endswith(suffix) and not p.name.startswith(("_", "."))
        )
    )


def assess_risk(
    manifest: PluginManifest, node_modules: Iterable[Path], folder: Path
) -> tuple[Risk, tuple[str, ...]]:
    """How much enabling the plugin trusts it, and every reason, riskiest first."""
    permissions = manifest.permissions
    reasons: list[tuple[Risk, str]] = []
    modules = [str(p.relative_to(folder)) for p in node_modules]
    if modules:
        reasons.append(
            ("high", f"runs Python code inside the server process ({', '.join(modules)})")
        )
    if permissions.ui.override:
        reasons.append(
            ("high", f"replaces core UI components: {', '.join(permissions.ui.override)}")
        )
    if permissions.hooks:
        reasons.append(("medium", f"hooks into: {', '.join(permissions.hooks)}"))
    if permissions.ui.wrap:
        reasons.append(("medium", f"wraps core UI components: {', '.join(permissions.ui.wrap)}"))
    if permissions.network:
        reasons.append(("medium", "connects to other machines"))
    if permissions.ui.inject:
        reasons.append(("low", f"adds UI to: {', '.join(permissions.ui.inject)}"))
    if manifest.frontend is not None and manifest.frontend.served() is not None:
        # Its script runs in storyloom's page, with the page's access to the API.
        reasons.append(
            ("medium", "runs its own JavaScript in the web app (it can do what you can there)")
        )
    reasons.sort(key=lambda r: -_RISK_ORDER[r[0]])
    risk: Risk = reasons[0][0] if reasons else "low"
    return risk, tuple(text for _, text in reasons)
