"""PersonaLab's preset library (seed 004): characters, backgrounds and summaries as files.

A project keeps them under ``presets/characters|backgrounds|summaries/<id>.json``; the id
is the file stem. Characters are the :class:`CharacterDefinition` JSON the knowledge importer
writes for SillyTavern cards, and a PersonaLab character file (``character_id``,
``base_persona``...) reads as one too, its extra keys kept. A conversation never points
at a preset: it copies a snapshot (:func:`character_snapshot`, :func:`background_snapshot`)
so editing a preset later leaves existing conversations as they were.

Every character file has a version (:func:`file_version`, a hash of its bytes): an editor
saves with the version it opened, and a save over a newer file is a :class:`Conflict`, so
two tabs never overwrite each other. Avatars sit beside the file as ``<id>.png`` (or
``.jpg``, ``.gif``, ``.webp`` when uploaded so), a card's assets in ``<id>.assets/`` and
its expression sprites in ``<id>.sprites/`` (:mod:`.sprites`).

Files are written atomically. A file that does not parse raises :class:`FileFormatError`
naming the file and the field; listing never fails because of one: a bad file is listed
with its error (:meth:`PresetLibrary.problems`, :attr:`CharacterListing.error`).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from storyloom.chat.store.conversation import BackgroundSnapshot, CharacterSnapshot
from storyloom.chat.store.turn_tree import ChatError
from storyloom.core.atomic_io import atomic_write_bytes, atomic_write_text
from storyloom.core.errors import (
    Conflict,
    FileFormatError,
    NotFound,
)
from storyloom.core.json_files import json_file_ids, read_json_object, validate_document
from storyloom.project.project_file import folder_slug
from storyloom.sillytavern.character import CharacterDefinition

PRESETS_DIR = "presets"
PresetKind = Literal["characters", "backgrounds", "summaries"]
PRESET_KINDS: tuple[PresetKind, ...] = ("characters", "backgrounds", "summaries")

_M = TypeVar("_M", bound=BaseModel)


def iso_utc(moment: datetime | float) -> str:
    """ISO 8601 in UTC with a ``Z``, to the second, as PersonaLab's files write times."""
    if not isinstance(moment, datetime):
        moment = datetime.fromtimestamp(moment, UTC)
    elif moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class OutlinePoint(BaseModel):
    """One point of a background's story outline (1-based ``index``)."""

    model_config = ConfigDict(extra="allow")

    index: int = Field(ge=1)
    content: str


class SummaryPoint(BaseModel):
    """One plot-point summary of a conversation (1-based ``index``)."""

    model_config = ConfigDict(extra="allow")

    index: int = Field(ge=1)
    content: str


def _ordered_unique(points: list[Any]) -> list[Any]:
    indexes = [p.index for p in points]
    duplicates = sorted({i for i in indexes if indexes.count(i) > 1})
    if duplicates:
        raise ValueError(f"index {duplicates[0]} is used twice; each point needs its own index")
    return sorted(points, key=lambda p: p.index)


class BackgroundPreset(BaseModel):
    """A world setting and an optional story outline (which turns the director on)."""

    model_config = ConfigDict(extra="allow")

    background_id: str = Field(default="", description="The file stem; empty: made from name")
    name: str = Field(min_length=1)
    description: str = Field(default="", description="Short text for the UI")
    world_setting: str = ""
    story_outline: list[OutlinePoint] = Field(default_factory=list)
    created_at: str = ""
    updated_at: str = ""

    _outline = field_validator("story_outline")(_ordered_unique)


class SummaryPreset(BaseModel):
    """Plot-point summaries of a conversation, made by "summarise" (reusable elsewhere)."""

    model_config = ConfigDict(extra="allow")

    summary_id: str = Field(default="", description="The file stem; empty: made from source")
    source_conversation: str = ""
    created_at: str = ""
    summaries: list[SummaryPoint] = Field(default_factory=list)

    _points = field_validator("summaries")(_ordered_unique)


class CharacterListing(BaseModel):
    """A character as the library lists it; ``error`` is set when its file is bad."""

    id: str
    name: str
    description: str = ""
    avatar: str | None = None
    tags: list[str] = Field(default_factory=list)
    fav: bool = False
    creator: str = ""
    modified: float = Field(default=0.0, description="When its file last changed (Unix s)")
    error: str | None = None


class PresetProblem(BaseModel):
    """A preset file that could not be read, with why."""

    kind: PresetKind
    id: str
    file: str
    error: str


def base_persona(preset: CharacterDefinition) -> str:
    """A PersonaLab ``base_persona`` key when the file has one, else description and
    personality (a SillyTavern card keeps its persona in those two fields)."""
    explicit = (preset.model_extra or {}).get("base_persona")
    if isinstance(explicit, str) and explicit.strip():
        return explicit.strip()
    parts = [preset.description.strip(), preset.personality.strip()]
    return "\n\n".join(part for part in parts if part)


def character_snapshot(
    character_id: str, preset: CharacterDefinition, now: datetime
) -> CharacterSnapshot:
    """The copy a new conversation keeps: base persona fixed, evolved persona empty."""
    card = preset.model_dump(mode="json", exclude={"source_card"})
    return CharacterSnapshot(
        source_preset=character_id,
        snapshot_created_at=iso_utc(now),
        base_persona=base_persona(preset),
        evolved_persona="",
        card=card,
    )


def background_snapshot(preset: BackgroundPreset) -> BackgroundSnapshot:
    """The copy a new conversation keeps of a background preset."""
    return BackgroundSnapshot(
        source_preset=preset.background_id or None,
        name=preset.name,
        world_setting=preset.world_setting,
        story_outline=[point.model_dump(mode="json") for point in preset.story_outline],
        description=preset.description,
    )


MAX_PRESET_ID_BYTES = 200
"""Room in a 255-byte file name for ``.<id>.json`` and the temporary suffix of a write."""


def check_preset_id(preset_id: str) -> str:
    """Refuse ids that are not a plain file stem (no separators, no ``..``, not too long)."""
    if (
        not preset_id
        or preset_id != preset_id.strip()
        or any(sep in preset_id for sep in ("/", "\\", "\0"))
        or preset_id in (".", "..")
        or preset_id.startswith(".")
        or len(preset_id.encode("utf-8", "surrogatepass")) > MAX_PRESET_ID_BYTES
    ):
        raise ChatError(
            f"preset id {preset_id[:80]!r} is not allowed: use a plain name of at most "
            f"{MAX_PRESET_ID_BYTES} bytes without path separators or a leading dot"
        )
    return preset_id


def file_version(path: Path) -> str:
    """A short hash of a file's bytes: the version an optimistic save compares."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _dump(model: BaseModel) -> str:
    data = model.model_dump(mode="json")
    if isinstance(model, CharacterDefinition) and "knowledge_bases" not in model.model_fields_set:
        # A file from before books could be bound stays without the key: its books are
        # then the ones tagged with its name (chat/service/lore_scope.py); writing an
        # empty list would unbind them.
        del data["knowledge_bases"]
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"


class PresetLibrary:
    """The preset files of one project."""

    def __init__(self, project_dir: Path) -> None:
        self.project_dir = project_dir
        self.root = project_dir / PRESETS_DIR
        # A versioned save checks and writes as one step (routes run in threads).
        self._lock = threading.RLock()

    def folder(self, kind: PresetKind) -> Path:
        return self.root / kind

    def path(self, kind: PresetKind, preset_id: str) -> Path:
        return self.folder(kind) / f"{check_preset_id(preset_id)}.json"

    def _ids(self, kind: PresetKind) -> list[str]:
        return json_file_ids(self.folder(kind))

    def _existing(self, kind: PresetKind, preset_id: str) -> Path:
        path = self.path(kind, preset_id)
        if not path.is_file():
            raise NotFound(f"no {kind[:-1]} preset {preset_id!r} (looked for {path})")
        return path

    # -- characters -------------------------------------------------------------------

    def characters(self) -> list[CharacterListing]:
        """Every character file, by id; a file that does not read is listed with its error."""
        out: list[CharacterListing] = []
        for preset_id in self._ids("characters"):
            try:
                preset = self.character(preset_id)
            except (FileFormatError, OSError) as exc:
                out.append(CharacterListing(id=preset_id, name=preset_id, error=str(exc)))
                continue
            out.append(
                CharacterListing(
                    id=preset_id,
                    name=preset.name,
                    description=preset.description,
                    avatar=preset.avatar,
                    tags=preset.tags,
                    fav=preset.fav,
                    creator=preset.creator,
                    modified=self.path("characters", preset_id).stat().st_mtime,
                )
            )
        return out

    def character(self, character_id: str) -> CharacterDefinition:
        path = self._existing("characters", character_id)
        return validate_document(CharacterDefinition, read_json_object(path), path)

    def save_character(self, character_id: str | None, preset: CharacterDefinition) -> str:
        """Write the preset (a new id made from its name when ``character_id`` is None)."""
        if character_id is None:
            character_id = folder_slug(preset.name, set(self._ids("characters")))
        path = self.path("characters", character_id)
        if "character_id" in (preset.model_extra or {}):
            # A PersonaLab file names itself; keep that name in step with the file.
            preset = preset.model_copy(update={"character_id": character_id})
        atomic_write_text(path, _dump(preset))
        return character_id

    def character_version(self, character_id: str) -> str:
        """A hash of the character file: what an optimistic save compares."""
        return file_version(self._existing("characters", character_id))

    def create_character(self, preset: CharacterDefinition) -> str:
        """Write a new character (made in storyloom, or a copy); returns its id."""
        with self._lock:
            folder = self.folder("characters")
            # Each name the character takes (.json, its avatar, .assets) must be free.
            taken = (
                {p.name.split(".", 1)[0] for p in folder.iterdir()} if folder.is_dir() else set()
            )
            character_id = check_preset_id(folder_slug(preset.name, taken))
            atomic_write_text(self.path("characters", character_id), _dump(preset))
            return character_id

    def update_character(
        self, character_id: str, preset: CharacterDefinition, *, expected_version: str | None
    ) -> str:
        """Replace a character's fields; returns the new version. ``expected_version`` is
        the version the editor opened: another save since then is a :class:`Conflict`.
        The avatar and the imported card (kept for a lossless export) stay as they are."""
        with self._lock:
            path = self._existing("characters", character_id)
            if expected_version is not None and expected_version != file_version(path):
                raise Conflict(
                    f"character {character_id!r} was changed elsewhere since it was opened "
                    "(another tab or window saved it); reload it and make the change again"
                )
            old = self.character(character_id)
            keep: dict[str, Any] = {"avatar": old.avatar}
            if preset.source_card is None:
                keep["source_card"] = old.source_card
            atomic_write_text(path, _dump(preset.model_copy(update=keep)))
            return file_version(path)

    def duplicate_character(self, character_id: str) -> str:
        """A copy named "<name> (copy)", with its own avatar and assets; returns its id."""
        preset = self.character(character_id)
        copy_id = self.create_character(
            preset.model_copy(update={"name": f"{preset.name} (copy)", "avatar": None})
        )
        folder = self.folder("characters")
        source_avatar = self.avatar_path(character_id)
        if source_avatar is not None:
            name = f"{copy_id}{source_avatar.suffix.lower()}"
            atomic_write_bytes(folder / name, source_avatar.read_bytes())
            copied = self.character(copy_id).model_copy(update={"avatar": name})
            atomic_write_text(self.path("characters", copy_id), _dump(copied))
        for kept in (".assets", ".sprites"):
            source = folder / f"{character_id}{kept}"
            if source.is_dir():
                shutil.copytree(source, folder / f"{copy_id}{kept}")
        return copy_id

    def avatar_path(self, character_id: str) -> Path | None:
        """The character's avatar file, when it has one that exists."""
        preset = self.character(character_id)
        if not preset.avatar:
            return None
        path = self.folder("characters") / Path(preset.avatar).name
        return path if path.is_file() else None

    def set_avatar(self, character_id: str, image: bytes, suffix: str) -> str:
        """Store ``image`` (an image the caller checked, ``suffix`` ".png" / ".jpg" /
        ".gif" / ".webp") as the avatar; returns the character's new version."""
        with self._lock:
            path = self._existing("characters", character_id)
            preset = self.character(character_id)
            name = f"{character_id}{suffix}"
            folder = self.folder("characters")
            atomic_write_bytes(folder / name, image)
            if preset.avatar and Path(preset.avatar).name != name:
                (folder / Path(preset.avatar).name).unlink(missing_ok=True)
            atomic_write_text(path, _dump(preset.model_copy(update={"avatar": name})))
            return file_version(path)

    # -- backgrounds ------------------------------------------------------------------

    def backgrounds(self) -> list[BackgroundPreset]:
        """The backgrounds that read; see :meth:`problems` for those that do not."""
        return self._good("backgrounds", self.background)

    def background(self, background_id: str) -> BackgroundPreset:
        path = self._existing("backgrounds", background_id)
        data = read_json_object(path)
        preset = validate_document(BackgroundPreset, data, path)
        return preset.model_copy(update={"background_id": background_id})

    def save_background(
        self, preset: BackgroundPreset, *, now: datetime | None = None
    ) -> BackgroundPreset:
        """Write the preset (stamping its times); returns it as written."""
        taken = set(self._ids("backgrounds"))
        preset_id = preset.background_id or folder_slug(preset.name, taken)
        stamp = iso_utc(now or datetime.now(UTC))
        saved = preset.model_copy(
            update={
                "background_id": check_preset_id(preset_id),
                "created_at": preset.created_at or stamp,
                "updated_at": stamp,
            }
        )
        atomic_write_text(self.path("backgrounds", preset_id), _dump(saved))
        return saved

    # -- summaries --------------------------------------------------------------------

    def summaries(self) -> list[SummaryPreset]:
        """The summaries that read; see :meth:`problems` for those that do not."""
        return self._good("summaries", self.summary)

    def summary(self, summary_id: str) -> SummaryPreset:
        path = self._existing("summaries", summary_id)
        preset = validate_document(SummaryPreset, read_json_object(path), path)
        return preset.model_copy(update={"summary_id": summary_id})

    def save_summary(self, preset: SummaryPreset, *, now: datetime | None = None) -> SummaryPreset:
        """Write the preset; an empty id becomes ``<source>_summary`` (unique)."""
        taken = set(self._ids("summaries"))
        preset_id = preset.summary_id or folder_slug(
            f"{preset.source_conversation or 'conversation'}_summary", taken
        )
        saved = preset.model_copy(
            update={
                "summary_id": check_preset_id(preset_id),
                "created_at": preset.created_at or iso_utc(now or datetime.now(UTC)),
            }
        )
        atomic_write_text(self.path("summaries", preset_id), _dump(saved))
        return saved

    # -- all kinds --------------------------------------------------------------------

    def problems(self, kind: PresetKind | None = None) -> list[PresetProblem]:
        """Files of ``kind`` (or every kind) that do not read, each with its error."""
        readers: dict[PresetKind, Callable[[str], BaseModel]] = {
            "characters": self.character,
            "backgrounds": self.background,
            "summaries": self.summary,
        }
        out: list[PresetProblem] = []
        for each in [kind] if kind else list(PRESET_KINDS):
            for preset_id in self._ids(each):
                try:
                    readers[each](preset_id)
                except (FileFormatError, OSError) as exc:
                    file = str(self.path(each, preset_id))
                    out.append(PresetProblem(kind=each, id=preset_id, file=file, error=str(exc)))
        return out

    def delete(self, kind: PresetKind, preset_id: str) -> None:
        """Remove a preset file (a character's avatar, assets and sprites go with it)."""
        if kind not in PRESET_KINDS:
            raise ChatError(f"unknown preset kind {kind!r}; use one of {', '.join(PRESET_KINDS)}")
        path = self._existing(kind, preset_id)
        avatar: str | None = None
        if kind == "characters":
            try:
                avatar = self.character(preset_id).avatar
            except FileFormatError:
                avatar = None
        path.unlink()
        if kind == "characters":
            # The importer names these after the preset's id; an uploaded avatar may
            # be a JPEG, GIF or WebP of the same stem.
            path.with_suffix(".png").unlink(missing_ok=True)
            if avatar and Path(avatar).stem == preset_id:
                (path.parent / Path(avatar).name).unlink(missing_ok=True)
            for kept in (".assets", ".sprites"):
                folder = path.with_name(f"{preset_id}{kept}")
                if folder.is_dir():
                    shutil.rmtree(folder)

    def _good(self, kind: PresetKind, read: Callable[[str], _M]) -> list[_M]:
        out: list[_M] = []
        for preset_id in self._ids(kind):
            try:
                out.append(read(preset_id))
            except (FileFormatError, OSError):
                continue
        return out


def snapshot_by_name(
    library: PresetLibrary, name: str | None, now: datetime
) -> CharacterSnapshot | None:
    """The snapshot of the project's character called ``name``, when exactly one is (an
    imported SillyTavern chat names its character; the card came in separately)."""
    if not name:
        return None
    found = [c for c in library.characters() if c.error is None and c.name == name]
    if len(found) != 1:
        return None
    return character_snapshot(found[0].id, library.character(found[0].id), now)
