"""Where storyloom keeps its data: ``--home``, else ``$STORYLOOM_HOME``, else ``~/.storyloom``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

HOME_ENV = "STORYLOOM_HOME"


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
    """Create the data directory (private to the user: it holds API keys)."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    return home
