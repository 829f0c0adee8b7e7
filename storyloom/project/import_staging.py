"""All of an import's files written aside first, then moved into place together.

An import plans every file it will make (:meth:`StagedImport.add_file`,
:meth:`StagedImport.add_folder`) as bytes in memory, so whatever cannot be serialised fails
before anything is written. :meth:`StagedImport.commit` writes them into a hidden staging
folder beside their destinations (same file system, so the moves are renames), moves each
into place, and runs the caller's last step (registering KBs in ``project.json``). A
failure at any point removes what was moved and the folders made for it: the project is
left exactly as it was.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from storyloom.core.errors import Conflict, FieldProblem, FileFormatError

# Errors of a name the file system will not take: too long, or characters it refuses.
_NAME_ERRNOS = {errno.ENAMETOOLONG, errno.EINVAL, errno.EILSEQ}


@dataclass
class _Unit:
    final: Path
    content: bytes | dict[str, bytes | None]


@dataclass
class StagedImport:
    """The files one import makes under ``base`` (each destination must be new)."""

    base: Path
    source: Path
    _units: list[_Unit] = field(default_factory=list)

    def add_file(self, final: Path, data: bytes) -> None:
        self._units.append(_Unit(final, data))

    def add_folder(self, final: Path, files: dict[str, bytes | None]) -> None:
        """A new folder; ``files`` maps a relative path to bytes, or None for a folder."""
        self._units.append(_Unit(final, dict(files)))

    def commit(self, last_step: Callable[[], None] | None = None) -> None:
        """Write, move into place, then ``last_step``; on any failure undo everything."""
        staging = self.base / f".storyloom-import-{uuid.uuid4().hex[:12]}"
        moved: list[Path] = []
        made: list[Path] = []
        try:
            staging.mkdir(parents=True)
            for number, unit in enumerate(self._units):
                self._write(staging / str(number), unit)
            for number, unit in enumerate(self._units):
                if unit.final.exists():
                    raise Conflict(f"{unit.final} appeared while importing; nothing was imported")
                made.extend(_make_parents(unit.final.parent))
                os.rename(staging / str(number), unit.final)
                moved.append(unit.final)
            if last_step is not None:
                last_step()
        except BaseException:
            for path in reversed(moved):
                _remove(path)
            for folder in reversed(made):
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _write(self, target: Path, unit: _Unit) -> None:
        try:
            if isinstance(unit.content, bytes):
                target.write_bytes(unit.content)
                return
            target.mkdir()
            for relative, data in unit.content.items():
                path = target.joinpath(*relative.split("/"))
                if data is None:
                    path.mkdir(parents=True, exist_ok=True)
                else:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(data)
        except OSError as exc:
            if exc.errno in _NAME_ERRNOS or isinstance(exc, FileExistsError | NotADirectoryError):
                where = unit.final.name
                raise FileFormatError(
                    self.source, [FieldProblem(where, f"cannot be written: {exc.strerror}")]
                ) from None
            raise


def _make_parents(folder: Path) -> list[Path]:
    """Create ``folder`` and missing parents; the ones made, outermost first."""
    missing: list[Path] = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        path.mkdir()
    return list(reversed(missing))


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
