"""Atomic writes for user files: a crash leaves either the old file or the new one."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: Path | str, data: bytes, *, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` through a temp file in the same folder, fsync, then rename.

    ``mode`` set: the file gets exactly that mode, given to the temp file before a byte
    is written (a file holding a secret is never readable by others, not even for a
    moment). Unset: an existing file keeps its mode, a new one is 0600.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    # mkstemp creates the file 0600, whatever the umask.
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            elif target.exists():
                # Keep the permissions the user gave the old file.
                os.fchmod(handle.fileno(), target.stat().st_mode & 0o777)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    # The rename is only durable once the directory entry is flushed too.
    dir_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def atomic_write_text(path: Path | str, text: str, *, mode: int | None = None) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


def atomic_write_json(path: Path | str, value: Any, *, mode: int | None = None) -> None:
    atomic_write_text(path, json.dumps(value, ensure_ascii=False, indent=2) + "\n", mode=mode)
