"""Summaries made without an LLM: extractive chapter L0/L1, arc and whole-work rollups.

Used when no agent model is configured, and always for arcs and the whole work (their
texts are the chapters' L0s put together, so they stay exact and cost nothing). Every
function is deterministic: the same chapter gives the same summary, so re-curating it
adds no new version.
"""

from __future__ import annotations

from collections.abc import Sequence

from storyloom.writing.monitor import split_sentences
from storyloom.writing.tokens import count_tokens
from storyloom.writing.word_count import count_words

L0_TOKENS = 50
L1_TOKENS = 400


def fit(parts: Sequence[str], budget: int, *, separator: str = " ") -> str:
    """As many of ``parts`` (in order) as fit in ``budget`` tokens; the first one cut by
    characters when even it does not fit."""
    text = ""
    for part in parts:
        candidate = f"{text}{separator}{part}" if text else part
        if count_tokens(candidate) > budget:
            if not text:
                return _cut(part, budget)
            break
        text = candidate
    return text


def _cut(text: str, budget: int) -> str:
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if count_tokens(text[:middle] + "…") <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low].rstrip() + "…"


def chapter_l0(title: str, text: str) -> str:
    """About 50 tokens: the title and the opening sentences."""
    head = f"{title}: " if title else ""
    return fit([head + s if i == 0 else s for i, s in enumerate(split_sentences(text))], L0_TOKENS)


def chapter_l1(title: str, text: str, names: Sequence[str]) -> str:
    """A structured overview: who appears, how it opens, how it ends, its length."""
    sentences = split_sentences(text)
    lines = [f"# {title}" if title else "# Chapter", f"- words: {count_words(text)}"]
    if names:
        lines.append(f"- appearing: {', '.join(names)}")
    if sentences:
        lines.append("- opening: " + fit(sentences[:3], 120))
    if len(sentences) > 3:
        lines.append("- ending: " + fit(sentences[-2:], 120))
    return fit(lines, L1_TOKENS, separator="\n") + "\n"


def rollup_l0(title: str, first: int, last: int, latest: str) -> str:
    """An arc's or the whole work's L0: its span, then the newest chapter's L0."""
    span = f"{title}, chapters {first}–{last}" if first != last else f"{title}, chapter {first}"
    return fit([f"{span}.", latest], L0_TOKENS)


def rollup_l1(title: str, lines: Sequence[str]) -> str:
    """One line per part (chapter or arc), newest last, cut to the L1 budget from the
    start so the newest parts stay."""
    kept: list[str] = []
    for line in reversed(lines):
        if count_tokens("\n".join([f"# {title}", line, *kept])) > L1_TOKENS * 4:
            break
        kept.insert(0, line)
    return "\n".join([f"# {title}", *kept]) + "\n"
