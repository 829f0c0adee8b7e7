"""The user's global regex scripts: SillyTavern's "global" regex scope.

SillyTavern keeps one list of regex scripts per user (``extension_settings.regex`` in its
``settings.json``) that runs in every chat, before the character's own scripts. storyloom
keeps that list as one JSON file in the data directory, ``regex_scripts.json``, in
SillyTavern's script shape (:class:`~storyloom.chat.prompt.regex_scripts.RegexScript`), so
a file exported from SillyTavern's regex panel (one script, or a list) reads as it is.

A file that does not read is refused whole, naming the file, the field and the reason: a
chat then runs without the global scripts and says why, rather than running half of
them. A save is checked whole before anything is written, and written atomically; the
server also refuses a pattern that does not compile
(:func:`~storyloom.chat.prompt.regex_scripts.pattern_problems`) before it saves.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from storyloom.chat.store.regex_script import RegexScript
from storyloom.core.atomic_io import atomic_write_json
from storyloom.core.errors import (
    FieldProblem,
    FileFormatError,
    InvalidInput,
    problems_from_validation,
)

__all__ = ["FILE_NAME", "GlobalRegexScripts", "check_scripts", "read_scripts"]

FILE_NAME = "regex_scripts.json"


class GlobalRegexScripts:
    """The global regex scripts file at ``path`` (``<data directory>/regex_scripts.json``)."""

    # Shared by every instance: the server, an import and the CLI may each open the file,
    # and an append reads and writes it in one step.
    _lock = threading.RLock()

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def in_home(cls, home: Path) -> GlobalRegexScripts:
        return cls(home / FILE_NAME)

    def load(self) -> list[RegexScript]:
        """Every global script, in the order they run (disabled ones too); none when the
        file does not exist yet.

        Raises :class:`FileFormatError` (file, field, reason) when the file does not read.
        """
        with self._lock:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                return []
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise FileFormatError(self.path, [FieldProblem("", "not UTF-8 text")]) from None
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            reason = f"not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
            raise FileFormatError(self.path, [FieldProblem("", reason)]) from None
        try:
            return read_scripts(document)
        except InvalidInput as exc:
            raise FileFormatError(self.path, exc.problems) from None

    def save(self, scripts: Sequence[RegexScript]) -> None:
        """Replace the list with ``scripts``. Every script is checked first
        (:func:`check_scripts`); one that fails is an :class:`InvalidInput` naming its
        index and field, and the file is left as it was."""
        checked = check_scripts(scripts)
        with self._lock:
            atomic_write_json(self.path, [s.model_dump(mode="json") for s in checked])

    def append(self, scripts: Sequence[RegexScript]) -> list[RegexScript]:
        """Add ``scripts`` after the ones there (they run last) and answer the whole list.

        Raises :class:`FileFormatError` when the file there does not read (it is left for
        the user to fix, never overwritten) and :class:`InvalidInput` as :meth:`save`.
        """
        with self._lock:
            whole = check_scripts([*self.load(), *scripts])
            self.save(whole)
            return whole


def read_scripts(document: Any) -> list[RegexScript]:
    """The scripts of a JSON document: a list of scripts, or one script (SillyTavern's
    single-script export). Raises :class:`InvalidInput` naming ``[index].field`` and why."""
    items = [document] if isinstance(document, dict) else document
    if not isinstance(items, list):
        reason = "a list of regex scripts (or one script object) is expected"
        raise InvalidInput.of("regex scripts", [FieldProblem("", reason)])
    problems: list[FieldProblem] = []
    scripts: list[RegexScript] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            problems.append(FieldProblem(f"[{index}]", "a regex script is a JSON object"))
            continue
        try:
            scripts.append(RegexScript.model_validate(item))
        except ValidationError as exc:
            problems += problems_from_validation(exc, f"[{index}]")
    if problems:
        raise InvalidInput.of("regex scripts", problems)
    return scripts


def check_scripts(scripts: Sequence[RegexScript]) -> list[RegexScript]:
    """``scripts`` validated again as they will be written (a model built without
    validation, or changed after, must not reach the file); :class:`InvalidInput` names
    ``[index].field`` of each problem."""
    problems: list[FieldProblem] = []
    checked: list[RegexScript] = []
    for index, script in enumerate(scripts):
        try:
            checked.append(
                RegexScript.model_validate(script.model_dump(mode="json", warnings=False))
            )
        except ValidationError as exc:
            problems += problems_from_validation(exc, f"[{index}]")
    if problems:
        raise InvalidInput.of("regex scripts", problems)
    return checked
