"""Import any SillyTavern file: world info, character card (PNG, JSON, CHARX) or chat.

The kind is told by content, not by the file name: a PNG signature means a PNG card, a
zip signature a CHARX archive; JSON with ``entries`` is a world-info book, JSON shaped
like a card is a card, and text whose lines are JSON objects is a chat. The importer is
pure: it reads the file and returns objects; writing them into a project is the caller's
business.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from storyloom.core.errors import FieldProblem, FileFormatError
from storyloom.knowledge.card_knowledge import character_tag
from storyloom.knowledge.knowledge_base import KnowledgeBase
from storyloom.knowledge.st_world_info import (
    LOREBOOK_V3_SPEC,
    character_book_to_kb,
    world_info_to_kb,
)
from storyloom.knowledge.st_world_info_entry import EXTENSION_KEY
from storyloom.sillytavern.character import CharacterDefinition
from storyloom.sillytavern.character_card import (
    PNG_ASSET_URI_PREFIX,
    ParsedCard,
    asset_file,
    card_version,
    parse_card,
    read_png_card,
)
from storyloom.sillytavern.charx import is_zip, read_charx
from storyloom.sillytavern.chat_log import ChatLog, parse_chat_jsonl
from storyloom.sillytavern.png_chunks import is_png
from storyloom.sillytavern.untrusted_json import (
    JsonSyntaxError,
    UntrustedJsonError,
    loads_untrusted,
)

ImportKind = Literal["world_info", "character_png", "character_json", "character_charx", "chat"]
# Larger than any real card, book or chat; a guard against reading a disk image by mistake.
MAX_IMPORT_BYTES = 256 * 1024 * 1024


@dataclass
class ImportResult:
    """What a SillyTavern file holds, ready for the caller to store.

    For a card, ``knowledge_bases`` is its embedded book's KB when it has one, else empty
    (the card's own fields stay in ``character``: a card without lore makes no KB);
    ``avatar_png`` is the card image without its card chunks.
    ``assets`` are the other files of a CHARX archive, or the asset chunks of a PNG card,
    by the path :func:`~storyloom.sillytavern.character_card.asset_file` gives their uri.
    """

    kind: ImportKind
    source: Path
    knowledge_bases: list[KnowledgeBase] = field(default_factory=list)
    character: CharacterDefinition | None = None
    avatar_png: bytes | None = None
    chat: ChatLog | None = None
    assets: dict[str, bytes] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def character_book(self) -> KnowledgeBase | None:
        """The KB of the card's embedded book, if the card had one."""
        if self.character is None or not self.knowledge_bases:
            return None
        return self.knowledge_bases[0]


def import_sillytavern(path: Path) -> ImportResult:
    """Read a SillyTavern file; :class:`FileFormatError` names the file, field and reason."""
    try:
        size = path.stat().st_size
        if size > MAX_IMPORT_BYTES:
            reason = f"{size} bytes is more than any SillyTavern file ({MAX_IMPORT_BYTES})"
            raise FileFormatError(path, [FieldProblem("", reason)])
        data = path.read_bytes()
    except OSError as exc:
        raise FileFormatError(path, [FieldProblem("", f"cannot read: {exc.strerror}")]) from None
    return import_sillytavern_bytes(data, path)


def import_sillytavern_bytes(data: bytes, path: Path | str) -> ImportResult:
    """Like :func:`import_sillytavern` for bytes already in memory (an upload);
    ``path`` names the file in errors and gives a book its default name."""
    path = Path(path)
    if is_png(data):
        return _import_png(data, path)
    if is_zip(data):
        return _import_charx(data, path)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise FileFormatError(
            path, [FieldProblem("", "not a PNG, a zip or UTF-8 text: not a SillyTavern file")]
        ) from None
    try:
        document = loads_untrusted(text)
    except JsonSyntaxError as exc:
        if _looks_like_jsonl(text):
            return ImportResult(kind="chat", source=path, chat=parse_chat_jsonl(text, path))
        raise FileFormatError(path, [FieldProblem("", exc.reason)]) from None
    except UntrustedJsonError as exc:
        raise FileFormatError(path, [FieldProblem(exc.where, exc.reason)]) from None
    return _import_json(document, path)


def _looks_like_jsonl(text: str) -> bool:
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        return False
    try:
        first = loads_untrusted(lines[0])
    except JsonSyntaxError:
        return False
    except UntrustedJsonError:
        return True  # JSON past a limit: the chat reader says which line and why
    return isinstance(first, dict)


def book_name(document: dict[str, Any]) -> str | None:
    """The name a world-info file gives its book: its own ``name``, else the one kept in
    ``originalData`` (a book SillyTavern converted from a card); None: the file's name."""
    original = document.get("originalData")
    for value in (
        document.get("name"),
        original.get("name") if isinstance(original, dict) else None,
    ):
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _import_json(document: Any, path: Path) -> ImportResult:
    if isinstance(document, dict) and "entries" in document and card_version(document) is None:
        kb, warnings = world_info_to_kb(document, path, name=book_name(document))
        return ImportResult(kind="world_info", source=path, knowledge_bases=[kb], warnings=warnings)
    if isinstance(document, dict) and document.get("spec") == LOREBOOK_V3_SPEC:
        return _import_lorebook_v3(document, path)
    if card_version(document) is not None or (isinstance(document, dict) and "spec" in document):
        result = _card_result(parse_card(document, path), path, "character_json", None)
        return result
    if isinstance(document, dict) and ({"chat_metadata", "user_name"} & document.keys()):
        # A chat with a header and no messages yet.
        chat = parse_chat_jsonl(json.dumps(document, ensure_ascii=False), path)
        return ImportResult(kind="chat", source=path, chat=chat)
    raise FileFormatError(
        path,
        [
            FieldProblem(
                "",
                "not a SillyTavern world info (no 'entries'), character card (no 'spec'/'data'"
                " or card fields) or chat",
            )
        ],
    )


def _import_lorebook_v3(document: dict[str, Any], path: Path) -> ImportResult:
    """A Character Card V3 lorebook saved on its own: ``{"spec": "lorebook_v3", "data"}``."""
    book = document.get("data")
    if not isinstance(book, dict):
        raise FileFormatError(path, [FieldProblem("data", "must be a lorebook object")])
    name = book.get("name")
    name = name.strip() if isinstance(name, str) else ""
    kb, warnings = character_book_to_kb(book, path, name=name or path.stem, field="data")
    # Kept so that the book can be written back in the same wrapper.
    kb.kb_extensions[EXTENSION_KEY]["document"] = {
        key: copy.deepcopy(value) for key, value in document.items() if key != "data"
    }
    return ImportResult(kind="world_info", source=path, knowledge_bases=[kb], warnings=warnings)


def _card_result(
    parsed: ParsedCard,
    path: Path,
    kind: ImportKind,
    avatar: str | None,
    warnings: list[str] | None = None,
) -> ImportResult:
    notes = [*(warnings or []), *parsed.warnings]
    name = parsed.name.strip()
    if not name:
        notes.append(f"the card has no name; it is called {path.stem!r}")
    preset = CharacterDefinition.from_card(parsed.raw, avatar=avatar, fallback_name=path.stem)
    ours = preset.extensions.get("storyloom")
    if isinstance(ours, dict) and ours.pop("connection", None) is not None:
        # A card from elsewhere must not pick which of the user's connections (a paid or
        # cloud one, say) its chats go to: that is the user's choice, on the character page.
        notes.append(
            "the card names a connection for its chats; it was left out (pick one for "
            "this character on the character page)"
        )
    bases: list[KnowledgeBase] = []
    book = parsed.character_book
    if book is not None:
        book_kb, book_warnings = character_book_to_kb(book, path, name=f"{preset.name}'s Lorebook")
        # The book is the character's own: SillyTavern scans it only in that character's
        # chats, and the chat engine scopes a KB tagged so the same way.
        book_kb.tags = [*book_kb.tags, character_tag(preset.name)]
        bases.append(book_kb)
        notes.extend(book_warnings)
    return ImportResult(
        kind=kind, source=path, knowledge_bases=bases, character=preset, warnings=notes
    )


def _import_png(data: bytes, path: Path) -> ImportResult:
    png = read_png_card(data, path)
    result = _card_result(
        parse_card(png.card, path), path, "character_png", path.name, png.warnings
    )
    result.avatar_png = png.image
    # V3 assets embedded as PNG chunks are kept beside the character like CHARX ones.
    result.assets = {
        file: blob
        for name, blob in png.assets.items()
        if (file := asset_file(PNG_ASSET_URI_PREFIX + name)) is not None
    }
    return result


def _import_charx(data: bytes, path: Path) -> ImportResult:
    contents = read_charx(data, path)
    parsed = parse_card(contents.card, path)
    avatar_png: bytes | None = None
    avatar_name: str | None = None
    assets = (
        parsed.raw.get("data", {}).get("assets")
        if isinstance(parsed.raw.get("data"), dict)
        else None
    )
    for asset in assets if isinstance(assets, list) else []:
        if not isinstance(asset, dict) or asset.get("type") != "icon":
            continue
        image = contents.asset(str(asset.get("uri", "")))
        if image is not None and is_png(image):
            avatar_png = image
            avatar_name = f"{path.stem}.png"
            if asset.get("name") == "main":
                break
    result = _card_result(parsed, path, "character_charx", avatar_name, contents.warnings)
    if avatar_png is None and assets:
        result.warnings.append("the archive has no PNG icon; the character has no avatar yet")
    result.avatar_png = avatar_png
    result.assets = {name: blob for name, blob in contents.files.items() if name != "card.json"}
    return result
