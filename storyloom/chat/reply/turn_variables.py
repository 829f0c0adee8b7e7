"""The chat variables as an agent turn's tools see them (``chat:GetVariable`` /
``chat:SetVariable``).

A turn's tools read the variables as the turn began, with their own writes of the turn
on top; a write is not applied to the state here but recorded as a ``set``
:class:`~storyloom.chat.reply.state_ops.StateOp`, and the State Updater applies those ops
with the reply's own, after what the prompt's macros set. So a failed or stopped turn
changes nothing, and a swipe starts again from the same state.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from typing import Any

import jsonpointer

from storyloom.chat.reply.state_ops import StateOp, apply_ops, key_to_pointer


class TurnVariables:
    """Implements :class:`~storyloom.workflow.agent_host.ChatVariables` over a snapshot's
    variables. Paths are dotted keys (``stats.hp``) or JSON Pointers (``/stats/hp``)."""

    def __init__(self, variables: Mapping[str, Any]) -> None:
        self._base = copy.deepcopy(dict(variables))
        self._ops: list[StateOp] = []
        # Tools may run in worker threads; one turn's calls run one at a time, but a
        # reader must never see half a write.
        self._lock = threading.Lock()

    @property
    def ops(self) -> list[StateOp]:
        """The writes of the turn, in order."""
        with self._lock:
            return list(self._ops)

    def _pointer(self, path: str) -> str:
        if not isinstance(path, str) or not path.strip():
            raise ValueError("a variable name is needed")
        return path if path.startswith("/") else key_to_pointer(path)

    def get(self, path: str) -> Any:
        """The value now (None when it does not exist)."""
        pointer = self._pointer(path)
        with self._lock:
            outcome = apply_ops(self._base, self._ops)
        try:
            return jsonpointer.resolve_pointer(outcome.variables, pointer, None)
        except jsonpointer.JsonPointerException:
            return None

    def set(self, path: str, value: Any) -> None:
        """Record a write; one that cannot apply (a path through a number) raises."""
        op = StateOp(op="set", path=self._pointer(path), value=copy.deepcopy(value))
        with self._lock:
            outcome = apply_ops(self._base, [*self._ops, op])
            if op not in outcome.applied:
                raise ValueError(outcome.problems[-1] if outcome.problems else "cannot set it")
            self._ops.append(op)
