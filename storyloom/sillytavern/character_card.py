"""Character cards: V1 (flat), V2 (``chara_card_v2``) and V3 (``chara_card_v3``).

The models say what the Character Card specs and SillyTavern's code read; every model
keeps keys it does not know (``extra="allow"``), and the card JSON itself is kept
verbatim next to them, so nothing a card carries is lost. Text fields may be null in the
wild and are read as empty; a field of the wrong type (a number for ``description``, a
string for ``alternate_greetings`` aside) is refused with its JSON path.

A PNG card keeps its JSON base64-encoded in a ``tEXt`` chunk: ``chara`` (V2) and, since
SillyTavern 1.12.x, also ``ccv3`` (V3). Like SillyTavern, ``ccv3`` wins when both are there;
if it is unreadable and ``chara`` is fine, ``chara`` is used with a warning.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from storyloom.core.errors import (
    FieldProblem,
    FileFormatError,
    problems_from_validation,
)
from storyloom.sillytavern.character_book import CharacterBook
from storyloom.sillytavern.png_chunks import (
    PngError,
    TextChunk,
    read_chunks,
    remove_text_chunks,
    text_chunks,
)
from storyloom.sillytavern.untrusted_json import (
    JsonSyntaxError,
    UntrustedJsonError,
    loads_untrusted,
)

V2_SPEC = "chara_card_v2"
V3_SPEC = "chara_card_v3"
CARD_CHUNK_V2 = "chara"
CARD_CHUNK_V3 = "ccv3"
CardVersion = Literal[1, 2, 3]

# Fields of ``data`` in the V2 spec (all required there) and those V3 adds.
V2_DATA_FIELDS: dict[str, type] = {
    "name": str,
    "description": str,
    "personality": str,
    "scenario": str,
    "first_mes": str,
    "mes_example": str,
    "creator_notes": str,
    "system_prompt": str,
    "post_history_instructions": str,
    "alternate_greetings": list,
    "character_book": dict,
    "tags": list,
    "creator": str,
    "character_version": str,
    "extensions": dict,
}
V2_OPTIONAL_FIELDS = frozenset({"character_book"})
V3_DATA_FIELDS: dict[str, type | tuple[type, ...]] = {
    "nickname": str,
    "creator_notes_multilingual": dict,
    "source": list,
    "group_only_greetings": list,
    "creation_date": (int, float),
    "modification_date": (int, float),
    "assets": list,
}
V3_REQUIRED_FIELDS = frozenset({"group_only_greetings"})


def _comma_list(value: Any) -> Any:
    # SillyTavern accepts tags typed as "a, b" and a lone greeting as a string.
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _single_list(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


def _version_text(value: Any) -> Any:
    # Some tools write spec_version as a number (3.0); it is text in the spec.
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


Tags = Annotated[list[str], BeforeValidator(_comma_list)]
SpecVersion = Annotated[str | None, BeforeValidator(_version_text)]
Greetings = Annotated[list[str], BeforeValidator(_single_list)]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class CardAsset(_Open):
    """One V3 asset: ``uri`` is ``embeded://path`` (CHARX), ``ccdefault:`` or a URL."""

    type: str = ""
    uri: str = ""
    name: str = ""
    ext: str = ""


class CardDataV2(_Open):
    name: str | None = None
    description: str | None = None
    personality: str | None = None
    scenario: str | None = None
    first_mes: str | None = None
    mes_example: str | None = None
    creator_notes: str | None = None
    system_prompt: str | None = None
    post_history_instructions: str | None = None
    alternate_greetings: Greetings | None = None
    character_book: CharacterBook | None = None
    tags: Tags | None = None
    creator: str | None = None
    character_version: str | None = None
    extensions: dict[str, Any] | None = None


class CardDataV3(CardDataV2):
    nickname: str | None = None
    creator_notes_multilingual: dict[str, str] | None = None
    source: list[str] | None = None
    group_only_greetings: Greetings | None = None
    creation_date: int | float | None = None
    modification_date: int | float | None = None
    assets: list[CardAsset] | None = None


class CharacterCardV2(_Open):
    spec: Literal["chara_card_v2"] = "chara_card_v2"
    spec_version: SpecVersion = "2.0"
    data: CardDataV2


class CharacterCardV3(_Open):
    spec: Literal["chara_card_v3"] = "chara_card_v3"
    spec_version: SpecVersion = "3.0"
    data: CardDataV3


class CharacterCardV1(_Open):
    """The flat pre-V2 card (also the top level SillyTavern keeps beside ``data``)."""

    name: str
    description: str | None = None
    personality: str | None = None
    scenario: str | None = None
    first_mes: str | None = None
    mes_example: str | None = None
    creatorcomment: str | None = None
    talkativeness: float | str | None = None
    fav: bool | str | None = None
    tags: Tags | None = None


CharacterCard = CharacterCardV1 | CharacterCardV2 | CharacterCardV3


@dataclass
class ParsedCard:
    """A validated card: the typed model, the JSON as given, and the spec version."""

    card: CharacterCard
    raw: dict[str, Any]
    version: CardVersion
    warnings: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        if isinstance(self.card, CharacterCardV1):
            return self.card.name
        return self.card.data.name or str(self.raw.get("name") or "")

    @property
    def character_book(self) -> dict[str, Any] | None:
        """The raw embedded book, or None."""
        data = self.raw.get("data")
        book = data.get("character_book") if isinstance(data, dict) else None
        return book if isinstance(book, dict) else None


def card_version(data: Any) -> CardVersion | None:
    """1, 2 or 3 for something shaped like a card, None for anything else."""
    if not isinstance(data, dict):
        return None
    spec = data.get("spec")
    if spec == V3_SPEC:
        return 3
    if spec == V2_SPEC:
        return 2
    if spec is None and isinstance(data.get("data"), dict):
        return 2
    v1_fields = ("first_mes", "description", "personality", "mes_example")
    if (
        spec is None
        and isinstance(data.get("name"), str)
        and "entries" not in data
        and any(k in data for k in v1_fields)
    ):
        return 1
    return None


def parse_card(data: Any, path: Path | str) -> ParsedCard:
    """Validate a card's parsed JSON (without its book's entries; see :mod:`.world_info`)."""
    path = Path(path)
    version = card_version(data)
    if version is None or not isinstance(data, dict):
        spec = data.get("spec") if isinstance(data, dict) else None
        reason = (
            f"unknown card spec {spec!r}"
            if spec is not None
            else "not a character card (no spec, data or name)"
        )
        raise FileFormatError(path, [FieldProblem("spec" if spec else "", reason)])
    # The book's entries are checked one by one when the book is converted, so that one
    # bad entry costs that entry, not the card.
    shallow = copy.copy(data)
    if isinstance(data.get("data"), dict):
        inner = copy.copy(data["data"])
        book = inner.get("character_book")
        if isinstance(book, dict):
            inner["character_book"] = {k: v for k, v in book.items() if k != "entries"}
        shallow["data"] = inner
    try:
        card: CharacterCard
        if version == 1:
            card = CharacterCardV1.model_validate(shallow)
        elif version == 2:
            card = CharacterCardV2.model_validate(shallow)
        else:
            card = CharacterCardV3.model_validate(shallow)
    except ValidationError as exc:
        raise FileFormatError(path, problems_from_validation(exc)) from None
    parsed = ParsedCard(card=card, raw=data, version=version)
    newer = _newer_spec_version(card)
    if newer is not None:
        parsed.warnings.append(
            f"the card is Character Card spec_version {newer}, newer than storyloom knows"
            f" ({KNOWN_SPEC_VERSION[version]}); it is imported, and fields the newer spec"
            " adds are kept but not used"
        )
    return parsed


#: The newest spec_version storyloom reads, per card version.
KNOWN_SPEC_VERSION: dict[int, float] = {1: 1.0, 2: 2.0, 3: 3.0}


def _newer_spec_version(card: CharacterCard) -> str | None:
    """The card's spec_version when it is newer than storyloom knows (the spec compares
    versions as floats), else None."""
    if isinstance(card, CharacterCardV1) or card.spec_version is None:
        return None
    try:
        number = float(card.spec_version)
    except ValueError:
        return None
    version = 3 if isinstance(card, CharacterCardV3) else 2
    return card.spec_version if number > KNOWN_SPEC_VERSION[version] else None


def _b64decode(text: str) -> bytes:
    compact = "".join(text.split())
    compact += "=" * (-len(compact) % 4)
    try:
        return base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        return base64.b64decode(compact, altchars=b"-_", validate=True)


def _decode_card_text(text: str) -> Any:
    """The JSON held by a card chunk; ValueError with the reason when it is not."""
    try:
        raw = _b64decode(text)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise ValueError("not base64 text") from None
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("the decoded bytes are not UTF-8 text") from None
    try:
        return loads_untrusted(decoded)
    except JsonSyntaxError as exc:
        raise ValueError(f"the decoded text is not JSON ({exc.reason})") from None
    except UntrustedJsonError as exc:
        raise ValueError(f"the card JSON {exc}") from None


@dataclass
class PngCard:
    card: Any
    chunk: str
    image: bytes
    warnings: list[str] = field(default_factory=list)
    #: V3 assets embedded as ``chara-ext-asset_:<path>`` chunks, by path (the card's
    #: ``assets`` point at them as ``__asset:<path>``).
    assets: dict[str, bytes] = field(default_factory=dict)


ASSET_CHUNK_PREFIX = "chara-ext-asset_"
PNG_ASSET_URI_PREFIX = "__asset:"
_ASSET_PATH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def asset_file(uri: str) -> str | None:
    """Where the file of an embedded asset ``uri`` is kept, relative to the character's
    assets folder: a CHARX member keeps its path (``embeded://a/b.png`` → ``a/b.png``), a
    PNG asset chunk goes under ``__asset/`` (``__asset:0`` → ``__asset/0``). None for
    ``ccdefault:``, URLs and anything else not held in the card's file."""
    if uri.startswith(PNG_ASSET_URI_PREFIX):
        name = uri.removeprefix(PNG_ASSET_URI_PREFIX)
        return f"__asset/{name}" if _ASSET_PATH.fullmatch(name) else None
    for prefix in ("embeded://", "embedded://"):
        if uri.startswith(prefix):
            return uri.removeprefix(prefix).lstrip("/") or None
    return None


def _png_assets(texts: list[TextChunk], warnings: list[str]) -> dict[str, bytes]:
    """The asset chunks' files by path; an unreadable one is left out with a warning."""
    assets: dict[str, bytes] = {}
    for chunk in texts:
        if not chunk.keyword.startswith(ASSET_CHUNK_PREFIX):
            continue
        # RisuAI writes "chara-ext-asset_:0"; the spec's text reads "chara-ext-asset_0" too.
        name = chunk.keyword.removeprefix(ASSET_CHUNK_PREFIX).removeprefix(":")
        if not _ASSET_PATH.fullmatch(name) or name in assets:
            warnings.append(f"the PNG asset chunk {chunk.keyword!r} has an unusable name; skipped")
            continue
        try:
            assets[name] = _b64decode(chunk.text)
        except (binascii.Error, ValueError, UnicodeEncodeError):
            warnings.append(f"the PNG asset chunk {chunk.keyword!r} is not base64; skipped")
    return assets


def read_png_card(png: bytes, path: Path | str) -> PngCard:
    """The card JSON in a PNG and the image without its card chunks."""
    path = Path(path)
    try:
        texts = text_chunks(read_chunks(png))
    except PngError as exc:
        raise FileFormatError(path, [FieldProblem("png", str(exc))]) from None
    by_name: dict[str, str] = {}
    # tEXt is what SillyTavern writes and reads; other text chunk kinds are a fallback.
    for kind in ("tEXt", "iTXt", "zTXt"):
        for chunk in texts:
            name = chunk.keyword.lower()
            if chunk.kind == kind and name in (CARD_CHUNK_V3, CARD_CHUNK_V2):
                by_name.setdefault(name, chunk.text)
    if not by_name:
        reason = "no character card in this PNG (no 'chara' or 'ccv3' text chunk)"
        raise FileFormatError(path, [FieldProblem("png", reason)])
    warnings: list[str] = []
    problems: list[FieldProblem] = []
    for name in (CARD_CHUNK_V3, CARD_CHUNK_V2):
        if name not in by_name:
            continue
        try:
            card = _decode_card_text(by_name[name])
        except ValueError as exc:
            problems.append(FieldProblem(f"png:{name}", str(exc)))
            continue
        if problems:
            warnings.append(
                f"the {problems[0].field} chunk is unreadable ({problems[0].reason});"
                f" the '{name}' chunk was used"
            )
        assets = _png_assets(texts, warnings)
        embedded = {c.keyword for c in texts if c.keyword.startswith(ASSET_CHUNK_PREFIX)}
        try:
            image = remove_text_chunks(png, {CARD_CHUNK_V2, CARD_CHUNK_V3, *embedded})
        except PngError as exc:  # pragma: no cover - read_chunks passed above
            raise FileFormatError(path, [FieldProblem("png", str(exc))]) from None
        return PngCard(card=card, chunk=name, image=image, warnings=warnings, assets=assets)
    raise FileFormatError(path, problems)


def encode_card_text(card: Any) -> str:
    """A card chunk's text: compact UTF-8 JSON, base64 (as SillyTavern writes it)."""
    text = json.dumps(card, ensure_ascii=False, separators=(",", ":"))
    return base64.b64encode(text.encode("utf-8")).decode("ascii")
