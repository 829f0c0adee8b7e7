"""Token counts of the writing studio: one tokenizer for budgets and stored counts.

Budgets are model-agnostic on purpose: a context assembled for one state of the book
must be the same whichever model reads it, so counts use one fixed encoding (cl100k).
"""

from __future__ import annotations

from functools import cache

from storyloom.llm.tokens import TokenCounter, token_counter

ENCODING_MODEL = "gpt-4"


@cache
def _counter() -> TokenCounter:
    return token_counter(ENCODING_MODEL)


def count_tokens(text: str) -> int:
    return _counter().count(text) if text else 0
