"""The lore book embedded in a character card (``data.character_book``), entry by entry.

A card-book entry has the Character Card V2 shape (``keys``, ``secondary_keys``,
``insertion_order``, ``enabled``, ``position`` "before_char"/"after_char") with
SillyTavern's own settings under ``extensions`` (``position``, ``depth``, ``role``...).
It is read the way SillyTavern's ``convertCharacterBook`` reads it: ``extensions.position``
wins over the ``position`` string, so an entry saying ``"after_char"`` with
``extensions.position`` 2 is an author's-note-top entry, as it is in SillyTavern; a
missing ``enabled`` disables the entry, as it does there.

Writing one back follows ``convertWorldInfoToCharacterBook`` (``src/endpoints/
characters.js``), with one difference: a null ``useGroupScoring`` stays null instead of
becoming false, so "use the global setting" survives the trip.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from storyloom.sillytavern.dotted_path import set_dotted
from storyloom.sillytavern.world_info_entry import WI_ENTRY_TEMPLATE, KeyText


class CharacterBookEntry(BaseModel):
    """One ``character_book.entries`` item (Character Card V2/V3); unknown keys kept."""

    model_config = ConfigDict(extra="allow")

    keys: list[KeyText] = []
    content: str | None = None
    extensions: dict[str, Any] = {}
    enabled: bool | None = None
    insertion_order: int | float | None = None
    case_sensitive: bool | None = None
    use_regex: bool | None = None
    constant: bool | None = None
    name: str | None = None
    priority: int | float | None = None
    id: int | str | None = None
    comment: str | None = None
    selective: bool | None = None
    secondary_keys: list[KeyText] | None = None
    position: str | None = None


class CharacterBook(BaseModel):
    """``data.character_book``: book settings and its entries; unknown keys kept."""

    model_config = ConfigDict(extra="allow")

    name: str | None = None
    description: str | None = None
    scan_depth: int | None = None
    token_budget: int | None = None
    recursive_scanning: bool | None = None
    extensions: dict[str, Any] = {}
    entries: list[CharacterBookEntry] = []


# World-info field -> where a card-book entry keeps it (SillyTavern's
# originalWIDataKeyMap, with the extension names convertCharacterBook reads).
BOOK_PATHS: dict[str, str] = {
    "key": "keys",
    "keysecondary": "secondary_keys",
    "comment": "comment",
    "content": "content",
    "constant": "constant",
    "selective": "selective",
    "order": "insertion_order",
    "position": "extensions.position",
    "displayIndex": "extensions.display_index",
    "excludeRecursion": "extensions.exclude_recursion",
    "preventRecursion": "extensions.prevent_recursion",
    "delayUntilRecursion": "extensions.delay_until_recursion",
    "probability": "extensions.probability",
    "useProbability": "extensions.useProbability",
    "depth": "extensions.depth",
    "selectiveLogic": "extensions.selectiveLogic",
    "outletName": "extensions.outlet_name",
    "group": "extensions.group",
    "groupOverride": "extensions.group_override",
    "groupWeight": "extensions.group_weight",
    "scanDepth": "extensions.scan_depth",
    "matchWholeWords": "extensions.match_whole_words",
    "useGroupScoring": "extensions.use_group_scoring",
    "caseSensitive": "extensions.case_sensitive",
    "automationId": "extensions.automation_id",
    "role": "extensions.role",
    "vectorized": "extensions.vectorized",
    "sticky": "extensions.sticky",
    "cooldown": "extensions.cooldown",
    "delay": "extensions.delay",
    "matchPersonaDescription": "extensions.match_persona_description",
    "matchCharacterDescription": "extensions.match_character_description",
    "matchCharacterPersonality": "extensions.match_character_personality",
    "matchCharacterDepthPrompt": "extensions.match_character_depth_prompt",
    "matchScenario": "extensions.match_scenario",
    "matchCreatorNotes": "extensions.match_creator_notes",
    "triggers": "extensions.triggers",
    "ignoreBudget": "extensions.ignore_budget",
}

# Card-book extension -> world-info field and the default convertCharacterBook uses.
_FROM_EXTENSIONS: dict[str, tuple[str, Any]] = {
    "exclude_recursion": ("excludeRecursion", False),
    "prevent_recursion": ("preventRecursion", False),
    "delay_until_recursion": ("delayUntilRecursion", False),
    "probability": ("probability", 100),
    "useProbability": ("useProbability", True),
    "depth": ("depth", 4),
    "selectiveLogic": ("selectiveLogic", 0),
    "outlet_name": ("outletName", ""),
    "group": ("group", ""),
    "group_override": ("groupOverride", False),
    "group_weight": ("groupWeight", 100),
    "scan_depth": ("scanDepth", None),
    "case_sensitive": ("caseSensitive", None),
    "match_whole_words": ("matchWholeWords", None),
    "use_group_scoring": ("useGroupScoring", None),
    "automation_id": ("automationId", ""),
    "role": ("role", 0),
    "vectorized": ("vectorized", False),
    "sticky": ("sticky", None),
    "cooldown": ("cooldown", None),
    "delay": ("delay", None),
    "match_persona_description": ("matchPersonaDescription", False),
    "match_character_description": ("matchCharacterDescription", False),
    "match_character_personality": ("matchCharacterPersonality", False),
    "match_character_depth_prompt": ("matchCharacterDepthPrompt", False),
    "match_scenario": ("matchScenario", False),
    "match_creator_notes": ("matchCreatorNotes", False),
    "ignore_budget": ("ignoreBudget", False),
}


def _extensions(entry: Mapping[str, Any]) -> dict[str, Any]:
    value = entry.get("extensions")
    return value if isinstance(value, dict) else {}


def book_entry_to_wi(entry: Mapping[str, Any], index: int) -> dict[str, Any]:
    """The world-info form SillyTavern gives a card-book entry when it imports the book."""
    ext = _extensions(entry)
    uid = entry.get("id")
    if uid is None:
        uid = index
    wi: dict[str, Any] = copy.deepcopy(WI_ENTRY_TEMPLATE)
    position = ext.get("position")
    if position is None:
        position = 0 if entry.get("position") == "before_char" else 1
    wi.update(
        {
            "uid": uid,
            "key": copy.deepcopy(entry.get("keys", [])),
            "keysecondary": copy.deepcopy(entry.get("secondary_keys") or []),
            "comment": entry.get("comment") or "",
            "content": entry.get("content"),
            "constant": entry.get("constant") or False,
            "selective": entry.get("selective") or False,
            "order": entry.get("insertion_order"),
            "position": position,
            "disable": not entry.get("enabled"),
            "addMemo": bool(entry.get("comment")),
            "displayIndex": ext.get("display_index", index),
            "extensions": copy.deepcopy(ext),
            "triggers": copy.deepcopy(ext.get("triggers") or []),
        }
    )
    for ext_name, (field, default) in _FROM_EXTENSIONS.items():
        value = ext.get(ext_name)
        wi[field] = default if value is None else copy.deepcopy(value)
    if wi["displayIndex"] is None:
        wi["displayIndex"] = index
    return wi


# What convertWorldInfoToCharacterBook writes into ``extensions``, in its order, with the
# value it uses for a missing or null field (_KEEP: the value as it is, null included).
_KEEP = object()
_TO_EXTENSIONS: tuple[tuple[str, str, Any], ...] = (
    ("position", "position", _KEEP),
    ("excludeRecursion", "exclude_recursion", _KEEP),
    ("displayIndex", "display_index", _KEEP),
    ("probability", "probability", None),
    ("useProbability", "useProbability", False),
    ("depth", "depth", 4),
    ("selectiveLogic", "selectiveLogic", 0),
    ("outletName", "outlet_name", ""),
    ("group", "group", ""),
    ("groupOverride", "group_override", False),
    ("groupWeight", "group_weight", None),
    ("preventRecursion", "prevent_recursion", False),
    ("delayUntilRecursion", "delay_until_recursion", False),
    ("scanDepth", "scan_depth", None),
    ("matchWholeWords", "match_whole_words", None),
    # SillyTavern writes false for null here; null ("the global setting") is kept instead.
    ("useGroupScoring", "use_group_scoring", None),
    ("caseSensitive", "case_sensitive", None),
    ("automationId", "automation_id", ""),
    ("role", "role", 0),
    ("vectorized", "vectorized", False),
    ("sticky", "sticky", None),
    ("cooldown", "cooldown", None),
    ("delay", "delay", None),
    ("matchPersonaDescription", "match_persona_description", False),
    ("matchCharacterDescription", "match_character_description", False),
    ("matchCharacterPersonality", "match_character_personality", False),
    ("matchCharacterDepthPrompt", "match_character_depth_prompt", False),
    ("matchScenario", "match_scenario", False),
    ("matchCreatorNotes", "match_creator_notes", False),
    ("triggers", "triggers", []),
    ("ignoreBudget", "ignore_budget", False),
)


def wi_to_book_entry(wi: Mapping[str, Any]) -> dict[str, Any]:
    """The card-book entry SillyTavern writes for a world-info entry when it exports a card."""
    extensions = copy.deepcopy(_extensions(wi))
    for field, name, default in _TO_EXTENSIONS:
        value = wi.get(field)
        if default is _KEEP:
            if field not in wi:
                continue  # undefined: JSON.stringify leaves the key out
        elif value is None:
            value = default
        extensions[name] = copy.deepcopy(value)
    position = wi.get("position", 0)
    return {
        "id": wi.get("uid"),
        "keys": copy.deepcopy(wi.get("key", [])),
        "secondary_keys": copy.deepcopy(wi.get("keysecondary", [])),
        "comment": wi.get("comment", ""),
        "content": wi.get("content", ""),
        "constant": wi.get("constant", False),
        "selective": wi.get("selective", True),
        "insertion_order": wi.get("order", 100),
        "enabled": not wi.get("disable", False),
        "position": "before_char" if position == 0 else "after_char",
        "use_regex": True,
        "extensions": extensions,
    }


def apply_wi_changes(entry: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of card-book ``entry`` with changed world-info fields written where it keeps them."""
    out = copy.deepcopy(dict(entry))
    for field, value in changes.items():
        if field == "disable":
            out["enabled"] = not value
        elif field in BOOK_PATHS:
            set_dotted(out, BOOK_PATHS[field], value)
            if field == "position":
                out["position"] = "before_char" if value == 0 else "after_char"
    return out
