"""Expression sprites: a character's pictures per emotion, shown beside it in the chat.

SillyTavern keeps them in ``characters/<name>/<expression>.png`` (the label is the file's
stem, lower-cased: ``joy``, ``anger``, ``neutral``...; newer versions let a label have several
sprites, ``joy-1.png`` or ``joy.shy.png``: the label is the stem up to the first ``-`` or
``.``, and the chat shows the label's own file, else the first of them by name).
storyloom keeps them beside the character's avatar in the library,
``presets/characters/<id>.sprites/<file>``, so they go with the character when it is
copied or deleted.

Which sprite a chat shows: the one picked by hand for that chat
(``ConversationSettings.expression``), else the character's default: the label its card
names in ``extensions.storyloom.default_expression``, else ``neutral``. There is no
classifier of a reply's emotion yet.
"""

from __future__ import annotations

import re
from pathlib import Path

from storyloom.chat.personalab.library import PresetLibrary
from storyloom.core.atomic_io import atomic_write_bytes
from storyloom.core.errors import FieldProblem, InvalidInput, NotFound
from storyloom.core.image_kind import IMAGE_SUFFIXES, image_type

SPRITES_SUFFIX = ".sprites"
NEUTRAL = "neutral"
MAX_LABEL_CHARS = 64
_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".gif", ".webp"})
_LABEL_OF_STEM = re.compile(r"^(.+?)(?:[-.].*)?$", re.DOTALL)


def check_label(label: str) -> str:
    """``label`` lower-cased when it can name a sprite file; :class:`InvalidInput` else."""
    bad = (
        not label.strip()
        or label != label.strip()
        or any(c in label for c in "/\\\0:.")
        or any(ord(c) < 32 for c in label)
        or len(label) > MAX_LABEL_CHARS
    )
    if bad:
        reason = f"{label!r} is not an expression label (a plain name, without dots or folders)"
        raise InvalidInput(f"expression: {reason}", [FieldProblem("expression", reason)])
    return label.lower()


def sprites_folder(library: PresetLibrary, character_id: str) -> Path:
    return library.folder("characters") / f"{character_id}{SPRITES_SUFFIX}"


def _label_of(path: Path) -> str | None:
    """The expression a sprite file shows (``joy`` for ``Joy.png``, ``joy-2.png`` and
    ``joy.shy.png``); None for a file that is not a sprite or has an odd name."""
    if path.suffix.lower() not in _SUFFIXES or path.name.startswith("."):
        return None
    if any(ord(c) < 32 for c in path.name) or len(path.name) > 2 * MAX_LABEL_CHARS:
        return None
    match = _LABEL_OF_STEM.match(path.stem.lower())
    try:
        return check_label(match.group(1)) if match else None
    except InvalidInput:
        return None


def _sprite_files(folder: Path) -> list[tuple[str, Path]]:
    """Every sprite file in ``folder`` with its label, by name (links left out)."""
    if not folder.is_dir():
        return []
    found: list[tuple[str, Path]] = []
    for path in sorted(folder.iterdir()):
        label = _label_of(path)
        if label is not None and not path.is_symlink() and path.is_file():
            found.append((label, path))
    return found


def _files(folder: Path) -> dict[str, Path]:
    """Label → the sprite shown for it: the label's own file (``joy.png``), else the
    first of its alternatives by name."""
    found: dict[str, Path] = {}
    for label, path in _sprite_files(folder):
        if label not in found or (path.stem.lower() == label != found[label].stem.lower()):
            found[label] = path
    return found


def expressions(library: PresetLibrary, character_id: str) -> list[str]:
    """The labels the character has a sprite for, sorted."""
    library.character(character_id)  # NotFound for a character that is not here
    return sorted(_files(sprites_folder(library, character_id)))


def default_expression(library: PresetLibrary, character_id: str) -> str | None:
    """The sprite shown when the chat picked none: the card's
    ``extensions.storyloom.default_expression``, else ``neutral``, when it has a sprite."""
    have = _files(sprites_folder(library, character_id))
    ours = library.character(character_id).extensions.get("storyloom")
    named = ours.get("default_expression") if isinstance(ours, dict) else None
    for label in (named, NEUTRAL):
        if isinstance(label, str) and label.lower() in have:
            return label.lower()
    return None


def sprite(library: PresetLibrary, character_id: str, label: str) -> tuple[bytes, str]:
    """The sprite's bytes and media type; :class:`NotFound` when there is none or the
    file is not an image."""
    path = _files(sprites_folder(library, character_id)).get(check_label(label))
    if path is None:
        raise NotFound(f"character {character_id!r} has no {label!r} sprite")
    data = path.read_bytes()
    media_type = image_type(data)
    if media_type is None:
        raise NotFound(f"the {label!r} sprite of {character_id!r} is not an image")
    return data, media_type


def save_sprite(library: PresetLibrary, character_id: str, label: str, data: bytes) -> bool:
    """Store ``data`` (an image, by content) as the character's ``label`` sprite; returns
    whether anything changed (the same image again writes nothing)."""
    library.character(character_id)
    label = check_label(label)
    media_type = image_type(data)
    if media_type is None:
        reason = "not a PNG, JPEG, GIF or WebP image"
        raise InvalidInput(f"sprite {label}: {reason}", [FieldProblem("file", reason)])
    folder = sprites_folder(library, character_id)
    # The label's own file (``joy.png``); its alternatives (``joy-2.png``) stay.
    old = next((p for lab, p in _sprite_files(folder) if lab == label and p.stem == label), None)
    target = folder / f"{label}{IMAGE_SUFFIXES[media_type]}"
    if old is not None and old.read_bytes() == data:
        return False
    atomic_write_bytes(target, data)
    if old is not None and old != target:
        old.unlink(missing_ok=True)
    return True


def import_st_sprites(library: PresetLibrary, character_id: str, folder: Path) -> int:
    """Copy a SillyTavern sprite folder (``characters/<name>/``) to the character.
    Files that are not images by content, links and labels that cannot be file names
    are left out. Returns how many sprites were added or changed: a second run, 0."""
    library.character(character_id)
    target = sprites_folder(library, character_id)
    changed = 0
    for _label, path in _sprite_files(folder):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        media_type = image_type(data)
        if media_type is None:
            continue
        # Every sprite of a label comes, under its own name (lower-cased, as SillyTavern
        # reads it) with the suffix its bytes say.
        copy = target / f"{path.stem.lower()}{IMAGE_SUFFIXES[media_type]}"
        if copy.is_file() and copy.read_bytes() == data:
            continue
        atomic_write_bytes(copy, data)
        changed += 1
    return changed


def export_st_sprites(library: PresetLibrary, character_id: str, folder: Path) -> int:
    """Write the character's sprites into a SillyTavern sprite folder
    (``characters/<name>/<label>.<ext>``); returns how many."""
    files = _sprite_files(sprites_folder(library, character_id))
    for _label, path in files:
        atomic_write_bytes(folder / path.name, path.read_bytes())
    return len(files)
