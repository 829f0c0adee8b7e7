"""A prompt block's source label as structure: what it is and its values.

The prompt inspector shows where each block came from ("Card: description", "Message 3
(Aria)"). The web app says that in the page's language, so a block's source carries the
label's kind (``what``) and its values (``values``: names, numbers, ids); ``label`` is the
same in English words, for logs, the CLI and an older web app. Both are made here, from
one table, so they never disagree.
"""

from __future__ import annotations

from typing import Literal, assert_never

SourceWhat = Literal[
    "preset_prompt",  # values prompt (its identifier), name (none: the default name)
    "preset_new_chat",
    "preset_continue_nudge",
    "preset_impersonation",
    "card_system_prompt",
    "card_post_history",
    "card_description",
    "card_personality",
    "card_scenario",
    "card_example",  # values n, total
    "card_character_note",  # values member ("" for the chat's own character)
    "character_base_persona",
    "character_evolved_persona",
    "background",  # values name ("" when the background has none)
    "persona",  # values name
    "message",  # values number, role, speaker ("" when the message names none)
    "authors_note",
    "director",  # values point
    "format_guide_builtin",
    "format_guide_chat",
    "format_guide_card",
    "summary",  # values n
    "rag",  # values source, score
    "lore",  # values book, title, placement
    "script",  # values name, and node for a node's inline code
]

SourceValue = str | int | float

PROMPT_NAMES = {
    "main": "Main Prompt",
    "nsfw": "Auxiliary Prompt",
    "jailbreak": "Post-History Instructions",
    "enhanceDefinitions": "Enhance Definitions",
    "worldInfoBefore": "World Info (before)",
    "worldInfoAfter": "World Info (after)",
    "personaDescription": "Persona Description",
    "charDescription": "Char Description",
    "charPersonality": "Char Personality",
    "scenario": "Scenario",
    "dialogueExamples": "Chat Examples",
    "chatHistory": "Chat History",
}
"""SillyTavern's names of its built-in prompts; the web app translates these when a
preset keeps them untouched."""

_SPEAKER_ROLES = {"user": "user", "assistant": "character", "system": "system"}


def english_label(what: SourceWhat, values: dict[str, SourceValue]) -> str:
    """The label in English words."""
    v = values
    match what:
        case "preset_prompt":
            name = v.get("name") or PROMPT_NAMES.get(str(v["prompt"]), str(v["prompt"]))
            return f"Preset: {name}"
        case "preset_new_chat":
            return "Preset: new chat prompt"
        case "preset_continue_nudge":
            return "Preset: continue nudge"
        case "preset_impersonation":
            return "Preset: impersonation prompt"
        case "card_system_prompt":
            return "Card: system prompt"
        case "card_post_history":
            return "Card: post-history instructions"
        case "card_description":
            return "Card: description"
        case "card_personality":
            return "Card: personality"
        case "card_scenario":
            return "Card: scenario"
        case "card_example":
            return f"Card: example dialogue {v['n']} of {v['total']}"
        case "card_character_note":
            member = v.get("member")
            return f"Card: character note ({member})" if member else "Card: character note"
        case "character_base_persona":
            return "Character: base persona"
        case "character_evolved_persona":
            return "Character: evolved persona (updated memory)"
        case "background":
            return f"Background: {v.get('name') or 'world setting'}"
        case "persona":
            return f"Persona: {v['name']}"
        case "message":
            who = v.get("speaker") or _SPEAKER_ROLES.get(str(v["role"]), str(v["role"]))
            return f"Message {v['number']} ({who})"
        case "authors_note":
            return "Author's note"
        case "director":
            return f"Director: outline point {v['point']}"
        case "format_guide_builtin":
            return "Format guide (built in)"
        case "format_guide_chat":
            return "Format guide (this chat's)"
        case "format_guide_card":
            return "Format guide (the card's)"
        case "summary":
            return f"Summary point {v['n']}"
        case "rag":
            return f"Memory from {v['source']} (score {float(v['score']):.2f})"
        case "lore":
            placement = str(v["placement"]).replace("_", " ")
            return f"Lore: {v['book']} / {v['title']} ({placement})"
        case "script":
            return f"Script: {v['name']}"
        case _:
            assert_never(what)
