"""``<think>…</think>`` at the start of an answer is the model's reasoning, not its reply.

DeepSeek-R1, Qwen3 and their distills write their thinking inside these tags; servers that
do not split it out into ``reasoning_content`` themselves (most llama.cpp, KoboldCpp and
text-generation-webui setups) leave it in the content. :class:`ThinkSplitter` separates
it while the answer streams, whatever way the tags fall across chunks, holding back only
the few characters that could still be part of a tag. Only an answer that *opens* with
``<think>`` (after whitespace) is split: a reply that mentions the tag later is left as it
is. :func:`split_think` does the same for a whole answer.

The tags are a connection's setting (``reasoning_prefix`` / ``reasoning_suffix``, as
SillyTavern's Reasoning Formatting), for models that mark their thinking otherwise
(``<thinking>``, ``<reasoning>``, ``◁think▷``): :class:`ThinkTags`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from storyloom.core.settings import ChatEndpoint

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


@dataclass(frozen=True)
class ThinkTags:
    """What opens and closes the reasoning (surrounding whitespace does not count)."""

    open: str = THINK_OPEN
    close: str = THINK_CLOSE


DEFAULT_TAGS = ThinkTags()


def think_tags(endpoint: ChatEndpoint) -> ThinkTags:
    """The tags of a connection's settings; an empty one falls back to ``<think>``'s."""
    return ThinkTags(
        endpoint.reasoning_prefix.strip() or THINK_OPEN,
        endpoint.reasoning_suffix.strip() or THINK_CLOSE,
    )


def split_think(text: str, tags: ThinkTags = DEFAULT_TAGS) -> tuple[str, str]:
    """(reasoning, reply) of ``text``; ("", text) when it does not open with the tag."""
    stripped = text.lstrip()
    if not stripped.startswith(tags.open):
        return "", text
    inner = stripped[len(tags.open) :]
    end = inner.find(tags.close)
    if end < 0:
        return inner, ""
    return inner[:end], inner[end + len(tags.close) :].lstrip()


def _close_prefix(text: str, close: str) -> int:
    """How many of ``text``'s last characters could begin ``close``."""
    for size in range(min(len(text), len(close) - 1), 0, -1):
        if close.startswith(text[-size:]):
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

    def __init__(self, tags: ThinkTags = DEFAULT_TAGS) -> None:
        self.tags = tags
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
            opening = self.tags.open
            start = held.lstrip()
            if not start or (len(start) < len(opening) and opening.startswith(start)):
                self._held = held  # whitespace, or "<thi": cannot tell yet
                return ""
            if not start.startswith(opening):
                self._where = _Where.PAST
                return held
            self._where = _Where.INSIDE
            held = start[len(opening) :]
        close = self.tags.close
        end = held.find(close)
        if end < 0:
            keep = _close_prefix(held, close)
            if keep:
                self._held = held[-keep:]
                held = held[:-keep]
            if held:
                self._reasoning.append(held)
            return ""
        if end:
            self._reasoning.append(held[:end])
        return self._after(held[end + len(close) :])

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
