"""A character of the library as a SillyTavern card: PNG, JSON or CHARX.

The card itself is built by :mod:`storyloom.knowledge.st_export` from the character file
(an imported card comes back as it came, with the edits written in). This module adds
what the library knows: the character's primary book (the first bound KB that is a book,
embedded as ``character_book``; its name goes into ``extensions.world`` when the card
names no world, as SillyTavern links a character to its book), the avatar image, and for
CHARX the archive of ``card.json`` and its assets.

The other bound books are storyloom's and are not part of a card: SillyTavern keeps extra
books per character in its own settings, not in the card.

A PNG card needs a PNG: an avatar in another format (or none) is exported on a
generated portrait, a solid colour chosen from the name.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from storyloom.knowledge.card_knowledge import CHARACTER_DEFINITION, character_tag
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.st_export import export_card_json, export_card_png
from storyloom.sillytavern.character import CharacterDefinition
from storyloom.sillytavern.character_card import PNG_ASSET_URI_PREFIX, asset_file
from storyloom.sillytavern.charx import EMBEDDED_PREFIXES, build_charx
from storyloom.sillytavern.png_chunks import blank_png, is_png

CHARX_ICON_DIR = "assets/icon/images"
DEFAULT_PORTRAIT = (400, 600)
_IMAGE_EXT = {
    b"\x89PNG": "png",
    b"\xff\xd8\xff": "jpeg",
    b"GIF8": "gif",
}


def primary_book(
    preset: CharacterDefinition, bases: Sequence[KnowledgeBase]
) -> KnowledgeBase | None:
    """The book a card of ``preset`` embeds: the first bound KB that is a book (not the
    "<name> · character" definition KB). A file from before books could be bound (no
    ``knowledge_bases`` key) embeds the book the importer tagged as the character's own."""
    by_id = {kb.kb_id: kb for kb in bases}
    for kb_id in preset.knowledge_bases:
        kb = by_id.get(kb_id)
        if kb is not None and CHARACTER_DEFINITION not in kb.tags:
            return kb
    if "knowledge_bases" in preset.model_fields_set:
        return None  # the user's list, even an empty one, is the last word
    mine = character_tag(preset.name)
    return next(
        (kb for kb in bases if mine in kb.tags and CHARACTER_DEFINITION not in kb.tags), None
    )


def _with_world(preset: CharacterDefinition, book: KnowledgeBase | None) -> CharacterDefinition:
    """``preset`` naming ``book`` in ``extensions.world`` when it names no world yet and
    its imported card had no book of its own (an untouched import comes back as it was)."""
    if book is None or preset.world:
        return preset
    source_data = (preset.source_card or {}).get("data")
    if isinstance(source_data, dict) and source_data.get("character_book") is not None:
        return preset
    extensions = copy.deepcopy(preset.extensions)
    extensions["world"] = book.display_name
    return preset.model_copy(update={"extensions": extensions})


def default_portrait(name: str) -> bytes:
    """A plain portrait PNG whose colour comes from ``name`` (same name, same colour)."""
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    # Mid-tones: dark enough for white text, light enough to be seen on a dark page.
    rgb = (64 + digest[0] % 128, 64 + digest[1] % 128, 64 + digest[2] % 128)
    return blank_png(*DEFAULT_PORTRAIT, rgb=rgb)


def image_ext(image: bytes) -> str | None:
    """The file extension of a PNG, JPEG, GIF or WebP image, None for other bytes."""
    if image[:4] == b"RIFF" and image[8:12] == b"WEBP":
        return "webp"
    return next((ext for magic, ext in _IMAGE_EXT.items() if image.startswith(magic)), None)


def card_json(
    preset: CharacterDefinition,
    bases: Sequence[KnowledgeBase],
    *,
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    """The card JSON (V2, or V3 when the imported card was), primary book embedded."""
    book = primary_book(preset, bases)
    return export_card_json(_with_world(preset, book), book, warnings=warnings)


def _stored_file(assets_dir: Path | None, file: str | None) -> bytes | None:
    """The bytes of an asset file kept under ``assets_dir`` (None: not there, or a path
    that would leave the folder: it comes from a stranger's card)."""
    if assets_dir is None or file is None:
        return None
    parts = file.replace("\\", "/").split("/")
    if ".." in parts or "\0" in file or file.startswith("/") or (len(file) > 1 and file[1] == ":"):
        return None
    source = assets_dir / PurePosixPath(file)
    return source.read_bytes() if source.is_file() else None


def stored_assets(preset: CharacterDefinition, assets_dir: Path | None) -> dict[str, bytes]:
    """The files of the card's embedded assets kept in ``assets_dir``, by the path
    :func:`~storyloom.sillytavern.character_card.asset_file` gives each uri."""
    files: dict[str, bytes] = {}
    for asset in preset.assets or []:
        uri = asset.get("uri") if isinstance(asset, dict) else None
        file = asset_file(uri) if isinstance(uri, str) else None
        blob = _stored_file(assets_dir, file)
        if file is not None and blob is not None:
            files[file] = blob
    return files


def card_png(
    preset: CharacterDefinition,
    bases: Sequence[KnowledgeBase],
    avatar: bytes | None,
    assets_dir: Path | None = None,
    *,
    warnings: list[str] | None = None,
) -> bytes:
    """The avatar (or a generated portrait) carrying the card as ``chara`` and ``ccv3``,
    and the assets a PNG card brought (``__asset:N``) back in their ``chara-ext-asset_``
    chunks, from ``assets_dir`` where their files are kept."""
    book = primary_book(preset, bases)
    image = avatar if avatar is not None and is_png(avatar) else default_portrait(preset.name)
    return export_card_png(
        _with_world(preset, book),
        book,
        image,
        warnings=warnings,
        assets=stored_assets(preset, assets_dir),
    )


def _embedded_path(uri: str) -> str | None:
    """The archive path an ``embeded://`` uri names; None for other uris and for paths
    that would leave the assets folder (the uri comes from a stranger's card)."""
    for prefix in EMBEDDED_PREFIXES:
        if uri.startswith(prefix):
            path = uri.removeprefix(prefix).lstrip("/")
            parts = path.replace("\\", "/").split("/")
            if not path or ".." in parts or "\0" in path or (len(path) > 1 and path[1] == ":"):
                return None
            return path
    return None


_SAFE_PART = re.compile(r"[^A-Za-z0-9_-]+")


def _png_asset_member(
    asset: dict[str, Any], assets_dir: Path | None, files: dict[str, bytes]
) -> tuple[str, bytes] | None:
    """Where an asset a PNG card brought (``__asset:N``) goes in a CHARX archive
    (``assets/<type>/<N>.<ext>``, as RisuAI lays out its members), with its bytes; None
    when its file is not kept here."""
    uri = str(asset.get("uri", ""))
    blob = _stored_file(assets_dir, asset_file(uri))
    if blob is None:
        return None
    kind = _SAFE_PART.sub("", str(asset.get("type") or "")) or "other"
    ext = _SAFE_PART.sub("", str(asset.get("ext") or ""))[:16] or image_ext(blob) or "bin"
    stem = _SAFE_PART.sub("_", uri.removeprefix(PNG_ASSET_URI_PREFIX)) or "asset"
    member = f"assets/{kind}/{stem}.{ext}"
    count = 1
    while member in files:
        count += 1
        member = f"assets/{kind}/{stem}_{count}.{ext}"
    return member, blob


def card_charx(
    preset: CharacterDefinition,
    bases: Sequence[KnowledgeBase],
    avatar: bytes | None,
    assets_dir: Path | None = None,
    *,
    warnings: list[str] | None = None,
) -> bytes:
    """A CHARX archive: ``card.json`` (V3) and its assets. The avatar (or a generated
    portrait) is the ``main`` icon at ``assets/icon/images/``; the other embedded assets
    of an imported CHARX, and those a PNG card brought (``__asset:N``, packed as
    ``embeded://`` members), come along from ``assets_dir`` where their files are kept."""
    book = primary_book(preset, bases)
    card = export_card_json(_with_world(preset, book), book, spec="v3", warnings=warnings)
    data = card["data"]
    image = avatar if avatar is not None and image_ext(avatar) else default_portrait(preset.name)
    ext = image_ext(image) or "png"
    icon_path = f"{CHARX_ICON_DIR}/main.{ext}"
    files: dict[str, bytes] = {icon_path: image}
    assets: list[dict[str, Any]] = [
        {"type": "icon", "uri": f"embeded://{icon_path}", "name": "main", "ext": ext}
    ]
    for asset in data.get("assets") or []:
        if not isinstance(asset, dict) or asset.get("type") == "icon":
            continue
        uri = str(asset.get("uri", ""))
        if uri.startswith(PNG_ASSET_URI_PREFIX):
            packed = _png_asset_member(asset, assets_dir, files)
            if packed is None:
                if warnings is not None:
                    warnings.append(f"asset {asset.get('name', uri)!r} has no file here; left out")
                continue
            packed_path, blob = packed
            files[packed_path] = blob
            assets.append({**asset, "uri": f"embeded://{packed_path}"})
            continue
        member = _embedded_path(uri)
        if member is None:
            if not uri.startswith(EMBEDDED_PREFIXES):
                assets.append(asset)  # a URL or ccdefault: nothing to pack
            continue
        source = assets_dir / PurePosixPath(member) if assets_dir is not None else None
        if source is None or not source.is_file() or member in files:
            if warnings is not None:
                warnings.append(f"asset {asset.get('name', member)!r} has no file here; left out")
            continue
        files[member] = source.read_bytes()
        assets.append(asset)
    data["assets"] = assets
    return build_charx(card, files)
