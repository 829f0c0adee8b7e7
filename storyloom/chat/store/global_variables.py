"""The user's global variables: ``{{$x}}``, ``{{getglobalvar::x}}`` and their kin.

SillyTavern keeps these with the user, outside any chat (its ``settings.json``), so a value
set in one chat is there in every other. storyloom keeps them as one JSON object in the
data directory, ``global_variables.json``, written atomically. A turn reads them all at
its start and, when its macros changed some, writes back only what it changed on top of
what is in the file then, so two chats replying at once do not undo each other.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from storyloom.core.atomic_io import atomic_write_json
from storyloom.core.errors import FieldProblem, FileFormatError

FILE_NAME = "global_variables.json"

_MISSING = object()


class GlobalVariables:
    """The global variables file at ``path`` (``<data directory>/global_variables.json``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    @classmethod
    def in_home(cls, home: Path) -> GlobalVariables:
        return cls(home / FILE_NAME)

    def load(self) -> dict[str, Any]:
        """Every global variable; none when the file does not exist yet.

        Raises :class:`FileFormatError` when the file is not a JSON object.
        """
        with self._lock:
            return self._read()

    def save_changes(self, before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
        """Write what changed from ``before`` to ``after`` (set, changed or deleted keys)
        onto the file as it is now; False when nothing changed (nothing is written)."""
        changed = {k: v for k, v in after.items() if before.get(k, _MISSING) != v}
        removed = [k for k in before if k not in after]
        if not changed and not removed:
            return False
        with self._lock:
            values = self._read()
            values.update(copy.deepcopy(changed))
            for key in removed:
                values.pop(key, None)
            atomic_write_json(self.path, values)
        return True

    def _read(self) -> dict[str, Any]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except UnicodeDecodeError:
            raise FileFormatError(self.path, [FieldProblem("", "not UTF-8 text")]) from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            reason = f"not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
            raise FileFormatError(self.path, [FieldProblem("", reason)]) from None
        if not isinstance(data, dict):
            reason = "the global variables are a JSON object of names and values"
            raise FileFormatError(self.path, [FieldProblem("", reason)])
        return data
