"""Writing a value at a dotted path (``extensions.depth``) of card JSON."""

from __future__ import annotations

import copy
from typing import Any


def set_dotted(target: dict[str, Any], path: str, value: Any) -> None:
    """Put a copy of ``value`` at ``path``, making (or replacing non-object) parents."""
    parts = path.split(".")
    for part in parts[:-1]:
        child = target.get(part)
        if not isinstance(child, dict):
            child = {}
            target[part] = child
        target = child
    target[parts[-1]] = copy.deepcopy(value)
