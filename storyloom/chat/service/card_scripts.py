"""Everything a character's card can run, and whether it runs: the character page's list.

Nothing a card carries is silently inactive: each regex script and Tavern Helper script is
listed with what it is and its status, and the status says why when it does not run.
Statuses are kinds (the web app words them in the page's language), never sentences.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

from storyloom.chat.personalab.card_permissions import CardPermissions
from storyloom.chat.prompt.regex_scripts import card_regex_scripts
from storyloom.sillytavern.tavern_helper import HelperScriptKind, helper_scripts

ScriptStatus = Literal["runs", "native", "off_in_card", "not_allowed"]
"""``runs``: allowed and running; ``native``: served by storyloom itself (MVU's bundle and
schema), never fetched; ``off_in_card``: the card ships it switched off; ``not_allowed``:
waits for the user to allow it for this character."""

RegexScope = Literal["display", "prompt", "both"]

# A frame is a full HTML document (Tavern Helper's test: a code block holding one of these).
_FRAME = re.compile(r"<(?:html|head|body)\b", re.I)
_SCRIPT = re.compile(r"<script\b", re.I)


class CardRegexView(BaseModel):
    id: str
    name: str
    scope: RegexScope = Field(description="Where its result shows: display, prompt or both")
    frame: bool = Field(description="It writes a full HTML page (a status bar, a front end)")
    frame_scripts: bool = Field(description="That page holds scripts")
    status: ScriptStatus


class HelperScriptView(BaseModel):
    id: str
    name: str
    kind: HelperScriptKind
    info: str = ""
    buttons: list[str] = Field(default_factory=list, description="Its visible buttons")
    status: ScriptStatus


class CardScripts(BaseModel):
    """A card's regex and Tavern Helper scripts with their status, and the answers."""

    regex: list[CardRegexView] = Field(default_factory=list)
    helper: list[HelperScriptView] = Field(default_factory=list)
    problems: list[str] = Field(
        default_factory=list, description="Script entries of the card that could not be read"
    )
    permissions: CardPermissions = Field(default_factory=CardPermissions)
    needs_answer: bool = Field(
        default=False,
        description="The card carries something to allow and the user has not answered yet",
    )


def _regex_scope(markdown_only: bool, prompt_only: bool) -> RegexScope:
    if markdown_only and not prompt_only:
        return "display"
    if prompt_only and not markdown_only:
        return "prompt"
    return "both"


def card_scripts(card: Mapping[str, Any], permissions: CardPermissions) -> CardScripts:
    """The list for ``card`` (a raw V2/V3 card or its ``data``) under ``permissions``."""
    regex = []
    for script in card_regex_scripts(card):
        frame = bool(_FRAME.search(script.replaceString))
        status: ScriptStatus
        if script.disabled:
            status = "off_in_card"
        elif permissions.regex_scripts:
            status = "runs"
        else:
            status = "not_allowed"
        regex.append(
            CardRegexView(
                id=script.id,
                name=script.scriptName,
                scope=_regex_scope(script.markdownOnly, script.promptOnly),
                frame=frame,
                frame_scripts=frame and bool(_SCRIPT.search(script.replaceString)),
                status=status,
            )
        )
    found = helper_scripts(card)
    helper = []
    for h in found.scripts:
        if not h.enabled:
            status = "off_in_card"
        elif h.kind != "other":
            status = "native"
        elif h.id in permissions.helper_scripts:
            status = "runs"
        else:
            status = "not_allowed"
        helper.append(
            HelperScriptView(
                id=h.id,
                name=h.name,
                kind=h.kind,
                info=h.info,
                buttons=[b.name for b in h.buttons if b.visible],
                status=status,
            )
        )
    askable = any(r.status != "off_in_card" for r in regex) or any(
        h.kind == "other" and h.status != "off_in_card" for h in helper
    )
    return CardScripts(
        regex=regex,
        helper=helper,
        problems=found.problems,
        permissions=permissions,
        needs_answer=askable and not permissions.asked,
    )
