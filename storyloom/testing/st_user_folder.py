"""A whole SillyTavern user folder, built in code, for the move-in tests.

The files have the shapes SillyTavern's own code writes them in (``src/endpoints/*.js``
for the files, ``saveSettings`` in ``public/script.js`` for ``settings.json``,
``personas.js``, ``world-info.js``, ``bookmarks.js`` for what chats keep in
``chat_metadata``). ``shape="2026"`` is today's ``data/default-user/`` with V2 cards and
1.18's settings; ``shape="2023"`` is the old ``public/`` layout, V1 cards, the world list
at the top of settings.json, no persona locks or lore timers.

What each piece is there to show is in :data:`FACTS`: a test asks for the text it
expects in a prompt by its name, not by copying it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from storyloom.sillytavern.character_book import wi_to_book_entry
from storyloom.sillytavern.character_card import CARD_CHUNK_V2
from storyloom.testing.st_documents import (
    blank_png,
    card_document,
    card_png,
    chat_jsonl,
    chat_message,
    group_chat_jsonl,
    group_document,
    world_info_document,
    world_info_entry,
)

Shape = Literal["2026", "2023"]

FACTS = {
    "persona_default": "Mira is a tidewright who answers questions with questions.",
    "persona_locked": "Corin is a retired sailor with a wooden leg.",
    "lore_character": "The lighthouse of Veyl burns blue.",
    "lore_global": "Tides on the Isles run backwards at dusk.",
    "lore_chat": "The floating market closes when the gulls go quiet.",
    "lore_persona": "Corin lost his leg to a kraken off Veyl.",
    "preset_main": "Write as the Veyl chronicle: close third person, present tense.",
    "regex_find": "lantern",
    "regex_result": "LANTERN",
    "global_regex_find": "gulls go quiet",
    "global_regex_result": "gulls fall silent",
}
"""The texts a prompt holds when a chat continues as it did in SillyTavern."""

MAIN_CHAT = "Aria - 2026-01-02@10h00m00s"
BRANCH_CHAT = "Branch #3 - 2026-01-02@10h20m00s"
CHECKPOINT_CHAT = "Checkpoint #5 - 2026-01-02@10h30m00s"
BRAM_CHAT = "Bram - 2026-01-03@09h00m00s"
CASS_CHAT = "Cass - 2026-01-04@08h00m00s"
GROUP_ID = "1726776209123"
GROUP_BRANCH_ID = "Branch #1 - 2026-01-02@10h50m00s"
PRESET_NAME = "Veyl Chronicle"

_DATES = [f"2026-01-02T10:{minute:02d}:00.000Z" for minute in range(60)]


def _world(uid: int, keys: list[str], content: str) -> dict[str, Any]:
    return world_info_entry(uid, keys, content, comment=keys[0])


WORLDS: dict[str, list[dict[str, Any]]] = {
    "Drifting Isles": [_world(0, ["lighthouse"], FACTS["lore_character"])],
    "Tidewright Lore": [_world(0, ["tide", "tides"], FACTS["lore_global"])],
    "Market Rumours": [_world(0, ["market"], FACTS["lore_chat"])],
    "Corin's Log": [_world(0, ["leg", "kraken"], FACTS["lore_persona"])],
}


def _regex(script_id: str, name: str, find: str, replace: str, **fields: Any) -> dict[str, Any]:
    """A regex script as the Regex extension saves one (``extensions/regex/index.js``)."""
    script: dict[str, Any] = {
        "id": script_id,
        "scriptName": name,
        "findRegex": find,
        "replaceString": replace,
        "trimStrings": [],
        "placement": [1, 2],
        "disabled": False,
        "markdownOnly": False,
        "promptOnly": True,
        "runOnEdit": True,
        "substituteRegex": 0,
        "minDepth": None,
        "maxDepth": None,
    }
    script.update(fields)
    return script


def _preset() -> dict[str, Any]:
    """An ``OpenAI Settings/<name>.json`` chat-completion preset (``presets.js`` save)."""
    markers = ["worldInfoBefore", "personaDescription", "charDescription", "chatHistory"]
    return {
        "chat_completion_source": "openai",
        "temperature": 0.7,
        "openai_max_context": 8000,
        "openai_max_tokens": 300,
        "wi_format": "{0}",
        "prompts": [
            {
                "identifier": "main",
                "name": "Main Prompt",
                "system_prompt": True,
                "role": "system",
                "content": FACTS["preset_main"],
            },
            *({"identifier": m, "name": m, "system_prompt": True, "marker": True} for m in markers),
        ],
        "prompt_order": [
            {
                "character_id": 100001,
                "order": [{"identifier": i, "enabled": True} for i in ["main", *markers]],
            }
        ],
    }


def _instruct() -> dict[str, Any]:
    """An ``instruct/<name>.json`` template as SillyTavern saves one (1.12+ fields)."""
    return {
        "name": "Veyl ChatML",
        "input_sequence": "<|im_start|>user",
        "output_sequence": "<|im_start|>assistant",
        "last_output_sequence": "",
        "system_sequence": "<|im_start|>system",
        "stop_sequence": "<|im_end|>",
        "wrap": True,
        "macro": True,
        "names_behavior": "force",
        "activation_regex": "",
        "system_sequence_prefix": "",
        "system_sequence_suffix": "",
        "first_output_sequence": "",
        "skip_examples": False,
        "output_suffix": "<|im_end|>\n",
        "input_suffix": "<|im_end|>\n",
        "system_suffix": "<|im_end|>\n",
        "user_alignment_message": "",
        "system_same_as_user": False,
        "last_system_sequence": "",
        "first_input_sequence": "",
        "last_input_sequence": "",
        "sequences_as_stop_strings": True,
        "story_string_prefix": "",
        "story_string_suffix": "",
    }


def _settings(shape: Shape) -> dict[str, Any]:
    """``settings.json`` as ``saveSettings`` writes it (the parts a move-in reads, and
    a few it keeps aside)."""
    world_info: dict[str, Any] = {
        "globalSelect": ["Tidewright Lore"],
        "charLore": [{"name": "Bram", "extraBooks": ["Market Rumours"]}],
    }
    personas = {"user-default.png": "Mira", "sailor.png": "Corin"}
    descriptions = {
        "user-default.png": {
            "description": FACTS["persona_default"],
            "position": 0,
            "depth": 2,
            "role": 0,
            "lorebook": "",
        },
        "sailor.png": {
            "description": FACTS["persona_locked"],
            "position": 0,
            "depth": 2,
            "role": 0,
            "lorebook": "Corin's Log",
            "title": "the sailor",
        },
    }
    if shape == "2026":
        # 1.13+: a persona connected to a character speaks in its chats (personas.js).
        descriptions["sailor.png"]["connections"] = [{"type": "character", "id": "Cass.png"}]
    power_user: dict[str, Any] = {
        "personas": personas,
        "persona_descriptions": descriptions,
        "default_persona": "user-default.png",
        "instruct": {"preset": "ChatML"},
        "context": {"preset": "Default"},
    }
    extensions: dict[str, Any] = {
        "regex": [
            _regex("g-1", "Tidy ellipses", "/\\.\\.\\.\\./g", "..."),
            _regex(
                "g-2",
                "Quieter gulls",
                f"/{FACTS['global_regex_find']}/g",
                FACTS["global_regex_result"],
            ),
        ],
        "character_allowed_regex": ["Aria.png"],
        "variables": {"global": {"season": "winter"}},
        "quickReplyV2": {"isEnabled": True, "config": {"setList": [{"set": "Default"}]}},
        "caption": {"source": "local"},
    }
    settings: dict[str, Any] = {
        "firstRun": False,
        "currentVersion": "1.18.0" if shape == "2026" else "1.10.0",
        "username": "Mira",
        "user_avatar": "user-default.png",
        "main_api": "openai",
        "power_user": power_user,
        "extension_settings": extensions,
        "tags": [{"id": "1700000000000", "name": "heroine", "color": ""}],
        "tag_map": {"Aria.png": ["1700000000000"]},
        "oai_settings": {"preset_settings_openai": PRESET_NAME},
        "background": {"name": "harbor.png", "url": "url('backgrounds/harbor.png')"},
    }
    if shape == "2026":
        settings["world_info_settings"] = {"world_info": world_info, "world_info_depth": 2}
    else:
        settings["world_info"] = world_info
    return settings


def _card(shape: Shape, name: str, **fields: Any) -> bytes:
    card = card_document(name, spec="v1" if shape == "2023" else "v2", **fields)
    return card_png(card, chunks=(CARD_CHUNK_V2,))


def _aria_chat_lines() -> list[dict[str, Any]]:
    """The main chat: a greeting with an alternate, swipes, an edit, a hidden line."""
    greeting = chat_message(
        "Aria",
        "*Aria looks up from a map.* Lost again?",
        send_date=_DATES[0],
        swipes=["*Aria looks up from a map.* Lost again?", "*Aria waves.* Over here!"],
        swipe_id=0,
        swipe_info=[{"send_date": _DATES[0], "extra": {}}, {"send_date": _DATES[0], "extra": {}}],
    )
    return [
        greeting,
        chat_message("Mira", "Which way to the lighthouse?", is_user=True, send_date=_DATES[1]),
        chat_message(
            "Aria",
            "Follow the lantern posts north.",
            send_date=_DATES[2],
            swipes=["Ask the gulls.", "Follow the lantern posts north."],
            swipe_id=1,
            swipe_info=[
                {"send_date": _DATES[2], "extra": {}},
                {"send_date": _DATES[2], "extra": {}},
            ],
        ),
        # An edited message: SillyTavern rewrites ``mes`` in place.
        chat_message("Mira", "And the market, is it open?", is_user=True, send_date=_DATES[3]),
        chat_message("Aria", "(out of character: brb)", send_date=_DATES[4], is_system=True),
        chat_message("Aria", "Until the gulls go quiet.", send_date=_DATES[5]),
    ]


def write_st_user_folder(root: Path, *, shape: Shape = "2026", broken_card: bool = False) -> Path:
    """Write the folder under ``root`` (SillyTavern's root: ``data/default-user/`` for
    2026, ``public/`` for 2023) and return the user folder. ``broken_card`` adds a card
    whose embedded JSON is cut short."""
    user = root / ("data/default-user" if shape == "2026" else "public")

    def write(relative: str, data: bytes | str | dict[str, Any]) -> None:
        path = user / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, dict):
            path.write_text(json.dumps(data, indent=4, ensure_ascii=False), encoding="utf-8")
        elif isinstance(data, str):
            path.write_text(data, encoding="utf-8")
        else:
            path.write_bytes(data)

    for name, entries in WORLDS.items():
        write(f"worlds/{name}.json", world_info_document(entries, name=name))
    aria_book = [wi_to_book_entry(e) for e in WORLDS["Drifting Isles"]]
    aria_regex = _regex(
        "c-1", "Shout lanterns", f"/{FACTS['regex_find']}/gi", FACTS["regex_result"]
    )
    extensions = {
        "talkativeness": "0.5",
        "fav": False,
        "world": "Drifting Isles",
        "depth_prompt": {"prompt": "", "depth": 4, "role": "system"},
        "regex_scripts": [aria_regex],
    }
    if shape == "2023":
        write("characters/Aria.png", _card(shape, "Aria"))
    else:
        write(
            "characters/Aria.png",
            _card(shape, "Aria", book=aria_book, book_name="Drifting Isles", extensions=extensions),
        )
    write("characters/Bram.png", _card(shape, "Bram"))
    write("characters/Cass.png", _card(shape, "Cass"))
    write("characters/Cass/joy.png", blank_png(2, 2))
    write("characters/Cass/neutral.png", blank_png(2, 2))
    if broken_card:
        write("characters/Broken.json", '{"spec": "chara_card_v2", "data": {"name": ')

    main_lines = _aria_chat_lines()
    main_meta: dict[str, Any] = {"world_info": "Market Rumours", "variables": {"mood": "wary"}}
    if shape == "2026":
        main_meta["timedWorldInfo"] = {
            "sticky": {
                "Drifting Isles.0": {"hash": 123, "start": 2, "end": 12, "protected": False}
            },
            "cooldown": {},
        }
    header = {
        "user_name": "Mira",
        "character_name": "Aria",
        "create_date": "2026-01-02@10h00m00s",
        "chat_metadata": main_meta,
    }
    write(f"chats/Aria/{MAIN_CHAT}.jsonl", chat_jsonl(main_lines, header=header))
    # A branch (bookmarks.js createBranch) keeps the messages up to the one it left from.
    branch = [
        *main_lines[:3],
        chat_message("Mira", "Tell me of Veyl.", is_user=True, send_date=_DATES[20]),
    ]
    branch_header = {**header, "chat_metadata": {**main_meta, "main_chat": MAIN_CHAT}}
    write(f"chats/Aria/{BRANCH_CHAT}.jsonl", chat_jsonl(branch, header=branch_header))
    checkpoint = [
        *main_lines[:4],
        chat_message("Aria", "No, it burned down.", send_date=_DATES[30]),
    ]
    write(f"chats/Aria/{CHECKPOINT_CHAT}.jsonl", chat_jsonl(checkpoint, header=branch_header))

    bram_meta: dict[str, Any] = (
        {"persona": "sailor.png", "custom_background": 'url("backgrounds/deck%20at%20night.png")'}
        if shape == "2026"
        else {}
    )
    bram_header = {
        "user_name": "Corin",
        "character_name": "Bram",
        "create_date": "2026-01-03@09h00m00s",
        "chat_metadata": bram_meta,
    }
    bram_lines = [
        chat_message("Bram", "Ahoy.", send_date=_DATES[40]),
        chat_message("Corin", "Ahoy yourself.", is_user=True, send_date=_DATES[41]),
    ]
    write(f"chats/Bram/{BRAM_CHAT}.jsonl", chat_jsonl(bram_lines, header=bram_header))
    write(
        f"chats/Cass/{CASS_CHAT}.jsonl",
        chat_jsonl(
            [chat_message("Cass", "Hm?", send_date=_DATES[50])],
            header={
                "user_name": "Mira",
                "character_name": "Cass",
                "create_date": "2026-01-04@08h00m00s",
                "chat_metadata": {},
            },
        ),
    )

    group = group_document(["Aria.png", "Bram.png"], group_id=GROUP_ID)
    group["chats"] = [GROUP_ID, GROUP_BRANCH_ID]
    write(f"groups/{GROUP_ID}.json", group)
    group_lines = [
        chat_message("Aria", "We sail at dawn.", original_avatar="Aria.png", send_date=_DATES[45]),
        chat_message("Bram", "Aye.", original_avatar="Bram.png", send_date=_DATES[46]),
    ]
    write(f"group chats/{GROUP_ID}.jsonl", group_chat_jsonl(group_lines))
    # A group's branch is another of its chats, naming the one it left (groups.js).
    branch_header = {
        "user_name": "unused",
        "character_name": "unused",
        "create_date": "2026-01-02@10h50m00s",
        "chat_metadata": {"main_chat": GROUP_ID},
    }
    group_branch = [
        group_lines[0],
        chat_message("Bram", "Not at dawn.", original_avatar="Bram.png", send_date=_DATES[47]),
    ]
    write(
        f"group chats/{GROUP_BRANCH_ID}.jsonl",
        group_chat_jsonl(group_branch, header=branch_header),
    )

    write(f"OpenAI Settings/{PRESET_NAME}.json", _preset())
    write("instruct/Veyl ChatML.json", _instruct())
    write("User Avatars/user-default.png", blank_png(2, 2))
    write("User Avatars/sailor.png", blank_png(2, 2))
    write(
        "QuickReplies/Default.json",
        {
            "version": 2,
            "name": "Default",
            "disableSend": False,
            "placeBeforeInput": False,
            "injectInput": False,
            "qrList": [
                {"id": 1, "label": "Wave", "message": "*waves*", "title": "", "isHidden": False},
                {"id": 2, "label": "Roll", "message": "/roll 1d20", "title": "", "isHidden": False},
            ],
        },
    )
    write("backgrounds/harbor.png", blank_png(4, 4))
    write("backgrounds/deck at night.png", blank_png(3, 3))
    write(
        "themes/Dark Sea.json", {"name": "Dark Sea", "blur_strength": 10, "main_text_color": "#ddd"}
    )
    write("settings.json", _settings(shape))
    return user


def append_message(user: Path, chat: str, text: str) -> None:
    """The user went on in SillyTavern: one more message at the end of ``chat``
    (``chats/<character>/<name>.jsonl`` relative to the user folder)."""
    path = user / chat
    line = chat_message("Mira", text, is_user=True, send_date="2026-02-01T09:00:00.000Z")
    with path.open("a", encoding="utf-8") as out:
        out.write("\n" + json.dumps(line, ensure_ascii=False))
