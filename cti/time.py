"""Application time: int64 ticks of one microsecond since the Unix epoch, UTC.

``MIN_TIME`` and ``MAX_TIME`` are sentinels (-infinity, +infinity). Arithmetic on them
saturates: infinity minus a delay is still infinity.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

MIN_TIME: int = -(2**63)
MAX_TIME: int = 2**63 - 1
TICK: int = 1
TICKS_PER_SECOND: int = 1_000_000

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

TimeLike = int | datetime
DurationLike = int | timedelta


def to_ticks(value: TimeLike) -> int:
    """A time as ticks. ``datetime`` (naive = UTC) or int ticks; bool and float are refused."""
    if isinstance(value, bool) or value is None:
        raise TypeError(f"expected a datetime or int ticks, got {value!r}")
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        delta = value - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * TICKS_PER_SECOND + delta.microseconds
    if isinstance(value, int):
        if not MIN_TIME <= value <= MAX_TIME:
            raise ValueError(f"time {value} is outside [MIN_TIME, MAX_TIME]")
        return int(value)
    raise TypeError(f"expected a datetime or int ticks, got {type(value).__name__} {value!r}")


def to_duration_ticks(value: DurationLike) -> int:
    """A duration as ticks: ``timedelta`` or int ticks."""
    if isinstance(value, bool) or value is None:
        raise TypeError(f"expected a timedelta or int ticks, got {value!r}")
    if isinstance(value, timedelta):
        return (value.days * 86_400 + value.seconds) * TICKS_PER_SECOND + value.microseconds
    if isinstance(value, int):
        return int(value)
    raise TypeError(f"expected a timedelta or int ticks, got {type(value).__name__} {value!r}")


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
    """A readable form for messages: ``MAX_TIME``, ``MIN_TIME`` or the tick count."""
    if t is None:
        return "null"
    if t == MAX_TIME:
        return "MAX_TIME"
    if t == MIN_TIME:
        return "MIN_TIME"
    return str(t)
