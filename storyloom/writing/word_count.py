"""A novelist's word count, the figure the manuscript tree and the import preview show.

Chinese and Japanese are written without spaces, so each ideograph or kana counts as one
word, as Chinese web-novel sites and word processors count them; Hangul syllables count the
same way so a mixed book is counted by one rule. Everything else counts runs of letters,
digits and combining marks (so Devanagari vowel signs do not split a word), where an
apostrophe or hyphen inside a word (``don't``, ``well-known``) and a point or comma between
digits (``3.14``) do not split it either.
"""

from __future__ import annotations

import regex

_CJK = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}"
_LETTER = rf"[\p{{L}}\p{{N}}\p{{M}}--{_CJK}]"
# One compiled pattern, so counting a million-word book is a single scan in C.
_WORD = regex.compile(rf"(?V1)[{_CJK}]|{_LETTER}+(?:(?:['’\-]|(?<=\d)[.,](?=\d)){_LETTER}+)*")
_CJK_CHAR = regex.compile(rf"[{_CJK}]")


def count_words(text: str) -> int:
    """Words in ``text``: one per CJK character, one per other separated word."""
    return len(_WORD.findall(text))


def is_mostly_cjk(text: str) -> bool:
    """Whether CJK characters make up most of the words of ``text``."""
    cjk = len(_CJK_CHAR.findall(text))
    return cjk > 0 and cjk * 2 >= count_words(text)
