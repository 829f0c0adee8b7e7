"""Writing storyloom's characters, books and chats back as SillyTavern files.

A card is rebuilt from the preset's ``source_card``: the preset as the source card gives it
is compared with the preset now, field by field, and only changed fields are written into
``data`` (and into the V1 top-level copies SillyTavern keeps, where the card has them). An
untouched import therefore comes back equal to the file it came from; the only additions
are the spec fields SillyTavern always writes when they are missing (the V2 ones and
``group_only_greetings``), with their empty defaults. The embedded book is the given KB
exported with :func:`.st_world_info.export_character_book`.

A PNG gets the card twice, like SillyTavern writes it: ``chara`` with spec
``chara_card_v2`` and ``ccv3`` with the same data and spec ``chara_card_v3``.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Mapping
from typing import Any, Literal

from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.st_world_info import export_character_book, export_world_info
from storyloom.sillytavern.character import (
    CARD_PATHS,
    CharacterDefinition,
)
from storyloom.sillytavern.character_card import (
    ASSET_CHUNK_PREFIX,
    CARD_CHUNK_V2,
    CARD_CHUNK_V3,
    PNG_ASSET_URI_PREFIX,
    V2_DATA_FIELDS,
    V2_OPTIONAL_FIELDS,
    V2_SPEC,
    V3_SPEC,
    asset_file,
    encode_card_text,
)
from storyloom.sillytavern.chat_log import export_chat_jsonl
from storyloom.sillytavern.dotted_path import set_dotted
from storyloom.sillytavern.png_chunks import replace_text_chunks

__all__ = ["export_card_json", "export_card_png", "export_chat_jsonl", "export_world_info"]

CardSpec = Literal["v2", "v3"]
_SPECS: dict[str, tuple[str, str]] = {"v2": (V2_SPEC, "2.0"), "v3": (V3_SPEC, "3.0")}
# The order SillyTavern's charaFormatData gives a new card's top level.
_NEW_TOP_LEVEL = (
    "name",
    "description",
    "personality",
    "scenario",
    "first_mes",
    "mes_example",
    "creatorcomment",
    "avatar",
    "talkativeness",
    "fav",
    "tags",
)
_V3_OPTIONAL = (
    "nickname",
    "creator_notes_multilingual",
    "source",
    "creation_date",
    "modification_date",
    "assets",
)
_V1_COPY_OF = {top: key for key, (_, top) in CARD_PATHS.items() if top}


def _skeleton(preset: CharacterDefinition) -> dict[str, Any]:
    card: dict[str, Any] = {}
    for top in _NEW_TOP_LEVEL:
        card[top] = "none" if top == "avatar" else copy.deepcopy(getattr(preset, _V1_COPY_OF[top]))
    card["spec"], card["spec_version"] = _SPECS["v2"]
    data: dict[str, Any] = {}
    for key in V2_DATA_FIELDS:
        if key != "character_book" and key in CARD_PATHS:
            data[key] = copy.deepcopy(getattr(preset, key))
    data["extensions"] = copy.deepcopy(preset.extensions)
    data["extensions"]["talkativeness"] = preset.talkativeness
    data["extensions"]["fav"] = preset.fav
    data["group_only_greetings"] = list(preset.group_only_greetings)
    for key in _V3_OPTIONAL:
        if getattr(preset, key) is not None:
            data[key] = copy.deepcopy(getattr(preset, key))
    card["data"] = data
    return card


def _changed_fields(preset: CharacterDefinition) -> dict[str, Any]:
    source = preset.source_card or {}
    baseline = CharacterDefinition.from_card(source, fallback_name=preset.name)
    changed = {}
    for key in CARD_PATHS:
        now = getattr(preset, key)
        if now != getattr(baseline, key):
            changed[key] = now
    return changed


def export_card_json(
    preset: CharacterDefinition,
    book: KnowledgeBase | None,
    *,
    spec: CardSpec | None = None,
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    """The card JSON of ``preset`` with ``book`` embedded (None: the card has no book).

    ``spec`` picks V2 or V3; by default the imported card's own (V2 for V1 cards and for
    presets made in storyloom, as SillyTavern stores them).
    """
    source = preset.source_card
    if source and isinstance(source.get("data"), dict):
        card = copy.deepcopy(source)
        data = card["data"]
        # CARD_PATHS puts "extensions" before talkativeness/fav: a changed typed value
        # wins over what the replaced extensions dict holds.
        for key, value in _changed_fields(preset).items():
            path, top = CARD_PATHS[key]
            set_dotted(data, path, value)
            if top and top in card:
                card[top] = copy.deepcopy(value)
        if not isinstance(data.get("extensions"), dict):
            data["extensions"] = {}
    else:
        card = _skeleton(preset)
        if source:
            # A V1 card: keep its own top-level keys, add spec and data.
            v1 = copy.deepcopy(source)
            for key, value in _changed_fields(preset).items():
                top = CARD_PATHS[key][1]
                if top and top in v1:
                    v1[top] = copy.deepcopy(value)
            for key, value in card.items():
                if key not in v1 or key in ("spec", "spec_version", "data"):
                    v1[key] = value
            card = v1
        data = card["data"]

    wanted = spec or ("v3" if card.get("spec") == V3_SPEC else "v2")
    if card.get("spec") != _SPECS[wanted][0]:
        card["spec"], card["spec_version"] = _SPECS[wanted]

    for key, kind in V2_DATA_FIELDS.items():
        if key not in data and key not in V2_OPTIONAL_FIELDS:
            data[key] = kind()
    if "group_only_greetings" not in data:
        data["group_only_greetings"] = []

    if book is None:
        if data.get("character_book") is not None:
            del data["character_book"]
    else:
        data["character_book"] = export_character_book(book, warnings=warnings)
    return card


def export_card_png(
    preset: CharacterDefinition,
    book: KnowledgeBase | None,
    image_bytes: bytes,
    *,
    warnings: list[str] | None = None,
    assets: Mapping[str, bytes] | None = None,
) -> bytes:
    """``image_bytes`` (a PNG) carrying the card in ``chara`` (V2) and ``ccv3`` (V3) chunks.

    ``assets`` are the files kept beside the character, by the path
    :func:`~storyloom.sillytavern.character_card.asset_file` gives: each ``__asset:N`` of
    the card's ``assets`` whose file is there goes back into a ``chara-ext-asset_:N`` chunk
    (one that is missing is left out with a warning).

    Raises :class:`~.png_chunks.PngError` when the image is not a valid PNG.
    """
    v2 = export_card_json(preset, book, spec="v2", warnings=warnings)
    v3 = copy.deepcopy(v2)
    v3["spec"], v3["spec_version"] = _SPECS["v3"]
    texts = [(CARD_CHUNK_V2, encode_card_text(v2)), (CARD_CHUNK_V3, encode_card_text(v3))]
    for asset in preset.assets or []:
        uri = asset.get("uri") if isinstance(asset, dict) else None
        if not isinstance(uri, str) or not uri.startswith(PNG_ASSET_URI_PREFIX):
            continue
        file = asset_file(uri)
        blob = assets.get(file) if assets is not None and file is not None else None
        if blob is None:
            if warnings is not None:
                warnings.append(f"asset {uri!r} has no file here; its chunk is left out")
            continue
        name = uri.removeprefix(PNG_ASSET_URI_PREFIX)
        texts.append((f"{ASSET_CHUNK_PREFIX}:{name}", base64.b64encode(blob).decode("ascii")))
    return replace_text_chunks(image_bytes, texts)
