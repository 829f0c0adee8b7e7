"""``/api/config``: the options enabled plugins declare, with their values (seed 003 §17.3).

The list holds each enabled plugin's ``configOptions`` (keys
``extensions.<plugin>.<option>``) and the ``configSchema`` options of its tools. A tool's
option is an option of the plugin that ships the tool: listed under the same kind of key
(``extensions.<plugin>.<option>``, with ``tool`` naming the tool) and stored in the same
place, so the plugin's functions read it like the plugin's own options; an option a
plugin and its tool both declare is listed once, as the plugin's.

Values live in settings.json under ``extensions.<plugin>.<option>``; secret ones in the
encrypted secret store under their key, never in settings.json and never sent back: a
secret shows ``value: null`` and ``isSet``. ``PUT`` checks every value against its
option first (a 422 names each key that does not fit, and nothing is saved); ``null``
clears a value (the default applies again).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from storyloom.core.errors import FieldProblem, InvalidInput
from storyloom.server.api_errors import error_responses
from storyloom.server.settings_api import save_settings
from storyloom.server.state import ServerState, server_state
from storyloom.tools.config_options import ConfigOption, plugin_option_key

router = APIRouter(prefix="/api/config", tags=["config"])


class ConfigOptionInfo(ConfigOption):
    """An option with its value in force (secrets: ``isSet`` only)."""

    value: Any = Field(
        default=None, description="The stored value, else the default; null for secrets"
    )
    is_set: bool | None = Field(
        default=None, alias="isSet", description="Secrets only: whether a value is stored"
    )
    plugin: str | None = Field(default=None, description="The plugin that declares it")
    tool: str | None = Field(default=None, description="The tool whose configSchema it is")


class ConfigUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    values: dict[str, Any] = Field(
        description="Option key → new value; null clears it (a secret is removed)"
    )


class _Declared:
    """An option, where it came from, and the key its value is kept under."""

    def __init__(self, option: ConfigOption, plugin: str, tool: str | None) -> None:
        self.option = option
        self.plugin = plugin
        self.tool = tool
        self.key = plugin_option_key(plugin, option.name)


def _declared(state: ServerState) -> dict[str, _Declared]:
    """Every option of the enabled plugins and of their tools, by key (plugin's first)."""
    host = state.tools
    found: dict[str, _Declared] = {}
    for plugin in state.plugins.enabled_plugins():
        for option in plugin.manifest.config_options:
            declared = _Declared(option, plugin.name, None)
            found.setdefault(declared.key, declared)
    for entry in host.manager.entries():
        if entry.plugin is None:
            continue  # only plugins' tools have options, kept with their plugin's
        for option in entry.definition.config_schema:
            declared = _Declared(option, entry.plugin, entry.id)
            found.setdefault(declared.key, declared)
    return found


def _info(state: ServerState, declared: _Declared) -> ConfigOptionInfo:
    option = declared.option
    fields = option.model_dump(by_alias=False)
    fields["key"] = declared.key
    if option.secret:
        value: Any = None
        is_set: bool | None = state.tools.secrets.is_set(declared.key)
    else:
        stored = state.settings.extensions.get(declared.plugin, {}).get(option.name)
        value = option.default_value if stored is None else stored
        is_set = None
    return ConfigOptionInfo(
        **fields, value=value, is_set=is_set, plugin=declared.plugin, tool=declared.tool
    )


def _listing(state: ServerState) -> list[ConfigOptionInfo]:
    return [_info(state, declared) for declared in _declared(state).values()]


@router.get("", response_model=list[ConfigOptionInfo])
async def get_config(request: Request) -> list[ConfigOptionInfo]:
    """Every option of the enabled plugins and their tools, with its value."""
    return _listing(server_state(request))


@router.put("", response_model=list[ConfigOptionInfo], responses=error_responses(400, 422))
async def put_config(request: Request, body: ConfigUpdate) -> list[ConfigOptionInfo]:
    """Set the given options; every value is checked before anything is saved."""
    state = server_state(request)
    declared = _declared(state)
    checked: dict[str, tuple[_Declared, Any]] = {}
    problems: list[FieldProblem] = []
    for key, value in body.values.items():
        target = declared.get(key)
        if target is None:
            problems.append(FieldProblem(key, "no enabled plugin declares this option"))
            continue
        try:
            checked[key] = (target, target.option.check(value))
        except ValueError as exc:
            problems.append(FieldProblem(key, str(exc)))
    if problems:
        raise InvalidInput.of("config", problems)
    secrets = {k: v for k, (target, v) in checked.items() if target.option.secret}
    plain = [(target, v) for target, v in checked.values() if not target.option.secret]
    async with state.settings_lock:
        if plain:
            extensions = {
                name: dict(values) for name, values in state.loaded.from_file.extensions.items()
            }
            for target, value in plain:
                values = extensions.setdefault(target.plugin, {})
                if value is None:
                    values.pop(target.option.name, None)
                else:
                    values[target.option.name] = value
            extensions = {name: values for name, values in extensions.items() if values}
            save_settings(
                state, state.loaded.from_file.model_copy(update={"extensions": extensions})
            )
        for key, value in secrets.items():
            state.tools.secrets.set(key, None if value is None else str(value))
    return _listing(state)
