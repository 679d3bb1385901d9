"""ISO-8601 time cells of a string column as ticks, column by column.

``iso_ticks`` reads the common form, ``YYYY-MM-DD`` then ``T`` or a space, ``HH:MM``, optional
``:SS`` and a fraction (after ``.`` or ``,``; digits past microseconds cut off, as .NET's seven
are), then ``Z``, an offset ``+HH:MM``/``-HH:MM`` (under a day) or nothing, maybe between spaces
or tabs, with Arrow's regular expressions and numpy arithmetic: the time
``datetime.fromisoformat`` and ``cti.time.to_ticks`` give (``cti.io.files.cells.parse_time``).
A cell in any other form, a date or time out of range, or a naive time without a zone, or one
that the zone skips or repeats, is left to the caller, which reads it (or finds its error) one
by one.
"""

from __future__ import annotations

from datetime import tzinfo
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

_FORM = (r"^[ \t]*(?P<y>[0-9]{4})-(?P<mo>[0-9]{2})-(?P<d>[0-9]{2})[T ]"
         r"(?P<h>[0-9]{2}):(?P<mi>[0-9]{2})(?::(?P<s>[0-9]{2})(?:[.,](?P<f>[0-9]+))?)?"
         r"(?P<z>Z|(?P<sign>[+-])(?P<oh>[0-9]{2}):(?P<om>[0-9]{2}))?[ \t]*$")
_MICROS_PER_DAY = 86_400_000_000
_MONTH_DAYS = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])


def iso_ticks(column: pa.Array | pa.ChunkedArray, zone: tzinfo | None
              ) -> tuple[np.ndarray, np.ndarray]:
    """Each cell's ticks where it is an ISO-8601 time in the common form (module doc), and
    which cells are; the others read 0."""
    n = len(column)
    parts = pc.extract_regex(column, _FORM)
    matched = parts.is_valid().to_numpy(zero_copy_only=False)
    if not matched.any():
        return np.zeros(n, np.int64), np.zeros(n, bool)

    def number(name: str) -> np.ndarray:
        text = pc.struct_field(parts, name).fill_null("0")
        text = pc.if_else(pc.equal(text, ""), "0", text)
        return pc.cast(text, pa.int64()).to_numpy(zero_copy_only=False)

    year, month, day = number("y"), number("mo"), number("d")
    hour, minute, second = number("h"), number("mi"), number("s")
    fraction = pc.utf8_rpad(pc.utf8_slice_codeunits(  # (digits past the 6th cut off)
        pc.struct_field(parts, "f").fill_null(""), 0, 6), 6, "0")
    micros = pc.cast(fraction, pa.int64()).to_numpy(zero_copy_only=False)
    zoned = pc.struct_field(parts, "z").fill_null("")
    offset_hours, offset_minutes = number("oh"), number("om")
    sign = np.where(pc.equal(pc.struct_field(parts, "sign").fill_null(""), "-")
                    .to_numpy(zero_copy_only=False), -1, 1)
    month_days = _MONTH_DAYS[np.clip(month, 0, 12)] + ((month == 2) & _leap(year))
    ok = matched & (year >= 1) & (month >= 1) & (month <= 12) & (day >= 1) & \
        (day <= month_days) & (hour <= 23) & (minute <= 59) & (second <= 59) & \
        (offset_hours * 60 + offset_minutes < 1440)
    local = _days(np.where(ok, year, 1970), np.where(ok, month, 1), np.where(ok, day, 1)) \
        * _MICROS_PER_DAY + ((hour * 60 + minute) * 60 + second) * 1_000_000 + micros
    ticks = local - sign * (offset_hours * 60 + offset_minutes) * 60_000_000
    naive = ok & (zoned.to_numpy(zero_copy_only=False) == "")
    if naive.any():
        if zone is None:
            ok &= ~naive
        else:
            at = np.flatnonzero(naive)
            utc, known = _in_zone(local[at], zone)
            ticks[at] = utc
            ok[at] = known
    return np.where(ok, ticks, 0), ok


def _leap(year: np.ndarray) -> np.ndarray:
    return (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))


def _days(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of proleptic Gregorian dates (Howard Hinnant's days_from_civil)."""
    y = year - (month <= 2)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    doy = (153 * (month + np.where(month > 2, -3, 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468


def _in_zone(local: np.ndarray, zone: tzinfo) -> tuple[np.ndarray, np.ndarray]:
    """Naive wall times (ticks as if UTC) read in ``zone``, and which ones it pins down: a
    wall time the zone skips or repeats (a daylight-saving change) is not, nor one outside
    the years 1800-2199 (pandas' time zone conversion overflows near year 1)."""
    inside = (local >= _FROM) & (local < _UNTIL)
    wall = pd.DatetimeIndex(np.where(inside, local, 0).astype("datetime64[us]"))
    aware: Any = wall.tz_localize(zone, ambiguous="NaT", nonexistent="NaT")
    known = ~np.asarray(aware.isna()) & inside
    utc = aware.tz_convert("UTC").tz_localize(None).as_unit("us").asi8
    return np.where(known, utc, 0), known


_FROM = -5_364_662_400_000_000  # 1800-01-01, in ticks
_UNTIL = 7_258_118_400_000_000  # 2200-01-01
