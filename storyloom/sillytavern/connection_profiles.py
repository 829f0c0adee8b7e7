"""SillyTavern's connection profiles, as its ``settings.json`` keeps them.

The Connection Manager extension stores its profiles in the user's ``settings.json``
under ``extension_settings.connectionManager.profiles``: a list of objects, each named
by the slash commands that recorded it. ``mode`` is ``cc`` (chat completion) or ``tc``
(text completion); ``api`` is the value of ``/api`` (a chat completion source such as
``openai`` or ``custom``, or a text completion type such as ``koboldcpp``); ``api-url``
the server URL; ``model``; ``preset`` the sampler preset's name; ``instruct``,
``context``, ``sysprompt`` and ``tokenizer`` template and tokenizer names; the
``*-state`` fields "true"/"false" switches. API keys are not in it: SillyTavern keeps
them in ``secrets.json`` (``secret-id`` only names one).

The model types what storyloom reads, loosely (a field of an unexpected type reads as
absent, as SillyTavern itself would ignore it); every other field is kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from storyloom.core.errors import FieldProblem, FileFormatError
from storyloom.sillytavern.untrusted_json import UntrustedJsonError, loads_untrusted

PROFILES_PATH = ("extension_settings", "connectionManager", "profiles")
"""Where the profiles are in SillyTavern's settings.json."""


class StConnectionProfile(BaseModel):
    """One profile of SillyTavern's Connection Manager."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    id: str = ""
    name: str = ""
    mode: str = Field(default="cc", description="cc: chat completion; tc: text completion")
    api: str = ""
    api_url: str = Field(default="", alias="api-url")
    model: str = ""
    preset: str = ""
    instruct: str = ""
    instruct_state: str = Field(default="", alias="instruct-state")
    context: str = ""
    sysprompt: str = ""
    tokenizer: str = ""
    stop_strings: str = Field(default="", alias="stop-strings")
    secret_id: str = Field(default="", alias="secret-id")

    @field_validator("*", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        # SillyTavern records each field as the text its slash command returned; anything
        # else (a number, a list) is not what the command gives and reads as unset.
        if isinstance(value, bool):
            return str(value).lower()
        return value if isinstance(value, str) else ""


def profiles_of(data: Mapping[str, Any]) -> list[StConnectionProfile]:
    """The profiles in a parsed settings.json (none when the extension never ran)."""
    node: Any = data
    for key in PROFILES_PATH:
        node = node.get(key) if isinstance(node, Mapping) else None
    if not isinstance(node, list):
        return []
    out = []
    for item in node:
        if not isinstance(item, Mapping):
            continue
        try:
            out.append(StConnectionProfile.model_validate(dict(item)))
        except ValidationError:
            continue  # every field reads loosely; a failure here is a shape nothing fits
    return out


def read_connection_profiles(
    path_or_data: Path | str | bytes, *, source: str = "settings.json"
) -> list[StConnectionProfile]:
    """The connection profiles of a SillyTavern settings.json (its path or its bytes). A
    file that is not a JSON object is a :class:`FileFormatError` naming ``source`` (or
    the path)."""
    if isinstance(path_or_data, str | Path):
        where = Path(path_or_data)
        try:
            raw = where.read_bytes()
        except FileNotFoundError:
            raise FileFormatError(where, [FieldProblem("", "no such file")]) from None
        except OSError as exc:
            raise FileFormatError(where, [FieldProblem("", f"cannot read: {exc}")]) from None
    else:
        where, raw = Path(source), path_or_data
    try:
        data = loads_untrusted(raw)
    except UntrustedJsonError as exc:
        raise FileFormatError(where, [FieldProblem(exc.where, exc.reason)]) from None
    if not isinstance(data, dict):
        raise FileFormatError(
            where, [FieldProblem("", f"expected a JSON object, got {type(data).__name__}")]
        )
    return profiles_of(data)
