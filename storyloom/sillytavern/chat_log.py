"""SillyTavern chats: ``.jsonl`` files, one JSON object a line.

The first line is a header: the legacy one (``user_name``, ``character_name``,
``create_date``, ``chat_metadata``) or the modern one, whose ``chat_metadata`` carries an
``integrity`` id and whose names are ``"unused"``. Every other line is a message: ``name``,
``is_user``, ``is_system``, ``send_date``, ``mes``, and optionally ``swipes``, ``swipe_id``,
``swipe_info``, ``extra`` (``api``, ``model``, ``reasoning``...), ``gen_started``,
``gen_finished``, ``force_avatar`` and whatever extensions add.

SillyTavern writes each line with ``JSON.stringify`` (no spaces, non-ASCII as is) and joins
them with ``\\n``, no newline at the end. :func:`export_chat_jsonl` writes the same way
and keeps each object's keys in the order they were read, so an imported chat comes back
byte for byte.

``send_date`` has had several forms: humanised ("September 19, 2024 8:03pm"), ISO 8601
("2026-07-12T05:59:53.290Z"), epoch milliseconds, and SillyTavern's own
"2024-09-19@20h03m29s"; :func:`parse_send_date` reads them all and the field keeps the
form it had.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from storyloom.core.errors import FieldProblem, FileFormatError, field_path
from storyloom.sillytavern.untrusted_json import UntrustedJsonError, loads_untrusted

DateValue = str | int | float | None
HEADER_KEYS = frozenset({"user_name", "character_name", "create_date", "chat_metadata"})
UNUSED_NAME = "unused"


class _Line(BaseModel):
    """One JSONL object; remembers its key order so it is written back the same way."""

    model_config = ConfigDict(extra="allow")

    _key_order: list[str] | None = PrivateAttr(default=None)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Self:
        """The line read from a file (its key order is kept for writing it back)."""
        line = cls.model_validate(obj)
        line._key_order = list(obj.keys())
        return line

    def to_json(self, *, blank: frozenset[str] = frozenset()) -> dict[str, Any]:
        """The line's object: read keys in their order, then keys set since; a line made
        in storyloom gets every field that is not None. The ``blank`` keys it has keep
        their place with None as their value, and are not serialised at all (an
        importer that keeps a message's text elsewhere saves the work on each line)."""
        # Read where pydantic keeps it: ``self._key_order`` looks for a descriptor on the
        # class first, which costs an exception per line.
        order: list[str] | None = (self.__pydantic_private__ or {}).get("_key_order")
        present = self.model_fields_set
        if (
            order is not None
            and blank
            and not self.__pydantic_extra__
            and len(present) == len(order)
            and all(key in blank or key in _SCALAR_FIELDS for key in order)
        ):
            # Every key it has was read, and each one's value is a JSON scalar (a str,
            # bool, number or None: what serialising it would give back) or blanked.
            values = self.__dict__
            return {key: None if key in blank else values[key] for key in order}
        if order is None or any(k in present and k not in order for k in blank):
            if order is None:
                made: dict[str, Any] = self.model_dump(mode="json", exclude_none=True)
            else:
                dumped = self.model_dump(mode="json", exclude_unset=True)
                made = {key: dumped.pop(key) for key in order if key in dumped}
                made.update(dumped)
            return {k: (None if k in blank else v) for k, v in made.items()}
        dumped = self.model_dump(mode="json", exclude_unset=True, exclude=set(blank) or None)
        out: dict[str, Any] = {}
        for key in order:
            if key in blank:
                if key in present:
                    out[key] = None
            elif key in dumped:
                out[key] = dumped.pop(key)
        out.update(dumped)
        return out


_SCALAR_FIELDS = frozenset(
    {"name", "is_user", "is_system", "send_date", "swipe_id", "gen_started", "gen_finished",
     "force_avatar"}
)  # fmt: skip
"""The :class:`ChatMessage` fields whose values are JSON scalars."""


class ChatHeader(_Line):
    user_name: str | None = None
    character_name: str | None = None
    create_date: DateValue = None
    chat_metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def integrity(self) -> str | None:
        """The modern header's chat id, used by SillyTavern to refuse stale overwrites."""
        value = self.chat_metadata.get("integrity")
        return value if isinstance(value, str) else None

    @property
    def is_modern(self) -> bool:
        return self.integrity is not None


class ChatMessage(_Line):
    name: str = ""
    is_user: bool = False
    is_system: bool = False
    send_date: DateValue = None
    mes: str = ""
    swipes: list[str] | None = None
    swipe_id: int | None = None
    swipe_info: list[dict[str, Any]] | None = None
    extra: dict[str, Any] = Field(default_factory=dict)
    gen_started: DateValue = None
    gen_finished: DateValue = None
    force_avatar: str | None = None

    @property
    def model(self) -> str | None:
        """The model that wrote this message (``extra.model``), if recorded."""
        value = self.extra.get("model")
        return value if isinstance(value, str) else None

    @property
    def reasoning(self) -> str | None:
        value = self.extra.get("reasoning")
        return value if isinstance(value, str) else None

    @property
    def sent_at(self) -> datetime | None:
        return parse_send_date(self.send_date)


class ChatLog(BaseModel):
    """A whole chat: the header line (None when the file has none) and the messages."""

    model_config = ConfigDict(extra="allow")

    header: ChatHeader | None = None
    messages: list[ChatMessage] = Field(default_factory=list)

    @property
    def user_name(self) -> str | None:
        if self.header and self.header.user_name not in (None, "", UNUSED_NAME):
            return self.header.user_name
        return next((m.name for m in self.messages if m.is_user and m.name), None)

    @property
    def character_name(self) -> str | None:
        if self.header and self.header.character_name not in (None, "", UNUSED_NAME):
            return self.header.character_name
        return next(
            (m.name for m in self.messages if not m.is_user and not m.is_system and m.name), None
        )


def _is_header(obj: dict[str, Any]) -> bool:
    return "mes" not in obj and bool(HEADER_KEYS & obj.keys())


def parse_chat_jsonl(text: str, path: Path | str) -> ChatLog:
    """A chat from the text of a ``.jsonl`` file; any bad line refuses the whole file."""
    path = Path(path)
    header: ChatHeader | None = None
    messages: list[ChatMessage] = []
    problems: list[FieldProblem] = []
    first = True
    for number, line in enumerate(text.removeprefix("\ufeff").split("\n"), start=1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            obj = loads_untrusted(line)
        except UntrustedJsonError as exc:
            spot = f"{where}.{exc.where}" if exc.where else where
            problems.append(FieldProblem(spot, exc.reason))
            first = False
            continue
        if not isinstance(obj, dict):
            problems.append(FieldProblem(where, "must be a JSON object"))
            first = False
            continue
        try:
            if first and _is_header(obj):
                header = ChatHeader.from_json(obj)
            else:
                messages.append(ChatMessage.from_json(obj))
        except ValidationError as exc:
            for err in exc.errors():
                problems.append(
                    FieldProblem(f"{where}.{field_path(tuple(err['loc']))}", str(err["msg"]))
                )
        first = False
    if problems:
        raise FileFormatError(path, problems)
    if header is None and not messages:
        raise FileFormatError(path, [FieldProblem("", "empty: no header and no messages")])
    return ChatLog(header=header, messages=messages)


def parse_chat_header(data: bytes) -> ChatHeader | None:
    """The header of a chat file from its first line alone (``data`` is the file's bytes;
    only that line is decoded and parsed): a move-in orders checkpoints after their main
    chat before it parses any chat whole. None when the chat has no header, or its first
    line does not read: the whole file's parse names that problem."""
    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    while True:
        end = data.find(b"\n", start)
        raw = data[start:] if end < 0 else data[start:end]
        if raw.strip() or end < 0:
            break
        start = end + 1
    try:
        obj = loads_untrusted(raw.decode("utf-8").rstrip("\r"))
        if isinstance(obj, dict) and _is_header(obj):
            return ChatHeader.from_json(obj)
    except (UnicodeDecodeError, UntrustedJsonError, ValidationError):
        pass
    return None


def dump_line(obj: Any) -> str:
    """One line as SillyTavern's ``JSON.stringify`` writes it."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def export_chat_jsonl(chat: ChatLog) -> str:
    """The chat as SillyTavern's ``.jsonl``: lines joined by ``\\n``, none at the end."""
    lines = [dump_line(chat.header.to_json())] if chat.header is not None else []
    lines.extend(dump_line(message.to_json()) for message in chat.messages)
    return "\n".join(lines)


_HUMANISED = re.compile(
    r"^(?P<month>[A-Za-z]+) (?P<day>\d{1,2}), (?P<year>\d{4}) "
    r"(?P<hour>\d{1,2}):(?P<minute>\d{2}) ?(?P<ampm>[AaPp][Mm])$"
)
_ST_STAMP = re.compile(
    r"^(?P<year>\d{4})-(?P<month>\d{1,2})-(?P<day>\d{1,2}) ?@(?P<hour>\d{1,2})h ?"
    r"(?P<minute>\d{1,2})m ?(?P<second>\d{1,2})s(?: ?(?P<ms>\d{1,3})ms)?$"
)
_MONTHS = {
    name: index
    for index, name in enumerate(
        [
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ],
        start=1,
    )
}


_MONTH_PREFIXES = {
    name[:size]: number for name, number in _MONTHS.items() for size in range(3, len(name) + 1)
}
"""Every month name and each of its prefixes of three letters or more (none is two
months'): "sep", "sept", "september"."""


def parse_send_date(value: Any) -> datetime | None:
    """A ``send_date``/``create_date`` as a datetime, or None when it cannot be read.

    Epoch numbers and ISO strings with an offset or ``Z`` give aware datetimes; the
    humanised and ``@`` forms were written in the user's local time and give naive ones.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        seconds = value / 1000 if abs(value) > 1e11 else value
        try:
            return datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text[:1].isdigit() and "@" not in text:
        # Neither the humanised form (it starts with the month) nor SillyTavern's own
        # (it has an "@"): ISO 8601 or nothing, without trying both patterns first.
        try:
            return datetime.fromisoformat(text)
        except ValueError:
            return None
    match = _HUMANISED.match(text)
    if match:
        word = match["month"].lower()
        month = _MONTH_PREFIXES.get(word, 0)
        if len(word) < 3 or not month:
            return None
        hour = int(match["hour"]) % 12 + (12 if match["ampm"].lower() == "pm" else 0)
        try:
            return datetime(
                int(match["year"]), month, int(match["day"]), hour, int(match["minute"])
            )
        except ValueError:
            return None
    match = _ST_STAMP.match(text)
    if match:
        try:
            return datetime(
                int(match["year"]),
                int(match["month"]),
                int(match["day"]),
                int(match["hour"]),
                int(match["minute"]),
                int(match["second"]),
                int(match["ms"] or 0) * 1000,
            )
        except ValueError:
            return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed
