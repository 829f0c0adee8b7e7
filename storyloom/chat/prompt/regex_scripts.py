"""SillyTavern regex scripts (the regex extension's format), applied where SillyTavern applies them.

A card's ``data.extensions.regex_scripts`` rewrite text at chosen placements (user input, AI
output, world info, reasoning) in one of three phases: with neither flag the stored message
text changes (the original is kept by the caller), ``markdownOnly`` changes only what is
displayed, ``promptOnly`` only what the model is sent. Cards are written against
JavaScript's ``RegExp`` and against the extension's own replacement rules, so both are
reproduced here: ``/pattern/flags`` is parsed as SillyTavern's ``regexFromString`` does
and translated to the ``regex`` module (ASCII ``\\d``/``\\w``/``\\b``, ``$`` only at the end
without ``m``, ``.`` not matching any line terminator, ``{`` literal where it is no
quantifier...); the replacement substitutes only ``$1``, ``$<name>`` and ``{{match}}``
(each with ``trimStrings`` removed), then macros, and nothing else - ``$&`` and ``$$`` stay
literal, as in SillyTavern, which replaces through a function. Without the ``g`` flag only
the first match is replaced.

A pattern that does not compile skips its script; every match runs under a time limit
(:data:`MATCH_TIMEOUT_S`), so a catastrophic pattern in a downloaded card skips its script
instead of hanging the server.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from enum import IntEnum
from typing import Any, Literal

import regex
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from storyloom.chat.prompt.macros import macro_spans

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


class RegexScript(BaseModel):
    """One script, with SillyTavern's field names; unknown fields are kept."""

    model_config = ConfigDict(extra="allow")

    id: str = ""
    scriptName: str = ""
    findRegex: str
    replaceString: str = ""
    trimStrings: list[str] = Field(default_factory=list)
    placement: list[int] = Field(default_factory=list)
    disabled: bool = False
    markdownOnly: bool = False
    promptOnly: bool = False
    runOnEdit: bool = True
    substituteRegex: int = 0
    minDepth: int | None = None
    maxDepth: int | None = None

    @field_validator("id", "scriptName", "replaceString", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return "" if value is None else value

    @field_validator("trimStrings", "placement", mode="before")
    @classmethod
    def _none_is_no_list(cls, value: Any) -> Any:
        return [] if value is None else value

    @field_validator("disabled", "markdownOnly", "promptOnly", mode="before")
    @classmethod
    def _none_is_false(cls, value: Any) -> Any:
        return False if value is None else value

    @field_validator("runOnEdit", mode="before")
    @classmethod
    def _none_is_true(cls, value: Any) -> Any:
        return True if value is None else value

    @field_validator("substituteRegex", mode="before")
    @classmethod
    def _substitute_mode(cls, value: Any) -> Any:
        # Older SillyTavern saved a boolean here (true: substitute macros raw).
        if value is None:
            return 0
        if isinstance(value, bool):
            return int(value)
        return value

    @field_validator("minDepth", "maxDepth", mode="before")
    @classmethod
    def _depth(cls, value: Any) -> Any:
        # The editor stores null, a number, or whatever was typed; non-numbers mean "no limit".
        if value is None or isinstance(value, bool):
            return None
        if isinstance(value, float):
            return int(value) if value == value and abs(value) != float("inf") else None
        if isinstance(value, str):
            text = value.strip()
            try:
                return int(float(text)) if text else None
            except ValueError:
                return None
        return value

    @property
    def label(self) -> str:
        return self.scriptName or self.id or self.findRegex[:40]


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
    """A compiled ``findRegex``: the translated pattern and whether it is global (``g``)."""

    def __init__(self, pattern: Any, *, global_: bool) -> None:
        self.pattern = pattern
        self.global_ = global_

    def replace(self, text: str, substitute: Callable[[Any], str]) -> str:
        """``String.prototype.replace`` with a function, bounded by :data:`MATCH_TIMEOUT_S`."""
        result: str = self.pattern.sub(
            substitute,
            text,
            count=0 if self.global_ else 1,
            timeout=MATCH_TIMEOUT_S,
            concurrent=True,
        )
        return result


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
        translated = translate_js_regex(body, flags)
        compiled = regex.compile(translated, regex.IGNORECASE if "i" in flags else 0)
    except (regex.error, ValueError, OverflowError, RecursionError):
        return None
    return FindRegex(compiled, global_="g" in flags)


_LINE_TERMINATORS = "\\n\\r\\u2028\\u2029"
_DIGIT = "0-9"
_WORD = "A-Za-z0-9_"
_QUANTIFIER = re.compile(r"\{\d+(?:,\d*)?\}")
_ESCAPE_AS_IS = set("nrtvfsS")


def translate_js_regex(pattern: str, flags: str = "") -> str:
    """A JavaScript ``RegExp`` source as an equivalent ``regex``-module pattern.

    Raises ``ValueError`` for what cannot be translated (the script is then skipped).
    """
    dotall = "s" in flags
    multiline = "m" in flags
    unicode = "u" in flags
    out: list[str] = []
    i = 0
    n = len(pattern)
    while i < n:
        char = pattern[i]
        if char == "\\":
            if i + 1 >= n:
                raise ValueError("pattern ends with a backslash")
            piece, i = _escape(pattern, i, in_class=False, unicode=unicode)
            out.append(piece)
        elif char == "[":
            piece, i = _char_class(pattern, i, unicode=unicode)
            out.append(piece)
        elif char == ".":
            out.append("[\\s\\S]" if dotall else f"[^{_LINE_TERMINATORS}]")
            i += 1
        elif char == "^":
            out.append(f"(?:\\A|(?<=[{_LINE_TERMINATORS}]))" if multiline else "\\A")
            i += 1
        elif char == "$":
            out.append(f"(?=[{_LINE_TERMINATORS}]|\\Z)" if multiline else "\\Z")
            i += 1
        elif char == "{":
            quantifier = _QUANTIFIER.match(pattern, i)
            if quantifier and out and out[-1] not in ("(", "|"):
                out.append(quantifier.group(0))
                i = quantifier.end()
            else:
                out.append("\\{")
                i += 1
        elif char == "}":
            out.append("\\}")
            i += 1
        elif (
            char == "("
            and pattern.startswith("(?<", i)
            and not pattern.startswith(("(?<=", "(?<!"), i)
        ):
            close = pattern.find(">", i)
            if close < 0:
                raise ValueError("unterminated group name")
            out.append("(?P<" + pattern[i + 3 : close] + ">")
            i = close + 1
        elif char == "#" or char.isspace():
            out.append(regex.escape(char))
            i += 1
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _escape(pattern: str, i: int, *, in_class: bool, unicode: bool) -> tuple[str, int]:
    """Translate the escape at ``pattern[i]`` (a backslash): the piece and the next index."""
    char = pattern[i + 1]
    after = i + 2
    if char == "d":
        return (_DIGIT if in_class else f"[{_DIGIT}]"), after
    if char == "w":
        return (_WORD if in_class else f"[{_WORD}]"), after
    if char in "DW":
        if in_class:
            raise _NegatedShorthand(char)
        return (f"[^{_DIGIT}]" if char == "D" else f"[^{_WORD}]"), after
    if char in "bB":
        if in_class:
            return ("\\x08" if char == "b" else "B"), after
        return f"(?a:\\{char})", after
    if char in _ESCAPE_AS_IS:
        return "\\" + char, after
    if char == "0" and not (after < len(pattern) and pattern[after].isdigit()):
        return "\\x00", after
    if char.isdigit():
        if in_class:  # an octal escape inside a class
            octal = re.match(r"[0-7]{1,3}", pattern[i + 1 :])
            if octal is None:
                return char, after
            return f"\\u{int(octal.group(0), 8):04x}", i + 1 + octal.end()
        end = after
        while end < len(pattern) and pattern[end].isdigit():
            end += 1
        return f"(?:\\{pattern[i + 1 : end]})", end
    if char == "k" and pattern.startswith("<", after):
        close = pattern.find(">", after)
        if close > 0:
            return f"(?P={pattern[after + 1 : close]})", close + 1
        return "k", after
    if char == "c" and after < len(pattern) and pattern[after].isalpha():
        return f"\\x{ord(pattern[after]) % 32:02x}", after + 1
    if char == "x":
        hex_digits = pattern[after : after + 2]
        if re.fullmatch(r"[0-9A-Fa-f]{2}", hex_digits):
            return "\\x" + hex_digits, after + 2
        return "x", after
    if char == "u":
        braced = re.match(r"\{([0-9A-Fa-f]{1,6})\}", pattern[after:]) if unicode else None
        if braced:
            return f"\\U{int(braced.group(1), 16):08x}", after + braced.end()
        hex_digits = pattern[after : after + 4]
        if re.fullmatch(r"[0-9A-Fa-f]{4}", hex_digits):
            return "\\u" + hex_digits, after + 4
        return "u", after
    if char in "pP" and unicode and pattern.startswith("{", after):
        close = pattern.find("}", after)
        if close < 0:
            raise ValueError("unterminated \\p{...}")
        return pattern[i : close + 1], close + 1
    if char.isalpha():
        return char, after  # an identity escape in JavaScript: \a is just "a"
    return regex.escape(char), after


class _NegatedShorthand(Exception):
    """``\\D``/``\\W`` inside a class: the class needs rewriting as an alternation."""


def _char_class(pattern: str, i: int, *, unicode: bool) -> tuple[str, int]:
    """Translate the class starting at ``pattern[i]`` (``[``)."""
    start = i
    i += 1
    negated = pattern.startswith("^", i)
    if negated:
        i += 1
    if pattern.startswith("]", i):  # [] matches nothing, [^] matches anything
        return ("[\\s\\S]" if negated else "(?!)"), i + 1
    members: list[str] = []
    shorthands: list[str] = []
    while i < len(pattern) and pattern[i] != "]":
        char = pattern[i]
        if char == "\\":
            if i + 1 >= len(pattern):
                raise ValueError("pattern ends with a backslash")
            try:
                piece, i = _escape(pattern, i, in_class=True, unicode=unicode)
            except _NegatedShorthand as negative:
                shorthands.append(str(negative))
                i += 2
                continue
            members.append(piece)
        elif char in "[&~|":
            members.append("\\" + char)
            i += 1
        else:
            members.append(char)
            i += 1
    if i >= len(pattern):
        raise ValueError(f"unterminated character class at {start}")
    body = "".join(members)
    i += 1
    if not shorthands:
        return ("[^" if negated else "[") + body + "]", i
    outside = [f"[^{_DIGIT}]" if s == "D" else f"[^{_WORD}]" for s in shorthands]
    if not negated:
        return "(?:" + "|".join(([f"[{body}]"] if body else []) + outside) + ")", i
    # [^…\D…]: not a listed character and, for each \D / \W, a digit / word character
    inside = [f"(?=[{_DIGIT}])" if s == "D" else f"(?=[{_WORD}])" for s in shorthands]
    return "(?:" + (f"(?![{body}])" if body else "") + "".join(inside) + "[\\s\\S])", i
