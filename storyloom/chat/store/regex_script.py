"""One SillyTavern regex script as stored (the regex extension's script shape).

The model lives with the stores, below the engine that runs it
(:mod:`storyloom.chat.prompt.regex_scripts`), so that the files holding scripts (a
card's ``extensions.regex_scripts``, the user's global list) can read and check them.
It keeps SillyTavern's field names and accepts what SillyTavern's editor and older
versions write (``null`` for defaults, a boolean ``substituteRegex``, typed-in depths).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["RegexScript"]


class RegexScript(BaseModel):
    """One script, with SillyTavern's field names; unknown fields are kept."""

    model_config = ConfigDict(extra="allow")

    id: str = ""
    scriptName: str = ""
    findRegex: str
    replaceString: str = ""
    trimStrings: list[str] = Field(default_factory=list)
    placement: list[int] = Field(default_factory=list)
    disabled: bool = False
    markdownOnly: bool = False
    promptOnly: bool = False
    runOnEdit: bool = True
    substituteRegex: int = 0
    minDepth: int | None = None
    maxDepth: int | None = None

    @field_validator("id", "scriptName", "replaceString", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return "" if value is None else value

    @field_validator("trimStrings", "placement", mode="before")
    @classmethod
    def _none_is_no_list(cls, value: Any) -> Any:
        return [] if value is None else value

    @field_validator("disabled", "markdownOnly", "promptOnly", mode="before")
    @classmethod
    def _none_is_false(cls, value: Any) -> Any:
        return False if value is None else value

    @field_validator("runOnEdit", mode="before")
    @classmethod
    def _none_is_true(cls, value: Any) -> Any:
        return True if value is None else value

    @field_validator("substituteRegex", mode="before")
    @classmethod
    def _substitute_mode(cls, value: Any) -> Any:
        # Older SillyTavern saved a boolean here (true: substitute macros raw).
        if value is None:
            return 0
        if isinstance(value, bool):
            return int(value)
        return value

    @field_validator("minDepth", "maxDepth", mode="before")
    @classmethod
    def _depth(cls, value: Any) -> Any:
        # The editor stores null, a number, or whatever was typed; non-numbers mean "no limit".
        if value is None or isinstance(value, bool):
            return None
        if isinstance(value, float):
            return int(value) if value == value and abs(value) != float("inf") else None
        if isinstance(value, str):
            text = value.strip()
            try:
                return int(float(text)) if text else None
            except ValueError:
                return None
        return value

    @property
    def label(self) -> str:
        return self.scriptName or self.id or self.findRegex[:40]
