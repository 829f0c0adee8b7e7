"""Every entry's keys, matched at once.

Plain keys of all entries go into one Aho–Corasick automaton (``pyahocorasick``) over
lower-cased text: one pass over a text finds every key in it, however many entries there
are. Case-sensitive keys ride in the same automaton and are compared with the original
text on a hit (a second automaton over the original text serves the rare text whose
length lower-casing changes). A key is registered as a *slot*: (case mode, text,
whole-word or substring); entries sharing a key share its slot.

Matching follows SillyTavern's ``matchKeys``:

- case-insensitive keys match the lower-cased text;
- with whole words on, a key without spaces must not touch a word character on either
  side (SillyTavern's ``(?:^|\\W)key(?:$|\\W)``); a key with spaces matches as a substring.
  Word characters are JavaScript's: ASCII letters, digits and ``_``. So a Chinese key
  matches between Chinese characters and punctuation (``龙`` in ``巨龙飞``, ``AI`` in
  ``我是AI助手``) but not next to an ASCII letter or digit (``龙`` in ``a龙``), and
  ``caf`` is a whole word of ``café``, all as in SillyTavern;
- keys written ``/pattern/flags`` are regular expressions (``regex`` module); they ignore
  the case and whole-word settings, like in SillyTavern.

A regex key's longest plain run of characters (``gon`` in ``/dra+gon/i``) is added to the
automaton too: a text without it cannot match, so the regex is not run on it. Texts with
characters that case-fold to ASCII letters without lower-casing to them (``ſ``, ``K``,
``İ``, ``ı``) turn that shortcut off.

Where storyloom differs: an invalid regular expression raises :class:`RegexKeyError`
instead of silently becoming plain text; the flags ``g``, ``u`` and ``y`` change nothing
here; patterns run with Python's ``regex`` module, whose syntax is JavaScript's for the
patterns lorebooks use.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from typing import Any

import regex

from storyloom.knowledge.caiu import MAX_KEY_CHARS

# pyahocorasick ships no type information; loading it this way keeps mypy strict quiet.
ahocorasick: Any = importlib.import_module("ahocorasick")
# The standard parser finds the literal text a regex needs (it has no public API).
_RE_PARSER: Any = importlib.import_module("re._parser")
_RE_CONSTANTS: Any = importlib.import_module("re._constants")
# Non-ASCII characters that case-insensitive matching equates with ASCII letters: in a
# text with one of them, lower-casing does not show every case-insensitive match.
_FOLDS_TO_ASCII = re.compile("[\u017f\u212a\u0130\u0131]")
_MIN_LITERAL = 3

#: JavaScript's ``\w`` (no ``u`` flag): what may not touch a whole-word key.
WORD_CHAR_CLASS = r"[A-Za-z0-9_]"
_WORD_CHAR = re.compile(WORD_CHAR_CLASS)
_WORD_CACHE: dict[str, bool] = {}

# SillyTavern's parseRegexFromString: /pattern/flags, every inner "/" escaped.
_REGEX_KEY = re.compile(r"\A/([\s\S]+?)/([gimsuy]*)\Z")
_UNESCAPED_SLASH = re.compile(r"(?:^|[^\\])/")
_FLAGS = {"i": regex.IGNORECASE, "s": regex.DOTALL, "m": regex.MULTILINE}


class UnusableKeyError(ValueError):
    """A key the matcher refuses; the activation engine reports it and ignores the key."""


class RegexKeyError(UnusableKeyError):
    """A ``/pattern/flags`` key whose pattern does not compile."""


class KeyTooLongError(UnusableKeyError):
    """A key longer than :data:`MAX_KEY_CHARS`.

    The models refuse such keys already; this guard holds whatever path a key takes,
    because pyahocorasick's C code overflows the stack (the process dies) building an
    automaton with a key of some 500,000 characters.
    """


def _check_length(key: str) -> None:
    if len(key) > MAX_KEY_CHARS:
        raise KeyTooLongError(
            f"a key of {len(key)} characters is longer than the limit ({MAX_KEY_CHARS})"
        )


def is_word_char(char: str) -> bool:
    """True for a character that may not touch a whole-word key."""
    known = _WORD_CACHE.get(char)
    if known is None:
        known = _WORD_CACHE[char] = _WORD_CHAR.match(char) is not None
    return known


def needs_word_boundaries(key: str) -> bool:
    """Whether whole-word mode checks boundaries for ``key`` (else it is a substring):
    SillyTavern splits the key on whitespace and checks boundaries for a single word."""
    return not any(char.isspace() for char in key)


def parse_regex_key(key: str) -> tuple[str, str] | None:
    """``(pattern, flags)`` when ``key`` is written ``/pattern/flags``, else None."""
    match = _REGEX_KEY.match(key)
    if match is None or _UNESCAPED_SLASH.search(match.group(1)):
        return None
    return match.group(1), match.group(2)


def compile_regex_key(pattern: str, flags: str) -> regex.Pattern[str]:
    """Compile a regex key; raises :class:`RegexKeyError` with the reason."""
    options = 0
    for flag in flags:
        options |= _FLAGS.get(flag, 0)
    try:
        return regex.compile(pattern, options)
    except (regex.error, ValueError, OverflowError) as exc:
        raise RegexKeyError(f"invalid regular expression /{pattern}/{flags}: {exc}") from None


def required_literal(pattern: str, flags: str) -> tuple[str, bool] | None:
    """A text every match of the regex contains, and whether it is case-insensitive.

    The longest run of plain characters at the top level of the pattern (3 or more);
    None when there is none or the pattern is beyond the standard parser.
    """
    try:
        parsed = _RE_PARSER.parse(pattern, re.IGNORECASE if "i" in flags else 0)
    except Exception:  # any syntax the standard parser lacks: no prefilter
        return None
    ignore_case = bool(parsed.state.flags & re.IGNORECASE)
    literal_op = _RE_CONSTANTS.LITERAL
    best = ""
    run: list[str] = []
    for op, argument in [*parsed.data, (None, None)]:
        if op is literal_op:
            run.append(chr(argument))
            continue
        if len(run) > len(best):
            best = "".join(run)
        run = []
    if len(best) < _MIN_LITERAL or (ignore_case and not best.isascii()):
        return None
    if "\n" in best or "\x01" in best:
        # The scan text joins its parts with "\n\x01": such a literal may span two parts,
        # which are scanned for literals one by one.
        return None
    return (best.lower() if ignore_case else best), ignore_case


def folds_oddly(text: str) -> bool:
    """Whether ``text`` defeats the case-insensitive literal prefilter of regex keys."""
    return not text.isascii() and _FOLDS_TO_ASCII.search(text) is not None


@dataclass(frozen=True, slots=True)
class Slot:
    """One distinct plain key as matched: its text (lower-cased unless case-sensitive)."""

    text: str
    case_sensitive: bool
    whole_word: bool


class KeywordMatcher:
    """Plain keys in two Aho–Corasick automata; regex keys compiled beside them.

    Add every key, call :meth:`build` once, then scan texts. A scan reports slot ids.
    """

    def __init__(self, regex_timeout: float = 0.25) -> None:
        self.slots: list[Slot] = []
        self.regexes: list[regex.Pattern[str]] = []
        #: Per regex: the slot of a literal every match contains, or -1. A text without
        #: that slot cannot match the regex, so it need not be searched.
        self.regex_literals: list[int] = []
        self.regex_timeout = regex_timeout
        self._slot_ids: dict[Slot, int] = {}
        self._regex_ids: dict[tuple[str, str], int] = {}
        # Lower-cased pattern -> [length, substring slot, whole-word slot, {cased: [sub, ww]}].
        # Case-sensitive keys ride in the same automaton and are checked against the
        # original text on a hit, so one pass serves both case modes.
        self._lowered: dict[str, list[Any]] = {}
        # Case-sensitive keys: text -> [length, substring slot, whole-word slot]; scanned on
        # their own only when lower-casing changes a length (then positions disagree).
        self._cased: dict[str, list[int]] = {}
        self._cased_odd = False
        self._automaton: Any = None
        self._cased_automaton: Any = None

    def add_plain(self, key: str, *, case_sensitive: bool, whole_words: bool) -> int:
        """Register a plain key; returns its slot id (shared with identical keys).

        Raises :class:`KeyTooLongError` for a key past :data:`MAX_KEY_CHARS`.
        """
        _check_length(key)
        text = key if case_sensitive else key.lower()
        slot = Slot(text, case_sensitive, whole_words and needs_word_boundaries(text))
        slot_id = self._slot_ids.get(slot)
        if slot_id is not None:
            return slot_id
        slot_id = self._slot_ids[slot] = len(self.slots)
        self.slots.append(slot)
        mode = 2 if slot.whole_word else 1
        if case_sensitive:
            self._cased.setdefault(text, [len(text), -1, -1])[mode] = slot_id
            lowered = text.lower()
            if len(lowered) != len(text):
                self._cased_odd = True
                return slot_id
            record = self._lowered.setdefault(lowered, [len(lowered), -1, -1, {}])
            record[3].setdefault(text, [-1, -1])[mode - 1] = slot_id
        else:
            self._lowered.setdefault(text, [len(text), -1, -1, {}])[mode] = slot_id
        return slot_id

    def add_regex(self, key: str) -> int | None:
        """Register ``key`` if it is a ``/regex/``: its regex id, or None for a plain key.

        Raises :class:`RegexKeyError` when it looks like a regex but does not compile, and
        :class:`KeyTooLongError` for any key past :data:`MAX_KEY_CHARS`.
        """
        _check_length(key)
        parsed = parse_regex_key(key)
        if parsed is None:
            return None
        regex_id = self._regex_ids.get(parsed)
        if regex_id is None:
            compiled = compile_regex_key(*parsed)
            regex_id = self._regex_ids[parsed] = len(self.regexes)
            self.regexes.append(compiled)
            literal = required_literal(*parsed)
            self.regex_literals.append(
                -1
                if literal is None
                else self.add_plain(literal[0], case_sensitive=not literal[1], whole_words=False)
            )
        return regex_id

    def build(self) -> None:
        """Make the automata; call once after the last key was added."""
        if self._lowered:
            automaton = ahocorasick.Automaton()
            for text, (length, substring, whole_word, cased) in self._lowered.items():
                variants = tuple((k, sub, ww) for k, (sub, ww) in cased.items()) or None
                automaton.add_word(text, (length, substring, whole_word, variants))
            automaton.make_automaton()
            self._automaton = automaton
        if self._cased:
            automaton = ahocorasick.Automaton()
            for text, (length, substring, whole_word) in self._cased.items():
                automaton.add_word(text, (length, substring, whole_word, None))
            automaton.make_automaton()
            self._cased_automaton = automaton

    def scan_first(self, text: str, index: int, first: dict[int, int]) -> None:
        """Record ``index`` for every slot found in ``text`` and not yet in ``first``.

        Scanning texts in order (newest message first) leaves each slot's first index.
        """
        lowered = text.lower()
        same_length = len(lowered) == len(text)
        if self._automaton is not None:
            _scan(self._automaton, lowered, text if same_length else None, index, first)
        if self._cased_automaton is not None and (self._cased_odd or not same_length):
            _scan(self._cased_automaton, text, None, index, first)

    def scan(self, text: str) -> set[int]:
        """The slots found in ``text``."""
        found: dict[int, int] = {}
        self.scan_first(text, 0, found)
        return set(found)

    def find(self, slot_id: int, text: str) -> tuple[int, int] | None:
        """Where ``slot_id`` first matches in ``text`` (start, end), for explanations.

        Positions are in ``text.lower()`` for case-insensitive slots (the same as in
        ``text`` unless lower-casing changed a character's length)."""
        slot = self.slots[slot_id]
        haystack = text if slot.case_sensitive else text.lower()
        start = haystack.find(slot.text)
        while start >= 0:
            end = start + len(slot.text)
            if not slot.whole_word or _bounded(haystack, start, end - 1):
                return start, end
            start = haystack.find(slot.text, start + 1)
        return None

    def regex_search(self, regex_id: int, haystack: str) -> tuple[int, int] | None:
        """Span of the first match of regex ``regex_id``; a timeout counts as no match."""
        try:
            match = self.regexes[regex_id].search(haystack, timeout=self.regex_timeout)
        except TimeoutError:
            return None
        return match.span() if match is not None else None


def _bounded(text: str, start: int, end: int) -> bool:
    return (start == 0 or not is_word_char(text[start - 1])) and (
        end + 1 == len(text) or not is_word_char(text[end + 1])
    )


def _scan(
    automaton: Any, text: str, original: str | None, index: int, first: dict[int, int]
) -> None:
    """One automaton pass; ``original`` (same length as ``text``) checks cased variants."""
    last = len(text) - 1
    cache = _WORD_CACHE
    for end, (length, substring, whole_word, cased) in automaton.iter(text):
        bounded: bool | None = None
        if substring >= 0 and substring not in first:
            first[substring] = index
        if whole_word >= 0 and whole_word not in first:
            bounded = _bounded_at(text, end - length + 1, end, last, cache)
            if bounded:
                first[whole_word] = index
        if cased is None or original is None:
            continue
        piece = original[end - length + 1 : end + 1]
        for variant, variant_substring, variant_whole in cased:
            if piece != variant:
                continue
            if variant_substring >= 0 and variant_substring not in first:
                first[variant_substring] = index
            if variant_whole >= 0 and variant_whole not in first:
                if bounded is None:
                    bounded = _bounded_at(text, end - length + 1, end, last, cache)
                if bounded:
                    first[variant_whole] = index


def _bounded_at(text: str, start: int, end: int, last: int, cache: dict[str, bool]) -> bool:
    if start > 0:
        char = text[start - 1]
        word = cache.get(char)
        if word is None:
            word = is_word_char(char)
        if word:
            return False
    if end < last:
        char = text[end + 1]
        word = cache.get(char)
        if word is None:
            word = is_word_char(char)
        if word:
            return False
    return True
