"""Where storyloom keeps its data: ``--home``, else ``$STORYLOOM_HOME``, else ``~/.storyloom``.

A data directory that cannot be used is a :class:`DataDirError` whose message says what
is wrong and how to fix it in one line, so every command can print it as it is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from storyloom.core.errors import Unavailable

HOME_ENV = "STORYLOOM_HOME"
CHOOSE_ANOTHER = "choose another data directory with --home or STORYLOOM_HOME"


class DataDirError(Unavailable):
    """The data directory, or a file storyloom keeps in it, cannot be used."""


def resolve_home(
    explicit: Path | str | None = None, environ: Mapping[str, str] | None = None
) -> Path:
    env = os.environ if environ is None else environ
    if explicit:
        chosen = Path(explicit)
    elif env.get(HOME_ENV):
        chosen = Path(env[HOME_ENV])
    else:
        chosen = Path.home() / ".storyloom"
    return chosen.expanduser().resolve()


def ensure_home(home: Path) -> Path:
    """Create the data directory (private to the user: it holds API keys).

    Raises :class:`DataDirError` when it is not a writable folder.
    """
    try:
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
    except FileExistsError:
        raise DataDirError(
            f"data directory {home} is a file, not a folder; {CHOOSE_ANOTHER}"
        ) from None
    except OSError as exc:
        raise DataDirError(
            f"data directory {home} cannot be created ({exc.strerror}); {CHOOSE_ANOTHER}"
        ) from None
    if not os.access(home, os.W_OK | os.X_OK):
        raise DataDirError(
            f"data directory {home} is not writable; fix its permissions or {CHOOSE_ANOTHER}"
        )
    return home


def unusable_file(path: Path, exc: OSError, what: str) -> DataDirError:
    """``path`` (``what`` storyloom keeps in the data directory) cannot be used."""
    if path.is_dir():
        return DataDirError(f"{path} is a folder, not {what}; move it away or {CHOOSE_ANOTHER}")
    return DataDirError(
        f"cannot use {path} as {what} ({exc.strerror or exc}); "
        f"fix its permissions, move it away or {CHOOSE_ANOTHER}"
    )
