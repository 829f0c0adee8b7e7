"""A SillyTavern user folder: where it is, what files it holds, and what its settings say.

SillyTavern keeps one user's everything in ``data/<user>/`` (``default-user`` unless
accounts are on), one folder per kind (``src/constants.js`` ``USER_DIRECTORY_TEMPLATE``).
Before 1.12 the same folders sat under ``public/`` and ``settings.json`` beside them.
This module only finds and lists; the readers of each file are its neighbours
(:mod:`character_card`, :mod:`chat_log`, :mod:`world_info`, :mod:`group_file`...).

``settings.json`` is one big object (``saveSettings`` in ``public/script.js``);
:class:`StSettings` is the part of it a move-in reads. Every field is optional and
loosely checked: a value of the wrong shape is a :class:`FolderProblem` (file, field,
reason) and left at its default, the rest still reads.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from storyloom.core.errors import InvalidInput
from storyloom.sillytavern.quick_reply_set import st_visible_quick_reply_sets
from storyloom.sillytavern.untrusted_json import UntrustedJsonError, loads_untrusted

DEFAULT_USER = "default-user"
SETTINGS_FILE = "settings.json"
CARD_SUFFIXES = (".png", ".json", ".charx")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".avif")

Layout = Literal["user", "root", "public"]

FolderKind = Literal[
    "characters",
    "sprites",
    "chats",
    "groups",
    "group_chats",
    "worlds",
    "avatars",
    "presets",
    "instruct",
    "context",
    "quick_replies",
    "backgrounds",
    "themes",
]

# Where each kind lives under the user folder, as USER_DIRECTORY_TEMPLATE names them.
_DIRS: dict[FolderKind, str] = {
    "characters": "characters",
    "sprites": "characters",
    "chats": "chats",
    "groups": "groups",
    "group_chats": "group chats",
    "worlds": "worlds",
    "avatars": "User Avatars",
    "presets": "OpenAI Settings",
    "instruct": "instruct",
    "context": "context",
    "quick_replies": "QuickReplies",
    "backgrounds": "backgrounds",
    "themes": "themes",
}
_MARKERS = ("characters", "chats", "worlds", SETTINGS_FILE)


@dataclass(frozen=True)
class FolderProblem:
    """Something of the folder that could not be read (it is skipped)."""

    file: str
    field: str
    reason: str


@dataclass
class UserFolder:
    """A found user folder: its path, how it was found, and its files by kind
    (paths relative to ``path``, sorted)."""

    path: Path
    layout: Layout
    files: dict[FolderKind, list[str]] = field(default_factory=dict)

    def absolute(self, relative: str) -> Path:
        return self.path / relative

    def of(self, kind: FolderKind) -> list[str]:
        return self.files.get(kind, [])


def _looks_like_user_folder(path: Path) -> bool:
    return any((path / marker).exists() for marker in _MARKERS)


def find_user_folder(path: Path, user: str | None = None) -> UserFolder:
    """The user folder ``path`` is or holds: ``data/<user>`` itself, SillyTavern's root
    (its ``data/<user>``, ``default-user`` unless ``user``), or the old ``public/``
    layout. :class:`InvalidInput` naming the path when it is none of these."""
    if not path.is_dir():
        raise InvalidInput(f"{path}: not a folder (give a SillyTavern user folder or its root)")
    data = path / "data"
    if data.is_dir():
        chosen = data / (user or DEFAULT_USER)
        if not chosen.is_dir():
            users = sorted(
                p.name for p in data.iterdir() if p.is_dir() and not p.name.startswith("_")
            )
            raise InvalidInput(
                f"{path}: SillyTavern's root has no user {user or DEFAULT_USER!r} in data/ "
                f"(there: {', '.join(users) or 'none'})"
            )
        return list_user_folder(chosen, "root")
    if user is None and (path / "public" / "characters").is_dir():
        return list_user_folder(path / "public", "public")
    if user is None and _looks_like_user_folder(path):
        return list_user_folder(path, "user")
    raise InvalidInput(
        f"{path}: not a SillyTavern user folder (no characters/, chats/, worlds/ or "
        "settings.json), nor its root (no data/<user>/ or public/characters/)"
    )


def _files(folder: Path, suffixes: tuple[str, ...], *, recursive: bool = False) -> list[Path]:
    if not folder.is_dir():
        return []
    found = folder.rglob("*") if recursive else folder.iterdir()
    return [p for p in found if p.is_file() and p.suffix.lower() in suffixes]


def list_user_folder(path: Path, layout: Layout) -> UserFolder:
    """Every file a move-in reads, by kind."""
    folder = UserFolder(path=path, layout=layout)

    def put(kind: FolderKind, paths: list[Path]) -> None:
        folder.files[kind] = sorted(p.relative_to(path).as_posix() for p in paths)

    chars = path / _DIRS["characters"]
    put("characters", _files(chars, CARD_SUFFIXES))
    # A card's expression sprites sit in characters/<name>/ (sprites.js).
    put(
        "sprites",
        [p for d in (chars.iterdir() if chars.is_dir() else []) if d.is_dir()
         for p in _files(d, IMAGE_SUFFIXES)],
    )  # fmt: skip
    put("chats", _files(path / _DIRS["chats"], (".jsonl",), recursive=True))
    put("groups", _files(path / _DIRS["groups"], (".json",)))
    put("group_chats", _files(path / _DIRS["group_chats"], (".jsonl",)))
    put("worlds", _files(path / _DIRS["worlds"], (".json",)))
    put("avatars", _files(path / _DIRS["avatars"], IMAGE_SUFFIXES))
    put("presets", _files(path / _DIRS["presets"], (".json",)))
    put("instruct", _files(path / _DIRS["instruct"], (".json",)))
    put("context", _files(path / _DIRS["context"], (".json",)))
    put("quick_replies", _files(path / _DIRS["quick_replies"], (".json",)))
    put("backgrounds", _files(path / _DIRS["backgrounds"], (*IMAGE_SUFFIXES, ".mp4", ".webm")))
    put("themes", _files(path / _DIRS["themes"], (".json",)))
    return folder


def file_digest(path: Path) -> str:
    """The content hash a move-in's manifest compares."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- settings.json ----------------------------------------------------------------------


class PersonaConnection(BaseModel):
    """A persona locked to a character (its avatar file) or a group (its id)."""

    type: Literal["character", "group"]
    id: str


class PersonaDescription(BaseModel):
    """``power_user.persona_descriptions[<avatar file>]``."""

    description: str = ""
    position: int = 0
    depth: int = 2
    role: int = Field(default=0, description="0 system, 1 user, 2 assistant (at a depth)")
    title: str = ""
    lorebook: str = Field(default="", description="The world bound to the persona ('' none)")
    connections: list[PersonaConnection] = Field(
        default_factory=list,
        description="The characters and groups whose chats speak as this persona (1.13+)",
    )

    @field_validator("connections", mode="before")
    @classmethod
    def _known_connections(cls, value: Any) -> Any:
        # A connection of a kind this reader does not know is left out, not fatal.
        if not isinstance(value, list):
            return []
        return [
            c
            for c in value
            if isinstance(c, dict)
            and c.get("type") in ("character", "group")
            and isinstance(c.get("id"), str)
        ]


class CharLore(BaseModel):
    """``world_info.charLore[]``: extra books of a character; ``name`` is the card's
    avatar file name without its extension (``getCharaFilename``)."""

    name: str
    extraBooks: list[str] = Field(default_factory=list)


class TimedEffectView(BaseModel):
    """A running sticky/cooldown of ``chat_metadata.timedWorldInfo``."""

    start: int
    end: int
    protected: bool = False


class StSettings(BaseModel):
    """What storyloom reads of ``settings.json``."""

    personas: dict[str, str] = Field(default_factory=dict, description="avatar file -> name")
    persona_descriptions: dict[str, PersonaDescription] = Field(default_factory=dict)
    default_persona: str | None = None
    global_worlds: list[str] = Field(default_factory=list, description="world_info.globalSelect")
    char_lore: list[CharLore] = Field(default_factory=list)
    global_regex: list[dict[str, Any]] = Field(
        default_factory=list, description="extension_settings.regex"
    )
    allowed_card_regex: list[str] = Field(
        default_factory=list, description="extension_settings.character_allowed_regex (avatars)"
    )
    global_variables: dict[str, Any] = Field(default_factory=dict)
    tags: list[dict[str, Any]] = Field(default_factory=list)
    tag_map: dict[str, list[str]] = Field(default_factory=dict)
    active_preset: str | None = Field(default=None, description="preset_settings_openai")
    instruct_preset: str | None = None
    context_preset: str | None = None
    visible_quick_reply_sets: list[str] | None = Field(
        default=None,
        description="The quick reply sets shown under the message box (None: every set)",
    )
    background: str | None = Field(
        default=None, description="background.name: the image a chat without its own shows"
    )
    extensions: list[str] = Field(
        default_factory=list, description="extension_settings keys storyloom keeps but does not use"
    )


_READ_EXTENSIONS = frozenset(
    {"regex", "character_allowed_regex", "variables", "quickReply", "quickReplyV2"}
)


def _at(document: Any, dotted: str) -> Any:
    value = document
    for part in dotted.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def read_settings(
    path: Path, relative: str = SETTINGS_FILE
) -> tuple[StSettings, list[FolderProblem]]:
    """``settings.json`` as :class:`StSettings` and what in it could not be read. A file
    that is not JSON is one problem and empty settings."""
    problems: list[FolderProblem] = []
    if not path.is_file():
        return StSettings(), problems
    try:
        document = loads_untrusted(path.read_bytes())
    except (OSError, UntrustedJsonError, UnicodeDecodeError) as exc:
        return StSettings(), [FolderProblem(relative, "", f"not readable JSON: {exc}")]
    if not isinstance(document, dict):
        return StSettings(), [FolderProblem(relative, "", "must be a JSON object")]
    out = StSettings()

    def take(name: str, where: str, check: Callable[[Any], Any]) -> None:
        value = _at(document, where)
        if value is None:
            return
        try:
            setattr(out, name, check(value))
        except (TypeError, ValueError) as exc:
            problems.append(FolderProblem(relative, where, f"ignored: {exc}"))

    def text(value: Any) -> str:
        if not isinstance(value, str):
            raise TypeError("must be text")
        return value

    def texts(value: Any) -> list[str]:
        if not isinstance(value, list):
            raise TypeError("must be a list")
        return [v for v in value if isinstance(v, str)]

    def names(value: Any) -> dict[str, str]:
        if not isinstance(value, dict):
            raise TypeError("must be an object")
        return {k: v for k, v in value.items() if isinstance(v, str)}

    def descriptions(value: Any) -> dict[str, PersonaDescription]:
        if not isinstance(value, dict):
            raise TypeError("must be an object")
        result: dict[str, PersonaDescription] = {}
        for key, item in value.items():
            if not isinstance(item, dict):
                problems.append(
                    FolderProblem(
                        relative, f"power_user.persona_descriptions.{key}", "must be an object"
                    )
                )
                continue
            known = {k: item[k] for k in PersonaDescription.model_fields if k in item}
            try:
                result[key] = PersonaDescription.model_validate(known)
            except ValueError as exc:
                problems.append(
                    FolderProblem(
                        relative, f"power_user.persona_descriptions.{key}", str(exc).splitlines()[0]
                    )
                )
        return result

    def char_lore(value: Any) -> list[CharLore]:
        if not isinstance(value, list):
            raise TypeError("must be a list")
        result = []
        for index, item in enumerate(value):
            try:
                result.append(CharLore.model_validate(item))
            except ValueError:
                problems.append(
                    FolderProblem(
                        relative,
                        f"world_info_settings.world_info.charLore.{index}",
                        "must be {name, extraBooks}",
                    )
                )
        return result

    def objects(value: Any) -> list[dict[str, Any]]:
        if not isinstance(value, list):
            raise TypeError("must be a list")
        return [v for v in value if isinstance(v, dict)]

    def mapping(value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise TypeError("must be an object")
        return dict(value)

    def tag_map(value: Any) -> dict[str, list[str]]:
        if not isinstance(value, dict):
            raise TypeError("must be an object")
        return {
            k: [t for t in v if isinstance(t, str)] for k, v in value.items() if isinstance(v, list)
        }

    take("personas", "power_user.personas", names)
    take("persona_descriptions", "power_user.persona_descriptions", descriptions)
    take("default_persona", "power_user.default_persona", text)
    # 1.10+ nests the book settings; older files kept world_info at the top level.
    wi = (
        "world_info_settings.world_info"
        if _at(document, "world_info_settings") is not None
        else "world_info"
    )
    take("global_worlds", f"{wi}.globalSelect", texts)
    take("char_lore", f"{wi}.charLore", char_lore)
    take("global_regex", "extension_settings.regex", objects)
    take("allowed_card_regex", "extension_settings.character_allowed_regex", texts)
    take("global_variables", "extension_settings.variables.global", mapping)
    take("tags", "tags", objects)
    take("tag_map", "tag_map", tag_map)
    take("active_preset", "oai_settings.preset_settings_openai", text)
    if out.active_preset is None:
        take("active_preset", "preset_settings_openai", text)
    take("instruct_preset", "power_user.instruct.preset", text)
    take("context_preset", "power_user.context.preset", text)
    take("background", "background.name", text)
    out.visible_quick_reply_sets = st_visible_quick_reply_sets(document)
    extensions = _at(document, "extension_settings")
    if isinstance(extensions, dict):
        out.extensions = sorted(k for k in extensions if k not in _READ_EXTENSIONS)
    return out, problems


def timed_effects(chat_metadata: dict[str, Any]) -> dict[str, dict[str, TimedEffectView]]:
    """``chat_metadata.timedWorldInfo``: effect type -> ``"<world>.<uid>"`` -> effect
    (``#getEntryKey`` in world-info.js); shapes that do not read are left out."""
    raw = chat_metadata.get("timedWorldInfo")
    out: dict[str, dict[str, TimedEffectView]] = {}
    if not isinstance(raw, dict):
        return out
    for kind in ("sticky", "cooldown"):
        table = raw.get(kind)
        if not isinstance(table, dict):
            continue
        for key, value in table.items():
            try:
                out.setdefault(kind, {})[key] = TimedEffectView.model_validate(value)
            except ValueError:
                continue
    return out
