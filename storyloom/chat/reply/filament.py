"""Filament (seed 001 §2): the streaming parser for what the model writes back.

A reply arrives as a stream of text deltas that may hold ``<thought>`` (folded away),
``<state_update>`` (changes to the chat variables), ``<reply>`` (what the user reads),
an MVU card's ``<UpdateVariable><JSONPatch>`` and any tags the user configured. The
parser turns the deltas into events as they arrive, so the visible reply streams to the
page while the rest is routed elsewhere, and into a :class:`FilamentResult` at the end.

The rules, and why:

* **Strict whitelist, no escapes.** Only the known tag names are tags; every other ``<``
  (``1 < 2``, ``<b>``, ``<div class=x>``, ``<!-- comments -->``) is text, and content is
  raw text. Names match exactly as whitelisted, except MVU's, which match in any case.
  Models write HTML, maths and angle brackets all the time; an XML parser would eat them.
* **Held back only while it can still be a tag.** A ``<`` at the end of a delta is held
  until it either completes a whitelisted tag or cannot become one any more, then it is
  text. Only that small pending piece is ever rescanned, so feeding a long reply in tiny
  deltas stays linear.
* **Split anywhere.** A tag, a ``[PROGRESS]`` marker or a closing tag split across deltas
  at any position parses exactly as in one piece: every decision depends only on the
  text, never on where a delta ended.
* **Truncation is normal.** At :meth:`FilamentParser.close` unclosed tags auto-close
  (``auto_closed=True``), an incomplete tag is text, and an unclosed update block still
  applies what it holds.
* **Text outside any tag is reply text** (models often omit ``<reply>``). The reply is
  stripped; streamed reply events never start with whitespace and hold trailing
  whitespace back until more visible text follows, so the reply events concatenated are
  exactly :attr:`FilamentResult.reply`.
* **A stray closing tag** (a whitelisted name that is not open) is dropped and recorded
  as a problem: showing ``</reply>`` to the user helps nobody.
* **Update blocks are captured, then decoded.** Inside ``<state_update>`` /
  ``<UpdateVariable>`` / ``<JSONPatch>`` the text is collected until the block closes (or
  a reply/thought tag opens, which closes it with a problem: a forgotten closing tag must
  not swallow the reply) and decoded into :class:`StateOp` values. Malformed updates
  become problems; they never raise and never touch reply text.

Update vocabulary: ``<state_update>`` op tags or JSON, and the MVU framework's
``<UpdateVariable>`` / ``<JSONPatch>`` blocks with paths relative to MVU's ``stat_data``
(:attr:`FilamentTags.mvu_root`); their decoders are in :mod:`.update_blocks`.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from typing import Final, Literal

from storyloom.chat.reply.state_ops import StateOp
from storyloom.chat.reply.update_blocks import (
    MVU_ROOT,
    decode_json_patch,
    decode_state_update,
    decode_update_variable,
)

PROGRESS_MARKER: Final = "[PROGRESS]"

REPLY: Final = "reply"
THOUGHT: Final = "thought"
STATE_UPDATE: Final = "state_update"
PROGRESS: Final = "progress"
UPDATE_VARIABLE: Final = "UpdateVariable"
JSON_PATCH: Final = "JSONPatch"

_BUILTIN: Final = frozenset({REPLY, THOUGHT, STATE_UPDATE, PROGRESS, UPDATE_VARIABLE, JSON_PATCH})

# a tag longer than this is text: bounds what a stray "<" can hold back
MAX_TAG_LENGTH: Final = 256

FilamentEventKind = Literal["reply", "thought", "tag_text", "open", "close", "update", "progress"]

_TAG_NAME = re.compile(r"[\w:.\-]+")
_NAME_CHARS = re.compile(r"[\w:.\-]*")
_SPACE = re.compile(r"\s*")
_ATTR_NAME = re.compile(r"[A-Za-z_:][\w:.\-]*")
_UNQUOTED = re.compile(r"[^\s\"'<>=`/]+")
_MARKER = re.compile(re.escape(PROGRESS_MARKER), re.IGNORECASE | re.ASCII)


@dataclass(frozen=True)
class FilamentTags:
    """Which tags a parser knows besides the built-in ones.

    ``extra``: more tag names whose text is captured under ``FilamentResult.tags[name]``
    (streamed as ``tag_text`` events, not part of the reply). ``hidden``: tags whose
    text is thought (streamed as ``thought`` events, gathered in ``FilamentResult.thought``;
    ``thought`` itself always is). A name that is also built in keeps its built-in role
    and is not captured under ``tags``.
    ``mvu_root``: the JSON Pointer MVU paths are relative to (MVU keeps a card's
    variables under ``stat_data``, and its prompts show that object to the model).
    """

    extra: tuple[str, ...] = ()
    hidden: tuple[str, ...] = (THOUGHT,)
    mvu_root: str = MVU_ROOT

    def __post_init__(self) -> None:
        for name in (*self.extra, *self.hidden):
            if not isinstance(name, str) or not _TAG_NAME.fullmatch(name):
                raise ValueError(f"tag name {name!r} is not usable: letters, digits, _ : . - only")
        if self.mvu_root and not self.mvu_root.startswith("/"):
            raise ValueError(f"mvu_root {self.mvu_root!r} must be a JSON Pointer ('/...')")


DEFAULT_TAGS: Final = FilamentTags()


@dataclass(frozen=True)
class FilamentEvent:
    """One thing the parser saw. ``reply`` events carry visible text, ready to show."""

    kind: FilamentEventKind
    text: str = ""
    tag: str = ""
    auto_closed: bool = False
    ops: tuple[StateOp, ...] = ()
    problems: tuple[str, ...] = ()


@dataclass
class FilamentResult:
    """Everything a finished (or truncated) reply said."""

    reply: str
    thought: str
    ops: list[StateOp]
    progress: bool
    problems: list[str]
    tags: dict[str, str]
    raw: str


# tag kinds
_K_REPLY: Final = 0
_K_HIDDEN: Final = 1
_K_EXTRA: Final = 2
_K_PROGRESS: Final = 3
_K_CAPTURE: Final = 4

# scan results
_PARTIAL: Final = 0
_NOT_TAG: Final = 1
_TAG: Final = 2


@dataclass
class _Open:
    """An open tag on the parser's stack."""

    name: str  # canonical name
    kind: int
    parts: list[str] = field(default_factory=list)  # the text collected inside


@dataclass
class _Scan:
    status: int
    end: int = 0
    name: str = ""
    closing: bool = False
    self_closing: bool = False


_NOT_A_TAG: Final = _Scan(_NOT_TAG)
_NEED_MORE: Final = _Scan(_PARTIAL)


def _skip(pattern: re.Pattern[str], text: str, pos: int) -> int:
    """Where a run of ``pattern`` (which may match empty) starting at ``pos`` ends."""
    m = pattern.match(text, pos)
    return m.end() if m is not None else pos


class FilamentParser:
    """Feed the deltas of one reply; read events as they come and the result at the end."""

    def __init__(self, tags: FilamentTags | None = None) -> None:
        self._config = tags or DEFAULT_TAGS
        kinds: dict[str, int] = {}
        for name in self._config.extra:
            kinds[name] = _K_EXTRA
        for name in self._config.hidden:
            kinds[name] = _K_HIDDEN
        kinds[REPLY] = _K_REPLY
        kinds[PROGRESS] = _K_PROGRESS
        kinds[THOUGHT] = _K_HIDDEN
        kinds[STATE_UPDATE] = _K_CAPTURE
        kinds[UPDATE_VARIABLE] = _K_CAPTURE
        kinds[JSON_PATCH] = _K_CAPTURE
        self._kinds = kinds
        self._extra = frozenset(self._config.extra) - _BUILTIN
        # MVU's names are matched in any case (cards and MVU's own regex do so)
        self._folded = {UPDATE_VARIABLE.lower(): UPDATE_VARIABLE, JSON_PATCH.lower(): JSON_PATCH}
        self._folded["json_patch"] = JSON_PATCH
        self._prefixes = {name[:i] for name in kinds for i in range(1, len(name) + 1)}
        self._folded_prefixes = {name[:i] for name in self._folded for i in range(1, len(name) + 1)}

        self._raw: list[str] = []
        self._pending = ""
        self._stack: list[_Open] = []
        self._mode = _K_REPLY
        self._top: _Open | None = None
        self._closed = False
        # reply streaming state
        self._reply: list[str] = []
        self._started = False
        self._space = ""  # trailing whitespace held back
        self._marker = ""  # a possible start of [PROGRESS] held back
        # gathered
        self._thoughts: list[_Open] = []
        self._extras: list[_Open] = []
        self._ops: list[StateOp] = []
        self._problems: list[str] = []
        self._progress = False

    # -- public ---------------------------------------------------------------------------

    def feed(self, chunk: str) -> list[FilamentEvent]:
        """Parse the next delta; return what it completed."""
        if self._closed:
            raise RuntimeError("this FilamentParser is closed; start a new one per reply")
        events: list[FilamentEvent] = []
        if not chunk:
            return events
        self._raw.append(chunk)
        if self._pending:
            text = self._pending + chunk
            self._pending = ""
        else:
            text = chunk
        if "<" not in text:
            if self._mode == _K_REPLY:
                self._reply_text(text, events)
            else:
                self._text(text, events)
        else:
            self._scan(text, events, final=False)
        return events

    def close(self) -> list[FilamentEvent]:
        """End of stream: flush what was held back and auto-close what is open."""
        events: list[FilamentEvent] = []
        if self._closed:
            return events
        self._closed = True
        if self._pending:
            text, self._pending = self._pending, ""
            self._scan(text, events, final=True)
        self._flush_marker(events)
        while self._stack:
            self._pop(events, auto=True)
        self._space = ""
        return events

    @property
    def result(self) -> FilamentResult:
        """The reply so far (final once :meth:`close` ran)."""
        thought = _join_blocks(self._thoughts)
        tags: dict[str, str] = {}
        for name in self._config.extra:
            blocks = [block for block in self._extras if block.name == name]
            if blocks:
                tags[name] = _join_blocks(blocks)
        return FilamentResult(
            reply="".join(self._reply),
            thought=thought,
            ops=list(self._ops),
            progress=self._progress,
            problems=list(self._problems),
            tags=tags,
            raw="".join(self._raw),
        )

    # -- scanning -------------------------------------------------------------------------

    def _scan(self, text: str, events: list[FilamentEvent], *, final: bool) -> None:
        """Route ``text``: tags to :meth:`_tag`, the text between them in one piece each."""
        pos = 0  # where to look for the next "<"
        start = 0  # the text not yet routed starts here
        while True:
            lt = text.find("<", pos)
            if lt < 0:
                break
            scan = self._match(text, lt)
            if scan.status == _PARTIAL and not final:
                if lt > start:
                    self._text(text[start:lt], events)
                self._pending = text[lt:]
                return
            if scan.status != _TAG:
                pos = lt + 1
                continue
            if lt > start:
                self._text(text[start:lt], events)
            self._tag(scan, events)
            pos = start = scan.end
        if start < len(text):
            self._text(text[start:], events)

    def _lookup(self, name: str) -> str | None:
        if name in self._kinds:
            return name
        return self._folded.get(name.lower())

    def _is_prefix(self, name: str) -> bool:
        return not name or name in self._prefixes or name.lower() in self._folded_prefixes

    def _match(self, text: str, start: int) -> _Scan:
        """Is there a whitelisted tag at ``text[start]`` (a ``<``)?"""
        n = len(text)
        pos = start + 1
        if pos == n:
            return _NEED_MORE
        closing = text[pos] == "/"
        if closing:
            pos += 1
        name_end = _skip(_NAME_CHARS, text, pos)
        name = text[pos:name_end]
        if name_end == n:
            if self._is_prefix(name) and n - start <= MAX_TAG_LENGTH:
                return _NEED_MORE
            return _NOT_A_TAG
        canon = self._lookup(name)
        if canon is None or not self._allowed(canon, closing):
            return _NOT_A_TAG
        pos = name_end
        if closing:
            pos = _skip(_SPACE, text, pos)
            if pos == n:
                return _NEED_MORE if n - start <= MAX_TAG_LENGTH else _NOT_A_TAG
            if text[pos] != ">" or pos + 1 - start > MAX_TAG_LENGTH:
                return _NOT_A_TAG
            return _Scan(_TAG, pos + 1, canon, closing=True)
        return self._match_attributes(text, start, pos, canon)

    def _match_attributes(self, text: str, start: int, pos: int, canon: str) -> _Scan:
        """The rest of an opening tag: ``( name="v" | name='v' | name=v )* /? >``."""
        n = len(text)
        while True:
            spaced = _skip(_SPACE, text, pos)
            if spaced - start > MAX_TAG_LENGTH:
                return _NOT_A_TAG
            if spaced == n:
                return _NEED_MORE
            ch = text[spaced]
            if ch == ">":
                return _Scan(_TAG, spaced + 1, canon)
            if ch == "/":
                if spaced + 1 == n:
                    return _NEED_MORE
                if text[spaced + 1] != ">":
                    return _NOT_A_TAG
                return _Scan(_TAG, spaced + 2, canon, self_closing=True)
            if spaced == pos:  # attributes must be separated by whitespace
                return _NOT_A_TAG
            m = _ATTR_NAME.match(text, spaced)
            if m is None:
                return _NOT_A_TAG
            pos = _skip(_SPACE, text, m.end())
            if pos == n:
                return _NEED_MORE if n - start <= MAX_TAG_LENGTH else _NOT_A_TAG
            if text[pos] != "=":
                return _NOT_A_TAG
            pos = _skip(_SPACE, text, pos + 1)
            if pos == n:
                return _NEED_MORE if n - start <= MAX_TAG_LENGTH else _NOT_A_TAG
            quote = text[pos]
            if quote in "\"'":
                close = text.find(quote, pos + 1)
                if close < 0:
                    return _NEED_MORE if n - start <= MAX_TAG_LENGTH else _NOT_A_TAG
                pos = close + 1
            else:
                m = _UNQUOTED.match(text, pos)
                if m is None:
                    return _NOT_A_TAG
                pos = m.end()
            if pos - start > MAX_TAG_LENGTH:
                return _NOT_A_TAG

    def _allowed(self, canon: str, closing: bool) -> bool:
        """Whether ``canon`` is a tag here: inside an update block only its own closing
        tag, the tags that close it early and the closing tags of what encloses it are."""
        top = self._top
        if top is None or top.kind != _K_CAPTURE:
            return True
        if closing:
            return canon == top.name or any(entry.name == canon for entry in self._stack)
        # MVU's JSONPatch is part of its UpdateVariable block
        return not (top.name == UPDATE_VARIABLE and canon == JSON_PATCH)

    # -- tags -----------------------------------------------------------------------------

    def _tag(self, scan: _Scan, events: list[FilamentEvent]) -> None:
        self._flush_marker(events)
        top = self._top
        if scan.closing:
            if not any(entry.name == scan.name for entry in self._stack):
                self._problems.append(f"</{scan.name}> without an open <{scan.name}> ignored")
                return
            while self._top is not None and self._top.name != scan.name:
                self._pop(events, auto=True)
            self._pop(events, auto=False)
            return
        if top is not None and top.kind == _K_CAPTURE:
            # a forgotten closing tag must not swallow what follows
            self._problems.append(f"<{top.name}> was not closed before <{scan.name}>")
            self._pop(events, auto=True, problem=False)
        self._push(scan.name, events)
        if scan.self_closing:
            self._pop(events, auto=False)

    def _push(self, name: str, events: list[FilamentEvent]) -> None:
        entry = _Open(name, self._kinds[name])
        self._stack.append(entry)
        if entry.kind == _K_HIDDEN:
            self._thoughts.append(entry)
        if name in self._extra:
            self._extras.append(entry)
        self._set_mode()
        events.append(FilamentEvent("open", tag=name))

    def _pop(self, events: list[FilamentEvent], *, auto: bool, problem: bool = True) -> None:
        entry = self._stack.pop()
        self._set_mode()
        events.append(FilamentEvent("close", tag=entry.name, auto_closed=auto))
        if entry.kind == _K_PROGRESS:
            said = "".join(entry.parts).strip().lower()
            if said not in ("false", "no", "0", "none"):
                self._mark_progress(events)
        elif entry.kind == _K_CAPTURE:
            ops, problems = self._decode(entry.name, "".join(entry.parts))
            if auto and problem:
                problems.insert(0, f"<{entry.name}> was not closed; applied what it held")
            self._ops.extend(ops)
            self._problems.extend(problems)
            events.append(
                FilamentEvent("update", tag=entry.name, ops=tuple(ops), problems=tuple(problems))
            )

    def _decode(self, name: str, content: str) -> tuple[list[StateOp], list[str]]:
        try:
            if name == STATE_UPDATE:
                return decode_state_update(content)
            if name == UPDATE_VARIABLE:
                return decode_update_variable(content, self._config.mvu_root)
            return decode_json_patch(content, self._config.mvu_root)
        except Exception as exc:  # the model wrote it: a decoder bug must not end the turn
            return [], [f"<{name}> could not be read: {type(exc).__name__}: {exc}"]

    def _set_mode(self) -> None:
        """Where text goes now: decided by the innermost tag that routes text."""
        self._top = self._stack[-1] if self._stack else None
        self._mode = self._top.kind if self._top is not None else _K_REPLY

    # -- text -----------------------------------------------------------------------------

    def _text(self, text: str, events: list[FilamentEvent]) -> None:
        mode = self._mode
        if mode == _K_REPLY:
            self._reply_text(text, events)
            return
        top = self._top
        assert top is not None
        top.parts.append(text)
        if mode == _K_HIDDEN:
            events.append(_text_event("thought", text, top.name))
        elif mode == _K_EXTRA:
            events.append(_text_event("tag_text", text, top.name))

    def _reply_text(self, text: str, events: list[FilamentEvent]) -> None:
        if self._marker:
            text = self._marker + text
            self._marker = ""
        if "[" in text:
            text = self._strip_markers(text, events)
        if not self._started:
            text = text.lstrip()
            if not text:
                return
            self._started = True
        elif not text:
            return
        if self._space:
            text = self._space + text
        if text[-1].isspace():
            body = text.rstrip()
            self._space = text[len(body) :]
            if not body:
                return
        else:
            body = text
            self._space = ""
        self._reply.append(body)
        events.append(_text_event("reply", body, ""))

    def _strip_markers(self, text: str, events: list[FilamentEvent]) -> str:
        """Remove ``[PROGRESS]`` (any case) and hold back a tail that may still become one.

        Equivalent to one regex substitution over the whole reply text: text before a
        removed marker is final, so removing a marker never creates a new one.
        """
        after = 0
        if _MARKER.search(text) is not None:
            pieces = _MARKER.split(text)
            text = "".join(pieces)
            after = len(text) - len(pieces[-1])
            self._mark_progress(events)
        tail = text.rfind("[", max(after, len(text) - len(PROGRESS_MARKER) + 1))
        if tail >= 0 and PROGRESS_MARKER.startswith(text[tail:].upper()):
            self._marker = text[tail:]
            text = text[:tail]
        return text

    def _flush_marker(self, events: list[FilamentEvent]) -> None:
        """A held ``[PRO…`` that a tag or the end interrupted is plain reply text."""
        if self._marker:
            held, self._marker = self._marker, ""
            self._reply_text_plain(held, events)

    def _reply_text_plain(self, text: str, events: list[FilamentEvent]) -> None:
        if not self._started:
            text = text.lstrip()
            if not text:
                return
            self._started = True
        text = self._space + text
        body = text.rstrip()
        self._space = text[len(body) :]
        if body:
            self._reply.append(body)
            events.append(_text_event("reply", body, ""))

    def _mark_progress(self, events: list[FilamentEvent]) -> None:
        if not self._progress:
            self._progress = True
            events.append(FilamentEvent("progress"))


_new_event = object.__new__


def _text_event(kind: FilamentEventKind, text: str, tag: str) -> FilamentEvent:
    """A text event without the frozen dataclass ``__init__`` (about 1.5 µs, three times
    this): one is made per delta, and a 2,000-delta reply must parse in a few ms. The
    fields left out read their defaults from the class, as dataclass fields do."""
    event: FilamentEvent = _new_event(FilamentEvent)
    fields = event.__dict__
    fields["kind"] = kind
    fields["text"] = text
    if tag:
        fields["tag"] = tag
    return event


def parse_filament(text: str, tags: FilamentTags | None = None) -> FilamentResult:
    """Parse a whole reply at once (the same result as streaming it)."""
    parser = FilamentParser(tags)
    parser.feed(text)
    parser.close()
    return parser.result


def _join_blocks(blocks: list[_Open]) -> str:
    texts = (textwrap.dedent("".join(block.parts)).strip() for block in blocks)
    return "\n\n".join(text for text in texts if text)
