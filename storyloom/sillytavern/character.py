"""A SillyTavern character's definition, read from its card: :class:`CharacterDefinition`.

It holds the card's fields under the Character Card V2/V3 names, SillyTavern's
``talkativeness`` and ``fav`` (which it keeps in ``data.extensions``), the avatar's file
name, the knowledge bases bound to the character (``knowledge_bases``, storyloom's own:
an exported card carries only the primary book, embedded, and its name in
``extensions.world``), and ``source_card``: the whole card JSON as imported. Export
(:mod:`storyloom.knowledge.st_export`) starts from ``source_card`` and writes back only
what changed, so whatever a card carries beyond these fields (``regex_scripts``,
``tavern_helper``, the top-level keys of other editors) comes back out.

``talkativeness`` is a number here; cards often hold it as a string ("0.5"), and an
unchanged value is written back as the card gave it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from storyloom.sillytavern.character_card import V2_SPEC, V3_SPEC, card_version

DEFAULT_TALKATIVENESS = 0.5
UNNAMED = "(unnamed)"

# Definition field -> its place in ``data`` and the V1 top-level copy SillyTavern keeps.
CARD_PATHS: dict[str, tuple[str, str | None]] = {
    "name": ("name", "name"),
    "description": ("description", "description"),
    "personality": ("personality", "personality"),
    "scenario": ("scenario", "scenario"),
    "first_mes": ("first_mes", "first_mes"),
    "mes_example": ("mes_example", "mes_example"),
    "creator_notes": ("creator_notes", "creatorcomment"),
    "system_prompt": ("system_prompt", None),
    "post_history_instructions": ("post_history_instructions", None),
    "alternate_greetings": ("alternate_greetings", None),
    "tags": ("tags", "tags"),
    "creator": ("creator", None),
    "character_version": ("character_version", None),
    "extensions": ("extensions", None),
    "talkativeness": ("extensions.talkativeness", "talkativeness"),
    "fav": ("extensions.fav", "fav"),
    "nickname": ("nickname", None),
    "creator_notes_multilingual": ("creator_notes_multilingual", None),
    "source": ("source", None),
    "group_only_greetings": ("group_only_greetings", None),
    "creation_date": ("creation_date", None),
    "modification_date": ("modification_date", None),
    "assets": ("assets", None),
}


class DepthPrompt(BaseModel):
    """SillyTavern's character note (``data.extensions.depth_prompt``)."""

    model_config = ConfigDict(extra="allow")

    prompt: str = ""
    depth: int = 4
    role: Literal["system", "user", "assistant"] = "system"


def _as_float(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return DEFAULT_TALKATIVENESS
    return number if 0.0 <= number <= 1.0 else DEFAULT_TALKATIVENESS


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str)]
    return []


def _tags(value: Any) -> list[str]:
    # SillyTavern splits tags typed as one "a, b" string.
    if isinstance(value, str):
        return [tag.strip() for tag in value.split(",") if tag.strip()]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str)]
    return []


class CharacterDefinition(BaseModel):
    """A character's card fields, flattened; unknown fields are kept."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1)
    description: str = ""
    personality: str = ""
    scenario: str = ""
    first_mes: str = Field(default="", description="The first message (greeting)")
    mes_example: str = Field(default="", description="Example dialogue, <START>-separated")
    alternate_greetings: list[str] = Field(default_factory=list)
    system_prompt: str = Field(default="", description="Replaces the main prompt when set")
    post_history_instructions: str = Field(default="", description="Jailbreak / after history")
    creator_notes: str = ""
    creator: str = ""
    character_version: str = ""
    tags: list[str] = Field(default_factory=list)
    talkativeness: float = Field(default=DEFAULT_TALKATIVENESS, ge=0, le=1)
    fav: bool = False
    avatar: str | None = Field(default=None, description="File name of the avatar image")
    extensions: dict[str, Any] = Field(
        default_factory=dict, description="data.extensions of the card, verbatim"
    )
    nickname: str | None = None
    creator_notes_multilingual: dict[str, str] | None = None
    source: list[str] | None = None
    group_only_greetings: list[str] = Field(default_factory=list)
    creation_date: int | float | None = Field(default=None, description="Unix seconds (V3)")
    modification_date: int | float | None = Field(default=None, description="Unix seconds")
    assets: list[dict[str, Any]] | None = None
    knowledge_bases: list[str] = Field(
        default_factory=list,
        description="kb_ids of the books bound to the character, the card's own book first "
        "(storyloom's; a card keeps only the primary book's name, in extensions.world)",
    )
    source_card: dict[str, Any] | None = Field(
        default=None, description="The whole card JSON as imported, kept for lossless export"
    )

    @field_validator("talkativeness", mode="before")
    @classmethod
    def _numeric_text(cls, value: Any) -> Any:
        return _as_float(value) if isinstance(value, str) else value

    @classmethod
    def from_card(
        cls,
        card: Mapping[str, Any],
        *,
        avatar: str | None = None,
        fallback_name: str = UNNAMED,
    ) -> CharacterDefinition:
        """The definition in a card's JSON (V1, V2 or V3), keeping the JSON in ``source_card``.

        A card without a name gets ``fallback_name`` (the importer passes the file name).
        """
        version = card_version(card)
        data = card.get("data") if version in (2, 3) else None
        if not isinstance(data, Mapping):
            data = {}
        ext = data.get("extensions")
        extensions: dict[str, Any] = copy.deepcopy(ext) if isinstance(ext, dict) else {}
        if version == 1:
            fields: dict[str, Any] = {
                key: _text(card.get(top or key))
                for key, (_, top) in CARD_PATHS.items()
                if top and key not in ("tags", "talkativeness", "fav")
            }
            fields["tags"] = _tags(card.get("tags"))
            talk, fav = card.get("talkativeness"), card.get("fav")
        else:
            fields = {
                key: _text(data.get(path))
                for key, (path, _) in CARD_PATHS.items()
                if key
                in (
                    "name",
                    "description",
                    "personality",
                    "scenario",
                    "first_mes",
                    "mes_example",
                    "creator_notes",
                    "system_prompt",
                    "post_history_instructions",
                    "creator",
                    "character_version",
                )
            }
            fields["name"] = fields["name"] or _text(card.get("name"))
            fields["tags"] = _tags(data.get("tags"))
            fields["alternate_greetings"] = _texts(data.get("alternate_greetings"))
            fields["group_only_greetings"] = _texts(data.get("group_only_greetings"))
            for key in ("nickname", "creator_notes_multilingual", "source", "assets"):
                if data.get(key) is not None:
                    fields[key] = copy.deepcopy(data[key])
            for key in ("creation_date", "modification_date"):
                if isinstance(data.get(key), int | float) and not isinstance(data[key], bool):
                    fields[key] = data[key]
            talk = extensions.get("talkativeness", card.get("talkativeness"))
            fav = extensions.get("fav", card.get("fav"))
        fields["name"] = fields["name"].strip() or fallback_name
        return cls(
            **fields,
            talkativeness=_as_float(talk) if talk is not None else DEFAULT_TALKATIVENESS,
            fav=_as_bool(fav),
            avatar=avatar,
            extensions=extensions,
            source_card=copy.deepcopy(dict(card)),
        )

    @property
    def card_spec(self) -> str | None:
        """The spec of the imported card (None for V1 and characters made in storyloom)."""
        spec = (self.source_card or {}).get("spec")
        return spec if spec in (V2_SPEC, V3_SPEC) else None

    @property
    def greetings(self) -> list[str]:
        """The first message, then the alternates (what swiping the first reply shows)."""
        return [g for g in [self.first_mes, *self.alternate_greetings] if g]

    @property
    def depth_prompt(self) -> DepthPrompt | None:
        value = self.extensions.get("depth_prompt")
        if not isinstance(value, dict) or not value.get("prompt"):
            return None
        role = value.get("role")
        depth = value.get("depth")
        return DepthPrompt(
            prompt=str(value["prompt"]),
            depth=depth if isinstance(depth, int) and depth >= 0 else 4,
            role=role if role in ("system", "user", "assistant") else "system",
        )

    @property
    def world(self) -> str:
        """Name of the world-info book SillyTavern links to this character."""
        return _text(self.extensions.get("world"))
