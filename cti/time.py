"""Application time: int64 ticks of one microsecond since the Unix epoch, UTC.

``MIN_TIME`` and ``MAX_TIME`` are sentinels (-infinity, +infinity). Arithmetic on them
saturates: infinity minus a delay is still infinity.

Durations are ``timedelta``, a string such as ``"15s"`` or ``"1h30m"``, or ``ticks(n)``; a bare
number is refused, since nothing says its unit. Times are ``datetime``s with a time zone or int
ticks; a naive ``datetime`` is read in a zone only where one is declared.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import attrs

from cti.errors import InvalidSettingsError

MIN_TIME: int = -(2**63)
MAX_TIME: int = 2**63 - 1
TICK: int = 1
TICKS_PER_SECOND: int = 1_000_000

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _check_count(_inst: Any, _attr: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSettingsError(f"ticks(n) takes an int number of ticks, got {value!r}")


@attrs.frozen
class Ticks:
    """A duration given explicitly in ticks (microseconds): ``ticks(3)``."""

    count: int = attrs.field(validator=_check_count)

    def __neg__(self) -> Ticks:
        return Ticks(-self.count)

    def __repr__(self) -> str:
        return f"ticks({self.count})"


def ticks(n: int) -> Ticks:
    """``n`` ticks (microseconds) as a duration: the explicit way to give one as a number."""
    return Ticks(n)


TimeLike = int | datetime
DurationLike = timedelta | str | Ticks

_UNIT_TICKS = {"d": 86_400 * TICKS_PER_SECOND, "h": 3_600 * TICKS_PER_SECOND,
               "min": 60 * TICKS_PER_SECOND, "m": 60 * TICKS_PER_SECOND,
               "s": TICKS_PER_SECOND, "ms": 1_000, "us": 1, "µs": 1}
_UNIT_ORDER = {"d": 0, "h": 1, "min": 2, "m": 2, "s": 3, "ms": 4, "us": 5, "µs": 5}
_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(min|ms|us|µs|d|h|m|s)(?![a-zA-Zµ])")
_UNITS_HELP = "units d, h, min (or m), s, ms, us; e.g. '15s', '500ms', '1h30m'"


def parse_duration(text: str) -> int:
    """A duration string as ticks: an optional sign, then numbers with units from the largest
    down (``"2d"``, ``"1h30m"``, ``"1.5s"``, ``"-10us"``). Anything else raises ``ValueError``."""
    body = text.strip()
    sign = -1 if body.startswith("-") else 1
    body = body[1:] if body[:1] in "+-" else body
    total, pos, last = 0, 0, -1
    while pos < len(body):
        m = _PART.match(body, pos)
        if m is None:
            raise ValueError(f"{text!r} is not a duration ({_UNITS_HELP})")
        number, unit = m.group(1), m.group(2)
        if _UNIT_ORDER[unit] <= last:
            raise ValueError(f"{text!r} is not a duration: give each unit once, largest first")
        last = _UNIT_ORDER[unit]
        whole, _, frac = number.partition(".")
        scale = _UNIT_TICKS[unit]
        part = int(whole) * scale + int(frac or "0") * scale // 10 ** len(frac)
        if frac and int(frac) * scale % 10 ** len(frac):
            raise ValueError(f"{text!r} is not a whole number of microseconds")
        total += part
        pos = m.end()
        if body[pos:].strip() == "":
            pos = len(body)
    if last < 0:
        raise ValueError(f"{text!r} is not a duration ({_UNITS_HELP})")
    return sign * total


def positive_duration_ticks(value: Any, name: str = "duration") -> int:
    """``to_duration_ticks`` of a duration that must be above 0 (a window's size, a
    trigger's interval): ``InvalidSettingsError`` naming ``name`` otherwise."""
    ticks = to_duration_ticks(value, name)
    if ticks <= 0:
        raise InvalidSettingsError(f"{name} must be positive, got {value!r}")
    return ticks


def to_duration_ticks(value: Any, name: str = "duration") -> int:
    """A duration as ticks: ``timedelta``, a string such as ``"15s"``, ``ticks(n)``, or ``0``.

    Every duration the library takes goes through here. Anything else, a bare number above
    all, raises ``InvalidSettingsError`` naming ``name`` (the parameter) and the value.
    """
    if isinstance(value, timedelta):
        return (value.days * 86_400 + value.seconds) * TICKS_PER_SECOND + value.microseconds
    if isinstance(value, Ticks):
        return value.count
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except ValueError as exc:
            raise InvalidSettingsError(f"{name}: {exc}") from None
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value == 0:
            return 0  # zero is zero in every unit
        as_ticks = f" or ticks({value})" if isinstance(value, int) else ""
        raise InvalidSettingsError(
            f"{name}={value!r}: a bare number is not a duration; write "
            f"timedelta(seconds={value}), '{value}s'{as_ticks}")
    raise InvalidSettingsError(
        f"{name}: expected a duration (a timedelta, a string such as '15s', or ticks(n)), "
        f"got {type(value).__name__} {value!r}")


def to_time_zone(value: Any, where: str = "time_zone") -> tzinfo | None:
    """A time zone: None, a ``tzinfo`` or an IANA name such as ``"Europe/Paris"`` (checked)."""
    if value is None or isinstance(value, tzinfo):
        return value
    if isinstance(value, str) and value:
        try:
            return ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise InvalidSettingsError(
                f"{where}: unknown time zone {value!r}; give an IANA name such as "
                "'Europe/Paris' or 'UTC', or a tzinfo") from None
    raise InvalidSettingsError(f"{where}: a time zone is an IANA name or a tzinfo, got {value!r}")


NAIVE_HINT = ("give it a tzinfo (timezone.utc, ZoneInfo('Europe/Paris')), or declare "
              "Application(time_zone=...) to read naive times in")


def localize(value: datetime, zone: tzinfo | None, where: str = "time",
             hint: str = NAIVE_HINT) -> datetime:
    """``value`` with a time zone: aware datetimes as they are, naive ones read in ``zone``.

    A naive datetime without a zone raises ``ValueError``, as does a wall time that ``zone``
    skips or repeats (a daylight-saving change), which no offset-less text can pin down.
    ``hint`` ends that message: what to do instead, where the time came from.
    """
    if value.tzinfo is not None and value.utcoffset() is not None:
        return value
    if zone is None:
        raise ValueError(f"{where}: naive datetime {value.isoformat()} has no time zone; {hint}")
    aware = value.replace(tzinfo=zone)
    other = value.replace(tzinfo=zone, fold=1 - value.fold)
    if aware.utcoffset() != other.utcoffset():
        raise ValueError(f"{where}: {value.isoformat()} is ambiguous or does not exist in "
                         f"{zone} (a daylight-saving change); give the time with an offset")
    return aware


def to_ticks(value: TimeLike, zone: tzinfo | None = None, where: str = "time",
             hint: str = NAIVE_HINT) -> int:
    """A time as ticks: an aware ``datetime`` (a naive one only with ``zone``) or int ticks;
    bool and float are refused."""
    if isinstance(value, bool) or value is None:
        raise TypeError(f"expected a datetime or int ticks, got {value!r}")
    if isinstance(value, datetime):
        delta = localize(value, zone, where, hint) - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * TICKS_PER_SECOND + delta.microseconds
    if isinstance(value, int):
        if not MIN_TIME <= value <= MAX_TIME:
            raise ValueError(f"time {value} is outside [MIN_TIME, MAX_TIME]")
        return int(value)
    raise TypeError(f"expected a datetime or int ticks, got {type(value).__name__} {value!r}")


def to_datetime(ticks: int) -> datetime:
    """Ticks as an aware UTC datetime; the sentinels map to ``datetime.min``/``max`` (UTC)."""
    if ticks >= MAX_TIME:
        return datetime.max.replace(tzinfo=UTC)
    if ticks <= MIN_TIME:
        return datetime.min.replace(tzinfo=UTC)
    return _EPOCH + timedelta(microseconds=ticks)


def add(t: int, d: int) -> int:
    """``t + d`` saturating at the sentinels; a sentinel stays where it is."""
    if t == MAX_TIME or t == MIN_TIME:
        return t
    r = t + d
    if r >= MAX_TIME:
        return MAX_TIME
    if r <= MIN_TIME:
        return MIN_TIME
    return r


def format_time(t: int | None) -> str:
    """A time as people read it: ISO-8601 in UTC with its offset
    (``2014-09-10T12:01:00+00:00``), ``-infinity``/``+infinity`` for the sentinels, ``null``."""
    if t is None:
        return "null"
    if t == MAX_TIME:
        return "+infinity"
    if t == MIN_TIME:
        return "-infinity"
    try:
        return (_EPOCH + timedelta(microseconds=t)).isoformat()
    except OverflowError:  # beyond datetime's years 1..9999
        return f"{t} ticks"
