"""The format guide: what the default pipeline tells the model about the Filament format.

A model is never told by itself that storyloom folds ``<thought>`` away, applies
``<state_update>`` to the chat's variables (branch-true state, seed 001) and shows
``<reply>``. Without being told, a real model writes none of them, and the state never
changes. So every prompt carries a short guide, in the chat's language, with the state as
it is now, as its own block (the prompt inspector shows it as "format guide").

It is on unless something says otherwise, in this order:

1. the chat's setting ``format_guide`` (``"on"``, ``"off"``, or ``"auto"``, the default);
2. the chat's ``format_guide_text``, which replaces the built-in text when set;
3. the card's ``extensions.storyloom.format_guide``: ``false`` turns it off, a string
   replaces the text;
4. ``auto`` leaves it out for a card that brings its own update rules (its text mentions
   ``<UpdateVariable>``, ``<JSONPatch>`` or ``<state_update>``, or it carries MVU's Tavern
   Helper scripts, as MVU cards do): the card's rules are the ones its author tuned, and
   two sets would confuse the model.

A replacement text may use ``{state}`` for the current variables as JSON (``$``-keys
such as MVU's ``$meta`` left out, as Tavern Helper's macros leave them).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from storyloom.chat.prompt.helper_variables import without_dollar_keys
from storyloom.chat.store.snapshot import ContextSnapshot
from storyloom.sillytavern.tavern_helper import helper_scripts

STATE_CHARS_MAX = 1200
"""The state shown is cut here: a guide must stay a small part of a small context."""

_OWN_RULES = re.compile(r"<\s*/?\s*(UpdateVariable|JSONPatch|state_update)\b", re.IGNORECASE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")

_GUIDE = {
    "en": (
        "[How to write your answer]\n"
        "- You may think first inside <thought>…</thought>; the user never sees it.\n"
        "- When the scene changes something worth tracking (a mood, an item, a place, a "
        "relationship, a number), record it before the reply inside <state_update>, one "
        'tag per change: <state_update><set key="mood" value="wary"/>'
        '<add key="gold" value="5"/></state_update> (also sub, push, pull, remove).\n'
        "- Then write the reply itself inside <reply>…</reply>.\n"
        "Tracked state now: {state}"
    ),
    "zh": (
        "[回答格式]\n"
        "- 可以先在 <thought>…</thought> 中思考，用户看不到。\n"
        "- 场景中值得记录的东西变了（心情、物品、地点、关系、数值），在回复之前写进 "
        '<state_update>，每处变化一个标签：<state_update><set key="心情" value="警惕"/>'
        '<add key="金币" value="5"/></state_update>（还有 sub、push、pull、remove）。\n'
        "- 然后把回复本身写在 <reply>…</reply> 中。\n"
        "当前记录的状态：{state}"
    ),
}
_NOTHING_YET = {"en": "nothing yet", "zh": "暂无"}


def chat_language(snapshot: ContextSnapshot) -> str:
    """``zh`` when the card and the latest messages are mostly Chinese, Japanese or
    Korean script, else ``en``."""
    card = snapshot.character.card
    parts = [str(card.get(key) or "") for key in ("description", "first_mes", "personality")]
    parts += [m.content for m in snapshot.history[-6:]]
    sample = "".join(parts)[-4000:]
    letters = sum(1 for ch in sample if ch.isalpha())
    if not letters:
        return "en"
    return "zh" if len(_CJK.findall(sample)) / letters > 0.3 else "en"


def _state_text(variables: dict[str, Any], language: str) -> str:
    if not variables:
        return _NOTHING_YET[language]
    shown = without_dollar_keys(variables)
    text = json.dumps(shown, ensure_ascii=False, separators=(", ", ": "))
    return text if len(text) <= STATE_CHARS_MAX else text[: STATE_CHARS_MAX - 1] + "…"


def _card_choice(card: dict[str, Any]) -> Any:
    extensions = card.get("extensions")
    ours = extensions.get("storyloom") if isinstance(extensions, dict) else None
    return ours.get("format_guide") if isinstance(ours, dict) else None


def _brings_own_rules(card: dict[str, Any]) -> bool:
    texts = [
        str(card.get(key) or "")
        for key in ("description", "system_prompt", "post_history_instructions", "mes_example")
    ]
    extensions = card.get("extensions")
    if isinstance(extensions, dict) and extensions.get("regex_scripts"):
        texts.append(json.dumps(extensions["regex_scripts"], ensure_ascii=False))
    if any(_OWN_RULES.search(text) for text in texts):
        return True
    scripts = helper_scripts(card).scripts
    return any(s.kind in ("mvu_bundle", "mvu_schema") and s.enabled for s in scripts)


@dataclass(frozen=True)
class FormatGuide:
    text: str
    origin: Literal["builtin", "chat", "card"]
    """Whose text it is: storyloom's, the chat's ``format_guide_text`` or the card's."""


def format_guide(snapshot: ContextSnapshot) -> FormatGuide | None:
    """The guide this turn's prompt carries, or None when it carries none."""
    settings = snapshot.settings
    card = snapshot.character.card
    choice = settings.format_guide
    if choice == "off":
        return None
    card_choice = _card_choice(card)
    if choice == "auto" and (card_choice is False or _brings_own_rules(card)):
        return None
    language = chat_language(snapshot)
    state = _state_text(dict(snapshot.state.variables), language)
    card_text = card_choice if isinstance(card_choice, str) and card_choice.strip() else ""
    if settings.format_guide_text.strip():
        return FormatGuide(settings.format_guide_text.replace("{state}", state), "chat")
    if card_text:
        return FormatGuide(card_text.replace("{state}", state), "card")
    return FormatGuide(_GUIDE[language].replace("{state}", state), "builtin")
