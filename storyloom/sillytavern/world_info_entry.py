"""One SillyTavern world-info entry: SillyTavern's new-entry template and the entry model.

The field list and defaults are SillyTavern's own new-entry template
(``newWorldInfoEntryDefinition`` in ``public/scripts/world-info.js``, v1.18). SillyTavern
gives a loaded entry those defaults for every field it lacks, so a 2024 file missing
``selectiveLogic`` or ``role`` means what the template says. :class:`WorldInfoEntry`
checks the types SillyTavern's code relies on and keeps every other key.

What an entry becomes in storyloom (a CAIU) is decided in
:mod:`storyloom.knowledge.st_world_info_entry`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict

# SillyTavern's newWorldInfoEntryTemplate (v1.18): every field a new entry gets.
WI_ENTRY_TEMPLATE: dict[str, Any] = {
    "key": [],
    "keysecondary": [],
    "comment": "",
    "content": "",
    "constant": False,
    "vectorized": False,
    "selective": True,
    "selectiveLogic": 0,
    "addMemo": False,
    "order": 100,
    "position": 0,
    "disable": False,
    "ignoreBudget": False,
    "excludeRecursion": False,
    "preventRecursion": False,
    "matchPersonaDescription": False,
    "matchCharacterDescription": False,
    "matchCharacterPersonality": False,
    "matchCharacterDepthPrompt": False,
    "matchScenario": False,
    "matchCreatorNotes": False,
    "delayUntilRecursion": 0,
    "probability": 100,
    "useProbability": True,
    "depth": 4,
    "outletName": "",
    "group": "",
    "groupOverride": False,
    "groupWeight": 100,
    "scanDepth": None,
    "caseSensitive": None,
    "matchWholeWords": None,
    "useGroupScoring": None,
    "automationId": "",
    "role": 0,
    "sticky": None,
    "cooldown": None,
    "delay": None,
    "triggers": [],
}

# Added on load by SillyTavern's addMissingWorldInfoFields, outside the template.
CHARACTER_FILTER_DEFAULT: dict[str, Any] = {"isExclude": False, "names": [], "tags": []}


def _number_to_text(value: Any) -> Any:
    # Keys typed as numbers ("1945") are stored as JSON numbers by some editors.
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


KeyText = Annotated[str, BeforeValidator(_number_to_text)]


class STCharacterFilter(BaseModel):
    """An entry's ``characterFilter``: the characters (or tags) it is limited to or kept from."""

    model_config = ConfigDict(extra="allow")

    isExclude: bool | None = None
    names: list[str] | None = None
    tags: list[str] | None = None


class WorldInfoEntry(BaseModel):
    """The types SillyTavern's code relies on; checks an entry, the dict itself is kept."""

    model_config = ConfigDict(extra="allow")

    uid: int | str | None = None
    key: list[KeyText] = []
    keysecondary: list[KeyText] | None = None
    comment: str | None = None
    content: str | None = None
    constant: bool | None = None
    vectorized: bool | None = None
    selective: bool | None = None
    selectiveLogic: int | None = None
    addMemo: bool | None = None
    order: int | float | None = None
    position: int | None = None
    disable: bool | None = None
    ignoreBudget: bool | None = None
    excludeRecursion: bool | None = None
    preventRecursion: bool | None = None
    matchPersonaDescription: bool | None = None
    matchCharacterDescription: bool | None = None
    matchCharacterPersonality: bool | None = None
    matchCharacterDepthPrompt: bool | None = None
    matchScenario: bool | None = None
    matchCreatorNotes: bool | None = None
    delayUntilRecursion: bool | int | None = None
    probability: int | float | None = None
    useProbability: bool | None = None
    depth: int | None = None
    outletName: str | None = None
    group: str | None = None
    groupOverride: bool | None = None
    groupWeight: int | float | None = None
    scanDepth: int | None = None
    caseSensitive: bool | None = None
    matchWholeWords: bool | None = None
    useGroupScoring: bool | None = None
    automationId: str | None = None
    role: int | None = None
    sticky: int | None = None
    cooldown: int | None = None
    delay: int | None = None
    triggers: list[str] | None = None
    characterFilter: STCharacterFilter | None = None
    displayIndex: int | None = None
    extensions: dict[str, Any] | None = None


def entry_label(raw: Mapping[str, Any], fallback: str) -> str:
    """How warnings name an entry: its uid (or id) and comment."""
    uid = raw.get("uid", raw.get("id", fallback))
    comment = raw.get("comment")
    return f"uid {uid}" + (f" ({comment!r})" if isinstance(comment, str) and comment else "")
