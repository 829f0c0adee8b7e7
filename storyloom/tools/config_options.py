"""A settable option (seed 003 §17, ComfyTavern's ``SettingItemConfig``): a plugin's
``configOptions`` and a tool's ``configSchema``, and where their values live.

A plugin option's key is ``extensions.<plugin>.<option>`` (globally unique); a tool's
``configSchema`` keys are bare option names. Values live in ``settings.json`` under
``extensions: {"<plugin>": {"<option>": value}}``, except secret ones (``type: secret``
or ``secret: true``), which live in the encrypted :class:`SecretStore` under the full
key and never leave the server.

``min`` / ``max`` bound numbers; ``step`` is the editor's increment, a hint that is not
enforced (a float step cannot be checked exactly).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

if TYPE_CHECKING:
    from storyloom.core.settings import Settings
    from storyloom.tools.secret_store import SecretStore

ConfigType = Literal["boolean", "number", "integer", "string", "textarea", "select", "secret"]
EXTENSIONS_PREFIX = "extensions"
OPTION_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,63}")
_KEY = re.compile(r"[^\s\x00-\x1f]+")


class ConfigChoice(BaseModel):
    """One choice of a ``select`` option."""

    model_config = ConfigDict(extra="forbid")

    value: Any
    label: str = ""


class ConfigOption(BaseModel):
    """One option the user sets in Settings → Extensions (or on a tool)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)

    key: str = Field(
        min_length=1,
        description="extensions.<plugin>.<option> for plugin options; <option> in a tool's "
        "configSchema",
    )
    type: ConfigType = Field(description="The editor, and what values are accepted")
    label: str = Field(min_length=1, description="Shown beside the editor")
    description: str = ""
    default_value: Any = Field(default=None, alias="defaultValue")
    min: float | None = Field(default=None, description="number/integer: the smallest value")
    max: float | None = Field(default=None, description="number/integer: the largest value")
    step: float | None = Field(default=None, gt=0, description="Editor increment (a hint)")
    options: list[ConfigChoice] = Field(
        default_factory=list, description="select: the choices, the only accepted values"
    )
    category_key: str | None = Field(default=None, alias="categoryKey")
    category: str | None = Field(default=None, description="Heading the option is shown under")
    secret: bool = Field(
        default=False,
        description="Stored encrypted on the server and never sent back to the browser; "
        "implied by type secret",
    )

    @field_validator("key")
    @classmethod
    def _key(cls, value: str) -> str:
        if not _KEY.fullmatch(value):
            raise ValueError("no spaces or control characters")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ConfigOption:
        if self.type == "secret":
            self.secret = True
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min:g}) is greater than max ({self.max:g})")
        if self.type == "select" and not self.options:
            raise ValueError("options: a select option needs at least one choice")
        if self.default_value is not None:
            try:
                self.default_value = self.check(self.default_value)
            except ValueError as exc:
                raise ValueError(f"defaultValue: {exc}") from None
        return self

    @property
    def name(self) -> str:
        """The option's own name: the last part of ``extensions.<plugin>.<option>``."""
        return self.key.rsplit(".", 1)[-1]

    def check(self, value: Any) -> Any:
        """``value`` as stored, or :class:`ValueError` saying why it does not fit.

        None means "not set" (the default applies) and is always accepted. An integral
        float is accepted as an integer (JSON does not tell 3 from 3.0)."""
        if value is None:
            return None
        if self.type == "boolean":
            if not isinstance(value, bool):
                raise ValueError(f"must be true or false, got {value!r}")
            return value
        if self.type in ("number", "integer"):
            return self._check_number(value)
        if self.type == "select":
            allowed = [choice.value for choice in self.options]
            if value not in allowed:
                shown = ", ".join(repr(v) for v in allowed)
                raise ValueError(f"{value!r} is not one of {shown}")
            return value
        if not isinstance(value, str):
            raise ValueError(f"must be text, got {type(value).__name__}")
        return value

    def _check_number(self, value: Any) -> int | float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"must be a number, got {value!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"must be a finite number, got {value!r}")
        number: int | float = value
        if self.type == "integer" and isinstance(value, float):
            if not value.is_integer():
                raise ValueError(f"must be a whole number, got {value!r}")
            number = int(value)
        if self.min is not None and number < self.min:
            raise ValueError(f"{number!r} is below the minimum {self.min:g}")
        if self.max is not None and number > self.max:
            raise ValueError(f"{number!r} is above the maximum {self.max:g}")
        return number


def plugin_option_key(plugin: str, option: str) -> str:
    return f"{EXTENSIONS_PREFIX}.{plugin}.{option}"


def plugin_key_problem(key: str, plugin: str) -> str | None:
    """Why ``key`` is not a valid option key of ``plugin``, or None."""
    prefix = f"{EXTENSIONS_PREFIX}.{plugin}."
    if not key.startswith(prefix):
        return f"must be {prefix}<option>"
    option = key.removeprefix(prefix)
    if not OPTION_NAME.fullmatch(option):
        return "<option> must be letters, digits, '_' or '-' (at most 64), without '.'"
    return None


class OptionValues:
    """The current values of one plugin's options, read when asked (a change in Settings
    → Extensions is seen by the next call, without a restart).

    Handed to a plugin's ``storyloom_tool_functions(options)``; a value not set is the
    option's ``defaultValue``; a secret option is read from the secret store.
    """

    def __init__(
        self,
        plugin: str,
        options: list[ConfigOption],
        settings: Callable[[], Settings],
        secrets: SecretStore,
    ) -> None:
        self.plugin = plugin
        self._options = {option.name: option for option in options}
        self._settings = settings
        self._secrets = secrets

    def names(self) -> list[str]:
        return list(self._options)

    def get(self, name: str) -> Any:
        """The value of option ``name`` (its last key part); KeyError when undeclared."""
        option = self._options.get(name)
        if option is None:
            known = ", ".join(self._options) or "none"
            raise KeyError(f"plugin {self.plugin!r} declares no option {name!r} (known: {known})")
        return option_value(option, self.plugin, self._settings(), self._secrets)

    def __getitem__(self, name: str) -> Any:
        return self.get(name)


def option_value(
    option: ConfigOption, plugin: str, settings: Settings, secrets: SecretStore
) -> Any:
    """The value in force of a plugin option: set, else its default. A stored value that
    no longer fits (the plugin changed its bounds) falls back to the default."""
    if option.secret:
        # Under the plugin's key, also for a tool's option (whose own key is bare).
        stored: Any = secrets.get(plugin_option_key(plugin, option.name))
    else:
        stored = settings.extensions.get(plugin, {}).get(option.name)
    if stored is None:
        return option.default_value
    try:
        return option.check(stored)
    except ValueError:
        return option.default_value
