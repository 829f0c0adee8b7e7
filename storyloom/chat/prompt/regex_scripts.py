"""SillyTavern regex scripts (the regex extension's format), applied where SillyTavern applies them.

A card's ``data.extensions.regex_scripts`` rewrite text at chosen placements (user input, AI
output, world info, reasoning) in one of three phases: with neither flag the stored message
text changes (the original is kept by the caller), ``markdownOnly`` changes only what is
displayed, ``promptOnly`` only what the model is sent. Cards are written against
JavaScript's ``RegExp`` and against the extension's own replacement rules, so both are
reproduced here: ``/pattern/flags`` is parsed as SillyTavern's ``regexFromString`` does
and translated to the ``regex`` module with JavaScript's meaning (ASCII ``\\d``/``\\w``/
``\\b``, JavaScript's ``\\s``, ``$`` only at the end without ``m``, ``.`` not matching any
line terminator, ``{`` literal where it is no quantifier; without the ``u`` flag text is
matched in UTF-16 code units, case folds as JavaScript folds it and ``\\1`` with no group 1
is an octal escape: :func:`translate_js_regex`); the replacement substitutes only ``$1``,
``$<name>`` and ``{{match}}`` (each with ``trimStrings`` removed), then macros, and nothing
else - ``$&`` and ``$$`` stay literal, as in SillyTavern, which replaces through a
function. Without the ``g`` flag only the first match is replaced; after an empty match
the search moves on one character, as JavaScript's does.

A pattern that does not compile skips its script; every match runs under a time limit
(:data:`MATCH_TIMEOUT_S`), so a catastrophic pattern in a downloaded card skips its script
instead of hanging the server.
"""

from __future__ import annotations

import bisect
import functools
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from enum import IntEnum
from typing import Any, Literal

import regex
from pydantic import ValidationError

from storyloom.chat.prompt.macros import macro_spans
from storyloom.chat.store.regex_script import RegexScript
from storyloom.core.errors import FieldProblem

__all__ = [
    "MATCH_TIMEOUT_S",
    "Phase",
    "RegexPlacement",
    "RegexScript",
    "SubstituteRegex",
    "apply_regex_scripts",
    "card_regex_scripts",
    "compile_find_regex",
    "parse_regex_scripts",
    "pattern_problems",
    "run_regex_script",
    "translate_js_regex",
]

log = logging.getLogger(__name__)

MATCH_TIMEOUT_S = 0.5
"""Seconds one script may spend matching one text before it is skipped."""


class RegexPlacement(IntEnum):
    """Where a script applies (SillyTavern's ``regex_placement``; 0 and 4 are retired)."""

    USER_INPUT = 1
    AI_OUTPUT = 2
    SLASH_COMMAND = 3
    WORLD_INFO = 5
    REASONING = 6


Phase = Literal["stored", "display", "prompt"]


class SubstituteRegex(IntEnum):
    """Whether macros in ``findRegex`` are resolved first (``ESCAPED``: values regex-escaped)."""

    NONE = 0
    RAW = 1
    ESCAPED = 2


def parse_regex_scripts(
    items: Any, where: str = "regex_scripts"
) -> tuple[list[RegexScript], list[str]]:
    """The valid scripts of a JSON list, and a problem for each one skipped (naming it and why)."""
    if items is None:
        return [], []
    if not isinstance(items, list):
        return [], [f"{where}: not a list"]
    scripts: list[RegexScript] = []
    problems: list[str] = []
    for index, item in enumerate(items):
        if isinstance(item, RegexScript):
            scripts.append(item)
            continue
        if not isinstance(item, Mapping):
            problems.append(f"{where}[{index}]: not an object")
            continue
        try:
            scripts.append(RegexScript.model_validate(dict(item)))
        except ValidationError as exc:
            reasons = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(script)'}: {err['msg']}"
                for err in exc.errors()
            )
            name = item.get("scriptName") or item.get("id") or ""
            problems.append(f"{where}[{index}]{f' ({name})' if name else ''}: {reasons}")
    return scripts, problems


def pattern_problems(scripts: Sequence[RegexScript]) -> list[FieldProblem]:
    """``[index].findRegex`` of each script whose pattern does not compile.

    A pattern with macros substituted in (``substituteRegex``) is only known in a chat,
    so it is not judged here; at run time a pattern that does not compile skips its
    script and says so.
    """
    problems: list[FieldProblem] = []
    for index, script in enumerate(scripts):
        if script.substituteRegex != SubstituteRegex.NONE or not script.findRegex:
            continue
        if compile_find_regex(script.findRegex) is None:
            reason = f"{script.findRegex!r} is not a valid regular expression"
            problems.append(FieldProblem(f"[{index}].findRegex", reason))
    return problems


def card_regex_scripts(card: Mapping[str, Any]) -> list[RegexScript]:
    """The scripts a card carries, bad ones skipped.

    Accepts a CharacterDefinition JSON (``extensions.regex_scripts``), a raw V2/V3 card
    (``data.extensions.regex_scripts``) or a character snapshot (``card.extensions...``).
    """
    for holder in (card, card.get("data"), card.get("card")):
        if not isinstance(holder, Mapping):
            continue
        extensions = holder.get("extensions")
        if isinstance(extensions, Mapping) and "regex_scripts" in extensions:
            scripts, problems = parse_regex_scripts(
                extensions["regex_scripts"], "extensions.regex_scripts"
            )
            for problem in problems:
                log.warning("card regex script skipped: %s", problem)
            return scripts
    return []


def apply_regex_scripts(
    text: str,
    scripts: Sequence[RegexScript],
    *,
    placement: RegexPlacement,
    phase: Phase,
    depth: int | None = None,
    macros: Callable[[str], str] | None = None,
    is_edit: bool = False,
    problems: list[str] | None = None,
) -> str:
    """``text`` after every script that applies to this placement, phase and depth, in order.

    ``depth`` is the message's distance from the newest message along the active branch
    (0 = newest); ``None`` skips the ``minDepth``/``maxDepth`` checks, as SillyTavern does
    for text that is not a chat message. ``macros`` resolves ``{{…}}`` in replacements,
    trim strings and (per ``substituteRegex``) the pattern; without it they stay literal.
    ``is_edit``: the user edited the message, so scripts with ``runOnEdit`` off are skipped.
    Scripts skipped for a bad pattern or a timeout are reported into ``problems``.
    """
    if not text:
        return text
    result = text
    for script in scripts:
        if not _in_phase(script, phase):
            continue
        if is_edit and not script.runOnEdit:
            continue
        if depth is not None and not _depth_allows(script, depth):
            continue
        if int(placement) not in script.placement:
            continue
        result = run_regex_script(script, result, macros=macros, problems=problems)
    return result


def _in_phase(script: RegexScript, phase: Phase) -> bool:
    if phase == "display":
        return script.markdownOnly
    if phase == "prompt":
        return script.promptOnly
    return not script.markdownOnly and not script.promptOnly


def _depth_allows(script: RegexScript, depth: int) -> bool:
    if script.minDepth is not None and script.minDepth >= -1 and depth < script.minDepth:
        return False
    return not (script.maxDepth is not None and script.maxDepth >= 0 and depth > script.maxDepth)


def run_regex_script(
    script: RegexScript,
    text: str,
    *,
    macros: Callable[[str], str] | None = None,
    problems: list[str] | None = None,
) -> str:
    """One script on one text (SillyTavern's ``runRegexScript``); unchanged when it cannot run."""
    if script.disabled or not script.findRegex or not text:
        return text
    find = _find_source(script, macros)
    compiled = compile_find_regex(find)
    if compiled is None:
        _report(problems, script, f"findRegex {find!r} is not a valid regular expression")
        return text
    template = _MATCH_MACRO.sub("$0", script.replaceString)

    def substitute(match: Any) -> str:
        def group(ref: Any) -> str:
            number, name = ref.group(1), ref.group(2)
            value: str | None
            if number is not None:
                value = _numbered(match, int(number), compiled.pattern.groups, text)
            else:
                value = match.groupdict().get(name) if name in compiled.pattern.groupindex else None
            if not value:
                return ""
            for trim in script.trimStrings:
                needle = macros(trim) if macros else trim
                if needle:
                    value = value.replace(needle, "")
            return value

        replaced = _GROUP_REFERENCE.sub(group, template)
        return macros(replaced) if macros else replaced

    try:
        return compiled.replace(text, substitute)
    except TimeoutError:
        _report(problems, script, f"matching took longer than {MATCH_TIMEOUT_S} s; skipped")
        return text


def _numbered(match: Any, index: int, groups: int, text: str) -> str | None:
    """``$n`` as SillyTavern reads it: the n-th argument of the replace callback.

    Past the capture groups that argument is the match offset, then the whole input
    (a card relying on it sees the same text as in SillyTavern).
    """
    if index <= groups:
        value: str | None = match.group(index)
        return value
    if index == groups + 1:
        return str(match.start()) if match.start() else None
    if index == groups + 2:
        return text
    return None


_MATCH_MACRO = re.compile(r"\{\{match\}\}", re.IGNORECASE)
_GROUP_REFERENCE = re.compile(r"\$(\d+)|\$<([^>]+)>")


def _report(problems: list[str] | None, script: RegexScript, why: str) -> None:
    message = f"regex script {script.label!r}: {why}"
    log.warning("%s", message)
    if problems is not None:
        problems.append(message)


def _find_source(script: RegexScript, macros: Callable[[str], str] | None) -> str:
    mode = script.substituteRegex
    if macros is None or mode not in (SubstituteRegex.RAW, SubstituteRegex.ESCAPED):
        return script.findRegex
    if mode == SubstituteRegex.RAW:
        return macros(script.findRegex)
    source = script.findRegex
    out: list[str] = []
    cursor = 0
    for start, end in macro_spans(source):
        out.append(source[cursor:start])
        out.append(_escape_macro_value(macros(source[start:end])))
        cursor = end
    out.append(source[cursor:])
    return "".join(out)


_REGEX_SPECIAL = re.compile(r"[\n\r\t\v\f\0.^$*+?{}\[\]\\/|()]")
_CONTROL_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v", "\f": "\\f", "\0": "\\0"}


def _escape_macro_value(value: str) -> str:
    """SillyTavern's ``sanitizeRegexMacro``: a macro value made safe inside a pattern."""
    return _REGEX_SPECIAL.sub(lambda m: _CONTROL_ESCAPES.get(m.group(0), "\\" + m.group(0)), value)


# --- JavaScript regular expressions on the `regex` module -------------------------------


class FindRegex:
    """A compiled ``findRegex``: the translated pattern, whether it is global (``g``) and
    whether it reads UTF-16 code units (no ``u`` flag: an astral character is two)."""

    def __init__(self, pattern: Any, *, global_: bool, utf16: bool = False) -> None:
        self.pattern = pattern
        self.global_ = global_
        self.utf16 = utf16

    def replace(self, text: str, substitute: Callable[[Any], str]) -> str:
        """``String.prototype.replace`` with a function, bounded by :data:`MATCH_TIMEOUT_S`.

        Without the ``u`` flag the text is matched as JavaScript holds it, in UTF-16 code
        units, so ``.`` takes half of an emoji as there; halves left alone afterwards
        become U+FFFD (a lone surrogate cannot be stored).
        """
        units = self.utf16 and _ASTRAL.search(text) is not None
        subject = _to_code_units(text) if units else text
        # JavaScript's loop, not `regex.sub`: after an empty match the search moves on one
        # character, where Python would try a longer match at the same place first
        deadline = time.monotonic() + MATCH_TIMEOUT_S
        out: list[str] = []
        cursor = position = 0
        while position <= len(subject):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("regex match timed out")
            match = self.pattern.search(subject, position, timeout=remaining, concurrent=True)
            if match is None:
                break
            out.append(subject[cursor : match.start()])
            out.append(substitute(match))
            cursor = match.end()
            if not self.global_:
                break
            position = match.end() + (1 if match.end() == match.start() else 0)
        out.append(subject[cursor:])
        result = "".join(out)
        return _from_code_units(result) if units else result


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def _to_code_units(text: str) -> str:
    """Each character outside the BMP as its two UTF-16 surrogates."""
    return _ASTRAL.sub(lambda m: _surrogates(m.group(0)), text)


def _surrogates(char: str) -> str:
    point = ord(char) - 0x10000
    return chr(0xD800 + (point >> 10)) + chr(0xDC00 + (point & 0x3FF))


def _from_code_units(text: str) -> str:
    """Surrogate pairs joined back into characters; a lone half becomes U+FFFD."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


_REGEX_FROM_STRING = re.compile(r"(/?)([^\n\r\u2028\u2029]+)\1([a-z]*)", re.IGNORECASE)
_KNOWN_FLAGS = re.compile(r"(?!.*?(.).*?\1)[gmixXsuUAJ]+")
_SUPPORTED_FLAGS = set("gimsu")


@functools.lru_cache(maxsize=1000)
def compile_find_regex(source: str) -> FindRegex | None:
    """SillyTavern's ``regexFromString``: ``/pattern/flags`` or a bare pattern; ``None``: invalid.

    As there, flags outside the set it accepts (``y``, ``d``, upper case...) make the whole
    string the pattern, and flags of that set JavaScript rejects (``x``, ``A``...) make it
    invalid; so the flags that work are ``g``, ``i``, ``m``, ``s`` and ``u``.
    """
    found = _REGEX_FROM_STRING.search(source)
    if found is None:
        return None
    body, flags = found.group(2), found.group(3)
    if flags and not _KNOWN_FLAGS.fullmatch(flags):
        body, flags = source, ""
    if set(flags) - _SUPPORTED_FLAGS:
        return None
    try:
        # case folding (i) is spelled out by the translation: `regex`'s own differs
        compiled = regex.compile(translate_js_regex(body, flags))
    except (regex.error, ValueError, OverflowError, RecursionError):
        return None
    return FindRegex(compiled, global_="g" in flags, utf16="u" not in flags)


_LINE_TERMINATORS = "\\n\\r\\u2028\\u2029"
_DIGIT = "0-9"
_WORD = "A-Za-z0-9_"
# JavaScript's \s: WhiteSpace and LineTerminator (U+FEFF in, U+0085 and U+001C-1F out)
_SPACE = "\\t\\n\\x0b\\x0c\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
_CLASS_ESCAPES = {"d": _DIGIT, "w": _WORD, "s": _SPACE}
_QUANTIFIER = re.compile(r"\{\d+(?:,\d*)?\}")
_ESCAPE_AS_IS = set("nrtvf")
_LEGACY_OCTAL = re.compile(r"[0-3][0-7]{0,2}|[4-7][0-7]?")
_GROUP_OPENERS = ("(?:", "(?=", "(?!", "(?<=", "(?<!")
_SYNTAX_CHARACTERS = frozenset("^$\\.*+?()[]{}|/")


def translate_js_regex(pattern: str, flags: str = "") -> str:
    """A JavaScript ``RegExp`` source as an equivalent ``regex``-module pattern.

    Without the ``u`` flag the pattern is read in UTF-16 code units, as JavaScript reads
    it (the text is matched so too: :class:`FindRegex`), ``i`` folds case as JavaScript's
    canonicalisation does (a letter matches its other case only where both are ASCII or
    both are not: ``ſ`` is not ``s``, the Kelvin sign is not ``k``), and ``\\1`` with no
    group 1 is the octal escape U+0001. With ``u``, ``i`` is Unicode's simple case
    folding (``ſ`` is ``s``; the Turkish dotted and dotless i are not ``i``). Raises
    ``ValueError`` for what cannot be translated (the script is then skipped).
    """
    return _Translation(pattern, flags).run()


class _NegatedShorthand(Exception):
    """``\\D``/``\\W``/``\\S`` inside a class: the class needs rewriting as an alternation."""


class _Translation:
    def __init__(self, pattern: str, flags: str) -> None:
        self.unicode = "u" in flags
        self.pattern = pattern if self.unicode else _to_code_units(pattern)
        self.dotall = "s" in flags
        self.multiline = "m" in flags
        self.fold = "i" in flags
        self.groups, self.names = _groups(self.pattern)

    def run(self) -> str:
        pattern = self.pattern
        out: list[str] = []
        # what the last piece was, for the quantifiers JavaScript refuses ("nothing to
        # repeat"): "start" (of the pattern, a group, an alternative), "atom",
        # "assertion", "lookahead", "lookbehind", "quantified", "lazy"
        last = "start"
        groups: list[str] = []
        i = 0
        n = len(pattern)
        while i < n:
            char = pattern[i]
            quantifier = _QUANTIFIER.match(pattern, i) if char == "{" else None
            if char in "*+?" or quantifier:
                last = self.quantified(last, char)
                out.append(quantifier.group(0) if quantifier else char)
                i = quantifier.end() if quantifier else i + 1
                continue
            last = "atom"
            if char == "\\":
                if i + 1 >= n:
                    raise ValueError("pattern ends with a backslash")
                if pattern[i + 1] in "bB":
                    last = "assertion"
                piece, literal, i = self.escape(i, in_class=False)
                out.append(piece if literal is None else self.literal(literal))
            elif char == "[":
                piece, i = self.char_class(i)
                out.append(piece)
            elif char == ".":
                out.append("[\\s\\S]" if self.dotall else f"[^{_LINE_TERMINATORS}]")
                i += 1
            elif char == "^":
                out.append(f"(?:\\A|(?<=[{_LINE_TERMINATORS}]))" if self.multiline else "\\A")
                last = "assertion"
                i += 1
            elif char == "$":
                out.append(f"(?=[{_LINE_TERMINATORS}]|\\Z)" if self.multiline else "\\Z")
                last = "assertion"
                i += 1
            elif char in "{}]" and self.unicode:
                raise ValueError(f"a lone {char!r} is a syntax error with the u flag")
            elif char in "{}":
                out.append("\\" + char)
                i += 1
            elif char == "(":
                opener = next((o for o in _GROUP_OPENERS if pattern.startswith(o, i)), "(")
                if opener == "(" and pattern.startswith("(?<", i):
                    close = pattern.find(">", i)
                    if close < 0:
                        raise ValueError("unterminated group name")
                    out.append("(?P<" + pattern[i + 3 : close] + ">")
                    i = close + 1
                else:
                    out.append(opener)
                    i += len(opener)
                groups.append(
                    "lookahead"
                    if opener in ("(?=", "(?!")
                    else "lookbehind"
                    if opener in ("(?<=", "(?<!")
                    else "atom"
                )
                last = "start"
            elif char == ")":
                if not groups:
                    raise ValueError("unmatched ')'")
                last = groups.pop()
                out.append(char)
                i += 1
            elif char == "|":
                out.append(char)
                last = "start"
                i += 1
            else:
                out.append(self.literal(ord(char)))
                i += 1
        return "".join(out)

    def quantified(self, last: str, char: str) -> str:
        """What ``last`` becomes under a quantifier; ``ValueError`` where JavaScript says
        "nothing to repeat" (a lookahead may be repeated only without ``u``)."""
        if char == "?" and last == "quantified":
            return "lazy"
        if last in ("start", "assertion", "lookbehind", "quantified", "lazy") or (
            last == "lookahead" and self.unicode
        ):
            raise ValueError("nothing to repeat")
        return "quantified"

    def literal(self, point: int) -> str:
        """One character to match, with its other cases under ``i`` without ``u``."""
        variants = _case_variants(point, unicode=self.unicode) if self.fold else ()
        if not variants:
            return _escaped(point)
        return "[" + "".join(_escaped(p) for p in (point, *variants)) + "]"

    def escape(self, i: int, *, in_class: bool) -> tuple[str, int | None, int]:
        """The escape at ``pattern[i]`` (a backslash): a translated piece, or the one
        character it stands for (``literal``), and the next index."""
        pattern = self.pattern
        char = pattern[i + 1]
        after = i + 2
        if char in _CLASS_ESCAPES:
            members = self.class_escape(char)
            return (members if in_class else f"[{members}]"), None, after
        if char in "DWS":
            if in_class:
                raise _NegatedShorthand(char)
            return f"[^{self.class_escape(char.lower())}]", None, after
        if char in "bB":
            if in_class:
                return ("", 0x08, after) if char == "b" else ("", ord("B"), after)
            if self.fold and self.unicode:  # ſ and the Kelvin sign are word characters
                word = self.class_escape("w")
                edge = f"(?:(?<=[{word}])(?![{word}])|(?<![{word}])(?=[{word}]))"
                return (edge if char == "b" else f"(?!{edge})"), None, after
            return f"(?a:\\{char})", None, after
        if char in _ESCAPE_AS_IS:
            return "\\" + char, None, after
        if char == "0" and not (after < len(pattern) and pattern[after].isdigit()):
            return "", 0, after
        if char.isdigit():
            return self.decimal_escape(i, in_class=in_class)
        if char == "k" and pattern.startswith("<", after):
            close = pattern.find(">", after)
            name = pattern[after + 1 : close] if close > 0 else ""
            if name in self.names:
                return self.reference(name, f"(?P={name})"), None, close + 1
            if self.unicode or self.names:
                raise ValueError(f"\\k<{name}>: there is no group of that name")
            return "", ord("k"), after  # no named groups at all: \k is just "k"
        if char == "k" and (self.unicode or self.names):
            raise ValueError("\\k needs a <group name>")
        if (
            char == "c"
            and after < len(pattern)
            and pattern[after].isascii()
            and pattern[after].isalpha()
        ):
            return "", ord(pattern[after]) % 32, after + 1
        if char == "x":
            hex_digits = pattern[after : after + 2]
            if re.fullmatch(r"[0-9A-Fa-f]{2}", hex_digits):
                return "", int(hex_digits, 16), after + 2
            if self.unicode:
                raise ValueError("\\x needs two hex digits with the u flag")
            return "", ord("x"), after
        if char == "u":
            braced = re.match(r"\{([0-9A-Fa-f]{1,6})\}", pattern[after:]) if self.unicode else None
            if braced:
                return "", int(braced.group(1), 16), after + braced.end()
            hex_digits = pattern[after : after + 4]
            if re.fullmatch(r"[0-9A-Fa-f]{4}", hex_digits):
                return "", int(hex_digits, 16), after + 4
            if self.unicode:
                raise ValueError("\\u needs four hex digits with the u flag")
            return "", ord("u"), after
        if char in "pP" and self.unicode and pattern.startswith("{", after):
            close = pattern.find("}", after)
            if close < 0:
                raise ValueError("unterminated \\p{...}")
            return pattern[i : close + 1], None, close + 1
        if self.unicode and char not in _SYNTAX_CHARACTERS and not (in_class and char == "-"):
            raise ValueError(f"\\{char} is a syntax error with the u flag")
        # an identity escape: \a is just "a", \. a dot
        return "", ord(char), after

    def decimal_escape(self, i: int, *, in_class: bool) -> tuple[str, int | None, int]:
        """``\\N``: a backreference where group N exists, else (without ``u``) a legacy
        octal escape, or the digit itself for 8 and 9."""
        pattern = self.pattern
        end = i + 1
        while end < len(pattern) and pattern[end].isdigit():
            end += 1
        digits = pattern[i + 1 : end]
        if not in_class and int(digits) <= self.groups:
            return self.reference(digits, f"\\{digits}"), None, end
        if self.unicode:
            raise ValueError(f"\\{digits}: there is no group {digits}")
        octal = _LEGACY_OCTAL.match(digits)
        if octal is None:  # \8, \9
            return "", ord(digits[0]), i + 2
        return "", int(octal.group(0), 8), i + 1 + octal.end()

    def class_escape(self, letter: str) -> str:
        """The members of ``\\d``, ``\\w`` or ``\\s``; under ``i`` with ``u``, ``\\w``
        also holds what folds into it (``ſ``, the Kelvin sign), as in JavaScript."""
        members = _CLASS_ESCAPES[letter]
        if letter == "w" and self.fold and self.unicode:
            members += "".join(_escaped(p) for p in sorted(_word_variants()))
        return members

    def reference(self, group: str, written: str) -> str:
        """A backreference: a group that has not matched (yet) matches the empty string
        in JavaScript, where Python's fails; under ``i`` without ``u`` it folds case."""
        matched = f"(?i:{written})" if self.fold else written
        return f"(?({group}){matched}|)"

    def char_class(self, i: int) -> tuple[str, int]:
        """Translate the class starting at ``pattern[i]`` (``[``)."""
        pattern = self.pattern
        start = i
        i += 1
        negated = pattern.startswith("^", i)
        if negated:
            i += 1
        if pattern.startswith("]", i):  # [] matches nothing, [^] matches anything
            return ("[\\s\\S]" if negated else "(?!)"), i + 1
        # a member is a character (its code point) or a translated set such as \d;
        # the flag marks a dash as written (a range), not escaped
        atoms: list[tuple[int | str, bool]] = []
        shorthands: list[str] = []
        while i < len(pattern) and pattern[i] != "]":
            if pattern[i] == "\\":
                if i + 1 >= len(pattern):
                    raise ValueError("pattern ends with a backslash")
                try:
                    piece, literal, i = self.escape(i, in_class=True)
                except _NegatedShorthand as negative:
                    shorthands.append(str(negative))
                    i += 2
                    continue
                atoms.append((piece if literal is None else literal, False))
            else:
                atoms.append((ord(pattern[i]), pattern[i] == "-"))
                i += 1
        if i >= len(pattern):
            raise ValueError(f"unterminated character class at {start}")
        i += 1
        members: list[int | str] = []
        ranges: list[tuple[int, int]] = []
        j = 0
        while j < len(atoms):
            low = atoms[j][0]
            high = atoms[j + 2][0] if j + 2 < len(atoms) else None
            if (
                self.unicode
                and j + 2 < len(atoms)
                and atoms[j + 1][1]
                and not (isinstance(low, int) and isinstance(high, int))
            ):
                raise ValueError("a class escape cannot bound a range with the u flag")
            if isinstance(low, int) and isinstance(high, int) and atoms[j + 1][1]:
                if low > high:
                    raise ValueError("range out of order in character class")
                ranges.append((low, high))
                j += 3
            else:  # (a dash next to \d is a character, as JavaScript reads it without u)
                members.append(low)
                j += 1
        body = self.class_body(members, ranges)
        if not shorthands:
            return ("[^" if negated else "[") + body + "]", i
        outside = [f"[^{self.class_escape(s.lower())}]" for s in shorthands]
        if not negated:
            return "(?:" + "|".join(([f"[{body}]"] if body else []) + outside) + ")", i
        # [^…\D…]: not a listed character and, for each \D / \W / \S, one of its set
        inside = [f"(?=[{self.class_escape(s.lower())}])" for s in shorthands]
        return "(?:" + (f"(?![{body}])" if body else "") + "".join(inside) + "[\\s\\S])", i

    def class_body(self, members: list[int | str], ranges: list[tuple[int, int]]) -> str:
        parts: list[str] = []
        points: list[int] = []
        for member in members:
            if isinstance(member, int):
                points.append(member)
                parts.append(_escaped(member))
            else:
                parts.append(member)
        for low, high in ranges:
            parts.append(f"{_escaped(low)}-{_escaped(high)}")
        if self.fold:
            extra = {v for p in points for v in _case_variants(p, unicode=self.unicode)}
            for low, high in ranges:
                extra.update(_case_variants_in(low, high, unicode=self.unicode))
            parts.extend(_escaped(point) for point in sorted(extra))
        return "".join(parts)


def _escaped(point: int) -> str:
    """A code point as a pattern piece that means exactly that character (in a class too)."""
    char = chr(point)
    if char.isalnum() and char.isascii():
        return char
    if point < 0x100:
        return f"\\x{point:02x}"
    if point < 0x10000:
        return f"\\u{point:04x}"
    return f"\\U{point:08x}"


def _groups(pattern: str) -> tuple[int, set[str]]:
    """How many capturing groups ``pattern`` has (``(…)`` and ``(?<name>…)``), and the
    names of the named ones."""
    count = 0
    names: set[str] = set()
    i = 0
    in_class = False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "(" and (
            not pattern.startswith("(?", i)
            or (pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i))
        ):
            count += 1
            if pattern.startswith("(?<", i):
                close = pattern.find(">", i)
                name = pattern[i + 3 : close] if close > 0 else ""
                if name in names:
                    raise ValueError(f"two groups are named {name!r}")
                names.add(name)
        i += 1
    return count, names


@functools.cache
def _case_classes(unicode: bool) -> dict[int, tuple[int, ...]]:
    """For each character with other cases under JavaScript's ``i``: those cases.

    Without ``u`` JavaScript canonicalises each UTF-16 unit to its upper case, unless that
    is several characters or would turn a non-ASCII character into an ASCII one; with
    ``u`` it uses simple case folding (planes 0 and 1 hold every cased letter). Characters
    with the same canonical form match each other.
    """
    by_canonical: dict[int, list[int]] = {}
    for point in range(0x20000 if unicode else 0x10000):
        char = chr(point)
        canonical = point
        if unicode:
            # simple folding: the full one where that is one character, else (ẞ → ß,
            # ᾈ → ᾀ) the lower case where that is
            folded = char.casefold()
            if len(folded) != 1:
                folded = char.lower()
            if len(folded) == 1:
                canonical = ord(folded)
        else:
            upper = char.upper()
            if len(upper) == 1 and not (point >= 128 and ord(upper) < 128):
                canonical = ord(upper)
        by_canonical.setdefault(canonical, []).append(point)
    classes: dict[int, tuple[int, ...]] = {}
    for members in by_canonical.values():
        if len(members) > 1:
            for point in members:
                classes[point] = tuple(m for m in members if m != point)
    return classes


@functools.cache
def _word_variants() -> frozenset[int]:
    """Characters outside ``[A-Za-z0-9_]`` that fold into it under ``u`` and ``i``."""
    word = {ord(c) for c in "0123456789_"} | set(range(65, 91)) | set(range(97, 123))
    return frozenset(v for p in word for v in _case_variants(p, unicode=True)) - word


@functools.cache
def _cased_points(unicode: bool) -> list[int]:
    return sorted(_case_classes(unicode))


def _case_variants(point: int, *, unicode: bool) -> tuple[int, ...]:
    return _case_classes(unicode).get(point, ())


def _case_variants_in(low: int, high: int, *, unicode: bool) -> set[int]:
    """The other cases of every character from ``low`` to ``high``."""
    points = _cased_points(unicode)
    found: set[int] = set()
    for index in range(bisect.bisect_left(points, low), bisect.bisect_right(points, high)):
        found.update(_case_variants(points[index], unicode=unicode))
    return found
