"""Node outputs by cache key, least recently used dropped first once over a byte budget.

The key is the runner's (type, version, config, input signatures); the value is what the
node returned, as it returned it. Sizes are estimates: strings by length, containers by
a sample of their items, so that putting a large list costs no more than looking at a few
dozen of its elements. The budget bounds memory roughly, not to the byte.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
_SAMPLE = 16
_MAX_DEPTH = 4


@dataclass(frozen=True, slots=True)
class CachedOutputs:
    outputs: dict[str, Any]
    history_id: int | None
    size: int


def estimate_size(value: Any, depth: int = 0) -> int:
    """Rough bytes held by ``value``: exact enough to compare a long text with a short one."""
    if isinstance(value, str):
        return 49 + len(value)
    if isinstance(value, bytes | bytearray):
        return 33 + len(value)
    if value is None or isinstance(value, bool | int | float):
        return 28
    if depth >= _MAX_DEPTH:
        return 64
    if isinstance(value, Mapping):
        count = len(value)
        if not count:
            return 64
        sample = 0
        for index, (k, v) in enumerate(value.items()):
            if index == _SAMPLE:
                break
            sample += estimate_size(k, depth + 1) + estimate_size(v, depth + 1)
        return 64 + 24 * count + sample * count // min(count, _SAMPLE)
    if isinstance(value, list | tuple | set | frozenset):
        count = len(value)
        if not count:
            return 56
        sample = 0
        for index, item in enumerate(value):
            if index == _SAMPLE:
                break
            sample += estimate_size(item, depth + 1)
        return 56 + 8 * count + sample * count // min(count, _SAMPLE)
    if isinstance(value, BaseModel):
        return 64 + estimate_size(value.__dict__, depth + 1)
    return sys.getsizeof(value)


def _outputs_size(outputs: dict[str, Any]) -> int:
    """``estimate_size`` of a node's outputs, with the common scalar values inlined: this
    runs for every node a run computes."""
    size = 64
    for name, value in outputs.items():
        kind = type(value)
        if kind is str:
            size += 97 + len(name) + len(value)
        elif kind is int or kind is float or kind is bool or value is None:
            size += 76 + len(name)
        else:
            size += 72 + len(name) + estimate_size(value, 1)
    return size


class OutputCache:
    """An LRU of node outputs bounded by their estimated size in bytes."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, CachedOutputs] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def get(self, key: str) -> CachedOutputs | None:
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return entry

    def put(self, key: str, outputs: dict[str, Any], history_id: int | None = None) -> bool:
        """Keep ``outputs`` under ``key``; False when they alone exceed the budget."""
        size = 128 + len(key) + _outputs_size(outputs)
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= old.size
        if size > self.max_bytes:
            return False
        self._entries[key] = CachedOutputs(outputs, history_id, size)
        self._bytes += size
        while self._bytes > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= evicted.size
        return True

    def discard(self, key: str) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= old.size

    def clear(self) -> None:
        self._entries.clear()
        self._bytes = 0
