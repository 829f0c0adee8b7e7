"""The Tavern Helper (JS-Slash-Runner) scripts and variables a character card carries.

Tavern Helper keeps a card's scripts in ``data.extensions`` and has written them in three
shapes over its versions, all found in cards in the wild (a card saved by a newer version
often keeps the older key too, with the same scripts):

* ``tavern_helper``: ``{"scripts": [...], "variables": {...}}`` (current);
* ``tavern_helper``: ``[["scripts", [...]], ["variables", {...}]]`` (3.x, pairs);
* ``TavernHelper_scripts``: ``[...]`` and ``TavernHelper_variables``: ``{...}`` (oldest).

A script is ``{"type": "script", "id", "name", "content", "enabled", "info", "button":
{"enabled", "buttons": [{"name", "visible"}]}, "data"}``; a ``"folder"`` holds scripts
of its own under ``scripts``. Reading never raises on what a card holds: what is not a
script is skipped and said in :attr:`HelperScripts.problems`.

What a script *is* matters because two of them are served natively: MagVarUpdate's bundle
(imported from a CDN in the card) and a script that registers MVU's Zod schema
(``registerMvuSchema``). Every other script is ``"other"``: it runs only where the user
allowed it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

HelperScriptKind = Literal["mvu_bundle", "mvu_schema", "other"]

# MagVarUpdate's bundle, as cards import it: from jsdelivr, a mirror of it or GitHub pages.
_MVU_BUNDLE = re.compile(r"MagVarUpdate\b[^'\"\s]*?/(?:artifact|dist)/bundle(?:\.min)?\.js", re.I)
_MVU_SCHEMA = re.compile(r"\bregisterMvuSchema\s*\(")


@dataclass(frozen=True)
class HelperButton:
    name: str
    visible: bool


@dataclass(frozen=True)
class HelperScript:
    """One Tavern Helper script of a card."""

    id: str
    name: str
    content: str
    enabled: bool
    kind: HelperScriptKind
    info: str = ""
    buttons: tuple[HelperButton, ...] = ()
    folder: str = ""
    """The folder the script sits in ("" at the top)."""


@dataclass
class HelperScripts:
    """A card's scripts (each id once, in the card's order), its character variables and
    what could not be read."""

    scripts: list[HelperScript] = field(default_factory=list)
    variables: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def of_kind(self, kind: HelperScriptKind) -> list[HelperScript]:
        return [s for s in self.scripts if s.kind == kind]


def script_kind(content: str) -> HelperScriptKind:
    """What a script is, read from its code."""
    if _MVU_SCHEMA.search(content):
        return "mvu_schema"
    if _MVU_BUNDLE.search(content):
        return "mvu_bundle"
    return "other"


def _extensions(card: Mapping[str, Any]) -> Mapping[str, Any]:
    """``extensions`` of a V2/V3 card (``data.extensions``), its ``data``, or a character
    snapshot (``card.extensions``)."""
    for holder in (card.get("data"), card.get("card"), card):
        if isinstance(holder, Mapping) and isinstance(holder.get("extensions"), Mapping):
            extensions: Mapping[str, Any] = holder["extensions"]
            return extensions
    return {}


def _sections(extensions: Mapping[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """(where, what, value) for each place scripts or variables can be, newest first."""
    current = extensions.get("tavern_helper")
    if isinstance(current, Mapping):
        yield "extensions.tavern_helper.scripts", "scripts", current.get("scripts")
        yield "extensions.tavern_helper.variables", "variables", current.get("variables")
    elif isinstance(current, list):
        for i, pair in enumerate(current):
            if isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str):
                yield f"extensions.tavern_helper[{i}][1]", pair[0], pair[1]
    yield "extensions.TavernHelper_scripts", "scripts", extensions.get("TavernHelper_scripts")
    yield "extensions.TavernHelper_variables", "variables", extensions.get("TavernHelper_variables")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _buttons(raw: Any) -> tuple[HelperButton, ...]:
    buttons = raw.get("buttons") if isinstance(raw, Mapping) else None
    return tuple(
        HelperButton(name=_text(b.get("name")), visible=b.get("visible") is not False)
        for b in buttons or []
        if isinstance(b, Mapping) and _text(b.get("name"))
    )


def _read_scripts(raw: Any, where: str, folder: str, out: HelperScripts, seen: set[str]) -> None:
    if raw is None:
        return
    if not isinstance(raw, list):
        out.problems.append(f"{where}: not a list of scripts")
        return
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            out.problems.append(f"{at}: not a script object")
            continue
        if item.get("type") == "folder":
            _read_scripts(item.get("scripts"), f"{at}.scripts", _text(item.get("name")), out, seen)
            continue
        content = item.get("content")
        if not isinstance(content, str):
            out.problems.append(f"{at}.content: missing or not text")
            continue
        script_id = _text(item.get("id")) or f"{where}#{i}"
        if script_id in seen:
            continue
        seen.add(script_id)
        out.scripts.append(
            HelperScript(
                id=script_id,
                name=_text(item.get("name")) or script_id,
                content=content,
                enabled=item.get("enabled") is not False,
                kind=script_kind(content),
                info=_text(item.get("info")),
                buttons=_buttons(item.get("button")),
                folder=folder,
            )
        )


def helper_scripts(card: Mapping[str, Any]) -> HelperScripts:
    """The Tavern Helper scripts and character variables ``card`` carries (a raw V2/V3
    card, its ``data``, or a character snapshot)."""
    out = HelperScripts()
    seen: set[str] = set()
    variables_found = False
    for where, what, value in _sections(_extensions(card)):
        if what == "scripts":
            _read_scripts(value, where, "", out, seen)
        elif what == "variables" and value is not None and not variables_found:
            if isinstance(value, Mapping):
                out.variables = dict(value)
                variables_found = True
            else:
                out.problems.append(f"{where}: not an object of variables")
    return out
