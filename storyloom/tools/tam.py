"""Tavern Action Manifest (TAM, seed 003 §5): tool calls written as text by a model.

A call is a block::

    <|[REQUEST_TOOL]|>
    command:「始」kb:Query「末」
    query:「始」the dragon's name「末」
    <|[END_TOOL]|>

Everything between ``「始」`` and the next ``「末」`` is the value, verbatim: newlines,
code, JSON and XML need no escaping. The seed leaves several things open; they are
decided here (``docs/tools.md`` repeats them for plugin and prompt authors).

Keys
    A key starts a line inside the block (spaces and tabs before it are allowed), or
    follows the ``「末」`` of the previous value, or the start marker. It is a word
    (letters, digits, ``_``, ``-``, ``.``; not starting with a digit), then ``:`` (or the
    full-width ``：``), then ``「始」``. Every other line inside a block (``# 步骤 1``
    comments, blank lines, stray prose) is ignored. ``command`` is recognised case- and
    underscore-insensitively (``Command``, ``COMMAND_1``); the tool id is its value with
    surrounding whitespace removed. Every other value is kept verbatim, under the key as
    written. Matching those keys to a tool's parameters (again case- and
    underscore-insensitively) happens at dispatch:
    :func:`storyloom.tools.tool_manager.match_arguments`.
What a value cannot hold
    ``「末」`` (it ends the value) and ``<|[END_TOOL]|>``: when the end marker comes
    before the value's ``「末」``, the ``「末」`` is missing, and the block is a problem.
Chains
    ``command1``, ``command2``… make a chained block: each key's trailing number (an
    ``_`` before it belongs to the suffix) names its step, and the key is reported
    without it (``filePath2`` → ``filePath`` of step 2). Where a key ends in digits of
    its own (``line21``), the longest suffix that names a command of the block wins.
    Calls run in the order of their numbers; gaps are allowed. In a block with a plain
    ``command`` nothing is stripped (``line2`` stays ``line2``). Mixing ``command`` with
    ``commandN``, a number used twice, a key whose number names no command, and a key
    given twice (case- and underscore-insensitively) are problems.
Several blocks
    All of them run, in the order they appear. ``step`` numbers calls across the whole
    output, from 1, in execution order (in one chained block numbered 1..N, step = N).
    ``TamCall.block`` (not serialised) is the index of the call's block: when a step of
    a chain fails, the agent loop skips the later calls of that block (and reports
    them as ``skipped``); other blocks still run.
All or nothing
    A block with any problem runs none of its calls: a missing ``「末」``, a missing
    ``<|[END_TOOL]|>`` (a new start marker or the end of the output comes first), no
    ``command``, an empty tool id, or a key problem above. A truncated value never runs.
Not a call
    A start marker is text, never executed, when it is inside a fenced code block
    (```` ``` ```` or ``~~~``, CommonMark rules: up to three spaces of indent, closed by a
    line of at least as many of the same character; the opening line counts as inside),
    inside inline code (an opening backtick run earlier on its line is not closed before
    it), on a quoted line (first non-space character ``>``), or right after an opening
    quotation mark (``“ ‘ 「 『 « " ' ＂``, only spaces or tabs between). Such a marker is
    reported as a problem when a ``key:「始」`` follows it (before an end marker, the
    next start marker or the end of the output); a marker that is merely mentioned
    (no key follows) gives no problem. Likewise a start marker in running text without
    any key and without an end marker is a mention: no call, no problem. A start and an
    end marker with nothing callable between them is a block without ``command``.
Text
    ``text`` is the output with every *executed* block removed; blocks that did not run
    stay, verbatim, so nothing the model wrote silently disappears. Where blocks were
    removed, the whitespace around them (the run before, between and after) is replaced
    by the one run among them with the most newlines (the first on a tie), or by
    nothing at the start or the end of the text. Whitespace elsewhere is untouched.
Offsets
    Code points from the start of the output: a call's offset is its command key's, a
    problem's the place it concerns.
Results
    :func:`format_tam_results` writes what is fed back to the model, one
    ``<|[TOOL_RESULT]|>`` block per call (tool, step, status, then the result or the
    error); the format is documented in :mod:`storyloom.workflow.tool_results`, which
    writes it for the agent loop and the chat alike.

Everything here is incremental: :class:`TamScanner` decides a piece of text only once
the characters after it cannot change the decision, so :func:`parse_tam` and the
streaming filter (:mod:`storyloom.tools.tam_stream`) share one code path and agree.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from storyloom.workflow.tool_results import ToolResultText, format_tool_results

START = "<|[REQUEST_TOOL]|>"
END = "<|[END_TOOL]|>"
OPEN = "「始」"
CLOSE = "「末」"

OPENING_QUOTES = frozenset("“‘「『«\"'＂")

_KEY = re.compile(r"(?P<key>[^\W\d][\w.\-]*)[ \t]*[:：][ \t]*" + OPEN)
_COMMAND = re.compile(r"command(?P<n>\d*)")
_TRAILING_DIGITS = re.compile(r"(?P<sep>_?)(?P<digits>\d+)$")
_FENCE_OPEN = re.compile(r" {0,3}(?P<run>`{3,}|~{3,})")
_QUOTE_LINE = re.compile(r"[ \t]{0,3}>")
_BACKTICKS = re.compile(r"`+")
_NON_SPACE = re.compile(r"\S")
_QUOTE_PREFIX = re.compile(r"^[ \t]{0,3}>[ \t]?", re.MULTILINE)
QUOTED_LINE = "on a quoted line (>)"


class TamCall(BaseModel):
    """One call that would be executed."""

    tool: str
    arguments: dict[str, str]
    step: int = Field(description="1-based position in execution order over the output")
    offset: int = Field(exclude=True, description="Where its command key starts")
    block: int = Field(0, exclude=True, description="0-based index of its executed block")


class TamProblem(BaseModel):
    message: str
    offset: int


class TamParse(BaseModel):
    calls: list[TamCall]
    text: str
    problems: list[TamProblem]

    def blocks(self) -> list[list[TamCall]]:
        """The calls grouped by block, in order: a failed step skips the rest of its group."""
        groups: dict[int, list[TamCall]] = {}
        for call in self.calls:
            groups.setdefault(call.block, []).append(call)
        return list(groups.values())


TamResult = ToolResultText
"""The outcome of one call as fed back to the model: tool, status (ok, error, denied,
skipped), result, error, step."""


# --- one block ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Pair:
    key: str
    value: str
    offset: int


@dataclass(frozen=True)
class _RawBlock:
    """What follows a start marker, up to where the block ends."""

    end: int
    ending: Literal["end", "restart", "eof"]
    """Closed by its end marker; cut short by another start marker; the output ended."""
    pairs: tuple[_Pair, ...]
    open_value: _Pair | None = None
    """A value whose ``「末」`` never came (its value is what there was)."""

    @property
    def callable_looking(self) -> bool:
        return bool(self.pairs) or self.open_value is not None


def _scan_block(text: str, start: int, final: bool) -> _RawBlock | None:
    """Reads the block whose start marker is at ``start``; None until more text decides."""
    n = len(text)
    p = start + len(START)
    pairs: list[_Pair] = []
    while True:
        while p < n and text[p] in " \t":
            p += 1
        if p >= n:
            return _RawBlock(n, "eof", tuple(pairs)) if final else None
        if text.startswith(END, p):
            return _RawBlock(p + len(END), "end", tuple(pairs))
        if text.startswith(START, p):
            return _RawBlock(p, "restart", tuple(pairs))
        key = _KEY.match(text, p)
        if key is not None:
            value_start = key.end()
            close = text.find(CLOSE, value_start)
            end = text.find(END, value_start)
            if end != -1 and (close == -1 or end < close):
                pair = _Pair(key["key"], text[value_start:end], p)
                return _RawBlock(end + len(END), "end", tuple(pairs), pair)
            if close == -1:
                if not final:
                    return None
                return _RawBlock(n, "eof", tuple(pairs), _Pair(key["key"], text[value_start:], p))
            pairs.append(_Pair(key["key"], text[value_start:close], p))
            p = close + len(CLOSE)
            continue
        # Not a key: the rest of the line is ignored, unless a marker ends the block in it.
        newline = text.find("\n", p)
        line_end = n if newline == -1 else newline
        end = text.find(END, p, line_end)
        restart = text.find(START, p, line_end)
        if restart != -1 and (end == -1 or restart < end):
            return _RawBlock(restart, "restart", tuple(pairs))
        if end != -1:
            return _RawBlock(end + len(END), "end", tuple(pairs))
        if newline == -1:
            return _RawBlock(n, "eof", tuple(pairs)) if final else None
        p = newline + 1


def _normal(key: str) -> str:
    return key.lower().replace("_", "")


def _block_calls(
    raw: _RawBlock, start: int
) -> tuple[list[tuple[str, dict[str, str], int]], list[TamProblem]]:
    """The calls of a closed block (tool, arguments, offset), in order, or its problems."""
    if raw.open_value is not None:
        pair = raw.open_value
        where = "before <|[END_TOOL]|>" if raw.ending == "end" else "(the output ended)"
        return [], [
            TamProblem(
                message=f"the value of `{pair.key}` has no 「末」 {where}: "
                "the block was not executed",
                offset=pair.offset,
            )
        ]
    if raw.ending != "end":
        cause = "another tool block starts" if raw.ending == "restart" else "the output ends"
        return [], [
            TamProblem(
                message=f"the tool block has no <|[END_TOOL]|> before {cause}: it was not executed",
                offset=start,
            )
        ]
    commands: dict[int | None, _Pair] = {}
    problems: list[TamProblem] = []
    for pair in raw.pairs:
        match = _COMMAND.fullmatch(_normal(pair.key))
        if match is None:
            continue
        number = int(match["n"]) if match["n"] else None
        if number in commands:
            problems.append(
                TamProblem(message=f"`{pair.key}` is given twice in one block", offset=pair.offset)
            )
        commands[number] = pair
    if not commands:
        return [], [
            TamProblem(
                message="the tool block has no `command` (command:「始」tool id「末」): "
                "it was not executed",
                offset=start,
            )
        ]
    chained = None not in commands
    if not chained and len(commands) > 1:
        problems.append(
            TamProblem(
                message="the tool block mixes `command` with numbered `commandN` keys",
                offset=start,
            )
        )
    arguments: dict[int | None, dict[str, str]] = {number: {} for number in commands}
    seen: dict[int | None, set[str]] = {number: set() for number in commands}
    for pair in raw.pairs:
        if _COMMAND.fullmatch(_normal(pair.key)) is not None:
            continue
        number = None
        name = pair.key
        if chained:
            split = _split_step(pair.key, commands)
            if split is None:
                problems.append(
                    TamProblem(
                        message=f"`{pair.key}` names no step: in a chained block every key "
                        "ends in the number of its commandN",
                        offset=pair.offset,
                    )
                )
                continue
            name, number = split
        if number not in arguments:
            continue
        if _normal(name) in seen[number]:
            problems.append(
                TamProblem(message=f"`{pair.key}` is given twice in one call", offset=pair.offset)
            )
            continue
        seen[number].add(_normal(name))
        arguments[number][name] = pair.value
    for pair in commands.values():
        if not pair.value.strip():
            problems.append(TamProblem(message=f"`{pair.key}` names no tool", offset=pair.offset))
    if problems:
        problems.append(
            TamProblem(message="the tool block was not executed", offset=start),
        )
        return [], problems
    order = sorted(commands, key=lambda number: number or 0)
    return [
        (commands[number].value.strip(), arguments[number], commands[number].offset)
        for number in order
    ], []


def _split_step(key: str, commands: dict[int | None, _Pair]) -> tuple[str, int] | None:
    match = _TRAILING_DIGITS.search(key)
    if match is None:
        return None
    digits = match["digits"]
    for cut in range(len(digits)):
        suffix = digits[cut:]
        number = int(suffix)
        if number not in commands:
            continue
        name = key[: len(key) - len(suffix)]
        if cut == 0 and match["sep"]:
            name = name[:-1]
        if name:
            return name, number
    return None


# --- the scanner ----------------------------------------------------------------------


@dataclass(frozen=True)
class TextEvent:
    text: str


@dataclass(frozen=True)
class BlockEvent:
    """A block read to its end. Executed blocks disappear from the text; others stay."""

    offset: int
    raw: str
    calls: list[tuple[str, dict[str, str], int]]
    problems: list[TamProblem]

    @property
    def executed(self) -> bool:
        return bool(self.calls)


@dataclass(frozen=True)
class IgnoredMarkerEvent:
    """A start marker in a place where a call is not executed (fence, quote...)."""

    offset: int
    reason: str


ScanEvent = TextEvent | BlockEvent | IgnoredMarkerEvent


@dataclass
class TamScanner:
    """Splits an output, as it arrives, into text and tool blocks.

    ``feed`` returns the events the text so far decides; the rest waits (a possible
    start marker, a block until its end). ``finish`` decides what is left.
    """

    _buf: str = ""
    _base: int = 0
    _in_block: bool = False
    _fence: tuple[str, int] | None = None
    _line: str = ""
    _line_fresh: bool = True
    """The current line began at a real line start (not right after a block)."""
    _done: bool = field(default=False, repr=False)

    @property
    def in_block(self) -> bool:
        """A start marker has been seen and its block is being held back."""
        return self._in_block

    def feed(self, chunk: str) -> list[ScanEvent]:
        return self._scan(chunk, final=False)

    def finish(self) -> list[ScanEvent]:
        return self._scan("", final=True)

    def _scan(self, chunk: str, final: bool) -> list[ScanEvent]:
        if self._done:
            raise RuntimeError("the scanner has finished")
        self._done = final
        buf = self._buf + chunk
        events: list[ScanEvent] = []
        text: list[str] = []

        def flush_text() -> None:
            joined = "".join(text)
            if joined:
                events.append(TextEvent(joined))
            text.clear()

        p = 0
        n = len(buf)
        while p < n:
            if self._in_block:
                raw = _scan_block(buf, p, final)
                if raw is None:
                    break
                flush_text()
                events.append(self._block_event(buf, p, raw))
                p = raw.end
                self._in_block = False
                self._line = ""
                self._line_fresh = False
                continue
            newline = buf.find("\n", p)
            line_end = n if newline == -1 else newline
            marker = buf.find(START, p, line_end)
            if marker != -1:
                before = buf[p:marker]
                text.append(before)
                self._line += before
                reason = self._not_executed_reason()
                if reason is None:
                    self._in_block = True
                    p = marker
                    continue
                flush_text()
                events.append(IgnoredMarkerEvent(self._base + marker, reason))
                text.append(START)
                self._line += START
                p = marker + len(START)
                continue
            if newline != -1:
                text.append(buf[p : newline + 1])
                self._line += buf[p:newline]
                self._end_line()
                p = newline + 1
                continue
            rest = buf[p:]
            keep = 0 if final else _partial_marker(rest)
            shown = rest[: len(rest) - keep]
            text.append(shown)
            self._line += shown
            p += len(shown)
            break
        flush_text()
        self._buf = buf[p:]
        self._base += p
        return events

    def _block_event(self, buf: str, start: int, raw: _RawBlock) -> BlockEvent:
        offset = self._base + start
        shift = self._base
        local = _RawBlock(
            raw.end,
            raw.ending,
            tuple(_Pair(x.key, x.value, x.offset + shift) for x in raw.pairs),
            None
            if raw.open_value is None
            else _Pair(raw.open_value.key, raw.open_value.value, raw.open_value.offset + shift),
        )
        calls, problems = _block_calls(local, offset)
        if raw.ending != "end" and not raw.callable_looking:
            problems = []  # a start marker merely mentioned
        return BlockEvent(offset, buf[start : raw.end], calls, problems)

    def _not_executed_reason(self) -> str | None:
        line = self._line
        if self._fence is not None or (self._line_fresh and _FENCE_OPEN.match(line)):
            return "inside a code fence"
        if self._line_fresh and _QUOTE_LINE.match(line):
            return QUOTED_LINE
        if _open_inline_code(line):
            return "inside inline code"
        stripped = line.rstrip(" \t")
        if stripped and stripped[-1] in OPENING_QUOTES:
            return "inside quotation marks"
        return None

    def _end_line(self) -> None:
        line = self._line.removesuffix("\r")
        if self._line_fresh:
            if self._fence is None:
                opening = _FENCE_OPEN.match(line)
                if opening is not None:
                    run = opening["run"]
                    self._fence = (run[0], len(run))
            else:
                char, length = self._fence
                closing = re.fullmatch(r" {0,3}(?P<run>" + re.escape(char) + r"+)[ \t]*", line)
                if closing is not None and len(closing["run"]) >= length:
                    self._fence = None
        self._line = ""
        self._line_fresh = True


def _partial_marker(text: str) -> int:
    """How many characters at the end of ``text`` could begin a start marker."""
    for size in range(min(len(START) - 1, len(text)), 0, -1):
        if text.endswith(START[:size]):
            return size
    return 0


def _open_inline_code(line: str) -> bool:
    opened = 0
    for run in _BACKTICKS.finditer(line):
        size = len(run.group())
        if opened == 0:
            opened = size
        elif size == opened:
            opened = 0
    return opened != 0


# --- the text that stays ---------------------------------------------------------------


@dataclass
class TextJoiner:
    """Joins the text around removed blocks, tidying only the whitespace that touches them.

    Holds back a trailing whitespace run until the next visible character (or the end)
    says whether a removed block touches it.
    """

    _gap: list[str] = field(default_factory=lambda: [""])
    _removed: bool = False
    _seen_text: bool = False

    def text(self, text: str) -> str:
        first = _NON_SPACE.search(text)
        if first is None:
            self._gap[-1] += text
            return ""
        self._gap[-1] += text[: first.start()]
        body_end = len(text.rstrip())
        out = self._resolve(at_end=False) + text[first.start() : body_end]
        self._seen_text = True
        self._gap = [text[body_end:]]
        self._removed = False
        return out

    def removed(self) -> None:
        self._gap.append("")
        self._removed = True

    def finish(self) -> str:
        out = self._resolve(at_end=True)
        self._gap = [""]
        self._removed = False
        return out

    def _resolve(self, at_end: bool) -> str:
        if not self._removed:
            return "".join(self._gap)
        if at_end or not self._seen_text:
            return ""
        return max(self._gap, key=lambda run: run.count("\n"))


def visible_text(events: Iterable[ScanEvent], joiner: TextJoiner) -> str:
    """What of ``events`` a reader sees: text, blocks that did not run, no executed block."""
    out: list[str] = []
    for event in events:
        if isinstance(event, TextEvent):
            out.append(joiner.text(event.text))
        elif isinstance(event, BlockEvent):
            if event.executed:
                joiner.removed()
            else:
                out.append(joiner.text(event.raw))
    return "".join(out)


# --- the public functions ---------------------------------------------------------------


def parse_tam(output: str) -> TamParse:
    """The calls ``output`` asks for (exactly what would be executed, in order), the text
    left once they are removed, and the problems found. Needs no tool registry."""
    scanner = TamScanner()
    events = scanner.feed(output) + scanner.finish()
    joiner = TextJoiner()
    text = visible_text(events, joiner) + joiner.finish()
    calls: list[TamCall] = []
    problems: list[TamProblem] = []
    block = 0
    for event in events:
        if isinstance(event, BlockEvent):
            problems.extend(event.problems)
            if not event.executed:
                continue
            for tool, arguments, offset in event.calls:
                calls.append(
                    TamCall(
                        tool=tool,
                        arguments=arguments,
                        step=len(calls) + 1,
                        offset=offset,
                        block=block,
                    )
                )
            block += 1
        elif isinstance(event, IgnoredMarkerEvent):
            rest = output[event.offset :]
            if event.reason == QUOTED_LINE:
                rest = _QUOTE_PREFIX.sub("", rest)
            ahead = _scan_block(rest, 0, final=True)
            if ahead is not None and ahead.callable_looking:
                problems.append(
                    TamProblem(
                        message=f"a tool block {event.reason} is not executed",
                        offset=event.offset,
                    )
                )
    return TamParse(calls=calls, text=text, problems=problems)


def format_tam_results(
    results: Sequence[TamResult | tuple[str, bool, Any, str | None]],
) -> str:
    """The results of a round's calls as the model reads them, one block per call, in order
    (the format: :mod:`storyloom.workflow.tool_results`, which the chat shares).

    A 4-tuple ``(tool, ok, result, error)`` is read as status ``ok`` or ``error``.
    """
    return format_tool_results(
        [
            item
            if isinstance(item, TamResult)
            else TamResult(item[0], "ok" if item[1] else "error", item[2], item[3])
            for item in results
        ]
    )
