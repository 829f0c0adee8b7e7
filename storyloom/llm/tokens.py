"""Offline token counting with ``bpe-openai`` (its BPE tables ship inside the wheel).

Budgets only need to be close for non-OpenAI models (Llama, Qwen, Mistral tokenise
differently), so an unknown model falls back to an OpenAI encoding rather than failing:

1. an explicit encoding (``ChatEndpoint.token_encoding``) wins;
2. a model name ``bpe_openai`` knows gives its encoding (``gpt-4`` -> ``cl100k_base``);
3. names of the newer OpenAI families (``gpt-4o``, ``gpt-4.1``, ``gpt-4.5``, ``gpt-5``,
   ``gpt-oss``, ``o1``, ``o3``, ``o4``) get ``o200k_base``;
4. anything else gets ``cl100k_base``.
"""

from __future__ import annotations

import functools
import re
import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

__all__ = [
    "DEFAULT_ENCODING",
    "TOKENS_PER_MESSAGE",
    "TOKENS_PER_NAME",
    "TOKENS_REPLY_PRIMER",
    "MessageCounting",
    "TokenCounter",
    "encoding_for_model",
    "token_counter",
]

DEFAULT_ENCODING = "cl100k_base"

#: Chat format overhead, as OpenAI documents it for gpt-3.5-turbo-0613 and later models:
#: every message costs 3 tokens (``<|start|>{role}<|message|>`` ... ``<|end|>``) besides
#: its text, a ``name`` field 1 more, and the reply is primed with 3
#: (``<|start|>assistant<|message|>``).
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
TOKENS_REPLY_PRIMER = 3

_O200K_FAMILIES = re.compile(
    r"gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|chatgpt-4o|(?:^|[^a-z0-9])o[134](?:$|[^a-z0-9])"
)

# bpe_openai refuses inputs over 1M characters or 200k tokens: longer text is counted in
# pieces. 40k characters stay under 200k tokens even at one token per UTF-8 byte.
_PIECE_CHARS = 40_000


@functools.cache
def _bpe() -> Any:
    # Imported on first use: loading the package reads its model tables (about 0.6 s),
    # which `import storyloom.llm` should not pay for callers that never count tokens.
    with warnings.catch_warnings():
        # bpe_openai reads its tables with importlib.resources.open_binary (deprecated).
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai
    return bpe_openai


def encoding_for_model(model: str, encoding: str | None = None) -> str:
    """The encoding name used for ``model`` (see the module docstring for the rule)."""
    if encoding:
        return encoding
    name = model.strip().lower()
    for candidate in (name, name.rsplit("/", 1)[-1]):
        try:
            known: str = _bpe().encoding_name_for_model(candidate)
            return known
        except KeyError:
            continue
    if _O200K_FAMILIES.search(name):
        return "o200k_base"
    return DEFAULT_ENCODING


_LOAD_LOCK = threading.Lock()


@functools.cache
def _encoding(name: str) -> Any:
    # Building an encoding parses its rank table (tenths of a second): once per process.
    bpe = _bpe()
    with _LOAD_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            return bpe.get_encoding(name)
        except Exception as exc:
            known = ", ".join(bpe.list_encoding_names())
            raise ValueError(f"unknown token encoding {name!r}; use one of {known}") from exc


def _pieces(text: str) -> Iterator[str]:
    start = 0
    while start < len(text):
        end = start + _PIECE_CHARS
        if end < len(text):
            # Cut at whitespace so no word is split (that would change the count).
            space = text.rfind(" ", start + _PIECE_CHARS // 2, end)
            end = space if space > start else end
        yield text[start:end]
        start = end


_COUNT_CACHE_ENTRIES = 20_000
"""Texts whose counts a counter keeps (then it starts over)."""


class MessageCounting:
    """Chat-message counting on top of a ``count(text)``: OpenAI's per-message rule."""

    _name: str = "unnamed"

    @property
    def name(self) -> str:
        """Which tokenizer counts, for people (the prompt inspector shows it)."""
        return self._name

    def count(self, text: str) -> int:
        raise NotImplementedError

    def count_message(self, message: Mapping[str, Any]) -> int:
        """Tokens one chat message costs, format overhead included (no reply primer)."""
        total = TOKENS_PER_MESSAGE
        for key, value in message.items():
            if key == "content":
                total += self._count_content(value)
            elif key == "tool_calls" and isinstance(value, list):
                for call in value:
                    function = call.get("function") if isinstance(call, dict) else None
                    if isinstance(function, dict):
                        total += self.count(str(function.get("name") or ""))
                        total += self.count(str(function.get("arguments") or ""))
            elif isinstance(value, str):
                total += self.count(value)
                if key == "name":
                    total += TOKENS_PER_NAME
        return total

    def count_messages(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Tokens a chat request's messages cost, by OpenAI's rule.

        Each message: 3 + the tokens of every string field (role, content, name, ...)
        + 1 if it has a ``name``; then 3 for the primed reply. Content given as a list of
        parts counts its text parts; tool calls count their name and arguments. Exact for
        OpenAI's plain-text chat models, an estimate elsewhere.
        """
        if not messages:
            return 0
        return sum(self.count_message(m) for m in messages) + TOKENS_REPLY_PRIMER

    def _count_content(self, content: Any) -> int:
        if isinstance(content, str):
            return self.count(content)
        if isinstance(content, list):
            total = 0
            for part in content:
                if isinstance(part, str):
                    total += self.count(part)
                elif isinstance(part, dict) and isinstance(part.get("text"), str):
                    total += self.count(part["text"])
            return total
        return 0


class TokenCounter(MessageCounting):
    """Counts tokens with one encoding. Get one from :func:`token_counter` (cached)."""

    def __init__(self, encoding_name: str) -> None:
        self.encoding_name = encoding_name
        self._name = f"openai {encoding_name}"
        self._encoding = _encoding(encoding_name)
        # A chat counts the same history messages every turn: their counts are kept.
        self._counts: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"TokenCounter({self.encoding_name!r})"

    def count(self, text: str) -> int:
        """Tokens in ``text``; special-token strings such as ``<|endoftext|>`` count as text."""
        if not text:
            return 0
        known = self._counts.get(text)
        if known is not None:
            return known
        if len(text) <= _PIECE_CHARS:
            count = len(self._encoding.encode_ordinary(text))
        else:
            count = sum(len(self._encoding.encode_ordinary(piece)) for piece in _pieces(text))
        if len(self._counts) >= _COUNT_CACHE_ENTRIES:
            self._counts.clear()
        self._counts[text] = count
        return count

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (for truncation); special-token strings count as text."""
        ids: list[int] = []
        for piece in _pieces(text) if len(text) > _PIECE_CHARS else (text,):
            ids.extend(self._encoding.encode_ordinary(piece))
        return ids

    def decode(self, tokens: Sequence[int]) -> str:
        """Text of token ids."""
        text: str = self._encoding.decode(list(tokens))
        return text


_COUNTERS: dict[str, TokenCounter] = {}


def token_counter(model: str, encoding: str | None = None) -> TokenCounter:
    """The (shared, cached) counter for ``model``; ``encoding`` overrides the choice.

    Raises ``ValueError`` for an encoding name ``bpe_openai`` does not have.
    """
    name = encoding_for_model(model, encoding)
    counter = _COUNTERS.get(name)
    if counter is None:
        counter = _COUNTERS.setdefault(name, TokenCounter(name))
    return counter
