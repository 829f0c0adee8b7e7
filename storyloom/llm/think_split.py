"""``<think>…</think>`` at the start of an answer is the model's reasoning, not its reply.

DeepSeek-R1, Qwen3 and their distills write their thinking inside these tags; servers that
do not split it out into ``reasoning_content`` themselves (most llama.cpp, KoboldCpp and
text-generation-webui setups) leave it in the content. :class:`ThinkSplitter` separates
it while the answer streams, whatever way the tags fall across chunks, holding back only
the few characters that could still be part of a tag. Only an answer that *opens* with
``<think>`` (after whitespace) is split: a reply that mentions the tag later is left as it
is. :func:`split_think` does the same for a whole answer.
"""

from __future__ import annotations

from enum import Enum

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


def split_think(text: str) -> tuple[str, str]:
    """(reasoning, reply) of ``text``; ("", text) when it does not open with ``<think>``."""
    stripped = text.lstrip()
    if not stripped.startswith(THINK_OPEN):
        return "", text
    inner = stripped[len(THINK_OPEN) :]
    end = inner.find(THINK_CLOSE)
    if end < 0:
        return inner, ""
    return inner[:end], inner[end + len(THINK_CLOSE) :].lstrip()


def _close_prefix(text: str) -> int:
    """How many of ``text``'s last characters could begin ``</think>``."""
    for size in range(min(len(text), len(THINK_CLOSE) - 1), 0, -1):
        if THINK_CLOSE.startswith(text[-size:]):
            return size
    return 0


class _Where(Enum):
    UNDECIDED = "undecided"
    """At the start: the answer may still open with <think>."""
    INSIDE = "inside"
    AFTER = "after"
    """Just past </think>: the blank lines before the reply are dropped."""
    PAST = "past"
    """Past the thought, or the answer never had one: everything is reply."""


class ThinkSplitter:
    """Feed it an answer's content deltas in order; it returns the reply part of each and
    keeps the reasoning in :attr:`reasoning`."""

    def __init__(self) -> None:
        self._where = _Where.UNDECIDED
        self._held = ""
        self._reasoning: list[str] = []

    def reset(self) -> None:
        """Forget everything (a retried request starts a new answer)."""
        self._where = _Where.UNDECIDED
        self._held = ""
        self._reasoning.clear()

    @property
    def done(self) -> bool:
        """True once everything from now on is reply (the fast path skips the splitter)."""
        return self._where is _Where.PAST and not self._held

    @property
    def reasoning(self) -> str:
        return "".join(self._reasoning)

    def feed(self, content: str) -> str:
        """The reply in ``content`` ("" while it is thought, or cannot be told yet)."""
        held = self._held + content
        self._held = ""
        if self._where is _Where.PAST:
            return held
        if self._where is _Where.AFTER:
            return self._after(held)
        if self._where is _Where.UNDECIDED:
            start = held.lstrip()
            if not start or (len(start) < len(THINK_OPEN) and THINK_OPEN.startswith(start)):
                self._held = held  # whitespace, or "<thi": cannot tell yet
                return ""
            if not start.startswith(THINK_OPEN):
                self._where = _Where.PAST
                return held
            self._where = _Where.INSIDE
            held = start[len(THINK_OPEN) :]
        end = held.find(THINK_CLOSE)
        if end < 0:
            keep = _close_prefix(held)
            if keep:
                self._held = held[-keep:]
                held = held[:-keep]
            if held:
                self._reasoning.append(held)
            return ""
        if end:
            self._reasoning.append(held[:end])
        return self._after(held[end + len(THINK_CLOSE) :])

    def _after(self, text: str) -> str:
        reply = text.lstrip()
        self._where = _Where.PAST if reply else _Where.AFTER
        return reply

    def flush(self) -> str:
        """At the end of the answer: what was held back that turns out to be reply."""
        held, self._held = self._held, ""
        if self._where is _Where.INSIDE:
            self._reasoning.append(held)
            return ""
        if self._where is _Where.AFTER:
            return ""
        self._where = _Where.PAST
        return held if held.strip() else ""
