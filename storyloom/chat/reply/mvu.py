"""Cards built on the MVU variable framework (common among Chinese SillyTavern cards).

Such a card keeps its starting variables in a lorebook entry whose title holds
``[InitVar]`` (disabled, so it never reaches a prompt), written as YAML or JSON, and its
prompts ask the model to change them with JSON Patch inside ``<UpdateVariable>``, on
paths under ``stat_data``. storyloom maps that onto the state chain: the entry's
document becomes ``variables.stat_data`` in a new conversation's first state, and the
Filament parser applies the patches there (:data:`~storyloom.chat.reply.filament.FilamentTags`
``mvu_root``). A card with a Zod schema script (:mod:`storyloom.sillytavern.mvu_zod`)
also fills in the schema's defaults (:func:`mvu_start`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml

from storyloom.chat.reply.mvu_values import with_defaults
from storyloom.sillytavern.mvu_zod import ZodSchemaError, card_state_schema

INIT_MARKER = "[initvar]"
STAT_DATA = "stat_data"


def _book_entries(card: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    data = card.get("data") if isinstance(card.get("data"), Mapping) else card
    book = data.get("character_book") if isinstance(data, Mapping) else None
    entries = book.get("entries") if isinstance(book, Mapping) else None
    if isinstance(entries, Mapping):  # world-info style: entries by uid
        entries = list(entries.values())
    return [e for e in entries or [] if isinstance(e, Mapping)]


def _title(entry: Mapping[str, Any]) -> str:
    return " ".join(str(entry.get(key) or "") for key in ("comment", "name"))


def initial_variables(card: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The ``[InitVar]`` documents of a card's embedded book, merged in book order, and
    a problem for each entry that does not parse to an object (the entry is skipped).

    ``card`` is the card JSON as imported (V2/V3 with ``data``, or its ``data``)."""
    merged: dict[str, Any] = {}
    problems: list[str] = []
    for entry in _book_entries(card):
        title = _title(entry)
        if INIT_MARKER not in title.lower():
            continue
        text = str(entry.get("content") or "")
        try:
            document = yaml.safe_load(text) if text.strip() else {}
        except yaml.YAMLError as exc:
            try:
                document = json.loads(text)
            except json.JSONDecodeError:
                problems.append(f"lorebook entry {title.strip()!r}: not YAML or JSON ({exc})")
                continue
        if not isinstance(document, dict):
            problems.append(f"lorebook entry {title.strip()!r}: not a mapping of variables")
            continue
        merged.update(document)
    return merged, problems


def mvu_start(card: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A new chat's ``stat_data``: the card's ``[InitVar]`` documents with the defaults of
    its Zod schema (``prefault``/``default``) filled in where a value is missing, and the
    problems found (a broken entry, a schema script that fails: the rest still counts)."""
    stat_data, problems = initial_variables(card)
    try:
        schema = card_state_schema(card)
    except ZodSchemaError as exc:
        problems.append(str(exc))
        schema = None
    if schema is not None:
        filled = with_defaults(schema, stat_data)
        stat_data = filled if isinstance(filled, dict) else stat_data
    return stat_data, problems
