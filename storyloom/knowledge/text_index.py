"""Keyword search over knowledge entries: SQLite FTS5 with BM25 over jieba-segmented text.

FTS5's ``unicode61`` tokenizer would keep a run of Chinese characters as one token, so a
query word inside a sentence would never match. Text is therefore cut by
``jieba.cut_for_search`` (which also emits the shorter words inside long ones) and the
words are joined with spaces before indexing; queries are cut the same way. The FTS table
adds Porter stemming, which changes English words only (``dragons`` finds ``dragon``).
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import apsw
import regex

_JIEBA_LOCK = threading.Lock()
_jieba_module: Any = None

# A token must hold a letter or digit of some script; this drops punctuation and spaces.
_WORDLIKE = regex.compile(r"[\p{L}\p{N}]")
_HAN = regex.compile(r"\p{Han}")

# Words that match nearly every entry and would make every entry a keyword hit.
STOPWORDS = frozenset(
    {
        # English
        "a", "an", "and", "are", "as", "at", "be", "by", "do", "does", "for", "from", "has",
        "have", "how", "i", "in", "is", "it", "its", "of", "on", "or", "that", "the", "this",
        "to", "was", "were", "what", "when", "where", "which", "who", "why", "with", "you",
        # Chinese function words
        "的", "了", "是", "在", "和", "与", "及", "或", "也", "就", "都", "而", "吗", "呢",
        "吧", "啊", "着", "过", "之", "把", "被", "让", "给", "对", "从", "向", "这", "那",
        "什么", "哪里", "怎么", "为什么", "一个",
    }
)  # fmt: skip


def _jieba() -> Any:
    """jieba, its dictionary loaded once per process and its logging quiet.

    Imported by name: jieba has no type information, and this keeps that out of the
    type checker's configuration.
    """
    global _jieba_module
    if _jieba_module is not None:
        return _jieba_module
    with _JIEBA_LOCK:
        if _jieba_module is None:
            module: Any = importlib.import_module("jieba")
            module.setLogLevel(logging.WARNING)
            logging.getLogger("jieba").setLevel(logging.WARNING)
            module.initialize()
            _jieba_module = module
    return _jieba_module


def segment(text: str) -> list[str]:
    """The words of ``text`` for indexing: jieba search-mode cut, lower-cased, no punctuation."""
    words: list[str] = []
    for word in _jieba().cut_for_search(text):
        if _WORDLIKE.search(word) is not None:
            words.append(str(word).lower())
    return words


def segmented_text(text: str) -> str:
    """What goes into the FTS table: the words of ``text`` separated by spaces."""
    return " ".join(segment(text))


def _single_han(word: str) -> bool:
    return len(word) == 1 and _HAN.match(word) is not None


def fts_query(query: str) -> str | None:
    """An FTS5 MATCH expression for free text: any of its words (BM25 ranks entries with
    more and rarer words first), without stopwords, and without single Chinese characters
    when there are longer words. None when the query has no searchable word."""
    words: list[str] = []
    for word in segment(query):
        if word in STOPWORDS or word in words:
            continue
        words.append(word)
    # A lone Chinese character (住, 山) matches countless unrelated entries; when the query
    # also has real words, they carry the meaning.
    if any(not _single_han(w) for w in words):
        words = [w for w in words if not _single_han(w)]
    if not words:
        return None
    return " OR ".join('"' + word.replace('"', '""') + '"' for word in words)


@dataclass(frozen=True)
class KeywordHit:
    index_id: int
    kb_id: str
    entry_id: str
    bm25: float
    """FTS5's BM25 score: lower is better (SQLite negates it so it sorts ascending)."""


def keyword_search(
    conn: apsw.Connection,
    query: str,
    *,
    where_sql: str,
    where_args: Sequence[object],
    limit: int,
) -> list[KeywordHit]:
    """Entries matching ``query`` best first, restricted by a condition on ``i``
    (``kb_entry_index``) such as the one :class:`EntryFilter` builds."""
    expression = fts_query(query)
    if expression is None or limit <= 0:
        return []
    # CROSS JOIN keeps SQLite from walking the filter's index rows and probing FTS per row.
    sql = (
        "SELECT i.id, i.kb_id, i.entry_id, bm25(kb_entry_fts) AS score"
        " FROM kb_entry_fts CROSS JOIN kb_entry_index AS i ON i.id = kb_entry_fts.rowid"
        f" WHERE kb_entry_fts MATCH ? AND {where_sql}"
        " ORDER BY score, i.id LIMIT ?"
    )
    rows = conn.execute(sql, (expression, *where_args, limit)).fetchall()
    return [KeywordHit(cast(int, r[0]), str(r[1]), str(r[2]), cast(float, r[3])) for r in rows]
