"""Small SillyTavern documents built in code, for tests anywhere in storyloom.

These builders make the shapes SillyTavern writes: a world-info book, a card (V1/V2/V3,
JSON or PNG, with a book), a CHARX archive and a chat. Every builder takes overrides, so
a test states only what it is about. ``tests/fixtures/make_fixtures.py`` builds the
fixture files with them; real users' files are the corpus ``make test-corpus`` reads.
"""

from __future__ import annotations

import base64
import copy
from typing import Any, Literal

from storyloom.sillytavern.character_card import (
    CARD_CHUNK_V2,
    CARD_CHUNK_V3,
    V2_SPEC,
    V3_SPEC,
    encode_card_text,
)
from storyloom.sillytavern.charx import build_charx
from storyloom.sillytavern.chat_log import dump_line
from storyloom.sillytavern.png_chunks import blank_png, replace_text_chunks
from storyloom.sillytavern.world_info_entry import WI_ENTRY_TEMPLATE

__all__ = [
    "blank_png",
    "card_book_entry",
    "card_document",
    "card_png",
    "charx_archive",
    "chat_jsonl",
    "chat_message",
    "group_chat_jsonl",
    "group_document",
    "world_info_document",
    "world_info_entry",
]


def world_info_entry(uid: int, keys: list[str], content: str, **fields: Any) -> dict[str, Any]:
    """A world-info entry as SillyTavern saves a new one, with ``fields`` overriding."""
    entry: dict[str, Any] = {"uid": uid, **copy.deepcopy(WI_ENTRY_TEMPLATE)}
    entry.update(key=list(keys), content=content, displayIndex=uid)
    entry.update(copy.deepcopy(fields))
    return entry


def world_info_document(entries: list[dict[str, Any]], **book: Any) -> dict[str, Any]:
    """A world-info file: ``entries`` keyed by their uid, then any book fields."""
    return {"entries": {str(e["uid"]): copy.deepcopy(e) for e in entries}, **book}


def card_book_entry(entry_id: int, keys: list[str], content: str, **fields: Any) -> dict[str, Any]:
    """A ``character_book`` entry as SillyTavern exports one."""
    entry: dict[str, Any] = {
        "id": entry_id,
        "keys": list(keys),
        "secondary_keys": [],
        "comment": "",
        "content": content,
        "constant": False,
        "selective": True,
        "insertion_order": 100,
        "enabled": True,
        "position": "before_char",
        "use_regex": True,
        "extensions": {
            "position": 0,
            "exclude_recursion": False,
            "display_index": entry_id,
            "probability": 100,
            "useProbability": True,
            "depth": 4,
            "selectiveLogic": 0,
            "group": "",
            "group_override": False,
            "group_weight": 100,
            "prevent_recursion": False,
            "delay_until_recursion": False,
            "scan_depth": None,
            "match_whole_words": None,
            "use_group_scoring": None,
            "case_sensitive": None,
            "automation_id": "",
            "role": 0,
            "vectorized": False,
            "sticky": 0,
            "cooldown": 0,
            "delay": 0,
        },
    }
    entry.update(copy.deepcopy(fields))
    return entry


def v3_book_entry(entry_id: int, keys: list[str], content: str, **fields: Any) -> dict[str, Any]:
    """A ``character_book`` entry as a Character Card V3 editor (not SillyTavern) writes
    one: the spec's fields only, nothing of SillyTavern's under ``extensions``."""
    entry: dict[str, Any] = {
        "id": entry_id,
        "keys": list(keys),
        "content": content,
        "extensions": {},
        "enabled": True,
        "insertion_order": 100,
        "use_regex": False,
        "constant": False,
        "comment": f"entry {entry_id}",
    }
    entry.update(copy.deepcopy(fields))
    return entry


def lorebook_v3_document(
    entries: list[dict[str, Any]], name: str = "Drifting Isles", **book: Any
) -> dict[str, Any]:
    """A Character Card V3 lorebook file: ``{"spec": "lorebook_v3", "data": book}``."""
    data: dict[str, Any] = {"name": name, "extensions": {}, "entries": copy.deepcopy(entries)}
    data.update(copy.deepcopy(book))
    return {"spec": "lorebook_v3", "data": data}


def card_document(
    name: str = "Aria",
    *,
    spec: Literal["v1", "v2", "v3"] = "v2",
    book: list[dict[str, Any]] | None = None,
    book_name: str | None = None,
    **data_fields: Any,
) -> dict[str, Any]:
    """A card as SillyTavern stores it: V1 top-level fields plus ``spec`` and ``data``."""
    data: dict[str, Any] = {
        "name": name,
        "description": f"{name} is a cartographer of drifting islands.",
        "personality": "curious, dry humour",
        "scenario": "{{user}} meets {{char}} on a floating market.",
        "first_mes": f"*{name} looks up from a map.* Lost again?",
        "mes_example": "<START>\n{{user}}: Hi\n{{char}}: Hello.",
        "creator_notes": "",
        "system_prompt": "",
        "post_history_instructions": "",
        "tags": ["fantasy"],
        "creator": "storyloom tests",
        "character_version": "1.0",
        "alternate_greetings": [],
        "extensions": {
            "talkativeness": "0.5",
            "fav": False,
            "world": "",
            "depth_prompt": {"prompt": "", "depth": 4, "role": "system"},
        },
        "group_only_greetings": [],
    }
    data.update(copy.deepcopy(data_fields))
    if book is not None:
        data["character_book"] = {"entries": copy.deepcopy(book), "name": book_name or name}
    top: dict[str, Any] = {
        "name": data["name"],
        "description": data["description"],
        "personality": data["personality"],
        "scenario": data["scenario"],
        "first_mes": data["first_mes"],
        "mes_example": data["mes_example"],
        "creatorcomment": data["creator_notes"],
        "avatar": "none",
        "talkativeness": "0.5",
        "fav": False,
        "tags": list(data["tags"]),
    }
    if spec == "v1":
        return top
    spec_name, version = (V3_SPEC, "3.0") if spec == "v3" else (V2_SPEC, "2.0")
    return {**top, "spec": spec_name, "spec_version": version, "data": data}


def card_png(
    card: dict[str, Any],
    *,
    chunks: tuple[str, ...] = (CARD_CHUNK_V2, CARD_CHUNK_V3),
    image: bytes | None = None,
    assets: dict[str, bytes] | None = None,
) -> bytes:
    """A PNG card: ``card`` base64-encoded in each named text chunk (spec set per chunk),
    and each of ``assets`` in a ``chara-ext-asset_:<name>`` chunk (RisuAI's V3 assets)."""
    texts = []
    for keyword in chunks:
        body = copy.deepcopy(card)
        if keyword == CARD_CHUNK_V3 and "data" in body:
            body["spec"], body["spec_version"] = V3_SPEC, "3.0"
        texts.append((keyword, encode_card_text(body)))
    for name, blob in (assets or {}).items():
        texts.append((f"chara-ext-asset_:{name}", base64.b64encode(blob).decode("ascii")))
    return replace_text_chunks(image or blank_png(2, 2), texts)


def charx_archive(card: dict[str, Any], files: dict[str, bytes] | None = None) -> bytes:
    """A CHARX zip of ``card`` and ``files`` (add an icon asset to the card yourself)."""
    return build_charx(card, files)


def chat_message(name: str, mes: str, *, is_user: bool = False, **fields: Any) -> dict[str, Any]:
    """A chat message line as SillyTavern writes one."""
    message: dict[str, Any] = {
        "name": name,
        "is_user": is_user,
        "is_system": False,
        "send_date": "September 19, 2024 8:03pm",
        "mes": mes,
        "extra": {},
    }
    message.update(copy.deepcopy(fields))
    return message


def chat_jsonl(
    messages: list[dict[str, Any]],
    *,
    user_name: str = "User",
    character_name: str = "Aria",
    header: dict[str, Any] | None = None,
) -> str:
    """A chat file: the legacy header (or ``header``) and the messages, joined like SillyTavern."""
    head = header or {
        "user_name": user_name,
        "character_name": character_name,
        "create_date": "2024-09-19@20h03m29s",
        "chat_metadata": {"note_prompt": "", "note_interval": 1},
    }
    return "\n".join(dump_line(obj) for obj in [head, *messages])


def group_document(
    members: list[str], *, group_id: str = "1726776209123", **fields: Any
) -> dict[str, Any]:
    """A group file (``groups/<id>.json``) as SillyTavern's "create group" writes one;
    ``members`` are the cards' avatar file names."""
    group: dict[str, Any] = {
        "id": group_id,
        "name": "The Party",
        "members": list(members),
        "avatar_url": "",
        "allow_self_responses": False,
        "activation_strategy": 0,
        "generation_mode": 0,
        "disabled_members": [],
        "chat_metadata": {},
        "fav": False,
        "chat_id": group_id,
        "chats": [group_id],
        "auto_mode_delay": 5,
        "generation_mode_join_prefix": "",
        "generation_mode_join_suffix": "",
    }
    group.update(copy.deepcopy(fields))
    return group


def group_chat_jsonl(
    messages: list[dict[str, Any]], *, header: dict[str, Any] | None = None
) -> str:
    """A group chat file (``group chats/<chat id>.jsonl``): the messages, each reply with
    its speaker's ``original_avatar``; older SillyTavern wrote no header line."""
    lines = ([header] if header is not None else []) + messages
    return "\n".join(dump_line(obj) for obj in lines)
