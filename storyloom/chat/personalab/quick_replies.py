"""Quick replies: buttons under the chat's message box that send (or insert) a set text.

A project keeps SillyTavern's quick reply sets as they are, one file per set in
``presets/quick_replies/<stem>.json`` (the set file's own shape,
:class:`~storyloom.sillytavern.quick_reply_set.QuickReplySetFile`, unknown keys kept, so a
set goes back out as it came). Sets are found by their ``name``; the stem is only where
the file lives. Which sets show their buttons in the chat is the project's list in
``presets/quick_reply_visibility.json`` (SillyTavern keeps the same list in its settings,
``quickReplyV2.config.setList``).

A reply whose message is a STscript slash command (it starts with ``/``) is kept but not
runnable: storyloom's chat has no slash commands, so clicking it would send the command
to the model as text. :func:`reply_buttons` says so for each button, with why.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from storyloom.chat.personalab.library import check_preset_id
from storyloom.core.atomic_io import atomic_write_text
from storyloom.core.errors import FieldProblem, FileFormatError, InvalidInput, NotFound
from storyloom.core.json_files import json_file_ids, read_json_object, validate_document
from storyloom.project.project_file import folder_slug
from storyloom.sillytavern.quick_reply_set import (
    QuickReply,
    QuickReplySetFile,
    read_quick_reply_set,
)

SETS_DIR = "presets/quick_replies"
VISIBILITY_FILE = "presets/quick_reply_visibility.json"

SLASH_COMMAND_REASON = (
    "a SillyTavern slash command (STscript); storyloom's chat does not run slash commands, "
    "so it is kept but cannot be sent"
)


class QuickReplyVisibility(BaseModel):
    """The sets whose buttons the chat shows, by name."""

    visible: list[str] = Field(default_factory=list)


class QuickReplyButton(BaseModel):
    """One reply as the chat's button bar shows it."""

    id: int
    label: str = Field(description="The button's text (the message's start when empty)")
    title: str = Field(default="", description="The tooltip")
    message: str
    runnable: bool = Field(description="False: kept, shown disabled (see not_runnable)")
    not_runnable: str | None = Field(default=None, description="Why it cannot be sent")


def reply_button(reply: QuickReply) -> QuickReplyButton:
    """``reply`` as a button: a slash command is not runnable (storyloom has none)."""
    label = reply.label.strip() or reply.message.strip()[:32] or f"#{reply.id}"
    slash = reply.is_slash_command
    return QuickReplyButton(
        id=reply.id,
        label=label,
        title=reply.title,
        message=reply.message,
        runnable=not slash,
        not_runnable=SLASH_COMMAND_REASON if slash else None,
    )


def reply_buttons(quick_set: QuickReplySetFile) -> list[QuickReplyButton]:
    """The set's buttons in order; hidden replies (``isHidden``) have none."""
    return [reply_button(r) for r in quick_set.qrList if not r.isHidden]


def _text(quick_set: QuickReplySetFile) -> str:
    # Only the keys the set has: a file goes back out as it came, not with defaults added.
    data = quick_set.model_dump(mode="json", exclude_unset=True)
    # As SillyTavern writes it: JSON.stringify(set, null, 4).
    return json.dumps(data, ensure_ascii=False, indent=4)


class QuickReplyLibrary:
    """The project's quick reply sets and which of them the chat shows."""

    def __init__(self, project_dir: Path) -> None:
        self.project_dir = project_dir
        self.folder = project_dir / SETS_DIR
        self._visibility = project_dir / VISIBILITY_FILE
        self._lock = threading.RLock()

    # -- sets -------------------------------------------------------------------------

    def _stems(self) -> dict[str, str]:
        """Set name → file stem, for the files that read (a bad file is left out)."""
        found: dict[str, str] = {}
        for stem in json_file_ids(self.folder):
            try:
                found.setdefault(self._read(stem).name, stem)
            except FileFormatError:
                continue
        return found

    def _read(self, stem: str) -> QuickReplySetFile:
        path = self.folder / f"{stem}.json"
        return validate_document(QuickReplySetFile, read_json_object(path), path)

    def sets(self) -> list[QuickReplySetFile]:
        """Every set that reads, by name; see :meth:`problems` for those that do not."""
        with self._lock:
            return sorted(
                (self._read(stem) for stem in self._stems().values()), key=lambda s: s.name
            )

    def problems(self) -> list[FileFormatError]:
        """The set files that do not read, each naming its file, field and reason."""
        out: list[FileFormatError] = []
        for stem in json_file_ids(self.folder):
            try:
                self._read(stem)
            except FileFormatError as exc:
                out.append(exc)
        return out

    def get(self, name: str) -> QuickReplySetFile:
        with self._lock:
            stem = self._stems().get(name)
            if stem is None:
                raise NotFound(f"no quick reply set named {name!r}")
            return self._read(stem)

    def save(self, quick_set: QuickReplySetFile, *, visible: bool | None = None) -> bool:
        """Write ``quick_set`` over the set of its name (or as a new one); ``visible``
        set changes whether the chat shows it (a new set shows unless told otherwise).
        Returns whether anything changed: saving the same set again writes nothing."""
        if not quick_set.name.strip():
            raise InvalidInput(
                "quick reply set: the name is empty", [FieldProblem("name", "empty")]
            )
        with self._lock:
            stems = self._stems()
            stem = stems.get(quick_set.name)
            is_new = stem is None
            if stem is None:
                taken = set(json_file_ids(self.folder))
                stem = check_preset_id(folder_slug(quick_set.name, taken))
            path = self.folder / f"{stem}.json"
            text = _text(quick_set)
            changed = not path.is_file() or path.read_text(encoding="utf-8") != text
            if changed:
                atomic_write_text(path, text)
            if visible is None and is_new:
                visible = True
            if visible is not None:
                changed = self.set_visible(quick_set.name, visible) or changed
            return changed

    def delete(self, name: str) -> None:
        with self._lock:
            stem = self._stems().get(name)
            if stem is None:
                raise NotFound(f"no quick reply set named {name!r}")
            (self.folder / f"{stem}.json").unlink()
            self.set_visible(name, False)

    # -- visibility -------------------------------------------------------------------

    def visible(self) -> list[str]:
        """The names of the sets the chat shows, in the order they show."""
        if not self._visibility.is_file():
            return []
        data = validate_document(
            QuickReplyVisibility, read_json_object(self._visibility), self._visibility
        )
        return data.visible

    def set_visible(self, name: str, visible: bool) -> bool:
        """Show or hide the set called ``name``; returns whether that changed anything."""
        with self._lock:
            names = self.visible()
            if visible == (name in names):
                return False
            names = [*names, name] if visible else [n for n in names if n != name]
            text = QuickReplyVisibility(visible=names).model_dump_json(indent=2) + "\n"
            atomic_write_text(self._visibility, text)
            return True


def import_st_quick_replies(
    folder: Path, project_dir: Path, visible: Sequence[str] | None
) -> tuple[int, list[FileFormatError]]:
    """Read every set in a SillyTavern ``QuickReplies/`` folder into the project.

    ``visible`` names the sets SillyTavern showed (``quickReplyV2.config.setList`` entries
    with ``isVisible``); None shows every set. A set file that does not read is skipped
    and returned as a problem (file, field, reason); the rest import. Returns how many
    sets were added or changed: importing the same folder again changes nothing and
    returns 0."""
    library = QuickReplyLibrary(project_dir)
    shown = None if visible is None else set(visible)
    changed = 0
    problems: list[FileFormatError] = []
    if not folder.is_dir():
        return 0, problems
    for path in sorted(folder.glob("*.json")):
        try:
            quick_set = read_quick_reply_set(path)
        except FileFormatError as exc:
            problems.append(exc)
            continue
        show = True if shown is None else quick_set.name in shown
        if library.save(quick_set, visible=show):
            changed += 1
    return changed, problems


def st_file_name(name: str) -> str:
    """``name`` as SillyTavern names the file of a set (its ``sanitize-filename``: the
    characters no file system takes are dropped)."""
    cleaned = "".join(c for c in name if c not in '/\\?<>:*|"' and ord(c) >= 32).strip()
    cleaned = cleaned.rstrip(". ")
    return cleaned if cleaned not in ("", ".", "..") else "quick-replies"


def export_st_quick_replies(project_dir: Path, folder: Path) -> int:
    """Write every set of the project into a SillyTavern ``QuickReplies/`` folder, as
    SillyTavern saves them (``<name>.json``, indented by 4); returns how many."""
    sets = QuickReplyLibrary(project_dir).sets()
    for quick_set in sets:
        atomic_write_text(folder / f"{st_file_name(quick_set.name)}.json", _text(quick_set))
    return len(sets)
