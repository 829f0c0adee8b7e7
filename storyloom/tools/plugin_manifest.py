"""``plugin.yaml``: what a plugin is and what it asks for (seed 003 §6.2, §15.1.1, §17,
§20.4), one pydantic model; and :class:`ExtensionInfo`, what the web app is told about an
enabled plugin (``GET /api/plugins``).

Besides the seed's fields a manifest may name ``workflows: {entry}`` (workflows it ships,
usable as ``workflow:`` tools) and ``permissions.network`` (it talks to other machines).
``nodes``, ``tools`` and ``workflows`` default to the folders of those names when left
out, so a file dropped into ``tools/`` is not silently ignored.

Hook permissions are ``hook:<server|client>:<area>:<event>`` (seed §6.2): the server
hooks are the pluggy hooks of :data:`SERVER_HOOKS`; the client hooks are the web
extension API's (:data:`CLIENT_HOOKS`). Wraps and overrides of core parts take effect
only once the user grants them, exactly as declared: ``permissions.ui.wrap`` (granted as
``wrap:ui:<Component>``) and ``permissions.ui.override`` (``ui:<Component>``). A
component id must be one of storyloom's wrap points (:data:`WRAP_POINTS`); the seed's ids
for parts storyloom does not have are refused with the reason (:data:`NO_COMPONENT`).
``permissions.services.override`` is refused when not empty (:data:`SERVICE_OVERRIDE_REFUSED`
says why), and ``frontend.dev`` is reported and not used (:data:`DEV_ENTRY_REFUSED`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal, TypeGuard, get_args

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from storyloom.core.errors import FieldProblem, FileFormatError, problems_from_validation
from storyloom.tools.config_options import ConfigOption, plugin_key_problem

MANIFEST_FILE = "plugin.yaml"
PLUGIN_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
MAX_NAME = 64
_HOOK = re.compile(r"hook:(server|client):[a-z0-9-]+(?::[a-z0-9-]+)+")

SERVER_HOOKS: dict[str, str] = {
    "hook:server:workflow:before-execute": "storyloom_workflow_before_execute",
    "hook:server:nodemanager:before-register": "storyloom_nodemanager_before_register",
    "hook:server:settings:before-save": "storyloom_settings_before_save",
    "hook:server:chat:after-turn": "storyloom_chat_after_turn",
    "hook:server:tool:before-call": "storyloom_tool_before_call",
}
"""Permission string → the pluggy hook a plugin implements for it."""

ClientHook = Literal[
    "hook:client:auth:login",
    "hook:client:workflow:before-execute",
    "hook:client:settings:before-save",
    "hook:client:node:render-after",
    "hook:client:chat:message-rendered",
]
CLIENT_HOOKS: tuple[ClientHook, ...] = get_args(ClientHook)
"""The hooks of the web extension API (``extensionApi.hooks.on``); a plugin's frontend may
register only those its manifest declares. The web app's list is checked against the API
schema, where :class:`ExtensionInfo` carries these as an enum."""

WrapPoint = Literal["ui:BaseNode", "ui:ChatMessage", "ui:SettingsPanel", "ui:SidebarManager"]
WRAP_POINTS: dict[WrapPoint, str] = {
    "ui:BaseNode": "a node of the workflow editor (WorkflowNode.vue)",
    "ui:ChatMessage": "a message of the chat (ChatMessageItem.vue)",
    "ui:SettingsPanel": "the settings page (SettingsPage.vue)",
    "ui:SidebarManager": "the workflow editor's side panel (WorkflowSidePanel.vue)",
}
"""Core component id → the storyloom component a plugin may wrap or override there (every
:data:`WrapPoint`, checked by a test)."""


def is_wrap_point(value: str) -> TypeGuard[WrapPoint]:
    return value in WRAP_POINTS


def is_client_hook(value: str) -> TypeGuard[ClientHook]:
    return value in CLIENT_HOOKS


def granted_wraps(granted: Iterable[str]) -> list[WrapPoint]:
    """The components the grants ``wrap:ui:X`` among ``granted`` name."""
    found: list[WrapPoint] = []
    for grant in granted:
        component = grant.removeprefix(WRAP_PERMISSION)
        if component != grant and is_wrap_point(component):
            found.append(component)
    return found


NO_COMPONENT: dict[str, str] = {
    "ui:NodeInputControl": "node settings are one form (NodeConfigForm), not one control per input",
    "ui:GraphEditor": "the workflow page drives its canvas directly; wrap ui:BaseNode instead",
    "ui:ContextMenu": "storyloom has no context menu",
    "ui:HomeSidebar": "storyloom has no home page sidebar",
    "ui:StatusBar": "storyloom's editor has no status bar",
    "ui:RightPreviewPanel": "storyloom has no floating preview panel",
    "ui:MainMenu": "the app's navigation is part of the page frame, not a component",
}
"""The seed's core component ids (003 §21.2) that are no wrap point here, and why."""

WRAP_PERMISSION = "wrap:"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)


def _relative(value: str) -> str:
    """A path inside the plugin folder, written with ``/``."""
    path = PurePosixPath(value.replace("\\", "/"))
    if not value.strip() or path.is_absolute() or ".." in path.parts:
        raise ValueError("must be a path inside the plugin folder (relative, no '..')")
    return str(path)


def _all_relative(value: list[str]) -> list[str]:
    return [_relative(path) for path in value]


class EntrySection(_Section):
    entry: str = Field(description="File or folder, relative to plugin.yaml")

    _entry = field_validator("entry")(_relative)


DEV_ENTRY_REFUSED = (
    "storyloom does not run or proxy a Vite dev server: it serves the built frontend "
    "(build.outputDir, or vanilla.rootDir). Rebuild with `vite build --watch` and reload the "
    "page; the plugin loads with its build and this entry is not used"
)


class DevFrontend(_Section):
    """The seed's Vite dev-mode entry: read only to tell the author it is not used
    (:data:`DEV_ENTRY_REFUSED`)."""

    entry: str = Field(description="Source entry for a Vite dev server: not used (reported)")


class BuildFrontend(_Section):
    entry: str = Field(description="Built JS entry, relative to outputDir")
    styles: list[str] = Field(default_factory=list, description="CSS files, relative to outputDir")
    output_dir: str = Field(
        default=".", alias="outputDir", description="Folder served under /plugins/<name>/"
    )

    _paths = field_validator("entry", "output_dir")(_relative)
    _styles = field_validator("styles")(_all_relative)


class VanillaFrontend(_Section):
    entry: str = Field(description="JS entry, relative to rootDir")
    styles: list[str] = Field(default_factory=list, description="CSS files, relative to rootDir")
    root_dir: str = Field(
        default="web", alias="rootDir", description="Folder served under /plugins/<name>/"
    )

    _paths = field_validator("entry", "root_dir")(_relative)
    _styles = field_validator("styles")(_all_relative)


class Frontend(_Section):
    """Web assets. ``vanilla`` is plain JS served as it is; ``vite`` (the default) serves
    the ``build`` output. A section with neither is reported and the plugin loads without
    a frontend."""

    type: Literal["vite", "vanilla"] | None = None
    dev: DevFrontend | None = None
    build: BuildFrontend | None = None
    vanilla: VanillaFrontend | None = None

    def served(self) -> tuple[str, str, list[str]] | None:
        """``(folder, entry, styles)`` relative to the plugin folder, or None when the
        section says nothing servable."""
        kind = self.type or ("vanilla" if self.vanilla is not None else "vite")
        if kind == "vanilla" and self.vanilla is not None:
            return self.vanilla.root_dir, self.vanilla.entry, list(self.vanilla.styles)
        if kind == "vite" and self.build is not None:
            return self.build.output_dir, self.build.entry, list(self.build.styles)
        return None

    def missing(self) -> str | None:
        """Why nothing would be served, or None."""
        if self.served() is not None:
            return None
        if self.type == "vanilla":
            return "type vanilla needs a vanilla section {entry, rootDir}"
        if self.type == "vite":
            return "type vite needs a build section {entry, outputDir}"
        return "needs a build section (vite) or a vanilla section"


def _component(value: str) -> str:
    if not value.startswith("ui:") or len(value) == 3:
        raise ValueError(f"{value!r}: a core component is written ui:<Component>")
    if value in NO_COMPONENT:
        raise ValueError(f"{value!r} is no wrap point of storyloom: {NO_COMPONENT[value]}")
    if value not in WRAP_POINTS:
        known = ", ".join(WRAP_POINTS)
        raise ValueError(f"{value!r} is no wrap point of storyloom (known: {known})")
    return value


# The outlets the web app has (web/src: every <PluginOutlet name=...>): seed 003 §21.3's
# seventeen, the seed §20 example's modal:footer, and storyloom's chat:message:actions. The
# side-panel outlets take the panel's id in brackets: storyloom's panels are the workflow
# editor's side-panel tabs.
OUTLETS: tuple[str, ...] = (
    "layout:header:before-tabs",
    "layout:header:after-tabs",
    "layout:header:right",
    "editor:toolbar:left",
    "editor:toolbar:center",
    "editor:toolbar:right",
    "editor:canvas:overlay",
    "editor:statusbar:left",
    "editor:statusbar:right",
    "sidebar:icon-bar:tabs:before",
    "sidebar:icon-bar:tabs:after",
    "sidebar:icon-bar:bottom:before",
    "sidebar:panel:header[{panelId}]",
    "sidebar:panel:footer[{panelId}]",
    "node:header:left",
    "node:header:right",
    "node:footer",
    "modal:footer",
    "chat:message:actions",
)
SIDE_PANELS: tuple[str, ...] = ("node", "interface", "run")
_PANEL_OUTLET = re.compile(r"sidebar:panel:(header|footer)\[([^\]]*)\]")


def _outlet(value: str) -> str:
    if value in OUTLETS and "{" not in value:
        return value
    panel = _PANEL_OUTLET.fullmatch(value)
    if panel is not None:
        if panel.group(2) in SIDE_PANELS:
            return value
        known = ", ".join(SIDE_PANELS)
        raise ValueError(f"{value!r}: no side panel {panel.group(2)!r} (known: {known})")
    known = ", ".join(OUTLETS)
    raise ValueError(f"{value!r} is no outlet of storyloom (known: {known})")


Outlet = Annotated[str, AfterValidator(_outlet)]


def _hook(value: str) -> str:
    if not _HOOK.fullmatch(value):
        raise ValueError(f"{value!r}: write hook:<server|client>:<area>:<event>")
    if value.startswith("hook:server:") and value not in SERVER_HOOKS:
        known = ", ".join(SERVER_HOOKS)
        raise ValueError(f"{value!r} is not a server hook of storyloom (known: {known})")
    if value.startswith("hook:client:") and value not in CLIENT_HOOKS:
        known = ", ".join(CLIENT_HOOKS)
        raise ValueError(f"{value!r} is not a client hook of storyloom (known: {known})")
    return value


Component = Annotated[str, AfterValidator(_component)]
HookPermission = Annotated[str, AfterValidator(_hook)]


class UiPermissions(_Section):
    wrap: list[Component] = Field(
        default_factory=list, description="Core components wrapped (ui:X): needs a grant"
    )
    inject: list[Outlet] = Field(default_factory=list, description="Outlets added to")
    override: list[Component] = Field(
        default_factory=list, description="Core components replaced (ui:X): needs a grant"
    )


SERVICE_OVERRIDE_REFUSED = (
    "storyloom has no replaceable core services (the seed's workflowManager is a Python "
    "runner that plugins extend through permissions.hooks and node types); a plugin that "
    "needs to replace one is refused. Leave this list empty"
)


class ServicePermissions(_Section):
    """The seed's ``services.override`` (replace a core service, e.g. workflowManager):
    storyloom refuses a non-empty list, naming why, instead of granting what nothing
    honours. An empty list (the seed's examples write one) is accepted."""

    override: list[str] = Field(
        default_factory=list, description="Must be empty: core services cannot be replaced"
    )

    @field_validator("override")
    @classmethod
    def _refused(cls, value: list[str]) -> list[str]:
        if value:
            raise ValueError(f"{', '.join(map(repr, value))}: {SERVICE_OVERRIDE_REFUSED}")
        return value


class Permissions(_Section):
    hooks: list[HookPermission] = Field(
        default_factory=list, description="hook:<server|client>:<area>:<event> used"
    )
    ui: UiPermissions = Field(default_factory=UiPermissions)
    services: ServicePermissions = Field(default_factory=ServicePermissions)
    network: bool = Field(default=False, description="It connects to other machines")

    @property
    def server_hooks(self) -> list[str]:
        """The pluggy hook names the plugin may implement."""
        return [SERVER_HOOKS[h] for h in self.hooks if h in SERVER_HOOKS]

    @property
    def client_hooks(self) -> list[ClientHook]:
        """The web extension API hooks the plugin's frontend may register."""
        return [h for h in self.hooks if is_client_hook(h)]

    def overrides(self) -> list[str]:
        """Every override permission, as granted: ``ui:<X>`` (service overrides are
        refused when the manifest is read)."""
        return list(self.ui.override)

    def grants(self) -> list[str]:
        """Every permission the user must grant, as granted: ``wrap:ui:<X>``, then the
        overrides."""
        return [*(f"{WRAP_PERMISSION}{c}" for c in self.ui.wrap), *self.overrides()]


class PluginManifest(_Section):
    """``plugin.yaml``: a plugin's name, what it ships and the permissions it asks for."""

    name: str = Field(description="kebab-case, unique; prefixes its node types and tool ids")
    display_name: str = Field(default="", alias="displayName", description="Shown to people")
    version: str = Field(min_length=1)
    description: str = ""
    nodes: EntrySection | None = Field(default=None, description="Python node modules")
    tools: EntrySection | None = Field(default=None, description="Folder of *.tool.json")
    workflows: EntrySection | None = Field(default=None, description="Folder of workflows")
    frontend: Frontend | None = None
    config_options: list[ConfigOption] = Field(default_factory=list, alias="configOptions")
    permissions: Permissions = Field(default_factory=Permissions)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if len(value) > MAX_NAME or not PLUGIN_NAME.fullmatch(value):
            raise ValueError(
                f"must be kebab-case (lowercase letters and digits joined by '-', at most "
                f"{MAX_NAME}), e.g. my-plugin"
            )
        return value

    @field_validator("version", mode="before")
    @classmethod
    def _version(cls, value: Any) -> Any:
        # YAML reads `version: 1.0` as a number.
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        return value

    @model_validator(mode="after")
    def _option_keys(self) -> PluginManifest:
        seen: set[str] = set()
        for index, option in enumerate(self.config_options):
            problem = plugin_key_problem(option.key, self.name)
            if problem is not None:
                raise ValueError(f"configOptions[{index}].key: {problem}")
            if option.key in seen:
                raise ValueError(f"configOptions[{index}].key: {option.key!r} is declared twice")
            seen.add(option.key)
        return self

    @property
    def title(self) -> str:
        return self.display_name or self.name


class FrontendInfo(_Section):
    entry_url: str = Field(alias="entryUrl")
    style_urls: list[str] = Field(default_factory=list, alias="styleUrls")


class ExtensionInfo(_Section):
    """An enabled plugin as the web app loads it (seed §15.1.1), plus what its frontend
    may do: the wraps and overrides the user granted it (any other it declares is
    refused) and the client hooks it declares (any other is refused)."""

    name: str
    display_name: str = Field(alias="displayName")
    version: str
    description: str = ""
    frontend: FrontendInfo | None = None
    config_options: list[ConfigOption] = Field(default_factory=list, alias="configOptions")
    overrides: list[WrapPoint] = Field(
        default_factory=list, description="Core components it was granted to override"
    )
    wraps: list[WrapPoint] = Field(
        default_factory=list, description="Core components it was granted to wrap"
    )
    hooks: list[ClientHook] = Field(
        default_factory=list, description="Client hooks it declares (hook:client:...)"
    )


def parse_manifest(data: Any, path: Path) -> PluginManifest:
    """A manifest from parsed YAML; :class:`FileFormatError` names every bad field."""
    if not isinstance(data, dict):
        raise FileFormatError(path, [FieldProblem("", "must be a mapping of fields")])
    try:
        return PluginManifest.model_validate(data)
    except ValidationError as exc:
        raise FileFormatError(path, _manifest_problems(exc)) from None


def _manifest_problems(exc: ValidationError) -> list[FieldProblem]:
    problems = []
    for problem in problems_from_validation(exc):
        # A model validator names the field in its message: move it into the path.
        field, sep, reason = problem.reason.partition(": ")
        if sep and _FIELD_IN_REASON.fullmatch(field):
            joined = f"{problem.field}.{field}" if problem.field else field
            problems.append(FieldProblem(joined, reason))
        else:
            problems.append(problem)
    return problems


_FIELD_IN_REASON = re.compile(r"[A-Za-z]\w*(\[\d+\])?(\.\w+(\[\d+\])?)*")


def read_manifest_data(path: Path) -> Any:
    """The parsed YAML of ``plugin.yaml`` (``yaml.safe_load``: no Python objects)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise FileFormatError(path, [FieldProblem("", f"cannot read: {exc.strerror}")]) from None
    except UnicodeDecodeError as exc:
        raise FileFormatError(path, [FieldProblem("", f"not UTF-8 text ({exc})")]) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        reason = getattr(exc, "problem", None) or str(exc)
        raise FileFormatError(
            path, [FieldProblem("", f"not valid YAML ({where}{reason})")]
        ) from None
    except RecursionError:
        raise FileFormatError(
            path, [FieldProblem("", "not valid YAML (nested too deeply)")]
        ) from None


def load_manifest(path: Path) -> PluginManifest:
    """Read and validate one ``plugin.yaml``."""
    return parse_manifest(read_manifest_data(path), path)
