"""LLaMA 1/2's tokenizer, offline: SillyTavern's default token count.

SentencePiece BPE with byte fallback, giving the ids ``llama-tokenizer-js`` 1.2.2 gives
(whose own tests hold it to SentencePiece's output for LLaMA's ``tokenizer.model``):

1. the text gets a leading space (SentencePiece's "dummy prefix") and every space
   (U+0020) becomes ``▁``;
2. each character becomes the piece of that one character; a character that is no piece
   becomes one ``<0xNN>`` piece per byte of its UTF-8 form (a lone surrogate is encoded
   as U+FFFD, as JavaScript's ``TextEncoder`` does);
3. neighbouring pieces merge, the pair with the best merge rank first and the leftmost
   of equal pairs first, until no neighbouring pair is a merge.

:meth:`LlamaTokenizer.encode` adds no BOS token: SillyTavern counts with SentencePiece's
``encodeIds`` (its ``/api/tokenizers/llama/encode`` answers ``ids.length``), which adds
none, so a world info entry costs here what it costs there.

Two facts of the vocabulary (checked when the data file is built) make this fast: no
piece runs from another character into ``▁``, and no merge involves a byte piece. A text
therefore splits into words, each a run of ``▁`` and the characters up to the next
space, that tokenize alone; words repeat, so their ids are kept.
llama-tokenizer-js orders merges by ``2 * rank + 1 + position / len(text)``. Pairs with
a byte piece between them never interact; pairs without one lie fewer than
``len(text)`` positions apart (one id per character), so for them that order is
(rank, position), the order used here.
"""

from __future__ import annotations

import functools
import heapq
import re
from collections.abc import Sequence
from pathlib import Path

from storyloom.llm.llama_vocab import DATA_FILE, LlamaVocabulary, load_vocabulary
from storyloom.llm.tokens import MessageCounting

__all__ = ["LlamaCounter", "LlamaTokenizer", "bundled_llama_counter"]

SPACE = "\u2581"  # ▁, SentencePiece's stand-in for a space
_FIRST_BYTE_ID = 3  # <0x00> .. <0xFF> are ids 3 .. 258
_SPECIAL_IDS = range(_FIRST_BYTE_ID)  # <unk>, <s>, </s>
_ID_BITS = 15  # 32,000 pieces fit in 15 bits: a pair of ids packs into one int
_ID_MASK = (1 << _ID_BITS) - 1
_POS_BITS = 32
_POS_MASK = (1 << _POS_BITS) - 1

_WORD = re.compile(f"{SPACE}+[^{SPACE}]*")
_SURROGATE = re.compile("[\ud800-\udfff]")
_REPLACEMENT_BYTES = "\ufffd".encode()

# Words longer than this are tokenized every time (a page of Chinese is one "word").
_CACHED_WORD_CHARS = 48
_CACHE_ENTRIES = 50_000


class LlamaTokenizer:
    """Encodes and decodes with a :class:`LlamaVocabulary`; safe to share across threads."""

    def __init__(self, vocabulary: LlamaVocabulary) -> None:
        self.vocabulary = vocabulary
        self._pieces = vocabulary.pieces
        self._char_ids = {piece: i for i, piece in enumerate(self._pieces) if len(piece) == 1}
        # (left << 15 | right) -> (rank << 15 | merged piece id)
        pieces = self._pieces
        ids = {piece: i for i, piece in enumerate(pieces)}
        self._merges = {
            left << _ID_BITS | right: rank << _ID_BITS | ids[pieces[left] + pieces[right]]
            for rank, (left, right) in enumerate(vocabulary.merges)
        }
        self._words: dict[str, list[int]] = {}

    def encode(self, text: str, *, bos: bool = False) -> list[int]:
        """Token ids of ``text`` (with the dummy prefix space; BOS only when asked)."""
        ids = [1] if bos else []
        if not text:
            return ids
        if _SURROGATE.search(text):
            text = _join_surrogate_pairs(text)
        for word in _WORD.findall(SPACE + text.replace(" ", SPACE)):
            ids.extend(self._word(word))
        return ids

    def count(self, text: str) -> int:
        """How many ids :meth:`encode` gives ``text`` (no BOS)."""
        if not text:
            return 0
        if _SURROGATE.search(text):
            text = _join_surrogate_pairs(text)
        return sum(len(self._word(w)) for w in _WORD.findall(SPACE + text.replace(" ", SPACE)))

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``, less the dummy prefix space; special pieces give no text and
        bytes that are no UTF-8 give U+FFFD."""
        data = bytearray()
        for token in ids:
            if token in _SPECIAL_IDS:
                continue
            if token < _FIRST_BYTE_ID + 256:
                data.append(token - _FIRST_BYTE_ID)
            else:
                data += self._pieces[token].encode("utf-8")
        text = data.decode("utf-8", errors="replace").replace(SPACE, " ")
        return text[1:] if text.startswith(" ") else text

    def _word(self, word: str) -> list[int]:
        known = self._words.get(word)
        if known is not None:
            return known
        ids = self._merge(self._characters(word))
        if len(word) <= _CACHED_WORD_CHARS:
            if len(self._words) >= _CACHE_ENTRIES:
                self._words.clear()
            self._words[word] = ids
        return ids

    def _characters(self, word: str) -> list[int]:
        ids: list[int] = []
        char_ids = self._char_ids
        for char in word:
            piece = char_ids.get(char)
            if piece is not None:
                ids.append(piece)
                continue
            # Byte fallback. A lone surrogate has no UTF-8 form: JavaScript writes U+FFFD.
            raw = _REPLACEMENT_BYTES if _SURROGATE.match(char) else char.encode("utf-8")
            ids.extend(_FIRST_BYTE_ID + byte for byte in raw)
        return ids

    def _merge(self, ids: list[int]) -> list[int]:
        """BPE over one word: a heap of (rank, position) keys, checked when popped."""
        n = len(ids)
        merges = self._merges
        heap: list[int] = []
        for pos in range(n - 1):
            found = merges.get(ids[pos] << _ID_BITS | ids[pos + 1])
            if found is not None:
                heap.append((found >> _ID_BITS) << _POS_BITS | pos)
        if not heap:
            return ids
        heapq.heapify(heap)
        after = list(range(1, n + 1))  # n: no next piece
        before = list(range(-1, n - 1))  # -1: no previous piece
        while heap:
            key = heapq.heappop(heap)
            pos = key & _POS_MASK
            left = ids[pos]
            right_pos = after[pos]
            if left < 0 or right_pos >= n:
                continue
            found = merges.get(left << _ID_BITS | ids[right_pos])
            # A pair that changed since it was queued has another rank (ranks are unique
            # per pair), or none: that entry is stale.
            if found is None or found >> _ID_BITS != key >> _POS_BITS:
                continue
            merged = found & _ID_MASK
            ids[pos] = merged
            ids[right_pos] = -1
            following = after[right_pos]
            after[pos] = following
            if following < n:
                before[following] = pos
                found = merges.get(merged << _ID_BITS | ids[following])
                if found is not None:
                    heapq.heappush(heap, (found >> _ID_BITS) << _POS_BITS | pos)
            previous = before[pos]
            if previous >= 0:
                found = merges.get(ids[previous] << _ID_BITS | merged)
                if found is not None:
                    heapq.heappush(heap, (found >> _ID_BITS) << _POS_BITS | previous)
        return [token for token in ids if token >= 0]


def _join_surrogate_pairs(text: str) -> str:
    # JavaScript reads a high and a low surrogate in a row as one character; Python keeps
    # them apart unless they are joined. Lone surrogates stay (see _characters).
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


class LlamaCounter(MessageCounting):
    """Counts as SillyTavern's LLaMA tokenizer does (ids without BOS); counts are kept."""

    def __init__(self, tokenizer: LlamaTokenizer, name: str = "llama (bundled)") -> None:
        self.tokenizer = tokenizer
        self._name = name
        self._counts: dict[str, int] = {}

    def count(self, text: str) -> int:
        if not text:
            return 0
        known = self._counts.get(text)
        if known is None:
            known = self.tokenizer.count(text)
            if len(self._counts) >= _CACHE_ENTRIES:
                self._counts.clear()
            self._counts[text] = known
        return known

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no BOS), for truncation."""
        return self.tokenizer.encode(text)

    def decode(self, tokens: Sequence[int]) -> str:
        """Text of token ids."""
        return self.tokenizer.decode(tokens)


def bundled_llama_counter(data_file: Path = DATA_FILE) -> LlamaCounter:
    """The shared counter over the data file ``make setup`` builds; OSError when it is
    missing, ValueError when it is damaged."""
    return _bundled(str(data_file.resolve()))


@functools.cache
def _bundled(data_file: str) -> LlamaCounter:
    return LlamaCounter(LlamaTokenizer(load_vocabulary(Path(data_file))))
