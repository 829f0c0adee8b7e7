"""Dates as moment.js writes them: format patterns and "humanized" durations, in English.

SillyTavern's time macros hand their argument to moment.js: ``{{datetimeformat::YYYY-MM-DD
HH:mm}}`` uses moment's format tokens and ``{{idle_duration}}`` its ``humanize()`` ("a few
seconds", "2 hours", "a month"). Cards written for it expect those exact strings, so this
module reads the same token set (``[text]`` kept literally, ``\\`` before a token keeps it,
``L``/``LL``/``LT``… the English locale's formats) and rounds durations with moment's
thresholds. Anything that is not a token is written as it is.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta

__all__ = ["format_moment", "humanize"]

_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
# JavaScript's getDay() order: Sunday is 0
_DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_DAYS_MIN = ("Su", "Mo", "Tu", "We", "Th", "Fr", "Sa")

_LOCALE_FORMATS = {
    "LTS": "h:mm:ss A",
    "LT": "h:mm A",
    "LLLL": "dddd, MMMM D, YYYY h:mm A",
    "LLL": "MMMM D, YYYY h:mm A",
    "LL": "MMMM D, YYYY",
    "L": "MM/DD/YYYY",
    "llll": "ddd, MMM D, YYYY h:mm A",
    "lll": "MMM D, YYYY h:mm A",
    "ll": "MMM D, YYYY",
    "l": "M/D/YYYY",
}


def _ordinal(number: int) -> str:
    """English ordinals as moment writes them: 1st, 2nd, 3rd, 4th, 11th, 12th, 13th."""
    if number % 100 in (11, 12, 13):
        return f"{number}th"
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def _pad(number: int, width: int) -> str:
    sign = "-" if number < 0 else ""
    return sign + str(abs(number)).zfill(width)


def _js_weekday(day: date) -> int:
    return (day.weekday() + 1) % 7


def _week_one(year: int, first_day: int, anchor: int) -> date:
    """The first day of week 1: the week (starting on ``first_day``, 0 = Sunday) holding
    January ``anchor`` (the 1st for English weeks, the 4th for ISO weeks)."""
    held = date(year, 1, anchor)
    return held - timedelta(days=(_js_weekday(held) - first_day) % 7)


def _week(day: date, first_day: int, anchor: int) -> tuple[int, int]:
    """(week-year, week number) of ``day``."""
    start = _week_one(day.year, first_day, anchor)
    if day < start:
        start = _week_one(day.year - 1, first_day, anchor)
        return day.year - 1, (day - start).days // 7 + 1
    following = _week_one(day.year + 1, first_day, anchor)
    if day >= following:
        return day.year + 1, 1
    return day.year, (day - start).days // 7 + 1


def _english_week(moment: datetime) -> tuple[int, int]:
    return _week(moment.date(), 0, 1)


def _iso_week(moment: datetime) -> tuple[int, int]:
    return _week(moment.date(), 1, 4)


def _offset(moment: datetime, separator: str) -> str:
    aware = moment if moment.tzinfo is not None else moment.astimezone()
    delta = aware.utcoffset() or timedelta(0)
    minutes = int(delta.total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    hours, rest = divmod(abs(minutes), 60)
    return f"{sign}{hours:02d}{separator}{rest:02d}"


def _epoch_ms(moment: datetime) -> int:
    aware = moment if moment.tzinfo is not None else moment.astimezone()
    return math.floor(aware.astimezone(UTC).timestamp() * 1000)


def _fraction(digits: int) -> Callable[[datetime], str]:
    def write(moment: datetime) -> str:
        milliseconds = moment.microsecond // 1000
        # moment keeps milliseconds only: S is tenths, SS hundredths, SSSS… pad with zeros
        if digits <= 3:
            return str(milliseconds // 10 ** (3 - digits)).zfill(digits)
        return str(milliseconds).zfill(3) + "0" * (digits - 3)

    return write


def _hour12(moment: datetime) -> int:
    return moment.hour % 12 or 12


_TOKENS: dict[str, Callable[[datetime], str]] = {
    "YYYYYY": lambda m: ("-" if m.year < 0 else "+") + str(abs(m.year)).zfill(6),
    "YYYYY": lambda m: _pad(m.year, 5),
    "YYYY": lambda m: _pad(m.year, 4),
    "YY": lambda m: _pad(m.year % 100, 2),
    "Y": lambda m: _pad(m.year, 4) if m.year <= 9999 else f"+{m.year}",
    "yyyy": lambda m: _pad(m.year, 4),
    "yyy": lambda m: _pad(m.year, 3),
    "yy": lambda m: _pad(m.year % 100, 2),
    "yo": lambda m: _ordinal(m.year),
    "y": lambda m: str(m.year),
    "NNNNN": lambda _m: "AD",
    "NNNN": lambda _m: "Anno Domini",
    "NNN": lambda _m: "AD",
    "NN": lambda _m: "AD",
    "N": lambda _m: "AD",
    "Qo": lambda m: _ordinal((m.month - 1) // 3 + 1),
    "Q": lambda m: str((m.month - 1) // 3 + 1),
    "MMMM": lambda m: _MONTHS[m.month - 1],
    "MMM": lambda m: _MONTHS[m.month - 1][:3],
    "MM": lambda m: f"{m.month:02d}",
    "Mo": lambda m: _ordinal(m.month),
    "M": lambda m: str(m.month),
    "DDDD": lambda m: f"{m.timetuple().tm_yday:03d}",
    "DDDo": lambda m: _ordinal(m.timetuple().tm_yday),
    "DDD": lambda m: str(m.timetuple().tm_yday),
    "DD": lambda m: f"{m.day:02d}",
    "Do": lambda m: _ordinal(m.day),
    "D": lambda m: str(m.day),
    "dddd": lambda m: _DAYS[_js_weekday(m.date())],
    "ddd": lambda m: _DAYS[_js_weekday(m.date())][:3],
    "dd": lambda m: _DAYS_MIN[_js_weekday(m.date())],
    "do": lambda m: _ordinal(_js_weekday(m.date())),
    "d": lambda m: str(_js_weekday(m.date())),
    "e": lambda m: str(_js_weekday(m.date())),  # English weeks start on Sunday
    "E": lambda m: str(m.isoweekday()),
    "wo": lambda m: _ordinal(_english_week(m)[1]),
    "ww": lambda m: f"{_english_week(m)[1]:02d}",
    "w": lambda m: str(_english_week(m)[1]),
    "Wo": lambda m: _ordinal(_iso_week(m)[1]),
    "WW": lambda m: f"{_iso_week(m)[1]:02d}",
    "W": lambda m: str(_iso_week(m)[1]),
    "ggggg": lambda m: _pad(_english_week(m)[0], 5),
    "gggg": lambda m: _pad(_english_week(m)[0], 4),
    "gg": lambda m: _pad(_english_week(m)[0] % 100, 2),
    "GGGGG": lambda m: _pad(_iso_week(m)[0], 5),
    "GGGG": lambda m: _pad(_iso_week(m)[0], 4),
    "GG": lambda m: _pad(_iso_week(m)[0] % 100, 2),
    "Hmmss": lambda m: f"{m.hour}{m.minute:02d}{m.second:02d}",
    "Hmm": lambda m: f"{m.hour}{m.minute:02d}",
    "hmmss": lambda m: f"{_hour12(m)}{m.minute:02d}{m.second:02d}",
    "hmm": lambda m: f"{_hour12(m)}{m.minute:02d}",
    "A": lambda m: "AM" if m.hour < 12 else "PM",
    "a": lambda m: "am" if m.hour < 12 else "pm",
    "HH": lambda m: f"{m.hour:02d}",
    "H": lambda m: str(m.hour),
    "hh": lambda m: f"{_hour12(m):02d}",
    "h": lambda m: str(_hour12(m)),
    "kk": lambda m: f"{m.hour or 24:02d}",
    "k": lambda m: str(m.hour or 24),
    "mm": lambda m: f"{m.minute:02d}",
    "m": lambda m: str(m.minute),
    "ss": lambda m: f"{m.second:02d}",
    "s": lambda m: str(m.second),
    **{"S" * n: _fraction(n) for n in range(1, 10)},
    "X": lambda m: str(_epoch_ms(m) // 1000),
    "x": lambda m: str(_epoch_ms(m)),
    "ZZ": lambda m: _offset(m, ""),
    "Z": lambda m: _offset(m, ":"),
    # time zone names need moment-timezone; plain moment writes nothing
    "zz": lambda _m: "",
    "z": lambda _m: "",
}
_BY_LENGTH = sorted(_TOKENS, key=len, reverse=True)
_LOCALE_BY_LENGTH = sorted(_LOCALE_FORMATS, key=len, reverse=True)


def _expand_locale_formats(pattern: str) -> str:
    """``LL`` → ``MMMM D, YYYY`` and so on, leaving ``[literal]`` parts alone."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "[":
            end = pattern.find("]", i + 1)
            if end >= 0 and "[" not in pattern[i + 1 : end]:
                out.append(pattern[i : end + 1])
                i = end + 1
                continue
        if char == "\\" and i + 1 < len(pattern):
            out.append(pattern[i : i + 2])
            i += 2
            continue
        found = next((name for name in _LOCALE_BY_LENGTH if pattern.startswith(name, i)), None)
        if found is not None:
            out.append(_LOCALE_FORMATS[found])
            i += len(found)
        else:
            out.append(char)
            i += 1
    return "".join(out)


def format_moment(moment: datetime, pattern: str) -> str:
    """``moment.format(pattern)`` in moment's English locale."""
    pattern = _expand_locale_formats(pattern)
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "[":
            end = pattern.find("]", i + 1)
            if end >= 0 and "[" not in pattern[i + 1 : end]:
                out.append(pattern[i + 1 : end])
                i = end + 1
                continue
        escaped = char == "\\"
        start = i + 1 if escaped else i
        found = next((name for name in _BY_LENGTH if pattern.startswith(name, start)), None)
        if found is None:
            out.append(pattern[start : start + 1] if escaped else char)
            i = start + 1
        elif escaped:
            out.append(found)  # a backslash keeps the token as written
            i = start + len(found)
        else:
            out.append(_TOKENS[found](moment))
            i += len(found)
    return "".join(out)


def _js_round(value: float) -> int:
    return math.floor(value + 0.5)


def humanize(delta: timedelta) -> str:
    """``moment.duration(delta).humanize()`` in English: "a few seconds", "3 hours"…"""
    seconds_exact = abs(delta.total_seconds())
    days_exact = seconds_exact / 86400
    months_exact = days_exact * 4800 / 146097  # moment's days-to-months ratio
    seconds = _js_round(seconds_exact)
    minutes = _js_round(seconds_exact / 60)
    hours = _js_round(seconds_exact / 3600)
    days = _js_round(days_exact)
    months = _js_round(months_exact)
    years = _js_round(months_exact / 12)
    if seconds <= 44:
        return "a few seconds"
    if minutes <= 1:
        return "a minute"
    if minutes < 45:
        return f"{minutes} minutes"
    if hours <= 1:
        return "an hour"
    if hours < 22:
        return f"{hours} hours"
    if days <= 1:
        return "a day"
    if days < 26:
        return f"{days} days"
    if months <= 1:
        return "a month"
    if months < 11:
        return f"{months} months"
    if years <= 1:
        return "a year"
    return f"{years} years"
