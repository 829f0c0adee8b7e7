"""The plugins of one process (server or CLI): which are on, their Python loaded, their
hooks and node types registered.

A plugin found on disk is off until the user enables it (``settings.plugins.enabled``):
enabling runs its code inside this process. For an enabled plugin each ``nodes/*.py``
module is imported from its file under a module name of its own (a plugin's modules
form one package, so ``from . import helpers`` works; two plugins never share a module)
and its hook implementations are registered on one pluggy manager together with the
built-in ones:

- a module that fails to import is a problem of its plugin; its other modules and the
  other plugins load;
- an implementation of a server hook the manifest does not declare in
  ``permissions.hooks`` is not registered (the rest of the module is) and is reported;
- node types must be named ``<plugin>:<Name>`` (a plugin cannot replace ``core:*``);
  each goes into the node registry, where a ``storyloom_nodemanager_before_register``
  hook may refuse it. Disabling the plugin removes them again.

Wraps and overrides (``permissions.ui.wrap``, ``permissions.ui.override``) are refused
unless granted when the plugin was enabled (:func:`set_plugin_enabled`): the web app is
told only the granted ones (:attr:`ExtensionInfo.wraps`, :attr:`ExtensionInfo.overrides`)
and the client hooks the plugin declares (:attr:`ExtensionInfo.hooks`). Likewise a plugin's script
tools get the network only when it declares ``permissions.network`` and the user granted
it when enabling.
"""

from __future__ import annotations

import importlib.util
import itertools
import logging
import sys
import types
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pluggy

from storyloom.core.errors import NotFound, StoryloomError
from storyloom.core.plugin_markers import PROJECT
from storyloom.core.settings import PluginSettings, Settings, SettingsStore
from storyloom.tools import hookspecs as tool_hookspecs
from storyloom.tools.config_options import ConfigOption, OptionValues
from storyloom.tools.plugin_loader import (
    FoundPlugin,
    PluginProblem,
    Risk,
    check_risk_accepted,
    discover_plugins,
)
from storyloom.tools.plugin_manifest import (
    SERVER_HOOKS,
    ExtensionInfo,
    FrontendInfo,
    granted_wraps,
    is_wrap_point,
)
from storyloom.tools.secret_store import SecretStore
from storyloom.tools.tool_definition import ServiceTool, load_tool_file
from storyloom.workflow import hookspecs as workflow_hookspecs
from storyloom.workflow.node_registry import NodeRegistry, NodeTypeConflict, NodeTypeRefused
from storyloom.workflow.node_type import NodeType

logger = logging.getLogger(__name__)

MODULE_PREFIX = "_storyloom_plugin"
# Process-wide: two hosts in one process (a server and a CLI call in tests) must never
# share a package name, or the second would reuse the first one's modules.
_LOADS = itertools.count(1)
_PERMISSION_OF = {hook: permission for permission, hook in SERVER_HOOKS.items()}


Discover = Callable[[Settings], tuple[list[FoundPlugin], list[PluginProblem]]]


class PluginNotFound(NotFound):
    pass


@dataclass
class _Loaded:
    """What loading one enabled plugin put in place, to take it away again."""

    plugin: FoundPlugin
    signature: tuple[Any, ...]
    package: str
    pluggy_names: list[str] = field(default_factory=list)
    namespaces: list[types.SimpleNamespace] = field(default_factory=list)
    node_types: list[str] = field(default_factory=list)
    problems: list[PluginProblem] = field(default_factory=list)

    def report(self, file: Path | str, field: str, reason: str) -> None:
        self.problems.append(
            PluginProblem(
                folder=str(self.plugin.folder), file=str(file), field=field, reason=reason
            )
        )


class PluginHost:
    """Plugins found for one project and data directory; :meth:`reload` after the
    plugin folders or the enabled set change."""

    def __init__(
        self,
        project_dir: Path | None,
        home: Path,
        settings: Callable[[], Settings],
        node_registry: NodeRegistry,
        *,
        builtins: Iterable[object] = (),
        discover: Discover | None = None,
    ) -> None:
        """``builtins``: storyloom's own hook implementations (modules or objects, such
        as the built-in tools' ``storyloom_tools``), registered first and never refused.
        ``discover``: how plugins are found (default: the project's and the user's
        plugin folders)."""
        self.project_dir = project_dir
        self._discover: Discover = discover or (
            lambda settings: discover_plugins(project_dir, home, settings)
        )
        self.home = home
        self.node_registry = node_registry
        self.secrets = SecretStore(home)
        self.plugins: list[FoundPlugin] = []
        self.problems: list[PluginProblem] = []
        self._settings = settings
        self._discovery_problems: list[PluginProblem] = []
        self._runtime_problems: list[PluginProblem] = []
        self._loaded: dict[str, _Loaded] = {}
        self._manager = pluggy.PluginManager(PROJECT)
        self._manager.add_hookspecs(workflow_hookspecs)
        self._manager.add_hookspecs(tool_hookspecs)
        for builtin in builtins:
            self._manager.register(builtin)
        node_registry.hooks = self._manager.hook
        self.reload()

    @property
    def hook(self) -> pluggy.HookRelay:
        """Call a hook on the built-ins and every enabled plugin:
        ``host.hook.storyloom_chat_after_turn(conversation_id=..., message=...)``."""
        return self._manager.hook

    # -- discovery and loading -------------------------------------------------------

    def reload(self, settings: Settings | None = None) -> None:
        """Find the plugins again; load those newly enabled or changed on disk, unload
        those disabled or gone. ``settings``: the settings to go by (default: the
        current ones)."""
        settings = settings if settings is not None else self._settings()
        found, problems = self._discover(settings)
        wanted = {p.name: p for p in found if p.enabled}
        for name in list(self._loaded):
            plugin = wanted.get(name)
            if plugin is None or _signature(plugin) != self._loaded[name].signature:
                self._unload(name)
        fresh = [p for name, p in wanted.items() if name not in self._loaded]
        # Every new plugin's hooks first, so a before-register hook sees all node types.
        for plugin in fresh:
            self._loaded[plugin.name] = self._import(plugin)
        for plugin in fresh:
            self._register_node_types(self._loaded[plugin.name])
        for name, plugin in wanted.items():
            self._loaded[name].plugin = plugin
        self.plugins = found
        self._discovery_problems = problems
        self._runtime_problems = []
        self._collect_problems()

    def close(self) -> None:
        """Unload every plugin: node types out of the registry, modules forgotten."""
        for name in list(self._loaded):
            self._unload(name)
        self.node_registry.hooks = None
        self._collect_problems()

    def _collect_problems(self) -> None:
        loaded = [p for name in sorted(self._loaded) for p in self._loaded[name].problems]
        self.problems = [*self._discovery_problems, *loaded, *self._runtime_problems]

    def _import(self, plugin: FoundPlugin) -> _Loaded:
        package = f"{MODULE_PREFIX}_{next(_LOADS)}_{plugin.name.replace('-', '_')}"
        loaded = _Loaded(plugin, _signature(plugin), package)
        if not plugin.node_modules:
            return loaded
        # One package per plugin load: relative imports between its modules work, and a
        # reload after an edit imports the new code instead of reusing the old modules.
        root = types.ModuleType(package)
        root.__path__ = [str(plugin.node_modules[0].parent)]
        sys.modules[package] = root
        several = len(plugin.node_modules) > 1
        for path in plugin.node_modules:
            module = self._import_module(loaded, f"{package}.{path.stem}", path)
            if module is None:
                continue
            namespace = self._permitted_hooks(loaded, module, path)
            name = f"{plugin.name}/{path.stem}" if several else plugin.name
            try:
                self._manager.register(namespace, name=name)
            except (pluggy.PluginValidationError, ValueError) as exc:
                loaded.report(path, "", f"hooks not registered: {exc}")
                continue
            loaded.pluggy_names.append(name)
            loaded.namespaces.append(namespace)
        return loaded

    @staticmethod
    def _import_module(loaded: _Loaded, module_name: str, path: Path) -> types.ModuleType | None:
        existing = sys.modules.get(module_name)
        if existing is not None:  # imported already by a sibling's relative import
            return existing
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            loaded.report(path, "", "cannot be imported as a Python module")
            return None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except (Exception, SystemExit) as exc:
            sys.modules.pop(module_name, None)
            loaded.report(path, "", f"import failed: {type(exc).__name__}: {exc}")
            logger.warning(
                "plugin %s: %s failed to import", loaded.plugin.name, path, exc_info=True
            )
            return None
        return module

    def _permitted_hooks(
        self, loaded: _Loaded, module: types.ModuleType, path: Path
    ) -> types.SimpleNamespace:
        """The module's hook implementations that may be registered."""
        declared = set(loaded.plugin.manifest.permissions.server_hooks)
        permitted: dict[str, Any] = {}
        for attr in dir(module):
            options = self._manager.parse_hookimpl_opts(module, attr)
            if options is None:
                continue
            hook_name = options.get("specname") or attr
            caller = getattr(self._manager.hook, hook_name, None)
            if caller is None or caller.spec is None:
                loaded.report(path, attr, f"{hook_name} is not a storyloom hook; not registered")
                continue
            permission = _PERMISSION_OF.get(hook_name)
            if permission is not None and hook_name not in declared:
                loaded.report(
                    path,
                    "permissions.hooks",
                    f"{attr} implements {hook_name}, but plugin.yaml does not declare "
                    f"{permission!r}; not registered",
                )
                continue
            permitted[attr] = getattr(module, attr)
        return types.SimpleNamespace(**permitted)

    def _register_node_types(self, loaded: _Loaded) -> None:
        prefix = f"{loaded.plugin.name}:"
        for namespace, pluggy_name in zip(loaded.namespaces, loaded.pluggy_names, strict=True):
            provide = getattr(namespace, "storyloom_node_types", None)
            if provide is None:
                continue
            where = loaded.plugin.folder / f"{pluggy_name.partition('/')[2] or 'nodes'}"
            try:
                provided = list(provide() or [])
            except Exception as exc:
                loaded.report(where, "storyloom_node_types", f"{type(exc).__name__}: {exc}")
                continue
            for cls in provided:
                if not (isinstance(cls, type) and issubclass(cls, NodeType)):
                    loaded.report(where, "storyloom_node_types", f"{cls!r} is not a NodeType")
                    continue
                type_name = getattr(cls, "type", "")
                if not isinstance(type_name, str) or not type_name.startswith(prefix):
                    loaded.report(
                        where,
                        "storyloom_node_types",
                        f"node type {type_name!r} must be named {prefix}<Name>",
                    )
                    continue
                try:
                    self.node_registry.register(cls)
                except (NodeTypeConflict, NodeTypeRefused) as exc:
                    loaded.report(where, "storyloom_node_types", str(exc))
                    continue
                loaded.node_types.append(type_name)

    def _unload(self, name: str) -> None:
        loaded = self._loaded.pop(name)
        for type_name in loaded.node_types:
            self.node_registry.unregister(type_name)
        for pluggy_name in loaded.pluggy_names:
            self._manager.unregister(name=pluggy_name)
        for module_name in [m for m in sys.modules if m.partition(".")[0] == loaded.package]:
            sys.modules.pop(module_name, None)

    # -- queries -----------------------------------------------------------------------

    def plugin(self, name: str) -> FoundPlugin:
        for plugin in self.plugins:
            if plugin.name == name:
                return plugin
        raise PluginNotFound(f"no plugin named {name!r}")

    def enabled_plugins(self) -> list[FoundPlugin]:
        return [p for p in self.plugins if p.enabled and p.name in self._loaded]

    def enabled_folders(self) -> dict[str, Path]:
        """The enabled plugins' folders by name (whose ``scripts/`` chat:Script may run)."""
        return {p.name: p.folder for p in self.enabled_plugins()}

    def problems_of(self, plugin: FoundPlugin) -> list[PluginProblem]:
        return [p for p in self.problems if p.folder == str(plugin.folder)]

    def node_types_of(self, name: str) -> list[str]:
        """The node types an enabled plugin registered."""
        loaded = self._loaded.get(name)
        return list(loaded.node_types) if loaded is not None else []

    def plugin_of_impl(self, pluggy_name: str | None) -> str | None:
        """The plugin a hook implementation belongs to (``HookImpl.plugin_name``), or
        None for a built-in one."""
        for name, loaded in self._loaded.items():
            if pluggy_name in loaded.pluggy_names:
                return name
        return None

    def service_tools(self) -> list[ServiceTool]:
        """Every ``storyloom_tools`` tool: the built-ins' and the enabled plugins'."""
        return [tool for _, tool in self.service_tools_by_plugin()]

    def service_tools_by_plugin(self) -> list[tuple[str | None, ServiceTool]]:
        """``(plugin name or None for built-ins, tool)`` for every ``storyloom_tools``
        tool; an implementation that raises is reported and skipped."""
        out: list[tuple[str | None, ServiceTool]] = []
        for impl in self._manager.hook.storyloom_tools.get_hookimpls():
            owner = self.plugin_of_impl(impl.plugin_name)
            try:
                provided = list(cast("Iterable[Any]", impl.function() or []))
            except Exception as exc:
                self._runtime_problem(owner, "storyloom_tools", exc)
                continue
            out.extend((owner, tool) for tool in provided if isinstance(tool, ServiceTool))
        return out

    def tool_functions(self, plugin: str) -> dict[str, Callable[..., Any]]:
        """The functions an enabled plugin's ``storyloom_tool_functions`` returns, by name;
        empty for a plugin that is not enabled."""
        loaded = self._loaded.get(plugin)
        if loaded is None:
            return {}
        options = self.option_values(plugin)
        functions: dict[str, Callable[..., Any]] = {}
        for impl in self._manager.hook.storyloom_tool_functions.get_hookimpls():
            if impl.plugin_name not in loaded.pluggy_names:
                continue
            given = {"options": options}
            try:
                result = impl.function(*(given[arg] for arg in impl.argnames))
            except Exception as exc:
                self._runtime_problem(plugin, "storyloom_tool_functions", exc)
                continue
            if isinstance(result, dict):
                functions.update({k: v for k, v in result.items() if callable(v)})
        return functions

    def option_values(self, plugin: str) -> OptionValues:
        """The current values of a plugin's ``configOptions`` and of its tools'
        ``configSchema`` options (kept with the plugin's; the plugin's own win a clash)."""
        found = self.plugin(plugin)
        options = [*_tool_options(found), *found.manifest.config_options]
        return OptionValues(plugin, options, self._settings, self.secrets)

    def _runtime_problem(self, plugin: str | None, hook: str, exc: Exception) -> None:
        logger.warning("plugin %s: %s failed", plugin or "(built-in)", hook, exc_info=exc)
        if plugin is None:
            return
        folder = str(self.plugin(plugin).folder)
        problem = PluginProblem(
            folder=folder, file=folder, field=hook, reason=f"{type(exc).__name__}: {exc}"
        )
        if problem not in self._runtime_problems:
            self._runtime_problems.append(problem)
            self._collect_problems()

    def extension_infos(self) -> list[ExtensionInfo]:
        """What the web app loads (``GET /api/plugins``): enabled plugins only."""
        infos = []
        for plugin in self.enabled_plugins():
            manifest = plugin.manifest
            frontend = None
            served = manifest.frontend.served() if manifest.frontend is not None else None
            if served is not None and self.static_dir(plugin.name) is not None:
                _, entry, styles = served
                base = f"/plugins/{plugin.name}"
                frontend = FrontendInfo(
                    entry_url=f"{base}/{entry}", style_urls=[f"{base}/{s}" for s in styles]
                )
            infos.append(
                ExtensionInfo(
                    name=plugin.name,
                    display_name=manifest.title,
                    version=manifest.version,
                    description=manifest.description,
                    frontend=frontend,
                    config_options=list(manifest.config_options),
                    overrides=[g for g in plugin.granted if is_wrap_point(g)],
                    wraps=granted_wraps(plugin.granted),
                    hooks=manifest.permissions.client_hooks,
                )
            )
        return infos

    def static_dir(self, name: str) -> Path | None:
        """The folder served under ``/plugins/<name>/``: an enabled plugin's web assets,
        or None. Files outside the plugin's folder (through a symlink) are never served."""
        plugin = next((p for p in self.enabled_plugins() if p.name == name), None)
        if plugin is None or plugin.manifest.frontend is None:
            return None
        served = plugin.manifest.frontend.served()
        if served is None:
            return None
        folder = plugin.folder.resolve()
        static = (folder / served[0]).resolve()
        if not static.is_dir() or not static.is_relative_to(folder):
            return None
        return static

    # -- enabling ----------------------------------------------------------------------

    def set_enabled(
        self,
        store: SettingsStore,
        name: str,
        enabled: bool,
        *,
        grant_overrides: bool = False,
        grant_network: bool = False,
        accept_risk: Risk | None = None,
        how: str = "pass accept_risk='high' to accept it",
    ) -> FoundPlugin:
        """Turn a plugin on or off (saved in the settings file) and load or unload it.
        ``grant_network`` lets its script tools connect to other machines, if it declares
        ``permissions.network``. A high-risk plugin is enabled only with ``accept_risk``
        "high" (else :class:`RiskNotAccepted`, whose message ends with ``how``).

        The caller re-reads its own settings afterwards (the server's state); this host
        goes by the saved settings at once."""
        plugin = self.plugin(name)
        if enabled:
            check_risk_accepted(plugin, accept_risk, how)
        permissions = plugin.manifest.permissions
        settings = set_plugin_enabled(
            store,
            name,
            enabled,
            grant_overrides,
            permissions.grants(),
            grant_network=grant_network and permissions.network,
        )
        self.reload(settings)
        return self.plugin(name)


def set_plugin_enabled(
    store: SettingsStore,
    name: str,
    enabled: bool,
    grant_overrides: bool,
    overrides: Sequence[str] = (),
    *,
    grant_network: bool = False,
) -> Settings:
    """Save plugin ``name`` as enabled or not, and return the settings saved.

    Enabling with ``grant_overrides`` grants exactly ``overrides`` (the plugin's declared
    wrap and override permissions); with ``grant_network`` (pass it only for a plugin that declares
    ``permissions.network``) its script tools may use the network. Enabling without
    either, or disabling, withdraws that grant, so each enabling asks again."""
    current = store.read_file()
    names = [n for n in current.plugins.enabled if n != name]
    granted = {k: v for k, v in current.plugins.granted.items() if k != name}
    network = [n for n in current.plugins.network if n != name]
    if enabled:
        names.append(name)
        if grant_overrides and overrides:
            granted[name] = list(overrides)
        if grant_network:
            network.append(name)
    plugins = PluginSettings(enabled=sorted(names), granted=granted, network=sorted(network))
    updated = current.model_copy(update={"plugins": plugins})
    store.save(updated)
    return updated


def _signature(plugin: FoundPlugin) -> tuple[Any, ...]:
    """What, changed, makes a loaded plugin load again: its folder, its manifest and its
    Python files."""
    stamps: list[tuple[str, int | None]] = []
    for path in plugin.node_modules:
        try:
            stamps.append((str(path), path.stat().st_mtime_ns))
        except OSError:
            stamps.append((str(path), None))
    return (str(plugin.folder), plugin.manifest.model_dump_json(), tuple(stamps))


def _tool_options(plugin: FoundPlugin) -> list[ConfigOption]:
    """The ``configSchema`` options of a plugin's tool files; a broken file has none here
    (the registry reports it)."""
    options: list[ConfigOption] = []
    for path in plugin.tool_files:
        try:
            options += load_tool_file(path).config_schema
        except StoryloomError:
            continue
    return options
