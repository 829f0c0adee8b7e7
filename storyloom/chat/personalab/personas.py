"""The user's personas: who "you" are in a chat, as SillyTavern's persona management.

A persona is a name (what ``{{user}}`` says), a description (``{{persona}}`` and the
prompt's persona block), an optional avatar and an optional bound knowledge base (the
"persona" lore scope). Each lives in ``presets/personas/<id>.json``, its avatar beside it
(``<id>.png`` / ``.jpg`` / ``.gif`` / ``.webp``). The project's default persona is named
in ``presets/default_persona.json``; a chat may pick its own
(``ConversationSettings.persona_id``). :meth:`PersonaLibrary.resolve` says which one a
turn speaks as: the chat's, else the default, else none (the chat's own ``user_name``
and ``persona`` settings, as before personas existed).

Every persona file carries a version (a hash of its bytes): a save that names a stale
one is refused with :class:`~storyloom.core.errors.Conflict`, so two tabs editing the
same persona never overwrite each other silently.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from storyloom.chat.personalab.library import check_preset_id, file_version
from storyloom.chat.store.conversation import ConversationSettings
from storyloom.core.atomic_io import atomic_write_bytes, atomic_write_text
from storyloom.core.errors import (
    Conflict,
    FieldProblem,
    FileFormatError,
    NotFound,
    StoryloomError,
    problems_from_validation,
)
from storyloom.core.json_files import (
    json_file_ids,
    model_json_text,
    read_json_object,
    validate_document,
)
from storyloom.project.project_file import folder_slug

PERSONAS_DIR = "presets/personas"
DEFAULT_FILE = "presets/default_persona.json"
AVATAR_SUFFIXES: dict[str, str] = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
}


class Persona(BaseModel):
    """One persona; ``id`` is its file stem (empty in a new one: made from the name)."""

    model_config = ConfigDict(extra="allow")

    id: str = ""
    name: str = Field(min_length=1, max_length=200, description="What {{user}} says")
    description: str = Field(default="", description="What {{persona}} says")
    avatar: str | None = Field(default=None, description="File name of the avatar image")
    knowledge_base: str | None = Field(default=None, description="kb_id of the bound book")


def _check_id(persona_id: str) -> str:
    # The id is a file stem; the preset library's rule is the same.
    return check_preset_id(persona_id)


def validate_persona(data: Any, where: Path | str) -> Persona:
    """``data`` as a persona, or :class:`FileFormatError` naming ``where``, field, reason."""
    return validate_document(Persona, data, where)


@dataclass
class PersonaImport:
    """What a persona file holds: the personas, which is the default (an index), and
    for each the name of the book SillyTavern bound to it (None: none)."""

    personas: list[Persona]
    books: list[str | None]
    default: int | None = None


def _is_st_backup(document: Any) -> bool:
    return isinstance(document, dict) and isinstance(document.get("personas"), dict)


def read_persona_document(document: Any, where: Path | str) -> PersonaImport:
    """A persona file: storyloom's own (one persona) or SillyTavern's persona backup
    (``personas``: avatar file → name, ``persona_descriptions``: avatar file →
    ``{description, lorebook, ...}``, ``default_persona``). Every persona is checked before
    any is returned; a bad one is :class:`FileFormatError` naming the file, field, reason."""
    if not _is_st_backup(document):
        return PersonaImport([validate_persona(document, where)], [None])
    names: dict[str, Any] = document["personas"]
    described = document.get("persona_descriptions")
    descriptions: dict[str, Any] = described if isinstance(described, dict) else {}
    out = PersonaImport([], [])
    problems: list[FieldProblem] = []
    for key, name in names.items():
        extra = descriptions.get(key)
        extra = extra if isinstance(extra, dict) else {}
        data = {"name": name, "description": extra.get("description", "")}
        try:
            out.personas.append(Persona.model_validate(data))
        except ValidationError as exc:
            problems += [
                FieldProblem(f"personas.{key}" if p.field == "name" else
                             f"persona_descriptions.{key}.{p.field}", p.reason)
                for p in problems_from_validation(exc)
            ]  # fmt: skip
            continue
        book = extra.get("lorebook")
        out.books.append(book if isinstance(book, str) and book else None)
        if key == document.get("default_persona"):
            out.default = len(out.personas) - 1
    if problems:
        raise FileFormatError(Path(where), problems)
    if not out.personas:
        raise FileFormatError(Path(where), [FieldProblem("personas", "holds no persona")])
    return out


class PersonaProblem(BaseModel):
    id: str
    file: str
    error: str


class PersonaLibrary:
    """The persona files of one project."""

    def __init__(self, project_dir: Path) -> None:
        self.project_dir = project_dir
        self.folder = project_dir / PERSONAS_DIR
        self._default_file = project_dir / DEFAULT_FILE
        # Check-then-write of a versioned save must not interleave (routes run in threads).
        self._lock = threading.Lock()

    def path(self, persona_id: str) -> Path:
        return self.folder / f"{_check_id(persona_id)}.json"

    def ids(self) -> list[str]:
        return json_file_ids(self.folder)

    def _existing(self, persona_id: str) -> Path:
        path = self.path(persona_id)
        if not path.is_file():
            raise NotFound(f"no persona {persona_id!r} (looked for {path})")
        return path

    def get(self, persona_id: str) -> Persona:
        path = self._existing(persona_id)
        persona = validate_persona(read_json_object(path), path)
        return persona.model_copy(update={"id": persona_id})

    def version(self, persona_id: str) -> str:
        return file_version(self._existing(persona_id))

    def personas(self) -> tuple[list[Persona], list[PersonaProblem]]:
        """The personas that read, and the files that do not (each with why)."""
        good: list[Persona] = []
        bad: list[PersonaProblem] = []
        for persona_id in self.ids():
            try:
                good.append(self.get(persona_id))
            except (StoryloomError, OSError) as exc:
                bad.append(
                    PersonaProblem(id=persona_id, file=str(self.path(persona_id)), error=str(exc))
                )
        return good, bad

    # -- writes ---------------------------------------------------------------------------

    def create(self, persona: Persona) -> Persona:
        """Write a new persona (its id made from its name, unique in the folder)."""
        with self._lock:
            # An id's avatar names (<id>.png...) must be free too.
            taken = {p.stem for p in self.folder.glob("*")} if self.folder.is_dir() else set()
            persona_id = _check_id(folder_slug(persona.name, taken))
            saved = persona.model_copy(update={"id": persona_id, "avatar": None})
            atomic_write_text(self.path(persona_id), model_json_text(saved))
            if self.default_id() is None:
                # The first persona a project gets is its default, as SillyTavern's is.
                self._write_default(persona_id)
            return saved

    def update(self, persona_id: str, persona: Persona, *, expected_version: str | None) -> Persona:
        """Replace the persona's fields (its avatar stays); a stale version is a Conflict."""
        with self._lock:
            path = self._existing(persona_id)
            current = file_version(path)
            if expected_version is not None and expected_version != current:
                raise Conflict(
                    f"persona {persona_id!r} was changed elsewhere since it was opened; "
                    "reload it and make the change again"
                )
            old = self.get(persona_id)
            saved = persona.model_copy(update={"id": persona_id, "avatar": old.avatar})
            atomic_write_text(path, model_json_text(saved))
            return saved

    def delete(self, persona_id: str) -> None:
        with self._lock:
            path = self._existing(persona_id)
            avatar = self._avatar_name(path)
            path.unlink()
            if avatar:
                (self.folder / avatar).unlink(missing_ok=True)
            if self.default_id() == persona_id:
                self._write_default(None)

    def set_avatar(self, persona_id: str, image: bytes, media_type: str) -> Persona:
        """Store ``image`` (PNG, JPEG, GIF or WebP, checked by the caller) as the avatar."""
        suffix = AVATAR_SUFFIXES.get(media_type)
        if suffix is None:
            raise StoryloomError(
                f"an avatar must be a PNG, JPEG, GIF or WebP image, not {media_type}"
            )
        with self._lock:
            path = self._existing(persona_id)
            persona = self.get(persona_id)
            name = f"{persona_id}{suffix}"
            atomic_write_bytes(self.folder / name, image)
            if persona.avatar and persona.avatar != name:
                (self.folder / Path(persona.avatar).name).unlink(missing_ok=True)
            saved = persona.model_copy(update={"avatar": name})
            atomic_write_text(path, model_json_text(saved))
            return saved

    def avatar_path(self, persona_id: str) -> Path | None:
        persona = self.get(persona_id)
        if not persona.avatar:
            return None
        path = self.folder / Path(persona.avatar).name
        return path if path.is_file() else None

    def _avatar_name(self, path: Path) -> str | None:
        try:
            avatar = read_json_object(path).get("avatar")
        except (StoryloomError, OSError):
            return None
        return Path(avatar).name if isinstance(avatar, str) and avatar else None

    # -- the default ----------------------------------------------------------------------

    def default_id(self) -> str | None:
        """The project's default persona, when it names one that exists."""
        if not self._default_file.is_file():
            return None
        try:
            value = read_json_object(self._default_file).get("persona_id")
        except (StoryloomError, OSError):
            return None
        if not isinstance(value, str) or not value:
            return None
        try:
            return value if self.path(value).is_file() else None
        except StoryloomError:
            return None

    def set_default(self, persona_id: str | None) -> None:
        with self._lock:
            if persona_id is not None:
                self._existing(persona_id)
            self._write_default(persona_id)

    def _write_default(self, persona_id: str | None) -> None:
        text = json.dumps({"persona_id": persona_id}, ensure_ascii=False) + "\n"
        atomic_write_text(self._default_file, text)

    # -- which persona a chat speaks as ---------------------------------------------------

    def resolve(self, persona_id: str | None) -> Persona | None:
        """The chat's persona, else the default one, else None. A persona that is gone
        or does not read falls back to the default: a turn never fails for it."""
        for candidate in (persona_id, self.default_id()):
            if not candidate:
                continue
            try:
                return self.get(candidate)
            except (StoryloomError, OSError):
                continue
        return None


def persona_settings(
    settings: ConversationSettings, persona: Persona | None
) -> ConversationSettings:
    """The settings a turn sees: ``user_name`` and ``persona`` are the persona's when the
    chat has one (its own or the default), else the chat's own settings."""
    if persona is None:
        return settings
    return settings.model_copy(update={"user_name": persona.name, "persona": persona.description})
