"""One cell of a record, read as the row-by-row path reads it: a time (``parse_time``: int
ticks or ISO-8601), a CTI marker (``_flag``), a missing value (``_missing``). A cell that
cannot be read raises ``_RowError``, whose message names the column and the rule."""

from __future__ import annotations

import re
from datetime import datetime, tzinfo
from typing import Any

from cti.time import to_ticks

_NAIVE_HINT = ("write it with an offset (such as +02:00 or Z), or declare "
               "Application(time_zone=...) or the config's time_zone to read such times in")
_INT = re.compile(r"[+-]?\d+")
_TRUE = frozenset({"1", "true", "yes", "y", "cti"})
_FALSE = frozenset({"", "0", "false", "no", "n"})


class _RowError(Exception):
    """Why a record is not an event (becomes an InvalidInput reason)."""


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def parse_time(value: Any, time_format: str | None, column: str,
               zone: tzinfo | None = None) -> int:
    """A time cell as ticks; raises ``_RowError`` naming the column and the rule."""
    if _missing(value):
        raise _RowError(f"{column} is missing or null (rule: no null timestamps)")
    if isinstance(value, bool):
        raise _RowError(f"{column} {value!r} is not a time (rule: timestamps must parse)")
    if isinstance(value, int):
        if time_format == "iso":
            raise _RowError(f"{column} {value!r} is not an ISO-8601 string "
                            "(rule: time_format 'iso')")
        return _ticks(value, column)
    if isinstance(value, str):
        text = value.strip()
        if time_format != "iso" and _INT.fullmatch(text):
            return _ticks(int(text), column)
        if time_format == "ticks":
            raise _RowError(f"{column} {value!r} is not int ticks (rule: time_format 'ticks')")
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError as exc:
            raise _RowError(f"{column} {value!r} is not an ISO-8601 time ({exc}) "
                            "(rule: timestamps must parse)") from None
        try:
            return to_ticks(parsed, zone, column, _NAIVE_HINT)
        except ValueError as exc:
            raise _RowError(f"{exc} (rule: times with a time zone)") from None
    raise _RowError(f"{column} {value!r} ({type(value).__name__}) is not a time; give an "
                    "ISO-8601 string or int ticks (rule: timestamps must parse)")


def _ticks(value: int, column: str) -> int:
    try:
        return to_ticks(value)
    except ValueError as exc:
        raise _RowError(f"{column} {value}: {exc} (rule: times within range)") from None


def _flag(value: Any, column: str) -> bool:
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        if value in (0, 1):
            return bool(value)
    elif isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise _RowError(f"{column} {value!r} is neither true nor false (rule: CTI marker)")
